"""The real-OVS harness (fornax/baselines/ovs_real): frames are valid packets (pure-numpy
checks, always run), and a private ovs-vswitchd sees 1,000 driven connections in conntrack and
its datapath, then leaves nothing behind (skipped, with the reason, where OVS cannot run)."""

from __future__ import annotations

import ipaddress
import struct

import numpy as np
import pytest

from starfabric.fornax.baselines.ovs_real import measure as ms
from starfabric.fornax.baselines.ovs_real.frames import (
    KEEPALIVE,
    SETUP,
    WIDTH,
    Connections,
    packets_per_setup,
)
from starfabric.fornax.baselines.ovs_real.instance import leftovers, unavailable_reason

MAC_C, MAC_S = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def _csum(data: bytes) -> int:
    """RFC 1071 checksum, the slow reference."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _check_frame(f: bytes) -> tuple[str, int, str, int, int, int, int]:
    assert f[12:14] == b"\x08\x00"
    ip = f[14:34]
    assert _csum(ip) == 0xFFFF, "IPv4 header checksum"
    total = struct.unpack("!H", ip[2:4])[0]
    assert total == len(f) - 14
    proto, src, dst = ip[9], ip[12:16], ip[16:20]
    l4 = f[34:]
    pseudo = src + dst + struct.pack("!BBH", 0, proto, len(l4))
    assert _csum(pseudo + l4) == 0xFFFF, "L4 checksum with pseudo-header"
    sport, dport = struct.unpack("!HH", l4[:4])
    flags = l4[13] if proto == 6 else 0
    seq = struct.unpack("!I", l4[4:8])[0] if proto == 6 else 0
    ack = struct.unpack("!I", l4[8:12])[0] if proto == 6 else 0
    return (str(ipaddress.IPv4Address(src)), sport, str(ipaddress.IPv4Address(dst)), dport,
            flags, seq, ack)  # fmt: skip


def test_frames_are_valid_and_tcp_sequences_chain() -> None:
    conns = Connections(123_456, 64, MAC_C, MAC_S)
    ids = conns.ids
    phases = {}
    for ph in SETUP + KEEPALIVE:
        buf, ln = conns.frames(ph, ids)
        assert buf.shape[1] == WIDTH
        phases[ph] = [_check_frame(bytes(buf[i, : ln[i]])) for i in range(len(ln))]
    assert sum(len(phases[p]) for p in SETUP) == packets_per_setup(ids)
    # distinct 5-tuples; the server side answers each client tuple reversed
    c0 = phases["c0"]
    assert len({r[:4] for r in c0}) == len(ids)
    assert [r[:4] for r in phases["s0"]] == [(r[2], r[3], r[0], r[1]) for r in c0]
    tcp = [i for i, r in enumerate(c0) if r[4] == 0x02]
    assert len(tcp) == int(np.count_nonzero(conns.is_tcp(ids)))
    s0 = phases["s0"]
    for i in tcp:  # SYN-ACK acknowledges SYN+1
        assert s0[i][4] == 0x12 and s0[i][6] == (c0[i][5] + 1) % 2**32


def test_sendmmsg_batches_send_exactly_the_rows_asked() -> None:
    """FrameBatch's prebuilt mmsghdr/iovec arrays against the frames themselves: a datagram
    socketpair receives rows [a, b) byte for byte, each its own length (no root needed)."""
    import socket

    from starfabric.fornax.baselines.ovs_real.driver import MMSG_MAX, FrameBatch

    conns = Connections(7, 1500, MAC_C, MAC_S)
    buf, ln = conns.frames("c1", conns.ids)  # TCP ACK, TCP data, UDP request: several lengths
    assert len(set(ln.tolist())) >= 2
    fb = FrameBatch(buf, ln)
    a, b = 3, len(fb) - 5
    assert b - a > MMSG_MAX  # more than one system call
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    try:
        got: list[bytes] = []
        pos = a
        while pos < b:  # in steps the socket buffers hold
            step = min(b, pos + 500)
            assert fb.send(tx, pos, step) == step - pos
            got += [rx.recv(WIDTH + 10) for _ in range(step - pos)]
            pos = step
        assert got == [bytes(buf[i, : ln[i]]) for i in range(a, b)]
        assert fb.send(tx, 10, 10) == 0
    finally:
        tx.close()
        rx.close()


def test_parsers_read_ovs_output() -> None:
    show = """netdev@ovs-netdev:
  flows         : (current 14447) (avg 21407) (max 53490) (limit 1000000)
  dump duration : 14ms
  ufid enabled : true

  7: (keys 14447)
