"""Plain reference for the end-to-end differential test: policy evaluated per packet with
conntrack semantics, no hardware, no versions, no batching.

A connection is remembered from its first packet (when policy allows it, or, with drop
sessions, when a drop session could be charged to an ENI). Every later packet of the
connection is decided by evaluating the connection's ORIGINAL first packet under the policy
in force NOW (so nothing is ever forwarded under an old policy): forward direction -> the fwd
action, reply direction -> the rev action. A connection the current policy no longer keeps is
forgotten after dropping the packet that found it; the next packet is a first packet again.
TCP connections follow nf_conntrack's state table: a SYN that reopens a TIME_WAIT/CLOSE
connection starts a new connection, decided as a first packet in its own direction.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from starfabric.fornax.engine.tcp import (
    N_STATES,
    TRANSITIONS,
    initial_tcp_state,
    is_reopen,
    tcp_event,
)
from starfabric.fornax.packets import PROTO_TCP
from starfabric.fornax.vpc import ReferencePolicy, VpcSpec

ECHO = {1: (8, 0), 58: (128, 129)}

Packet = tuple[int, str, str, int, int, int, int]  # vni, src, dst, proto, sport, dport, flags


def _ports(proto: int, sport: int, dport: int) -> tuple[int, int]:
    if proto in ECHO:
        if (dport >> 8) in ECHO[proto]:
            return sport, sport
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
        self.conns: dict[tuple[Any, ...], tuple[Packet, int, int]] = {}  # first, dir, TCP state

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
        tcp = p[3] == PROTO_TCP
        if key in self.conns:
            first, first_dir, state = self.conns[key]
            d = self._decide(first)
            if not self._keeps(d):
                del self.conns[key]
                return None
            if tcp:
                rel = 0 if direction == first_dir else 1
                new = int(TRANSITIONS[rel, tcp_event(p[6]), state])
                if is_reopen(state, new):
                    del self.conns[key]
                    return self.packet(p)  # a new connection
                if new < N_STATES:
                    self.conns[key] = (first, first_dir, new)
            act = d["fwd"] if direction == first_dir else d["rev"]
        else:
            d = self._decide(p)
            if self._keeps(d):
                self.conns[key] = (p, direction, initial_tcp_state(p[6]) if tcp else 0)
            act = d["fwd"]
        return None if act[0] == "DROP" else tuple(act)
