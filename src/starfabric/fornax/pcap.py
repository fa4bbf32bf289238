"""pcap / pcapng replay into a PacketBatch: Ethernet, 802.1Q/QinQ, MPLS, IPv4/IPv6, TCP, UDP,
ICMP/ICMPv6, with VXLAN (UDP 4789) and Geneve (UDP 6081) decapsulated to their VNI.
A TCP segment fills the header columns connection tracking's window checks read (sequence,
ACK, raw window, payload length, the window-scale / SACK-permitted options and the highest
SACK edge, parsed as nf_conntrack's tcp_options / tcp_sack do; tcp_opt marks them the
segment's own). An ICMP or ICMPv6 error's quoted packet fills the `inner_*` columns (its protocol, addresses
and ports, as nf_conntrack_inet_error reads them), so connection tracking can make the error
RELATED to the session it quotes; a quote too short to name a tuple leaves inner_proto 0.

The record framing is parsed here (exact nanosecond timestamps, and a truncated or corrupt
record is caught at its index); the headers are decoded with dpkt. Any problem is one
DataError naming the file and the packet index (0-based, in file order). Frames that carry
no IP packet (ARP, LLDP) are counted and skipped.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import dpkt
import numpy as np

from starfabric.errors import DataError
from starfabric.fornax.packets import (
    COLUMN_DTYPES,
    OPTIONAL,
    TCP_OPT_HDR,
    TCP_OPT_PRESENT,
    TCP_OPT_SACK_PERM,
    TCP_OPT_WSCALE,
    PacketBatch,
)

VXLAN_PORT = 4789  # IANA / RFC 7348
GENEVE_PORT = 6081  # IANA / RFC 8926
MAX_RECORD_BYTES = 262_144
"""Largest captured length accepted in a record (tcpdump's default snaplen): larger means a
corrupt header, not a jumbo frame."""
MAX_OVERLAY_DEPTH = 2
"""Encapsulations decapsulated at most (assumption: deeper nesting is not VPC traffic)."""

_LINK_ETHERNET = 1
_LINK_RAW = (101, 12)  # LINKTYPE_RAW (and DLT_RAW's historic value)
_ICMP_ECHO = (0, 8)
_ICMP6_ECHO = (128, 129)
_ICMP_ERRORS = (3, 4, 5, 11, 12)  # unreachable, source quench, redirect, time exceeded, param
_IP6_EXT = (0, 43, 60)  # hop-by-hop, routing, destination options: skipped in a quote
_INNER = tuple(k for k in OPTIONAL if k.startswith("inner_"))
_TCP_HDR = tuple(k for k in OPTIONAL if k.startswith("tcp_"))


@dataclass(frozen=True)
class PcapStats:
    """What a read found: records, IP packets decoded, frames skipped by reason, overlays."""

    records: int
    decoded: int
    skipped: dict[str, int] = field(default_factory=dict)
    overlays: dict[str, int] = field(default_factory=dict)


class _Rows:
    """Column accumulators (ints only; the batch is built once at the end)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[int]] = {
            k: []
            for k in (
                "time_ns", "port", "vni", "src_hi", "src_lo", "dst_hi", "dst_lo",
                "sport", "dport", "proto", "tcp_flags", "length", *_TCP_HDR, *_INNER,
            )
        }  # fmt: skip

    def add(self, **values: int) -> None:
        for k, v in values.items():
            self.cols[k].append(v)

    def batch(self) -> PacketBatch:
        return PacketBatch(**{k: np.array(v, dtype=COLUMN_DTYPES[k]) for k, v in self.cols.items()})


_NO_INNER = dict.fromkeys(_INNER, 0)
_NO_TCP = dict.fromkeys(_TCP_HDR, 0)


def _tcp_header(seg: dpkt.tcp.TCP, l4_len: int) -> dict[str, int]:
    """The tracker's TCP header columns of a segment (l4_len: the TCP header and payload
    length the IP header gives, so a capture cut by its snaplen still reads right). Options
    are walked as nf_conntrack's tcp_options and tcp_sack do: stop at EOL, a length below 2
    or one running past the header; window scale of length 3, SACK-permitted of 2, SACK
    blocks of 8 bytes each (the highest right edge after the ACK)."""
    opts = bytes(seg.opts)
    opt = TCP_OPT_HDR | (TCP_OPT_PRESENT if seg.off > 5 else 0)
    wscale = 0
    sack = seg.ack
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2 or i + opts[i + 1] > len(opts):
            break
        size = opts[i + 1]
        if kind == 3 and size == 3:
            opt |= TCP_OPT_WSCALE
            wscale = opts[i + 2]
        elif kind == 4 and size == 2:
            opt |= TCP_OPT_SACK_PERM
        elif kind == 5 and size >= 10 and (size - 2) % 8 == 0:
            for j in range(i + 2, i + size, 8):
                right = int.from_bytes(opts[j + 4 : j + 8], "big")
                if (sack - right) & 0xFFFF_FFFF >= 0x8000_0000:  # after(right, sack)
                    sack = right
        i += size
    return {"tcp_seq": seg.seq, "tcp_ack": seg.ack, "tcp_sack": sack, "tcp_win": seg.win,
            "tcp_opt": opt, "tcp_wscale": wscale,
            "tcp_len": max(l4_len - 4 * seg.off, 0)}  # fmt: skip


