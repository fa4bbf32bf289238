"""Real packets for the Lab: Ethernet frames built from a PacketBatch with numpy (one buffer
row per frame, no Python object per packet), sent at a paced rate from the client end (c0,
the ORIGINAL direction) or the server end (s0, REPLY) over AF_PACKET sockets opened inside
those namespaces, and captured where they come out.

A frame is Ethernet (destination: the nic's port on that side; source 02:VV:VV:VV:00:0s, the
overlay VNI in bytes 1-3, see netns.py), IPv4 or IPv6, then TCP (no options), UDP, ICMP /
ICMPv6 echo (identifier = `sport`, type/code from `dport`) or no L4 header for another
protocol, and a 12-byte payload: magic `MAGIC` and the frame's 64-bit id, so the far side
tells which packet came through whatever NAT did to the headers; the id's low bits are also
in the IPv4 identification (16 bits) and the IPv6 flow label (20 bits), where the kernel's
log (NFLOG) shows them. Checksums (IPv4 header,
TCP/UDP/ICMPv6 with the pseudo-header, ICMP) are computed, as the nic's stack and conntrack
check them.

An ICMP or ICMPv6 error (a row whose `inner_proto` is set, packets.py) is written as a host
writes it (RFC 792, RFC 4443 2.4(c)): the 8-byte ICMP header (type, code, checksum, then the
`sport` column as the rest-of-header word) followed by the offending packet as it was sent -
its IP header (the same family as the error; total length, TTL 64 and header checksum of that
packet) and the first 8 bytes of its L4 header: TCP ports and sequence number, UDP ports,
length and checksum 0, ICMP type, code, checksum 0, identifier and sequence 0. The TCP
sequence number is that of the last segment `SeqState` numbered in the quoted direction of
the session `quote_conn` names (0 without it); the quoted L4 checksums are 0 because the
workload does not carry the quoted packet's payload (nf_conntrack_inet_error reads only the
quoted tuple, and checks the outer ICMP checksum, which covers the whole quote). The frame's
own 12-byte id trailer follows the quote, where a longer quote would continue.

TCP sequence numbers: a batch with its own header columns (tcp_opt bit TCP_OPT_HDR) is sent
as is; otherwise (a flags-only workload) `SeqState` numbers each connection's bytes both ways
(ISN from the connection id; SYN and FIN take one, the payload its length) so conntrack's
window tracking sees a consistent stream. The workload's `length` is not reproduced: every
frame carries only the 12-byte payload (assumption: the Linux datapath's figures are per
packet and per connection, not per byte).
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from starfabric.fornax.keys import canonicalize_columns
from starfabric.fornax.mmsg import MMSG_MAX, MMSGHDR, MSG_DONTWAIT, headers, recvmmsg, sendmmsg
from starfabric.fornax.packets import (
    PROTO_ICMP,
    PROTO_ICMPV6,
    PROTO_TCP,
    PROTO_UDP,
    TCP_FIN,
    TCP_OPT_HDR,
    TCP_SYN,
    PacketBatch,
)

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import Lab

MAGIC = b"sfx0"
PAYLOAD = 12
_ETH = 14
#: Bytes per buffer row: Ethernet + IPv6 + ICMPv6 + quoted IPv6 + 8 quoted bytes + payload
#: (122), rounded up.
WIDTH = 128
#: Bytes an ICMP error quotes beyond the quoted IP header (RFC 792: "the first 64 bits").
QUOTE_L4 = 8
_ETH_P_ALL = 0x0003
_SOL_PACKET = 263
_PACKET_IGNORE_OUTGOING = 23
#: Socket buffers of the lab's ends (bytes): a test's burst must not overrun the receive queue.
RCVBUF = 32 << 20
SNDBUF = 8 << 20
_ISN_MUL = np.uint64(2654435761)


def _mac(text: str) -> npt.NDArray[np.uint8]:
    return np.frombuffer(bytes.fromhex(text.replace(":", "")), np.uint8)


def _put(buf: np.ndarray, rows: np.ndarray, col: int, vals: npt.ArrayLike, nbytes: int) -> None:
    """Write `vals` big-endian as `nbytes` bytes at column `col` of `rows`."""
    v = np.broadcast_to(np.asarray(vals, np.uint64), rows.shape)
    for k in range(nbytes):
        buf[rows, col + k] = ((v >> np.uint64(8 * (nbytes - 1 - k))) & np.uint64(0xFF)).astype(
            np.uint8
        )


def _sum16(buf: np.ndarray, rows: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Sum of the big-endian 16-bit words of columns [start, stop) (even length) of rows."""
    b = buf[rows, start:stop].astype(np.uint64)
    return (b[:, 0::2] << np.uint64(8)).sum(axis=1) + b[:, 1::2].sum(axis=1)


