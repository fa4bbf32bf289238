"""Megatron-LM's distributed optimizer: the dtype of its parameter all-gather, by release.

After the optimizer step, Megatron-LM's distributed optimizer (`--use-distributed-optimizer`,
ZeRO-1 over the data-parallel group) all-gathers the updated parameter shards so every DP rank
holds the whole model again. Until upstream commit 57bfa7ca ("Perform distributed optimizer's
all-gather in param dtype (instead of grad dtype)", NVIDIA/Megatron-LM, 2022-09-30) that gather
ran on the DDP grad buffer (`gather_model_params`: `torch.distributed._all_gather_base(gbuf,
gbuf_views[data_parallel_rank], group=data_parallel_group)`, then `param.copy_(param.main_grad)`),
and the grad buffer is FP32 whenever gradients accumulate in FP32 — which `arguments.py` forces
for BF16 ("bfloat16 requires gradient accumulation and all-reduce to be done in fp32"). So a
BF16 run of that code moves 4 bytes per parameter in the gather, twice the 2 bytes of a BF16
parameter gather that later Megatron-LM, Megatron-Core, DeepSpeed's BF16 optimizer and FSDP
send. Forks branched before that commit keep the old gather: BigCode's Megatron-LM at c988cf25
(2023-05-12, the launch script of StarCoderBase) still has it (`megatron/optimizer/
distrib_optimizer.py`, `megatron/model/distributed.py` `_get_buffer_type`).

What a row must state (`row_gather_dtype`), read from its framework, data-parallel and notes
cells, never from its source: an all-gather of parameters through the FP32 grad buffer / in the
grad dtype ("parameters all-gathered in the fp32 grad buffer's dtype"), not negated; or plain
Megatron-LM (not Core / NeMo) with its distributed optimizer dated before
`PARAM_DTYPE_GATHER_MONTH` by a YYYY-MM or a release the cell names. Nothing here is fitted:
the bytes per parameter follow from the dtypes.
"""

from __future__ import annotations

import re
from typing import Literal

from starfabric.astral.seer import releases
from starfabric.astral.seer.statements import stated

GatherDtype = Literal["param", "grad"]

PARAM_DTYPE_GATHER_COMMIT = "57bfa7caba"
"""NVIDIA/Megatron-LM commit that moved the distributed optimizer's all-gather from the grad
buffer's dtype to the parameters' (merged 2022-09-30, branch lmcafee/byte-buffer)."""

PARAM_DTYPE_GATHER_MONTH = (2022, 10)
"""First month whose upstream Megatron-LM has that commit (merged on 2022-09-30)."""

PARAM_BYTES = 2.0
"""Bytes per parameter of a BF16/FP16 parameter all-gather (the model's 16-bit weights)."""

GRAD_BUFFER_GATHER = re.compile(
    r"all[- ]?gather\w*(?:[^;]{0,80}?grad(?:ient)?s?['’]?\s*(?:buffer|dtype)"
    r"|(?:\s+\w+){0,3}?\s+(?:in|as)\s+(?:the\s+)?(?:fp32|float32)\b)",
    re.I,
)
"""A cell stating the parameter all-gather through the grad buffer or in its (FP32) dtype:
"parameters all-gathered in the fp32 grad buffer's dtype", "all-gather in grad dtype",
"all-gather of parameters in fp32". An FP32 mention elsewhere in the clause ("all-gather
overlapped, grads in fp32": the gradients' dtype, not the gather's) does not count."""

DISTRIBUTED_OPTIMIZER = re.compile(r"distributed[- _]optimizer", re.I)
"""Megatron-LM's distributed optimizer, named ("--use-distributed-optimizer",
"distributed optimizer")."""


def gather_bytes_per_param(dtype: GatherDtype, grad_bytes: float) -> float:
    """Bytes per parameter the distributed optimizer's all-gather moves: the grad buffer's
    element size (`schedule.grad_bytes`: 4 under BF16) for the pre-57bfa7ca gather, else the
    16-bit parameter's."""
    return grad_bytes if dtype == "grad" else PARAM_BYTES


def _plain_megatron_lm(framework: str) -> bool:
    fw = framework.strip().lower()
    return fw.startswith("megatron-lm") and "core" not in fw and "nemo" not in fw


def row_gather_dtype(
    framework: str | None, zero_cell: str | None, notes: str | None
) -> tuple[GatherDtype, str] | None:
    """("grad", why) when a row's cells state the grad-buffer gather or date a plain
    Megatron-LM distributed optimizer before `PARAM_DTYPE_GATHER_MONTH`; None otherwise (the
    parameter-dtype gather of every later stack)."""
    said = stated(GRAD_BUFFER_GATHER, framework, zero_cell, notes)
    if said:
        return "grad", "stated: parameters all-gathered in the grad buffer's dtype"
    if said is False:  # "not in fp32": the row says it is the parameter dtype
        return None
    fw = framework or ""
    if not _plain_megatron_lm(fw) or not stated(DISTRIBUTED_OPTIMIZER, fw, zero_cell):
        return None
    when = releases.release_date(fw)
    if when is not None and when < PARAM_DTYPE_GATHER_MONTH:
        return "grad", (
            f"Megatron-LM dated {when[0]}-{when[1]:02d}, before {PARAM_DTYPE_GATHER_COMMIT} "
            "(2022-09-30): all-gather in the grad buffer's dtype"
        )
    return None


__all__ = [
    "DISTRIBUTED_OPTIMIZER",
    "GRAD_BUFFER_GATHER",
    "PARAM_BYTES",
    "PARAM_DTYPE_GATHER_COMMIT",
    "PARAM_DTYPE_GATHER_MONTH",
    "GatherDtype",
    "gather_bytes_per_param",
    "row_gather_dtype",
]
