"""Cross-object checks of a VpcSpec: every reference resolves, every address fits.

Each failure is one ConfigError naming the object and the field, e.g.
"vpc 'acme/prod' subnet 'web': cidr 10.1.0.0/24 is not inside the VPC's cidrs 10.0.0.0/16".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starfabric.errors import ConfigError
from starfabric.fornax.vpc.spec import Vpc, VpcSpec

Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def _fail(where: str, what: str, fix: str, source: str) -> ConfigError:
    prefix = f"{source}: " if source else ""
    return ConfigError(f"{prefix}{where}: {what}", fix=fix)


def _unique(names: Iterable[str], where: str, kind: str, source: str) -> set[str]:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise _fail(where, f"{kind} '{n}' is defined twice", "give each a unique name", source)
        seen.add(n)
    return seen


def _inside(net: Net, cidrs: list[Net]) -> bool:
    return any(net.version == c.version and net.subnet_of(c) for c in cidrs)  # type: ignore[arg-type]


def _check_vpc(vpc: Vpc, where: str, hosts: set[str], peer_names: set[str], source: str) -> None:
    cidrs = [ipaddress.ip_network(c) for c in vpc.cidrs]
    for i, a in enumerate(cidrs):
        for b in cidrs[i + 1 :]:
            if a.version == b.version and a.overlaps(b):
                raise _fail(where, f"cidrs {a} and {b} overlap", "merge or split them", source)
    shown = ", ".join(vpc.cidrs)
    tables = _unique((t.name for t in vpc.route_tables), where, "route table", source)
    acls = _unique((a.name for a in vpc.network_acls), where, "network acl", source)
    sgs = _unique((g.name for g in vpc.security_groups), where, "security group", source)
    nats = _unique((n.name for n in vpc.nat_gateways), where, "nat gateway", source)
    if vpc.main_route_table is not None and vpc.main_route_table not in tables:
        raise _fail(
            where,
            f"main_route_table '{vpc.main_route_table}' is not defined",
            f"use one of {sorted(tables)} or add it",
            source,
        )
    subnets: dict[str, tuple[Net | None, Net | None]] = {}
    _unique((s.name for s in vpc.subnets), where, "subnet", source)
    for s in vpc.subnets:
        sw = f"{where} subnet '{s.name}'"
        if s.cidr is None and s.ipv6_cidr is None:
            raise _fail(sw, "needs cidr or ipv6_cidr", "give an address range", source)
        nets: list[Net | None] = []
        for field, text, version in (("cidr", s.cidr, 4), ("ipv6_cidr", s.ipv6_cidr, 6)):
            if text is None:
                nets.append(None)
                continue
            net: Net = ipaddress.ip_network(text)
            if net.version != version:
                raise _fail(sw, f"{field} {net} is not IPv{version}", "swap the fields", source)
            if not _inside(net, cidrs):
                raise _fail(
                    sw,
                    f"{field} {net} is not inside the VPC's cidrs {shown}",
                    "pick a range inside the VPC or add a VPC cidr",
                    source,
                )
            for other, (o4, o6) in subnets.items():
                o = o4 if version == 4 else o6
                if o is not None and o.overlaps(net):
                    raise _fail(
                        sw, f"{field} {net} overlaps subnet '{other}' ({o})", "split them", source
                    )
            nets.append(net)
        subnets[s.name] = (nets[0], nets[1])
        if s.route_table is not None and s.route_table not in tables:
            raise _fail(
                sw,
                f"route_table '{s.route_table}' is not defined",
                "add it or fix the name",
                source,
            )
        if s.acl is not None and s.acl not in acls:
            raise _fail(sw, f"acl '{s.acl}' is not defined", "add it or fix the name", source)
    for t in vpc.route_tables:
        tw = f"{where} route table '{t.name}'"
        _unique((r.prefix for r in t.routes), tw, "route prefix", source)
        for r in t.routes:
            net = ipaddress.ip_network(r.prefix)
            if _inside(net, cidrs):
                raise _fail(
                    tw,
                    f"route {r.prefix} lies inside the VPC's cidrs {shown} (local routes are implicit)",
                    "remove it or use a prefix outside the VPC",
                    source,
                )
            if r.target == "peering" and r.via not in peer_names:
                raise _fail(
                    tw,
                    f"route {r.prefix}: peering '{r.via}' does not involve this VPC",
                    f"use one of {sorted(peer_names)} or add the peering",
                    source,
                )
            if r.target == "nat_gateway":
                if r.via not in nats:
                    raise _fail(
                        tw,
                        f"route {r.prefix}: nat gateway '{r.via}' is not defined",
                        f"use one of {sorted(nats)} or add it",
                        source,
                    )
                if net.version != 4:
                    raise _fail(
                        tw,
                        f"route {r.prefix}: a nat gateway translates IPv4 only",
                        "route IPv6 to the internet_gateway",
                        source,
                    )
    for g in vpc.security_groups:
        for i, rule in enumerate(g.rules):
            if rule.sg is not None and rule.sg not in sgs:
                raise _fail(
                    f"{where} security group '{g.name}' rule {i}",
                    f"sg '{rule.sg}' is not defined in this VPC",
                    f"use one of {sorted(sgs)}",
                    source,
                )
    enis = _unique((e.name for e in vpc.enis), where, "eni", source)
    addrs: dict[str, str] = {}
    for e in vpc.enis:
        ew = f"{where} eni '{e.name}'"
        if e.subnet not in subnets:
            raise _fail(
                ew, f"subnet '{e.subnet}' is not defined", f"use one of {sorted(subnets)}", source
            )
        if e.host not in hosts:
            raise _fail(ew, f"host '{e.host}' is not defined", "add it under 'hosts'", source)
        if e.ipv4 is None and e.ipv6 is None:
            raise _fail(ew, "needs ipv4 or ipv6", "give an address", source)
        for field, text, within in (
            ("ipv4", e.ipv4, subnets[e.subnet][0]),
            ("ipv6", e.ipv6, subnets[e.subnet][1]),
        ):
            if text is None:
                continue
            ip = ipaddress.ip_address(text)
            if ip.version != (4 if field == "ipv4" else 6):
                raise _fail(ew, f"{field} {ip} has the wrong family", "swap the fields", source)
            if within is None or ip not in within:
                raise _fail(
                    ew,
                    f"{field} {ip} is not inside subnet '{e.subnet}' ({within})",
                    "pick an address inside the subnet",
                    source,
                )
            if text in addrs:
                raise _fail(
                    ew,
                    f"{field} {ip} is already used by eni '{addrs[text]}'",
                    "use another",
                    source,
                )
            addrs[text] = e.name
        _unique(e.security_groups, ew, "security group reference", source)
        for g_name in e.security_groups:
            if g_name not in sgs:
                raise _fail(
                    ew,
                    f"security group '{g_name}' is not defined",
                    f"use one of {sorted(sgs)}",
                    source,
                )
    with_eip: set[str] = set()
    for x in vpc.eips:
        xw = f"{where} eip {x.ip}"
        if x.eni not in enis:
            raise _fail(xw, f"eni '{x.eni}' is not defined", f"use one of {sorted(enis)}", source)
        if next(e for e in vpc.enis if e.name == x.eni).ipv4 is None:
            raise _fail(xw, f"eni '{x.eni}' has no ipv4", "give the eni an ipv4", source)
        if x.eni in with_eip:
            raise _fail(xw, f"eni '{x.eni}' already has an eip", "one eip per eni", source)
        with_eip.add(x.eni)


def validate_vpc_spec(spec: VpcSpec, source: str = "") -> None:
    """Raise a one-line ConfigError for the first cross-object problem in `spec`."""
    hosts = _unique((h.name for h in spec.hosts), "hosts", "host", source)
    _unique((t.name for t in spec.tenants), "tenants", "tenant", source)
    vpcs: dict[str, Vpc] = {}
    vnis: dict[int, str] = {}
    for t in spec.tenants:
        _unique((v.name for v in t.vpcs), f"tenant '{t.name}'", "vpc", source)
        for v in t.vpcs:
            q = f"{t.name}/{v.name}"
            if v.vni == spec.gateway_vni:
                raise _fail(
                    f"vpc '{q}'",
                    f"vni {v.vni} is the gateway_vni",
                    "give the VPC another vni",
                    source,
                )
            if v.vni in vnis:
                raise _fail(
                    f"vpc '{q}'",
                    f"vni {v.vni} is already used by vpc '{vnis[v.vni]}'",
                    "give each VPC its own vni",
                    source,
                )
            vnis[v.vni] = q
            vpcs[q] = v
    _unique((p.name for p in spec.peerings), "peerings", "peering", source)
    involved: dict[str, set[str]] = {q: set() for q in vpcs}
    pairs: set[frozenset[str]] = set()
    for p in spec.peerings:
        pw = f"peering '{p.name}'"
        for field, q in (("a", p.a), ("b", p.b)):
            if q not in vpcs:
                raise _fail(pw, f"{field} '{q}' is not a VPC", "write it as 'tenant/vpc'", source)
        if p.a == p.b:
            raise _fail(pw, f"a and b are both '{p.a}'", "peer two different VPCs", source)
        for ca in vpcs[p.a].cidrs:
            for cb in vpcs[p.b].cidrs:
                na, nb = ipaddress.ip_network(ca), ipaddress.ip_network(cb)
                if na.version == nb.version and na.overlaps(nb):
                    raise _fail(
                        pw,
                        f"cidrs overlap ({p.a} {na} and {p.b} {nb})",
                        "only VPCs with disjoint address space can peer",
                        source,
                    )
        pair = frozenset((p.a, p.b))
        if pair in pairs:
            raise _fail(pw, f"'{p.a}' and '{p.b}' are already peered", "remove one", source)
        pairs.add(pair)
        involved[p.a].add(p.name)
        involved[p.b].add(p.name)
    macs: dict[str, str] = {}
    public: dict[str, str] = {}
    for q, v in vpcs.items():
        _check_vpc(v, f"vpc '{q}'", hosts, involved[q], source)
        for e in v.enis:
            if e.mac is not None:
                if e.mac in macs:
                    raise _fail(
                        f"vpc '{q}' eni '{e.name}'",
                        f"mac {e.mac} is already used by eni '{macs[e.mac]}'",
                        "give each eni its own mac",
                        source,
                    )
                macs[e.mac] = f"{q}/{e.name}"
        owners = [(f"nat gateway '{n.name}'", ip) for n in v.nat_gateways for ip in n.public_ips]
        owners += [(f"eip for eni '{x.eni}'", x.ip) for x in v.eips]
        for owner, ip in owners:
            if ipaddress.ip_address(ip).version != 4:
                raise _fail(f"vpc '{q}' {owner}", f"public ip {ip} is not IPv4", "use IPv4", source)
            if ip in public:
                raise _fail(
                    f"vpc '{q}' {owner}",
                    f"public ip {ip} is already used by {public[ip]}",
                    "give each its own public ip",
                    source,
                )
            public[ip] = f"vpc '{q}' {owner}"