def _fold(s: np.ndarray) -> np.ndarray:
    """One's complement of the folded 16-bit sum (the Internet checksum)."""
    s = s.astype(np.uint64)
    while bool(np.any(s >> np.uint64(16))):
        s = (s & np.uint64(0xFFFF)) + (s >> np.uint64(16))
    return (~s.astype(np.uint16)).astype(np.uint16)


@dataclass
class SeqState:
    """Bytes of sequence space each connection has used per direction so far (arrays indexed
    by connection id, grown as ids appear)."""

    used: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.uint64))
    #: Sequence number of the last segment numbered per connection and direction.
    last: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.uint64))

    def _grow(self, n: int) -> None:
        if n > len(self.used):
            m = max(n, 2 * len(self.used))
            new, last = np.zeros((m, 2), np.uint64), np.zeros((m, 2), np.uint64)
            new[: len(self.used)] = self.used
            last[: len(self.last)] = self.last
            self.used, self.last = new, last

    def last_seq(self, conn: npt.ArrayLike, direction: npt.ArrayLike) -> np.ndarray:
        """Sequence number of the last segment numbered for each (connection, direction);
        0 where none was."""
        c = np.asarray(conn, np.int64)
        d = np.asarray(direction, np.int64)
        ok = (c >= 0) & (c < len(self.last))
        out = np.zeros(len(c), np.uint64)
        out[ok] = self.last[c[ok], d[ok]]
        return out

    def numbers(self, conn: np.ndarray, reply: np.ndarray, consumes: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """(seq, ack) of packets in order: seq = ISN(conn, dir) + bytes this direction used
        before; ack = ISN(conn, other) + bytes the other direction used before."""
        n = len(conn)
        if n == 0:
            return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        conn = conn.astype(np.int64)
        self._grow(int(conn.max()) + 1)
        d = reply.astype(np.int64)
        key = conn * 2 + d
        idx = np.arange(n, dtype=np.int64)
        order = np.lexsort((idx, key))
        sk, cons = key[order], consumes.astype(np.uint64)[order]
        first = np.r_[True, sk[1:] != sk[:-1]]
        grp = np.cumsum(first) - 1
        csum = np.cumsum(cons)
        start = csum[first] - cons[first]
        incl = csum - start[grp]  # inclusive prefix inside the group
        own = np.empty(n, np.uint64)
        own[order] = incl - cons
        # bytes of the other direction sent before each packet
        comb = sk * n + idx[order]
        okey = conn * 2 + (1 - d)
        pos = np.searchsorted(comb, okey * n + idx) - 1
        hit = (pos >= 0) & (sk[np.maximum(pos, 0)] == okey)
        other = np.where(hit, incl[np.maximum(pos, 0)], np.uint64(0))
        base = self.used[conn]
        m32 = np.uint64(0xFFFF_FFFF)
        isn_own = (
            conn.astype(np.uint64) * _ISN_MUL + d.astype(np.uint64) * np.uint64(0x5A5A5A5A)
        ) & m32
        isn_oth = (
            conn.astype(np.uint64) * _ISN_MUL + (1 - d).astype(np.uint64) * np.uint64(0x5A5A5A5A)
        ) & m32
        seq = (isn_own + base[idx, d] + own) & m32
        ack = (isn_oth + base[idx, 1 - d] + other) & m32
        np.add.at(self.used, (conn, d), consumes.astype(np.uint64))
        final = order[np.r_[sk[1:] != sk[:-1], True]]
        self.last[conn[final], d[final]] = seq[final]
        return seq, ack


@dataclass
class Frames:
    """Frames as rows of `buf` (first `lens` bytes), which end sends each (`reply`: s0), and
    the id each carries."""

    buf: np.ndarray
    lens: np.ndarray
    reply: np.ndarray
    ids: np.ndarray

    def __len__(self) -> int:
        return len(self.lens)


def build_frames(batch: PacketBatch, reply: npt.ArrayLike, macs: dict[str, str], *,
                 ids: npt.ArrayLike | None = None, conn: npt.ArrayLike | None = None,
                 seq_state: SeqState | None = None,
                 quote_conn: npt.ArrayLike | None = None) -> Frames:  # fmt: skip
    """The frames of `batch` (one per packet, in order). `reply[i]`: packet i is sent from
    the server end. `ids`: the ids in the payload (default 0..n-1). `conn` + `seq_state`
    number TCP bytes for a batch without header columns (default: conn = packet index).
    `quote_conn[i]`: for an ICMP error, the connection (as in `conn`; -1 none) of the packet
    it quotes, whose last numbered sequence number goes into a quoted TCP header."""
    n = len(batch)
    rep = np.asarray(reply, np.bool_)
    ids_a = np.arange(n, dtype=np.uint64) if ids is None else np.asarray(ids, np.uint64)
    buf = np.zeros((n, WIDTH), np.uint8)
    rows_all = np.arange(n)
    v4 = (batch.src_hi == 0) & ((batch.src_lo >> np.uint64(32)) == np.uint64(0xFFFF))
    # Ethernet
    buf[~rep, 0:6] = _mac(macs["n0"])
    buf[rep, 0:6] = _mac(macs["n1"])
    buf[:, 6] = 0x02
    _put(buf, rows_all, 7, batch.vni, 3)
    buf[:, 10] = 0
    buf[:, 11] = np.where(rep, 2, 1).astype(np.uint8)
    _put(buf, rows_all, 12, np.where(v4, 0x0800, 0x86DD), 2)
    # L4 lengths and TCP numbers
    proto = batch.proto.astype(np.int64)
    l4 = np.select([proto == PROTO_TCP, proto == PROTO_UDP,
                    (proto == PROTO_ICMP) | (proto == PROTO_ICMPV6)], [20, 8, 8], 0)  # fmt: skip
    tcp = proto == PROTO_TCP
    flags = batch.tcp_flags.astype(np.int64)
    seq = batch.tcp_seq.astype(np.uint64)
    ack = batch.tcp_ack.astype(np.uint64)
    own_hdr = (batch.tcp_opt & TCP_OPT_HDR) != 0
    synth = tcp & ~own_hdr
    st = seq_state or SeqState()
    if synth.any():
        c = np.arange(n) if conn is None else np.asarray(conn, np.int64)
        cons = (PAYLOAD + ((flags & TCP_SYN) != 0) + ((flags & TCP_FIN) != 0)).astype(np.uint64)
        s, a = st.numbers(c[synth], rep[synth], cons[synth])
        seq[synth], ack[synth] = s, a
    icmp = (proto == PROTO_ICMP) | (proto == PROTO_ICMPV6)
    err = icmp & (batch.inner_proto != 0)
    q_seq = np.zeros(n, np.uint64)
    if err.any() and quote_conn is not None:
        e = np.flatnonzero(err & (batch.inner_proto == PROTO_TCP))
        if len(e):
            b = batch
            qd = canonicalize_columns(b.vni[e], b.inner_proto[e], b.inner_src_hi[e],
                                      b.inner_src_lo[e], b.inner_dst_hi[e], b.inner_dst_lo[e],
                                      b.inner_sport[e], b.inner_dport[e]).direction  # fmt: skip
            q_seq[e] = st.last_seq(np.asarray(quote_conn, np.int64)[e], qd)
    l4 = np.where(err, l4 + np.where(v4, 20, 40) + QUOTE_L4, l4)
    for fam in (4, 6):
        sel = v4 if fam == 4 else ~v4
        if not sel.any():
            continue
        ip_len = 20 if fam == 4 else 40
        for kind in (PROTO_TCP, PROTO_UDP, PROTO_ICMP, PROTO_ICMPV6, -1):
            m = sel & (proto == kind) if kind >= 0 else sel & ~np.isin(
                proto, [PROTO_TCP, PROTO_UDP, PROTO_ICMP, PROTO_ICMPV6])  # fmt: skip
            for quoting in (False, True):
                rows = np.flatnonzero(m & (err == quoting))
                if len(rows):
                    _fill(buf, rows, batch, fam, ip_len, int(l4[rows[0]]), kind, seq, ack,
                          ids_a)  # fmt: skip
                    if quoting:
                        _quote(buf, rows, batch, fam, q_seq)
    lens = _ETH + np.where(v4, 20, 40) + l4 + PAYLOAD
    return Frames(buf, lens.astype(np.int64), rep, ids_a)


def _fill(buf: np.ndarray, rows: np.ndarray, b: PacketBatch, fam: int, ip_len: int, l4: int,
          kind: int, seq: np.ndarray, ack: np.ndarray, ids: np.ndarray) -> None:  # fmt: skip
    o3, o4 = _ETH, _ETH + ip_len
    o5 = o4 + l4
    total = l4 + PAYLOAD
    proto = b.proto[rows].astype(np.uint64)
    # payload: magic + id
    buf[rows, o5 : o5 + 4] = np.frombuffer(MAGIC, np.uint8)
    _put(buf, rows, o5 + 4, ids[rows], 8)
    if fam == 4:
        buf[rows, o3] = 0x45
        _put(buf, rows, o3 + 2, 20 + total, 2)
        _put(buf, rows, o3 + 4, ids[rows] & np.uint64(0xFFFF), 2)  # IP id
        buf[rows, o3 + 8] = 64
        buf[rows, o3 + 9] = proto.astype(np.uint8)
        _put(buf, rows, o3 + 12, b.src_lo[rows] & np.uint64(0xFFFF_FFFF), 4)
        _put(buf, rows, o3 + 16, b.dst_lo[rows] & np.uint64(0xFFFF_FFFF), 4)
        _put(buf, rows, o3 + 10, _fold(_sum16(buf, rows, o3, o3 + 20)), 2)
        pseudo = _sum16(buf, rows, o3 + 12, o3 + 20)
    else:
        # version 6, traffic class 0, flow label = the id's low 20 bits
        _put(buf, rows, o3, (np.uint64(6) << np.uint64(28)) | (ids[rows] & np.uint64(0xFFFFF)), 4)
        _put(buf, rows, o3 + 4, total, 2)
        buf[rows, o3 + 6] = proto.astype(np.uint8)
        buf[rows, o3 + 7] = 64
        for col, hi, lo in ((o3 + 8, b.src_hi, b.src_lo), (o3 + 24, b.dst_hi, b.dst_lo)):
            _put(buf, rows, col, hi[rows], 8)
            _put(buf, rows, col + 8, lo[rows], 8)
        pseudo = _sum16(buf, rows, o3 + 8, o3 + 40)
    pseudo = pseudo + proto + np.uint64(total)
    if kind == PROTO_TCP:
        _put(buf, rows, o4, b.sport[rows], 2)
        _put(buf, rows, o4 + 2, b.dport[rows], 2)
        _put(buf, rows, o4 + 4, seq[rows], 4)
        _put(buf, rows, o4 + 8, ack[rows], 4)
        buf[rows, o4 + 12] = 0x50
        buf[rows, o4 + 13] = b.tcp_flags[rows]
        win = np.where(b.tcp_win[rows] > 0, b.tcp_win[rows], 65535)
        _put(buf, rows, o4 + 14, win, 2)
        _put(buf, rows, o4 + 16, _fold(_sum16(buf, rows, o4, o5 + PAYLOAD) + pseudo), 2)
    elif kind == PROTO_UDP:
        _put(buf, rows, o4, b.sport[rows], 2)
        _put(buf, rows, o4 + 2, b.dport[rows], 2)
        _put(buf, rows, o4 + 4, total, 2)
        cs = _fold(_sum16(buf, rows, o4, o5 + PAYLOAD) + pseudo)
        _put(buf, rows, o4 + 6, np.where(cs == 0, 0xFFFF, cs), 2)
    elif kind in (PROTO_ICMP, PROTO_ICMPV6):
        _put(buf, rows, o4, b.dport[rows], 2)  # type << 8 | code
        _put(buf, rows, o4 + 4, b.sport[rows], 2)  # echo identifier
        extra = pseudo if kind == PROTO_ICMPV6 else np.uint64(0)
        _put(buf, rows, o4 + 2, _fold(_sum16(buf, rows, o4, o5 + PAYLOAD) + extra), 2)


def _quote(buf: np.ndarray, rows: np.ndarray, b: PacketBatch, fam: int, q_seq: np.ndarray) -> None:
    """Write the offending packet after the ICMP header of error `rows` (already filled by
    `_fill`, see the module doc) and recompute the ICMP checksum over the whole message."""
    ip_len = 20 if fam == 4 else 40
    o4 = _ETH + ip_len  # outer ICMP header
    q3 = o4 + 8  # quoted IP header
    q4 = q3 + ip_len  # quoted L4 header
    ip = b.inner_proto[rows].astype(np.uint64)
    tcp = ip == PROTO_TCP
    udp = ip == PROTO_UDP
    icmp = (ip == PROTO_ICMP) | (ip == PROTO_ICMPV6)
    # the offending packet as sent: its L4 header (sender sizes) + the 12-byte id payload
    q_l4 = np.where(tcp, 20, np.where(udp | icmp, 8, 0)).astype(np.uint64)
    q_total = q_l4 + np.uint64(PAYLOAD)
    buf[rows, q3 : q4 + QUOTE_L4] = 0
    if fam == 4:
        buf[rows, q3] = 0x45
        _put(buf, rows, q3 + 2, q_total + np.uint64(20), 2)
        buf[rows, q3 + 8] = 64
        buf[rows, q3 + 9] = ip.astype(np.uint8)
        _put(buf, rows, q3 + 12, b.inner_src_lo[rows] & np.uint64(0xFFFF_FFFF), 4)
        _put(buf, rows, q3 + 16, b.inner_dst_lo[rows] & np.uint64(0xFFFF_FFFF), 4)
        _put(buf, rows, q3 + 10, _fold(_sum16(buf, rows, q3, q3 + 20)), 2)
    else:
        _put(buf, rows, q3, np.uint64(6) << np.uint64(28), 4)
        _put(buf, rows, q3 + 4, q_total, 2)
        buf[rows, q3 + 6] = ip.astype(np.uint8)
        buf[rows, q3 + 7] = 64
        for col, hi, lo in ((q3 + 8, b.inner_src_hi, b.inner_src_lo),
                            (q3 + 24, b.inner_dst_hi, b.inner_dst_lo)):  # fmt: skip
            _put(buf, rows, col, hi[rows], 8)
            _put(buf, rows, col + 8, lo[rows], 8)
    sp, dp = b.inner_sport[rows].astype(np.uint64), b.inner_dport[rows].astype(np.uint64)
    ports = np.flatnonzero(tcp | udp)
    _put(buf, rows[ports], q4, sp[ports], 2)
    _put(buf, rows[ports], q4 + 2, dp[ports], 2)
    t = np.flatnonzero(tcp)
    _put(buf, rows[t], q4 + 4, q_seq[rows[t]], 4)
    u = np.flatnonzero(udp)
    _put(buf, rows[u], q4 + 4, q_total[u], 2)
    c = np.flatnonzero(icmp)
    _put(buf, rows[c], q4, dp[c], 2)  # type << 8 | code
    _put(buf, rows[c], q4 + 4, sp[c], 2)  # identifier
    # the outer ICMP checksum over header + quote + id payload
    o5 = q4 + QUOTE_L4
    buf[rows, o4 + 2 : o4 + 4] = 0
    total = np.uint64(8 + ip_len + QUOTE_L4 + PAYLOAD)
    if fam == 6:
        extra = _sum16(buf, rows, _ETH + 8, _ETH + 40) + np.uint64(PROTO_ICMPV6) + total
    else:
        extra = np.zeros(len(rows), np.uint64)
    _put(buf, rows, o4 + 2, _fold(_sum16(buf, rows, o4, o5 + PAYLOAD) + extra), 2)


# -- sockets ------------------------------------------------------------------------------
def _open(end: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
    s.bind((end, 0))
    s.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)  # SO_RCVBUFFORCE
    s.setsockopt(socket.SOL_SOCKET, 32, SNDBUF)  # SO_SNDBUFFORCE
    s.setsockopt(_SOL_PACKET, _PACKET_IGNORE_OUTGOING, 1)
    return s


@dataclass
class Capture:
    """Ids of frames that came out of the nic: at the server end (ORIGINAL packets) and at
    the client end (REPLY packets)."""

    at_server: np.ndarray
    at_client: np.ndarray

    def forwarded(self, frames: Frames) -> np.ndarray:
        """Per frame of `frames`: did it come out on the far side?"""
        return np.where(frames.reply, np.isin(frames.ids, self.at_client),
                        np.isin(frames.ids, self.at_server))  # fmt: skip


class Sender:
    """AF_PACKET sockets on c0 and s0 (opened inside their namespaces); send and capture."""

    def __init__(self, lab: Lab) -> None:
        self.macs = lab.macs
        self.client = lab.in_ns(lab.ns_client, _open, "c0")
        self.server = lab.in_ns(lab.ns_server, _open, "s0")
        self.sent = 0

    def send(self, frames: Frames, rate_pps: float | None = None, tick_s: float = 0.001) -> int:
        """Send every frame in order (runs of one end at a time); paced to `rate_pps` in
        ticks of `tick_s` when given. Returns frames the kernel took."""
        import time

        n = len(frames)
        if n == 0:
            return 0
        iov, msg = headers(frames.buf.ctypes.data, WIDTH, frames.lens)
        cut = np.flatnonzero(np.diff(frames.reply.astype(np.int8))) + 1
        starts = np.r_[0, cut]
        ends = np.r_[cut, n]
        per_tick = n if rate_pps is None else max(1, int(rate_pps * tick_s))
        t0 = time.perf_counter()
        done = 0
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            sock = self.server if frames.reply[a] else self.client
            pos = a
            while pos < b:
                k = min(b - pos, per_tick, MMSG_MAX)
                r = sendmmsg(sock.fileno(), msg.ctypes.data + pos * MMSGHDR.itemsize,
                                   k, 0)  # fmt: skip
                if r <= 0:
                    err = ctypes.get_errno()
                    if err == 105:  # ENOBUFS: the queue is full, wait a tick
                        time.sleep(tick_s)
                        continue
                    raise OSError(err, f"sendmmsg: {os.strerror(err)}")
                pos += r
                done += r
                if rate_pps:
                    wait = t0 + done / rate_pps - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
        del iov
        self.sent += done
        return done

    def capture(self, timeout_s: float = 0.2) -> Capture:
        """Drain both ends until `timeout_s` passes with nothing new on either; the ids seen."""
        got: dict[int, list[np.ndarray]] = {self.server.fileno(): [], self.client.fileno(): []}
        socks = [self.server, self.client]
        while True:
            n = 0
            for s in socks:
                ids = _recv_ids(s)
                got[s.fileno()].append(ids[0])
                n += ids[1]
            if n:
                continue
            ready, _, _ = select.select(socks, [], [], timeout_s)
            if not ready:
                break
        return Capture(*(np.concatenate(got[s.fileno()]) for s in socks))

    def close(self) -> None:
        self.client.close()
        self.server.close()


_RX = np.zeros((MMSG_MAX, WIDTH), np.uint8)
_RX_IOV, _RX_MSG = headers(_RX.ctypes.data, WIDTH, np.full(MMSG_MAX, WIDTH, np.uint64))


def _recv_ids(sock: socket.socket) -> tuple[np.ndarray, int]:
    """Ids carried by the frames queued on `sock` now (recvmmsg without waiting; frames
    without the magic, e.g. the kernel's own, are skipped), and how many frames were read."""
    chunks: list[np.ndarray] = []
    total = 0
    while True:
        r = recvmmsg(sock.fileno(), _RX_MSG.ctypes.data, MMSG_MAX, MSG_DONTWAIT, None)
        if r <= 0:
            break
        total += r
        lens = _RX_MSG["len"][:r].astype(np.int64)
        rows = np.arange(r)
        ok = lens >= PAYLOAD + _ETH
        cols = np.minimum((lens - PAYLOAD)[:, None] + np.arange(PAYLOAD)[None, :], WIDTH - 1)
        t = _RX[rows[:, None], cols]
        ok &= (t[:, :4] == np.frombuffer(MAGIC, np.uint8)).all(axis=1)
        ids = np.zeros(r, np.uint64)
        for k in range(8):
            ids = (ids << np.uint64(8)) | t[:, 4 + k].astype(np.uint64)
        chunks.append(ids[ok])
    return (np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)), total
