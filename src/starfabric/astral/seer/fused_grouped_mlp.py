"""Transformer Engine's CuTe-DSL fused grouped MLP (MXFP8 routed experts): what a row states
and which of Seer's memory passes the fusion removes.

**What runs.** With TE's operation fuser (Megatron `use_transformer_engine_op_fuser`; MLPerf
`USE_TE_OPS=True`) the routed experts are `GroupedLinear -> ScaledSwiGLU -> GroupedLinear`.
TE v2.15 (`ops/_common.fuse_grouped_mlp_ops`) replaces that triple by
`ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8` / `BackwardGroupedMLP_CuTeGEMMDSwiGLU_MXFP8`
(`ops/fused/forward_grouped_mlp.py`, `backward_grouped_mlp.py`; TE PRs #2769 and #2855) when
`NVTE_CUTEDSL_FUSED_GROUPED_MLP=1`, the recipe is MXFP8 and the GPU has compute capability
10.x (`is_supported`). The forward's fc1 kernel (cuDNN front-end `grouped_gemm_glu`) writes
fc1's BF16 output for the backward (`c_tensor`, as the unfused GEMM did) and, from its epilogue,
the SwiGLU output scaled by the routing probabilities as fc2's MXFP8 input, rowwise and
columnwise (`d_tensor`, `d_col_tensor`). The backward's fc2-dgrad kernel (`grouped_gemm_dglu`)
reads that saved BF16 tensor in its epilogue, applies dSwiGLU and the probabilities' gradient,
and writes fc1's grad output as MXFP8, rowwise and columnwise (`d_row_tensor`,
`d_col_tensor`).

**What Seer drops** (`FUSED_CASTLESS_GEMMS`, and `ops` leaves out `moe.expert_act`). The
separate SwiGLU pass, forward and backward; the quantization of fc2's input, which Seer charges
on `moe.expert_fc2` and again on `moe.expert_fc2.wgrad` (the wgrad's input operand); the
quantization of fc1's grad output, charged on `moe.expert_fc1.dgrad`. fc1's input and fc2's grad
output are still quantized by separate `group_quantize` calls, so their casts stay. The
epilogue's FP8 writes are taken as hidden under the compute-bound GEMM (assumption); the GEMMs'
own rate is Seer's MXFP8 grouped rate (no published kernel rate of the fused kernels was found:
cudnn-frontend publishes SDPA and norm sweeps only).

**What a row states** (`stated`). The setting by name, not negated and not the reference of a
comparison, in the framework or notes
cell: `NVTE_CUTEDSL_FUSED_GROUPED_MLP=1` (or `=True`) together with TE's op fuser
(`USE_TE_OPS=True`, `use_transformer_engine_op_fuser`): without the fuser the triple is never
built. `validate` applies it only with MXFP8 GEMMs and where `unfused` finds nothing against
it (SwiGLU experts, Blackwell (MX) tensor cores: TE's other conditions); a job that states it
elsewhere is refused by `parallel.resolve_layout` with the same reason.
"""

from __future__ import annotations

import re

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer.fp8_recipe import native_mx
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.statements import stated_for_run

FUSED_CASTLESS_GEMMS: tuple[str, ...] = (
    "moe.expert_fc2",
    "moe.expert_fc2.wgrad",
    "moe.expert_fc1.dgrad",
)
"""Routed-expert GEMMs whose activation-operand cast the fused kernels' epilogues produce (module
docstring, What Seer drops); `cost.op_costs` charges them no cast."""

_ENV = re.compile(
    r"NVTE_CUTEDSL_FUSED_GROUPED_MLP\s*[=:]\s*['\"]?(?:0*[1-9]\d*|true)(?!\w|\.\d)", re.I
)
"""TE's switch, set: `NVTE_CUTEDSL_FUSED_GROUPED_MLP=1` or any positive integer (`is_supported`
reads int(...) > 0); "true", a transcriber's paraphrase, counts as set."""
_FUSER = re.compile(
    r"USE_TE_OPS\s*[=:]\s*['\"]?(?:1|true)\b|use[_-]transformer[_-]engine[_-]op[_-]fuser"
    r"(?:\s*[=:]\s*['\"]?(?:1|true)\b)?",
    re.I,
)
"""TE's op fuser, on: MLPerf `USE_TE_OPS=True`, Megatron `use_transformer_engine_op_fuser`."""


def stated(*cells: str | None) -> bool:
    """True when the cells state TE's CuTe-DSL fused grouped MLP: the switch and the op fuser,
    each named neither negated nor as the reference of a comparison ("slower than with
    NVTE_CUTEDSL_FUSED_GROUPED_MLP=1": `statements.stated_for_run`)."""
    return bool(stated_for_run(_ENV, *cells)) and bool(stated_for_run(_FUSER, *cells))


def unfused(model: ModelSpec, gpu: GPUSpec) -> tuple[str, str] | None:
    """Why TE would not fuse this job's grouped MLP, as (what, fix), or None where it would:
    its fuser matches SwiGLU routed experts only (GroupedLinear -> ScaledSwiGLU ->
    GroupedLinear), on compute capability 10.x (`is_supported`). The MXFP8 recipe, TE's third
    condition, is ExecutionSpec's check."""
    if not (model.is_moe and model.activation == "swiglu"):
        kind = "MoE" if model.is_moe else "dense"
        return (
            f"{model.name} ({model.activation}, {kind}): TE fuses the grouped MLP of SwiGLU "
            "MoE experts only",
            "drop moe_fused_grouped_mlp for this model",
        )
    if not native_mx(gpu):
        return (
            f"{gpu.name}: TE's CuTe-DSL fused grouped MLP needs Blackwell tensor cores "
            "(compute capability 10.x)",
            "drop moe_fused_grouped_mlp on this GPU, or use a Blackwell GPU",
        )
    return None


__all__ = ["FUSED_CASTLESS_GEMMS", "stated", "unfused"]
