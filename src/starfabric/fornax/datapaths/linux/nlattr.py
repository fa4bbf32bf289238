"""Netlink attribute walking for the two message kinds the Linux datapath reads off raw
sockets in bulk (NFLOG packets, ctnetlink events): a flat {type: bytes} view of one level of
TLVs (struct nlattr: u16 len, u16 type, payload padded to 4 bytes; NLA_F_NESTED stripped).
Also the one place a raw NETLINK_NETFILTER socket is opened in a lab namespace.
Nothing here builds requests: ctnetlink requests go through pyroute2 (ctnetlink.py)."""

from __future__ import annotations

import socket
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import NsWorker

NLA_TYPE_MASK = 0x3FFF  # ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)
NLMSG_HDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
NFGENMSG = struct.Struct("=BBH")  # family, version, res_id (big-endian u16)
NLMSG_ERROR = 2
NLMSG_DONE = 3
NETLINK_NETFILTER = 12  # linux/netlink.h
SO_RCVBUFFORCE = 33  # asm-generic/socket.h: a buffer above rmem_max (root)


def netfilter_socket(worker: NsWorker, rcvbuf: int, groups: int = 0) -> socket.socket:
    """A raw NETLINK_NETFILTER socket made inside the worker's namespace (a socket stays in the
    namespace it was made in), its receive buffer forced to `rcvbuf` bytes, bound to the
    multicast `groups` mask (0: requests only)."""

    def make() -> socket.socket:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        s.bind((0, groups))
        return s

    return worker.call(make)


def attrs(buf: bytes | memoryview, start: int = 0, end: int | None = None) -> dict[int, bytes]:
    """One level of attributes in buf[start:end] as {type: payload} (last one wins)."""
    out: dict[int, bytes] = {}
    end = len(buf) if end is None else end
    i = start
    while i + 4 <= end:
        ln, typ = struct.unpack_from("=HH", buf, i)
        if ln < 4:
            break
        out[typ & NLA_TYPE_MASK] = bytes(buf[i + 4 : i + ln])
        i += (ln + 3) & ~3
    return out


def be16(b: bytes) -> int:
    return int.from_bytes(b[:2], "big")


def be32(b: bytes) -> int:
    return int.from_bytes(b[:4], "big")


def be64(b: bytes) -> int:
    return int.from_bytes(b[:8], "big")


def messages(buf: bytes) -> list[tuple[int, int, memoryview]]:
    """Split a datagram into (nlmsg type, flags, body after the nlmsghdr) per message."""
    out = []
    mv = memoryview(buf)
    i = 0
    while i + NLMSG_HDR.size <= len(buf):
        ln, typ, flags, _seq, _pid = NLMSG_HDR.unpack_from(buf, i)
        if ln < NLMSG_HDR.size:
            break
        out.append((typ, flags, mv[i + NLMSG_HDR.size : i + ln]))
        i += (ln + 3) & ~3
    return out


def nla(typ: int, payload: bytes) -> bytes:
    """Encode one attribute (padded)."""
    ln = 4 + len(payload)
    return struct.pack("=HH", ln, typ) + payload + b"\0" * (((ln + 3) & ~3) - ln)


__all__ = ["NFGENMSG", "NLMSG_HDR", "attrs", "be16", "be32", "be64", "messages", "nla"]
