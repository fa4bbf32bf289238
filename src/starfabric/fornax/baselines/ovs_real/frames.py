"""Pre-built Ethernet frames of N connections, vectorized (numpy, no per-packet objects):
TCP connections with a handshake and data both ways, UDP request/reply flows, and the
keep-alives that hold both in OVS's datapath and conntrack. Checksums (IPv4 header, TCP/UDP
with the pseudo-header) are computed so OVS's userspace conntrack accepts every packet.

Connection i: TCP for i % 4 != 3 (three in four), UDP otherwise; client 10.1.0.0/16 behind
the client port, server 10.2.0.x (x = 1 + i % 16) behind the server port; TCP destination
ports 80, 443, 8080 and UDP 53, 5001 (all admitted by pipeline.ALLOW).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

#: Bytes of every frame buffer row; a frame is its row's first `length` bytes.
WIDTH = 70
PAYLOAD = 16
_ETH, _IP = 14, 20
TCP_DPORTS = np.array([80, 443, 8080], np.uint16)
UDP_DPORTS = np.array([53, 5001], np.uint16)
_FIN, _SYN, _RST, _PSH, _ACK = 0x01, 0x02, 0x04, 0x08, 0x10
#: Connections per client-address cycle (distinct client IPs before the port changes).
_IP_CYCLE = 65000

Phase = Literal["c0", "s0", "c1", "s1", "ck", "sk"]
#: Setup phases in order, and which side sends each.
SETUP: tuple[Phase, ...] = ("c0", "s0", "c1", "s1")
KEEPALIVE: tuple[Phase, ...] = ("ck", "sk")
SIDE = {"c0": "client", "s0": "server", "c1": "client", "s1": "server", "ck": "client",
        "sk": "server"}  # fmt: skip
#: Packets per connection in the setup phases: TCP SYN, SYN-ACK, ACK, data, data (5);
#: UDP request, reply, request, reply (4).
SETUP_PACKETS = {"tcp": 5, "udp": 4}


def _fold(s: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint16]:
    while bool(np.any(s >> np.uint64(16))):
        s = (s & np.uint64(0xFFFF)) + (s >> np.uint64(16))
    return (~s.astype(np.uint16)).astype(np.uint16)


def _words(buf: npt.NDArray[np.uint8], start: int, stop: int) -> npt.NDArray[np.uint64]:
    """Sum of the big-endian 16-bit words of columns [start, stop) of each row (even length)."""
    b = buf[:, start:stop].astype(np.uint64)
    return (b[:, 0::2] << np.uint64(8)).sum(axis=1) + b[:, 1::2].sum(axis=1)


def _put(buf: npt.NDArray[np.uint8], col: int, vals: npt.ArrayLike, nbytes: int) -> None:
    v = np.asarray(vals, np.uint64)
    v = np.broadcast_to(v, (buf.shape[0],))
    for k in range(nbytes):
        buf[:, col + k] = ((v >> np.uint64(8 * (nbytes - 1 - k))) & np.uint64(0xFF)).astype(
            np.uint8
        )


@dataclass(frozen=True)
class Connections:
    """Addresses, ports and initial sequence numbers of connections [first, first + n)."""

    first: int
    n: int
    client_mac: bytes
    server_mac: bytes

    @property
    def ids(self) -> npt.NDArray[np.int64]:
        return np.arange(self.first, self.first + self.n, dtype=np.int64)

    def is_tcp(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return (ids % 4) != 3

    def tuple_of(self, ids: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[np.uint64]]:
        """Client/server address and port of each connection id."""
        cip = (10 << 24) | (1 << 16)
        cip_v = np.uint64(cip) + (ids % _IP_CYCLE).astype(np.uint64) + np.uint64(1)
        sport = np.uint64(1024) + (ids // _IP_CYCLE).astype(np.uint64)
        sip = np.uint64((10 << 24) | (2 << 16)) + np.uint64(1) + (ids % 16).astype(np.uint64)
        tcp = self.is_tcp(ids)
        dport = np.where(tcp, TCP_DPORTS[(ids // 4) % 3], UDP_DPORTS[(ids // 4) % 2])
        return {"cip": cip_v, "sip": sip, "sport": sport, "dport": dport.astype(np.uint64)}

    def frames(self, phase: Phase, ids: npt.NDArray[np.int64]) -> tuple[np.ndarray, np.ndarray]:
        """(buffer rows, lengths) of `phase` for connection ids, in id order (a TCP id in
        phase c1 has two frames: its ACK, then its data)."""
        t = self.tuple_of(ids)
        tcp = self.is_tcp(ids)
        c_isn = (ids.astype(np.uint64) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
        s_isn = (c_isn ^ np.uint64(0x5A5A5A5A)) & np.uint64(0xFFFFFFFF)
        m32 = np.uint64(0xFFFFFFFF)
        one, p = np.uint64(1), np.uint64(PAYLOAD)
        client_side = SIDE[phase] == "client"
        parts: list[tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]] = []
        ti, ui = np.nonzero(tcp)[0], np.nonzero(~tcp)[0]

        def tcp_part(sel: np.ndarray, seq: np.ndarray, ack: np.ndarray, flags: int,
                     data: bool) -> None:  # fmt: skip
            parts.append((sel, self._tcp(t, sel, client_side, seq, ack, flags, data)))

        ct, st = c_isn[ti], s_isn[ti]
        if phase == "c0":
            tcp_part(ti, ct, np.zeros_like(ct), _SYN, False)
        elif phase == "s0":
            tcp_part(ti, st, (ct + one) & m32, _SYN | _ACK, False)
        elif phase == "c1":
            tcp_part(ti, (ct + one) & m32, (st + one) & m32, _ACK, False)
            tcp_part(ti, (ct + one) & m32, (st + one) & m32, _PSH | _ACK, True)
        elif phase == "s1":
            tcp_part(ti, (st + one) & m32, (ct + one + p) & m32, _PSH | _ACK, True)
        else:  # keep-alive: a pure ACK at the current sequence numbers (duplicate ACKs)
            seq, ack = (ct, st) if client_side else (st, ct)
            tcp_part(ti, (seq + one + p) & m32, (ack + one + p) & m32, _ACK, False)
        parts.append((ui, self._udp(t, ui, client_side)))
        # interleave by id order; the two-frame TCP phase keeps ACK before data per id
        order_keys = np.concatenate([sel * 4 + k for k, (sel, _) in enumerate(parts)
                                     if len(sel)] or [np.zeros(0, np.int64)])  # fmt: skip
        bufs = [b for sel, (b, _) in parts if len(sel)]
        lens = [ln for sel, (_, ln) in parts if len(sel)]
        if not bufs:
            return np.zeros((0, WIDTH), np.uint8), np.zeros(0, np.int64)
        buf, ln = np.concatenate(bufs), np.concatenate(lens)
        o = np.argsort(order_keys, kind="stable")
        return np.ascontiguousarray(buf[o]), ln[o]

    def _l2l3(self, n: int, client_side: bool, src: np.ndarray, dst: np.ndarray, proto: int,
              l4_len: int) -> np.ndarray:  # fmt: skip
        buf = np.zeros((n, WIDTH), np.uint8)
        smac, dmac = ((self.client_mac, self.server_mac) if client_side
                      else (self.server_mac, self.client_mac))  # fmt: skip
        buf[:, 0:6] = np.frombuffer(dmac, np.uint8)
        buf[:, 6:12] = np.frombuffer(smac, np.uint8)
        buf[:, 12], buf[:, 13] = 0x08, 0x00
        ip = _ETH
        buf[:, ip] = 0x45
        _put(buf, ip + 2, _IP + l4_len, 2)
        buf[:, ip + 6] = 0x40  # DF
        buf[:, ip + 8] = 64
        buf[:, ip + 9] = proto
        _put(buf, ip + 12, src, 4)
        _put(buf, ip + 16, dst, 4)
        _put(buf, ip + 10, _fold(_words(buf, ip, ip + _IP)), 2)
        return buf

    def _pseudo(self, src: np.ndarray, dst: np.ndarray, proto: int, l4_len: int) -> np.ndarray:
        s = (src >> np.uint64(16)) + (src & np.uint64(0xFFFF))
        s = s + (dst >> np.uint64(16)) + (dst & np.uint64(0xFFFF))
        return s + np.uint64(proto) + np.uint64(l4_len)

    def _ends(self, t: dict[str, np.ndarray], sel: np.ndarray, client_side: bool
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        if client_side:
            return t["cip"][sel], t["sip"][sel], t["sport"][sel], t["dport"][sel]
        return t["sip"][sel], t["cip"][sel], t["dport"][sel], t["sport"][sel]

    def _tcp(self, t: dict[str, np.ndarray], sel: np.ndarray, client_side: bool,
             seq: np.ndarray, ack: np.ndarray, flags: int, data: bool) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        src, dst, sp, dp = self._ends(t, sel, client_side)
        l4 = 20 + (PAYLOAD if data else 0)
        buf = self._l2l3(len(sel), client_side, src, dst, 6, l4)
        o = _ETH + _IP
        _put(buf, o, sp, 2)
        _put(buf, o + 2, dp, 2)
        _put(buf, o + 4, seq, 4)
        _put(buf, o + 8, ack, 4)
        buf[:, o + 12] = 0x50
        buf[:, o + 13] = flags
        _put(buf, o + 14, 65535, 2)
        if data:
            buf[:, o + 20 : o + 20 + PAYLOAD] = np.frombuffer(b"starfabric-sf20\n", np.uint8)
        csum = _fold(_words(buf, o, o + l4) + self._pseudo(src, dst, 6, l4))
        _put(buf, o + 16, csum, 2)
        return buf, np.full(len(sel), _ETH + _IP + l4, np.int64)

    def _udp(self, t: dict[str, np.ndarray], sel: np.ndarray, client_side: bool
             ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        src, dst, sp, dp = self._ends(t, sel, client_side)
        l4 = 8 + PAYLOAD
        buf = self._l2l3(len(sel), client_side, src, dst, 17, l4)
        o = _ETH + _IP
        _put(buf, o, sp, 2)
        _put(buf, o + 2, dp, 2)
        _put(buf, o + 4, l4, 2)
        buf[:, o + 8 : o + 8 + PAYLOAD] = np.frombuffer(b"starfabric-sf20\n", np.uint8)
        csum = _fold(_words(buf, o, o + l4) + self._pseudo(src, dst, 17, l4))
        csum = np.where(csum == 0, np.uint16(0xFFFF), csum)
        _put(buf, o + 6, csum, 2)
        return buf, np.full(len(sel), _ETH + _IP + l4, np.int64)


def packets_per_setup(ids: npt.NDArray[np.int64]) -> int:
    """Setup packets of these connections (SETUP_PACKETS by protocol)."""
    tcp = int(np.count_nonzero((ids % 4) != 3))
    return tcp * SETUP_PACKETS["tcp"] + (len(ids) - tcp) * SETUP_PACKETS["udp"]


__all__ = ["KEEPALIVE", "SETUP", "SETUP_PACKETS", "SIDE", "WIDTH", "Connections",
           "Phase", "packets_per_setup"]  # fmt: skip
