"""pcap/pcapng replay on the real Zeek traces, and one-line errors on damaged files."""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.errors import DataError
from starfabric.fornax.packets import halves_to_ip
from starfabric.fornax.pcap import read_pcap

DATA = Path(__file__).resolve().parents[1] / "data" / "pcap"
TCP = DATA / "zeek_tcp_handshake_fin.pcap"


def _ip(b, col: str, i: int) -> str:  # type: ignore[no-untyped-def]
    return str(halves_to_ip(getattr(b, f"{col}_hi")[i], getattr(b, f"{col}_lo")[i]))


def test_vxlan_tcp_session_is_decapsulated() -> None:
    b, stats = read_pcap(DATA / "zeek_vxlan_tcp_http.pcap")
    assert stats.records == stats.decoded == 12 and stats.overlays == {"vxlan": 12}
    assert set(b.vni.tolist()) == {1}
    assert {_ip(b, "src", 0), _ip(b, "dst", 0)} == {"172.16.11.201", "54.86.237.188"}
    assert b.dport[0] == 80 and b.proto[0] == 6
    assert list(b.tcp_flags[:3]) == [0x02, 0x12, 0x10]  # SYN, SYN-ACK, ACK
    fins = np.flatnonzero(b.tcp_flags & 0x01)
    assert {_ip(b, "src", int(i)) for i in fins} == {"172.16.11.201", "54.86.237.188"}
    assert (np.diff(b.time_ns) >= 0).all() and b.time_ns[0] == 0
    raw, _ = read_pcap(DATA / "zeek_vxlan_tcp_http.pcap", monotonic_time=False)
    assert (np.diff(raw.time_ns) < 0).any()  # the mirror feed steps back; the clock held


def test_vxlan_arp_is_skipped_and_icmp_kept() -> None:
    b, stats = read_pcap(DATA / "zeek_vxlan_arp_icmp.pcap")
    assert (stats.records, stats.decoded, stats.skipped) == (10, 8, {"non_ip": 2})
    assert set(b.vni.tolist()) == {123} and set(b.proto.tolist()) == {1}
    types = (b.dport >> 8).tolist()
    assert types.count(8) == types.count(0) == 4
    # an echo reply carries its request's identifier
    assert set(b.sport[b.dport >> 8 == 0].tolist()) <= set(b.sport[b.dport >> 8 == 8].tolist())


def test_geneve_vni_wins_over_the_default() -> None:
    b, stats = read_pcap(DATA / "zeek_geneve_icmp.pcap", default_vni=77)
    assert stats.overlays == {"geneve": 6} and set(b.vni.tolist()) == {0}
    assert {_ip(b, "src", 0), _ip(b, "dst", 0)} == {"30.0.0.1", "30.0.0.2"}


def test_plain_traffic_gets_the_default_vni() -> None:
    b, _ = read_pcap(TCP, default_vni=5)
    assert set(b.vni.tolist()) == {5} and len(b) == 12
    assert _ip(b, "src", 0) == "128.232.110.120" and b.dport[0] == 80


def test_icmpv6_echo() -> None:
    b, _ = read_pcap(DATA / "zeek_icmp6_ping.pcap")
    assert set(b.proto.tolist()) == {58}
    assert set((b.dport >> 8).tolist()) == {128, 129}
    assert ":" in _ip(b, "src", 0)


def test_vlan_and_mpls_are_stripped() -> None:
    b, stats = read_pcap(DATA / "zeek_mixed_vlan_mpls.pcap")
    assert stats.decoded == stats.records == 47 and not stats.skipped
    assert (_ip(b, "src", 0), _ip(b, "dst", 0), int(b.dport[0])) == ("10.1.2.1", "10.34.0.1", 23)


def test_pcapng_interfaces_become_ports() -> None:
    b, stats = read_pcap(DATA / "zeek_pcapng_multi_interface.pcapng")
    assert stats.decoded == 6 and set(b.port.tolist()) == {0, 1}
    assert set(b.dport.tolist()) | set(b.sport.tolist()) >= {53}


def test_scan_counts_match_tcpdump() -> None:
    """SOURCES.md counts 17 SYNs and 9 RSTs with tcpdump filters on this trace."""
    b, stats = read_pcap(DATA / "zeek_nmap_vsn_syn_rst_udp.pcap")
    assert stats.records == 547 and stats.decoded + stats.skipped["non_ip"] == 547
    assert int((b.tcp_flags == 0x02).sum()) == 17
    assert int(((b.tcp_flags & 0x04) != 0).sum()) == 9


@pytest.mark.parametrize("path", sorted(DATA.glob("*.pcap")), ids=lambda p: p.name)
def test_records_and_times_match_dpkt(path: Path) -> None:
    """Our framing agrees with dpkt's own reader on record count and timestamps."""
    with path.open("rb") as f:
        ts = [t for t, _ in dpkt.pcap.Reader(f)]
    b, stats = read_pcap(path, rebase_time=False, monotonic_time=False)
    assert stats.records == len(ts)
    if stats.decoded == stats.records:
        assert np.allclose(b.time_ns / 1e9, ts, rtol=0, atol=1e-6)


