"""Traffic of the experiments: a synthetic VPC (many ENIs, EIPs and a NAT gateway), distinct
background sessions offered as batched first packets (how 16M sessions are set up fast, as in
benchmarks/fornax_manager.py), keep-alive packets of chosen background sessions, and new
connections at a fixed CPS from the synthetic workload generator."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.packets import PROTO_TCP, PROTO_UDP, TCP_ACK, TCP_SYN, PacketBatch
from starfabric.fornax.vpc import VpcSpec, parse_vpc_spec
from starfabric.fornax.workload import Distribution, SyntheticWorkload, WorkloadBatch, synthetic

VNI = 1001
#: ENIs of the experiment VPC (assumption: a busy host's worth of VMs); each has its own
#: security group, so a policy update can touch any fraction of the sessions.
N_ENIS = 64
#: Background sessions use source ports below Linux's ephemeral range, so they never collide
#: with the synthetic workload's connections (ports 32768-60999).
BG_PORTS = 30000
BG_PORT0 = 1024
#: ENIs with an EIP (public subnet); the other quarter leaves through the NAT gateway, so a
#: quarter of the background sessions hold SNAT ports (assumption, as in
#: benchmarks/fornax_manager.py).
N_PUBLIC = 48
NAT_SHARE = 1 - N_PUBLIC / N_ENIS
#: SNAT ports usable per public IP (1024-65535, with margin).
PORTS_PER_NAT_IP = 60000
EXTERNAL_BASE = (198 << 24) | (18 << 16)  # 198.18.0.0/15 (RFC 2544 benchmarking range)
EXTERNAL_SIZE = 1 << 17
BATCH = 8192
#: Width of a traffic window: the packets of one window reach the engine as one batch and the
#: manager serves that batch's punted packets together (assumption: a 5 ms polling burst;
#: finer windows only add per-call interpreter overhead, the same for every contender).
WINDOW_S = 0.005


def eni_ip(i: int) -> str:
    """ENIs 0..N_PUBLIC-1 in subnet pub (10.0.0.0/24), the rest in priv (10.0.1.0/24)."""
    return f"10.0.{int(i >= N_PUBLIC)}.{10 + i}"


def vpc_spec(n_sessions: int, deny_udp_enis: int = 0) -> VpcSpec:
    """The experiment VPC sized for `n_sessions` (NAT pool IPs); the first `deny_udp_enis`
    ENIs' security groups stop allowing UDP out (the policy update of E5)."""
    half = N_PUBLIC
    n_ips = max(2, -(-int(n_sessions * NAT_SHARE) // PORTS_PER_NAT_IP) + 1)
    sgs: list[dict[str, Any]] = []
    for i in range(N_ENIS):
        egress = (
            [{"direction": "egress", "protocol": "tcp", "cidr": "0.0.0.0/0"},
             {"direction": "egress", "protocol": "icmp", "cidr": "0.0.0.0/0"}]
            if i < deny_udp_enis
            else [{"direction": "egress", "protocol": "all", "cidr": "0.0.0.0/0"}]
        )  # fmt: skip
        ingress = {"direction": "ingress", "protocol": "all", "cidr": "0.0.0.0/0"}
        sgs.append({"name": f"sg-{i}", "rules": [ingress, *egress]})
    enis = [
        {"name": f"eni-{i}", "subnet": "pub" if i < half else "priv", "host": "host-1",
         "ipv4": eni_ip(i), "security_groups": [f"sg-{i}"]}
        for i in range(N_ENIS)
    ]  # fmt: skip
    data = {
        "hosts": [{"name": "host-1", "underlay_ip": "192.168.0.1"}],
        "tenants": [{"name": "bench", "vpcs": [{
            "name": "main", "vni": VNI, "cidrs": ["10.0.0.0/16"], "main_route_table": "private",
            "route_tables": [
                {"name": "public", "routes": [{"prefix": "0.0.0.0/0",
                                               "target": "internet_gateway"}]},
                {"name": "private", "routes": [{"prefix": "0.0.0.0/0", "target": "nat_gateway",
                                                "via": "egress-nat"}]},
            ],
            "subnets": [{"name": "pub", "cidr": "10.0.0.0/24", "route_table": "public"},
                        {"name": "priv", "cidr": "10.0.1.0/24"}],
            "security_groups": sgs,
            "enis": enis,
            "nat_gateways": [{"name": "egress-nat", "public_ips": [
                f"100.64.{j // 250}.{1 + j % 250}" for j in range(n_ips)]}],
            "eips": [{"ip": f"100.100.{i // 250}.{1 + i % 250}", "eni": f"eni-{i}"}
                     for i in range(half)],
        }]}],
    }  # fmt: skip
    return parse_vpc_spec(data)


def _ip_lo(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (0xFFFF << 32) | (a << 24) | (b << 16) | (c << 8) | d


_ENI_LO = np.array([_ip_lo(eni_ip(i)) for i in range(N_ENIS)], np.uint64)


def background_eni(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """ENI index of background sessions `ids` (with `ids // N_ENIS` a bijection to keys)."""
    return np.asarray(ids, np.int64) % N_ENIS


def background_packets(
    ids: npt.NDArray[np.int64],
    t_ns: npt.NDArray[np.int64] | int,
    *,
    tcp_share: float = 0.0,
    reply: bool = False,
    ack: bool = False,
) -> PacketBatch:
    """One packet of each background session `ids` (distinct ids, distinct keys): the first
    packet (UDP, or a TCP SYN for the first `tcp_share` of every 1000 ids) or, with `reply`,
    the answer from the server."""
    ids = np.asarray(ids, np.int64)
    eni = background_eni(ids)
    j = ids // N_ENIS
    tcp = (ids % 1000) < int(round(tcp_share * 1000))
    c_lo = _ENI_LO[eni]
    s_lo = np.uint64(EXTERNAL_BASE | (0xFFFF << 32)) + (j // BG_PORTS % EXTERNAL_SIZE).astype(
        np.uint64
    )
    cport = (BG_PORT0 + j % BG_PORTS).astype(np.uint16)
    sport_srv = np.where(tcp, 443, 53 + 0 * ids).astype(np.uint16)
    proto = np.where(tcp, PROTO_TCP, PROTO_UDP).astype(np.uint8)
    syn = TCP_ACK if ack else TCP_SYN | TCP_ACK if reply else TCP_SYN
    flags = np.where(tcp, syn, 0).astype(np.uint8)
    return PacketBatch.from_columns(
        time_ns=t_ns, vni=VNI,
        src_lo=s_lo if reply else c_lo, dst_lo=c_lo if reply else s_lo,
        sport=sport_srv if reply else cport, dport=cport if reply else sport_srv,
        proto=proto, tcp_flags=flags, length=64,
    )  # fmt: skip


def background_fill_batches(
    n: int, t0_ns: int, rate_cps: float, *, tcp_share: float = 0.0
) -> Iterator[PacketBatch]:
    """First packets of background sessions 0..n-1 at `rate_cps` (simulated), in batches."""
    step = 1e9 / rate_cps
    for start in range(0, n, BATCH):
        ids = np.arange(start, min(n, start + BATCH), dtype=np.int64)
        t = (t0_ns + ids * step).astype(np.int64)
        yield background_packets(ids, t, tcp_share=tcp_share)


def keepalive(
    ids: npt.NDArray[np.int64], t0_ns: int, t1_ns: int, *, tcp_share: float = 0.0
) -> PacketBatch:
    """A reply packet of each background session `ids` (filled with the same `tcp_share`),
    spread over [t0, t1)."""
    t = np.linspace(t0_ns, t1_ns - 1, len(ids)).astype(np.int64) if len(ids) else np.zeros(0)
    return background_packets(ids, np.asarray(t, np.int64), reply=True, tcp_share=tcp_share)


def ack_packets(ids: npt.NDArray[np.int64], t_ns: int) -> PacketBatch:
    """The client's ACK completing the handshake of TCP background sessions `ids`."""
    return background_packets(ids, t_ns, tcp_share=1.0, ack=True)


def _workload(cps: float, duration_s: float, seed: int, batch_s: float, **kw: Any) -> Any:
    return SyntheticWorkload(
        seed=seed, duration=duration_s, cps=cps, batch=batch_s, east_west=0.2, outbound=0.7,
        inbound=0.1, ipv6=0.0, flow_duration=Distribution(kind="lognormal", mean=0.05), **kw,
    )  # fmt: skip


def _merge(a: WorkloadBatch, b: WorkloadBatch) -> WorkloadBatch:
    """Two windows of the same span as one, packets in time order."""
    pk = PacketBatch.concat([a.packets, b.packets]) if len(b.packets) else a.packets
    conn = np.concatenate([a.conn, b.conn + (1 << 40)])
    reply = np.concatenate([a.reply, b.reply])
    order = np.argsort(pk.time_ns, kind="stable")
    return WorkloadBatch(min(a.t_start_ns, b.t_start_ns), max(a.t_end_ns, b.t_end_ns),
                         pk.take(order), conn[order], reply[order])  # fmt: skip


def new_connections(
    spec: VpcSpec,
    cps: float,
    t0_s: float,
    duration_s: float,
    *,
    seed: int = 1,
    six_packets: bool = False,
    batch_s: float = WINDOW_S,
) -> Iterator[WorkloadBatch]:
    """New connections at `cps` from `t0_s` for `duration_s` (synthetic workload generator);
    `six_packets`: the SONiC-DASH hero shape, half TCP (handshake + FIN exchange, no data:
    6 packets) and half UDP (6 packets, alternating directions)."""
    if six_packets:
        tcp = synthetic(
            spec,
            _workload(
                cps / 2,
                duration_s,
                seed,
                batch_s,
                tcp=1.0,
                udp=0.0,
                icmp=0.0,
                rst=0.0,
                data_packets=Distribution(kind="fixed", mean=1e-9),
            ),
        )
        udp = synthetic(
            spec,
            _workload(
                cps / 2,
                duration_s,
                seed + 7919,
                batch_s,
                tcp=0.0,
                udp=1.0,
                icmp=0.0,
                data_packets=Distribution(kind="fixed", mean=6.0),
            ),
        )
        source: Iterator[WorkloadBatch] = (
            b if a is None else a if b is None else _merge(a, b)
            for a, b in itertools.zip_longest(tcp, udp)
        )
    else:
        source = synthetic(spec, _workload(cps, duration_s, seed, batch_s))
    shift = int(round(t0_s * 1e9))
    for wb in source:
        pk = dataclasses.replace(wb.packets, time_ns=wb.packets.time_ns + shift)
        yield WorkloadBatch(wb.t_start_ns + shift, wb.t_end_ns + shift, pk, wb.conn, wb.reply)


__all__ = [
    "BATCH",
    "N_ENIS",
    "VNI",
    "ack_packets",
    "background_fill_batches",
    "background_packets",
    "keepalive",
    "new_connections",
    "vpc_spec",
]
