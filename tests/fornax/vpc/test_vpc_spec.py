"""VPC specs: field errors from pydantic and cross-object errors, each one line naming the
object and the field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from starfabric.errors import ConfigError
from starfabric.fornax.vpc import compile_policy, load_vpc_spec, parse_vpc_spec

ROOT = Path(__file__).resolve().parents[3]


def base() -> dict[str, Any]:
    return {
        "hosts": [{"name": "h1"}],
        "tenants": [
            {
                "name": "t",
                "vpcs": [
                    {
                        "name": "a",
                        "vni": 10,
                        "cidrs": ["10.0.0.0/16", "fd00::/48"],
                        "subnets": [{"name": "s1", "cidr": "10.0.1.0/24", "ipv6_cidr": "fd00:0:0:1::/64"}],
                        "security_groups": [{"name": "g", "rules": []}],
                        "route_tables": [{"name": "rt", "routes": []}],
                        "enis": [{"name": "e1", "subnet": "s1", "host": "h1", "ipv4": "10.0.1.10"}],
                    },
                    {"name": "b", "vni": 11, "cidrs": ["10.1.0.0/16"]},
                ],
            }
        ],
    }  # fmt: skip


def vpc(d: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return d["tenants"][0]["vpcs"][i]  # type: ignore[no-any-return]


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "subnet outside vpc",
        lambda d: vpc(d)["subnets"][0].update(cidr="10.1.0.0/24"),
        "vpc 't/a' subnet 's1': cidr 10.1.0.0/24 is not inside the VPC's cidrs 10.0.0.0/16, fd00::/48",
    ),
    (
        "eni outside subnet",
        lambda d: vpc(d)["enis"][0].update(ipv4="10.0.2.1"),
        "vpc 't/a' eni 'e1': ipv4 10.0.2.1 is not inside subnet 's1' (10.0.1.0/24)",
    ),
    (
        "duplicate address",
        lambda d: vpc(d)["enis"].append({"name": "e2", "subnet": "s1", "host": "h1", "ipv4": "10.0.1.10"}),
        "vpc 't/a' eni 'e2': ipv4 10.0.1.10 is already used by eni 'e1'",
    ),
    (
        "unknown sg reference",
        lambda d: vpc(d)["security_groups"][0]["rules"].append({"direction": "ingress", "sg": "nope"}),
        "vpc 't/a' security group 'g' rule 0: sg 'nope' is not defined in this VPC",
    ),
    (
        "unknown host",
        lambda d: vpc(d)["enis"][0].update(host="h9"),
        "vpc 't/a' eni 'e1': host 'h9' is not defined",
    ),
    (
        "peering of overlapping vpcs",
        lambda d: (vpc(d, 1).update(cidrs=["10.0.0.0/8"]), d.update(peerings=[{"name": "p", "a": "t/a", "b": "t/b"}])),
        "peering 'p': cidrs overlap (t/a 10.0.0.0/16 and t/b 10.0.0.0/8)",
    ),
    (
        "route via unknown peering",
        lambda d: vpc(d)["route_tables"][0]["routes"].append({"prefix": "10.1.0.0/16", "target": "peering", "via": "p"}),
        "vpc 't/a' route table 'rt': route 10.1.0.0/16: peering 'p' does not involve this VPC",
    ),
    (
        "route inside the vpc",
        lambda d: vpc(d)["route_tables"][0]["routes"].append({"prefix": "10.0.5.0/24", "target": "blackhole"}),
        "route 10.0.5.0/24 lies inside the VPC's cidrs",
    ),
    (
        "ipv6 nat route",
        lambda d: (vpc(d).update(nat_gateways=[{"name": "n", "public_ips": ["198.51.100.1"]}]), vpc(d)["route_tables"][0]["routes"].append({"prefix": "::/0", "target": "nat_gateway", "via": "n"})),
        "route ::/0: a nat gateway translates IPv4 only",
    ),
    (
        "duplicate vni",
        lambda d: vpc(d, 1).update(vni=10),
        "vpc 't/b': vni 10 is already used by vpc 't/a'",
    ),
    (
        "vni of the gateway",
        lambda d: d.update(gateway_vni=11),
        "vpc 't/b': vni 11 is the gateway_vni",
    ),
    (
        "eip without ipv4",
        lambda d: (vpc(d)["enis"][0].update(ipv4=None, ipv6="fd00:0:0:1::5"), vpc(d).update(eips=[{"ip": "198.51.100.9", "eni": "e1"}])),
        "vpc 't/a' eip 198.51.100.9: eni 'e1' has no ipv4",
    ),
    (
        "shared public ip",
        lambda d: (vpc(d).update(nat_gateways=[{"name": "n", "public_ips": ["198.51.100.1"]}], eips=[{"ip": "198.51.100.1", "eni": "e1"}])),
        "public ip 198.51.100.1 is already used by vpc 't/a' nat gateway 'n'",
    ),
    ("misspelled key", lambda d: vpc(d).update(subnetz=[]), "unknown field 'tenants[0].vpcs[0].subnetz'"),
    (
        "host bits set",
        lambda d: vpc(d).update(cidrs=["10.0.0.1/16"]),
        "field 'tenants[0].vpcs[0].cidrs'",
    ),
    (
        "ports on icmp",
        lambda d: vpc(d)["security_groups"][0]["rules"].append({"direction": "ingress", "protocol": "icmp", "ports": 80, "cidr": "0.0.0.0/0"}),
        "'ports' needs protocol tcp or udp",
    ),
    (
        "unknown protocol",
        lambda d: vpc(d)["security_groups"][0]["rules"].append({"direction": "ingress", "protocol": "sctpx", "cidr": "0.0.0.0/0"}),
        "unknown protocol",
    ),
]  # fmt: skip


def test_base_is_valid() -> None:
    compile_policy(parse_vpc_spec(base()))


@pytest.mark.parametrize(
    ("edit", "message"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_invalid_spec_is_one_line(edit: Callable[[dict[str, Any]], None], message: str) -> None:
    d = copy.deepcopy(base())
    edit(d)
    with pytest.raises(ConfigError) as exc:
        parse_vpc_spec(d, source="vpc.yaml")
    line = exc.value.one_line()
    assert line.startswith("vpc.yaml: ") and message in line and "\n" not in line
    assert "(fix: " in line


@pytest.mark.parametrize("name", ["vpc.yaml", "vpc-small.yaml"])
def test_examples_are_valid(name: str) -> None:
    compiled = compile_policy(load_vpc_spec(ROOT / "examples" / name))
    assert compiled.n_enis >= 3


def test_specs_are_frozen() -> None:
    spec = parse_vpc_spec(base())
    with pytest.raises(ValueError, match="frozen"):
        spec.gateway_vni = 5  # type: ignore[misc]