def _boundaries(raw: bytes) -> list[int]:
    pos, out = 24, [24]
    while pos < len(raw):
        pos += 16 + struct.unpack("<I", raw[pos + 8 : pos + 12])[0]
        out.append(pos)
    return out


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_cut_is_caught_at_its_packet(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    raw = TCP.read_bytes()
    bounds = _boundaries(raw)
    cut = data.draw(st.integers(25, len(raw) - 1))
    out = tmp_path_factory.mktemp("cut") / "cut.pcap"
    out.write_bytes(raw[:cut])
    if cut in bounds:
        b, _ = read_pcap(out)
        assert len(b) == bounds.index(cut)
        return
    index = max(i for i, p in enumerate(bounds) if p < cut)
    with pytest.raises(DataError) as exc:
        read_pcap(out)
    msg = exc.value.one_line()
    assert f"cut.pcap: packet index {index}:" in msg and "\n" not in msg


def test_corrupt_ip_header_and_length(tmp_path: Path) -> None:
    raw = bytearray(TCP.read_bytes())
    bounds = _boundaries(bytes(raw))
    # packet 3 keeps only Ethernet + 6 bytes of IPv4 header
    start = bounds[3]
    incl = struct.unpack("<I", raw[start + 8 : start + 12])[0]
    short = raw[: start + 8] + struct.pack("<II", 20, 20) + raw[start + 16 : start + 36]
    short += raw[start + 16 + incl :]
    bad = tmp_path / "bad-ip.pcap"
    bad.write_bytes(bytes(short))
    with pytest.raises(DataError, match=r"bad-ip.pcap: packet index 3: ethertype 0x0800"):
        read_pcap(bad)
    huge = bytearray(raw)
    huge[bounds[5] + 8 : bounds[5] + 12] = struct.pack("<I", 0xFFFF_FFFF)
    bad.write_bytes(bytes(huge))
    with pytest.raises(DataError, match=r"packet index 5: captured length 4294967295"):
        read_pcap(bad)


def test_not_a_capture_and_truncated_pcapng(tmp_path: Path) -> None:
    junk = tmp_path / "x.pcap"
    junk.write_bytes(b"hello world, not a capture")
    with pytest.raises(DataError, match="not a pcap or pcapng"):
        read_pcap(junk)
    with pytest.raises(DataError, match="no such file"):
        read_pcap(tmp_path / "missing.pcap")
    ng = (DATA / "zeek_pcapng_multi_interface.pcapng").read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(ng[:-30])
    with pytest.raises(DataError, match=r"cut.pcapng: packet index 5: pcapng block"):
        read_pcap(cut)


def _pcap_file(path: Path, frames: list[bytes]) -> Path:
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, fr in enumerate(frames):
            w.writepkt(fr, ts=1.0 + i)
    return path


def _eth(ip: dpkt.Packet) -> bytes:
    et = dpkt.ethernet.ETH_TYPE_IP6 if isinstance(ip, dpkt.ip6.IP6) else dpkt.ethernet.ETH_TYPE_IP
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=et, data=ip))


def _v4(src: str, dst: str, p: int, data: dpkt.Packet | bytes) -> dpkt.ip.IP:
    import socket

    return dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=p, data=data)


def _v6(src: str, dst: str, nxt: int, data: dpkt.Packet | bytes) -> dpkt.ip6.IP6:
    import socket

    ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src), nxt=nxt, hlim=64,
                      dst=socket.inet_pton(socket.AF_INET6, dst), data=data)  # fmt: skip
    ip.plen = len(bytes(data))
    return ip


def test_icmp_errors_fill_the_quoted_tuple(tmp_path: Path) -> None:
    """An ICMP/ICMPv6 error's quoted packet becomes the inner_* columns (what conntrack looks
    the error up by); a quote too short for ports, and a query, quote nothing."""
    udp = _v4("10.0.0.1", "10.0.0.2", 17, dpkt.udp.UDP(sport=5353, dport=9, data=b"x" * 8))
    unreach = dpkt.icmp.ICMP(type=3, code=3, data=dpkt.icmp.ICMP.Unreach(data=bytes(udp)[:28]))
    echo = dpkt.icmp.ICMP(type=8, data=dpkt.icmp.ICMP.Echo(id=777, seq=1))
    q_echo = _v4("10.0.0.1", "10.0.0.3", 1, echo)
    ttl = dpkt.icmp.ICMP(type=11, code=0, data=dpkt.icmp.ICMP.TimeExceed(data=bytes(q_echo)))
    tcp6 = _v6("fd00::1", "fd00::2", 6, dpkt.tcp.TCP(sport=40000, dport=443, flags=0x02))
    unreach6 = b"\x01\x04\x00\x00" + b"\0" * 4 + bytes(tcp6)[:48]
    short = dpkt.icmp.ICMP(type=3, code=1, data=dpkt.icmp.ICMP.Unreach(data=bytes(udp)[:24]))
    frames = [
        _eth(_v4("10.0.0.2", "10.0.0.1", 1, unreach)),
        _eth(_v4("10.0.0.254", "10.0.0.1", 1, ttl)),
        _eth(_v6("fd00::2", "fd00::1", 58, dpkt.icmp6.ICMP6(unreach6))),
        _eth(_v4("10.0.0.2", "10.0.0.1", 1, short)),
        _eth(q_echo),
    ]
    b, stats = read_pcap(_pcap_file(tmp_path / "errors.pcap", frames))
    assert stats.decoded == 5
    assert b.inner_proto.tolist() == [17, 1, 6, 0, 0]
    assert [_ip(b, "inner_src", i) for i in range(3)] == ["10.0.0.1", "10.0.0.1", "fd00::1"]
    assert [_ip(b, "inner_dst", i) for i in range(3)] == ["10.0.0.2", "10.0.0.3", "fd00::2"]
    assert b.inner_sport[:3].tolist() == [5353, 777, 40000]  # an inner echo: its identifier
    assert b.inner_dport[:3].tolist() == [9, 8 << 8, 443]  # ... and type << 8 | code
    assert (b.dport[:4] >> 8).tolist() == [3, 11, 1, 3]


