"""Transformer Engine's four context-parallel implementations (Megatron-Core `--cp-comm-type`).

Megatron-Core hands attention with CP > 1 to TransformerEngine's `attn_forward_func_with_cp`
(megatron/core/extensions/transformer_engine.py @266f1c9, core_v0.17.1: `cp_comm_type` "p2p"
unless the config names another; "a2a+p2p" passes the two hierarchical CP groups). Which
implementation runs decides what moves and what hides
(transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py at TE v2.8,
40c69e7, the release that first carries TE PR 2125, which the Model Zoo's long-context runs
require; the same structure at v2.7):

- **p2p** (`AttnFuncWithCPAndKVP2P`, L1056-): cp steps per attention. Load-balanced causal
  split ("DualChunkSwap", L3643-3647): each rank holds chunks r and 2cp-1-r of 2cp. Step 0 runs
  the local causal block (Q 2c x KV 2c), steps i <= rank the "lower-triangle" block (Q 2c x
  the first KV chunk c, unmasked), steps i > rank the "upper-triangle" block (the second Q
  chunk c x KV 2c, unmasked) (L1432-1518, `cp_p2p_fwd_prepare_qkv` L477-593): every step the
  same 2c^2 scores, a kernel meeting c keys per query (2c in upper-triangle steps). Forward
  (L1356-1373): step i waits for its KV block, posts the send/recv of block i+1, then runs its
  kernel: cp-1 KV exchanges, each hidden behind one step's kernel. Backward (L2071-2106,
  L2313-2315): cp steps; step 0 sends KV, steps 1..cp-2 send KV and the accumulated dKV
  together (one buffer of two KV sizes, BF16 for a BF16 run, L2003-2007), the last step sends
  dKV only, and each step waits for its exchange after its own kernel: per step 1, 2, ..., 2, 1
  KV sizes (2(cp-1) in all, ops.CP_BWD_BYTES_FACTOR) against one step's backward kernel.
- **all_gather** (`AttnFuncWithCPAndKVAllGather`, L2555-; "KV all-gather between CP ranks is
  exposed", Llama 3 section 3.3.2): K and V all-gathered before the kernels (L2660-2661),
  again in the backward (L2848-2849), and dK, dV reduce-scattered after it (L3009-3010), all
  on the compute stream's critical path. Two kernels per rank, one per local query chunk,
  each over every key before the chunk's end: a query meets s/2 keys on average, as without
  CP.
- **a2a** (`AttnFuncWithCPAndQKVOA2A`, L3041-; DeepSpeed-Ulysses): Q, K and V all-to-all'd
  from local tokens to heads / cp (`flash_attn_a2a_communicate`, L261-326: the compute stream
  waits for them), one kernel over the whole sequence, the output all-to-all'd back; the
  backward all-to-alls dO, then dQ, dK, dV. Heads and K/V heads per TP rank must divide by cp
  ("The number of attention heads needs to be divisible by CP size!", L3135-3137): K/V are sent
  at their own head count, not repeated (`ExecutionSpec.ulysses_repeat_kv` False) — Seer's
  `cp_algorithm: ulysses` (ulysses.py).
- **a2a+p2p** (hierarchical, LongVILA/USP; `AttnFuncWithCPAndKVP2P` with a list of two groups,
  L1106-1118, L1185-1193, L1673-1677): an all-to-all over the first level's ranks (Megatron
  `--hierarchical-context-parallel-sizes a b`: a adjacent CP ranks, parallel_state.
  `create_hierarchical_groups`), then the p2p ring over the b ranks of the second level on
  heads / a; TE falls back to plain p2p when a = 1 and to a2a when b = 1 (L3702-3717).

TE also refuses MLA with a2a or all_gather (L3748-3751); `megatron_cli` checks it.

`cp_algorithm` values: ring (p2p), all_gather, ulysses (a2a), hierarchical (a2a+p2p, with
`cp_a2a_size` = a).
"""

from __future__ import annotations

import re

from starfabric.astral.seer.statements import negated_at

CP_COMM_TYPES = ("p2p", "all_gather", "a2a", "a2a+p2p")
"""TransformerEngine's `cp_comm_type` values (`attn_forward_func_with_cp`, TE v2.8)."""
ALGORITHM = {"p2p": "ring", "all_gather": "all_gather", "a2a": "ulysses",
             "a2a+p2p": "hierarchical"}  # fmt: skip
"""Seer's `ExecutionSpec.cp_algorithm` for each TE `cp_comm_type`."""


def cp_levels(algorithm: str, cp: int, a2a_size: int = 1) -> tuple[int, int]:
    """(all-to-all ranks, ring ranks) of a CP group of `cp` ranks: the heads are split over the
    first, the ring of KV blocks runs over the second (TE's a2a+p2p degenerates to p2p when
    the first is 1 and to a2a when the second is 1, as TE does). all_gather: (1, 1), no ring."""
    if cp <= 1:
        return 1, 1
    if algorithm == "ulysses":
        return cp, 1
    if algorithm == "all_gather":
        return 1, 1
    if algorithm == "hierarchical":
        a = max(1, min(a2a_size, cp))
        return a, cp // a
    return 1, cp


