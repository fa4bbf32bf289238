"""Declarative tenant network: tenants, VPCs, subnets, ENIs, security groups, network ACLs,
route tables, NAT gateways, EIPs and peerings, read from YAML/JSON into frozen specs.

Field-level problems (a malformed CIDR, an unknown key) are reported by pydantic through
`parse_spec`; cross-object problems (a subnet outside its VPC, a rule naming a missing group)
by `validate_vpc_spec`, whose one-line ConfigError names the object and the field.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from starfabric.config import Spec
from starfabric.fornax.ranges import L4_PORT, PROTOCOL, VNI, IcmpType, Vni, VpcVni
from starfabric.ranges import field_value

PROTOCOLS: dict[str, int] = {"all": 0, "icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58}
"""Protocol names accepted in rules; 0 means any protocol."""

MAX_VNI = VNI.hi
"""VXLAN/Geneve VNIs are 24-bit (RFC 7348 §5)."""

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def _network(value: str) -> str:
    try:
        return str(ipaddress.ip_network(str(value), strict=True))
    except ValueError as exc:
        raise ValueError(f"not a network prefix ({exc})") from None


def _address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        raise ValueError("not an IP address") from None


def _protocol(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError("give a protocol name or number")
    if isinstance(value, int):
        return field_value(value, PROTOCOL)
    name = str(value).lower()
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol; use one of {sorted(PROTOCOLS)} or a number")
    return PROTOCOLS[name]


def _ports(value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("give a port or a range 'lo-hi'")
    if isinstance(value, int):
        lo = hi = value
    elif isinstance(value, list | tuple) and len(value) == 2:
        lo, hi = int(value[0]), int(value[1])
    else:
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", str(value))
        if not m:
            raise ValueError("give a port or a range 'lo-hi'")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
    field_value(lo, L4_PORT)
    field_value(hi, L4_PORT)
    if lo > hi:
        raise ValueError(f"port range {lo}-{hi} has lo > hi")
    return (lo, hi)


class _Match(Spec):
    """Protocol / port / ICMP-type match shared by SG and ACL rules."""

    protocol: int = 0
    ports: tuple[int, int] | None = None
    icmp_type: IcmpType | None = None

    _proto = field_validator("protocol", mode="before")(lambda v: _protocol(v))
    _port = field_validator("ports", mode="before")(lambda v: _ports(v))

    @model_validator(mode="after")
    def _fits_protocol(self) -> _Match:
        if self.ports is not None and self.protocol not in (6, 17):
            raise ValueError("'ports' needs protocol tcp or udp")
        if self.icmp_type is not None and self.protocol not in (1, 58):
            raise ValueError("'icmp_type' needs protocol icmp or icmpv6")
        return self

    def port_range(self) -> tuple[int, int]:
        """The matched range of the packet's `dport` field (ICMP: type<<8 | code)."""
        if self.ports is not None:
            return self.ports
        if self.icmp_type is not None:
            return (self.icmp_type << 8, (self.icmp_type << 8) | 0xFF)
        return (0, 65535)


class SgRule(_Match):
    """Stateful allow rule: traffic in `direction` to `ports` from/to `cidr` or group `sg`."""

    direction: Literal["ingress", "egress"]
    cidr: str | None = None
    sg: str | None = None
    description: str = ""

    _cidr = field_validator("cidr")(lambda v: None if v is None else _network(v))

    @model_validator(mode="after")
    def _one_peer(self) -> SgRule:
        if (self.cidr is None) == (self.sg is None):
            raise ValueError("give exactly one of 'cidr' or 'sg'")
        return self


class SecurityGroup(Spec):
    """A stateful allow-list; an ENI's traffic passes if any rule of any of its groups does."""

    name: str
    rules: tuple[SgRule, ...] = ()


class AclRule(_Match):
    """Stateless ordered rule; `cidr` is the remote address (None: any address)."""

    action: Literal["allow", "deny"]
    direction: Literal["ingress", "egress"]
    cidr: str | None = None

    _cidr = field_validator("cidr")(lambda v: None if v is None else _network(v))


