"""Run a collective's plan on a topology: placement → ECMP paths → network backend → times.

Each distinct step is simulated once with all its flows starting together; its time stands for
its `repeat` identical steps, and a sampled step's bandwidth time is scaled up by `scale`.
Every step also pays `step_latency_s` (NCCL's per-step software and protocol latency), which
the flow model does not see. Results are reported the way nccl-tests does (algbw, busbw).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from starfabric.astral.collectives.plan import IntArray, Plan, Step
from starfabric.astral.netsim import Flows, make_backend
from starfabric.astral.netsim.transport import (
    ADAPTIVE,
    AR_CHOICES,
    adaptive_paths,
    check_transport,
    contended_capacity,
    host_limited_capacity,
)
from starfabric.astral.routing import route_flows
from starfabric.astral.topology import LINK_NIC, LINK_NVLINK, Topology
from starfabric.errors import ConfigError, InfeasibleError

STEP_LATENCY_S = 5e-6
"""Assumption: per-step latency of an NCCL step (kernel + protocol handshake), ~5 µs; fitted
per fabric from nccl-tests small-message times by `fit`."""

_M64 = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def flow_hash(src: IntArray, dst: IntArray, qp: IntArray, seed: int = 0) -> npt.NDArray[np.uint64]:
    """A 64-bit 5-tuple hash per flow (splitmix64 of src, dst, QP): what ECMP sees."""
    with np.errstate(over="ignore"):
        x = (src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (
            dst.astype(np.uint64) << np.uint64(21)
        )
        x ^= qp.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9) + np.uint64(seed)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@dataclass(frozen=True)
class StepTime:
    phase: str
    flows: int
    time_s: float  # one instance, bandwidth part, already scaled
    repeat: int
    max_link_util: float  # busiest link's bytes / (capacity × time)
    imbalance: float  # max / mean bytes over the network links the step used


@dataclass(frozen=True)
class CollectiveResult:
    """Time and bandwidths of one collective, per nccl-tests' definitions."""

    op: str
    algorithm: str
    ranks: int
    size_bytes: float
    time_s: float
    bus_factor: float
    steps: tuple[StepTime, ...]
    link_bytes: npt.NDArray[np.float64] = field(repr=False)

    @property
    def algbw_gbps(self) -> float:
        return self.size_bytes / self.time_s / 1e9

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * self.bus_factor


def _concat_paths(
    p1: IntArray, l1: IntArray, p2: IntArray, l2: IntArray
) -> tuple[IntArray, IntArray]:
    """Per flow, path 1 followed by path 2 (CSR)."""
    n = len(p1) - 1
    len1, len2 = np.diff(p1), np.diff(p2)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(len1 + len2, out=ptr[1:])
    out = np.empty(int(ptr[-1]), np.int64)
    o1 = np.repeat(np.arange(n), len1)
    out[ptr[o1] + np.arange(len(l1)) - p1[o1]] = l1
    o2 = np.repeat(np.arange(n), len2)
    out[ptr[o2] + len1[o2] + np.arange(len(l2)) - p2[o2]] = l2
    return ptr, out


def _halves(ptr: IntArray, links: IntArray, half: IntArray) -> tuple[IntArray, IntArray]:
    """Keep the first link (half 1), the last link (half 2) or all of each flow's path."""
    lengths = np.diff(ptr)
    keep = np.where(half == 0, lengths, np.minimum(lengths, 1))
    start = np.where(half == 2, ptr[1:] - keep, ptr[:-1])
    new_ptr = np.zeros(len(ptr), np.int64)
    np.cumsum(keep, out=new_ptr[1:])
    owner = np.repeat(np.arange(len(keep)), keep)
    offset = np.arange(int(new_ptr[-1])) - new_ptr[owner]
    return new_ptr, links[start[owner] + offset]


