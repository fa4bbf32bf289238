"""Plain reference for the end-to-end differential test: policy evaluated per packet with
conntrack semantics, no hardware, no versions, no batching.

A connection is remembered from its first packet (when policy allows it, or, with drop
sessions, when a drop session could be charged to an ENI). Every later packet of the
connection is decided by evaluating the connection's ORIGINAL first packet under the policy
in force NOW (so nothing is ever forwarded under an old policy): forward direction -> the fwd
action, reply direction -> the rev action. A connection the current policy no longer keeps is
forgotten after dropping the packet that found it; the next packet is a first packet again.
Connections are tracked as nf_conntrack does, with the one shared tracker
(engine/conntrack.py, on a one-row array per connection): a first packet the kernel would
create no entry for is forwarded as decided but remembered not; a SYN that reopens a closed
connection starts a new one, decided as a first packet in its own direction; a connection
whose only reply is a RST ends after it. Connections are keyed as the kernel's tuples are
(an ICMP query by its class and id, other ICMP messages apart from every query).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import numpy as np

from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine.config import EngineConfig
from starfabric.fornax.vpc import ReferencePolicy, VpcSpec

#: ICMP(v6) query classes the kernel tracks, (request type, reply type), numbered from 1:
#: echo, timestamp, information, address mask; ICMPv6 echo and node information.
QUERIES = {1: ((8, 0), (13, 14), (15, 16), (17, 18)), 58: ((128, 129), (139, 140))}

Packet = tuple[int, str, str, int, int, int, int]  # vni, src, dst, proto, sport, dport, flags


def _ports(proto: int, sport: int, dport: int) -> tuple[int, int]:
    """As the kernel's ICMP tuple: a query of class k from its requester (id, id + k), the
    reply (id + k, id), so one id's echo and timestamp are two connections and no other ICMP
    message (an error, an unknown type: ports (0, 0)) ever lands in a query's connection."""
    if proto in QUERIES:
        t = dport >> 8
        for k, (req, rep) in enumerate(QUERIES[proto], start=1):
            if t == req:
                return sport, (sport + k) & 0xFFFF
            if t == rep:
                return (sport + k) & 0xFFFF, sport
        return 0, 0
    return sport, dport


def canonical(p: Packet) -> tuple[tuple[Any, ...], int]:
    """(key, direction bit) written out plainly."""
    vni, src, dst, proto, sport, dport, _flags = p
    sp, dp = _ports(proto, sport, dport)
    a = (_addr(src), sp)
    b = (_addr(dst), dp)
    if a <= b:
        return (vni, proto, a, b), 0
    return (vni, proto, b, a), 1


def _addr(text: str) -> int:
    ip = ipaddress.ip_address(text)
    return int(ip) | (0xFFFF_0000_0000 if ip.version == 4 else 0)


class ConntrackReference:
    """Decide packets one at a time; `set_policy` changes the policy in force."""

    def __init__(self, spec: VpcSpec, drop_sessions: bool) -> None:
        self.policy = ReferencePolicy(spec)
        self.drop_sessions = drop_sessions
        self.conns: dict[tuple[Any, ...], tuple[Packet, int, np.ndarray]] = {}  # first, dir, row
        self.cfg = EngineConfig().tracker_params()
        self.t = 0

    def set_policy(self, spec: VpcSpec) -> None:
        self.policy = ReferencePolicy(spec)

    def _decide(self, p: Packet) -> dict[str, Any]:
        vni, src, dst, proto, sport, dport, _flags = p
        return self.policy.evaluate(
            vni, ipaddress.ip_address(src), ipaddress.ip_address(dst), proto, sport, dport
        )

    def _keeps(self, d: dict[str, Any]) -> bool:
        return d["reason"] == "ALLOW" or (self.drop_sessions and d["eni"] is not None)

    def packet(self, p: Packet) -> tuple[Any, ...] | None:
        """The described action the packet is forwarded with, or None when it is dropped."""
        key, direction = canonical(p)
        self.t += 1
        proto = p[3]
        flags = p[5] >> 8 if proto in QUERIES else p[6]  # the tracker's flags (conntrack.pkt_flags)
        if key in self.conns:
            first, first_dir, row = self.conns[key]
            d = self._decide(first)
            if not self._keeps(d):
                del self.conns[key]
                return None
            rel = 0 if direction == first_dir else 1
            v, _ = CT.ct_packet(row, 0, 0, 1, proto, rel, flags, 0, 0, 0, 0, 0, 0, 0, self.t,
                                self.cfg)  # fmt: skip
            if v == CT.V_REOPEN:
                del self.conns[key]
                return self.packet(p)  # a new connection
            if v == CT.V_KILL:
                del self.conns[key]
            act = d["fwd"] if direction == first_dir else d["rev"]
        else:
            d = self._decide(p)
            if self._keeps(d):
                row = np.zeros((1, 1 + CT.N_TRACK), np.uint64)
                row[0, 0] = proto
                icmp_type = p[5] >> 8
                ok = CT.ct_new(row, 0, 0, 1, proto, flags, 0, 0, 0, 0, 0, icmp_type, self.t,
                               self.cfg)  # fmt: skip
                if ok:
                    v, _ = CT.ct_packet(row, 0, 0, 1, proto, 0, flags, 0, 0, 0, 0, 0, 0, 0,
                                        self.t, self.cfg)  # fmt: skip
                    ok = v != CT.V_INVALID
                if ok:
                    self.conns[key] = (p, direction, row)
            act = d["fwd"]
        return None if act[0] == "DROP" else tuple(act)
