"""Plain-Python, one-packet-at-a-time policy evaluator over the *spec* (ipaddress, loops).

It implements the semantics documented in evaluate.py independently of the compiled arrays
and kernels, and answers in the names `evaluate.describe` uses, so the two can be compared
packet by packet (differential tests, hypothesis). Slow by design.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from starfabric.fornax.packets import halves_to_ip
from starfabric.fornax.vpc.codes import Reason
from starfabric.fornax.vpc.compile import (
    acl_rule_name,
    local_route_name,
    route_name,
    sg_rule_name,
)
from starfabric.fornax.vpc.spec import Eni, NetworkAcl, Route, Vpc, VpcSpec

Addr = ipaddress.IPv4Address | ipaddress.IPv6Address


def _reply_dport(proto: int, sport: int, dport: int) -> int:
    if proto == 1 and dport >> 8 == 8:
        return dport & 0xFF
    if proto == 58 and dport >> 8 == 128:
        return (129 << 8) | (dport & 0xFF)
    if proto in (6, 17):
        return sport
    return dport


class ReferencePolicy:
    """Evaluate first packets one by one against a VpcSpec."""

    def __init__(self, spec: VpcSpec) -> None:
        self.spec = spec
        self.vpcs: dict[str, Vpc] = {}
        self.by_vni: dict[int, str] = {}
        self.enis: dict[tuple[int, Addr], tuple[str, Eni]] = {}
        self.eips: dict[Addr, tuple[str, Eni]] = {}
        self.eip_of: dict[str, Addr] = {}
        for t in spec.tenants:
            for v in t.vpcs:
                q = f"{t.name}/{v.name}"
                self.vpcs[q] = v
                self.by_vni[v.vni] = q
                for e in v.enis:
                    for a in (e.ipv4, e.ipv6):
                        if a is not None:
                            self.enis[(v.vni, ipaddress.ip_address(a))] = (q, e)
                for x in v.eips:
                    e = next(e for e in v.enis if e.name == x.eni)
                    self.eips[ipaddress.ip_address(x.ip)] = (q, e)
                    self.eip_of[f"{q}/{e.name}"] = ipaddress.ip_address(x.ip)
        self.peerings = {p.name: p for p in spec.peerings}

    # -- building blocks -------------------------------------------------------------------
    def _subnet(self, q: str, e: Eni) -> Any:
        return next(s for s in self.vpcs[q].subnets if s.name == e.subnet)

    def _acl(self, q: str, e: Eni) -> tuple[str, NetworkAcl] | None:
        s = self._subnet(q, e)
        if s.acl is None:
            return None
        return q, next(a for a in self.vpcs[q].network_acls if a.name == s.acl)

    def _acl_check(
        self, q: str, e: Eni, direction: str, proto: int, dport: int, remote: Addr
    ) -> tuple[bool, str | None]:
        found = self._acl(q, e)
        if found is None:
            return True, None
        _, acl = found
        for i, r in enumerate(acl.rules):
            if r.direction != direction:
                continue
            lo, hi = r.port_range()
            if r.protocol not in (0, proto) or not lo <= dport <= hi:
                continue
            if r.cidr is not None and remote not in ipaddress.ip_network(r.cidr):
                continue
            return r.action == "allow", acl_rule_name(q, acl.name, i, r)
        return False, None

    def _sg_check(
        self,
        q: str,
        e: Eni,
        direction: str,
        proto: int,
        dport: int,
        remote: Addr,
        remote_eni: tuple[str, Eni] | None,
    ) -> str | None:
        groups = {g.name: g for g in self.vpcs[q].security_groups}
        for g_name in e.security_groups:
            for i, r in enumerate(groups[g_name].rules):
                lo, hi = r.port_range()
                if r.direction != direction or r.protocol not in (0, proto):
                    continue
                if not lo <= dport <= hi:
                    continue
                if r.sg is not None:
                    if remote_eni is None or remote_eni[0] != q:
                        continue
                    if r.sg not in remote_eni[1].security_groups:
                        continue
                elif remote not in ipaddress.ip_network(str(r.cidr)):
                    continue
                return sg_rule_name(q, g_name, i, r)
        return None

    def _lpm(self, q: str, e: Eni, dst: Addr) -> tuple[str, Route | None, str] | None:
        """(route name, route or None for local, table) of the longest match, or None."""
        v = self.vpcs[q]
        table_name = self._subnet(q, e).route_table or v.main_route_table
        best: tuple[int, str, Route | None, str] | None = None
        for c in v.cidrs:
            net = ipaddress.ip_network(c)
            if dst in net and (best is None or net.prefixlen > best[0]):
                best = (net.prefixlen, local_route_name(q, c), None, "local")
        if table_name is not None:
            table = next(t for t in v.route_tables if t.name == table_name)
            for r in table.routes:
                net = ipaddress.ip_network(r.prefix)
                if dst in net and (best is None or net.prefixlen > best[0]):
                    best = (net.prefixlen, route_name(q, table_name, r), r, table_name)
        return None if best is None else best[1:]

    def _deliver(self, kind: str, q: str, e: Eni) -> tuple[Any, ...]:
        return (kind, f"{q}/{e.name}", self.vpcs[q].vni, e.host)

    def _dnat(self, q: str, e: Eni) -> tuple[Any, ...]:
        return ("DNAT", f"{q}/{e.name}", self.vpcs[q].vni, e.host, str(e.ipv4))

    # -- the decision ----------------------------------------------------------------------
    def evaluate(
        self, vni: int, src: Addr, dst: Addr, proto: int, sport: int, dport: int
    ) -> dict[str, object]:
        """Decide one first packet; the answer has the keys of `evaluate.describe`."""
        out: dict[str, Any] = {
            "reason": Reason.ALLOW,
            "rev_reason": Reason.ALLOW,
            "fwd": None,
            "rev": None,
            "eni": None,
            "vpc": "<gateway>",
            "nat_kind": "NONE",
            "nat_pool": None,
            "rev_vni": 0,
            "route": None,
            "sg_out": None,
            "acl_out": None,
            "acl_in": None,
            "sg_in": None,
        }
        rdport = _reply_dport(proto, sport, dport)
        if vni == self.spec.gateway_vni:
            self._inbound(out, src, dst, proto, dport, rdport)
        else:
            self._from_vm(out, vni, src, dst, proto, dport, rdport)
        if out["reason"] != Reason.ALLOW:
            out["fwd"] = out["rev"] = ("DROP", out["reason"].name)
            out["rev_reason"] = out["reason"]
            out["nat_kind"], out["nat_pool"] = "NONE", None
        elif out["rev_reason"] != Reason.ALLOW:
            out["rev"] = ("DROP", out["rev_reason"].name)
        out["reason"] = out["reason"].name
        out["rev_reason"] = out["rev_reason"].name
        return out

    def _inbound(
        self, out: dict[str, Any], src: Addr, dst: Addr, proto: int, dport: int, rdport: int
    ) -> None:
        hit = self.eips.get(dst) if src.version == 4 else None
        if hit is None:
            out["reason"] = Reason.NO_DEST
            return
        q, e = hit
        out["eni"], out["vpc"] = f"{q}/{e.name}", q
        ok, out["acl_in"] = self._acl_check(q, e, "ingress", proto, dport, src)
        if not ok:
            out["reason"] = Reason.ACL_DENY_IN
            return
        out["sg_in"] = self._sg_check(q, e, "ingress", proto, dport, src, None)
        if out["sg_in"] is None:
            out["reason"] = Reason.SG_DENY_IN
            return
        out["fwd"] = self._dnat(q, e)
        out["rev"] = ("SNAT", "eip", str(dst))
        out["nat_kind"] = "EIP"
        out["rev_vni"] = self.vpcs[q].vni
        ok, _ = self._acl_check(q, e, "egress", proto, rdport, src)
        if not ok:
            out["rev_reason"] = Reason.ACL_DENY_OUT

    def _from_vm(
        self,
        out: dict[str, Any],
        vni: int,
        src: Addr,
        dst: Addr,
        proto: int,
        dport: int,
        rdport: int,
    ) -> None:
        sender = self.enis.get((vni, src))
        if sender is None:
            out["reason"] = Reason.NO_ENI
            out["vpc"] = self.by_vni.get(vni, "<gateway>")
            return
        q, a = sender
        out["eni"], out["vpc"] = f"{q}/{a.name}", q
        found = self._lpm(q, a, dst)
        receiver: tuple[str, Eni] | None = None
        peering: str | None = None
        if found is None or src.version != dst.version:
            out["reason"] = Reason.NO_ROUTE
            return
        out["route"], route, _ = found
        target = "local" if route is None else route.target
        via = "" if route is None or route.via is None else route.via
        if target == "blackhole":
            out["reason"] = Reason.BLACKHOLE
            return
        if target == "local":
            receiver = self.enis.get((vni, dst))
            if receiver is None:
                out["reason"] = Reason.NO_DEST
                return
            out["fwd"] = self._deliver("DELIVER", *receiver)
            out["rev"] = self._deliver("DELIVER", q, a)
            out["rev_vni"] = vni
        elif target == "peering":
            peering = via
            p = self.peerings[peering]
            other = p.b if p.a == q else p.a
            receiver = self.enis.get((self.vpcs[other].vni, dst))
            if receiver is None:
                out["reason"] = Reason.NO_DEST
                return
            out["fwd"] = self._deliver("TO_PEER", *receiver)
            out["rev"] = self._deliver("TO_PEER", q, a)
            out["rev_vni"] = self.vpcs[other].vni
        elif target == "nat_gateway":
            out["fwd"] = ("SNAT", "pool", f"{q}/{via}")
            out["rev"] = self._dnat(q, a)
            out["nat_kind"], out["nat_pool"] = "POOL", f"{q}/{via}"
            out["rev_vni"] = self.spec.gateway_vni
        elif src.version == 4:
            eip = self.eip_of.get(f"{q}/{a.name}")
            if eip is None:
                out["reason"] = Reason.NO_PUBLIC_IP
                return
            out["fwd"] = ("SNAT", "eip", str(eip))
            out["rev"] = self._dnat(q, a)
            out["nat_kind"] = "EIP"
            out["rev_vni"] = self.spec.gateway_vni
        else:
            out["fwd"] = ("TO_IGW",)
            out["rev"] = self._deliver("DELIVER", q, a)
            out["rev_vni"] = self.spec.gateway_vni
        out["sg_out"] = self._sg_check(q, a, "egress", proto, dport, dst, receiver)
        if out["sg_out"] is None:
            out["reason"] = Reason.SG_DENY_OUT
            return
        cross = receiver is None or (receiver[0], receiver[1].subnet) != (q, a.subnet)
        if cross:
            ok, out["acl_out"] = self._acl_check(q, a, "egress", proto, dport, dst)
            if not ok:
                out["reason"] = Reason.ACL_DENY_OUT
                return
        if cross and receiver is not None:
            ok, out["acl_in"] = self._acl_check(*receiver, "ingress", proto, dport, src)
            if not ok:
                out["reason"] = Reason.ACL_DENY_IN
                return
        if receiver is not None:
            out["sg_in"] = self._sg_check(*receiver, "ingress", proto, dport, src, (q, a))
            if out["sg_in"] is None:
                out["reason"] = Reason.SG_DENY_IN
                return
        if peering is not None and receiver is not None:
            back = self._lpm(receiver[0], receiver[1], src)
            if back is None:
                out["rev_reason"] = Reason.NO_ROUTE
                return
            r2 = back[1]
            if r2 is not None and r2.target == "blackhole":
                out["rev_reason"] = Reason.BLACKHOLE
                return
            if r2 is None or r2.target != "peering" or r2.via != peering:
                out["rev_reason"] = Reason.NO_ROUTE
                return
        if cross:
            if receiver is not None:
                ok, _ = self._acl_check(*receiver, "egress", proto, rdport, src)
                if not ok:
                    out["rev_reason"] = Reason.ACL_DENY_OUT
                    return
            ok, _ = self._acl_check(q, a, "ingress", proto, rdport, dst)
            if not ok:
                out["rev_reason"] = Reason.ACL_DENY_IN

    def evaluate_batch(self, batch: Any) -> list[dict[str, object]]:
        """Every packet of a PacketBatch, one at a time."""
        rows = []
        for i in range(len(batch)):
            rows.append(
                self.evaluate(
                    int(batch.vni[i]),
                    halves_to_ip(int(batch.src_hi[i]), int(batch.src_lo[i])),
                    halves_to_ip(int(batch.dst_hi[i]), int(batch.dst_lo[i])),
                    int(batch.proto[i]),
                    int(batch.sport[i]),
                    int(batch.dport[i]),
                )
            )
        return rows
