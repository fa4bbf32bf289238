"""Expert all-to-all timed on the actual topology: DeepEP-style dispatch/combine flows, routed
by ECMP on the built cluster and run on a network-simulation backend.

`comm.collective_time` prices collectives with bus-bandwidth formulas; for the MoE all-to-all
— the collective whose cost depends most on where ranks sit and how ECMP spreads QPs — Seer can
instead build the cluster (`system.topology`: a ClusterSpec file or mapping), place the EP
group's ranks on GPUs in Megatron rank order, and simulate one layer's dispatch and combine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from starfabric.astral.collectives import MoEShape, moe_alltoall
from starfabric.astral.netsim import Analytical, Flows, FlowSim
from starfabric.astral.routing import route_flows
from starfabric.astral.topology import ClusterSpec, Topology, build
from starfabric.config import parse_spec, read_mapping
from starfabric.errors import InfeasibleError

STEP_LATENCY_S = 5e-6
"""Per-dispatch software latency (kernel launch, signalling) added to the simulated transfer
(assumption, as for an NCCL step)."""
TOKEN_SAMPLE = 512
"""Tokens per rank actually routed; the simulated time is scaled linearly to the real count
(bandwidth-bound: 256, 512 and 1,024 tokens give the same per-token time within 2% on a
64-rank DeepSeek-V3 dispatch)."""
FP8_DISPATCH_BYTES_PER_ELEM = 1.0 + 4.0 / 128
"""DeepEP dispatches FP8 tokens with one fp32 scale per 128 values (DeepSeek-V3 report)."""


def _hash(
    src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], qp: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    """Splitmix64 of (src, dst, QP): the 5-tuple ECMP hashes on."""
    with np.errstate(over="ignore"):
        x = (src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (
            dst.astype(np.uint64) << np.uint64(21)
        )
        x ^= qp.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out: npt.NDArray[np.uint64] = x ^ (x >> np.uint64(31))
        return out


@lru_cache(maxsize=8)
def _build(spec_json: str) -> Topology:
    return build(ClusterSpec.model_validate_json(spec_json))


def cluster_spec(ref: str | dict[str, Any], gpus: int) -> ClusterSpec:
    """The ClusterSpec of a job's `system.topology` (file path or mapping). Without a stated
    size, pod-based builders (astral, dual-plane) get one pod, others `gpus` GPUs."""
    data = read_mapping(ref) if isinstance(ref, str | Path) else dict(ref)
    if data.get("pods") is None and data.get("gpus") is None:
        if str(data.get("topology", "astral")) in ("astral", "dual-plane"):
            data["pods"] = 1
        else:
            data["gpus"] = gpus
    return parse_spec(ClusterSpec, data, source="system.topology")


@dataclass
class TopologyComm:
    """MoE all-to-all times on a built topology (cached per shape)."""

    spec: ClusterSpec
    backend: Literal["analytical", "flow"] = "flow"
    qps_per_peer: int = 4
    _cache: dict[tuple[Any, ...], float] = field(default_factory=dict)

    @property
    def topology(self) -> Topology:
        """The built cluster (built once per spec in this process)."""
        return _build(self.spec.model_dump_json())

    def moe_alltoall_s(
        self,
        *,
        ranks: int,
        stride: int,
        tokens_per_rank: int,
        hidden: int,
        experts: int,
        topk: int,
        max_nodes: int,
        fp8: bool,
        phase: Literal["dispatch", "combine"],
    ) -> float:
        """Seconds of one layer's dispatch or combine among `ranks` EP ranks spaced `stride`
        GPUs apart (Megatron order), on this topology."""
        key = (ranks, stride, tokens_per_rank, hidden, experts, topk, max_nodes, fp8, phase)
        if key in self._cache:
            return self._cache[key]
        topo = self.topology
        local = max(1, min(ranks, self.spec.gpus_per_host // max(1, stride)))
        if ranks * stride > topo.n_gpus:
            raise InfeasibleError(
                f"EP group of {ranks} ranks (stride {stride}) does not fit the "
                f"{topo.n_gpus}-GPU topology",
                fix="give a larger system.topology",
            )
        nodes = max(1, ranks // local)
        sample = min(tokens_per_rank, TOKEN_SAMPLE)
        shape = MoEShape(
            ranks=ranks, local=local, tokens_per_rank=sample, hidden=hidden,
            experts=experts, topk=topk,
            max_nodes_per_token=min(max_nodes, nodes) if max_nodes > 0 else nodes,
            dispatch_bytes_per_elem=FP8_DISPATCH_BYTES_PER_ELEM if fp8 else 2.0,
            qps_per_peer=self.qps_per_peer, nvlink_forwarding=local > 1,
        )  # fmt: skip
        plan = moe_alltoall(shape, phase)
        gpus = np.arange(ranks, dtype=np.int64) * stride
        total = 0.0
        cap, lat = topo.link_capacity_bps, topo.link_latency_s
        for step in plan.steps:
            src, dst = gpus[step.src], gpus[step.dst]
            routes = route_flows(topo, src, dst, _hash(src, dst, step.qp))
            if not routes.reachable.all():
                raise InfeasibleError("an all-to-all flow has no path", fix="check the topology")
            sim = FlowSim(cap, lat) if self.backend == "flow" else Analytical(cap, lat)
            sim.submit(Flows(step.size_bytes.astype(np.float64), routes.offsets, routes.links))
            sim.advance()
            bw = sim.results().makespan_s * step.scale * tokens_per_rank / sample
            total += step.repeat * (bw + STEP_LATENCY_S)
        self._cache[key] = total
        return total
