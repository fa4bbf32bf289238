"""nf_conntrack entries through ctnetlink (pyroute2's NFCTSocket), in the nic namespace.

One request per entry op (create/update/get/delete, as `conntrack -I/-U/-G/-D` would send,
without a process per entry); dumps in one multi-part request. Every socket is created on the
lab's nic worker (netns.NsWorker) and used from it. An entry's key is the contract's directed
key: (zone of the VNI, proto, src, dst, sport, dport) — ICMP's sport is the echo id, dport
type << 8 | code, as in packets.py."""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING, Any

from starfabric.fornax.keys import ICMP_CLASS_OFFSET
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import NsWorker

PROTO_GRE = 47
#: ICMP query types and their replies (the kernel's invmap, nf_conntrack_proto_icmp{,v6}.c).
ICMP_REPLY = {PROTO_ICMP: {8: 0, 13: 14, 15: 16, 17: 18, 0: 8, 14: 13, 16: 15, 18: 17},
              PROTO_ICMPV6: {128: 129, 139: 140, 129: 128, 140: 139}}  # fmt: skip
#: Kernel status bits (include/uapi/linux/netfilter/nf_conntrack_common.h).
IPS_SEEN_REPLY = 1 << 1
IPS_ASSURED = 1 << 2
_V4_PREFIX = 0xFFFF_0000_0000

Key = tuple[int, int, int, int, int, int, int, int]  # zone, proto, src_hi, src_lo, dst_hi, ...


def _ip(hi: int, lo: int) -> tuple[int, str]:
    if hi == 0 and (lo >> 32) == 0xFFFF:
        return socket.AF_INET, str(ipaddress.IPv4Address(lo & 0xFFFF_FFFF))
    return socket.AF_INET6, str(ipaddress.IPv6Address(hi << 64 | lo))


def _halves(text: str) -> tuple[int, int]:
    ip = ipaddress.ip_address(text)
    v = int(ip) | (_V4_PREFIX if ip.version == 4 else 0)
    return v >> 64, v & 0xFFFF_FFFF_FFFF_FFFF


def _tuple(family: int, proto: int, src: str, dst: str, sport: int, dport: int) -> Any:
    from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

    if proto in (PROTO_ICMP, PROTO_ICMPV6):
        return NFCTAttrTuple(family=family, saddr=src, daddr=dst, proto=proto, icmp_id=sport,
                             icmp_type=dport >> 8, icmp_code=dport & 0xFF)  # fmt: skip
    if proto in (PROTO_TCP, PROTO_UDP):
        return NFCTAttrTuple(family=family, saddr=src, daddr=dst, proto=proto, sport=sport,
                             dport=dport)  # fmt: skip
    if proto == PROTO_GRE:  # the GRE tracker keys by GRE key / PPTP call id: 0 without one
        return NFCTAttrTuple(family=family, saddr=src, daddr=dst, proto=proto, sport=0, dport=0)
    return NFCTAttrTuple(family=family, saddr=src, daddr=dst, proto=proto)


def tuples(key: Key) -> tuple[int, Any, Any]:
    """(family, ORIGINAL tuple, REPLY tuple) of a directed key."""
    _zone, proto, sh, sl, dh, dl, sport, dport = key
    fam, src = _ip(sh, sl)
    _, dst = _ip(dh, dl)
    orig = _tuple(fam, proto, src, dst, sport, dport)
    if proto in (PROTO_ICMP, PROTO_ICMPV6):
        rtype = ICMP_REPLY[proto].get(dport >> 8, dport >> 8)
        reply = _tuple(fam, proto, dst, src, sport, rtype << 8 | (dport & 0xFF))
    else:
        reply = orig.reverse()
    return fam, orig, reply


#: IP_CT_TCP_FLAG_BE_LIBERAL (nf_conntrack_tcp.h): the direction's windows are not checked.
TCP_FLAG_BE_LIBERAL = 0x08


def protoinfo(tcp_state: int, liberal: bool) -> dict[str, Any]:
    """CTA_PROTOINFO_TCP: the state and, for an entry whose windows the kernel never saw
    (inserted without a tracker state), BE_LIBERAL on both directions — the contract's
    "unknown windows, checked liberally"."""
    attrs: list[list[Any]] = [["CTA_PROTOINFO_TCP_STATE", tcp_state]]
    if liberal:
        flags = (TCP_FLAG_BE_LIBERAL, TCP_FLAG_BE_LIBERAL)  # value, mask
        attrs += [["CTA_PROTOINFO_TCP_FLAGS_ORIGINAL", flags],
                  ["CTA_PROTOINFO_TCP_FLAGS_REPLY", flags]]  # fmt: skip
    return {"attrs": [["CTA_PROTOINFO_TCP", {"attrs": attrs}]]}