class NetworkAcl(Spec):
    """Ordered rules per direction; first match decides, no match denies."""

    name: str
    rules: tuple[AclRule, ...] = ()


class Route(Spec):
    """A route-table entry; the VPC's own CIDRs are implicit `local` routes."""

    prefix: str
    target: Literal["peering", "nat_gateway", "internet_gateway", "blackhole"]
    via: str | None = None

    _prefix = field_validator("prefix")(lambda v: _network(v))

    @model_validator(mode="after")
    def _via(self) -> Route:
        needs = self.target in ("peering", "nat_gateway")
        if needs and not self.via:
            raise ValueError(f"target {self.target} needs 'via' (its name)")
        if not needs and self.via:
            raise ValueError(f"target {self.target} takes no 'via'")
        return self


class RouteTable(Spec):
    """Named routes; the longest matching prefix wins (local routes included)."""

    name: str
    routes: tuple[Route, ...] = ()


class Subnet(Spec):
    """A slice of the VPC's address space with its route table and network ACL."""

    name: str
    cidr: str | None = None
    ipv6_cidr: str | None = None
    route_table: str | None = None
    acl: str | None = None

    _c4 = field_validator("cidr", "ipv6_cidr")(lambda v: None if v is None else _network(v))


class Eni(Spec):
    """A VM's interface: addresses, the host it lives on, its security groups."""

    name: str
    subnet: str
    host: str
    mac: str | None = None
    ipv4: str | None = None
    ipv6: str | None = None
    security_groups: tuple[str, ...] = ()

    _addr = field_validator("ipv4", "ipv6")(lambda v: None if v is None else _address(v))

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str | None) -> str | None:
        if v is not None and not _MAC.match(v):
            raise ValueError("not a MAC address like 02:00:00:00:00:01")
        return None if v is None else v.lower()


class NatGateway(Spec):
    """Shared public IPv4 addresses for SNAT; ports are allocated by the manager."""

    name: str
    public_ips: tuple[str, ...] = Field(min_length=1)

    _ips = field_validator("public_ips")(lambda v: tuple(_address(x) for x in v))


class Eip(Spec):
    """An elastic IP: 1:1 NAT between a public IPv4 address and an ENI's private IPv4."""

    ip: str
    eni: str

    _ip = field_validator("ip")(lambda v: _address(v))


class Vpc(Spec):
    """One tenant network: its VNI, address space and everything inside it. Subnets without
    a route table use `main_route_table`; without either they only reach local addresses."""

    name: str
    vni: VpcVni
    cidrs: tuple[str, ...] = Field(min_length=1)
    subnets: tuple[Subnet, ...] = ()
    enis: tuple[Eni, ...] = ()
    security_groups: tuple[SecurityGroup, ...] = ()
    network_acls: tuple[NetworkAcl, ...] = ()
    route_tables: tuple[RouteTable, ...] = ()
    main_route_table: str | None = None
    nat_gateways: tuple[NatGateway, ...] = ()
    eips: tuple[Eip, ...] = ()

    _cidrs = field_validator("cidrs")(lambda v: tuple(_network(x) for x in v))


class Tenant(Spec):
    """A customer; its VPCs may reuse addresses other tenants (or its own VPCs) use."""

    name: str
    vpcs: tuple[Vpc, ...] = ()


class Host(Spec):
    """A server with a SmartNIC; ENIs are delivered to it over VXLAN."""

    name: str
    underlay_ip: str | None = None

    _ip = field_validator("underlay_ip")(lambda v: None if v is None else _address(v))


class Peering(Spec):
    """A peering connection between VPCs `a` and `b`, each written 'tenant/vpc'."""

    name: str
    a: str
    b: str


class VpcSpec(Spec):
    """The whole tenant network of one region."""

    hosts: tuple[Host, ...] = ()
    tenants: tuple[Tenant, ...] = Field(min_length=1)
    peerings: tuple[Peering, ...] = ()
    gateway_vni: Vni = 0
    """VNI of packets arriving from the internet gateway (north-south); 0 = no overlay."""
