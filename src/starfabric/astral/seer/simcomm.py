"""`CommModel` simulated on the actual topology and placement of the ranks, and the one place
that picks the communication model of a job (`comm_model`).

When a job names a cluster (`system.topology`), Seer builds it and times one representative
group per parallel dimension with the collectives models: the group's ranks are placed on GPUs
in Megatron rank order (TP fastest inside a node, then CP, then DP, PP outermost: a group of
`size` ranks `stride` GPUs apart starting at GPU 0), the collective is decomposed the way NCCL
does it (`collectives.nccl_plan`: rings inside a node, rail-matched rings or tree all-reduce
across nodes; `sendrecv` for PP hand-offs; a neighbour ring for ring-attention KV exchange),
and the plan runs on the built cluster (ECMP routing + network backend). The MoE all-to-all —
the collective whose cost depends most on where ranks sit and how ECMP spreads QPs — runs as
DeepEP-style dispatch/combine flows (`collectives.moe_alltoall`). Times are cached per
(op, bytes, group shape), so a prediction pays for each distinct collective once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from starfabric.astral.collectives import MoEShape, moe_alltoall, nccl_plan, ring, sendrecv
from starfabric.astral.collectives.plan import Plan
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.netsim import Flows, make_backend
from starfabric.astral.routing import route_flows
from starfabric.astral.seer.comm import CommModel, FormulaComm, Kind, Phase, formula_comm
from starfabric.astral.seer.efficiency import Efficiency
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, SystemSpec, cp_split
from starfabric.astral.topology import ClusterSpec, Topology, build
from starfabric.config import parse_spec, read_mapping
from starfabric.errors import ConfigError, InfeasibleError

COLLECTIVE_LAUNCH_S = 10.0e-6
"""Fixed cost of launching one NCCL collective, added to the simulated steps (assumption, as in
`comm.COLLECTIVE_LAUNCH_S`)."""
STEP_LATENCY_S = 5e-6
"""Per-dispatch software latency (kernel launch, signalling) added to the simulated expert
all-to-all transfer (assumption, as for an NCCL step)."""
TOKEN_SAMPLE = 512
"""Tokens per rank actually routed; the simulated time is scaled linearly to the real count
(bandwidth-bound: 256, 512 and 1,024 tokens give the same per-token time within 2% on a
64-rank DeepSeek-V3 dispatch)."""
FP8_DISPATCH_BYTES_PER_ELEM = 1.0 + 4.0 / 128
"""DeepEP dispatches FP8 tokens with one fp32 scale per 128 values (DeepSeek-V3 report)."""

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


@dataclass(frozen=True)
class MoEDims:
    """What an expert all-to-all routes: hidden size, experts, top-k, node limit per token."""

    hidden: int
    experts: int
    topk: int
    max_nodes: int


def megatron_shapes(
    tp: int, cp: int, dp: int, pp: int, ep: int, etp: int, edp: int, cp_a2a: int = 1
) -> dict[str, GroupShape]:
    """Representative group per parallel dimension under Megatron's rank order
    (rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)); expert groups split
    the tp*cp*dp ranks of a stage as etp fastest, then ep, then edp). Hierarchical CP's two
    levels (`cp_comm`, as `comm.layout_groups` places them): the all-to-all over `cp_a2a`
    adjacent CP ranks, the ring over the CP ranks `cp_a2a` apart."""
    return {
        "tp": GroupShape(tp, 1),
        "cp": GroupShape(cp, tp),
        "cp_a2a": GroupShape(cp_a2a, tp),
        "cp_p2p": GroupShape(cp // cp_a2a, tp * cp_a2a),
        "dp": GroupShape(dp, tp * cp),
        "dp_cp": GroupShape(dp * cp, tp),
        "pp": GroupShape(pp, tp * cp * dp),
        "etp": GroupShape(etp, 1),
        "ep": GroupShape(ep, etp),
        "edp": GroupShape(edp, etp * ep),
    }


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
class SimulatedComm:
    """`CommModel` on a built cluster: groups named in `shapes` run their NCCL plan there, the
    expert all-to-all (with `moe`) its DeepEP flows; other groups (ZeRO-3 parameter groups)
    take the `fallback` formulas."""

    spec: ClusterSpec
    backend: Literal["analytical", "flow"] = "flow"
    shapes: dict[str, GroupShape] = field(default_factory=dict)
    fallback: FormulaComm | None = None
    moe: MoEDims | None = None
    qps_per_peer: int = 4
    _cache: dict[tuple[Any, ...], float] = field(default_factory=dict)

    @property
    def topology(self) -> Topology:
        """The built cluster (built once per spec in this process)."""
        return _build(self.spec.model_dump_json())

    def time(
        self, kind: Kind, nbytes: float, group: str, *, phase: Phase | None = None,
        fp8: bool = False,
    ) -> float:  # fmt: skip
        """Seconds of one collective on `group` (see `CommModel`)."""
        if self.moe is not None and group == "ep" and kind == "all_to_all" and phase is not None:
            ranks = self.shapes["ep"].size
            tokens = max(1, round(nbytes / (2.0 * self.moe.topk * self.moe.hidden)))
            return self.moe_alltoall_s(
                ranks=ranks, stride=self.shapes["ep"].stride, tokens_per_rank=tokens,
                hidden=self.moe.hidden, experts=self.moe.experts, topk=self.moe.topk,
                max_nodes=self.moe.max_nodes, fp8=fp8, phase=phase,
            )  # fmt: skip
        if group in self.shapes:
            op = "ring_p2p" if kind == "p2p" and group != "pp" else kind
            return self.placed(op, float(nbytes), self.shapes[group])
        if self.fallback is None:
            raise ConfigError(
                f"no placed group {group!r} on the topology", fix="give shapes or a fallback"
            )
        return self.fallback.time(kind, nbytes, group, phase=phase, fp8=fp8)

    def plan(self, kind: str, nbytes: float, shape: GroupShape) -> Plan:
        """The NCCL-style plan of collective `kind` (seer's names; "ring_p2p" is ring-attention
        KV exchange among neighbours) over `shape`."""
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

    def placed(self, kind: str, nbytes: float, shape: GroupShape) -> float:
        """Seconds for one collective over `nbytes` (the full buffer) on the placed group;
        p2p is one hand-off between adjacent group members."""
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
        phase: Phase,
    ) -> float:
        """Seconds of one layer's dispatch or combine among `ranks` EP ranks spaced `stride`
        GPUs apart (Megatron order), on this topology."""
        key = ("moe", ranks, stride, tokens_per_rank, hidden, experts, topk, max_nodes, fp8,
               phase)  # fmt: skip
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
            sim = make_backend(self.backend, cap, lat)
            sim.submit(Flows(step.size_bytes.astype(np.float64), routes.offsets, routes.links))
            sim.advance()
            bw = sim.results().makespan_s * step.scale * tokens_per_rank / sample
            total += step.repeat * (bw + STEP_LATENCY_S)
        self._cache[key] = total
        return total


def comm_model(
    ex: ExecutionSpec, lay: Layout, eff: Efficiency, system: SystemSpec | None = None,
    model: ModelSpec | None = None,
) -> CommModel:  # fmt: skip
    """The communication model of a job — the one place it is chosen: simulated on the cluster
    when `system.topology` names one (expert all-to-all as DeepEP flows for an MoE model with
    EP > 1), else the formulas."""
    formula = formula_comm(ex, lay, eff, model)
    if system is None or system.topology is None:
        if ex.ep_dispatch_dtype == "fp8" and ex.moe_dispatcher != "deepep":
            raise ConfigError(
                f"execution.ep_dispatch_dtype = 'fp8' with moe_dispatcher "
                f"{ex.moe_dispatcher!r}: the formula prices NCCL's all-to-all in 16 bit (only "
                "DeepEP's dispatch, or a topology's simulated one, moves FP8 rows)",
                fix="set moe_dispatcher: deepep, give system.topology, or drop ep_dispatch_dtype",
            )
        return formula
    if model is not None and model.is_moe and lay.ep > 1:
        for field, unset in (("moe_round_robin_routing", False), ("moe_flex_backend", "deepep")):
            if getattr(ex, field) != unset:
                raise ConfigError(
                    f"execution.{field} = {getattr(ex, field)!r} with system.topology: the "
                    "simulated expert all-to-all routes random top-k as DeepEP V1 flows and "
                    "would price it as if unset",
                    fix=f"drop system.topology (formula model) or drop {field}",
                )
    spec = cluster_spec(system.topology, system.gpus)
    moe = (
        MoEDims(model.hidden, model.moe_experts, model.moe_topk, model.moe_max_nodes)
        if model is not None and model.is_moe and lay.ep > 1
        else None
    )
    return SimulatedComm(
        spec,
        system.network_backend,
        shapes=megatron_shapes(
            lay.tp, lay.cp, lay.dp, lay.pp, lay.ep, lay.etp, lay.edp, cp_split(ex, lay)[0]
        ),
        fallback=formula,
        moe=moe,
    )
