"""Synthesize a training job's four-layer telemetry on a topology, with faults in the physics.

The job is TP inside each host (NVLink) and a data-parallel ring all-reduce per rail across
hosts (each rank opens `qps_per_rank` RDMA QPs to the same-rail GPU of the next host in the
ring). Seer gives the healthy phase times; ECMP routing on the topology gives each QP's path.
A fault changes a rate, a capacity, a route or a clock; the layers then see what follows from
it (slower QPs, waiting ranks, counters) — never a label. QP rates come from a netsim backend
(max-min fair by default) over the capacities a fault state leaves. Each fault's physical
signature (the counters that would name it) is shown fully, partly or not at all (its
`signature`); the slowdown itself never changes with it. Everything is vectorized numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field

from starfabric.astral.monitor import _kernels as K
from starfabric.astral.monitor.cluster import build_cluster, cluster_for, seer_baseline
from starfabric.astral.monitor.faults import (
    CHECKPOINT_PAUSE,
    CONFIG_SLOWDOWN,
    CPU_CONTENTION,
    DATALOADER_STALL,
    ECMP_HOTSPOT,
    GPU_SLOW,
    GPU_THROTTLE,
    GPU_XID,
    LINK_CRC,
    LINK_DEGRADED,
    LINK_FLAPPING,
    MISCONFIG_DCQCN,
    MISCONFIG_MTU,
    MOE_IMBALANCE,
    NIC_PORT_DOWN,
    NVLINK_DEGRADED,
    NVLINK_SLOW_PEER,
    OPTICAL_FAILING,
    PFC_STORM,
    PORT_CONGESTED,
    Fault,
    write_truth,
)
from starfabric.astral.monitor.schema import (
    THROTTLE_HW_THERMAL,
    THROTTLE_SW_POWER_CAP,
    THROTTLE_SW_THERMAL,
)
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.netsim import BUILTIN_BACKENDS, make_backend, steady_rates
from starfabric.astral.routing import failed_link_mask, route_flows
from starfabric.astral.topology import LINK_NIC, LINK_NVLINK, Topology
from starfabric.config import Spec
from starfabric.errors import ConfigError

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

CRC_LOG10_BER = (-9.0, 4.0)
"""Assumption: a CRC/BER-degraded link has BER = 10**(-9 + 4*severity) (1e-7 .. 1e-5 over the
eval's severities; healthy links run below 1e-12, IEEE 802.3 requires 1e-12 before FEC)."""
CRC_GOODPUT_LOSS = 0.6
"""Assumption: goodput lost to go-back-N retransmission at full severity (RoCE NACK recovery)."""
OPTIC_LOG10_BER = (-10.0, 4.0)
"""Assumption: a failing optic's low Rx power gives BER = 10**(-10 + 4*severity)."""
OPTIC_GOODPUT_LOSS = 0.55
"""Assumption: goodput lost at full severity of a failing optic (errors, retraining, flaps)."""
CRC_BACKGROUND = 0.02
"""Assumption: mean CRC errors per healthy port per poll (rare cosmic/background errors)."""
FAULT_EFFECT: dict[str, tuple[float, float]] = {
    "pfc_paused_fraction": (0.5, 0.45),
    "misconfig_rate_factor": (0.72, -0.35),
    "hotspot_qps": (5.0, 3.0),
    "throttle_slowdown": (1.2, 0.5),
    "throttle_temp_c": (88.0, 6.0),
    "cpu_slowdown": (1.08, 0.25),
    "cpu_util_pct": (92.0, 7.0),
    "nvlink_bw_factor": (1.0, -0.7),
    "nvlink_replays": (1e3, 1e5),
    "optic_tx_dbm": (-5.0, -4.0),
    "optic_rx_dbm": (-9.0, -4.0),
    "optic_temp_c": (70.0, 10.0),
    "optic_bias_ma": (11.5, 2.0),
    "degraded_bw_loss": (0.3, 0.4),
    "gpu_slow_slowdown": (1.1, 0.4),
    "flaps_per_iter": (1.0, 3.0),
    "nvlink_peer_bw_factor": (0.8, -0.4),
    "neighbour_share": (0.45, 0.35),
    "dataloader_stall_ms": (40.0, 120.0),
    "checkpoint_pause_ms": (1500.0, 3000.0),
    "config_slowdown": (1.1, 0.3),
    "moe_hot_slowdown": (1.15, 0.45),
}
"""Assumptions: each fault's physical effect as (value at severity 0, change per unit severity):
fraction of time a PFC-stormed port is paused; rate factor of a NIC with a wrong MTU (packet-rate
bound) or DCQCN (slow recovery); QPs an ECMP polarization piles onto one uplink; compute slowdown,
die temperature of a thermally throttled GPU (its clock drops by the same factor); compute
slowdown and CPU load of a contended host (late kernel launches, starved NCCL proxies); NVLink
bandwidth left and replay errors of a degraded NVLink; Tx/Rx power, temperature and laser bias
of a failing optic (a dying laser runs hot with high bias). Gray classes: bandwidth a degraded
link or NIC port loses (both directions, no errors); compute slowdown of a slow GPU (HBM or
clock, no throttle bit); mean flaps per iteration of a flapping link; NVLink bandwidth a slow
NVLink peer keeps; share of a switch port a neighbouring job's traffic takes. Confounders:
data-loader wait added to one rank per iteration; a checkpoint pause on all ranks (one
iteration); uniform compute slowdown of a configuration change; compute slowdown of the ranks
an uneven MoE routing step overloads."""
FLAP_LOSS = 0.3
"""Assumption: share of one iteration's DP-phase goodput a link flap costs (retrain + NCCL retry)."""
FLAP_FLOOR = 0.05
"""Assumption: a flapping link keeps at least 5% of its goodput over an iteration."""
MOE_HOT_RANKS = 8
"""Assumption: ranks an uneven MoE routing step overloads per iteration (drawn anew each step)."""
NEIGHBOUR_PFC = 0.05
"""Assumption: paused fraction a neighbouring job's congestion adds at the shared port."""

HEALTHY: dict[str, tuple[float, float]] = {
    "gpu_temp_c": (60.0, 4.0),
    "gpu_power_w": (550.0, 40.0),
    "gpu_clock_rel_noise": (0.0, 0.004),
    "host_cpu_pct": (35.0, 10.0),
    "optic_tx_dbm": (0.0, 0.5),
    "optic_rx_dbm": (-1.0, 0.7),
    "optic_temp_c": (45.0, 3.0),
    "optic_bias_ma": (7.5, 0.4),
    "data_ms": (3.0, 0.8),
}
"""Assumptions: healthy readings as (mean, sigma) of a normal distribution (data_ms: the
data-loader wait of a prefetching input pipeline)."""
NVLINK_BUSY_GBPS = 1600.0
"""H800 NVLink: 400 GB/s bidirectional, 200 GB/s (1,600 Gb/s) per direction while sending."""
NVLINK_NOISE = 0.02
"""Assumption: relative noise of a GPU's NVLink send throughput per iteration (1 sigma)."""
THROTTLED_POWER_W = 420.0
"""Assumption: board power of a thermally throttled H800 (below its 700 W limit)."""
HEALTHY_POWER_CAP_SHARE = 0.01
"""Assumption: share of healthy GPUs showing the benign SW power-cap throttle bit in a poll."""
ECC_CORRECTED_BACKGROUND = 0.01
"""Assumption: mean corrected ECC errors per healthy GPU per poll."""
NVLINK_ERR_BACKGROUND = 0.05
"""Assumption: mean NVLink replay/CRC errors per healthy GPU per poll."""
CNP_PER_MARK = 0.05
"""Assumption: CNPs per ECN-marked packet (receivers coalesce CNPs, one per ~50 us per QP)."""
ECN_KMIN_LOAD, ECN_RAMP = 0.95, 0.5
"""Assumption: ECN marking probability ramps from 0 at 95% offered load to 1 at 145% (RED-like)."""
PFC_HEALTHY = 0.2
"""Assumption: mean PFC pause frames per healthy port per poll."""
PFC_PER_OVERLOAD = 50.0
"""Assumption: PFC pause frames per poll per unit of offered load above capacity (incast)."""
PFC_STORM_FRAMES = 4e5
"""Assumption: pause frames per poll at a port paused all the time (PFC storm)."""
PFC_UPSTREAM_SHARE = 0.05
"""Assumption: share of a storm's pauses that back up into the hop feeding the paused port."""
PFC_PAUSE_DELAY_US = 20.0
"""Assumption: INT hop latency added per unit of paused fraction."""
SYMBOLS_PER_CRC = 4
"""Assumption: PHY symbol errors per CRC-errored frame (before FEC gives up)."""
SYMBOL_BACKGROUND = 0.1
"""Assumption: mean symbol errors per healthy port per poll."""


def _eff(name: str, severity: float) -> float:
    base, slope = FAULT_EFFECT[name]
    return base + slope * severity


def _healthy(name: str, rng: np.random.Generator, shape: int | tuple[int, ...]) -> F64:
    mean, sigma = HEALTHY[name]
    return mean + sigma * rng.standard_normal(shape)


def _ecn_mark(offered: F64) -> F64:
    return np.clip((offered - ECN_KMIN_LOAD) / ECN_RAMP, 0.0, 1.0)


BALANCE_PASSES = 3
"""Assumption: local-search passes of path-aware QP placement (Astral's ECMP path control)."""
MTU_BYTES = 4096
"""Healthy RoCE MTU (bytes); packet counts for counters use it."""
GPU_CLOCK_MHZ = 1980.0
"""H800 SXM boost clock (NVIDIA datasheet)."""
QP_NOISE = 0.02
"""Assumption: relative noise of a QP's busy-time throughput per iteration (1 sigma)."""
MS_NOISE = 0.06
"""Assumption: relative noise of one millisecond throughput sample."""
BASE_QUEUE_US = 1.0
"""Assumption: queueing delay (us) at 50% utilization in the INT latency model (M/M/1 shape)."""
XID_CODES = (48, 74, 79, 94, 95, 119)
"""Critical Xids a failing GPU raises (DBE ECC, NVLink, fell off the bus, contained/uncontained
ECC, GSP timeout: NVIDIA Xid catalog)."""
XID_MESSAGES = {
    48: "An uncorrectable double bit error (DBE) has been detected on GPU",
    74: "NVLink Error",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "Timeout after 6s of waiting for RPC response from GPU System Processor (GSP)",
}


class SynthSpec(Spec):
    """What to synthesize: cluster size, job, iterations, QPs, noise, seeds."""

    gpus: int = Field(1024, ge=8, description="cluster GPUs (1024 or a multiple of 16384)")
    model: str = "llama-3.1-8b"
    seq_len: int = Field(4096, ge=128)
    iterations: int = Field(6, ge=3, le=1000)
    qps_per_rank: int = Field(2, ge=1, le=16, description="RDMA QPs per rank per ring (channels)")
    ecmp_candidates: int = Field(
        16, ge=1, le=64, description="assumption: source ports tried by path-aware QP placement"
    )
    timing_noise: float = Field(
        0.01, ge=0, le=0.2, description="assumption: timing noise (1 sigma)"
    )
    seed: int = 0
    placement_seed: int = Field(0, description="host order of the DP ring (scheduler placement)")
    ms_series: bool = Field(True, description="write the 1 ms QP throughput series (last iter)")
    network_backend: str = Field(
        "flow", description=f"netsim backend for QP rates: {', '.join(BUILTIN_BACKENDS)}"
    )
    faults: list[str] = Field(
        default_factory=list, description="faults as 'KIND:TARGET[:SEVERITY[:ONSET]]' (spec files)"
    )


@dataclass(frozen=True)
class Job:
    """Compiled job: ranks, hosts, DP rings, QPs and their ECMP candidates."""

    topo: Topology
    n: int
    gph: int
    hosts: int
    ports: int
    q: int
    n_cand: int
    ring_next: I64
    qp_src: I64
    qp_dst: I64
    cand_hash: npt.NDArray[np.uint64]
    demand_bps: float
    base: dict[str, float]


@dataclass(frozen=True)
class NetState:
    """The network as one fault state leaves it: chosen paths, per-QP rates, link loads, and
    the physical signatures (true and as the counters show them) of the faults in it."""

    offsets: I64
    links: I64
    reachable: npt.NDArray[np.bool_]
    rate_bps: F64
    cap_eff: F64
    nq: I64
    ber: F64
    pfc_frac: F64
    qp_hash: npt.NDArray[np.uint64]
    ber_seen: F64
    pfc_seen: F64
    foreign_frac: F64
    foreign_seen: F64


def compile_job(topo: Topology, spec: SynthSpec) -> Job:
    """Ranks = GPUs; DP rings per rail over a seeded host permutation; QP ECMP candidates."""
    st = topo.structure
    if st is None:
        raise ConfigError("monitor synth needs a structured topology", fix="use a Clos builder")
    n, gph = topo.n_gpus, st.gpus_per_host
    hosts = n // gph
    if hosts < 2:
        raise ConfigError(f"{n} GPUs is a single host", fix="use at least two hosts")
    order = np.random.default_rng(spec.placement_seed).permutation(hosts)
    nxt_host = np.empty(hosts, dtype=np.int64)
    nxt_host[order] = np.roll(order, -1)
    g = np.arange(n, dtype=np.int64)
    ring_next = nxt_host[g // gph] * gph + g % gph
    q = spec.qps_per_rank
    qp_src = np.repeat(g, q)
    qp_dst = ring_next[qp_src]
    rng = np.random.default_rng(spec.seed ^ 0x5EED)
    cand = rng.integers(0, 2**62, size=(n * q, spec.ecmp_candidates), dtype=np.int64)
    nic_lo, _ = topo.links_of_kind(LINK_NIC)
    port_bps = float(topo.link_capacity_bps[nic_lo])
    ports = int(st.gpu_tor.shape[1])
    base = seer_baseline(n, gph, spec.model, spec.seq_len)
    return Job(
        topo=topo,
        n=n,
        gph=gph,
        hosts=hosts,
        ports=ports,
        q=q,
        n_cand=spec.ecmp_candidates,
        ring_next=ring_next,
        qp_src=qp_src,
        qp_dst=qp_dst,
        cand_hash=cand.astype(np.uint64),
        demand_bps=port_bps * ports / q,
        base=base,
    )


def _path_min(values: F64, offsets: I64, empty: float) -> F64:
    """Minimum of values over each CSR path (empty paths get `empty`)."""
    lens = np.diff(offsets)
    out = np.full(lens.size, empty)
    nz = lens > 0
    if values.size:
        red = np.minimum.reduceat(values, offsets[:-1][nz])
        out[nz] = red
    return out


def _per(ber: F64) -> F64:
    """Packet error rate of MTU-sized packets at a bit error rate."""
    return -np.expm1(8 * MTU_BYTES * np.log1p(-np.minimum(ber, 0.5)))


def _path_sum(values: F64, offsets: I64) -> F64:
    """Sum of values over each CSR path."""
    cs = np.concatenate([[0.0], np.cumsum(values)])
    return cs[offsets[1:]] - cs[offsets[:-1]]


def network_state(
    job: Job,
    faults: list[Fault],
    seed: int,
    *,
    backend: str = "flow",
    flap_factor: dict[int, float] | None = None,
) -> NetState:
    """Route every QP (path-aware pick among ECMP candidates) and rate it under `faults` on a
    netsim backend; `flap_factor` is each flapping cable's goodput share this iteration."""
    topo = job.topo
    down = [f.target for f in faults if f.kind == NIC_PORT_DOWN]
    nf = job.qp_src.size * job.n_cand
    n_qp = job.qp_src.size
    src_c = np.repeat(job.qp_src, job.n_cand)
    dst_c = np.repeat(job.qp_dst, job.n_cand)
    r = route_flows(topo, src_c, dst_c, job.cand_hash.ravel())
    load = np.zeros(topo.n_links, dtype=np.int64)
    chosen = K.balance_pick(r.offsets, r.links, n_qp, job.n_cand, load, BALANCE_PASSES)
    r_off, r_links, r_reach = r.offsets, r.links, r.reachable
    if down:
        # Only the QPs whose path crossed a failed port move (the fabric re-places them on
        # what is left, against everyone else's load); the others keep their paths.
        failed = failed_link_mask(topo, links=[2 * c for c in down])
        rf = route_flows(topo, src_c, dst_c, job.cand_hash.ravel(), failed=failed)
        flow0 = np.arange(n_qp, dtype=np.int64) * job.n_cand + chosen
        lens0 = r.offsets[flow0 + 1] - r.offsets[flow0]
        owner = np.repeat(np.arange(n_qp), lens0)
        hit = np.zeros(n_qp, dtype=bool)
        hit[owner[failed[_gather(r.offsets, r.links, flow0)[1]]]] = True
        use_f = np.repeat(hit, job.n_cand)
        every = np.arange(nf, dtype=np.int64)
        l0, k0 = _gather(r.offsets, r.links, every)
        l1, k1 = _gather(rf.offsets, rf.links, every)
        lens_m = np.where(use_f, l1, l0)
        r_off = np.concatenate([[0], np.cumsum(lens_m)]).astype(np.int64)
        r_links = np.empty(int(r_off[-1]), np.int64)
        pos = np.repeat(use_f, lens_m)
        r_links[pos] = k1[np.repeat(use_f, l1)]
        r_links[~pos] = k0[np.repeat(~use_f, l0)]
        r_reach = np.where(use_f, rf.reachable, r.reachable)
        aff = np.flatnonzero(hit)
        if aff.size:
            keep_flows = flow0[~hit]
            load = np.bincount(
                _gather(r_off, r_links, keep_flows)[1], minlength=topo.n_links
            ).astype(np.int64)
            sub = (aff[:, None] * job.n_cand + np.arange(job.n_cand)).ravel()
            sl, sk = _gather(r_off, r_links, sub)
            s_off = np.concatenate([[0], np.cumsum(sl)]).astype(np.int64)
            chosen = chosen.copy()
            chosen[aff] = K.balance_pick(s_off, sk, aff.size, job.n_cand, load, BALANCE_PASSES)
    flow = np.arange(n_qp, dtype=np.int64) * job.n_cand + chosen
    for f in faults:
        if f.kind == ECMP_HOTSPOT:
            flow = _hotspot(job, r_off, r_links, flow, f, nf)
    lens, links = _gather(r_off, r_links, flow)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    reachable = r_reach[flow] & (lens > 0)
    nq = np.bincount(links, minlength=topo.n_links).astype(np.int64)
    cap = topo.link_capacity_bps.astype(np.float64).copy()
    ber = np.zeros(topo.n_links)
    ber_seen = np.zeros(topo.n_links)
    pfc = np.zeros(topo.n_links)
    pfc_seen = np.zeros(topo.n_links)
    foreign = np.zeros(topo.n_links)
    foreign_seen = np.zeros(topo.n_links)
    nic_factor = np.ones(job.n)
    for f in faults:
        both = (
            np.array([2 * f.target, 2 * f.target + 1]) if f.target * 2 + 1 < topo.n_links else None
        )
        if f.kind == LINK_CRC and both is not None:
            ber[both] = 10.0 ** (CRC_LOG10_BER[0] + CRC_LOG10_BER[1] * f.severity)
            ber_seen[both] = ber[both] * f.shown
            cap[both] *= 1.0 - CRC_GOODPUT_LOSS * f.severity
        elif f.kind == OPTICAL_FAILING and both is not None:
            up = 2 * f.target
            ber[up] = 10.0 ** (OPTIC_LOG10_BER[0] + OPTIC_LOG10_BER[1] * f.severity)
            ber_seen[up] = ber[up] * f.shown
            cap[up] *= 1.0 - OPTIC_GOODPUT_LOSS * f.severity
        elif f.kind == PFC_STORM and both is not None:
            e = 2 * f.target
            pfc[e] = _eff("pfc_paused_fraction", f.severity)
            pfc_seen[e] = pfc[e] * f.shown
            cap[e] *= 1.0 - pfc[e]
        elif f.kind == LINK_DEGRADED and both is not None:
            cap[both] *= 1.0 - _eff("degraded_bw_loss", f.severity)
        elif f.kind == LINK_FLAPPING and both is not None:
            cap[both] *= (flap_factor or {}).get(f.target, 1.0)
        elif f.kind == PORT_CONGESTED and both is not None:
            e = 2 * f.target
            foreign[e] = _eff("neighbour_share", f.severity)
            foreign_seen[e] = foreign[e] * f.shown
            pfc_seen[e] += NEIGHBOUR_PFC * f.shown
            cap[e] *= 1.0 - foreign[e]
        elif f.kind in (MISCONFIG_MTU, MISCONFIG_DCQCN) and f.target < job.n:
            nic_factor[f.target] = _eff("misconfig_rate_factor", f.severity)
    demand = job.demand_bps * nic_factor[job.qp_src]
    rate = np.zeros(job.qp_src.size)
    ok = np.flatnonzero(reachable)
    if ok.size:
        # Each QP's demand is one more link of its own (its NIC's share), so the backend's
        # rates never exceed what the sender's NIC and configuration let it offer.
        qlen = lens[ok] + 1
        qptr = np.concatenate([[0], np.cumsum(qlen)]).astype(np.int64)
        qlinks = np.empty(int(qptr[-1]), np.int64)
        starts = qptr[:-1]
        qlinks[starts] = topo.n_links + np.arange(ok.size)
        body = np.ones(qlinks.size, bool)
        body[starts] = False
        qlinks[body] = links[
            np.repeat(offsets[ok], lens[ok])
            + (np.arange(int(lens[ok].sum())) - np.repeat(np.cumsum(lens[ok]) - lens[ok], lens[ok]))
        ]
        caps = np.concatenate([cap, demand[ok]])
        sim = make_backend(backend, caps, None)
        rate[ok] = steady_rates(sim, qptr, qlinks)
    return NetState(
        offsets=offsets,
        links=links,
        reachable=reachable,
        rate_bps=rate,
        cap_eff=cap,
        nq=nq,
        ber=ber,
        pfc_frac=pfc,
        qp_hash=job.cand_hash.ravel()[flow],
        ber_seen=ber_seen,
        pfc_seen=pfc_seen,
        foreign_frac=foreign,
        foreign_seen=foreign_seen,
    )


def _gather(offsets: I64, links: npt.NDArray[Any], flows: I64) -> tuple[I64, I64]:
    """Path lengths and concatenated links of the chosen `flows` of a CSR route set."""
    lens = (offsets[flows + 1] - offsets[flows]).astype(np.int64)
    ends = np.cumsum(lens)
    idx = np.repeat(offsets[flows], lens) + (
        np.arange(int(ends[-1]) if lens.size else 0) - np.repeat(ends - lens, lens)
    )
    return lens, links[idx].astype(np.int64)


def _hotspot(job: Job, off: I64, links: I64, flow: I64, f: Fault, nf: int) -> I64:
    """ECMP hash polarization at one uplink: up to k QPs whose candidates cross it all pick it."""
    target = 2 * f.target
    hit_flow = np.repeat(np.arange(nf), np.diff(off))[links == target]
    qps = np.unique(hit_flow // job.n_cand)
    k = int(round(_eff("hotspot_qps", f.severity)))
    pick = qps[:k]
    out = flow.copy()
    for qp in pick:
        cands = hit_flow[hit_flow // job.n_cand == qp]
        out[qp] = int(cands[0])
    return out


@dataclass(frozen=True)
class _Phase:
    data: F64
    comp: F64
    tp: F64
    dp: F64
    iter_ms: float
    broken_qps: I64
    nvl: F64


def _phase_times(
    job: Job,
    faults: list[Fault],
    net: NetState,
    rng: np.random.Generator,
    noise: float,
    it: int = 0,
) -> _Phase:
    """One iteration's per-rank data-wait/compute/TP/DP times (ms) under `faults` and the
    network state; a rank starts computing once its batch is loaded."""
    n, gph, hosts = job.n, job.gph, job.hosts
    b = job.base
    slow = np.ones(n)
    hslow = np.ones(hosts)
    nvl = np.ones(n)
    data = np.maximum(_healthy("data_ms", rng, n), 0.5)
    pause = 0.0
    for f in faults:
        if f.kind == GPU_THROTTLE and f.target < n:
            slow[f.target] *= _eff("throttle_slowdown", f.severity)
        elif f.kind == GPU_SLOW and f.target < n:
            slow[f.target] *= _eff("gpu_slow_slowdown", f.severity)
        elif f.kind == CPU_CONTENTION and f.target < hosts:
            hslow[f.target] *= _eff("cpu_slowdown", f.severity)
        elif f.kind == NVLINK_DEGRADED and f.target < n:
            nvl[f.target] = _eff("nvlink_bw_factor", f.severity)
        elif f.kind == NVLINK_SLOW_PEER and f.target < n:
            nvl[f.target] = _eff("nvlink_peer_bw_factor", f.severity)
        elif f.kind == DATALOADER_STALL and f.target < n:
            data[f.target] += _eff("dataloader_stall_ms", f.severity) * rng.lognormal(0.0, 0.3)
        elif f.kind == CHECKPOINT_PAUSE and it == f.onset_iter:
            pause += _eff("checkpoint_pause_ms", f.severity)
        elif f.kind == CONFIG_SLOWDOWN:
            slow *= _eff("config_slowdown", f.severity)
        elif f.kind == MOE_IMBALANCE:
            hot = rng.choice(n, size=min(MOE_HOT_RANKS, n), replace=False)
            slow[hot] *= _eff("moe_hot_slowdown", f.severity) * (1 + 0.1 * rng.random(hot.size))
    comp = (
        b["compute_s"] * 1e3 * slow * np.repeat(hslow, gph) * (1 + noise * rng.standard_normal(n))
    )
    ready = data + comp
    hready = ready.reshape(hosts, gph).max(axis=1)
    tpx = (
        b["tp_s"]
        * 1e3
        / nvl.reshape(hosts, gph).min(axis=1)
        * (1 + noise * rng.standard_normal(hosts))
    )
    h_of = np.arange(n) // gph
    tp = tpx[h_of] + hready[h_of] - ready
    after = hready + tpx
    ring_ready = float(after.max())
    rank_rate = np.bincount(job.qp_src, weights=net.rate_bps, minlength=n)
    slowdown = np.where(rank_rate > 0, job.demand_bps * job.q / np.maximum(rank_rate, 1.0), np.inf)
    rail = np.arange(n) % gph
    ring_slow = np.array([slowdown[rail == k].max() for k in range(gph)])
    ring_t = b["dp_s"] * 1e3 * ring_slow * (1 + noise * rng.standard_normal(gph))
    dp = ring_ready - after[h_of] + ring_t[rail]
    it_ms = ring_ready + float(np.max(ring_t)) + b["overhead_s"] * 1e3 + pause
    broken = np.flatnonzero(~net.reachable)
    return _Phase(data, comp, tp, dp, it_ms, broken, nvl)


def _split(faults: list[Fault], it: int) -> list[Fault]:
    return [f for f in faults if f.onset_iter <= it]


def synthesize(spec: SynthSpec, faults: list[Fault], store: TelemetryStore) -> dict[str, Any]:
    """Run the job for `spec.iterations` iterations with `faults` and write every layer to `store`."""
    fields = cluster_for(spec.gpus)
    topo = build_cluster(fields)
    job = compile_job(topo, spec)
    _check_targets(job, faults)
    rng = np.random.default_rng(spec.seed)
    store.set_meta("cluster", fields)
    store.set_meta(
        "job",
        {
            "model": spec.model,
            "seq_len": spec.seq_len,
            "gpus": job.n,
            "gpus_per_host": job.gph,
            "qps_per_rank": job.q,
            "placement_seed": spec.placement_seed,
            "qp_demand_gbps": job.demand_bps / 1e9,
            "rate_model": spec.network_backend,
        },
    )
    store.set_meta("seer", job.base)
    states: dict[tuple[tuple[int, float], ...], NetState] = {}
    t0 = 0.0
    stopped_at = -1
    per_iter: list[tuple[int, list[Fault], NetState, _Phase]] = []
    flaps = _flap_schedule(faults, spec)
    for it in range(spec.iterations):
        act = _split(faults, it)
        flap = {f.target: _flap_factor(int(flaps[id(f)][it])) for f in act if id(f) in flaps}
        key = tuple(sorted((id(f), flap.get(f.target, 1.0)) for f in act if f.kind in _NET_KINDS))
        if key not in states:
            states[key] = network_state(
                job,
                [f for f in act if f.kind in _NET_KINDS],
                spec.seed,
                backend=spec.network_backend,
                flap_factor=flap,
            )
        net = states[key]
        ph = _phase_times(job, act, net, rng, spec.timing_noise, it)
        dead = [f for f in act if f.kind == GPU_XID]
        if dead or ph.broken_qps.size:
            stopped_at = it
            _write_abort(job, store, it, dead, ph, t0)
            per_iter.append((it, act, net, ph))
            break
        _write_app(job, store, it, ph, t0, rng)
        _write_transport(job, store, it, net, rng, ms=spec.ms_series and it == spec.iterations - 1)
        _write_nvlink(job, store, it, ph, rng)
        t0 += ph.iter_ms
        per_iter.append((it, act, net, ph))
    last_it = per_iter[-1][0]
    done = [p for p in per_iter if p[0] != stopped_at]
    int_iters = {done[0][0], done[-1][0]} if done else set()
    for it, act, net, ph in per_iter:
        if it in int_iters:
            _write_int(job, store, it, net)
        poll_s = ph.iter_ms / 1e3 if np.isfinite(ph.iter_ms) else job.base["iteration_s"]
        _write_ports(job, store, it, act, net, rng, poll_s, flaps)
        _write_gpus(job, store, it, act, rng)
    _write_optics(job, store, last_it, _split(faults, last_it), rng)
    _write_config(job, store, faults)
    return {
        "gpus": job.n,
        "iterations": last_it + 1,
        "stopped_at": stopped_at,
        "faults": len(faults),
    }


def _flap_schedule(faults: list[Fault], spec: SynthSpec) -> dict[int, I64]:
    """Flaps per iteration of each flapping link (Poisson, seeded by the run and the cable)."""
    out: dict[int, I64] = {}
    for f in faults:
        if f.kind == LINK_FLAPPING:
            rng = np.random.default_rng([spec.seed, f.target, 0xF1A9])
            n = rng.poisson(_eff("flaps_per_iter", f.severity), spec.iterations)
            n[: f.onset_iter] = 0
            out[id(f)] = n.astype(np.int64)
    return out


def _flap_factor(flaps: int) -> float:
    return max(FLAP_FLOOR, 1.0 - FLAP_LOSS * flaps) if flaps else 1.0


_NET_KINDS = {
    LINK_DEGRADED,
    LINK_FLAPPING,
    PORT_CONGESTED,
    NIC_PORT_DOWN,
    LINK_CRC,
    OPTICAL_FAILING,
    PFC_STORM,
    ECMP_HOTSPOT,
    MISCONFIG_MTU,
    MISCONFIG_DCQCN,
}


def _check_targets(job: Job, faults: list[Fault]) -> None:
    n_cables = job.topo.n_links // 2
    limits = {
        "gpu": job.n,
        "nic": job.n,
        "host": job.hosts,
        "cable": n_cables,
        "rank": job.n,
        "job": 1,
    }
    for f in faults:
        kind = f.component.split(":")[0]
        if f.target >= limits[kind]:
            raise ConfigError(
                f"fault {f.kind}: target {f.target} is not a {kind} of this cluster (0..{limits[kind] - 1})",
                fix="pick a valid id",
            )
        if kind == "cable" and int(job.topo.link_kind[2 * f.target]) == LINK_NVLINK:
            raise ConfigError(
                f"fault {f.kind}: cable {f.target} is an NVLink", fix="pick a network cable"
            )


def _write_app(
    job: Job, store: TelemetryStore, it: int, ph: _Phase, t0: float, rng: np.random.Generator
) -> None:
    n = job.n
    store.write(
        "app_iteration",
        {
            "iter": np.full(n, it, dtype=np.int32),
            "rank": np.arange(n, dtype=np.int32),
            "start_ms": np.full(n, t0),
            "data_ms": ph.data,
            "compute_ms": ph.comp,
            "tp_ms": ph.tp,
            "dp_ms": ph.dp,
            "iter_ms": ph.iter_ms * (1 + 0.001 * rng.standard_normal(n)),
        },
    )


def _write_abort(
    job: Job, store: TelemetryStore, it: int, dead: list[Fault], ph: _Phase, t0: float
) -> None:
    """A dead GPU or an unreachable QP: the job hangs; NCCL watchdogs time out on the peers."""
    ranks: list[I64] = []
    peers: list[I64] = []
    gph = job.gph
    for f in dead:
        g = f.target
        host_peers = np.arange((g // gph) * gph, (g // gph + 1) * gph)
        prev = np.flatnonzero(job.ring_next == g)
        rs = np.setdiff1d(np.concatenate([host_peers, prev, [job.ring_next[g]]]), [g])
        ranks.append(rs)
        peers.append(np.full(rs.size, g))
        if not f.binary_shown:
            continue
        store.write(
            "phys_xid",
            {
                "ts_ms": np.array([t0 + 0.5 * ph.iter_ms]),
                "gpu": np.array([g], dtype=np.int32),
                "pci": np.array([f"0000:{(g % job.gph) * 16 + 0x18:02x}:00"]),
                "xid": np.array([XID_CODES[f.target % len(XID_CODES)]], dtype=np.int32),
                "message": np.array([XID_MESSAGES[XID_CODES[f.target % len(XID_CODES)]]]),
            },
        )
    if ph.broken_qps.size:
        src = job.qp_src[ph.broken_qps]
        dst = job.qp_dst[ph.broken_qps]
        ranks += [src, dst]
        peers += [dst, src]
    r = np.concatenate(ranks).astype(np.int32)
    p = np.concatenate(peers).astype(np.int32)
    store.write(
        "app_nccl_error",
        {
            "iter": np.full(r.size, it, dtype=np.int32),
            "rank": r,
            "peer": p,
            "error": np.full(
                r.size, "NCCL watchdog timeout: collective ALLREDUCE ran for 600000 ms"
            ),
        },
    )


def _ips(job: Job, gpus: I64) -> npt.NDArray[np.uint32]:
    return (0x0A000000 + gpus).astype(np.uint32)


def _write_transport(
    job: Job, store: TelemetryStore, it: int, net: NetState, rng: np.random.Generator, ms: bool
) -> None:
    nqp = job.qp_src.size
    rate = net.rate_bps / 1e9 * (1 + QP_NOISE * rng.standard_normal(nqp))
    bytes_qp = job.base["dp_s"] * job.demand_bps / 8.0
    pkts = bytes_qp / MTU_BYTES
    path_per = np.minimum(_path_sum(_per(net.ber)[net.links], net.offsets), 1.0)
    offered = net.nq * job.demand_bps / np.maximum(net.cap_eff, 1.0)
    mark = _ecn_mark(offered)
    path_mark = np.minimum(_path_sum(mark[net.links], net.offsets), 1.0)
    store.write(
        "transport_qp",
        {
            "iter": np.full(nqp, it, dtype=np.int32),
            "qp": np.arange(nqp, dtype=np.int32),
            "rank": job.qp_src.astype(np.int32),
            "src_ip": _ips(job, job.qp_src),
            "dst_ip": _ips(job, job.qp_dst),
            "src_port": (49152 + (net.qp_hash % np.uint64(16384))).astype(np.uint16),
            "dst_port": np.full(nqp, 4791, dtype=np.uint16),
            "proto": np.full(nqp, 17, dtype=np.uint8),
            "dst_rank": job.qp_dst.astype(np.int32),
            "gbps_mean": rate,
            "gbps_min": rate * (1 - 2.5 * MS_NOISE),
            "gbps_max": rate * (1 + 2.5 * MS_NOISE),
            "bytes": np.full(nqp, bytes_qp),
            "retrans": rng.poisson(pkts * path_per),
            "cnp_rx": rng.poisson(pkts * CNP_PER_MARK * path_mark),
        },
    )
    if ms:
        t = max(int(round(bytes_qp * 8 / job.demand_bps * 1e3)), 1)
        t = min(t, 50)
        q = np.repeat(np.arange(nqp, dtype=np.int32), t)
        store.write(
            "transport_qp_ms",
            {
                "iter": np.full(q.size, it, dtype=np.int32),
                "qp": q,
                "t_ms": np.tile(np.arange(t, dtype=np.int32), nqp),
                "gbps": (
                    np.repeat(net.rate_bps / 1e9, t) * (1 + MS_NOISE * rng.standard_normal(q.size))
                ).astype(np.float32),
            },
        )


def _write_nvlink(
    job: Job, store: TelemetryStore, it: int, ph: _Phase, rng: np.random.Generator
) -> None:
    """Per-GPU NVLink send throughput while transmitting TP traffic (profiler step timings)."""
    n = job.n
    store.write(
        "transport_nvlink",
        {
            "iter": np.full(n, it, dtype=np.int32),
            "gpu": np.arange(n, dtype=np.int32),
            "gbps": (
                NVLINK_BUSY_GBPS * ph.nvl * (1 + NVLINK_NOISE * rng.standard_normal(n))
            ).astype(np.float32),
        },
    )


def _write_int(job: Job, store: TelemetryStore, it: int, net: NetState) -> None:
    """INT-style per-hop samples of every QP: the reconstructed route and per-hop latency."""
    topo = job.topo
    lens = np.diff(net.offsets)
    qp = np.repeat(np.arange(lens.size, dtype=np.int32), lens)
    hop = (np.arange(net.links.size) - np.repeat(net.offsets[:-1], lens)).astype(np.int8)
    util = np.minimum(net.nq * job.demand_bps / np.maximum(net.cap_eff, 1.0), 0.99)
    queue = BASE_QUEUE_US * util / (1 - util) + PFC_PAUSE_DELAY_US * net.pfc_frac
    lat = topo.link_latency_s[net.links] * 1e6 + queue[net.links]
    store.write(
        "network_hop",
        {
            "iter": np.full(qp.size, it, dtype=np.int32),
            "qp": qp,
            "hop": hop,
            "link": net.links.astype(np.int32),
            "node": topo.link_dst[net.links].astype(np.int32),
            "latency_us": lat.astype(np.float32),
        },
    )


def _net_links(topo: Topology) -> I64:
    lo, hi = topo.links_of_kind(LINK_NVLINK)
    return np.concatenate([np.arange(0, lo), np.arange(hi, topo.n_links)]).astype(np.int64)


def _write_ports(
    job: Job,
    store: TelemetryStore,
    it: int,
    act: list[Fault],
    net: NetState,
    rng: np.random.Generator,
    poll_s: float,
    flaps: dict[int, I64],
) -> None:
    """Per-port counters polled once per iteration (deltas): bytes, ECN, CNP, PFC, CRC, state.

    CRC errors need frames; PHY symbol errors accrue on every bit the link carries, idle
    symbols included, so a bad link shows them even when the job does not use it. Counters show
    a fault's signature only as far as its `signature` lets them (NetState's *_seen arrays).
    A neighbouring job's bytes and marks count on the ports it shares with this job.
    """
    topo = job.topo
    ls = _net_links(topo)
    m = ls.size
    bytes_qp = job.base["dp_s"] * job.demand_bps / 8.0
    own = np.bincount(net.links, minlength=topo.n_links) * bytes_qp
    line_bytes = topo.link_capacity_bps * job.base["dp_s"] / 8.0
    tx = (own + net.foreign_seen * line_bytes)[ls]
    pkts = tx / MTU_BYTES
    offered = net.nq * job.demand_bps / np.maximum(net.cap_eff, 1.0)
    offered_seen = np.where(
        net.foreign_frac > 0,
        net.nq * job.demand_bps / np.maximum(topo.link_capacity_bps * (1 - net.foreign_seen), 1.0)
        + net.foreign_seen,
        offered,
    )
    mark = _ecn_mark(offered_seen)[ls]
    crc = rng.poisson(CRC_BACKGROUND, m) + rng.poisson(pkts * _per(net.ber_seen)[ls])
    line_bits = topo.link_capacity_bps[ls] * poll_s
    over = np.maximum(offered_seen[ls] - 1.0, 0.0)
    pfc_lam = PFC_HEALTHY + PFC_PER_OVERLOAD * over + net.pfc_seen[ls] * PFC_STORM_FRAMES
    # A paused port backs up its upstream hop: the links that feed the paused link's source.
    storm = np.flatnonzero(net.pfc_seen > 0)
    upstream = np.zeros(topo.n_links)
    for e in storm:
        feeders = np.flatnonzero(topo.link_dst == topo.link_src[e])
        feeders = feeders[(feeders ^ 1) != e]
        upstream[feeders] += net.pfc_seen[e] * PFC_STORM_FRAMES * PFC_UPSTREAM_SHARE
    pfc_lam = pfc_lam + upstream[ls]
    down = np.zeros(topo.n_links, dtype=bool)
    downed = np.zeros(topo.n_links, dtype=np.int64)
    for f in act:
        if f.kind == NIC_PORT_DOWN and f.binary_shown:
            down[[2 * f.target, 2 * f.target + 1]] = True
            downed[[2 * f.target, 2 * f.target + 1]] = 1
        elif f.kind == LINK_FLAPPING and id(f) in flaps:
            k = int(rng.binomial(int(flaps[id(f)][it]), f.shown))
            downed[[2 * f.target, 2 * f.target + 1]] += k
    store.write(
        "phys_port",
        {
            "iter": np.full(m, it, dtype=np.int32),
            "link": ls.astype(np.int32),
            "tx_bytes": tx,
            "ecn_marked": rng.poisson(pkts * mark),
            "cnp_sent": rng.poisson(pkts * mark * CNP_PER_MARK),
            "pfc_pause_rx": rng.poisson(pfc_lam),
            "crc_errors": crc,
            "symbol_errors": crc * SYMBOLS_PER_CRC
            + rng.poisson(SYMBOL_BACKGROUND + line_bits * net.ber_seen[ls]),
            "link_downed": downed[ls].astype(np.int32),
            "state_up": ~down[ls],
        },
    )


def _write_gpus(
    job: Job, store: TelemetryStore, it: int, act: list[Fault], rng: np.random.Generator
) -> None:
    n = job.n
    temp = _healthy("gpu_temp_c", rng, n)
    power = _healthy("gpu_power_w", rng, n)
    clock = GPU_CLOCK_MHZ * (1 + _healthy("gpu_clock_rel_noise", rng, n))
    power_cap = rng.random(n) < HEALTHY_POWER_CAP_SHARE
    reasons = np.where(power_cap, THROTTLE_SW_POWER_CAP, 0).astype(np.int32)
    ecc_c = rng.poisson(ECC_CORRECTED_BACKGROUND, n)
    ecc_u = np.zeros(n, dtype=np.int64)
    replay = rng.poisson(NVLINK_ERR_BACKGROUND, n)
    nvcrc = rng.poisson(NVLINK_ERR_BACKGROUND, n)
    for f in act:
        g, w = f.target, f.shown
        if f.kind == GPU_THROTTLE:
            temp[g] += w * (_eff("throttle_temp_c", f.severity) - temp[g])
            clock[g] += w * (GPU_CLOCK_MHZ / _eff("throttle_slowdown", f.severity) - clock[g])
            power[g] += w * (THROTTLED_POWER_W - power[g])
            if f.binary_shown:
                reasons[g] |= THROTTLE_HW_THERMAL | THROTTLE_SW_THERMAL
        elif f.kind == GPU_SLOW:
            # a clock-bound slow GPU shows its clock (no throttle bit); an HBM-bound one nothing
            clock[g] += w * (GPU_CLOCK_MHZ / _eff("gpu_slow_slowdown", f.severity) - clock[g])
        elif f.kind == NVLINK_DEGRADED:
            replay[g] += int(w * _eff("nvlink_replays", f.severity))
            nvcrc[g] += int(w * _eff("nvlink_replays", f.severity) / 10)
        elif f.kind == GPU_XID and XID_CODES[g % len(XID_CODES)] in (48, 94, 95) and w > 0:
            ecc_u[g] += 1
    store.write(
        "phys_gpu",
        {
            "iter": np.full(n, it, dtype=np.int32),
            "gpu": np.arange(n, dtype=np.int32),
            "temperature_c": temp.astype(np.float32),
            "power_w": power.astype(np.float32),
            "sm_clock_mhz": clock.astype(np.float32),
            "throttle_reasons": reasons,
            "ecc_corrected": ecc_c,
            "ecc_uncorrected": ecc_u,
            "nvlink_replay": replay,
            "nvlink_crc": nvcrc,
        },
    )
    h = job.hosts
    cpu = np.clip(_healthy("host_cpu_pct", rng, h), 5, 80)
    for f in act:
        if f.kind == CPU_CONTENTION:
            cpu[f.target] += f.shown * (_eff("cpu_util_pct", f.severity) - cpu[f.target])
    store.write(
        "phys_host",
        {
            "iter": np.full(h, it, dtype=np.int32),
            "host": np.arange(h, dtype=np.int32),
            "cpu_util_pct": cpu.astype(np.float32),
        },
    )


def _write_optics(
    job: Job, store: TelemetryStore, it: int, act: list[Fault], rng: np.random.Generator
) -> None:
    """Optical DDM of every network cable end (end 0 = lower tier, end 1 = upper)."""
    topo = job.topo
    cables = _net_links(topo)[::2] // 2
    m = cables.size
    tx = _healthy("optic_tx_dbm", rng, (m, 2))
    rx = _healthy("optic_rx_dbm", rng, (m, 2))
    temp = _healthy("optic_temp_c", rng, (m, 2))
    bias = _healthy("optic_bias_ma", rng, (m, 2))
    pos = {int(c): i for i, c in enumerate(cables)} if act else {}
    for f in act:
        if f.kind == OPTICAL_FAILING and f.target in pos:
            i, w = pos[f.target], f.shown
            tx[i, 0] += w * (_eff("optic_tx_dbm", f.severity) - tx[i, 0])
            rx[i, 1] += w * (_eff("optic_rx_dbm", f.severity) - rx[i, 1])
            temp[i, 0] += w * (_eff("optic_temp_c", f.severity) - temp[i, 0])
            bias[i, 0] += w * (_eff("optic_bias_ma", f.severity) - bias[i, 0])
    store.write(
        "phys_optics",
        {
            "iter": np.full(2 * m, it, dtype=np.int32),
            "cable": np.repeat(cables, 2).astype(np.int32),
            "cable_end": np.tile(np.array([0, 1], dtype=np.int8), m),
            "tx_power_dbm": tx.ravel().astype(np.float32),
            "rx_power_dbm": rx.ravel().astype(np.float32),
            "temperature_c": temp.ravel().astype(np.float32),
            "bias_ma": bias.ravel().astype(np.float32),
        },
    )


def _write_config(job: Job, store: TelemetryStore, faults: list[Fault]) -> None:
    n = job.n
    mtu = np.full(n, MTU_BYTES, dtype=np.int32)
    ai = np.full(n, 5, dtype=np.int32)
    reset = np.full(n, 300, dtype=np.int32)
    for f in faults:
        if not f.binary_shown:
            continue
        if f.kind == MISCONFIG_MTU:
            mtu[f.target] = 1024
        elif f.kind == MISCONFIG_DCQCN:
            ai[f.target] = 1
            reset[f.target] = 3000
    store.write(
        "config_nic",
        {
            "gpu": np.arange(n, dtype=np.int32),
            "mtu": mtu,
            "dcqcn_enabled": np.ones(n, dtype=bool),
            "dcqcn_rpg_ai_rate_mbps": ai,
            "dcqcn_rpg_time_reset_us": reset,
        },
    )


def synth_to_file(spec: SynthSpec, faults: list[Fault], db: Path) -> dict[str, Any]:
    """Synthesize into a fresh DuckDB file and write the injection record next to it."""
    if db.exists():
        db.unlink()
    with TelemetryStore(db) as st:
        summary = synthesize(spec, faults, st)
    write_truth(db, faults)
    return summary