def ring_exposed(dur: float, step_attn: float, ring: int, backward: bool) -> float:
    """Seconds of a p2p ring's `dur` (all its exchanges of one pass) left on the critical path
    when each exchange hides behind one step's kernel of `step_attn` seconds (TE's p2p
    schedule, module docstring). Forward: ring-1 equal exchanges behind steps 0..ring-2.
    Backward: ring exchanges of 1, 2, ..., 2, 1 KV sizes (KV; KV + dKV; dKV), each behind its
    own step's backward kernel."""
    if ring <= 1 or dur <= 0:
        return 0.0
    if not backward:
        step = dur / (ring - 1)
        return (ring - 1) * max(0.0, step - step_attn)
    unit = dur / (2.0 * (ring - 1))
    return 2.0 * max(0.0, unit - step_attn) + (ring - 2) * max(0.0, 2.0 * unit - step_attn)


def a2a_heads_error(heads: float, kv_heads: float, a2a: int, repeat_kv: bool) -> str | None:
    """Why TE's a2a split of attention heads cannot run (None when it can): the heads and the
    K/V heads of a TP rank must divide by the all-to-all ranks (TE v2.8 L3135-3137; a
    framework that repeats K/V first, as XTuner, needs only the query heads to divide)."""
    if a2a <= 1:
        return None
    bad = [f"{n:g} {what}" for n, what in ((heads, "heads"), (kv_heads, "K/V heads"))
           if (what == "heads" or not repeat_kv) and n % a2a]  # fmt: skip
    if not bad:
        return None
    return (f"{' and '.join(bad)} per TP rank do not divide over the {a2a} ranks of the "
            "all-to-all that splits attention heads (TransformerEngine asserts it)")  # fmt: skip


_TYPE = re.compile(
    r"cp[-_ ]comm[-_ ]type\s*[:=]?\s*[\"'\[]?\s*(p2p|all_?gather|a2a\+p2p|a2a)"
    r"|\b(hierarchical)\s+(?:context[- ]parallel(?:ism)?|cp)\b"
    r"|\b(all[-_ ]?gather)\s+(?:context[- ]parallel(?:ism)?|cp|kv)\b"
    r"|\bcp(?:\s*=?\s*\d+)?\s+(?:via|with|by)\s+(?:an?\s+)?(all[-_ ]?gather|all[-_ ]to[-_ ]all|a2a|p2p ring|p2p)",
    re.I,
)


def stated_cp_comm_type(*cells: str | None) -> str | None:
    """The TE `cp_comm_type` a row's cells state ("--cp-comm-type a2a+p2p", "cp_comm_type:
    all_gather", "hierarchical CP", "all-gather CP", "CP via all-to-all"), None when no cell
    states one (Megatron-Core's default is p2p); a negated mention ("not a2a") does not count."""
    for cell in cells:
        text = cell or ""
        for m in _TYPE.finditer(text):
            if negated_at(text, m.start(), m.end()):
                continue
            word = next(g for g in m.groups() if g).lower().replace("-", "_").replace(" ", "_")
            if word.startswith("hierarchical"):
                return "a2a+p2p"
            if word in ("all_gather", "allgather"):
                return "all_gather"
            if word in ("a2a", "all_to_all"):
                return "a2a"
            if word.startswith("a2a+"):
                return "a2a+p2p"
            return "p2p"
    return None


_SIZES = re.compile(r"hierarchical[-_ ]context[-_ ]parallel[-_ ]sizes\s*[:=]?\s*\[?\s*"
                    r"(\d+)\s*[, ]\s*(\d+)", re.I)  # fmt: skip


def stated_a2a_size(*cells: str | None) -> int | None:
    """The all-to-all level a row's cells state for hierarchical CP
    ("--hierarchical-context-parallel-sizes 2 4": 2), None when none does; a negated mention
    ("not --hierarchical-context-parallel-sizes 2 4") does not count."""
    for cell in cells:
        text = cell or ""
        for m in _SIZES.finditer(text):
            if not negated_at(text, m.start(), m.start() + len("hierarchical")):
                return int(m.group(1))
    return None


def host_a2a_size(cp: int, tp: int, gpus_per_node: int) -> int:
    """Hierarchical CP's all-to-all level when no source states it: the CP ranks that share
    an NVLink domain (the largest divisor a of cp with tp x a <= GPUs per node) — Megatron-
    Core's `cp_comm_type` docstring: "A2A communications in low-level CP groups (e.g., via
    NVLink), and P2P communications in high-level CP groups (e.g., via IBLink)"."""
    return max(d for d in range(1, cp + 1) if cp % d == 0 and (tp * d <= gpus_per_node or d == 1))


__all__ = [
    "ALGORITHM",
    "CP_COMM_TYPES",
    "a2a_heads_error",
    "cp_levels",
    "host_a2a_size",
    "ring_exposed",
    "stated_a2a_size",
    "stated_cp_comm_type",
]