"""
    u = ms.UpcallShow.parse(show)
    assert (u.flows, u.flows_avg, u.flows_max, u.limit, u.dump_ms, u.ukeys) == (
        14447, 21407, 53490, 1000000, 14, 14447)  # fmt: skip
    assert ms.parse_nconns("1000\n") == 1000
    mem = ms.parse_memory_show("handlers:1 idl-cells-Open_vSwitch:210 ports:3 revalidators:1 "
                               "rules:23 udpif keys:11")  # fmt: skip
    assert mem["udpif keys"] == 11 and mem["rules"] == 23
    assert ms.thread_kind("revalidator5") == "revalidator"
    assert ms.thread_kind("ovs-vswitchd") == "main"
    with pytest.raises(ValueError, match="upcall/show"):
        ms.UpcallShow.parse("nothing")


REASON = unavailable_reason()


@pytest.mark.skipif(REASON is not None, reason=f"real OVS cannot run: {REASON}")
def test_private_ovs_sees_1000_connections_and_leaves_nothing() -> None:
    from starfabric.fornax.baselines.ovs_real import scenario

    before = leftovers()
    assert not any(before.values()), f"leftovers of an earlier run: {before}"
    # a gentle rate and keep-alives: on a busy machine OVS's receive queues drop some setup
    # packets; the keep-alives (ACK / request both ways) let conntrack pick those up
    cfg = scenario.RunConfig(
        levels=(1000,), cps=500.0, megaflows=False, window_s=1.0, settle_s=3.0, warmup=0
    )
    res = scenario.run(cfg)
    (lv,) = res.levels
    assert "Open vSwitch" in res.version
    assert lv.setup_sent == packets_per_setup(np.arange(1000))  # the driver sent every frame
    assert 0.9 * lv.setup_sent <= lv.setup_delivered <= lv.setup_sent  # and OVS forwarded them
    # conntrack holds (nearly) every connection; a few more: its TCP tracker picks connections
    # up mid-stream from a keep-alive ACK whose setup packets were lost (seen: +0.5%)
    assert 950 <= lv.conntrack <= 1010
    # exact-match datapath flows: at least one per direction of each connection, each a ukey
    assert lv.flows >= 2 * lv.conntrack
    assert lv.ukeys >= lv.flows - 50  # a ukey per flow (give or take flows deleted meanwhile)
    assert lv.cpu_per_s.get("revalidator", 0) > 0 and lv.rss_growth_bytes > 0
    # OVS's port sockets were read (pidfd_getfd as root): they received the windows' frames
    assert lv.socket_frames > 0 and 0 <= lv.socket_drops <= lv.socket_frames
    after = leftovers()
    assert not any(after.values()), f"left behind: {after}"


def test_unavailable_reason_names_the_missing_tool_and_the_install(monkeypatch) -> None:
    from starfabric.fornax.baselines.ovs_real import instance

    monkeypatch.setattr(
        instance, "find_tool", lambda name: None if name == "ovs-vswitchd" else "/bin/true"
    )
    reason = instance.unavailable_reason()
    assert reason is not None
    assert "ovs-vswitchd" in reason and "apt-get install openvswitch-switch" in reason