def step_paths(
    topo: Topology,
    step: Step,
    gpus: IntArray,
    *,
    seed: int = 0,
    polarized: bool = False,
    failed: npt.NDArray[np.bool_] | None = None,
) -> tuple[IntArray, IntArray]:
    """ECMP paths (CSR) of a step's flows; forwarded flows go src → via over NVLink, then on."""
    ptr, links = _full_paths(topo, step, gpus, seed=seed, polarized=polarized, failed=failed)
    if step.half is not None:
        return _halves(ptr, links, step.half)
    return ptr, links


def _full_paths(
    topo: Topology,
    step: Step,
    gpus: IntArray,
    *,
    seed: int,
    polarized: bool,
    failed: npt.NDArray[np.bool_] | None,
) -> tuple[IntArray, IntArray]:
    src, dst = gpus[step.src], gpus[step.dst]
    h = flow_hash(src, dst, step.qp, seed)
    if step.via is None or not (step.via >= 0).any():
        r = route_flows(topo, src, dst, h, seed=seed, polarized=polarized, failed=failed)
        bad = ~r.reachable
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InfeasibleError(
                f"no path from GPU {src[i]} to GPU {dst[i]}", fix="restore failed links"
            )
        return r.offsets, r.links
    hop = np.where(step.via >= 0, gpus[np.maximum(step.via, 0)], src)
    r1 = route_flows(topo, src, hop, h, seed=seed, polarized=polarized, failed=failed)
    r2 = route_flows(topo, hop, dst, h, seed=seed, polarized=polarized, failed=failed)
    if not (r1.reachable.all() and r2.reachable.all()):
        raise InfeasibleError("a forwarded flow has no path", fix="restore failed links")
    return _concat_paths(r1.offsets, r1.links, r2.offsets, r2.links)


def _scaled_capacity(
    cap: npt.NDArray[np.float64], notes: dict[str, float], nvl_lo: int, nvl_hi: int
) -> npt.NDArray[np.float64]:
    """Link capacities as a NCCL plan sees them: protocol wire efficiency everywhere, NVLink
    (and NVLS) efficiency on NVLink, the achievable NIC fraction on network links."""
    keys = ("proto_bw", "nvlink_scale", "net_scale")
    if not any(k in notes for k in keys):
        return cap
    proto = notes.get("proto_bw", 1.0)
    out = cap * proto * notes.get("net_scale", 1.0)
    out[nvl_lo:nvl_hi] = cap[nvl_lo:nvl_hi] * proto * notes.get("nvlink_scale", 1.0)
    return out


