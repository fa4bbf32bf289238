"""Traffic for the Fornax datapath on a simulated clock: synthetic connections (seeded
arrivals, TCP/UDP/ICMP mix, east-west and north-south, full TCP handshakes and teardowns,
a schedule of policy changes) or a pcap replay, delivered as time-ordered PacketBatch windows.

Packets are in *session-key space*: both directions of a connection carry the VNI of the side
that opened it and the reply is the exact reversal of the request (ICMP: same identifier,
reply type), which is how the session table sees them; NAT rewrites are actions applied on
output (policy), not part of the workload. Everything is generated with numpy per window,
never one Python object per packet.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator

from starfabric.config import Spec, parse_spec
from starfabric.errors import ConfigError
from starfabric.fornax import packets as pk
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.pcap import read_pcap
from starfabric.fornax.ranges import L4Port, Seed, Vni
from starfabric.fornax.vpc.spec import VpcSpec
from starfabric.units import parse_count, parse_duration

EPHEMERAL_PORTS = (32768, 60999)
"""Linux's default net.ipv4.ip_local_port_range: client source ports."""
CONTROL_BYTES = 64
"""IP length of a packet without payload (assumption: headers + typical TCP options)."""
MTU_BYTES = 1500
"""Largest data packet (Ethernet MTU)."""


