"""Per-tensor current scaling's amax all-reduces over the TP group (TransformerEngine).

Under current scaling a tensor's FP8 scale comes from that tensor's own amax, computed when it is
quantized. With sequence parallelism each TP rank holds 1/tp of the tokens of a tensor that the
column-parallel GEMM all-gathers (in FP8) or that the row-parallel backward splits, so the ranks
must agree on one scale: TransformerEngine makes the quantizer reduce its amax over the TP group
before it casts. `Linear`, `LayerNormLinear` and `LayerNormMLP`
`_customize_quantizers_float8_current_scaling` (transformer_engine/pytorch/module/linear.py,
layernorm_linear.py, layernorm_mlp.py) set `with_amax_reduction = True` and
`amax_reduction_group = tp_group`

- in the forward, on the input quantizer of a column-parallel module with sequence parallelism
  (`sequence_parallel and parallel_mode == "column"`): the QKV and FC1 inputs;
- in the backward, on the output-gradient quantizer of a row-parallel module with sequence
  parallelism (`parallel_mode == "row"`): the attention projection and FC2.

`_customize_quantizers_nvfp4` sets the same two reductions for NVFP4 (`NVFP4BlockScaling`, whose
per-tensor FP32 scale is also a current amax). The reduction is a one-element FP32 all-reduce
(`allreduce_coalesced` over the amax tensor, `Float8CurrentScalingQuantizer` in
transformer_engine/pytorch/csrc/quantizer.cpp) issued between the amax kernel and the cast, so
the cast, and the GEMM after it, wait for it: it is on the critical path and no GEMM hides it
(TP comm overlap overlaps the all-gather / reduce-scatter of the activations, not this
reduction). Seer adds one such collective per column-parallel input to the layer's forward
table (`ops.layer_ops`); `ops.backward_of` turns each into the matching backward reduction.
Delayed scaling (`DelayedScaling`) reduces its amax history once per step over the FP8 group, not
per tensor, and block-scaled recipes (MXFP8, blockwise) have no per-tensor amax: neither gets it.
MoE expert GEMMs (`GroupedLinear`) set no amax reduction and do not get it either; a MoE
layer's shared experts are TE `Linear`s (Megatron-Core's `SharedExpertMLP` spec:
`TEColumnParallelLinear` / `TERowParallelLinear`) and do, their FC1 input forward and FC2's
output gradient backward (`ops._moe_mlp`).
"""

from __future__ import annotations

from starfabric.astral.seer.parallel import ExecutionSpec, Layout

AMAX_BYTES = 4.0
"""Bytes of one reduced amax: one FP32 value (TE quantizer `amax` tensor, shape [1])."""
AMAX_OP = "fp8_amax_all_reduce"
"""Name suffix of the amax reduction in Seer's op tables (`is_amax_reduction`)."""
CURRENT_SCALING_RECIPES = ("tensorwise",)
"""Seer's fp8_recipe names that are TE per-tensor current scaling (`Float8CurrentScaling`,
fp8_recipe.py); torchao's tensorwise scaling is another implementation and is not read here."""


def reduces_amax_over_tp(ex: ExecutionSpec, tp: int, sp: bool) -> bool:
    """Whether the quantizers of TE's TP linears all-reduce their amax over the TP group: FP8
    current scaling or NVFP4, with TP > 1 and sequence parallelism."""
    if tp <= 1 or not sp or ex.precision != "fp8":
        return False
    return ex.fp4_recipe is not None or ex.fp8_recipe in CURRENT_SCALING_RECIPES


def layout_reduces_amax(ex: ExecutionSpec, lay: Layout) -> bool:
    """`reduces_amax_over_tp` for a resolved layout."""
    return reduces_amax_over_tp(ex, lay.tp, lay.sp)


def is_amax_reduction(name: str) -> bool:
    """Whether op-table row `name` is an amax reduction (forward or its backward)."""
    return AMAX_OP in name


__all__ = [
    "AMAX_BYTES",
    "AMAX_OP",
    "CURRENT_SCALING_RECIPES",
    "is_amax_reduction",
    "layout_reduces_amax",
    "reduces_amax_over_tp",
]
