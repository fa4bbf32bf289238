"""Shared pieces of the baseline tests: controllers on examples/vpc.yaml and traffic."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from fornax.manager.conftest import NO_AGING
from starfabric.config import read_mapping
from starfabric.fornax.baselines import SoftwareCentric, SoftwareCentricConfig
from starfabric.fornax.engine import FastEngine
from starfabric.fornax.manager import ManagerConfig
from starfabric.fornax.packets import PROTO_TCP, TCP_ACK, TCP_SYN, PacketBatch, ip_to_halves
from starfabric.fornax.vpc import VpcSpec, compile_policy, parse_vpc_spec

EXAMPLE = "examples/vpc.yaml"
WEB = ("10.0.1.10", "10.0.1.11")  # acme/prod web-1, web-2 (vni 1001), allowed to the internet
APP = ("10.0.2.10", "10.0.2.11")  # acme/prod app-1, app-2: to the internet through SNAT


def example_data() -> dict[str, Any]:
    return read_mapping(EXAMPLE)


def spec_of(data: dict[str, Any]) -> VpcSpec:
    return parse_vpc_spec(data)


def web2_own_sg(data: dict[str, Any]) -> dict[str, Any]:
    """The example with web-2 in its own copy of the web security group (same policy)."""
    d = copy.deepcopy(data)
    v = d["tenants"][0]["vpcs"][0]
    web = next(g for g in v["security_groups"] if g["name"] == "web")
    v["security_groups"].append({**copy.deepcopy(web), "name": "web-b"})
    for e in v["enis"]:
        if e["name"] == "web-2":
            e["security_groups"] = ["web-b"]
    return d


def web2_egress_http_only(data: dict[str, Any]) -> dict[str, Any]:
    """A change touching one ENI scope (web-2's, no VPC scope): its group's egress becomes
    TCP 80 only, so its connections to port 443 are refused from now on."""
    d = copy.deepcopy(data)
    g = next(g for g in d["tenants"][0]["vpcs"][0]["security_groups"] if g["name"] == "web-b")
    g["rules"] = [r for r in g["rules"] if r.get("direction") != "egress"]
    g["rules"].append({"direction": "egress", "protocol": "tcp", "ports": 80, "cidr": "0.0.0.0/0"})
    return d


def web_sg_without_ingress(data: dict[str, Any]) -> dict[str, Any]:
    """A change touching every ENI of the web security group: its ingress rules go."""
    d = copy.deepcopy(data)
    for v in (v for t in d["tenants"] for v in t["vpcs"]):
        for g in v.get("security_groups", []):
            if g["name"] == "web":
                g["rules"] = [r for r in g["rules"] if r.get("direction") != "ingress"]
    return d


def controller(
    baseline: SoftwareCentricConfig,
    *,
    capacity: int = 1 << 14,
    manager: ManagerConfig | None = None,
    engine_kw: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> SoftwareCentric:
    kw = {**NO_AGING, **(engine_kw or {})}
    eng = FastEngine(capacity=capacity, eni_scopes=256, vpc_scopes=64, **kw)
    policy = compile_policy(spec_of(data or example_data()))
    return SoftwareCentric(eng, policy, baseline, manager)


def web_packets(
    conn: np.ndarray,
    t_ns: int | np.ndarray,
    *,
    reply: bool = False,
    flags: int = TCP_SYN,
    hosts: tuple[str, str] = WEB,
) -> PacketBatch:
    """One packet of each connection id: web-1/web-2 -> 198.18.x.y:443 (or the reply)."""
    conn = np.asarray(conn, np.int64)
    web = np.array([ip_to_halves(a)[1] for a in hosts], np.uint64)
    src = web[conn % 2]
    dst = np.uint64(ip_to_halves("198.18.0.0")[1]) + (conn // 20000).astype(np.uint64)
    sport = (1024 + conn % 20000).astype(np.uint16)
    cols: dict[str, Any] = {"src_lo": src, "dst_lo": dst, "sport": sport, "dport": 443}
    if reply:
        cols = {"src_lo": dst, "dst_lo": src, "sport": 443, "dport": sport}
    return PacketBatch.from_columns(time_ns=t_ns, vni=1001, proto=PROTO_TCP,
                                    tcp_flags=flags, length=64, **cols)  # fmt: skip


ACK = TCP_ACK