class Distribution(Spec):
    """A positive random quantity: fixed, exponential, lognormal (sigma) or Pareto (alpha).

    Defaults are assumptions: heavy-tailed flow sizes as in datacenter traces.
    """

    kind: Literal["fixed", "exponential", "lognormal", "pareto"] = "lognormal"
    mean: float = Field(gt=0)
    sigma: float = Field(default=1.0, gt=0)
    alpha: float = Field(default=1.5, gt=1)

    def sample(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
        if self.kind == "fixed":
            return np.full(n, self.mean)
        if self.kind == "exponential":
            return rng.exponential(self.mean, n)
        if self.kind == "lognormal":
            mu = np.log(self.mean) - self.sigma**2 / 2  # so that E[X] = mean
            return rng.lognormal(mu, self.sigma, n)
        xm = self.mean * (self.alpha - 1) / self.alpha  # Pareto with E[X] = mean
        return xm * (1 + rng.pareto(self.alpha, n))


def _duration(v: object) -> float:
    return parse_duration(v, "duration")  # type: ignore[arg-type]


class PolicyChange(Spec):
    """At simulated time `at`, the VPC spec becomes the one in file `vpc`."""

    at: float
    vpc: str

    _at = field_validator("at", mode="before")(lambda v: _duration(v))


class SyntheticWorkload(Spec):
    """Connections arriving as a Poisson process over the ENIs of a VpcSpec.

    Default shares (protocols, directions, IPv6, resets), sizes and server ports are
    assumptions (a plausible cloud mix), not figures from the paper; set them per scenario.
    """

    kind: Literal["synthetic"] = "synthetic"
    seed: Seed = 0
    duration: float = Field(gt=0)
    cps: float = Field(gt=0)
    tcp: float = Field(default=0.8, ge=0)
    udp: float = Field(default=0.15, ge=0)
    icmp: float = Field(default=0.05, ge=0)
    east_west: float = Field(default=0.7, ge=0)
    outbound: float = Field(default=0.2, ge=0)
    inbound: float = Field(default=0.1, ge=0)
    peered: float = Field(default=0.1, ge=0, le=1)
    """Share of east-west connections that go to a peered VPC (when one exists)."""
    ipv6: float = Field(default=0.2, ge=0, le=1)
    """Share of connections between IPv6-capable endpoints that use IPv6."""
    rst: float = Field(default=0.05, ge=0, le=1)
    """Share of TCP connections that end with a reset instead of a FIN exchange."""
    data_packets: Distribution = Distribution(kind="lognormal", mean=8.0)
    flow_duration: Distribution = Distribution(kind="lognormal", mean=0.2)
    """Seconds from the first to the last packet of a connection."""
    tcp_ports: tuple[L4Port, ...] = Field((80, 443, 22, 3306, 6379, 8080), min_length=1)
    udp_ports: tuple[L4Port, ...] = Field((53, 123, 443, 4500), min_length=1)
    external_v4: str = "198.18.0.0/15"
    """Internet peers (RFC 2544 benchmarking range)."""
    external_v6: str = "2001:db8::/32"
    batch: float = 0.001
    """Width of one batch window, seconds."""
    policy_changes: tuple[PolicyChange, ...] = ()

    _dur = field_validator("duration", "batch", mode="before")(lambda v: _duration(v))
    _cps = field_validator("cps", mode="before")(
        lambda v: float(parse_count(v, "cps")) if isinstance(v, str) else v
    )

    @model_validator(mode="after")
    def _shares(self) -> SyntheticWorkload:
        """Each group of shares is a split of the traffic: every share in 0..1, adding to 1
        (a share left out keeps its default, which is counted)."""
        for names in (("tcp", "udp", "icmp"), ("east_west", "outbound", "inbound")):
            vals = [getattr(self, n) for n in names]
            if max(vals) > 1 or abs(sum(vals) - 1.0) > 1e-6:
                shown = " + ".join(f"{n} {v:g}" for n, v in zip(names, vals, strict=True))
                raise ValueError(
                    f"{shown} = {sum(vals):g}: shares must each be in 0..1 and add up to 1 "
                    f"(give all of {', '.join(names)})"
                )
        return self


class PcapWorkload(Spec):
    """Replay of a capture; VXLAN/Geneve VNIs kept, others get `default_vni`."""

    kind: Literal["pcap"]
    path: str
    default_vni: Vni = 0
    batch: float = 0.001
    time_scale: float = Field(default=1.0, gt=0)
    """Simulated seconds per captured second (0.5 replays twice as fast)."""
    policy_changes: tuple[PolicyChange, ...] = ()

    _dur = field_validator("batch", mode="before")(lambda v: _duration(v))


WorkloadSpec = SyntheticWorkload | PcapWorkload


def parse_workload(data: dict[str, object], source: str = "") -> WorkloadSpec:
    """Validate a workload mapping; its `kind` (default synthetic) picks the model."""
    kind = data.get("kind", "synthetic")
    models: dict[object, type[SyntheticWorkload] | type[PcapWorkload]] = {
        "synthetic": SyntheticWorkload,
        "pcap": PcapWorkload,
    }
    if kind not in models:
        prefix = f"{source}: " if source else ""
        raise ConfigError(
            f"{prefix}field 'kind' = {kind!r}: not a workload kind", fix="use synthetic or pcap"
        )
    return parse_spec(models[kind], data, source=source)


@dataclass(frozen=True)
class WorkloadBatch:
    """One window of traffic: packets in time order, each with its connection id and whether
    it travels in the reply direction. Policy changes due at `t_start_ns` apply before it."""

    t_start_ns: int
    t_end_ns: int
    packets: PacketBatch
    conn: npt.NDArray[np.int64]
    reply: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class _Endpoints:
    """ENIs of a VpcSpec as arrays (the generator's address book)."""

    vni: npt.NDArray[np.uint32]
    vpc: npt.NDArray[np.int64]
    v4: npt.NDArray[np.uint64]  # IPv4-mapped low half, 0 = none
    v6_hi: npt.NDArray[np.uint64]
    v6_lo: npt.NDArray[np.uint64]
    has_v6: npt.NDArray[np.bool_]
    eip: npt.NDArray[np.uint64]  # IPv4-mapped low half, 0 = none
    peers: list[list[int]]  # per VPC index: peered VPC indices


def _endpoints(spec: VpcSpec) -> _Endpoints:
    rows = []
    vpc_index: dict[str, int] = {}
    for t in spec.tenants:
        for v in t.vpcs:
            vi = vpc_index.setdefault(f"{t.name}/{v.name}", len(vpc_index))
            eips = {x.eni: pk.ip_to_halves(x.ip)[1] for x in v.eips}
            for e in v.enis:
                v4 = pk.ip_to_halves(e.ipv4)[1] if e.ipv4 else 0
                hi, lo = pk.ip_to_halves(e.ipv6) if e.ipv6 else (0, 0)
                rows.append((v.vni, vi, v4, hi, lo, e.ipv6 is not None, eips.get(e.name, 0)))
    peers: list[list[int]] = [[] for _ in vpc_index]
    for p in spec.peerings:
        peers[vpc_index[p.a]].append(vpc_index[p.b])
        peers[vpc_index[p.b]].append(vpc_index[p.a])
    cols = list(zip(*rows, strict=True)) if rows else [()] * 7
    return _Endpoints(
        vni=np.array(cols[0], dtype=np.uint32),
        vpc=np.array(cols[1], dtype=np.int64),
        v4=np.array(cols[2], dtype=np.uint64),
        v6_hi=np.array(cols[3], dtype=np.uint64),
        v6_lo=np.array(cols[4], dtype=np.uint64),
        has_v6=np.array(cols[5], dtype=np.bool_),
        eip=np.array(cols[6], dtype=np.uint64),
        peers=peers,
    )


def _random_in(net_text: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    net = ipaddress.ip_network(net_text)
    hi, lo = pk.ip_to_halves(net.network_address)
    host_bits = min(net.max_prefixlen - net.prefixlen, 62)
    offs = rng.integers(1, max(2, (1 << host_bits) - 1), n).astype(np.uint64)
    return np.full(n, hi, dtype=np.uint64), np.uint64(lo) + offs


class _Synth:
    """Connection sampling (per window) and packet expansion, all vectorized."""

    def __init__(self, spec: VpcSpec, wl: SyntheticWorkload) -> None:
        self.wl = wl
        self.gw = spec.gateway_vni
        self.ep = _endpoints(spec)
        self.rng = np.random.default_rng(wl.seed)
        ep = self.ep
        shares = np.array([wl.east_west, wl.outbound, wl.inbound], dtype=float)
        if shares.sum() <= 0:
            raise ConfigError(
                "workload: east_west, outbound and inbound are all 0", fix="give one a share"
            )
        self.dir_p = shares / shares.sum()
        protos = np.array([wl.tcp, wl.udp, wl.icmp], dtype=float)
        if protos.sum() <= 0:
            raise ConfigError("workload: tcp, udp and icmp are all 0", fix="give one a share")
        self.proto_p = protos / protos.sum()
        counts = np.bincount(ep.vpc, minlength=len(ep.peers)) if len(ep.vpc) else np.zeros(0)
        self.ew_clients = np.flatnonzero(counts[ep.vpc] >= 2) if len(ep.vpc) else ep.vpc
        self.eip_enis = np.flatnonzero(ep.eip != 0)
        if wl.east_west > 0 and len(self.ew_clients) == 0:
            raise ConfigError(
                f"workload: east_west = {wl.east_west} needs a VPC with two ENIs",
                fix="add ENIs or set east_west: 0",
            )
        if wl.outbound > 0 and len(ep.vni) == 0:
            raise ConfigError("workload: outbound traffic needs an ENI", fix="add an ENI")
        if wl.inbound > 0 and len(self.eip_enis) == 0:
            raise ConfigError(
                f"workload: inbound = {wl.inbound} needs an ENI with an EIP",
                fix="add an eip or set inbound: 0",
            )
        n_vpc = len(ep.peers)
        # ENIs grouped by VPC: order[start[v] : start[v] + count[v]]
        self.order = np.argsort(ep.vpc, kind="stable")
        self.count = np.bincount(ep.vpc, minlength=n_vpc).astype(np.int64)
        self.start = np.cumsum(self.count) - self.count
        self.pos = np.empty(len(ep.vpc), dtype=np.int64)
        self.pos[self.order] = np.arange(len(ep.vpc))
        live = [[p for p in ps if self.count[p]] for ps in ep.peers]
        width = max([len(p) for p in live] + [1])
        self.n_peers = np.array([len(p) for p in live], dtype=np.int64)
        self.peer_table = np.zeros((n_vpc, width), dtype=np.int64)
        for v, ps in enumerate(live):
            self.peer_table[v, : len(ps)] = ps
        self.next_conn = 0

    def _servers(self, clients: np.ndarray) -> np.ndarray:
        """East-west partner of each client: another ENI of its VPC, or (share `peered`)
        an ENI of a peered VPC."""
        rng, v = self.rng, self.ep.vpc[clients]
        r = rng.integers(0, np.maximum(self.count[v] - 1, 1))
        mine = self.pos[clients] - self.start[v]
        same = self.order[self.start[v] + r + (r >= mine)]
        go_peer = (self.n_peers[v] > 0) & (rng.random(len(clients)) < self.wl.peered)
        col = (rng.random(len(clients)) * np.maximum(self.n_peers[v], 1)).astype(np.int64)
        pv = self.peer_table[v, col]
        other = self.order[self.start[pv] + rng.integers(0, np.maximum(self.count[pv], 1))]
        return np.where(go_peer, other, same)

    def connections(self, t0: float, t1: float) -> dict[str, np.ndarray]:
        """Connections starting in [t0, t1): endpoints, ports, sizes, times."""
        wl, rng, ep = self.wl, self.rng, self.ep
        n = int(rng.poisson(wl.cps * (t1 - t0)))
        start = np.sort(rng.uniform(t0, t1, n))
        kind = rng.choice(3, n, p=self.dir_p)
        proto_k = rng.choice(3, n, p=self.proto_p)
        vni = np.zeros(n, dtype=np.uint32)
        c_hi, c_lo, s_hi, s_lo = np.zeros((4, n), dtype=np.uint64)  # client, server halves
        v6 = np.zeros(n, dtype=np.bool_)
        ew = np.flatnonzero(kind == 0)
        if len(ew):
            a = self.ew_clients[rng.integers(0, len(self.ew_clients), len(ew))]
            b = self._servers(a)
            use6 = ep.has_v6[a] & ep.has_v6[b] & (rng.random(len(ew)) < wl.ipv6)
            use6 |= (ep.v4[a] == 0) | (ep.v4[b] == 0)
            vni[ew] = ep.vni[a]
            c_hi[ew] = np.where(use6, ep.v6_hi[a], 0)
            c_lo[ew] = np.where(use6, ep.v6_lo[a], ep.v4[a])
            s_hi[ew] = np.where(use6, ep.v6_hi[b], 0)
            s_lo[ew] = np.where(use6, ep.v6_lo[b], ep.v4[b])
            v6[ew] = use6
        out = np.flatnonzero(kind == 1)
        if len(out):
            a = rng.integers(0, len(ep.vni), len(out))
            use6 = (ep.has_v6[a] & (rng.random(len(out)) < wl.ipv6)) | (ep.v4[a] == 0)
            x4h, x4l = _random_in(wl.external_v4, rng, len(out))
            x6h, x6l = _random_in(wl.external_v6, rng, len(out))
            vni[out] = ep.vni[a]
            c_hi[out] = np.where(use6, ep.v6_hi[a], 0)
            c_lo[out] = np.where(use6, ep.v6_lo[a], ep.v4[a])
            s_hi[out] = np.where(use6, x6h, x4h)
            s_lo[out] = np.where(use6, x6l, x4l)
            v6[out] = use6
        inb = np.flatnonzero(kind == 2)
        if len(inb):
            b = self.eip_enis[rng.integers(0, len(self.eip_enis), len(inb))]
            x4h, x4l = _random_in(wl.external_v4, rng, len(inb))
            vni[inb] = self.gw
            c_hi[inb], c_lo[inb] = x4h, x4l
            s_lo[inb] = ep.eip[b]
        proto = np.array([pk.PROTO_TCP, pk.PROTO_UDP, pk.PROTO_ICMP], dtype=np.uint8)[proto_k]
        proto[(proto == pk.PROTO_ICMP) & v6] = pk.PROTO_ICMPV6
        sport = rng.integers(EPHEMERAL_PORTS[0], EPHEMERAL_PORTS[1] + 1, n)
        dport = np.where(
            proto == pk.PROTO_TCP,
            np.array(wl.tcp_ports)[rng.integers(0, len(wl.tcp_ports), n)],
            np.array(wl.udp_ports)[rng.integers(0, len(wl.udp_ports), n)],
        )
        data = np.maximum(np.rint(wl.data_packets.sample(rng, n)), 0).astype(np.int64)
        rst = (proto == pk.PROTO_TCP) & (rng.random(n) < wl.rst)
        count = np.where(
            proto == pk.PROTO_TCP,
            3 + data + np.where(rst, 1, 3),
            np.where(proto == pk.PROTO_UDP, np.maximum(data, 1), 2 * np.maximum(data // 2, 1)),
        )
        dur = wl.flow_duration.sample(rng, n)
        conn = np.arange(self.next_conn, self.next_conn + n, dtype=np.int64)
        self.next_conn += n
        return {
            "conn": conn, "start": start, "dur": dur, "count": count, "data": data,
            "rst": rst, "vni": vni, "c_hi": c_hi, "c_lo": c_lo, "s_hi": s_hi, "s_lo": s_lo,
            "proto": proto, "sport": sport, "dport": dport,
        }  # fmt: skip

    def expand(self, c: dict[str, np.ndarray]) -> tuple[PacketBatch, np.ndarray, np.ndarray]:
        """Every packet of the connections `c`, with its connection id and direction."""
        rng = self.rng
        count = c["count"]
        total = int(count.sum())
        k = np.repeat(np.arange(len(count)), count)
        first = np.repeat(np.cumsum(count) - count, count)
        j = np.arange(total) - first  # position inside the connection
        n_k = count[k]
        proto = c["proto"][k]
        data = c["data"][k]
        tcp = proto == pk.PROTO_TCP
        # direction: TCP handshake c,s,c; data alternates; FIN c,s,c; RST from the client
        close = j - 3 - data  # 0.. in the teardown
        reply = np.where(
            tcp,
            np.where(j < 3, j == 1, np.where(close < 0, (j - 3) % 2 == 1, close == 1)),
            j % 2 == 1,
        )
        flags = np.zeros(total, dtype=np.uint8)
        flags[tcp & (j == 0)] = pk.TCP_SYN
        flags[tcp & (j == 1)] = pk.TCP_SYN | pk.TCP_ACK
        flags[tcp & (j == 2)] = pk.TCP_ACK
        flags[tcp & (j >= 3) & (close < 0)] = pk.TCP_PSH | pk.TCP_ACK
        rst = c["rst"][k]
        flags[tcp & (close == 0) & rst] = pk.TCP_RST | pk.TCP_ACK
        flags[tcp & (close >= 0) & (close <= 1) & ~rst] = pk.TCP_FIN | pk.TCP_ACK
        flags[tcp & (close == 2) & ~rst] = pk.TCP_ACK
        frac = np.where(n_k > 1, j / np.maximum(n_k - 1, 1), 0.0)
        t = np.rint((c["start"][k] + c["dur"][k] * frac) * 1e9).astype(np.int64)
        sp, dp = c["sport"][k], c["dport"][k]
        icmp = (proto == pk.PROTO_ICMP) | (proto == pk.PROTO_ICMPV6)
        echo_req = np.where(proto == pk.PROTO_ICMPV6, 128, 8)
        echo_rep = np.where(proto == pk.PROTO_ICMPV6, 129, 0)
        sport = np.where(reply, dp, sp)
        dport = np.where(reply, sp, dp)
        sport = np.where(icmp, sp & 0xFFFF, sport)  # echo identifier both ways
        dport = np.where(icmp, np.where(reply, echo_rep, echo_req) << 8, dport)
        payload = (~tcp) | ((j >= 3) & (close < 0))
        length = np.where(payload, rng.integers(CONTROL_BYTES, MTU_BYTES + 1, total), CONTROL_BYTES)
        c_hi, c_lo, s_hi, s_lo = c["c_hi"][k], c["c_lo"][k], c["s_hi"][k], c["s_lo"][k]
        batch = PacketBatch(
            time_ns=t,
            port=np.zeros(total, dtype=np.uint16),
            vni=c["vni"][k],
            src_hi=np.where(reply, s_hi, c_hi),
            src_lo=np.where(reply, s_lo, c_lo),
            dst_hi=np.where(reply, c_hi, s_hi),
            dst_lo=np.where(reply, c_lo, s_lo),
            sport=sport.astype(np.uint16),
            dport=dport.astype(np.uint16),
            proto=proto,
            tcp_flags=flags,
            length=length.astype(np.uint32),
        )
        return batch, c["conn"][k], reply.astype(np.bool_)


def _windows(end: float, width: float, changes: tuple[PolicyChange, ...]) -> list[float]:
    edges = set(np.arange(0.0, end, width).round(12).tolist()) | {end}
    edges |= {c.at for c in changes if 0 < c.at < end}
    return sorted(edges)


MERGE_CHUNKS = 16
"""Pending packet chunks kept apart before they are merged into one (a speed knob)."""


class _Pending:
    """Packets generated but not yet due, as time-sorted chunks with a read cursor each:
    emitting a window reads a prefix of every chunk, so the cost follows what is emitted,
    not what is still pending."""

    def __init__(self) -> None:
        self.chunks: list[list[Any]] = []  # [batch, conn, reply, cursor]

    def add(self, batch: PacketBatch, conn: np.ndarray, reply: np.ndarray) -> None:
        if len(conn):
            order = np.argsort(batch.time_ns, kind="stable")
            self.chunks.append([batch.take(order), conn[order], reply[order], 0])
        if len(self.chunks) > MERGE_CHUNKS:
            self.chunks = [self._merged()]

    def _merged(self) -> list[Any]:
        parts = [(b.take(np.arange(c, len(k))), k[c:], r[c:]) for b, k, r, c in self.chunks]
        batch = PacketBatch.concat([p[0] for p in parts])
        order = np.argsort(batch.time_ns, kind="stable")
        conn = np.concatenate([p[1] for p in parts])[order]
        return [batch.take(order), conn, np.concatenate([p[2] for p in parts])[order], 0]

    def __len__(self) -> int:
        return sum(len(k) - c for _, k, _, c in self.chunks)

    def last_ns(self) -> int:
        return max(int(b.time_ns[-1]) for b, _, _, _ in self.chunks)

    def pop_until(self, t0_ns: int, t1_ns: int) -> WorkloadBatch:
        """Every pending packet before t1_ns, time-sorted, as one window [t0_ns, t1_ns)."""
        parts = []
        for chunk in self.chunks:
            b, k, r, c = chunk
            cut = c + int(np.searchsorted(b.time_ns[c:], t1_ns, side="left"))
            if cut > c:
                idx = np.arange(c, cut)
                parts.append((b.take(idx), k[idx], r[idx]))
            chunk[3] = cut
        self.chunks = [ch for ch in self.chunks if ch[3] < len(ch[1])]
        if not parts:
            empty = PacketBatch.empty()
            return WorkloadBatch(t0_ns, t1_ns, empty, np.zeros(0, np.int64), np.zeros(0, np.bool_))
        batch = PacketBatch.concat([p[0] for p in parts])
        order = np.argsort(batch.time_ns, kind="stable")
        conn = np.concatenate([p[1] for p in parts])[order]
        reply = np.concatenate([p[2] for p in parts])[order]
        return WorkloadBatch(t0_ns, t1_ns, batch.take(order), conn, reply)


def synthetic(spec: VpcSpec, wl: SyntheticWorkload) -> Iterator[WorkloadBatch]:
    """Time-ordered windows of `wl`'s traffic over `spec`'s ENIs; after `wl.duration` no new
    connection starts and windows (empty ones too: the clock advances, aging needs it)
    continue until the last connection has ended."""
    gen = _Synth(spec, wl)
    pending = _Pending()
    edges = _windows(wl.duration, wl.batch, wl.policy_changes)
    for t0, t1 in itertools.pairwise(edges):
        pending.add(*gen.expand(gen.connections(t0, t1)))
        yield pending.pop_until(int(round(t0 * 1e9)), int(round(t1 * 1e9)))
    width = int(round(wl.batch * 1e9))
    t0_ns = int(round(wl.duration * 1e9))
    if len(pending):
        pending.chunks = [pending._merged()]
    while len(pending):
        yield pending.pop_until(t0_ns, t0_ns + width)
        t0_ns += width


def label_connections(batch: PacketBatch) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Connection id (order of first appearance) and reply flag of each packet, from the
    5-tuple with both directions folded together (ICMP by echo identifier)."""
    n = len(batch)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.bool_)
    icmp = (batch.proto == pk.PROTO_ICMP) | (batch.proto == pk.PROTO_ICMPV6)
    sport = batch.sport.astype(np.uint64)
    dport = np.where(icmp, batch.sport, batch.dport).astype(np.uint64)
    a = np.stack([batch.src_hi, batch.src_lo, sport], axis=1)
    b = np.stack([batch.dst_hi, batch.dst_lo, dport], axis=1)
    # a < b lexicographically on (hi, lo, port)
    swap = (a[:, 0] > b[:, 0]) | (
        (a[:, 0] == b[:, 0]) & ((a[:, 1] > b[:, 1]) | ((a[:, 1] == b[:, 1]) & (a[:, 2] > b[:, 2])))
    )
    lo_end = np.where(swap[:, None], b, a)
    hi_end = np.where(swap[:, None], a, b)
    keys = np.column_stack(
        [batch.vni.astype(np.uint64), batch.proto.astype(np.uint64), lo_end, hi_end]
    )
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first)  # renumber by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    conn = rank[inverse].astype(np.int64)
    reply = swap != swap[first[inverse]]
    return conn, reply


def replay(wl: PcapWorkload) -> Iterator[WorkloadBatch]:
    """Windows of a capture on the simulated clock (`time_scale` stretches or squeezes it)."""
    batch, _ = read_pcap(wl.path, default_vni=wl.default_vni)
    if wl.time_scale != 1.0:
        batch.time_ns[:] = np.rint(batch.time_ns * wl.time_scale).astype(np.int64)
    conn, reply = label_connections(batch)
    width = int(round(wl.batch * 1e9))
    if len(batch) == 0:
        return
    window = batch.time_ns // width
    cuts = np.flatnonzero(np.diff(window)) + 1
    changes = sorted(int(round(c.at * 1e9)) for c in wl.policy_changes)
    for idx in np.split(np.arange(len(batch)), cuts):
        w = int(window[idx[0]])
        t0, t1 = w * width, (w + 1) * width
        # a policy change inside the window splits it
        inner = [c for c in changes if t0 < c < t1]
        for a, b in zip([t0, *inner], [*inner, t1], strict=True):
            part = idx[(batch.time_ns[idx] >= a) & (batch.time_ns[idx] < b)]
            if len(part):
                yield WorkloadBatch(a, b, batch.take(part), conn[part], reply[part])


def workload_batches(
    spec: VpcSpec, wl: SyntheticWorkload | PcapWorkload
) -> Iterator[WorkloadBatch]:
    """The batches of either kind of workload."""
    if isinstance(wl, PcapWorkload):
        return replay(wl)
    return synthetic(spec, wl)
