"""Megatron-FSDP's cross-host collectives progress while the layer waits on intra-host ones.

Megatron-FSDP (NVIDIA/Megatron-LM `megatron/core/distributed/custom_fsdp/` at 1e057005, the
commit the Model Zoo's Qwen3-235B Megatron-FSDP run names) issues a layer's parameter
all-gather as an asynchronous NCCL collective on its data-parallel group
(`AllGatherPipeline.all_gather_params`: `_coalescing_manager(dp_group, async_ops=True)`,
prefetching the next FSDP unit), and the gradient reduce-scatter on a side stream
(`GradReducePipeline._mark_bucket_ready`: `side_stream_for_buffer_copy_and_grad_accum`).
Neither waits on the compute stream once issued: it needs wall-clock time on its own wires,
not compute kernels to hide behind. When the FSDP groups span hosts (their traffic rides the
InfiniBand NICs) and the layer's other collectives stay inside a host (tensor parallelism,
DeepEP's intra-node dispatch and combine over NVLink), the time the compute stream spends
exposed on those intra-host collectives is time the FSDP transfer still runs in.

`cost.op_costs` therefore hides a Megatron-FSDP layer's gathers and reduce-scatters behind its
compute *and* behind the exposed time of the collectives on intra-host groups, with no
`cost.DP_OVERLAP_RESIDUAL` on the latter (no GEMM runs beside them to lose SMs or HBM
bandwidth). Nothing here is fitted: the groups' placement is `comm.layout_groups`'.

Other ZeRO-3/FSDP implementations keep the window they had (compute only); whether their
streams behave the same is not read from their code here.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from starfabric.astral.seer.comm import layout_groups
from starfabric.astral.seer.parallel import ExecutionSpec, Layout

MEGATRON_FSDP = re.compile(r"megatron[- ]?fsdp|custom[- _]?fsdp", re.I)
"""How a row's cells name Megatron-Core's own FSDP (`--use-megatron-fsdp`, earlier
`--use-custom-fsdp`), as opposed to PyTorch FSDP/FSDP2 or DeepSpeed ZeRO-3."""

FSDP_GROUPS = ("fsdp_dp", "fsdp_edp")
"""The op-table groups of ZeRO-3/FSDP parameter collectives (`ops._fsdp`)."""


def states_megatron_fsdp(*cells: str | None) -> bool:
    """Whether any of a row's cells (data-parallel sharding, framework) names Megatron-FSDP."""
    return any(MEGATRON_FSDP.search(c or "") for c in cells)


def side_groups(ex: ExecutionSpec, lay: Layout) -> tuple[str, ...]:
    """Groups whose exposed collectives a Megatron-FSDP transfer overlaps: those inside one
    host, when every FSDP group the layer uses spans hosts. Empty for other FSDP/ZeRO
    implementations, ZeRO < 3, and when an FSDP group stays inside a host (it would share
    NVLink with them)."""
    if not ex.megatron_fsdp or ex.zero < 3:
        return ()
    groups = layout_groups(ex, lay)
    used = [groups["fsdp_dp"]]
    if lay.ep > 1:
        used.append(groups["fsdp_edp"])
    if any(g.size > 1 and g.nodes <= 1 for g in used):
        return ()
    return tuple(
        name
        for name, g in groups.items()
        if name not in FSDP_GROUPS and g.size > 1 and g.nodes <= 1
    )


def side_window_s(
    groups: np.ndarray[Any, Any],
    is_comm: np.ndarray[Any, Any],
    exposed: np.ndarray[Any, Any],
    side: tuple[str, ...],
) -> float:
    """Seconds the compute stream spends exposed on collectives of the `side` groups."""
    if not side:
        return 0.0
    mask = is_comm & np.isin(groups, np.asarray(side))
    return float(exposed[mask].sum())


def split_exposure(total: float, compute: float, side: float, residual: float) -> float:
    """Exposed seconds of `total` FSDP transfer time: hidden first behind `compute` (paying
    `residual` of that hidden time), then behind `side` seconds of intra-host collective
    waiting (free), the rest on the critical path."""
    behind_compute = min(total, compute)
    behind_side = min(total - behind_compute, max(0.0, side))
    return total - behind_compute - behind_side + residual * behind_compute
