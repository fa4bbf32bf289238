"""Hand-checked decisions on examples/vpc.yaml: tier rules, same addresses in three VPCs,
peering both ways, SNAT pool, EIP, blackhole, IPv6 to the internet, stateless replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from starfabric.fornax.vpc import compile_policy, load_vpc_spec, parse_vpc_spec
from starfabric.fornax.vpc.report import explain

ROOT = Path(__file__).resolve().parents[3]
SPEC = load_vpc_spec(ROOT / "examples" / "vpc.yaml")
C = compile_policy(SPEC)

CASES = [
    # (vni, src, dst, proto, dport) -> (reason, rev_reason, forward action, session eni)
    ((1001, "10.0.2.10", "10.0.3.10", "tcp", 5432), ("ALLOW", "ALLOW", ("DELIVER", "acme/prod/db-1", 1001, "rack2-host2"), "acme/prod/app-1")),
    ((1001, "10.0.1.10", "10.0.3.10", "tcp", 5432), ("SG_DENY_IN", "SG_DENY_IN", ("DROP", "SG_DENY_IN"), "acme/prod/web-1")),
    ((1001, "10.0.1.5", "10.0.2.10", "tcp", 22), ("ALLOW", "ALLOW", ("DELIVER", "acme/prod/app-1", 1001, "rack1-host2"), "acme/prod/bastion")),
    ((1001, "10.0.1.10", "10.0.1.11", "tcp", 22), ("SG_DENY_IN", "SG_DENY_IN", ("DROP", "SG_DENY_IN"), "acme/prod/web-1")),
    # same 10.0.0.0/16 in acme/staging and globex/main: each VNI reaches only its own ENIs
    ((1002, "10.0.1.10", "10.0.1.20", "tcp", 80), ("ALLOW", "ALLOW", ("DELIVER", "acme/staging/app-1", 1002, "rack2-host1"), "acme/staging/web-1")),
    ((1002, "10.0.1.10", "10.0.2.10", "tcp", 8080), ("NO_DEST", "NO_DEST", ("DROP", "NO_DEST"), "acme/staging/web-1")),
    ((2001, "10.0.1.10", "10.0.2.10", "udp", 6379), ("ALLOW", "ALLOW", ("DELIVER", "globex/main/back-1", 2001, "rack1-host2"), "globex/main/front-1")),
    ((2001, "10.0.1.99", "10.0.2.10", "udp", 6379), ("NO_ENI", "NO_ENI", ("DROP", "NO_ENI"), None)),
    # north-south
    ((1001, "10.0.2.10", "8.8.8.8", "tcp", 443), ("ALLOW", "ALLOW", ("SNAT", "pool", "acme/prod/egress-nat"), "acme/prod/app-1")),
    ((1001, "10.0.1.10", "8.8.8.8", "tcp", 443), ("ALLOW", "ALLOW", ("SNAT", "eip", "198.51.100.20"), "acme/prod/web-1")),
    ((1001, "10.0.2.10", "192.0.2.7", "tcp", 443), ("BLACKHOLE", "BLACKHOLE", ("DROP", "BLACKHOLE"), "acme/prod/app-1")),
    ((1001, "fd00:ac:0:2::a", "2001:db8::1", "tcp", 443), ("ALLOW", "ALLOW", ("TO_IGW",), "acme/prod/app-1")),
    ((0, "8.8.8.8", "198.51.100.20", "tcp", 443), ("ALLOW", "ALLOW", ("DNAT", "acme/prod/web-1", 1001, "rack1-host1", "10.0.1.10"), "acme/prod/web-1")),
    ((0, "8.8.8.8", "198.51.100.20", "tcp", 80), ("SG_DENY_IN", "SG_DENY_IN", ("DROP", "SG_DENY_IN"), "acme/prod/web-1")),
    ((0, "8.8.8.8", "198.51.100.10", "tcp", 443), ("NO_DEST", "NO_DEST", ("DROP", "NO_DEST"), None)),
    ((2001, "10.0.2.10", "8.8.8.8", "tcp", 443), ("NO_PUBLIC_IP", "NO_PUBLIC_IP", ("DROP", "NO_PUBLIC_IP"), "globex/main/back-1")),
    # peering, both directions of the route present
    ((1001, "10.0.3.10", "10.10.0.53", "udp", 53), ("ALLOW", "ALLOW", ("TO_PEER", "platform/shared/dns-1", 3001, "rack1-host1"), "acme/prod/db-1")),
    ((3001, "10.10.0.90", "10.0.2.10", "tcp", 9100), ("SG_DENY_IN", "SG_DENY_IN", ("DROP", "SG_DENY_IN"), "platform/shared/prometheus")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("packet", "want"), CASES, ids=[f"{c[0][1]}>{c[0][2]}:{c[0][4]}" for c in CASES]
)
def test_example_decisions(packet: tuple, want: tuple) -> None:  # type: ignore[type-arg]
    vni, src, dst, proto, dport = packet
    got = explain(C, src, dst, proto, dport, vni=vni)
    assert (got["reason"], got["rev_reason"], got["fwd"], got["eni"]) == want


def test_peering_reply_needs_the_route_back() -> None:
    d = json.loads(SPEC.model_dump_json())
    shared = d["tenants"][2]["vpcs"][0]
    shared["route_tables"][0]["routes"] = []
    got = explain(compile_policy(parse_vpc_spec(d)), "10.0.3.10", "10.10.0.53", "udp", 53, vni=1001)
    assert (got["reason"], got["rev_reason"], got["rev"]) == (
        "ALLOW",
        "NO_ROUTE",
        ("DROP", "NO_ROUTE"),
    )


def test_stateless_acl_order_decides_the_reply() -> None:
    """db-acl admits UDP replies from the shared VPC before its catch-all deny; moved after
    it, the DNS query still leaves but its answer is dropped (the classic NACL mistake)."""
    d = json.loads(SPEC.model_dump_json())
    rules = d["tenants"][0]["vpcs"][0]["network_acls"][0]["rules"]
    rules.append(rules.pop(2))  # move "allow udp replies" behind "deny all ingress"
    c = compile_policy(parse_vpc_spec(d))
    got = explain(c, "10.0.3.10", "10.10.0.53", "udp", 53, vni=1001)
    assert (got["reason"], got["rev_reason"]) == ("ALLOW", "ACL_DENY_IN")
    ok = explain(C, "10.0.3.10", "10.10.0.53", "udp", 53, vni=1001)
    assert ok["rev_reason"] == "ALLOW"


def test_icmp_echo_reply_type() -> None:
    got = explain(C, "10.0.2.11", "10.0.2.10", "icmp", 8, vni=1001, sport=7)
    assert got["reason"] == "ALLOW" and got["packet"]["dport"] == 8 << 8
