"""The work around each step of TransformerEngine's p2p context-parallel ring, by TE release.

TransformerEngine's `AttnFuncWithCPAndKVP2P` (Megatron-Core's default `--cp-comm-type p2p`,
cp_comm.py) runs cp attention kernels per layer and pass and, between them, memory-bound
PyTorch ops that merge the partial results. Read at v1.10 (08a85d3), v1.11 (the late-2024
NGC containers' release; `transformer_engine/pytorch/attention.py` L1367-1381, forward
L1413-2212, backward L2214-2960), v1.12, v2.2, v2.4 and v2.8
(`pytorch/attention/dot_product_attention/context_parallel.py` L1056-2560):

- **Backend.** On Hopper TE picks FusedAttention (cuDNN, sub-backend F16_arbitrary_seqlen) for
  a causal bshd/sbhd self-attention with CP: `get_attention_backend` disables FlashAttention
  "to give FusedAttention preference on Hopper+" (v1.10 L739-750, v1.11 L818-829: compute
  capability == (9, 0) through v1.13; >= (9, 0) from v2.0, v2.8 `utils.py` L1052-1058); the CP filters (v1.11
  L458-530) disable FusedAttention only for causal_bottom_right, causal cross-attention, a bias
  other than post_scale_bias, a THD bias, or (v1.11) MLA head dims; FlashAttention 3 is
  disabled for CP at v1.11 (L463-466). Megatron-Core core_v0.11.0 leaves the choice to TE
  (`--attention-backend auto`). So late-2024 and 2025-26 Megatron CP rows on H100 run the
  same cuDNN kernel: Seer's `flash_kernel: cudnn`, not FlashAttention-2.
- **What runs between the kernels** (BF16/FP16 attention, sbhd or bshd at micro-batch 1):
  *forward* — K and V packed into the first ring buffer (`torch.cat`, before the loop, on the
  compute stream); per step the LSE merge (`flash_attn_fwd_softmax_lse_correction`) on the
  two alternating streams, beside the other stream's kernel; after the loop, on the compute
  stream once both streams are joined (`wait_stream`), one output merge per step
  (`flash_attn_fwd_out_correction`, jit-fused: read the step's output and LSE, read-modify-
  write the running output; the upper-triangle steps on the second half only). Through
  v2.1 the running output starts as zeros (`torch.zeros_like(q)`, inside the loop) and step 0
  is merged like the others; from v2.2 `flash_attn_fwd_out_correction_init` writes step 0's
  scaled output directly. Through v2.3 the running LSE is float64 (`.to(torch.double)`) and
  is cast to float32 after the loop; from v2.4 it is float32.
  *backward* — one stream: K, V copied into the ring buffer once (`copy_(kv)`); per step,
  after the kernel, dQ accumulated into the rank's dQ (copy at the rank's first step, `add_`
  after; half the rows in upper-triangle steps) and dK, dV into the received dKV block
  (`add_`; half the rows in lower-triangle steps); through v1.11 the step's dK and dV are
  first concatenated (`torch.cat((dk_, dv_))`), which v1.12 removed.
  The `.contiguous()` calls that select half of Q, K/V, O or dO cost nothing in Megatron's
  sbhd layout (and bshd at micro-batch 1): a slice along the leading dimension is contiguous.
- **Overlap.** Each exchange hides behind one step's kernel (cp_comm.ring_exposed); the merges
  above are compute-stream work that nothing hides (forward after the join; backward between
  a step's kernel and the next step's send). The in-loop LSE merges, the zero fill and the
  half selections run on the other stream than the running kernel or cost nothing: not priced.

So every release from 1.10 to 2.8 does the same per-step merge work; the releases differ only
in the first output merge (v2.2), the float64 LSE cast (v2.4) and the dK/dV concatenation
(v1.12). `step_bytes` counts those HBM bytes for the slowest rank of the load-balanced ring
(rank cp-1 does a full-size merge every step). Seer prices them as one memory-bound kernel per
pass (`efficiency.mem_time`: HBM bandwidth x `mem_bw_fraction`); nothing is fitted.
"""

