"""Which policy scopes a change touches: "any change bumps the versions of exactly the
affected scopes" — one O(1) engine operation per scope, never a table walk.

A session is charged to the ENI that opened it and to that ENI's VPC (evaluate.py). So:
- an ENI scope is affected when anything its own sessions were decided on changed: its
  addresses, host, subnet, network ACL, route table (and what the routes lead to: peerings,
  NAT pools), its security groups (with the members of groups they reference), its EIP;
- a VPC scope is affected when anything about an ENI that *other* ENIs' sessions may reach
  changed (addresses, host, ACL, ingress rules, route back, group memberships), for the ENI's
  own VPC and every VPC peered with it, or when the VPC itself appears, goes or changes VNI;
- the gateway scope (codes.GATEWAY_SCOPE) when the EIP map or the set of VNIs changes.
Scope ids are stable only when `new` was compiled with `previous=old`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.errors import InvariantError
from starfabric.fornax.vpc.codes import GATEWAY_SCOPE
from starfabric.fornax.vpc.compile import CompiledPolicy, compile_policy
from starfabric.fornax.vpc.spec import Eni, Vpc, VpcSpec


@dataclass(frozen=True)
class AffectedScopes:
    """Sorted ENI and VPC scope ids whose versions must be bumped."""

    eni: npt.NDArray[np.uint32]
    vpc: npt.NDArray[np.uint32]

    def __len__(self) -> int:
        return len(self.eni) + len(self.vpc)


class _View:
    """The parts of a spec the signatures need, indexed by qualified names; shared parts
    (a subnet with its ACL and routes, a group's rules) are rendered once and reused."""

    def __init__(self, spec: VpcSpec) -> None:
        self.spec = spec
        self.vpcs: dict[str, Vpc] = {}
        self.enis: dict[str, tuple[str, Vpc, Eni]] = {}
        self.members: dict[tuple[str, str], tuple[str, ...]] = {}
        self.eips: dict[str, str] = {}
        self.eip_of: dict[str, str] = {}
        self.peers: dict[str, set[str]] = {}
        self._subnets: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._group_parts: dict[tuple[str, str, str | None, str], tuple[Any, ...]] = {}
        for t in spec.tenants:
            for v in t.vpcs:
                q = f"{t.name}/{v.name}"
                self.vpcs[q] = v
                self.peers[q] = set()
                for e in v.enis:
                    self.enis[f"{q}/{e.name}"] = (q, v, e)
                for g in v.security_groups:
                    self.members[(q, g.name)] = tuple(
                        e.name for e in v.enis if g.name in e.security_groups
                    )
                for x in v.eips:
                    self.eips[x.ip] = f"{q}/{x.eni}"
                    self.eip_of[f"{q}/{x.eni}"] = x.ip
        self.peerings = {p.name: p for p in spec.peerings}
        for p in spec.peerings:
            self.peers[p.a].add(p.b)
            self.peers[p.b].add(p.a)

    def _dump(self, obj: Any) -> Any:
        return None if obj is None else obj.model_dump_json()

    def _subnet_parts(self, q: str, v: Vpc, e: Eni) -> tuple[Any, ...]:
        key = (q, e.subnet)
        hit = self._subnets.get(key)
        if hit is not None:
            return hit
        sub = next(s for s in v.subnets if s.name == e.subnet)
        acl = next((a for a in v.network_acls if a.name == sub.acl), None)
        t_name = sub.route_table or v.main_route_table
        table = next((t for t in v.route_tables if t.name == t_name), None)
        leads: list[Any] = []
        for r in table.routes if table is not None else ():
            if r.target == "peering":
                p = self.peerings[str(r.via)]
                other = p.b if p.a == q else p.a
                leads.append((p.name, p.a, p.b, self.vpcs[other].vni))
            elif r.target == "nat_gateway":
                leads.append(self._dump(next(n for n in v.nat_gateways if n.name == r.via)))
        out = (v.vni, v.cidrs, self._dump(sub), self._dump(acl), self._dump(table), leads)
        self._subnets[key] = out
        return out

    def _group(self, q: str, v: Vpc, g_name: str, rules_dir: str | None, refs_dir: str) -> Any:
        key = (q, g_name, rules_dir, refs_dir)
        hit = self._group_parts.get(key)
        if hit is None:
            g = next(g for g in v.security_groups if g.name == g_name)
            rules = [r for r in g.rules if rules_dir is None or r.direction == rules_dir]
            refs = sorted({r.sg for r in rules if r.sg is not None and r.direction == refs_dir})
            hit = (
                g_name,
                [r.model_dump_json() for r in rules],
                [self.members[(q, x)] for x in refs],
            )
            self._group_parts[key] = hit
        return hit

    def _groups(
        self, q: str, v: Vpc, e: Eni, rules_dir: str | None, refs_dir: str
    ) -> tuple[Any, ...]:
        """Rules of `e`'s groups (one direction or all) and the members of the groups that
        rules of direction `refs_dir` reference (an SG reference matches only ENI peers)."""
        return tuple(self._group(q, v, g, rules_dir, refs_dir) for g in e.security_groups)

    def owner(self, name: str) -> tuple[Any, ...]:
        """What sessions opened by ENI `name` were decided on."""
        q, v, e = self.enis[name]
        return (
            self.spec.gateway_vni,
            self._dump(e),
            self._subnet_parts(q, v, e),
            self._groups(q, v, e, None, "egress"),
            self.eip_of.get(name),
        )

    def target(self, name: str) -> tuple[Any, ...]:
        """What sessions opened by *other* ENIs toward ENI `name` were decided on."""
        q, v, e = self.enis[name]
        return (
            self._dump(e),
            self._subnet_parts(q, v, e),
            self._groups(q, v, e, "ingress", "ingress"),
        )


def affected_scopes(old: CompiledPolicy, new: CompiledPolicy) -> AffectedScopes:
    """Scopes whose sessions may be decided differently under `new` than under `old`."""
    if new.eni_names[: len(old.eni_names)] != old.eni_names or (
        new.vpc_names[: len(old.vpc_names)] != old.vpc_names
    ):
        raise InvariantError(
            "affected_scopes: the new policy was not compiled from the old one",
            fix="compile it with compile_policy(spec, previous=old)",
        )
    a, b = _View(old.spec), _View(new.spec)
    eni_ix = {n: i for i, n in enumerate(new.eni_names)}
    vpc_ix = {n: i for i, n in enumerate(new.vpc_names)}
    enis: set[int] = set()
    vpcs: set[int] = set()
    everything = a.spec.gateway_vni != b.spec.gateway_vni
    for name in set(a.enis) | set(b.enis):
        in_a, in_b = name in a.enis, name in b.enis
        if everything or not (in_a and in_b) or a.owner(name) != b.owner(name):
            enis.add(eni_ix[name])
        if everything or not (in_a and in_b) or a.target(name) != b.target(name):
            q = (a.enis.get(name) or b.enis[name])[0]
            reach = {q} | a.peers.get(q, set()) | b.peers.get(q, set())
            vpcs |= {vpc_ix[r] for r in reach}
    for q in set(a.vpcs) | set(b.vpcs):
        va, vb = a.vpcs.get(q), b.vpcs.get(q)
        if everything or va is None or vb is None or (va.vni, va.cidrs) != (vb.vni, vb.cidrs):
            vpcs |= {vpc_ix[q], GATEWAY_SCOPE}
    if everything or a.eips != b.eips:
        vpcs.add(GATEWAY_SCOPE)
    return AffectedScopes(
        eni=np.array(sorted(enis), dtype=np.uint32), vpc=np.array(sorted(vpcs), dtype=np.uint32)
    )


def recompile(old: CompiledPolicy, spec: VpcSpec) -> tuple[CompiledPolicy, AffectedScopes]:
    """Compile `spec` keeping `old`'s ids and handles, and say which scopes to bump."""
    new = compile_policy(spec, previous=old)
    return new, affected_scopes(old, new)
