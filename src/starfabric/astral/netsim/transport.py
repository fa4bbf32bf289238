"""Transport as a flow-level option: how RoCE and InfiniBand place and pace the same flows.

* RoCE (and TCPX/TCPXO): every flow (QP / 5-tuple) is hashed once by ECMP onto one path, so
  large flows collide on uplinks as the hash dictates; DCQCN-style rate control converges to
  the fair share but oscillates around it, which leaves part of a contended link idle
  (`DCQCN_EFF` on links where flows of different senders meet).
* InfiniBand (and EFA's SRD, which sprays packets over many paths): adaptive routing lets the
  switches steer traffic to the least-loaded equal-cost port, and credit-based flow control
  keeps links lossless without rate oscillation. At flow level this is a path choice: each
  flow takes, among `AR_CHOICES` equal-cost candidates leaving by the same NIC port (a QP is
  bound to its port; only switches adapt), the one whose busiest link is least loaded
  (rounds of power-of-d choices), and contended links keep their full capacity.

What a flow-level model leaves out compared with a packet simulator (ns-3 in SimAI): queue
build-up and its latency, ECN marking thresholds and CNP timing, PFC pause propagation and
head-of-line blocking of victim flows (a paused port stops every flow of its priority), packet
reordering under spraying, retransmissions, and the transient before rates converge. Rates
here are the converged ones, recomputed whenever a flow starts or ends.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

TRANSPORTS = ("roce", "ib", "efa", "tcpxo", "tcpx")
"""Transports a cluster may name (ClusterSpec.transport)."""

ADAPTIVE = frozenset({"ib", "efa"})
"""Transports that route adaptively (IB adaptive routing, EFA SRD multipath spraying)."""

AR_CHOICES = 4
"""Assumption: equal-cost candidates adaptive routing weighs per flow (a switch sees its own
uplinks; 4 hashed candidates stand for that choice along a Clos path)."""

AR_ROUNDS = 6
"""Assumption: rounds of re-choosing; loads settle within a few rounds."""

DCQCN_EFF = 0.95
"""Assumption: fraction of a contended link DCQCN keeps busy. DCQCN (Zhu et al., SIGCOMM'15)
converges to the fair share with rate oscillations and queue swings; 5% idle is ours."""


TCPX_HOST_NIC_FRACTION = 0.5
"""GPUDirect-TCPX (GCP A3 High): fraction of its NICs' line rate the host CPU sustains. TCPX
lands payloads in GPU memory (devmem TCP, header split) but every packet still goes through the
host's kernel TCP stack on both ends; Google's published run configuration pins each NIC's TX
and RX threads to 14 cores of its NUMA node, two NICs sharing them
(GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpx/README.md,
NCCL_GPUDIRECTTCPX_TX/RX_BINDINGS). The figure is the published A3 High nccl-tests all_gather
(dstack docs, GCP clusters, "A3 High/Edge"; Google's run-allgather.sh): ~50 GB/s busbw on 4 x
200 Gb/s = 100 GB/s of NICs per host, beside 188.5 of 200 GB/s (0.94) for the same H100s with
GPUDirect-TCPXO, whose NIC offloads that data path. Assumption: the same fraction at every
size and node count; no second public TCPX figure was found to check it against."""

HOST_LIMITED = {"tcpx": TCPX_HOST_NIC_FRACTION}
"""Transports whose host CPU caps every NIC link at a fraction of its line rate."""


def host_limited_capacity(
    capacity_bps: FloatArray, line_bps: FloatArray, nic_lo: int, nic_hi: int, transport: str
) -> FloatArray:
    """NIC link capacities under a transport whose host CPU handles every packet (TCPX): each
    NIC link (both directions) carries at most the host's fraction of its line rate."""
    frac = HOST_LIMITED.get(transport)
    if frac is None:
        return capacity_bps
    out = capacity_bps.copy()
    out[nic_lo:nic_hi] = np.minimum(out[nic_lo:nic_hi], frac * line_bps[nic_lo:nic_hi])
    return out


def check_transport(name: str) -> str:
    """The transport name, or a ConfigError naming the choices."""
    if name not in TRANSPORTS:
        raise ConfigError(f"transport {name!r}", fix=f"use one of: {', '.join(TRANSPORTS)}")
    return name


def _path_max(
    ptr: IntArray, links: IntArray, value: FloatArray, add: FloatArray | None = None
) -> FloatArray:
    """Per flow, the largest `value[link] (+ add[flow])` along its path (0 for empty paths)."""
    n = len(ptr) - 1
    lengths = np.diff(ptr)
    v = value[links]
    if add is not None:
        v = v + np.repeat(add, lengths)
    out = np.zeros(n)
    if len(links):
        red = np.maximum.reduceat(v, np.minimum(ptr[:-1], len(links) - 1))
        out = np.where(lengths > 0, red, 0.0)
    return out


def adaptive_paths(
    candidates: list[tuple[IntArray, IntArray]],
    size_bytes: FloatArray,
    capacity_bps: FloatArray,
    seed: int = 0,
) -> tuple[IntArray, IntArray]:
    """Adaptive routing at flow level: per flow, the candidate path whose busiest link is least
    loaded, found by rounds in which a random half of the flows re-choose against the others'
    loads (so the choice settles instead of oscillating)."""
    if not candidates:
        raise ConfigError("adaptive_paths: no candidate paths", fix="report a bug")
    n = len(candidates[0][0]) - 1
    rng = np.random.default_rng(seed)
    cap = np.maximum(capacity_bps, 1.0) / 8.0
    choice = np.zeros(n, np.int64)
    owners = [np.repeat(np.arange(n), np.diff(p)) for p, _ in candidates]
    # a QP is bound to one NIC port: switches adapt, the sender's first hop does not
    base_ptr, base_links = candidates[0]
    first = _first_links(base_ptr, base_links)
    same_port = np.stack([_first_links(p, lk) == first for p, lk in candidates])
    # on[j][k, e]: candidate j's link entry e is on the same flow's candidate k too, so a flow
    # moving from k to j adds no load there (its NIC port and last hop are always shared)
    n_links = len(cap)
    keys = [owners[j] * n_links + lk for j, (_, lk) in enumerate(candidates)]
    on = [
        np.stack([np.isin(keys[j], keys[k]) for k in range(len(candidates))])
        for j in range(len(candidates))
    ]
    for _ in range(AR_ROUNDS):
        load = np.zeros(len(cap))
        for j, (_, lk) in enumerate(candidates):
            mine = choice[owners[j]] == j
            np.add.at(load, lk[mine], size_bytes[owners[j][mine]])
        util = load / cap
        cost = np.empty((len(candidates), n))
        for j, (p, lk) in enumerate(candidates):
            held = on[j][choice[owners[j]], np.arange(len(lk))]
            per_link_add = np.where(held, 0.0, size_bytes[owners[j]]) / cap[lk]
            v = util[lk] + per_link_add
            lengths = np.diff(p)
            red = np.maximum.reduceat(v, np.minimum(p[:-1], len(lk) - 1)) if len(lk) else v
            cost[j] = np.where(lengths > 0, red, 0.0)
        cost[~same_port] = np.inf
        best = cost.argmin(axis=0)
        here = cost[choice, np.arange(n)]
        better = cost[best, np.arange(n)] < here * (1 - 1e-9)
        move = better & (rng.random(n) < 0.5)
        if not move.any():
            break
        choice = np.where(move, best, choice)
    return _gather(candidates, choice)


def _first_links(ptr: IntArray, links: IntArray) -> IntArray:
    """Each flow's first link (-1 for an empty path)."""
    lengths = np.diff(ptr)
    safe = np.minimum(ptr[:-1], max(len(links) - 1, 0))
    return np.where(lengths > 0, links[safe] if len(links) else -1, -1)


def _gather(
    candidates: list[tuple[IntArray, IntArray]], choice: IntArray
) -> tuple[IntArray, IntArray]:
    """CSR of each flow's chosen candidate path."""
    n = len(choice)
    lengths = np.zeros(n, np.int64)
    for j, (p, _) in enumerate(candidates):
        lengths = np.where(choice == j, np.diff(p), lengths)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=ptr[1:])
    out = np.empty(int(ptr[-1]), np.int64)
    for j, (p, lk) in enumerate(candidates):
        flows = np.flatnonzero(choice == j)
        if not len(flows):
            continue
        ln = np.diff(p)[flows]
        owner = np.repeat(flows, ln)
        off = np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln)
        out[ptr[owner] + off] = lk[p[owner] + off]
    return ptr, out


def contended_capacity(
    ptr: IntArray,
    links: IntArray,
    src: IntArray,
    capacity_bps: FloatArray,
    transport: str,
    protect: npt.NDArray[np.bool_] | None = None,
) -> FloatArray:
    """Link capacities under the transport's rate control: with RoCE/TCP, links where flows of
    two or more senders meet keep DCQCN_EFF of their rate; IB credits lose nothing."""
    if transport in ADAPTIVE:
        return capacity_bps
    owner = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    pairs = np.unique(np.stack([links, src[owner]]), axis=1)
    senders = np.bincount(pairs[0], minlength=len(capacity_bps))
    hit = senders >= 2
    if protect is not None:
        hit &= ~protect
    out = capacity_bps.copy()
    out[hit] *= DCQCN_EFF
    return out
