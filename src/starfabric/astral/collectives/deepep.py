"""The DeepEP multi-QP experiment: dispatch/combine bandwidth per GPU against QPs per peer.

Setting: H800-like nodes (8 GPUs, 400G per GPU as a 2x200G NIC, each port to a different ToR:
Astral's dual-ToR) on a RoCE-like Clos with per-flow ECMP, EP32 and EP64. DeepEP sends a
token once per destination node by RDMA to the same-rail GPU there, which forwards it over
NVLink (see moe.py). What makes the multi-QP gain in this model:

* NIC ports: ECMP hashes each QP's 5-tuple to one of the sender's two NIC ports, and the
  path (port → ToR → ... → the receiver's port on the same plane) fixes the receiver's port too.
  With one QP per peer a GPU has only (nodes − 1) RDMA flows in and out (3 at EP32, 7 at EP64);
  somewhere among the GPUs all of them land on one port, which carries them at 200G while the
  other idles, and that slowest port sets the all-to-all's time. Many QPs split each peer's
  bytes over both ports; the busiest port's excess shrinks like 1/sqrt(flows).
* Fabric: when the nodes sit under different ToRs, each flow also hashes to one ToR uplink;
  few large flows can collide on uplinks, many small ones fill them evenly.
* QP serialization (every fabric, and all there is on one IB port with adaptive routing): the
  sender writes a chunk, fences, then signals its tail, so a QP has one chunk in flight per
  signal wait; a port with k QPs is idle while all k wait (run.qp_stop_and_wait_capacity). A
  single QP is not bandwidth-limited at DeepEP's 150-290 KB chunks (one CX7 QP reaches 392 Gb/s
  at 128 KiB, NVIDIA/nccl#2409); it is the few waits per port that more QPs overlap.
The gain therefore saturates once each port and uplink carries many QPs; bandwidth can never
exceed the NIC line rate, which the flow model's max-min sharing enforces.

Bandwidth is reported as DeepEP's tests (tests/test_internode.py) define it: RDMA bytes per GPU
/ time, where the RDMA bytes count each token once per distinct destination *node*, its own
node included (so it can exceed the line rate when tokens also stay local); `nic_gbyte_s` is
the physical bytes each GPU's NIC sent / time, always below the line rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.progress import Progress

from starfabric.astral.collectives.moe import MoEShape, moe_alltoall, route_tokens
from starfabric.astral.collectives.plan import IntArray, Plan, Step
from starfabric.astral.collectives.protocols import get_protocol
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.topology import LINK_NIC, ClusterSpec, Topology, build
from starfabric.errors import ConfigError

PUBLISHED_H800: dict[tuple[int, str], tuple[float, float]] = {
    (32, "dispatch"): (44.0, 58.0),
    (32, "combine"): (47.0, 57.0),
    (64, "dispatch"): (46.0, 51.0),
    (64, "combine"): (45.0, 50.0),
}
"""DeepEP PR #130 (Tencent), H800 + 400G IB, GB/s per GPU before → after multi-QP IBGDA
(Astral reference notes). Tencent reports ~2x on RoCE and +30% on IB."""

TOKENS_PER_RANK = 1024
"""Assumption: tokens per rank in the experiment (DeepEP's tests use 4096). Bandwidth is a
rate, so fewer tokens only add sampling noise to the per-pair loads, and keep runtime modest."""

DEEPEP_RDMA_CHUNK_TOKENS: dict[str, dict[int, int]] = {
    "dispatch": {16: 20, 24: 32, 32: 32, 64: 28, 128: 32, 144: 12, 160: 12},
    "combine": {16: 28, 24: 20, 32: 20, 64: 20, 128: 12, 144: 8, 160: 8},
}
"""Tokens per RDMA chunk (num_max_rdma_chunked_send_tokens) of DeepEP's recommended configs
(deep_ep/buffer.py get_dispatch_config / get_combine_config): each chunk is one RDMA write
followed by its tail signal, so a chunk is what a QP has in flight per signal."""


QP_SIGNAL_WAIT_S = 2 * get_protocol("LL").hw_us("net", "ring") * 1e-6
"""Assumption: 5.4 µs a QP waits between a chunk and the next, the chunk's way to the peer and
its completion's way back before the tail signal may follow it (DeepEP's sender: write, fence,
signal per chunk), each one proxy-driven IB hop as NCCL's tuner charges it (tuning.cc hwLat,
network, ring, LL: 2.7 µs). Not measured here: no DeepEP timeline is in the repository."""

REL_TOL = 0.01
"""Assumption: flows finishing within 1% of each other complete together (FlowSim rel_tol);
exact runs of the 8K-flow EP64 steps take ~10 s each, and times move by < 1%."""

LINE_RATE_GBYTE_S = 50.0
"""400 Gb/s per GPU (2x200G ports), in GB/s (Astral section 3: H800 hosts, 8 NICs of 2x200G)."""


def h800_fabric(nic: str = "2x200G", transport: str = "roce") -> Topology:
    """One Astral pod of H800 hosts on 25.6T switches: by default a 2x200G NIC per GPU on two
    ToRs (Astral's RoCE design); `nic="CX7-400G"` gives one 400 Gb/s port per GPU, as the
    published IB runs (DeepEP README: H800 with a CX7 InfiniBand 400 Gb/s NIC per GPU)."""
    single = nic.upper().startswith("CX7-400")
    return build(
        ClusterSpec(
            name="deepep-h800" if not single else "deepep-h800-400g",
            topology="astral",
            gpu="H800",
            switch="25.6T",
            port_speed="400G" if single else "200G",
            nic=nic,
            dual_tor=not single,
            gpus_per_host=8,
            pods=1,
            transport=transport,
        )
    )


def spread_hosts(topo: Topology, hosts: int) -> IntArray:
    """GPUs of `hosts` hosts, each under a different ToR (a fragmented job: traffic crosses Aggs).

    Assumption: the EP group's nodes do not share ToRs, as for a job placed by a busy scheduler;
    with shared ToRs only the NIC-port effect remains.
    """
    st = topo.structure
    if st is None:
        raise ConfigError("deepep: topology has no Clos structure", fix="use an astral cluster")
    local = st.gpus_per_host
    tor_of_host = st.gpu_tor[::local, 0]
    _, first = np.unique(tor_of_host, return_index=True)
    chosen = np.sort(first)[:hosts]
    if len(chosen) < hosts:
        raise ConfigError(
            f"deepep: {hosts} hosts on distinct ToRs do not fit {topo.name}",
            fix="use a larger cluster or fewer hosts",
        )
    return (chosen[:, None] * local + np.arange(local)).ravel().astype(np.int64)


MAX_QPS_PER_PEER = 64
"""Assumption: QPs per peer the sweep accepts, 4x the 16 of DeepEP's published sweep; every QP
is a flow of the simulation, so a 64-rank EP at 64 QPs is already ~250k flows."""


def split_qps(plan: Plan, q: int, local: int) -> Plan:
    """`plan` (built with one QP per peer) with every inter-node flow split over `q` QPs."""
    if not 1 <= q <= MAX_QPS_PER_PEER:
        raise ConfigError(
            f"deepep: qps_per_peer = {q} is outside 1..{MAX_QPS_PER_PEER}",
            fix=f"use 1..{MAX_QPS_PER_PEER}",
        )
    (s,) = plan.steps
    cross = s.src // local != s.dst // local
    rep = np.where(cross, q, 1)
    idx = np.repeat(np.arange(len(s)), rep)
    starts = np.cumsum(rep) - rep
    qp = np.arange(len(idx)) - np.repeat(starts, rep)
    step = Step(s.src[idx], s.dst[idx], s.size_bytes[idx] / rep[idx], qp.astype(np.int64), s.phase)
    return Plan(plan.op, plan.algorithm, plan.ranks, plan.size_bytes, (step,), 1.0, plan.notes)


def with_efficiencies(plan: Plan, topo: Topology) -> Plan:
    """`plan` with the achievable NVLink and NIC fractions every NCCL plan carries (H800
    NVLink ~160 of 200 GB/s per DeepEP's README is NVLINK_EFF; the NIC's by its rate)."""
    from starfabric.astral.collectives.nccl import NVLINK_EFF, nic_eff

    lo, hi = topo.links_of_kind(LINK_NIC)
    nic_gbs = float(topo.link_capacity_bps[lo]) / 8e9 if hi > lo else 50.0
    notes = dict(plan.notes)
    notes.update({"nvlink_scale": NVLINK_EFF, "net_scale": nic_eff(nic_gbs)})
    return Plan(plan.op, plan.algorithm, plan.ranks, plan.size_bytes, plan.steps, 1.0, notes)


def with_qp_chunks(plan: Plan, ep: int, phase: str) -> Plan:
    """`plan` with the QP stop-and-wait of DeepEP's sender (run.qp_stop_and_wait_capacity):
    one chunk of DEEPEP_RDMA_CHUNK_TOKENS per QP in flight, QP_SIGNAL_WAIT_S between chunks."""
    table = DEEPEP_RDMA_CHUNK_TOKENS[phase]
    if ep not in table:
        raise ConfigError(
            f"deepep: EP{ep} has no DeepEP config (RDMA chunk size)",
            fix=f"use --eps from {', '.join(map(str, sorted(table)))}",
        )
    notes = dict(plan.notes)
    notes["qp_chunk_bytes"] = table[ep] * plan.notes["token_bytes"]
    notes["qp_wait_s"] = QP_SIGNAL_WAIT_S
    return Plan(plan.op, plan.algorithm, plan.ranks, plan.size_bytes, plan.steps, 1.0, notes)


def deepep_rdma_bytes(shape: MoEShape, phase: str) -> float:
    """Mean RDMA bytes per GPU as DeepEP's test counts them: tokens x distinct nodes x bytes."""
    experts = route_tokens(shape)
    nodes = shape.ranks // shape.local
    node = experts // (shape.experts // nodes)
    distinct = (np.sort(node, axis=1)[:, 1:] != np.sort(node, axis=1)[:, :-1]).sum(axis=1) + 1
    elem = shape.dispatch_bytes_per_elem if phase == "dispatch" else shape.combine_bytes_per_elem
    return float(distinct.sum()) * shape.hidden * elem / shape.ranks


@dataclass(frozen=True)
class DeepEPRow:
    """One point: EP size, phase, QPs per peer, and bandwidths per GPU in GB/s."""

    ep: int
    phase: str
    qps_per_peer: int
    time_us: float
    rdma_gbyte_s: float  # DeepEP's definition (see module docstring)
    nic_gbyte_s: float  # physical NIC bytes sent per GPU (mean) / time
    max_nic_util: float  # busiest NIC port's bytes / (capacity x time)
    published: tuple[float, float] | None  # H800 + IB, before → after


def deepep_sweep(
    eps: tuple[int, ...] = (32, 64),
    qps: tuple[int, ...] = tuple(range(1, 17)),
    *,
    tokens_per_rank: int = TOKENS_PER_RANK,
    seeds: tuple[int, ...] = (0, 1, 2),
    topo: Topology | None = None,
    rel_tol: float = REL_TOL,
    progress: bool = False,
    transport: str | None = None,
) -> list[DeepEPRow]:
    """Dispatch and combine bandwidth per GPU vs QPs per peer, averaged over ECMP seeds.

    `transport` (netsim.transport): "ib" routes adaptively in the switches (each QP keeps
    its NIC port), "roce" hashes every QP with ECMP and loses DCQCN_EFF on contended links;
    None is per-flow ECMP at ideal max-min rates.
    """
    t = topo or h800_fabric()
    nic_lo, nic_hi = t.links_of_kind(LINK_NIC)
    rows: list[DeepEPRow] = []
    jobs = [(ep, ph) for ep in eps for ph in ("dispatch", "combine")]
    with Progress(disable=not progress) as bar:
        task = bar.add_task("deepep", total=len(jobs) * len(qps) * len(seeds))
        for ep, phase in jobs:
            shape = MoEShape(ranks=ep, tokens_per_rank=tokens_per_rank, qps_per_peer=1)
            base = moe_alltoall(shape, phase)
            gpus = spread_hosts(t, ep // shape.local)
            rdma = deepep_rdma_bytes(shape, phase)
            for q in qps:
                plan = with_qp_chunks(split_qps(base, q, shape.local), ep, phase)
                if transport is not None:
                    plan = with_efficiencies(plan, t)
                time_s = nic_b = util = 0.0
                for seed in seeds:
                    res = run_plan(
                        t, plan, placement=gpus, seed=seed, rel_tol=rel_tol, transport=transport
                    )
                    lb = res.link_bytes[nic_lo:nic_hi]
                    cap = t.link_capacity_bps[nic_lo:nic_hi]
                    time_s += res.time_s / len(seeds)
                    nic_b += float(lb[0::2].sum()) / ep / len(seeds)  # GPU → ToR direction
                    util = max(util, float((lb * 8 / (cap * res.time_s)).max()))
                    bar.advance(task)
                rows.append(
                    DeepEPRow(
                        ep,
                        phase,
                        q,
                        time_s * 1e6,
                        rdma / time_s / 1e9,
                        nic_b / time_s / 1e9,
                        util,
                        PUBLISHED_H800.get((ep, phase)),
                    )
                )
    return rows


def format_rows(rows: list[DeepEPRow]) -> str:
    """A table: EP, phase, QPs, time, DeepEP RDMA GB/s, NIC GB/s, published before → after."""
    out = [
        f"{'EP':>3} {'phase':<9} {'QPs':>3} {'time_us':>9} {'rdma_GB/s':>9} {'nic_GB/s':>8} "
        f"{'published (IB)':>15}"
    ]
    for r in rows:
        pub = f"{r.published[0]:g} -> {r.published[1]:g}" if r.published else ""
        out.append(
            f"{r.ep:>3} {r.phase:<9} {r.qps_per_peer:>3} {r.time_us:>9.1f} "
            f"{r.rdma_gbyte_s:>9.1f} {r.nic_gbyte_s:>8.1f} {pub:>15}"
        )
    return "\n".join(out)


def format_gains(rows: list[DeepEPRow], roce: list[DeepEPRow]) -> str:
    """Per EP and phase: fewest -> most QPs on this transport, the published IB figures, and
    the multi-QP gain the same sweep shows with RoCE transport (Tencent reports ~2x on RoCE)."""

    def ends(rs: list[DeepEPRow], ep: int, phase: str) -> tuple[float, float]:
        sel = sorted(
            (r for r in rs if r.ep == ep and r.phase == phase), key=lambda r: r.qps_per_peer
        )
        return sel[0].rdma_gbyte_s, sel[-1].rdma_gbyte_s

    out = [
        f"{'EP':>3} {'phase':<9} {'model (GB/s)':>15} {'gain':>6} {'published IB':>13} "
        f"{'gain':>6} {'RoCE model':>15} {'gain':>6}"
    ]
    keys = sorted({(r.ep, r.phase) for r in rows})
    for ep, phase in keys:
        a, b = ends(rows, ep, phase)
        ra, rb = ends(roce, ep, phase)
        pub = PUBLISHED_H800.get((ep, phase))
        pub_s = f"{pub[0]:g} -> {pub[1]:g}" if pub else ""
        pub_g = f"{pub[1] / pub[0]:.2f}x" if pub else ""
        out.append(
            f"{ep:>3} {phase:<9} {a:>6.1f} -> {b:<6.1f} {b / a:>5.2f}x {pub_s:>13} {pub_g:>6} "
            f"{ra:>6.1f} -> {rb:<6.1f} {rb / ra:>5.2f}x"
        )
    return "\n".join(out)
