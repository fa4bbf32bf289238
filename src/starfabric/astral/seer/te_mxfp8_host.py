"""Kernels Transformer Engine launches around each routed expert's MXFP8 GEMMs, by TE release.

Seer's launch table (`host_ops.LAUNCHES`) reads a BF16 code path: a routed expert costs its
cuBLAS GEMMs only. Under the MXFP8 recipe, TE's `GroupedLinear` (Megatron-Core
`--moe-grouped-gemm`, the multi-stream cuBLAS path: one GEMM per local expert) also launches,
per micro-batch, the quantization of every GEMM input, the allocation of its scaling factors
and their swizzle into the layout the Tensor Core reads. How many depends on the TE release,
read from NVIDIA/TransformerEngine at the commits before and after the three changes NVIDIA's
DeepSeek-V3 GB200 write-up names (Megatron-LM `docs/discussions/deepseek-v3-gb200-optimization`
@1d9edcf, sections 2.1.2-2.1.3):

| stage | TE | per local expert, fwd / bwd | per grouped layer (fc1, fc2), fwd / bwd |
|---|---|---|---|
| `per_tensor` | before PR 1793 / 1934 (v2.5 and earlier) | 10 / 14 | 0 / 0 |
| `bulk_alloc` | PR 1793 (c30e961) + PR 1934 (96ee717), first in v2.6 | 6 / 10 | 4 / 4 |
| `multi_swizzle` | PR 2019 (c0d2f1a), first in v2.7 | 2 / 2 | 4 / 8 |

- `per_tensor` (c30e961^): `_GroupedLinear.forward` quantizes the split inputs with
  `tex.fused_multi_quantize`, which for MXFP8 calls `create_tensor` then `quantize` per tensor
  (`extensions/transpose.cpp`): one quantize kernel each, and `MXFP8Quantizer::create_tensor`
  allocates four tensors, the two scaling-factor ones with `at::zeros` (`quantizer.cpp`
  464-479: two fill kernels). `te_general_grouped_gemm` swizzles both operands' scaling factors
  per GEMM (`gemm.cpp` 400-401, `util.cpp` `swizzle_scaling_factors`: `at::empty` + one
  `nvte_swizzle_scaling_factors` kernel). Forward per expert: fc1 and fc2 each 1 quantize + 2
  fills + 2 swizzles = 10. Backward: each GEMM's output gradient quantized (1 + 2 fills) and
  swizzles for dgrad (2) and wgrad (2) = 7 each, 14. Weights are FP8 already
  (`--fp8-param-gather`): swizzled, not quantized, per micro-batch.
- `bulk_alloc` (96ee717, `extensions/cast.cpp` `split_quantize` -> `bulk_allocate_mxfp8_tensors`
  459 / 502): one buffer per direction for all experts, its scaling factors zeroed once
  (`at::zeros`, rowwise and columnwise: 2 fills per grouped quantize), the per-tensor quantize
  (`multi_tensor_quantize_impl`) and per-GEMM swizzles unchanged: 6 / 10 per expert, 2 fills
  per grouped quantize (fc1 and fc2 input forward, their output gradients backward: 4 / 4).
- `multi_swizzle` (c0d2f1a): "multi-tensor swizzle scaling factors for MXFP8 and fuse padding
  zeros": one swizzle kernel per operand list of a grouped GEMM (forward 2 per layer,
  backward 4: dgrad and wgrad) and no zero fills; the per-expert quantize stays: 2 / 2
  per expert, 4 / 8 per grouped layer pair.

PR 2134 (c449c6c, v2.8) only replaces `from_blob` by `empty` for experts with no tokens (no
launch change). Each launch is priced as every other one in the table (`HOST_S_PER_LAUNCH_*`:
the table's convention, C++ loops of GEMMs included). The allocations without a kernel
(`at::empty`: "a few microseconds" each, write-up 2.1.2) are not counted.

The non-expert linears (attention QKV or MLA's four projections, the output projection, the
shared expert's and the dense layers' fc1/fc2: TE `Linear` / `LayerNormLinear`, one GEMM each
way per input) take the same per-tensor path in every release the rows use, read at the same
commits: forward, the input's quantize (`MXFP8Quantizer::quantize`, one kernel for both
directions), its scaling factors' `at::zeros` (rowwise + columnwise: 2 fills, `quantizer.cpp`
`create_tensor`, until PR 2019 made them `at::empty`), and `gemm.cpp` `gemm`'s
`swizzle_scaling_factors` of both operands (2; single GEMMs keep a swizzle per operand through
v2.9 / d2945c6, `gemm.cpp` 237-240); backward, the output gradient's quantize + 2 fills and the
dgrad and wgrad GEMMs' swizzles (4). Weights are quantized once per step (FP8 primary weights,
`--fp8-param-gather`, or TE's first-micro-batch weight cache), not per micro-batch. Per linear:
5 / 7 before PR 2019 (`per_tensor`, `bulk_alloc`: PRs 1793/1934 change only `split_quantize`,
the grouped path), 3 / 5 after (`multi_swizzle`). TE's quantize fused into the norm (cuDNN 9.14,
`NVTE_NORM_FWD_USE_CUDNN`) would save the `LayerNormLinear`s' quantize: not counted.

A row states its stage by naming the PRs or the TE release (`mxfp8_stage`); a row that states
neither keeps the BF16 count (the table before this module).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starfabric.astral.seer.fp8_recipe import is_mxfp8
from starfabric.astral.seer.releases import TE_NAMES, TE_RELEASE
from starfabric.astral.seer.statements import compared_at, negated_at

STAGES = ("per_tensor", "bulk_alloc", "multi_swizzle")
"""TE's MXFP8 grouped-linear paths, oldest first."""

