"""Synthetic traffic and pcap replay as PacketBatch windows on a simulated clock."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from starfabric.errors import ConfigError
from starfabric.fornax.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, PacketBatch
from starfabric.fornax.vpc import Reason, compile_policy, evaluate, load_vpc_spec
from starfabric.fornax.workload import (
    PcapWorkload,
    WorkloadBatch,
    label_connections,
    parse_workload,
    replay,
    synthetic,
)

ROOT = Path(__file__).resolve().parents[2]
SMALL = load_vpc_spec(ROOT / "examples" / "vpc-small.yaml")
PCAP = ROOT / "tests" / "data" / "pcap"


def _run(**kw: object) -> list[WorkloadBatch]:
    wl = parse_workload({"kind": "synthetic", "duration": "0.2s", "cps": "5k", **kw})
    return list(synthetic(SMALL, wl))  # type: ignore[arg-type]


def _all(batches: list[WorkloadBatch]) -> tuple[PacketBatch, np.ndarray, np.ndarray]:
    return (
        PacketBatch.concat([b.packets for b in batches]),
        np.concatenate([b.conn for b in batches]),
        np.concatenate([b.reply for b in batches]),
    )


def test_seeded_and_time_ordered() -> None:
    a, b = _run(seed=3), _run(seed=3)
    pa, pb = _all(a)[0], _all(b)[0]
    assert all(
        np.array_equal(x, y)
        for x, y in zip(pa.columns().values(), pb.columns().values(), strict=True)
    )
    assert not np.array_equal(pa.src_lo, _all(_run(seed=4))[0].src_lo[: len(pa)])
    for prev, cur in itertools.pairwise(a):
        assert prev.t_end_ns == cur.t_start_ns
    for w in a:
        t = w.packets.time_ns
        assert (np.diff(t) >= 0).all() and (t >= w.t_start_ns).all() and (t < w.t_end_ns).all()


def test_rate_and_mix() -> None:
    p, conn, reply = _all(_run(seed=1, cps="20k", tcp=0.5, udp=0.3, icmp=0.2))
    first = np.unique(conn, return_index=True)[1]
    n = len(first)
    assert abs(n - 4000) < 5 * np.sqrt(4000)  # Poisson, 20k/s for 0.2 s
    protos = p.proto[first]
    for proto, share in ((6, 0.5), (17, 0.3), (1, 0.2)):
        assert abs((protos == proto).mean() - share) < 0.04
    assert not reply[first].any()  # every connection starts in the forward direction


def test_tcp_handshake_and_teardown_directions() -> None:
    p, conn, reply = _all(_run(seed=2, tcp=1, udp=0, icmp=0, rst=0.3))
    order = np.lexsort((p.time_ns, conn))
    p, conn, reply = p.take(order), conn[order], reply[order]
    starts = np.flatnonzero(np.r_[True, conn[1:] != conn[:-1]])
    ends = np.r_[starts[1:], len(conn)]
    resets = 0
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        f, r = p.tcp_flags[s:e].tolist(), reply[s:e].tolist()
        assert f[:3] == [TCP_SYN, TCP_SYN | TCP_ACK, TCP_ACK] and r[:3] == [False, True, False]
        if f[-1] & TCP_RST:
            resets += 1
            assert not r[-1]
        else:
            assert f[-3:] == [TCP_FIN | TCP_ACK, TCP_FIN | TCP_ACK, TCP_ACK]
            assert r[-3:] == [False, True, False]
        # a reply is the exact reversal of the request
        fw, rv = s, s + 1
        assert (p.src_lo[fw], p.sport[fw], p.vni[fw]) == (p.dst_lo[rv], p.dport[rv], p.vni[rv])
    assert 0.15 < resets / len(starts) < 0.45


def test_icmp_echo_shape() -> None:
    p, conn, reply = _all(_run(seed=5, tcp=0, udp=0, icmp=1, ipv6=0))
    assert set((p.dport[~reply] >> 8).tolist()) <= {8, 128}
    assert set((p.dport[reply] >> 8).tolist()) <= {0, 129}
    for c in np.unique(conn)[:50]:
        assert len(set(p.sport[conn == c].tolist())) == 1  # one echo identifier


def test_first_packets_come_from_real_enis() -> None:
    """The generator's endpoints are the VPC's: no first packet is from an unknown sender
    or to an unknown EIP."""
    p, conn, _ = _all(_run(seed=6, cps="2k"))
    first = np.unique(conn, return_index=True)[1]
    res = evaluate(compile_policy(SMALL), p.take(first))
    assert not np.isin(res.reason, [Reason.NO_ENI, Reason.NO_DEST]).any()
    assert (res.reason == Reason.ALLOW).any()


def test_policy_change_is_a_window_edge() -> None:
    wl = {"policy_changes": [{"at": "0.1234s", "vpc": "other.yaml"}], "batch": "10ms"}
    edges = {b.t_start_ns for b in _run(**wl)}
    assert 123_400_000 in edges


def test_labels_recover_connections_and_directions() -> None:
    p, conn, reply = _all(_run(seed=7, cps="500"))
    label, lreply = label_connections(p)
    for c in np.unique(conn):
        assert len(set(label[conn == c].tolist())) == 1
    assert np.array_equal(lreply, reply)


def test_bad_workloads_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match=r"field 'kind' = 'nope'"):
        parse_workload({"kind": "nope", "duration": 1, "cps": 1})
    with pytest.raises(ConfigError, match=r"unknown field 'cpss'"):
        parse_workload({"kind": "synthetic", "duration": 1, "cps": 1, "cpss": 1})
    no_eip = SMALL.model_copy(
        update={
            "tenants": tuple(
                t.model_copy(
                    update={"vpcs": tuple(v.model_copy(update={"eips": ()}) for v in t.vpcs)}
                )
                for t in SMALL.tenants
            )
        }
    )
    with pytest.raises(ConfigError, match=r"inbound 0\.5 = 1\.4: shares must each be in 0\.\.1"):
        parse_workload({"kind": "synthetic", "duration": 1, "cps": 1, "inbound": 0.5})
    wl = parse_workload(
        {"kind": "synthetic", "duration": 1, "cps": 1, "east_west": 0.3, "inbound": 0.5}
    )
    with pytest.raises(ConfigError, match=r"inbound = 0\.5 needs an ENI with an EIP"):
        next(iter(synthetic(no_eip, wl)))  # type: ignore[arg-type]


def test_pcap_replay_windows_and_labels() -> None:
    wl = PcapWorkload(kind="pcap", path=str(PCAP / "zeek_vxlan_tcp_http.pcap"), batch=0.1)
    batches = list(replay(wl))
    p, conn, reply = _all(batches)
    assert len(p) == 12 and set(conn.tolist()) == {0}
    from starfabric.fornax.packets import ip_to_halves

    client = ip_to_halves("172.16.11.201")[1]
    assert np.array_equal(reply, p.src_lo != client)
    fast = list(replay(wl.model_copy(update={"time_scale": 0.5})))
    assert _all(fast)[0].time_ns[-1] == pytest.approx(p.time_ns[-1] / 2, abs=1)


def test_every_scan_syn_opens_a_connection() -> None:
    from starfabric.fornax.pcap import read_pcap

    p, _ = read_pcap(ROOT / "tests" / "data" / "pcap" / "zeek_nmap_vsn_syn_rst_udp.pcap")
    conn, reply = label_connections(p)
    syn = p.tcp_flags == TCP_SYN
    # every SYN opens a connection in the forward direction
    assert not reply[syn].any()
    assert len(np.unique(conn[syn])) == int(syn.sum())