def _channels_per_link(flows: Flows, qp: IntArray, n_links: int) -> npt.NDArray[np.float64]:
    """How many distinct channels (QPs) of the step cross each link."""
    ptr, links = flows.path_ptr, flows.path_links
    owner = np.repeat(np.arange(len(flows)), np.diff(ptr))
    key = np.unique(links * (int(qp.max()) + 1) + qp[owner])
    return np.bincount(key // (int(qp.max()) + 1), minlength=n_links).astype(np.float64)


def _pipeline_overhead_s(
    notes: dict[str, float],
    finish_s: npt.NDArray[np.float64],
    flows: Flows,
    qp: IntArray,
    cap_bps: npt.NDArray[np.float64],
    link_latency_s: npt.NDArray[np.float64],
    nvl_lo: int,
    nvl_hi: int,
) -> float:
    """What a pipelined NCCL step adds to its bandwidth time: path latency beyond what NCCL's
    per-step hardware latency already charges, and the fill of chunks through the tree/NVLS
    stages.

    NCCL's reduce and broadcast run on separate connections (runTreeSplit, the NVLS-tree warp
    groups), so while a chunk fills the pipeline the bottleneck NIC is kept busy with the other
    channels' and the other direction's data, and only the chunk's own crossing is exposed: a
    stage takes the chunk at its channel's share of the link (link rate / channels crossing
    it), never slower than the flow's steady rate (chunk x its time / its bytes). An NVLS flow
    interleaves `nvl_streams` chunk streams (one per head), so its chunk takes that many times
    longer. The fill charges the slowest NVLink-only flow per NVLink stage and the slowest
    network flow per network stage.
    """
    if "chunk_bytes" not in notes or len(flows) == 0:
        return 0.0
    ptr, links = flows.path_ptr, flows.path_links
    owner = np.repeat(np.arange(len(flows)), np.diff(ptr))
    on_net = np.zeros(len(flows), np.bool_)
    np.logical_or.at(on_net, owner, (links < nvl_lo) | (links >= nvl_hi))
    path_lat = np.zeros(len(flows))
    np.add.at(path_lat, owner, link_latency_s[links])
    size = np.maximum(flows.size_bytes, 1.0)
    streams = np.where(on_net, 1.0, notes.get("nvl_streams", 1.0))
    chunk = notes["chunk_bytes"] * streams
    steady_t = finish_s * np.minimum(1.0, chunk / size)
    per_link_s = _channels_per_link(flows, qp, len(cap_bps)) * 8.0 / np.maximum(cap_bps, 1.0)
    share_t = np.zeros(len(flows))
    np.maximum.at(share_t, owner, per_link_s[links])
    chunk_t = np.minimum(steady_t, share_t * chunk)
    out = 0.0
    for mask, steps_key, hw_key, fill_key in (
        (on_net, "lat_net_steps", "hw_net_us", "fill_net_stages"),
        (~on_net, "lat_nvl_steps", "hw_nvl_us", "fill_nvl_stages"),
    ):
        if not mask.any():
            continue
        # NCCL's hwLat per step is measured end to end on real fabrics, path included: only a
        # path slower than that adds to each further step
        extra_steps = max(notes.get(steps_key, 0.0) - 1.0, 0.0)
        beyond = float(path_lat[mask].mean()) - notes.get(hw_key, 0.0) * 1e-6
        out += extra_steps * max(beyond, 0.0)
        out += notes.get(fill_key, 0.0) * float(chunk_t[mask].max())
    return out


def qp_stop_and_wait_capacity(
    ptr: IntArray,
    links: IntArray,
    cap_bps: npt.NDArray[np.float64],
    chunk_bytes: float,
    wait_s: float,
    nvl_mask: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """NIC egress capacity when every QP has one chunk in flight per wait: a QP sends a chunk
    at its share of the port, then waits `wait_s` before the next (its signal must follow the
    chunk's completion), while the port's other QPs use it. With k QPs leaving by a port of rate
    R, the port carries k chunks per (wait + k chunk / R), i.e. the fraction u = k b / (1 + k b)
    with b = chunk / (R wait) (a closed loop of k customers with think time `wait`): one QP per
    peer leaves a port idle while all its few QPs wait; many QPs overlap their waits.
    """
    lengths = np.diff(ptr)
    if not len(links):
        return cap_bps
    big = len(links)
    pos = np.where(nvl_mask[links], big, np.arange(len(links)))  # network hops only
    first = np.minimum.reduceat(pos, np.minimum(ptr[:-1], len(links) - 1))
    first = np.where(lengths > 0, first, big)
    ports = links[first[first < big]]  # each network flow's first network link: its NIC port
    if not len(ports):
        return cap_bps
    k = np.bincount(ports, minlength=len(cap_bps)).astype(np.float64)
    used = k > 0
    b = chunk_bytes * 8.0 / (np.maximum(cap_bps[used], 1.0) * wait_s)
    out = cap_bps.copy()
    out[used] *= k[used] * b / (1.0 + k[used] * b)
    return out


def run_plan(
    topo: Topology,
    plan: Plan,
    *,
    placement: npt.ArrayLike | None = None,
    backend: str = "flow",
    step_latency_s: float = STEP_LATENCY_S,
    seed: int = 0,
    polarized: bool = False,
    failed: npt.NDArray[np.bool_] | None = None,
    rel_tol: float = 0.0,
    transport: str | None = None,
) -> CollectiveResult:
    """Simulate `plan` on `topo`; `placement[r]` is rank r's GPU (default: GPU r).

    `rel_tol` is FlowSim's completion tolerance (0 = exact; ~0.02 for steps of 100K+ flows).
    `transport` (netsim.transport: roce, ib, efa, tcpxo, tcpx) chooses how flows are routed
    and paced; None keeps per-flow ECMP with ideal max-min rates.
    """
    if transport is not None:
        check_transport(transport)
    if backend not in ("flow", "analytical"):
        raise ConfigError(f"backend {backend!r}", fix="use flow or analytical")
    gpus = (
        np.arange(plan.ranks, dtype=np.int64)
        if placement is None
        else np.asarray(placement, np.int64)
    )
    if gpus.shape != (plan.ranks,) or gpus.min() < 0 or gpus.max() >= topo.n_gpus:
        raise InfeasibleError(
            f"collective over {plan.ranks} ranks does not fit a topology of {topo.n_gpus} GPUs",
            fix=f"use at most {topo.n_gpus} GPUs or build a larger cluster",
        )
    cap, lat = topo.link_capacity_bps, topo.link_latency_s
    nvl_lo, nvl_hi = topo.links_of_kind(LINK_NVLINK)
    cap = _scaled_capacity(cap, plan.notes, nvl_lo, nvl_hi)
    if transport is not None:
        cap = host_limited_capacity(
            cap, topo.link_capacity_bps, *topo.links_of_kind(LINK_NIC), transport
        )
    link_bytes = np.zeros(topo.n_links)
    times: list[StepTime] = []
    total = 0.0
    nvl_mask = np.zeros(topo.n_links, np.bool_)
    nvl_mask[nvl_lo:nvl_hi] = True
    # a NCCL plan's `latency_s` is tuning.cc's whole latency (base + every step's hwLat): its
    # one pipelined step pays nothing more
    per_step_s = 0.0 if "latency_s" in plan.notes else step_latency_s
    for step in plan.steps:
        ptr, links = step_paths(topo, step, gpus, seed=seed, polarized=polarized, failed=failed)
        step_cap = cap
        if transport in ADAPTIVE:
            cands = [(ptr, links)] + [
                step_paths(
                    topo, step, gpus, seed=seed + 7919 * j, polarized=polarized, failed=failed
                )
                for j in range(1, AR_CHOICES)
            ]
            ptr, links = adaptive_paths(cands, step.size_bytes.astype(np.float64), cap, seed)
        elif transport is not None:
            step_cap = contended_capacity(ptr, links, gpus[step.src], cap, transport, nvl_mask)
        if "qp_wait_s" in plan.notes:
            step_cap = qp_stop_and_wait_capacity(
                ptr,
                links,
                step_cap,
                plan.notes["qp_chunk_bytes"],
                plan.notes["qp_wait_s"],
                nvl_mask,
            )
        flows = Flows(step.size_bytes.astype(np.float64), ptr, links)
        sim = make_backend(backend, step_cap, lat, rel_tol=rel_tol)
        sim.submit(flows)
        sim.advance()
        res = sim.results()
        t = res.makespan_s * step.scale
        total += _pipeline_overhead_s(
            plan.notes, res.finish_s, flows, step.qp, step_cap, lat, nvl_lo, nvl_hi
        )
        lb = res.link_bytes
        link_bytes += lb * step.repeat * step.scale
        used = lb > 0
        net = used.copy()
        net[nvl_lo:nvl_hi] = False
        util = (
            float((lb[used] * 8 / (step_cap[used] * res.makespan_s)).max())
            if used.any() and res.makespan_s > 0
            else 0.0
        )
        imb = float(lb[net].max() / lb[net].mean()) if net.any() else 1.0
        times.append(StepTime(step.phase, len(step), t, step.repeat, util, imb))
        total += step.repeat * (t + per_step_s)
    total += plan.notes.get("latency_steps", 0.0) * step_latency_s
    total += plan.notes.get("latency_s", 0.0)
    return CollectiveResult(
        plan.op,
        plan.algorithm,
        plan.ranks,
        plan.size_bytes,
        total,
        plan.bus_factor,
        tuple(times),
        link_bytes,
    )