from __future__ import annotations

import re

import numpy as np

from starfabric.astral.seer.releases import TE_RELEASE
from starfabric.astral.seer.statements import negated_at

Release = tuple[int, int]

OUT_INIT_SINCE: Release = (2, 2)
"""First TE release whose first output merge writes the scaled step output
(`flash_attn_fwd_out_correction_init`) instead of merging into a zero-filled output."""
LSE_FP32_SINCE: Release = (2, 4)
"""First TE release whose running softmax LSE stays float32 (through v2.3: float64, cast back
after the loop)."""
DKV_CAT_BEFORE: Release = (1, 12)
"""First TE release without the per-step `torch.cat((dk_, dv_))` in the p2p backward."""
LSE_BYTES = 4.0
"""Bytes of one softmax LSE entry (float32, per query row and head; cuDNN's stats output)."""
LSE_FP64_CAST_BYTES = 12.0
"""Through v2.3: the float64 running LSE read (8 B) and written as float32 (4 B) per entry."""
NEWEST: Release = (2, 8)
"""The structure priced when a run states no TE release (assumption: the newest read; v2.14
and v2.18 keep it; the releases differ by < 10% of the merge bytes)."""


def step_bytes(
    tokens: float,
    heads: float,
    kv_heads: float,
    dq: float,
    dv: float,
    cp: int,
    release: Release | None = None,
    elem: float = 2.0,
) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the merge work on the compute stream of TE's p2p ring,
    per layer and micro-batch, on the slowest rank: `tokens` local tokens (micro-batch x s/cp),
    `heads` / `kv_heads` per rank, head dims `dq` (Q, K) and `dv` (V, O), `cp` ring steps,
    `elem`-byte activations. `release` None: the newest structure (`NEWEST`).

    Assumptions: the in-loop LSE merges and the zero fill run beside the other stream's kernel
    and are not counted; the half selections cost nothing (sbhd, or bshd at micro-batch 1 —
    bshd at a larger micro-batch copies them, not counted); the ranks run in step, so the
    layer waits for the rank with the most merge bytes."""
    if cp <= 1:
        return 0.0, 0.0
    rel = release or NEWEST
    q = tokens * heads * dq * elem
    o = tokens * heads * dv * elem
    kv = tokens * kv_heads * (dq + dv) * elem
    lse = tokens * heads * LSE_BYTES
    r = np.arange(cp, dtype=np.float64)
    upper = cp - 1.0 - r
    # Forward: pack K, V (read + write); after the join, one merge per step — full steps
    # (step 0 and the r lower-triangle steps) read the step output and r/w the running output,
    # upper-triangle steps do it on half the rows; each reads its LSE and the running LSE.
    first = (2.0 if rel >= OUT_INIT_SINCE else 3.0) * o + 2.0 * lse
    fwd = 2.0 * kv + first + r * (3.0 * o + 2.0 * lse) + upper * (1.5 * o + lse)
    if rel < LSE_FP32_SINCE:
        fwd = fwd + LSE_FP64_CAST_BYTES * lse / LSE_BYTES
    # Backward, steps in TE's order i = 0..cp-1 (i = cp-1 the diagonal block, i >= cp-r-1
    # lower-triangle, earlier ones upper-triangle). dQ: the step i = cp-r-1 copies (rank cp-1)
    # or copies one half and adds the other; the r later steps add; upper steps copy (i = 0)
    # or add into the second half.
    dq_first = np.where(r == cp - 1, 2.0 * q, 2.5 * q)
    dq_upper = np.where(upper >= 1, q + np.maximum(upper - 1.0, 0.0) * 1.5 * q, 0.0)
    dq_bytes = dq_first + r * 3.0 * q + dq_upper
    # dK, dV into the received block: the diagonal step adds (rank 0: half add, half copy),
    # lower steps add half the rows (rank cp-1's step 0 copies), upper steps add (i = 0 copies).
    dkv_diag = np.where(r == 0, 2.5 * kv, 3.0 * kv)
    dkv_lower = np.where(r == cp - 1, kv + np.maximum(r - 1.0, 0.0) * 1.5 * kv, r * 1.5 * kv)
    dkv_upper = np.where(upper >= 1, 2.0 * kv + np.maximum(upper - 1.0, 0.0) * 3.0 * kv, 0.0)
    bwd = 2.0 * kv + dq_bytes + dkv_diag + dkv_lower + dkv_upper
    if rel < DKV_CAT_BEFORE:
        bwd = bwd + 2.0 * kv + r * kv + upper * 2.0 * kv
    worst = int(np.argmax(fwd + bwd))
    return float(fwd[worst]), float(bwd[worst])


FUSED_PREFERENCE_READ_SINCE: Release = (1, 9)
"""Earliest TE release whose backend preference was read (v1.9, L653-665)."""
ANY_HOPPER_PLUS_SINCE: Release = (2, 0)
"""First TE release whose cuDNN preference tests compute capability >= (9, 0) (through v1.13:
== (9, 0), so Blackwell kept FlashAttention)."""


def prefers_fused_attention(sm: tuple[int, int], release: Release) -> bool:
    """Whether TE's backend selection, with FlashAttention and FusedAttention (arbitrary
    sequence length) both eligible, drops FlashAttention for cuDNN (`get_attention_backend`,
    "give FusedAttention preference on Hopper+"): sm90 from v1.9, any sm >= 90 from v2.0."""
    if release < FUSED_PREFERENCE_READ_SINCE:
        raise ValueError(f"TransformerEngine {release[0]}.{release[1]}'s backend choice was "
                         "not read (earliest read: 1.9)")  # fmt: skip
    return sm >= (9, 0) if release >= ANY_HOPPER_PLUS_SINCE else sm == (9, 0)


TE_CP_FRAMEWORKS = ("megatron", "nemo")
"""Framework cells whose context parallelism is TransformerEngine's: Megatron-Core's own
attention refuses CP ("Context parallelism is only supported by TEDotProductAttention!",
core_v0.11.0 `transformer/dot_product_attention.py` L52); Megatron-LM, Megatron-Bridge and NeMo
build on Megatron-Core."""


def runs_te_cp(framework: str | None) -> bool:
    """Whether a framework cell names a stack whose CP ring is TransformerEngine's."""
    fw = (framework or "").lower()
    return any(k in fw for k in TE_CP_FRAMEWORKS)