def _inner_tuple(quote: bytes) -> dict[str, int]:
    """The tuple of the packet an ICMP(v6) error quotes (its IP header and at least 8 bytes of
    L4): inner_* columns; inner_proto 0 where the quote is too short or not IP."""
    if len(quote) < 20:
        return _NO_INNER
    version = quote[0] >> 4
    if version == 4:
        ihl = (quote[0] & 0x0F) * 4
        proto, src, dst, off = quote[9], quote[12:16], quote[16:20], ihl
        if ihl < 20 or int.from_bytes(quote[6:8], "big") & 0x1FFF:  # a later fragment
            return _NO_INNER
    elif version == 6 and len(quote) >= 40:
        proto, src, dst, off = quote[6], quote[8:24], quote[24:40], 40
        while proto in _IP6_EXT and len(quote) >= off + 8:
            proto, off = quote[off], off + 8 * (quote[off + 1] + 1)
    else:
        return _NO_INNER
    l4 = quote[off : off + 8]
    if len(l4) < 8 or proto not in (1, 6, 17, 58):
        return _NO_INNER
    if proto in (1, 58):  # an inner ICMP: the echo identifier, type << 8 | code
        echo = _ICMP_ECHO if proto == 1 else _ICMP6_ECHO
        sport = int.from_bytes(l4[4:6], "big") if l4[0] in echo else 0
        dport = (l4[0] << 8) | l4[1]
    else:
        sport, dport = int.from_bytes(l4[0:2], "big"), int.from_bytes(l4[2:4], "big")
    sh, sl = _halves(bytes(src))
    dh, dl = _halves(bytes(dst))
    return {"inner_proto": proto, "inner_src_hi": sh, "inner_src_lo": sl, "inner_dst_hi": dh,
            "inner_dst_lo": dl, "inner_sport": sport, "inner_dport": dport}  # fmt: skip


def _halves(raw: bytes) -> tuple[int, int]:
    if len(raw) == 4:
        return 0, 0xFFFF_0000_0000 | int.from_bytes(raw, "big")
    v = int.from_bytes(raw, "big")
    return v >> 64, v & 0xFFFF_FFFF_FFFF_FFFF


