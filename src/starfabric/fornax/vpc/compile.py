"""VpcSpec → CompiledPolicy: flat arrays for the policy kernels, and the action table.

Ids are *stable* across recompiles when the previous CompiledPolicy is passed: an ENI, VPC,
host or NAT gateway keeps its id by qualified name, and an action row keeps its handle as long
as its content exists, so sessions installed under unaffected scopes stay valid after a
policy change. ENI id = ENI scope id = the port id its VM is attached to; VPC scope ids start
at 1 (0 is the gateway scope, see codes.GATEWAY_SCOPE).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.packets import halves_to_ip, ip_to_halves
from starfabric.fornax.vpc.codes import (
    ACTION_DTYPE,
    DIR_EGRESS,
    DIR_INGRESS,
    ActionKind,
    Reason,
    RouteTarget,
)
from starfabric.fornax.vpc.spec import AclRule, Route, SgRule, Vpc, VpcSpec
from starfabric.fornax.vpc.validate import validate_vpc_spec

U64 = npt.NDArray[np.uint64]
I32 = npt.NDArray[np.int32]
U32 = npt.NDArray[np.uint32]
U8 = npt.NDArray[np.uint8]

_ALL = (1 << 64) - 1
_TARGETS = {
    "peering": RouteTarget.PEERING,
    "nat_gateway": RouteTarget.NAT_GATEWAY,
    "internet_gateway": RouteTarget.INTERNET_GATEWAY,
    "blackhole": RouteTarget.BLACKHOLE,
}


def net_halves(text: str | None) -> tuple[int, int, int, int]:
    """A prefix as (hi, lo, length over 128 bits, family 4/6); None → any address (family 0).

    IPv4 prefixes are stored IPv4-mapped (length + 96) like packet addresses.
    """
    if text is None:
        return (0, 0, 0, 0)
    net = ipaddress.ip_network(text)
    hi, lo = ip_to_halves(net.network_address)
    length = net.prefixlen + (96 if net.version == 4 else 0)
    return (hi, lo, length, net.version)


def local_route_name(vpc: str, cidr: str) -> str:
    """Name of the implicit local route of VPC `vpc` ('tenant/vpc') for `cidr`."""
    return f"{vpc}:local {cidr}"


def route_name(vpc: str, table: str, r: Route) -> str:
    return f"{vpc}/{table}: {r.prefix} -> {r.target}" + (f" {r.via}" if r.via else "")


def acl_rule_name(vpc: str, acl: str, i: int, r: AclRule) -> str:
    lo, hi = r.port_range()
    return (
        f"{vpc}/{acl}#{i}: {r.direction} {r.action} proto {r.protocol} "
        f"ports {lo}-{hi} {r.cidr or 'any'}"
    )


def sg_rule_name(vpc: str, sg: str, i: int, r: SgRule) -> str:
    lo, hi = r.port_range()
    peer = f"sg {r.sg}" if r.sg else str(r.cidr)
    return f"{vpc}/{sg}#{i}: {r.direction} proto {r.protocol} ports {lo}-{hi} {peer}"


def _stable_ids(names: list[str], previous: tuple[str, ...]) -> tuple[dict[str, int], list[str]]:
    table = list(previous)
    index = {n: i for i, n in enumerate(table)}
    for n in names:
        if n not in index:
            index[n] = len(table)
            table.append(n)
    return index, table


@dataclass(frozen=True)
class CompiledPolicy:
    """Everything the kernels need, as arrays; names map ids back for reports and diffs."""

    spec: VpcSpec
    gateway_vni: int
    # scope / object names by id (a removed object keeps its name; `*_valid` says if it exists)
    eni_names: tuple[str, ...]
    vpc_names: tuple[str, ...]  # index 0 is the gateway scope
    host_names: tuple[str, ...]
    pool_names: tuple[str, ...]
    peering_names: tuple[str, ...]
    subnet_names: tuple[str, ...]
    eni_valid: npt.NDArray[np.bool_]
    vpc_valid: npt.NDArray[np.bool_]
    # per ENI
    eni_vpc: U32
    eni_host: U32
    eni_subnet: I32
    eni_v4_lo: U64  # IPv4-mapped low half (hi is 0), 0 when none
    eni_v6_hi: U64
    eni_v6_lo: U64
    eni_has_v4: U8
    eni_has_v6: U8
    eni_has_eip: U8
    eni_eip_lo: U64
    eni_sg_ptr: I32  # CSR over eni_sg_idx
    eni_sg_idx: I32
    eni_act_deliver: U32
    eni_act_peer: U32
    eni_act_dnat: U32
    eni_act_snat_eip: U32
    # per VPC
    vpc_vni: U32
    # per subnet
    subnet_vpc: U32
    subnet_table: I32
    subnet_acl: I32
    # lookups: (vni, address) → ENI and EIP → ENI, sorted for binary search
    key_vni: U64
    key_hi: U64
    key_lo: U64
    key_eni: U32
    vni_key: U64  # sorted VNIs → VPC id
    vni_vpc: U32
    eip_key: U64
    eip_eni: U32
    # routes: per (table*2 + is_v6) a CSR of segments of one prefix length, longest first
    rt_tab_ptr: I32
    seg_len: I32
    seg_start: I32
    seg_end: I32
    rt_hi: U64
    rt_lo: U64
    rt_target: U8
    rt_via: I32
    rt_id: I32  # index into route_names
    route_names: tuple[str, ...]
    n_tables: int
    # peering endpoints (VPC ids)
    peer_a: U32
    peer_b: U32
    # NAT pools
    pool_act_snat: U32
    pool_ips: tuple[tuple[str, ...], ...]
    # ACL rules: per (acl*2 + direction) a CSR, in order
    acl_ptr: I32
    acl_allow: U8
    acl_proto: U8
    acl_lo: U32
    acl_hi: U32
    acl_net_hi: U64
    acl_net_lo: U64
    acl_net_len: I32
    acl_net_fam: U8
    acl_rule_names: tuple[str, ...]
    # SG rules: per SG a CSR, in order
    sg_ptr: I32
    sgr_dir: U8
    sgr_proto: U8
    sgr_lo: U32
    sgr_hi: U32
    sgr_net_hi: U64
    sgr_net_lo: U64
    sgr_net_len: I32
    sgr_net_fam: U8
    sgr_ref: I32
    sg_rule_names: tuple[str, ...]
    sg_names: tuple[str, ...]
    # actions
    actions: npt.NDArray[np.void]
    action_index: dict[tuple[Any, ...], int] = field(repr=False)
    act_drop: U32 = field(repr=False)  # per Reason
    act_igw: int = 0

    @property
    def n_enis(self) -> int:
        return int(self.eni_valid.sum())

    def eni_id(self, qualified: str) -> int:
        """Id of ENI 'tenant/vpc/eni' (KeyError if it was never compiled)."""
        return self.eni_names.index(qualified)

    def vpc_id(self, qualified: str) -> int:
        return self.vpc_names.index(qualified)

    def describe_action(self, handle: int) -> tuple[Any, ...]:
        """A handle's row as names: (kind, eni, vni, nat address, pool, reason)."""
        row = self.actions[handle]
        kind = ActionKind(int(row["kind"]))
        if kind == ActionKind.DROP:
            return (kind.name, Reason(int(row["reason"])).name)
        if kind == ActionKind.TO_IGW:
            return (kind.name,)
        if kind == ActionKind.SNAT:
            pool = int(row["pool"])
            if pool >= 0:
                return (kind.name, "pool", self.pool_names[pool])
            return (kind.name, "eip", str(_addr(int(row["nat_hi"]), int(row["nat_lo"]))))
        eni = self.eni_names[int(row["port"])]
        out: tuple[Any, ...] = (kind.name, eni, int(row["vni"]), self.host_names[int(row["host"])])
        if kind == ActionKind.DNAT:
            out += (str(_addr(int(row["nat_hi"]), int(row["nat_lo"]))),)
        return out


