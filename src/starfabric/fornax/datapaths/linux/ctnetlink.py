"""nf_conntrack entries through ctnetlink, in the nic namespace: what `conntrack -I/-U/-G/-D/-L/-F`
sends, without a process per entry. The engine's hot requests (batched creates, updates,
deletes, gets, dumps) are encoded and parsed by ctread.py on a raw socket; pyroute2's
NFCTSocket (a maintained ctnetlink implementation) flushes the table and is the reference
encoder of a create (`create`), which a test checks ctread's against entry for entry. Every
socket is created on the lab's nic worker (netns.NsWorker). An entry's key is the contract's
directed key: (zone of the VNI, proto, src, dst, sport, dport) — ICMP's sport is the echo id,
dport type << 8 | code, as in packets.py."""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING, Any

from starfabric.fornax.datapaths.linux.ctread import ICMP_REPLY, CtReader, Key
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import NsWorker

PROTO_GRE = 47
#: Kernel status bits (include/uapi/linux/netfilter/nf_conntrack_common.h).
IPS_SEEN_REPLY = 1 << 1
IPS_ASSURED = 1 << 2
IPS_CONFIRMED = 1 << 3
_V4_PREFIX = 0xFFFF_0000_0000


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


class CtSocket:
    """ctnetlink requests for both families, run on the nic namespace's worker thread."""

    def __init__(self, worker: NsWorker) -> None:
        from pyroute2 import NFCTSocket

        self._w = worker
        self.reader = CtReader(worker)
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
        """errno of creating the entry through pyroute2 (0 ok, EEXIST already there): the
        reference for ctread.create_message (the engine creates in batches through that)."""
        fam, orig, reply = tuples(key)
        kw: dict[str, Any] = {"tuple_orig": orig, "tuple_reply": reply, "zone": key[0],
                              "mark": mark, "timeout": max(1, timeout_s),
                              "labels": labels, "labels_mask": (1 << 128) - 1}  # fmt: skip
        if key[1] == PROTO_TCP:
            kw["protoinfo"] = protoinfo(tcp_state, liberal=True)
        if status:  # the kernel marks a created entry CONFIRMED before applying CTA_STATUS,
            kw["status"] = status | IPS_CONFIRMED  # and refuses (EBUSY) to clear that bit
        return self._entry("add", fam, **kw)[0]

    def create_many(self, items: list[tuple[Key, int, int, int, int, int]]) -> list[int]:
        """Batched creates (ctread.CtReader.create_many): errno per entry."""
        self.requests += len(items)
        return self.reader.create_many(items)

    def update(self, key: Key, *, mark: int | None = None, labels: int | None = None,
               timeout_s: int | None = None, tcp_state: int | None = None) -> int:  # fmt: skip
        """errno of changing the given fields (raw request: ctread.CtReader.update)."""
        self.requests += 1
        return self.reader.update(key, mark=mark, labels=labels, timeout_s=timeout_s,
                                  tcp_state=tcp_state)  # fmt: skip

    def get(self, key: Key) -> dict[str, int] | None:
        self.requests += 1
        return self.reader.get(key)

    def delete(self, key: Key) -> int:
        """errno of deleting the entry (raw request: ctread.CtReader.delete)."""
        self.requests += 1
        return self.reader.delete(key)

    def dump(self, *, reap_only: bool = False) -> list[dict[str, int]]:
        """Every entry (ctread.CtReader.dump; reap_only: walk and evict, return nothing)."""
        self.requests += 1
        return self.reader.dump(reap_only=reap_only)

    def flush(self) -> None:
        """Remove every entry (both families, all zones)."""
        for sock in self._s.values():
            self.requests += 1
            self._w.call(sock.flush)

    def close(self) -> None:
        self.reader.close()
        for s in self._s.values():
            self._w.call(s.close)


__all__ = ["IPS_ASSURED", "IPS_SEEN_REPLY", "CtSocket", "Key", "tuples"]