def parse(msg: Any) -> dict[str, int] | None:
    """One ctnetlink entry message (pyroute2 nfct_msg) as plain ints; None if unparseable."""
    t = msg.get_attr("CTA_TUPLE_ORIG")
    if t is None:
        return None
    ip = t.get_attr("CTA_TUPLE_IP")
    pr = t.get_attr("CTA_TUPLE_PROTO")
    src = ip.get_attr("CTA_IP_V4_SRC") or ip.get_attr("CTA_IP_V6_SRC")
    dst = ip.get_attr("CTA_IP_V4_DST") or ip.get_attr("CTA_IP_V6_DST")
    proto = int(pr.get_attr("CTA_PROTO_NUM"))
    if proto in (PROTO_ICMP, PROTO_ICMPV6):
        p = "CTA_PROTO_ICMP" if proto == PROTO_ICMP else "CTA_PROTO_ICMPV6"
        ident = int(pr.get_attr(p + "_ID") or 0)
        off = int(ICMP_CLASS_OFFSET[int(proto == PROTO_ICMPV6), int(pr.get_attr(p + "_TYPE") or 0)])
        # the contract's stored form (keys._l4_ports): a query (id, id + k), its reply (id + k, id)
        shifted = (ident + abs(off)) & 0xFFFF
        sport, dport = (ident, shifted) if off > 0 else (shifted, ident) if off < 0 else (0, 0)
        word = int(pr.get_attr(p + "_TYPE") or 0) << 8 | int(pr.get_attr(p + "_CODE") or 0)
        wire = (ident, word)
    else:
        sport = int(pr.get_attr("CTA_PROTO_SRC_PORT") or 0)
        dport = int(pr.get_attr("CTA_PROTO_DST_PORT") or 0)
        wire = (sport, dport)
    sh, sl = _halves(src)
    dh, dl = _halves(dst)
    state = 0
    pi = msg.get_attr("CTA_PROTOINFO")
    if pi is not None and pi.get_attr("CTA_PROTOINFO_TCP") is not None:
        state = int(pi.get_attr("CTA_PROTOINFO_TCP").get_attr("CTA_PROTOINFO_TCP_STATE") or 0)
    out = {"zone": int(msg.get_attr("CTA_ZONE") or 0), "proto": proto, "src_hi": sh,
           "src_lo": sl, "dst_hi": dh, "dst_lo": dl, "sport": sport, "dport": dport,
           "status": int(msg.get_attr("CTA_STATUS") or 0), "mark": int(msg.get_attr("CTA_MARK") or 0),
           "labels": int(msg.get_attr("CTA_LABELS") or 0), "tcp_state": state,
           "timeout": int(msg.get_attr("CTA_TIMEOUT") or 0), "id": int(msg.get_attr("CTA_ID") or 0),
           "wire_sport": wire[0], "wire_dport": wire[1]}  # fmt: skip
    for d in ("ORIG", "REPLY"):
        c = msg.get_attr(f"CTA_COUNTERS_{d}")
        out[f"pkts_{d.lower()}"] = int(c.get_attr("CTA_COUNTERS_PACKETS") or 0) if c else 0
        out[f"bytes_{d.lower()}"] = int(c.get_attr("CTA_COUNTERS_BYTES") or 0) if c else 0
    return out


class CtSocket:
    """ctnetlink requests for both families, run on the nic namespace's worker thread."""

    def __init__(self, worker: NsWorker) -> None:
        from pyroute2 import NFCTSocket

        self._w = worker
        self._s: dict[int, Any] = {
            int(f): worker.call(NFCTSocket, f) for f in (socket.AF_INET, socket.AF_INET6)
        }
        self.requests = 0

    def _entry(self, cmd: str, family: int, **kw: Any) -> tuple[int, list[Any]]:
        from pyroute2.netlink.exceptions import NetlinkError

        self.requests += 1
        sock = self._s[family]
        try:
            return 0, self._w.call(lambda: sock.entry(cmd, **kw))
        except NetlinkError as exc:
            return int(exc.code), []

    def create(self, key: Key, *, mark: int, labels: int, timeout_s: int, tcp_state: int,
               status: int) -> int:  # fmt: skip
        """errno of creating the entry (0 ok, EEXIST already there)."""
        fam, orig, reply = tuples(key)
        kw: dict[str, Any] = {"tuple_orig": orig, "tuple_reply": reply, "zone": key[0],
                              "mark": mark, "timeout": max(1, timeout_s),
                              "labels": labels, "labels_mask": (1 << 128) - 1}  # fmt: skip
        if key[1] == PROTO_TCP:
            kw["protoinfo"] = protoinfo(tcp_state, liberal=True)
        if status:
            kw["status"] = status
        return self._entry("add", fam, **kw)[0]

    def update(self, key: Key, *, mark: int | None = None, labels: int | None = None,
               timeout_s: int | None = None, tcp_state: int | None = None) -> int:  # fmt: skip
        fam, orig, _ = tuples(key)
        kw: dict[str, Any] = {"tuple_orig": orig, "zone": key[0]}
        if mark is not None:
            kw["mark"] = mark
        if labels is not None:
            kw.update(labels=labels, labels_mask=(1 << 128) - 1)
        if timeout_s is not None:
            kw["timeout"] = max(0, timeout_s)
        if tcp_state is not None and key[1] == PROTO_TCP:
            kw["protoinfo"] = protoinfo(tcp_state, liberal=True)
        return self._entry("set", fam, **kw)[0]

    def get(self, key: Key) -> dict[str, int] | None:
        fam, orig, _ = tuples(key)
        err, msgs = self._entry("get", fam, tuple_orig=orig, zone=key[0])
        if err:
            return None
        for m in msgs:
            row = parse(m)
            if row is not None:
                return row
        return None

    def delete(self, key: Key) -> int:
        fam, orig, _ = tuples(key)
        return self._entry("del", fam, tuple_orig=orig, zone=key[0])[0]

    def dump(self) -> list[dict[str, int]]:
        """Every entry of both families (also reaps entries whose timer ran out: the kernel's
        dump evicts expired entries it walks past, with DESTROY events)."""
        rows = []
        for sock in self._s.values():
            self.requests += 1
            msgs = self._w.call(lambda s=sock: list(s.dump()))
            rows += [r for r in map(parse, msgs) if r is not None]
        return rows

    def flush(self) -> None:
        """Remove every entry (both families, all zones)."""
        for sock in self._s.values():
            self.requests += 1
            self._w.call(sock.flush)

    def close(self) -> None:
        for s in self._s.values():
            self._w.call(s.close)


__all__ = ["IPS_ASSURED", "IPS_SEEN_REPLY", "CtSocket", "Key", "parse", "tuples"]