PER_LOCAL_EXPERT: dict[str, tuple[int, int]] = {
    "per_tensor": (10, 14),
    "bulk_alloc": (6, 10),
    "multi_swizzle": (2, 2),
}
"""(forward, backward) launches per local expert and micro-batch that the BF16 table does not
count (module docstring's table; TransformerEngine code at c30e961^, 96ee717, c0d2f1a)."""

PER_GROUPED_LAYER_PAIR: dict[str, tuple[int, int]] = {
    "per_tensor": (0, 0),
    "bulk_alloc": (4, 4),
    "multi_swizzle": (4, 8),
}
"""(forward, backward) launches per MoE layer (fc1 + fc2 grouped linears) and micro-batch,
independent of the number of local experts (same sources)."""

PER_LINEAR: dict[str, tuple[int, int]] = {
    "per_tensor": (5, 7),
    "bulk_alloc": (5, 7),
    "multi_swizzle": (3, 5),
}
"""(forward, backward) launches per non-expert TE linear and micro-batch under MXFP8 that the
BF16 table does not count (module docstring; TransformerEngine `quantizer.cpp` and `gemm.cpp` at
c30e961^, 96ee717, c0d2f1a, d2945c6)."""

BULK_ALLOC_RELEASE = (2, 6)
"""First TE release with PRs 1793 and 1934 (`git tag --contains c30e961 / 96ee717`: v2.6)."""
MULTI_SWIZZLE_RELEASE = (2, 7)
"""First TE release with PR 2019 (`git tag --contains c0d2f1a`: v2.7)."""

_PR = re.compile(TE_NAMES + r"\s+PRs?\s+#?((?:\d{3,5}\s*(?:/|,|and|&)?\s*#?)+)", re.I)
_BULK_PRS = frozenset({1793, 1934})
_SWIZZLE_PRS = frozenset({2019})


def _affirmed(text: str, m: re.Match[str]) -> bool | None:
    """True for a mention the run did (`statements`), False for a negated or reverted one
    ("not TE PR 2019", "TE PR 2019 reverted"), None for a comparison's reference ("compared
    with TE 2.9", "vs. TE 2.9"): that names neither what the run did nor what it did not."""
    end = m.start() + len(m.group(0).rstrip())
    if compared_at(text, m.start()):
        return None
    return not negated_at(text, m.start(), end)


def _pr_stage(prs: set[int]) -> int | None:
    """Index in STAGES of the stage a set of TE PRs brings, None when it names none of them."""
    if prs & _SWIZZLE_PRS:
        return STAGES.index("multi_swizzle")
    if prs & _BULK_PRS:
        return STAGES.index("bulk_alloc")
    return None


def _release_stage(major: int, minor: int) -> int:
    """Index in STAGES of the stage TE release major.minor ships."""
    if (major, minor) >= MULTI_SWIZZLE_RELEASE:
        return STAGES.index("multi_swizzle")
    if (major, minor) >= BULK_ALLOC_RELEASE:
        return STAGES.index("bulk_alloc")
    return STAGES.index("per_tensor")


def mxfp8_stage(precision: str | None, texts: Iterable[str | None]) -> str | None:
    """TE's MXFP8 expert path a row states: None unless the row states the MXFP8 recipe
    (`fp8_recipe.is_mxfp8`, the reading that sets the row's FP8 recipe) and a cell names TE's fixes (PR numbers) or TE's release; the newest stated evidence wins (a PR
    named over an older release floor such as "Transformer Engine 2.3+"). Mentions are read
    with `statements`: a negated release or PR ("not TE 2.9", "without TE PR 2019") and a
    comparison's reference ("TE 2.3, compared with TE 2.9") are not the run's; a fix stated
    reverted ("TE 2.9, TE PR 2019 reverted") caps the stage below the one it brings."""
    cells = [t for t in texts if t]
    if not is_mxfp8(precision, *cells):
        return None
    text = " ; ".join(cells)
    found: list[int] = []
    cap = len(STAGES) - 1
    for m in _PR.finditer(text):
        stage = _pr_stage({int(n) for n in re.findall(r"\d{3,5}", m.group(1))})
        said = _affirmed(text, m)
        if stage is None or said is None:
            continue
        if said:
            found.append(stage)
        else:
            cap = min(cap, stage - 1)
    for m in TE_RELEASE.finditer(text):
        if _affirmed(text, m):
            found.append(_release_stage(int(m.group(1)), int(m.group(2))))
    if not found:
        return None
    return STAGES[min(max(found), cap)]


__all__ = [
    "BULK_ALLOC_RELEASE",
    "MULTI_SWIZZLE_RELEASE",
    "PER_GROUPED_LAYER_PAIR",
    "PER_LINEAR",
    "PER_LOCAL_EXPERT",
    "STAGES",
    "mxfp8_stage",
]
