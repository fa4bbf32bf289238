"""TP, CP, DP and PP communication timed on the actual topology and placement of the ranks.

When a job names a cluster (`system.topology`), Seer times one representative group per
parallel dimension with the collectives models: the group's ranks are placed on GPUs in
Megatron rank order (TP fastest inside a node, then CP, then DP, PP outermost: a group of `size`
ranks `stride` GPUs apart starting at GPU 0), the collective is decomposed the way NCCL does it
(`collectives.nccl_plan`: rings inside a node, rail-matched rings or tree all-reduce across
nodes; `sendrecv` for PP hand-offs; a neighbour ring for ring-attention KV exchange), and the
plan runs on the built cluster (ECMP routing + network backend). Times are cached per
(op, bytes, group shape), so a prediction pays for each distinct collective once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from starfabric.astral.collectives import nccl_plan, ring, sendrecv
from starfabric.astral.collectives.plan import Plan
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.seer.topocomm import _build
from starfabric.astral.topology import ClusterSpec, Topology
from starfabric.errors import ConfigError, InfeasibleError

COLLECTIVE_LAUNCH_S = 10.0e-6
"""Fixed cost of launching one NCCL collective, added to the simulated steps (assumption, as in
`comm.COLLECTIVE_LAUNCH_S`)."""

_NCCL_OP = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "all_to_all": "alltoall",
}


@dataclass(frozen=True)
class GroupShape:
    """A representative group: `size` ranks `stride` GPUs apart from GPU 0 (Megatron order)."""

    size: int
    stride: int


def megatron_shapes(
    tp: int, cp: int, dp: int, pp: int, ep: int, etp: int, edp: int
) -> dict[str, GroupShape]:
    """Representative group per parallel dimension under Megatron's rank order
    (rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)); expert groups split
    the tp*cp*dp ranks of a stage as etp fastest, then ep, then edp)."""
    return {
        "tp": GroupShape(tp, 1),
        "cp": GroupShape(cp, tp),
        "dp": GroupShape(dp, tp * cp),
        "dp_cp": GroupShape(dp * cp, tp),
        "pp": GroupShape(pp, tp * cp * dp),
        "etp": GroupShape(etp, 1),
        "ep": GroupShape(ep, etp),
        "edp": GroupShape(edp, etp * ep),
    }


@dataclass
class TopologyCollectives:
    """Collective times of placed groups on a built cluster (cached per op, size, shape)."""

    spec: ClusterSpec
    backend: Literal["analytical", "flow"] = "flow"
    _cache: dict[tuple[str, float, int, int], float] = field(default_factory=dict)

    @property
    def topology(self) -> Topology:
        """The built cluster (built once per spec in this process)."""
        return _build(self.spec.model_dump_json())

    def plan(self, kind: str, nbytes: float, shape: GroupShape) -> Plan:
        """The NCCL-style plan of collective `kind` (seer's names) over `shape`."""
        n, gpn = shape.size, self.spec.gpus_per_host
        if kind == "p2p":
            return sendrecv(nbytes)
        if kind == "ring_p2p":
            # Ring attention: every rank passes KV to its neighbour n-1 times, nbytes in all.
            return ring("all_gather", n, nbytes * n / (n - 1))
        if kind not in _NCCL_OP:
            raise ConfigError(
                f"unknown collective {kind!r}", fix=f"use one of {sorted(_NCCL_OP)} or p2p"
            )
        local = 1 if shape.stride >= gpn else max(1, min(n, gpn // shape.stride))
        if n % local:
            local = 1
        return nccl_plan(_NCCL_OP[kind], n, nbytes, local)

    def time(self, kind: str, nbytes: float, shape: GroupShape) -> float:
        """Seconds for one collective over `nbytes` (the full buffer, as `comm.collective_time`
        takes it) on the placed group; p2p is one hand-off between adjacent group members."""
        if shape.size <= 1 or nbytes <= 0:
            return 0.0
        key = (kind, float(nbytes), shape.size, shape.stride)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        plan = self.plan(kind, nbytes, shape)
        topo = self.topology
        span = (plan.ranks - 1) * shape.stride if kind != "p2p" else shape.stride
        if span >= topo.n_gpus:
            raise InfeasibleError(
                f"a group of {shape.size} ranks {shape.stride} GPUs apart does not fit the "
                f"{topo.n_gpus}-GPU topology",
                fix="give a larger system.topology",
            )
        placement = (
            np.array([0, shape.stride], dtype=np.int64)
            if kind == "p2p"
            else np.arange(plan.ranks, dtype=np.int64) * shape.stride
        )
        res = run_plan(topo, plan, placement=placement, backend=self.backend)
        out = COLLECTIVE_LAUNCH_S + res.time_s
        self._cache[key] = out
        return out
