"""Conntrack entries in bulk: ctnetlink GET, DUMP and batched CREATE on a raw NETLINK_NETFILTER
socket,
parsed with nlattr.py (about 20 us an entry; pyroute2's lazy attribute decoding costs a few
milliseconds an entry, which made a table walk per aging tick the bottleneck). Creates go many
to a datagram (one syscall per ~100 entries instead of one pyroute2 round trip each); single
updates, deletes and the flush stay with pyroute2 (ctnetlink.CtSocket); ctnetlink events
(events.py) are parsed here too. Attribute numbers: include/uapi/linux/netfilter/
nfnetlink_conntrack.h."""

from __future__ import annotations

import errno
import socket
import struct
from typing import TYPE_CHECKING

from starfabric.fornax.datapaths.linux.nlattr import (
    NFGENMSG,
    attrs,
    be16,
    be32,
    be64,
    messages,
    netfilter_socket,
    nla,
)
from starfabric.fornax.keys import ICMP_CLASS_OFFSET
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import NsWorker

#: A directed conntrack key: zone, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport (ports
#: as on the wire: ICMP id and type << 8 | code).
Key = tuple[int, int, int, int, int, int, int, int]

_CT = 1 << 8  # NFNL_SUBSYS_CTNETLINK
MSG_NEW, MSG_GET, MSG_DELETE = 0, 1, 2
_F_REQUEST, _F_ACK, _F_DUMP = 0x1, 0x4, 0x300
_NESTED = 0x8000
CTA_TUPLE_ORIG, CTA_STATUS, CTA_PROTOINFO, CTA_TIMEOUT, CTA_MARK = 1, 3, 4, 7, 8
CTA_COUNTERS_ORIG, CTA_COUNTERS_REPLY, CTA_ID, CTA_ZONE, CTA_MARK_MASK = 9, 10, 12, 18, 21
CTA_LABELS = 22
_TUPLE_IP, _TUPLE_PROTO = 1, 2
_V4_SRC, _V4_DST, _V6_SRC, _V6_DST = 1, 2, 3, 4
_P_NUM, _P_SPORT, _P_DPORT = 1, 2, 3
_P_ICMP = {PROTO_ICMP: (4, 5, 6), PROTO_ICMPV6: (7, 8, 9)}  # id, type, code
_V4_PREFIX = 0xFFFF_0000_0000


def _addr_halves(raw: bytes) -> tuple[int, int]:
    v = int.from_bytes(raw, "big") | (_V4_PREFIX if len(raw) == 4 else 0)
    return v >> 64, v & 0xFFFF_FFFF_FFFF_FFFF


def parse_entry(body: bytes | memoryview) -> dict[str, int] | None:
    """One ctnetlink entry message body (after the nlmsghdr) as plain ints."""
    a = attrs(body, NFGENMSG.size)
    if CTA_TUPLE_ORIG not in a:
        return None
    t = attrs(a[CTA_TUPLE_ORIG])
    ip = attrs(t.get(_TUPLE_IP, b""))
    pr = attrs(t.get(_TUPLE_PROTO, b""))
    src = ip.get(_V4_SRC) or ip.get(_V6_SRC) or b"\0" * 4
    dst = ip.get(_V4_DST) or ip.get(_V6_DST) or b"\0" * 4
    proto = pr.get(_P_NUM, b"\0")[0]
    if proto in _P_ICMP:
        i_id, i_type, i_code = _P_ICMP[proto]
        ident = be16(pr.get(i_id, b"\0\0"))
        typ, code = pr.get(i_type, b"\0")[0], pr.get(i_code, b"\0")[0]
        off = int(ICMP_CLASS_OFFSET[int(proto == PROTO_ICMPV6), typ])
        # the contract's stored form (keys._l4_ports): a query (id, id + k), its reply (id + k, id)
        shifted = (ident + abs(off)) & 0xFFFF
        sport, dport = (ident, shifted) if off > 0 else (shifted, ident) if off < 0 else (0, 0)
        wire = (ident, typ << 8 | code)
    else:
        sport = be16(pr[_P_SPORT]) if _P_SPORT in pr else 0
        dport = be16(pr[_P_DPORT]) if _P_DPORT in pr else 0
        wire = (sport, dport)
    sh, sl = _addr_halves(src)
    dh, dl = _addr_halves(dst)
    state = 0
    if CTA_PROTOINFO in a:
        tcp = attrs(a[CTA_PROTOINFO]).get(1)
        if tcp is not None:
            state = attrs(tcp).get(1, b"\0")[0]
    out = {"zone": be16(a[CTA_ZONE]) if CTA_ZONE in a else 0, "proto": proto, "src_hi": sh,
           "src_lo": sl, "dst_hi": dh, "dst_lo": dl, "sport": sport, "dport": dport,
           "status": be32(a[CTA_STATUS]) if CTA_STATUS in a else 0,
           "mark": be32(a[CTA_MARK]) if CTA_MARK in a else 0,
           "labels": int.from_bytes(a[CTA_LABELS], "little") if CTA_LABELS in a else 0,
           "tcp_state": state, "timeout": be32(a[CTA_TIMEOUT]) if CTA_TIMEOUT in a else 0,
           "id": be32(a[CTA_ID]) if CTA_ID in a else 0,
           "wire_sport": wire[0], "wire_dport": wire[1]}  # fmt: skip
    for name, typ_ in (("orig", CTA_COUNTERS_ORIG), ("reply", CTA_COUNTERS_REPLY)):
        c = attrs(a[typ_]) if typ_ in a else {}
        out[f"pkts_{name}"] = be64(c[1]) if 1 in c else 0
        out[f"bytes_{name}"] = be64(c[2]) if 2 in c else 0
    return out