class _Decoder:
    def __init__(self, path: Path, default_vni: int) -> None:
        self.path = path
        self.default_vni = default_vni
        self.rows = _Rows()
        self.skipped: Counter[str] = Counter()
        self.overlays: Counter[str] = Counter()

    def fail(self, index: int, what: str) -> DataError:
        return DataError(
            f"{self.path}: packet index {index}: {what}",
            fix="re-capture the file or cut it before this packet (editcap -r)",
        )

    # -- layers ----------------------------------------------------------------------------
    def frame(self, index: int, t_ns: int, port: int, buf: bytes, link: int) -> None:
        if link == _LINK_ETHERNET:
            self.ether(index, t_ns, port, buf, self.default_vni, 0)
        elif link in _LINK_RAW:
            self.raw_ip(index, t_ns, port, buf, self.default_vni, 0)
        else:
            raise self.fail(index, f"link type {link} is not Ethernet or raw IP")

    def ether(self, index: int, t_ns: int, port: int, buf: bytes, vni: int, depth: int) -> None:
        if len(buf) < 14:
            raise self.fail(index, f"Ethernet frame of {len(buf)} bytes is shorter than 14")
        eth = dpkt.ethernet.Ethernet(buf)
        data = eth.data
        if isinstance(data, dpkt.ip.IP | dpkt.ip6.IP6):
            self.ip(index, t_ns, port, data, vni, depth)
            return
        kind = getattr(eth, "_next_type", None) or eth.type
        if kind in (dpkt.ethernet.ETH_TYPE_IP, dpkt.ethernet.ETH_TYPE_IP6):
            raise self.fail(index, f"ethertype 0x{kind:04x} but the IP header cannot be decoded")
        self.skipped["non_ip"] += 1

    def raw_ip(self, index: int, t_ns: int, port: int, buf: bytes, vni: int, depth: int) -> None:
        version = buf[0] >> 4 if buf else 0
        try:
            pkt = dpkt.ip.IP(buf) if version == 4 else dpkt.ip6.IP6(buf)
        except (dpkt.UnpackError, dpkt.NeedData, IndexError, struct.error):
            raise self.fail(index, "the IP header cannot be decoded") from None
        self.ip(index, t_ns, port, pkt, vni, depth)

    def ip(self, index: int, t_ns: int, port: int, pkt: dpkt.Packet, vni: int, depth: int) -> None:
        if isinstance(pkt, dpkt.ip.IP):
            proto, length = pkt.p, pkt.len
            fragment = pkt.offset != 0
        else:
            proto, length = pkt.nxt, 40 + pkt.plen
            fragment = False
            # dpkt keeps the upper-layer protocol after extension headers in `p`
            proto = getattr(pkt, "p", proto)
            frag_hdr = getattr(pkt, "extension_hdrs", {}).get(dpkt.ip.IP_PROTO_FRAGMENT)
            frag_off: int = getattr(frag_hdr, "frag_off", None) or 0
            fragment = frag_off != 0
        sh, sl = _halves(bytes(pkt.src))
        dh, dl = _halves(bytes(pkt.dst))
        sport = dport = flags = 0
        inner = _NO_INNER
        tcp = _NO_TCP
        l4 = pkt.data
        if not fragment and proto in (6, 17, 1, 58):
            if isinstance(l4, bytes | bytearray):
                raise self.fail(index, f"IP protocol {proto} header is truncated or corrupt")
            if proto == 6:
                sport, dport, flags = l4.sport, l4.dport, l4.flags & 0xFF
                # the L4 length by the IP header (IPv6: less the extension headers captured)
                if isinstance(pkt, dpkt.ip.IP):
                    l4_len = pkt.len - 4 * pkt.hl
                else:
                    l4_len = 40 + pkt.plen - (len(bytes(pkt)) - len(bytes(l4)))
                tcp = _tcp_header(l4, l4_len)
            elif proto == 17:
                sport, dport = l4.sport, l4.dport
                if depth < MAX_OVERLAY_DEPTH and dport in (VXLAN_PORT, GENEVE_PORT):
                    self.overlay(index, t_ns, port, bytes(l4.data), dport, depth)
                    return
            else:
                dport = (l4.type << 8) | l4.code
                echo = _ICMP_ECHO if proto == 1 else _ICMP6_ECHO
                if l4.type in echo and len(bytes(l4.data)) >= 2:
                    sport = int.from_bytes(bytes(l4.data)[:2], "big")
                if (l4.type in _ICMP_ERRORS) if proto == 1 else (l4.type < 128):
                    inner = _inner_tuple(bytes(l4)[8:])
        self.rows.add(
            time_ns=t_ns, port=port, vni=vni, src_hi=sh, src_lo=sl, dst_hi=dh, dst_lo=dl,
            sport=sport, dport=dport, proto=proto, tcp_flags=flags, length=length, **tcp,
            **inner,
        )  # fmt: skip

    def overlay(
        self, index: int, t_ns: int, port: int, data: bytes, udp_port: int, depth: int
    ) -> None:
        if udp_port == VXLAN_PORT:
            if len(data) < 8 or not data[0] & 0x08:
                raise self.fail(index, "VXLAN header is truncated or lacks the VNI flag")
            self.overlays["vxlan"] += 1
            vni = int.from_bytes(data[4:7], "big")
            self.ether(index, t_ns, port, data[8:], vni, depth + 1)
            return
        if len(data) < 8:
            raise self.fail(index, "Geneve header is truncated")
        start = 8 + (data[0] & 0x3F) * 4
        if len(data) < start:
            raise self.fail(index, "Geneve options run past the packet")
        self.overlays["geneve"] += 1
        vni = int.from_bytes(data[4:7], "big")
        inner = int.from_bytes(data[2:4], "big")
        if inner == 0x6558:
            self.ether(index, t_ns, port, data[start:], vni, depth + 1)
        elif inner in (0x0800, 0x86DD):
            self.raw_ip(index, t_ns, port, data[start:], vni, depth + 1)
        else:
            self.skipped["geneve_non_ip"] += 1


