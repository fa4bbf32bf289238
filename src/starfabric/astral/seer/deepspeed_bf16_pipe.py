"""DeepSpeed's pipeline engine under BF16: a full FP32 gradient all-reduce, then a BF16 gather.

BF16 with pipeline parallelism entered DeepSpeed in v0.6.2 (PR #1801, "bf16+pipeline
parallelism", 2022-04-19). From then on `PipelineEngine._exec_reduce_grads`, run once after the
pipeline flush, sends a BF16 job to `_bf16_reduce_grads`, which calls
`buffered_allreduce_fallback(grads=self.optimizer.get_grads_for_reduction())`: an all-reduce of
the optimizer's whole FP32 gradient buffer (`BF16_Optimizer.fp32_groups_gradients_flat`), not a
reduce-scatter of it, although `BF16_Optimizer` then steps only its rank's partition of the FP32
master weights and moments (ZeRO-1's memory) and all-gathers the updated BF16 partitions
(`all_gather_dp_groups(partitioned_param_groups=self.bf16_partitioned_groups, ...)`). With ZeRO
stage 1 configured the engine refuses BF16 + pipeline (it raises at start-up), so every BF16
DeepSpeed pipeline run takes this path (read at v0.6.2, v0.8.0, v0.10.0, v0.12.0 and v0.14.0:
`runtime/pipe/engine.py`, `runtime/bf16_optimizer.py`). Megatron-DeepSpeed's GPT pipeline model
runs on that engine whenever PP > 1.

So where Seer prices a ZeRO-1 reduce-scatter of the FP32 gradients, such a run moves twice the
bytes (an all-reduce is a reduce-scatter plus an all-gather, `comm._FACTOR`); the BF16
parameter gather stays. Nothing is fitted: the traffic follows from the collective the code
calls. Applied (`validate`) to a row whose framework cell names DeepSpeed (Megatron-DeepSpeed
included) with PP > 1 and BF16, unless the cell names a DeepSpeed release before
`BF16_PIPE_RELEASE` (that upstream code had no BF16 pipeline path; what such a run ran is not
known). FP16 pipeline runs (GLM-130B) reduce through ZeRO's own partitioned reduce and are not
touched.
"""

from __future__ import annotations

import re
from typing import Any

from starfabric.astral.seer.statements import stated

BF16_PIPE_RELEASE = (0, 6, 2)
"""First DeepSpeed release with BF16 + pipeline parallelism (microsoft/DeepSpeed PR #1801,
commit 56c52238, 2022-04-19; tag v0.6.2)."""

DEEPSPEED = re.compile(r"deep[- ]?speed", re.I)
_RELEASE = re.compile(r"deep[- ]?speed\s*(?:==\s*|v(?:ersion)?\s*)?(\d+)\.(\d+)(?:\.(\d+))?", re.I)


def named_release(framework: str | None) -> tuple[int, int, int] | None:
    """The DeepSpeed release a framework cell names ("DeepSpeed 0.6.1", "deepspeed==0.8.0",
    "DeepSpeed v0.5.x" → (0, 5, 0)), else None."""
    m = _RELEASE.search(framework or "")
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def runs_bf16_pipe_path(framework: str | None, precision: str) -> bool:
    """Whether a run is BF16 on DeepSpeed at a release that has the BF16 pipeline path (or
    names none): with PP > 1 its engine all-reduces the FP32 gradients (`grad_coll_factor`).
    A negated mention ("Megatron-LM, not DeepSpeed") does not count."""
    if precision != "bf16" or not stated(DEEPSPEED, framework):  # "no DeepSpeed": not read
        return False
    rel = named_release(framework)
    return rel is None or rel >= BF16_PIPE_RELEASE


def all_reduces_gradients(zero: Any, bf16_pipe: bool, pp: Any) -> Any:
    """Whether the gradient reduction is an all-reduce of the whole buffer (no sharding, or
    DeepSpeed's BF16 pipeline engine at PP > 1) rather than a sharded optimizer's
    reduce-scatter; on scalars (predict) or on arrays of layouts (the search's evaluate)."""
    return (zero == 0) | (bf16_pipe & (pp > 1))


def grad_coll_factor(zero: int, bf16_pipe: bool, pp: int) -> float:
    """Ring traffic of the gradient reduction in units of one reduce-scatter of the buffer:
    2 for an all-reduce (a reduce-scatter and an all-gather), 1 for a reduce-scatter."""
    return 2.0 if all_reduces_gradients(zero, bf16_pipe, pp) else 1.0


__all__ = [
    "BF16_PIPE_RELEASE",
    "DEEPSPEED",
    "all_reduces_gradients",
    "grad_coll_factor",
    "named_release",
    "runs_bf16_pipe_path",
]