#: ICMP query types and their replies (the kernel's invmap, nf_conntrack_proto_icmp{,v6}.c).
ICMP_REPLY = {PROTO_ICMP: {8: 0, 13: 14, 15: 16, 17: 18, 0: 8, 14: 13, 16: 15, 18: 17},
              PROTO_ICMPV6: {128: 129, 139: 140, 129: 128, 140: 139}}  # fmt: skip
CTA_TUPLE_REPLY, CTA_LABELS_MASK = 2, 23
_PI_TCP, _PI_STATE, _PI_FLAGS_ORIG, _PI_FLAGS_REPLY = 1, 1, 4, 5
#: IP_CT_TCP_FLAG_BE_LIBERAL: the direction's windows are not checked (ctnetlink.protoinfo).
_BE_LIBERAL = 0x08
_F_CREATE, _F_EXCL = 0x400, 0x200
_IPS_CONFIRMED = 1 << 3
#: Bytes of create messages sent in one datagram (assumption: well under the socket buffer).
CREATE_CHUNK_BYTES = 32 << 10


def reply_key(key: Key) -> Key:
    """The REPLY direction's key of a directed key (ICMP: the reply type)."""
    zone, proto, sh, sl, dh, dl, sport, dport = key
    if proto in _P_ICMP:
        rtype = ICMP_REPLY[proto].get(dport >> 8, dport >> 8)
        return zone, proto, dh, dl, sh, sl, sport, rtype << 8 | (dport & 0xFF)
    return zone, proto, dh, dl, sh, sl, dport, sport


def tuple_attr(key: Key, typ: int = CTA_TUPLE_ORIG) -> tuple[int, bytes]:
    """(family, CTA_TUPLE_ORIG (or `typ`) attribute) of a directed key (wire ports)."""
    _zone, proto, sh, sl, dh, dl, sport, dport = key
    v4 = sh == 0 and (sl >> 32) == 0xFFFF
    if v4:
        fam, ip = socket.AF_INET, nla(_V4_SRC, (sl & 0xFFFF_FFFF).to_bytes(4, "big")) + nla(
            _V4_DST, (dl & 0xFFFF_FFFF).to_bytes(4, "big"))  # fmt: skip
    else:
        fam, ip = socket.AF_INET6, nla(_V6_SRC, (sh << 64 | sl).to_bytes(16, "big")) + nla(
            _V6_DST, (dh << 64 | dl).to_bytes(16, "big"))  # fmt: skip
    pr = nla(_P_NUM, bytes([proto]))
    if proto in _P_ICMP:
        i_id, i_type, i_code = _P_ICMP[proto]
        pr += nla(i_id, sport.to_bytes(2, "big")) + nla(i_type, bytes([dport >> 8])) + nla(
            i_code, bytes([dport & 0xFF]))  # fmt: skip
    elif proto in (PROTO_TCP, PROTO_UDP):
        pr += nla(_P_SPORT, sport.to_bytes(2, "big")) + nla(_P_DPORT, dport.to_bytes(2, "big"))
    elif proto == 47:  # GRE: keys 0 (ctnetlink.tuples)
        pr += nla(_P_SPORT, b"\0\0") + nla(_P_DPORT, b"\0\0")
    tup = nla(_TUPLE_IP | _NESTED, ip) + nla(_TUPLE_PROTO | _NESTED, pr)
    return fam, nla(typ | _NESTED, tup)


