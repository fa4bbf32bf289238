"""What a VPC spec compiles to (counts per VPC) and one packet's decision, as plain data for
the `starfabric fornax policy check` command and its tests."""

from __future__ import annotations

import ipaddress
from dataclasses import fields
from typing import Any

import numpy as np

from starfabric.errors import ConfigError
from starfabric.fornax.packets import PacketBatch, ip_to_halves
from starfabric.fornax.ranges import ICMP_TYPE, L4_PORT, PROTOCOL, VNI
from starfabric.fornax.vpc.codes import ActionKind
from starfabric.fornax.vpc.compile import CompiledPolicy
from starfabric.fornax.vpc.evaluate import describe, evaluate
from starfabric.fornax.vpc.spec import PROTOCOLS
from starfabric.ranges import check_int


def summary(compiled: CompiledPolicy) -> list[dict[str, Any]]:
    """One row per VPC: VNI and counts of subnets, ENIs, rules, prefixes and actions."""
    c = compiled
    acts = c.actions
    kind = acts["kind"]
    per_eni = np.isin(kind, [ActionKind.DELIVER, ActionKind.TO_PEER, ActionKind.DNAT])
    act_vpc = np.full(len(acts), -1, dtype=np.int64)
    act_vpc[per_eni] = c.eni_vpc[acts["port"][per_eni]]
    pooled = (kind == ActionKind.SNAT) & (acts["pool"] >= 0)
    for h in np.flatnonzero(pooled).tolist():
        act_vpc[h] = c.vpc_names.index(c.pool_names[int(acts["pool"][h])].rsplit("/", 1)[0])
    for e in np.flatnonzero(c.eni_has_eip).tolist():
        act_vpc[int(c.eni_act_snat_eip[e])] = int(c.eni_vpc[e])
    rows = []
    for t in c.spec.tenants:
        for v in t.vpcs:
            q = f"{t.name}/{v.name}"
            vid = c.vpc_id(q)
            rows.append(
                {
                    "vpc": q,
                    "vni": v.vni,
                    "scope": vid,
                    "subnets": len(v.subnets),
                    "enis": int((c.eni_valid & (c.eni_vpc == vid)).sum()),
                    "security_groups": len(v.security_groups),
                    "sg_rules": sum(len(g.rules) for g in v.security_groups),
                    "acl_rules": sum(len(a.rules) for a in v.network_acls),
                    "route_tables": len(v.route_tables),
                    "prefixes": sum(len(r.routes) + len(v.cidrs) for r in v.route_tables)
                    + (0 if v.main_route_table else len(v.cidrs)),
                    "nat_public_ips": sum(len(n.public_ips) for n in v.nat_gateways),
                    "eips": len(v.eips),
                    "actions": int((act_vpc == vid).sum()),
                }
            )
    return rows


def compiled_bytes(compiled: CompiledPolicy) -> int:
    """Bytes of the arrays the kernels read."""
    return sum(
        int(getattr(compiled, f.name).nbytes)
        for f in fields(compiled)
        if isinstance(getattr(compiled, f.name), np.ndarray)
    )


def _proto(text: str) -> int:
    t = text.lower()
    if t in PROTOCOLS and t != "all":
        return PROTOCOLS[t]
    if t.lstrip("+-").isdigit():
        return check_int("--explain PROTO", int(t), PROTOCOL.narrower(lo=1))  # 0: rules' "any"
    raise ConfigError(
        f"--explain protocol {text!r} is not tcp, udp, icmp, icmpv6 or a number 1..255",
        fix="write e.g. tcp",
    )


def _addr(text: str, what: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ConfigError(
            f"--explain {what} {text!r} is not an IP address", fix="e.g. 10.0.1.10"
        ) from None


def resolve_vni(compiled: CompiledPolicy, src: str) -> int:
    """The VNI a packet from `src` arrives with: its ENI's VPC, or the gateway's when `src`
    is no ENI; several VPCs sharing the address need an explicit choice."""
    ip = ipaddress.ip_address(src)
    owners = [
        (f"{t.name}/{v.name}", v.vni)
        for t in compiled.spec.tenants
        for v in t.vpcs
        for e in v.enis
        if ip in {ipaddress.ip_address(a) for a in (e.ipv4, e.ipv6) if a}
    ]
    if not owners:
        return compiled.gateway_vni
    if len(owners) > 1:
        shown = ", ".join(f"{q} vni {n}" for q, n in owners)
        raise ConfigError(
            f"--explain source {src} is an ENI in {len(owners)} VPCs ({shown})",
            fix="give --vni to pick one",
        )
    return owners[0][1]


def explain(
    compiled: CompiledPolicy,
    src: str,
    dst: str,
    proto: str,
    dport: int,
    *,
    sport: int = 40000,
    vni: int | None = None,
) -> dict[str, Any]:
    """The decision on one first packet and the rules and routes that made it.

    For ICMP, `dport` is the ICMP type (code 0) and `sport` the echo identifier.
    """
    s, d, p = _addr(src, "source"), _addr(dst, "destination"), _proto(proto)
    icmp = p in (1, 58)
    dport = check_int("--explain DPORT", dport, ICMP_TYPE if icmp else L4_PORT)
    check_int("--sport", sport, L4_PORT)
    if icmp:
        dport <<= 8
    use_vni = resolve_vni(compiled, str(s)) if vni is None else check_int("--vni", vni, VNI)
    sh, sl = ip_to_halves(s)
    dh, dl = ip_to_halves(d)
    batch = PacketBatch.from_columns(
        vni=np.array([use_vni], np.uint32),
        src_hi=np.array([sh], np.uint64),
        src_lo=np.array([sl], np.uint64),
        dst_hi=np.array([dh], np.uint64),
        dst_lo=np.array([dl], np.uint64),
        proto=np.array([p], np.uint8),
        sport=np.array([sport], np.uint16),
        dport=np.array([dport], np.uint16),
        tcp_flags=np.array([0x02], np.uint8),
    )
    res = evaluate(compiled, batch)
    out = describe(compiled, res, 0)
    out["packet"] = {
        "vni": use_vni, "src": str(s), "dst": str(d), "proto": p, "sport": sport, "dport": dport,
    }  # fmt: skip
    out["handles"] = {"fwd": int(res.fwd_action[0]), "rev": int(res.rev_action[0])}
    return out
