"""Which dtype an FP8 run's expert dispatch carries, per framework (DeepEP dispatch dtype).

DeepEP's `Buffer.dispatch` moves whatever it is handed: a BF16 tensor, or an (FP8 tensor, fp32
scale per 128 values) pair (`expert_comm.DEEPEP_FP8_BYTES_PER_ELEM`). Whether an FP8 run's
dispatch is FP8 is therefore the framework's choice, read from its code at the commits the rows
ran:

- **Megatron-Core, DeepEP backend: BF16.** `_DeepepManager.dispatch` hands the MoE layer's
  hidden states (the pre-MLP norm's BF16 output; `MoELayer.dispatch` -> `token_dispatch`) to
  `fused_dispatch`, whose `FusedDispatch.forward` calls `buffer.dispatch(x, ...)` with that
  tensor as is: `token_dispatcher.py` 742 / `fused_a2a.py` 98-99 @0d389f5 (2025-02-25, the DeepEP
  integration); 990 / 112-113 @core_v0.13.0; 995 / 112-113 @core_v0.15.0; 1186 / 113-114
  @fca1679 (2026-03-10); 1320 / 116-117 @d98e8a6. No FP8 appears in the DeepEP half of
  `fused_a2a.py` at any of them; `_DeepepManager`'s only FP8 mentions pad the *received*
  routing map for the FP8 grouped GEMM (`moe_router_padding_for_fp8`, core_v0.13-0.15), which
  quantizes after the dispatch (Transformer Engine's grouped linear).
- **Megatron-Core, HybridEP backend: BF16** (`hybridep_rate.HYBRIDEP_FP8_DISPATCH`: asserts
  `not fp8_dispatch`).
- **Megatron-Core, NCCL-EP backend** (`--moe-flex-dispatcher-backend ncclep`, 2026-07): the only
  Megatron path with an FP8 wire, and only when asked: `moe_dispatch_fwd_dtype` defaults to
  'bf16' ('mxfp8' requires the ncclep backend; `transformer_config.py` 997 and 1776-1787
  @d98e8a6, added by 7afe031, 2026-08-20). Seer does not model that backend.
- **TorchTitan, DeepEP: BF16.** `fused_a2a.py` 108-109 @5d4bdd0 (the TTDEEPEP rows' commit)
  passes `x` to `buffer.dispatch` without any FP8 argument; at b5bcd76 (2026-08, DeepEP v2)
  `DeepEPTokenDispatcher.init_buffer` builds the buffer without `use_fp8_dispatch` (default
  False; `token_dispatcher.py` 834-839, `deepep.py` 341). FP8/MXFP8 experts quantize after the
  dispatch (`TorchAOTokenDispatcher` only pads the received groups for them).
- **TorchTitan DistMoE (the fused dispatch-compute-combine kernels): BF16.** "Training
  publishes BF16 `x` rows to symmetric dispatch HBM ... Training quantizes after peer gather"
  (meta-pytorch/dist_moe `docs/mxfp8_execution.md` @191b73f, "Follow common forward setup";
  its table: "Source publication | BF16 token row").
- **DeepSeek's own stack (DualPipe): FP8.** "we quantize the activation before MoE
  up-projections into FP8 and then apply dispatch components ... the combine components [are
  retained] in BF16" (DeepSeek-V3 technical report, section 3.3.3).

So an FP8 run dispatches FP8 only with DeepSeek's stack, and only in the forward dispatch
(its backward travels like a combine, in 16 bit: `cost.op_costs`; DeepSeek's FP8 gradient before
the down-projection, the combine's backward, is not modelled: Seer keeps it in 16 bit). `ExecutionSpec.
ep_dispatch_dtype` states the dtype; left unset it is the framework's default above: FP8 under
DualPipe (`pipeline_schedule: dualpipe`, DeepSeek's stack), BF16 otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from starfabric.astral.seer.hybridep_rate import dispatches_fp8 as backend_dispatches_fp8

if TYPE_CHECKING:
    from starfabric.astral.seer.parallel import ExecutionSpec

DispatchDtype = Literal["bf16", "fp8"]

FRAMEWORK_DISPATCH_DTYPE: dict[str, DispatchDtype] = {
    "megatron-core deepep": "bf16",
    "megatron-core hybridep": "bf16",
    "torchtitan deepep": "bf16",
    "torchtitan distmoe": "bf16",
    "deepseek dualpipe": "fp8",
}
"""An FP8 run's forward-dispatch dtype per framework and dispatcher, read from code (module
docstring: file:line at the rows' commits)."""


def default_dispatch_dtype(dualpipe: bool) -> DispatchDtype:
    """The framework's own dispatch dtype in an FP8 run: FP8 for DeepSeek's DualPipe stack,
    BF16 for Megatron-Core (DeepEP, HybridEP) and TorchTitan (DeepEP, DistMoE)."""
    key = "deepseek dualpipe" if dualpipe else "megatron-core deepep"
    return FRAMEWORK_DISPATCH_DTYPE[key]


def dispatch_dtype(ex: ExecutionSpec) -> DispatchDtype:
    """The forward expert dispatch's dtype of job `ex`: BF16 unless the run is FP8 and the
    stated `ep_dispatch_dtype` (or, unset, its framework's default) is FP8 on a backend that
    can send it (not HybridEP)."""
    if ex.precision != "fp8" or not backend_dispatches_fp8(ex.moe_flex_backend):
        return "bf16"
    if ex.ep_dispatch_dtype is not None:
        return ex.ep_dispatch_dtype
    return default_dispatch_dtype(ex.pipeline_schedule == "dualpipe")


__all__ = [
    "FRAMEWORK_DISPATCH_DTYPE",
    "DispatchDtype",
    "default_dispatch_dtype",
    "dispatch_dtype",
]