def create_message(key: Key, seq: int, *, mark: int, labels: int, timeout_s: int,
                   tcp_state: int, status: int) -> bytes:  # fmt: skip
    """One IPCTNL_MSG_CT_NEW (create, exclusive) request: both tuples, zone, mark, labels,
    timeout, and for TCP the state with BE_LIBERAL both ways (windows never seen)."""
    fam, orig = tuple_attr(key)
    _, rep = tuple_attr(reply_key(key), CTA_TUPLE_REPLY)
    body = orig + rep + nla(CTA_ZONE, key[0].to_bytes(2, "big"))
    body += nla(CTA_TIMEOUT, max(1, timeout_s).to_bytes(4, "big"))
    body += nla(CTA_MARK, mark.to_bytes(4, "big"))
    body += nla(CTA_LABELS, labels.to_bytes(16, "little"))
    body += nla(CTA_LABELS_MASK, ((1 << 128) - 1).to_bytes(16, "little"))
    if status:  # the kernel marks a created entry CONFIRMED first and refuses to clear it
        body += nla(CTA_STATUS, (status | _IPS_CONFIRMED).to_bytes(4, "big"))
    if key[1] == PROTO_TCP:
        flags = bytes([_BE_LIBERAL, _BE_LIBERAL])
        tcp = nla(_PI_STATE, bytes([tcp_state])) + nla(_PI_FLAGS_ORIG, flags) + nla(
            _PI_FLAGS_REPLY, flags)  # fmt: skip
        body += nla(CTA_PROTOINFO | _NESTED, nla(_PI_TCP | _NESTED, tcp))
    body = NFGENMSG.pack(fam, 0, 0) + body
    flags_ = _F_REQUEST | _F_ACK | _F_CREATE | _F_EXCL
    return struct.pack("=IHHII", 16 + len(body), _CT | MSG_NEW, flags_, seq, 0) + body