def stated_release(*cells: str | None) -> Release | None:
    """The TransformerEngine release a row's cells state ("TE 1.11", "Transformer Engine 2.3+",
    "Transformer Engine 2.9-based"); a negated mention does not count; None when none."""
    for cell in cells:
        text = cell or ""
        for m in TE_RELEASE.finditer(text):
            if not negated_at(text, m.start(), m.end()):
                return int(m.group(1)), int(m.group(2))
    return None


def parse_release(text: str) -> Release:
    """'1.11' -> (1, 11); ValueError naming the value otherwise."""
    m = re.fullmatch(r"\s*v?(\d)\.(\d{1,2})(?:\.\d+)*\s*", text)
    if not m:
        raise ValueError(f"TransformerEngine release {text!r} is not MAJOR.MINOR, e.g. '1.11'")
    return int(m.group(1)), int(m.group(2))


__all__ = [
    "ANY_HOPPER_PLUS_SINCE",
    "DKV_CAT_BEFORE",
    "FUSED_PREFERENCE_READ_SINCE",
    "LSE_FP32_SINCE",
    "NEWEST",
    "OUT_INIT_SINCE",
    "TE_CP_FRAMEWORKS",
    "parse_release",
    "prefers_fused_attention",
    "runs_te_cp",
    "stated_release",
    "step_bytes",
]
