"""Which stacks run a column-parallel linear's backward grad-input collective beside its
weight-gradient GEMM, read from their code, for every era.

A column-parallel linear (QKV, FC1, the output layer) ends its backward with a collective on
the input gradient: an all-reduce, or a reduce-scatter with sequence parallelism (SP). The
stacks below launch it with `async_op=True`, compute the weight-gradient (wgrad) GEMM, and
wait for it only after that GEMM, so the collective runs under the GEMM:

- **Megatron-LM** from merge 6e1bde1e0f (2021-09-02, `--no-async-tensor-model-parallel-
  allreduce` turns off the all-reduce form; `megatron/arguments.py` @core_v0.4.0 lines 897-902
  keep it on by default), and the reduce-scatter form in every SP release (9aad9203aa,
  2022-05-20). **Apex**, whose layers NeMo's 2021-22 GPT used, from 365fdc18 (2021-10-02).
- **Megatron-Core's own linears** (`LinearWithGradAccumulationAndAsyncCommunication.backward`,
  `megatron/core/tensor_parallel/layers.py`): @core_v0.4.0 lines 380-444, @core_v0.8.0 469-536,
  @core_v0.12.0 487-553, @d98e8a64dd 694-790 (all-reduce at 696, reduce-scatter at 708, wait
  after the wgrad GEMM at 790). From core_v0.8.0 (lines 805-807) the all-reduce form is on
  whenever TP > 1 without SP (`allreduce_dgrad`, @d98e8a64dd 1144-1145); core_v0.4.0-0.6.0
  follow `config.async_tensor_model_parallel_allreduce`, which Megatron-LM's arguments turn on
  (a standalone user of the local spec without SP had it off: not read). Gradient-accumulation
  fusion only changes which kernel the wgrad GEMM is. The output layer is this linear.
- **TransformerEngine's** `Linear`, `LayerNormLinear` and `LayerNormMLP` (FC1), the column-
  parallel linears of Megatron-Core's TE spec, in every release read: v0.8 `module.py`
  1099-1237 / 1945-2000 / 2934-3012; v1.0 `module/linear.py` 402-459, `layernorm_linear.py`
  411-499, `layernorm_mlp.py` 760-857; v1.11 linear.py 499-574; v2.8 linear.py 733-938;
  @d0067d0da linear.py 1122-1132 and 1351, layernorm_linear.py 900-910 and 1129,
  layernorm_mlp.py 1587-1598 and 1726 — unless userbuffers takes the collective
  (`ub_overlap_rs_dgrad` / `ub_bulk_wgrad`: `ExecutionSpec.tp_comm_overlap`, which hides every
  TP collective and supersedes this) or the wgrad GEMM is deferred (`delay_wgrad_compute`, TE
  2.3+, which Megatron-Core sets with its EP overlap's `--delay-wgrad-compute`: the collective
  is waited on at the end of the same backward with no GEMM in between).

The row-parallel linears have no grad-input collective (their backward all-gather with SP is
the input's, blocking), and the forward collectives stay blocking. With SP the column-parallel
backward also re-gathers its input for the wgrad GEMM (async, under the dgrad GEMM); Seer prices
that re-gather for no stack. Megatron's `CUDA_DEVICE_MAX_CONNECTIONS=1` only orders the two
kernels' launch (a warning in core_v0.4.0 layers.py 518-533, an error in Megatron-LM's
arguments.py 343-351); no row states it otherwise, so it is not read. GPT-NeoX's mpu, DeepSpeed's
Megatron forks, TorchTitan and Meta's stacks were not read and are not credited.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from starfabric.astral.seer import legacy_overlap, mcore_release, releases
from starfabric.astral.seer.statements import stated

YearMonth = releases.YearMonth

MEGATRON_LM_ASYNC_TP: YearMonth = (2021, 9)
"""Month Megatron-LM's column-parallel linear first ran its backward all-reduce asynchronously
beside the weight-gradient GEMM (NVIDIA/Megatron-LM merge 6e1bde1e0f, 2021-09-02; the v2.6 tag,
2021-08-27, does not have it)."""
APEX_ASYNC_TP: YearMonth = (2021, 10)
"""The same in Apex's apex/transformer/tensor_parallel/layers.py, which NeMo's Megatron GPT
built on (NVIDIA/apex 365fdc18, 2021-10-02)."""

ASYNC_ALLREDUCE = re.compile(r"async[-_ ]tensor[-_ ]model[-_ ]parallel[-_ ]allreduce", re.I)
"""Megatron-LM's switch as a row states it: `--no-async-tensor-model-parallel-allreduce` turns
the all-reduce form off, without SP (arguments.py sets it off with SP, whose reduce-scatter
stays async); `async_tensor_model_parallel_allreduce: false` the same (statements.stated)."""
SWITCH_IGNORED_MONTH: YearMonth = (2024, 5)
"""From core_v0.7.0 (NVIDIA/Megatron-LM a645f89671, 2024-05-30) to core_v0.15.0 arguments.py
keeps the switch as 'DEPRECATED. This flag is ignored.' (gone in core_v0.16.0): a row of a
later month runs the collective async whatever it states."""
SWITCH_IGNORED_RELEASE: mcore_release.Release = (0, 7)
"""The same as a Megatron-Core release."""

ASYNC_GRAD_INPUT: dict[str, str] = {
    "attn.tp_all_gather.bwd": "attn.qkv.wgrad",
    "attn.tp_all_reduce.bwd": "attn.qkv.wgrad",
    "mlp.tp_all_gather.bwd": "mlp.fc1.wgrad",
    "mlp.tp_all_reduce.bwd": "mlp.fc1.wgrad",
    "head.tp_all_gather.bwd": "head.logits.wgrad",
}
"""Backward TP collectives of `ops.backward_of` that stand for a column-parallel linear's
grad-input all-reduce (without SP; `ops` places it at the block's exit, the count is the
same) or reduce-scatter (with SP), and the weight-gradient GEMM that runs while it is in
flight."""

MEGATRON_CORE = re.compile(r"megatron[- _]?core|\bmcore\b|megatron[- _]?bridge|\bcore_[rv]\d", re.I)
"""A framework cell naming Megatron-Core (also as a Megatron-LM `core_r0.8.0` tag) or a stack
built on it (Megatron-Bridge): TE-spec or local linears, both asynchronous (module docstring)."""

NOT_READ_STACK_SETTINGS: dict[str, object] = {
    "torchtitan_memory": True,
    "torchtitan_op_sac": True,
    "eager_elementwise": True,
    "moe_torch_grouped_mm": True,
    "moe_fused_dispatch": True,
    "moe_atomic_unpermute": True,
    "deepspeed_bf16_pipe": True,
    "fsdp_collectives": "parameter",
}
"""`ExecutionSpec` settings only a TorchTitan or DeepSpeed run has (each field's description
names its stack): a user job stating one runs a stack this module does not credit, so it
blocks on the collective as `async_tp_backward` reads a row of that stack."""


def job_default(settings: Mapping[str, object]) -> bool:
    """`ExecutionSpec.tp_async_backward` for a job that does not state it: True (Megatron-Core
    and TE, the default stack) unless a setting in NOT_READ_STACK_SETTINGS names another."""
    return not any(settings.get(k) == v for k, v in NOT_READ_STACK_SETTINGS.items())


def async_tp_backward(
    framework: str | None, citation: str | None, sp: bool, notes: str | None = None
) -> bool:
    """Whether the row's column-parallel linears ran their backward grad-input collective beside
    the weight-gradient GEMM: every Megatron-Core (TE or local linears) release and every
    Megatron-LM / Apex SP release; without SP, Megatron-LM from MEGATRON_LM_ASYNC_TP and NeMo
    (Apex) from APEX_ASYNC_TP, unless the row states Megatron's switch off (ASYNC_ALLREDUCE)
    where it still worked. A deferred wgrad GEMM (`ExecutionSpec.ep_delay_wgrad`) leaves nothing
    to hide behind, for a row or a user job alike: `cost.make_context` turns the pairing off."""
    which = legacy_overlap.stack(framework)
    off = not sp and stated(ASYNC_ALLREDUCE, framework, notes) is False
    if which is None:
        if not MEGATRON_CORE.search(framework or ""):
            return False
        release = mcore_release.megatron_core_release(framework, citation)
        return not (off and release is not None and release < SWITCH_IGNORED_RELEASE)
    if sp:
        return True
    month = legacy_overlap.software_month(framework, citation)
    since = MEGATRON_LM_ASYNC_TP if which == "megatron-lm" else APEX_ASYNC_TP
    if off and which == "megatron-lm" and month is not None and month < SWITCH_IGNORED_MONTH:
        return False
    return month is not None and month >= since