class CtReader:
    """GET by key and DUMP of the nic namespace's conntrack table, on one raw socket."""

    def __init__(self, worker: NsWorker, rcvbuf: int = 8 << 20) -> None:
        self._sock = netfilter_socket(worker, rcvbuf, 0)
        self._seq = 0
        self.requests = 0

    def _request(self, typ: int, flags: int, family: int, payload: bytes
                 ) -> tuple[int, list[dict[str, int]]]:  # fmt: skip
        """(errno, entries) of one request, reading until its ACK / DONE."""
        self._seq += 1
        self.requests += 1
        body = NFGENMSG.pack(family, 0, 0) + payload
        self._sock.send(struct.pack("=IHHII", 16 + len(body), _CT | typ, flags, self._seq, 0)
                        + body)  # fmt: skip
        rows: list[dict[str, int]] = []
        while True:
            data = self._sock.recv(1 << 20)
            for mtyp, _f, b in messages(data):
                if mtyp == 2:  # NLMSG_ERROR (an ACK when 0)
                    return -struct.unpack_from("=i", b, 0)[0], rows
                if mtyp == 3:  # NLMSG_DONE
                    return 0, rows
                row = parse_entry(b)
                if row is not None:
                    rows.append(row)

    def create_many(self, items: list[tuple[Key, int, int, int, int, int]]) -> list[int]:
        """Create entries (key, mark, labels, timeout_s, tcp_state, status), many messages a
        datagram; the errno of each (0 created, EEXIST there already), in order."""
        out = [0] * len(items)
        first = self._seq + 1
        pending = 0
        chunk: list[bytes] = []
        size = 0

        def flush() -> None:
            nonlocal chunk, size, pending
            if not chunk:
                return
            self._sock.send(b"".join(chunk))
            want = len(chunk)
            chunk, size = [], 0
            while want:
                for mtyp, _f, b in messages(self._sock.recv(1 << 20)):
                    if mtyp == 2:
                        err = -struct.unpack_from("=i", b, 0)[0]
                        seq = struct.unpack_from("=I", b, 4 + 8)[0]  # the request's nlmsghdr
                        out[seq - first] = err
                        want -= 1
            pending = 0

        for key, mark, labels, timeout_s, tcp_state, status in items:
            self._seq += 1
            self.requests += 1
            msg = create_message(key, self._seq, mark=mark, labels=labels,
                                 timeout_s=timeout_s, tcp_state=tcp_state, status=status)  # fmt: skip
            chunk.append(msg)
            size += len(msg)
            pending += 1
            if size >= CREATE_CHUNK_BYTES:
                flush()
        flush()
        return out

    def delete(self, key: Key) -> int:
        """errno of deleting the entry with this key (either orientation) in its zone."""
        fam, tup = tuple_attr(key)
        return self._request(MSG_DELETE, _F_REQUEST | _F_ACK, fam,
                             tup + nla(CTA_ZONE, key[0].to_bytes(2, "big")))[0]  # fmt: skip

    def update(self, key: Key, *, mark: int | None = None, labels: int | None = None,
               timeout_s: int | None = None, tcp_state: int | None = None) -> int:  # fmt: skip
        """errno of changing the given fields of the entry with this key."""
        fam, body = tuple_attr(key)
        body += nla(CTA_ZONE, key[0].to_bytes(2, "big"))
        if timeout_s is not None:
            body += nla(CTA_TIMEOUT, max(0, timeout_s).to_bytes(4, "big"))
        if mark is not None:
            body += nla(CTA_MARK, mark.to_bytes(4, "big"))
        if labels is not None:
            body += nla(CTA_LABELS, labels.to_bytes(16, "little"))
            body += nla(CTA_LABELS_MASK, ((1 << 128) - 1).to_bytes(16, "little"))
        if tcp_state is not None and key[1] == PROTO_TCP:
            flags = bytes([_BE_LIBERAL, _BE_LIBERAL])
            tcp = nla(_PI_STATE, bytes([tcp_state])) + nla(_PI_FLAGS_ORIG, flags) + nla(
                _PI_FLAGS_REPLY, flags)  # fmt: skip
            body += nla(CTA_PROTOINFO | _NESTED, nla(_PI_TCP | _NESTED, tcp))
        return self._request(MSG_NEW, _F_REQUEST | _F_ACK, fam, body)[0]

    def get(self, key: Key) -> dict[str, int] | None:
        fam, tup = tuple_attr(key)
        err, rows = self._request(MSG_GET, _F_REQUEST | _F_ACK, fam,
                                  tup + nla(CTA_ZONE, key[0].to_bytes(2, "big")))  # fmt: skip
        return rows[0] if not err and rows else None

    def dump(self, *, reap_only: bool = False) -> list[dict[str, int]]:
        """Every entry (both families: AF_UNSPEC). A walk evicts entries whose timer ran out (DESTROY
        events follow); with reap_only it matches no entry (a mark no combo has) and only
        walks — the cheap way to age the table between the kernel's own gc passes."""
        flt = (nla(CTA_MARK, (0x1FFF_FFFF).to_bytes(4, "big"))
               + nla(CTA_MARK_MASK, (0xFFFF_FFFF).to_bytes(4, "big"))) if reap_only else b""  # fmt: skip
        err, rows = self._request(MSG_GET, _F_REQUEST | _F_DUMP, socket.AF_UNSPEC, flt)
        if err and err != errno.ENOENT:
            raise OSError(err, f"ctnetlink dump: {errno.errorcode.get(err, err)}")
        return rows

    def close(self) -> None:
        self._sock.close()


__all__ = [
    "ICMP_REPLY",
    "CtReader",
    "Key",
    "create_message",
    "parse_entry",
    "reply_key",
    "tuple_attr",
]