# -- file formats --------------------------------------------------------------------------
def _pcap(dec: _Decoder, raw: bytes) -> int:
    magic = raw[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    if len(raw) < 24:
        raise dec.fail(0, "pcap file header is truncated")
    link = struct.unpack(endian + "I", raw[20:24])[0] & 0x0FFF_FFFF
    pos, index = 24, 0
    while pos < len(raw):
        if len(raw) - pos < 16:
            raise dec.fail(index, f"record header truncated ({len(raw) - pos} of 16 bytes)")
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", raw[pos : pos + 16])
        if incl > MAX_RECORD_BYTES:
            raise dec.fail(index, f"captured length {incl} is corrupt (> {MAX_RECORD_BYTES})")
        if len(raw) - pos - 16 < incl:
            raise dec.fail(
                index, f"record truncated: needs {incl} bytes, {len(raw) - pos - 16} left"
            )
        t_ns = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        dec.frame(index, t_ns, 0, raw[pos + 16 : pos + 16 + incl], link)
        pos += 16 + incl
        index += 1
    return index


def _pcapng(dec: _Decoder, raw: bytes) -> int:
    pos, index, endian = 0, 0, "<"
    links: list[tuple[int, int, int]] = []  # (linktype, ticks per second numerator, divisor)
    while pos < len(raw):
        if len(raw) - pos < 12:
            raise dec.fail(index, "pcapng block header truncated")
        if raw[pos : pos + 4] == b"\x0a\x0d\x0d\x0a":
            bom = raw[pos + 8 : pos + 12]
            endian = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
            links = []
        btype, blen = struct.unpack(endian + "II", raw[pos : pos + 8])
        if blen < 12 or blen % 4 or pos + blen > len(raw):
            raise dec.fail(index, f"pcapng block of {blen} bytes is truncated or corrupt")
        body = raw[pos + 8 : pos + blen - 4]
        if btype == 1:  # interface description
            link = struct.unpack(endian + "H", body[:2])[0]
            resol = 1_000_000
            opt = 8
            while opt + 4 <= len(body):
                code, olen = struct.unpack(endian + "HH", body[opt : opt + 4])
                if code == 0:
                    break
                if code == 9 and olen >= 1:
                    v = body[opt + 4]
                    resol = 2 ** (v & 0x7F) if v & 0x80 else 10 ** (v & 0x7F)
                opt += 4 + ((olen + 3) // 4) * 4
            links.append((link, resol, 0))
        elif btype in (3, 6):  # simple / enhanced packet
            if btype == 6:
                if len(body) < 20:
                    raise dec.fail(index, "enhanced packet block truncated")
                iface, hi, lo, incl, _orig = struct.unpack(endian + "IIIII", body[:20])
                data = body[20 : 20 + incl]
            else:
                iface, hi, lo = 0, 0, 0
                incl = struct.unpack(endian + "I", body[:4])[0]
                data = body[4 : 4 + min(incl, len(body) - 4)]
                incl = len(data)
            if iface >= len(links):
                raise dec.fail(index, f"packet names interface {iface}, not described")
            if len(data) < incl or incl > MAX_RECORD_BYTES:
                raise dec.fail(index, f"captured length {incl} runs past its block")
            link, resol, _ = links[iface]
            ticks = (hi << 32) | lo
            t_ns = ticks * 1_000_000_000 // resol
            dec.frame(index, t_ns, iface, data, link)
            index += 1
        pos += blen
    return index


def read_pcap(
    path: str | Path,
    *,
    default_vni: int = 0,
    rebase_time: bool = True,
    monotonic_time: bool = True,
) -> tuple[PacketBatch, PcapStats]:
    """Decode every IP packet of a pcap/pcapng file (innermost headers, overlay VNI).

    Packets without an overlay get `default_vni`; `port` is the pcapng interface id (0 for
    pcap); `length` is the innermost IP packet's length; with `rebase_time` the first record
    is at time 0. Packets stay in file order (arrival order); captures whose timestamps step
    back (mirrored feeds do) get the clock held instead with `monotonic_time`, so a simulated
    clock never runs backwards.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: no such file", fix="check the path")
    raw = p.read_bytes()
    dec = _Decoder(p, default_vni)
    if raw[:4] in (
        b"\xd4\xc3\xb2\xa1",
        b"\xa1\xb2\xc3\xd4",
        b"\x4d\x3c\xb2\xa1",
        b"\xa1\xb2\x3c\x4d",
    ):
        records = _pcap(dec, raw)
    elif raw[:4] == b"\x0a\x0d\x0d\x0a":
        records = _pcapng(dec, raw)
    else:
        raise DataError(
            f"{p}: not a pcap or pcapng file (magic {raw[:4].hex() or 'empty'})",
            fix="give a capture written by tcpdump, Wireshark or dumpcap",
        )
    batch = dec.rows.batch()
    if monotonic_time and len(batch):
        np.maximum.accumulate(batch.time_ns, out=batch.time_ns)
    if rebase_time and len(batch):
        batch.time_ns[:] -= batch.time_ns.min()
    stats = PcapStats(
        records=records,
        decoded=len(batch),
        skipped=dict(dec.skipped),
        overlays=dict(dec.overlays),
    )
    return batch, stats