def _tcp_fields(path: Path) -> list[tuple[int, int, int, int, bytes]]:
    """(seq, ack, window, payload length, options) of every TCP segment, read from the bytes
    by offsets alone (Ethernet, optional VXLAN, IPv4, TCP): independent of the reader."""
    out = []
    with path.open("rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            ip = buf[14:]
            if ip[9] == 17 and struct.unpack("!H", ip[22:24])[0] == 4789:  # VXLAN
                ip = ip[20 + 8 + 8 + 14 :]
            ihl, total = (ip[0] & 15) * 4, struct.unpack("!H", ip[2:4])[0]
            tcp = ip[ihl:]
            seq, ack, off, win = struct.unpack("!IIBxH", tcp[4:16])
            hl = (off >> 4) * 4
            out.append((seq, ack, win, total - ihl - hl, bytes(tcp[20:hl])))
    return out


@pytest.mark.parametrize("name", ["zeek_tcp_handshake_fin.pcap", "zeek_vxlan_tcp_http.pcap"])
def test_tcp_header_columns_are_the_segments(name: str) -> None:
    """Sequence, ACK, window and payload length as on the wire; the options the tracker
    reads (window scale and its value, SACK-permitted) where the SYNs carry them."""
    from starfabric.fornax.packets import TCP_OPT_HDR, TCP_OPT_SACK_PERM, TCP_OPT_WSCALE

    b, _ = read_pcap(DATA / name)
    want = _tcp_fields(DATA / name)
    assert len(b) == len(want) == 12
    for i, (seq, ack, win, plen, opts) in enumerate(want):
        assert (int(b.tcp_seq[i]), int(b.tcp_ack[i]), int(b.tcp_win[i]), int(b.tcp_len[i])) == (
            seq, ack, win, plen)  # fmt: skip
        assert int(b.tcp_sack[i]) == ack  # no SACK blocks in these captures
        assert b.tcp_opt[i] & TCP_OPT_HDR
        ws = opts.find(b"\x03\x03")
        assert bool(b.tcp_opt[i] & TCP_OPT_WSCALE) == (ws >= 0)
        if ws >= 0:
            assert int(b.tcp_wscale[i]) == opts[ws + 2]
        assert bool(b.tcp_opt[i] & TCP_OPT_SACK_PERM) == (b"\x04\x02" in opts)
    assert b.tcp_opt[0] & TCP_OPT_WSCALE and b.tcp_opt[0] & TCP_OPT_SACK_PERM  # the SYN


def test_a_capture_is_window_tracked() -> None:
    """The real handshake ... FIN through the software path's tracker: every segment in
    window, the close reaches TIME_WAIT; the same capture with one data segment moved far
    out of window has that segment INVALID (the header columns are used, not the flags)."""
    from starfabric.fornax.engine import conntrack as CT
    from starfabric.fornax.engine import make_config
    from starfabric.fornax.engine.tcp import TcpState
    from starfabric.fornax.keys import canonicalize
    from starfabric.fornax.softpath import SoftOutcome, SoftPath, SoftPathConfig

    def track(b):  # type: ignore[no-untyped-def]
        sp = SoftPath(make_config(capacity=64, bucket_size=4), SoftPathConfig(capacity=64))
        out = []
        for i in range(len(b)):
            one = b.take([i])
            r = sp.process(one)
            if r.outcome[0] == SoftOutcome.MISS:
                ck = canonicalize(one)
                sp.insert(ck, orig_dir=ck.direction, action_orig=1, action_reply=2,
                          eni_scope=0, vpc_scope=0, now_ns=int(one.time_ns[0]), first=True)  # fmt: skip
                r = sp.process(one)
            out.append((int(r.verdict[0]), int(r.tcp_state[0])))
        return out

    b, _ = read_pcap(TCP)
    res = track(b)
    assert CT.V_INVALID not in [v for v, _ in res] and res[0][0] == CT.V_NEW
    assert res[-1][1] == TcpState.TIME_WAIT
    b.tcp_seq[5] += 3_000_000  # the server's 1448-byte segment, far past the window
    assert track(b)[5][0] == CT.V_INVALID