def _addr(hi: int, lo: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return halves_to_ip(hi, lo)


class _Actions:
    """Content-keyed, append-only action rows (stable handles across recompiles)."""

    def __init__(self, previous: CompiledPolicy | None) -> None:
        self.rows: list[tuple[int, int, int, int, int, int, int, int]] = []
        self.index: dict[tuple[Any, ...], int] = {}
        if previous is not None:
            for r in previous.actions.tolist():
                self.index[tuple(r)] = len(self.rows)
                self.rows.append(tuple(r))

    def get(
        self,
        kind: ActionKind,
        *,
        reason: int = 0,
        host: int = 0,
        port: int = 0,
        vni: int = 0,
        nat: tuple[int, int] = (0, 0),
        pool: int = -1,
    ) -> int:
        row = (int(kind), reason, host, port, vni, nat[0], nat[1], pool)
        h = self.index.get(row)
        if h is None:
            h = len(self.rows)
            self.index[row] = h
            self.rows.append(row)
        return h

    def array(self) -> npt.NDArray[np.void]:
        return np.array(self.rows, dtype=ACTION_DTYPE)


def _u64(x: list[int]) -> U64:
    return np.array(x, dtype=np.uint64)


def compile_policy(spec: VpcSpec, previous: CompiledPolicy | None = None) -> CompiledPolicy:
    """Validate `spec` and flatten it; pass `previous` to keep ids and handles stable."""
    validate_vpc_spec(spec)
    vpcs: list[tuple[str, Vpc]] = [(f"{t.name}/{v.name}", v) for t in spec.tenants for v in t.vpcs]
    vpc_ix, vpc_names = _stable_ids(
        ["<gateway>"] + [q for q, _ in vpcs], previous.vpc_names if previous else ()
    )
    eni_list = [(q, v, e) for q, v in vpcs for e in v.enis]
    eni_ix, eni_names = _stable_ids(
        [f"{q}/{e.name}" for q, _, e in eni_list], previous.eni_names if previous else ()
    )
    host_ix, host_names = _stable_ids(
        [h.name for h in spec.hosts], previous.host_names if previous else ()
    )
    pool_ix, pool_names = _stable_ids(
        [f"{q}/{n.name}" for q, v in vpcs for n in v.nat_gateways],
        previous.pool_names if previous else (),
    )
    peer_ix, peering_names = _stable_ids(
        [p.name for p in spec.peerings], previous.peering_names if previous else ()
    )
    acts = _Actions(previous)
    n_eni, n_vpc = len(eni_names), len(vpc_names)

    vpc_valid = np.zeros(n_vpc, dtype=np.bool_)
    vpc_valid[0] = True
    vpc_vni = np.zeros(n_vpc, dtype=np.uint32)
    vpc_vni[0] = spec.gateway_vni
    for q, v in vpcs:
        vpc_valid[vpc_ix[q]] = True
        vpc_vni[vpc_ix[q]] = v.vni

    # subnets, tables, ACLs, SGs: global indices in spec order (not scopes: no stability needed)
    subnet_names: list[str] = []
    subnet_vpc: list[int] = []
    subnet_table: list[int] = []
    subnet_acl: list[int] = []
    subnet_ix: dict[tuple[str, str], int] = {}
    table_routes: list[list[tuple[str, int, str, int]]] = []  # (prefix, target, name, via)
    acl_rules: list[list[list[tuple[Any, ...]]]] = []  # per acl, per direction
    acl_rule_names: list[str] = []
    sg_rules: list[list[tuple[Any, ...]]] = []
    sg_rule_names: list[str] = []
    sg_names: list[str] = []
    sg_ix: dict[tuple[str, str], int] = {}
    for q, v in vpcs:
        for g in v.security_groups:
            sg_ix[(q, g.name)] = len(sg_names)
            sg_names.append(f"{q}/{g.name}")
    for q, v in vpcs:
        local = [(c, int(RouteTarget.LOCAL), local_route_name(q, c), -1) for c in v.cidrs]
        tables: dict[str | None, int] = {}
        for t in v.route_tables:
            tables[t.name] = len(table_routes)
            routes = list(local)
            for r in t.routes:
                if r.target == "peering":
                    via = peer_ix[str(r.via)]
                elif r.target == "nat_gateway":
                    via = pool_ix[f"{q}/{r.via}"]
                else:
                    via = -1
                routes.append((r.prefix, int(_TARGETS[r.target]), route_name(q, t.name, r), via))
            table_routes.append(routes)
        tables[None] = (
            tables[v.main_route_table] if v.main_route_table is not None else len(table_routes)
        )
        if v.main_route_table is None:
            table_routes.append(local)
        acls: dict[str, int] = {}
        for a in v.network_acls:
            acls[a.name] = len(acl_rules)
            per_dir: list[list[tuple[Any, ...]]] = [[], []]
            for i, ar in enumerate(a.rules):
                d = DIR_INGRESS if ar.direction == "ingress" else DIR_EGRESS
                lo, hi = ar.port_range()
                allow = int(ar.action == "allow")
                row = (allow, ar.protocol, lo, hi, *net_halves(ar.cidr), len(acl_rule_names))
                per_dir[d].append(row)
                acl_rule_names.append(acl_rule_name(q, a.name, i, ar))
            acl_rules.append(per_dir)
        for g in v.security_groups:
            rules = []
            for i, sr in enumerate(g.rules):
                lo, hi = sr.port_range()
                d = DIR_INGRESS if sr.direction == "ingress" else DIR_EGRESS
                ref = sg_ix[(q, sr.sg)] if sr.sg is not None else -1
                rules.append((d, sr.protocol, lo, hi, *net_halves(sr.cidr), ref))
                sg_rule_names.append(sg_rule_name(q, g.name, i, sr))
            sg_rules.append(rules)
        for s in v.subnets:
            subnet_ix[(q, s.name)] = len(subnet_names)
            subnet_names.append(f"{q}/{s.name}")
            subnet_vpc.append(vpc_ix[q])
            subnet_table.append(tables[s.route_table])
            subnet_acl.append(acls[s.acl] if s.acl is not None else -1)

    # ENIs
    eni_valid = np.zeros(n_eni, dtype=np.bool_)
    eni_vpc = np.zeros(n_eni, dtype=np.uint32)
    eni_host = np.zeros(n_eni, dtype=np.uint32)
    eni_subnet = np.full(n_eni, -1, dtype=np.int32)
    eni_v4_lo = np.zeros(n_eni, dtype=np.uint64)
    eni_v6_hi = np.zeros(n_eni, dtype=np.uint64)
    eni_v6_lo = np.zeros(n_eni, dtype=np.uint64)
    eni_has_v4 = np.zeros(n_eni, dtype=np.uint8)
    eni_has_v6 = np.zeros(n_eni, dtype=np.uint8)
    eni_has_eip = np.zeros(n_eni, dtype=np.uint8)
    eni_eip_lo = np.zeros(n_eni, dtype=np.uint64)
    eni_sgs: list[list[int]] = [[] for _ in range(n_eni)]
    keys: list[tuple[int, int, int, int]] = []
    eips: dict[str, int] = {}
    for q, v in vpcs:
        for x in v.eips:
            eips[f"{q}/{x.eni}"] = ip_to_halves(x.ip)[1]
    for q, v, e in eni_list:
        i = eni_ix[f"{q}/{e.name}"]
        eni_valid[i] = True
        eni_vpc[i] = vpc_ix[q]
        eni_host[i] = host_ix[e.host]
        eni_subnet[i] = subnet_ix[(q, e.subnet)]
        if e.ipv4 is not None:
            hi, lo = ip_to_halves(e.ipv4)
            eni_has_v4[i], eni_v4_lo[i] = 1, lo
            keys.append((v.vni, hi, lo, i))
        if e.ipv6 is not None:
            hi, lo = ip_to_halves(e.ipv6)
            eni_has_v6[i], eni_v6_hi[i], eni_v6_lo[i] = 1, hi, lo
            keys.append((v.vni, hi, lo, i))
        if f"{q}/{e.name}" in eips:
            eni_has_eip[i], eni_eip_lo[i] = 1, eips[f"{q}/{e.name}"]
        eni_sgs[i] = [sg_ix[(q, g)] for g in e.security_groups]
    keys.sort()
    eni_sg_ptr = np.zeros(n_eni + 1, dtype=np.int32)
    eni_sg_ptr[1:] = np.cumsum([len(s) for s in eni_sgs])
    eni_sg_idx = np.array([g for s in eni_sgs for g in s], dtype=np.int32)

    # actions (content keyed)
    act_drop = np.array([acts.get(ActionKind.DROP, reason=int(r)) for r in Reason], dtype=np.uint32)
    act_igw = acts.get(ActionKind.TO_IGW)
    none = 0xFFFF_FFFF
    eni_act = {k: np.full(n_eni, none, dtype=np.uint32) for k in ("d", "p", "n", "s")}
    for k in np.flatnonzero(eni_valid).tolist():
        vni, host = int(vpc_vni[eni_vpc[k]]), int(eni_host[k])
        eni_act["d"][k] = acts.get(ActionKind.DELIVER, host=host, port=k, vni=vni)
        eni_act["p"][k] = acts.get(ActionKind.TO_PEER, host=host, port=k, vni=vni)
        if eni_has_v4[k]:
            eni_act["n"][k] = acts.get(
                ActionKind.DNAT, host=host, port=k, vni=vni, nat=(0, int(eni_v4_lo[k]))
            )
        if eni_has_eip[k]:
            eni_act["s"][k] = acts.get(ActionKind.SNAT, nat=(0, int(eni_eip_lo[k])))
    pool_act = np.full(len(pool_names), none, dtype=np.uint32)
    pool_ips: list[tuple[str, ...]] = [() for _ in pool_names]
    for q, v in vpcs:
        for n in v.nat_gateways:
            p = pool_ix[f"{q}/{n.name}"]
            pool_act[p] = acts.get(ActionKind.SNAT, pool=p)
            pool_ips[p] = n.public_ips

    rt = _route_tables(table_routes)
    acl = _acl_tables(acl_rules, acl_rule_names)
    sg = _sg_tables(sg_rules)

    peer_a = np.zeros(len(peering_names), dtype=np.uint32)
    peer_b = np.zeros(len(peering_names), dtype=np.uint32)
    for pr in spec.peerings:
        peer_a[peer_ix[pr.name]] = vpc_ix[pr.a]
        peer_b[peer_ix[pr.name]] = vpc_ix[pr.b]

    vni_pairs = sorted((int(vpc_vni[vpc_ix[q]]), vpc_ix[q]) for q, _ in vpcs)
    eip_pairs = sorted((int(eni_eip_lo[i]), int(i)) for i in np.flatnonzero(eni_has_eip))
    return CompiledPolicy(
        spec=spec,
        gateway_vni=spec.gateway_vni,
        eni_names=tuple(eni_names),
        vpc_names=tuple(vpc_names),
        host_names=tuple(host_names),
        pool_names=tuple(pool_names),
        peering_names=tuple(peering_names),
        subnet_names=tuple(subnet_names),
        eni_valid=eni_valid,
        vpc_valid=vpc_valid,
        eni_vpc=eni_vpc,
        eni_host=eni_host,
        eni_subnet=eni_subnet,
        eni_v4_lo=eni_v4_lo,
        eni_v6_hi=eni_v6_hi,
        eni_v6_lo=eni_v6_lo,
        eni_has_v4=eni_has_v4,
        eni_has_v6=eni_has_v6,
        eni_has_eip=eni_has_eip,
        eni_eip_lo=eni_eip_lo,
        eni_sg_ptr=eni_sg_ptr,
        eni_sg_idx=eni_sg_idx,
        eni_act_deliver=eni_act["d"],
        eni_act_peer=eni_act["p"],
        eni_act_dnat=eni_act["n"],
        eni_act_snat_eip=eni_act["s"],
        vpc_vni=vpc_vni,
        subnet_vpc=np.array(subnet_vpc, dtype=np.uint32),
        subnet_table=np.array(subnet_table, dtype=np.int32),
        subnet_acl=np.array(subnet_acl, dtype=np.int32),
        key_vni=_u64([k[0] for k in keys]),
        key_hi=_u64([k[1] for k in keys]),
        key_lo=_u64([k[2] for k in keys]),
        key_eni=np.array([k[3] for k in keys], dtype=np.uint32),
        vni_key=_u64([p[0] for p in vni_pairs]),
        vni_vpc=np.array([p[1] for p in vni_pairs], dtype=np.uint32),
        eip_key=_u64([p[0] for p in eip_pairs]),
        eip_eni=np.array([p[1] for p in eip_pairs], dtype=np.uint32),
        **rt,
        n_tables=len(table_routes),
        peer_a=peer_a,
        peer_b=peer_b,
        pool_act_snat=pool_act,
        pool_ips=tuple(pool_ips),
        **acl,
        **sg,
        sg_rule_names=tuple(sg_rule_names),
        sg_names=tuple(sg_names),
        actions=acts.array(),
        action_index=acts.index,
        act_drop=act_drop,
        act_igw=act_igw,
    )


def _route_tables(table_routes: list[list[tuple[str, int, str, int]]]) -> dict[str, Any]:
    """Route tables -> LPM arrays: per (table, family) segments of one prefix length, longest
    first, rows sorted by prefix (CompiledPolicy rt_*, seg_*, route_names)."""
    route_names: list[str] = []
    seg_len: list[int] = []
    seg_start: list[int] = []
    seg_end: list[int] = []
    rt_rows: list[tuple[int, int, int, int, int]] = []
    rt_tab_ptr = [0]
    for routes in table_routes:
        for fam in (4, 6):
            by_len: dict[int, list[tuple[int, int, int, int, int]]] = {}
            for prefix, target, name, via in routes:
                hi, lo, length, f = net_halves(prefix)
                if f != fam:
                    continue
                by_len.setdefault(length, []).append((hi, lo, target, via, len(route_names)))
                route_names.append(name)
            for length in sorted(by_len, reverse=True):
                rows = sorted(by_len[length])
                seg_len.append(length)
                seg_start.append(len(rt_rows))
                rt_rows.extend(rows)
                seg_end.append(len(rt_rows))
            rt_tab_ptr.append(len(seg_len))
    return {
        "rt_tab_ptr": np.array(rt_tab_ptr, dtype=np.int32),
        "seg_len": np.array(seg_len, dtype=np.int32),
        "seg_start": np.array(seg_start, dtype=np.int32),
        "seg_end": np.array(seg_end, dtype=np.int32),
        "rt_hi": _u64([r[0] for r in rt_rows]),
        "rt_lo": _u64([r[1] for r in rt_rows]),
        "rt_target": np.array([r[2] for r in rt_rows], dtype=np.uint8),
        "rt_via": np.array([r[3] for r in rt_rows], dtype=np.int32),
        "rt_id": np.array([r[4] for r in rt_rows], dtype=np.int32),
        "route_names": tuple(route_names),
    }


def _acl_tables(acl_rules: list[list[list[tuple[Any, ...]]]], names: list[str]) -> dict[str, Any]:
    """Network ACLs -> rule arrays in (acl, direction) segments, spec order inside each
    (CompiledPolicy acl_*; rule names in that order)."""
    ptr = [0]
    rows: list[tuple[Any, ...]] = []
    for per_dir in acl_rules:
        for d in (DIR_INGRESS, DIR_EGRESS):
            rows.extend(per_dir[d])
            ptr.append(len(rows))
    cols = list(zip(*rows, strict=True)) if rows else [()] * 9
    a_allow, a_proto, a_lo, a_hi, a_nhi, a_nlo, a_nlen, a_fam, a_id = cols
    return {
        "acl_ptr": np.array(ptr, dtype=np.int32),
        "acl_allow": np.array(a_allow, dtype=np.uint8),
        "acl_proto": np.array(a_proto, dtype=np.uint8),
        "acl_lo": np.array(a_lo, dtype=np.uint32),
        "acl_hi": np.array(a_hi, dtype=np.uint32),
        "acl_net_hi": _u64(list(a_nhi)),
        "acl_net_lo": _u64(list(a_nlo)),
        "acl_net_len": np.array(a_nlen, dtype=np.int32),
        "acl_net_fam": np.array(a_fam, dtype=np.uint8),
        "acl_rule_names": tuple(names[int(i)] for i in a_id),
    }


def _sg_tables(sg_rules: list[list[tuple[Any, ...]]]) -> dict[str, Any]:
    """Security groups -> rule arrays, one segment per group (CompiledPolicy sg_*, sgr_*)."""
    sg_ptr = np.zeros(len(sg_rules) + 1, dtype=np.int32)
    sg_ptr[1:] = np.cumsum([len(r) for r in sg_rules])
    flat = [r for rules in sg_rules for r in rules]
    s_cols = list(zip(*flat, strict=True)) if flat else [()] * 9
    return {
        "sg_ptr": sg_ptr,
        "sgr_dir": np.array(s_cols[0], dtype=np.uint8),
        "sgr_proto": np.array(s_cols[1], dtype=np.uint8),
        "sgr_lo": np.array(s_cols[2], dtype=np.uint32),
        "sgr_hi": np.array(s_cols[3], dtype=np.uint32),
        "sgr_net_hi": _u64(list(s_cols[4])),
        "sgr_net_lo": _u64(list(s_cols[5])),
        "sgr_net_len": np.array(s_cols[6], dtype=np.int32),
        "sgr_net_fam": np.array(s_cols[7], dtype=np.uint8),
        "sgr_ref": np.array(s_cols[8], dtype=np.int32),
    }
