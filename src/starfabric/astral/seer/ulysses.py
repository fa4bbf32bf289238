"""Ulysses sequence parallelism: all-to-all on attention heads instead of a ring of KV blocks.

DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv:2309.14509, section 3.1) splits the sequence over
`cp` ranks outside attention and, around the attention kernel, re-partitions Q, K and V from
"local tokens, all heads" to "all tokens, heads / cp" with one all-to-all each, and the
attention output back with a fourth; the backward runs the same four all-to-alls on the
gradients. XTuner's sequence parallelism (xtuner/parallel/sequence/attention.py @7575f2c,
`pre_process_for_sequence_parallel_attn` / `post_process_for_sequence_parallel_attn`) is the
same scheme. Differences from ring context parallelism (ops.py's `attn.cp_kv_ring`):

- the collectives are all-to-alls of Q, K, V and O, not point-to-point KV blocks, and they
  run synchronously on the compute stream before and after the attention kernel (the
  all_to_all autograd function of xtuner/parallel/sequence/comm.py @7575f2c calls
  `dist.all_to_all` and waits), so nothing hides them: their whole time is on the critical
  path (cost.py hides only the ring's p2p exchange behind attention);
- the attention kernel of each rank sees the whole sequence for heads / cp of the heads, so
  one call meets all the keys (ring CP: 1/cp of them per step);
- XTuner repeats K and V to the query head count before the all-to-all (`repeat_kv` in
  xtuner/model/modules/dispatch/llama.py @7575f2c, applied ahead of the sequence-parallel
  flash-attention wrapper), so a GQA model moves as many K and V bytes as Q bytes
  (`ExecutionSpec.ulysses_repeat_kv`); DeepSpeed's `DistributedAttention` sends them at
  their own head count.
"""

from __future__ import annotations

import re

from starfabric.astral.seer.statements import stated
from starfabric.errors import ConfigError

ULYSSES_WORDS = ("ulysses",)
"""Words in a row's framework or sequence-parallel cell that name the Ulysses scheme."""
REPEAT_KV_FRAMEWORKS = ("xtuner",)
"""Frameworks whose Ulysses all-to-all carries K and V repeated to the query head count
(XTuner @7575f2c: `repeat_kv` in its attention dispatch before the sequence-parallel wrapper)."""


def names_ulysses(*cells: str | None) -> bool:
    """Whether any of a row's cells (framework, sp, cp) names Ulysses-style sequence
    parallelism, not negated ("ring attention, not Ulysses" is not; statements.stated). A
    stated Ulysses degree decides it over a bare mention: USP's hybrid attention with
    "ulysses-degree 1" splits no heads, its `ring-degree` ranks run ring attention (Fang &
    Zhao 2024, arXiv:2405.07719: the sequence-parallel group is ulysses-degree x ring-degree)."""
    degree = stated_ulysses_degree(*cells)
    if degree is not None:
        return degree > 1
    return bool(stated(_ULYSSES, *cells))


def stated_ulysses_degree(*cells: str | None) -> int | None:
    """The Ulysses degree the cells state ("ulysses-degree 1", "ulysses_degree=4", "Ulysses
    degree: 8", "ulysses size 2", "Ulysses degree of 4"; USP / yunchang's and xDiT's argument
    names), else None. Two different degrees stated in a row's cells are a ConfigError naming
    both (validate adds the row)."""
    found = sorted(
        {int(m.group(1)) for cell in cells for m in _ULYSSES_DEGREE.finditer(cell or "")}
    )
    if len(found) > 1:
        raise ConfigError(
            f"Ulysses degree stated as {' and '.join(map(str, found))}",
            fix="state one ulysses-degree for the run (framework, sp, cp or notes cell)",
        )
    return found[0] if found else None


_ULYSSES = re.compile("|".join(ULYSSES_WORDS), re.I)
_ULYSSES_DEGREE = re.compile(
    r"\bulysses[\s_-]*(?:sp[\s_-]*)?(?:degree|size)\s*(?:[:=]\s*|of\s+)?(\d+)\b", re.I
)


def repeats_kv(framework: str | None) -> bool:
    """Whether the row's framework repeats K/V before the Ulysses all-to-all
    (`REPEAT_KV_FRAMEWORKS`)."""
    fw = (framework or "").lower()
    return any(f in fw for f in REPEAT_KV_FRAMEWORKS)


def qkv_bytes(
    tokens: float, heads: float, kv_heads: float, qk_dim: int, vo_dim: int, elem: float,
    repeat_kv: bool,
) -> float:  # fmt: skip
    """Send buffer of one rank's Q, K and V all-to-alls (counted as one buffer): its local
    `tokens` times the Q heads and the K/V heads it sends (all Q heads when K/V are repeated
    first, as XTuner does, else their own count)."""
    kv = heads if repeat_kv else kv_heads
    return elem * tokens * (heads * qk_dim + kv * (qk_dim + vo_dim))


def out_bytes(tokens: float, heads: float, vo_dim: int, elem: float) -> float:
    """Send buffer of the attention output's all-to-all (back to local tokens, all heads)."""
    return elem * tokens * heads * vo_dim
