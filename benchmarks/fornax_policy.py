"""Benchmark batch policy evaluation of first packets (numba) against the plain-Python
reference evaluator on the same packets.

Builds a region of T tenants x V VPCs (overlapping 10.0.0.0/16 address space, dual stack),
E ENIs per VPC in 4 subnets with NACLs, 4 security groups of R rules (with group
references) per VPC, route tables with a NAT gateway, an internet gateway, blackholes and a
peering per VPC pair; then decides N first packets (east-west, peered, outbound, inbound to
EIPs, strangers) and reports
  evals_per_s            numba batch evaluation,
  reference_evals_per_s  the reference evaluator on a sample of the same packets,
  mismatches             sample rows where the two disagree (must be 0),
and prints speedup = evals_per_s / reference_evals_per_s last.

    python benchmarks/fornax_policy.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress

from starfabric.fornax.packets import PacketBatch, ip_to_halves
from starfabric.fornax.vpc import (
    ReferencePolicy,
    compile_policy,
    describe,
    evaluate,
    parse_vpc_spec,
)


def region(tenants: int, vpcs: int, enis: int, rules: int) -> dict[str, Any]:
    """A large, valid region description (plain data)."""
    hosts = [{"name": f"host{i}"} for i in range(64)]
    out_t = []
    eip_n = 0
    for t in range(tenants):
        vs = []
        for v in range(vpcs):
            k = v  # VPC v of every tenant uses 10.k.0.0/16: tenants overlap, VPCs don't
            subnets = [
                {"name": f"s{s}", "cidr": f"10.{k}.{s}.0/24", "ipv6_cidr": f"fd{t:02x}:{k}:0:{s}::/64",
                 "acl": "tiers" if s >= 2 else None, "route_table": "public" if s == 0 else "private"}
                for s in range(4)
            ]  # fmt: skip
            groups = []
            for g in range(4):
                rs: list[dict[str, Any]] = [
                    {"direction": "egress", "cidr": "0.0.0.0/0"},
                    {"direction": "egress", "cidr": "::/0"},
                ]
                for r in range(rules):
                    if r % 5 == 4:
                        rs.append({"direction": "ingress", "protocol": "tcp", "ports": 8000 + r,
                                   "sg": f"g{(g + 1) % 4}"})  # fmt: skip
                    else:
                        rs.append({"direction": "ingress", "protocol": ["tcp", "udp"][r % 2],
                                   "ports": f"{1000 + 100 * r}-{1050 + 100 * r}",
                                   "cidr": f"10.{(k + r) % vpcs}.0.0/16"})  # fmt: skip
                rs.append(
                    {"direction": "ingress", "protocol": "tcp", "ports": 443, "cidr": "0.0.0.0/0"}
                )
                groups.append({"name": f"g{g}", "rules": rs})
            acl = [
                {"action": "deny", "direction": "ingress", "protocol": "tcp", "ports": 23},
                {
                    "action": "allow",
                    "direction": "ingress",
                    "protocol": "all",
                    "cidr": "10.0.0.0/8",
                },
                {
                    "action": "allow",
                    "direction": "ingress",
                    "protocol": "tcp",
                    "ports": "1024-65535",
                },
                {"action": "allow", "direction": "egress", "protocol": "all"},
            ]
            peer_routes = [
                {"prefix": f"10.{o}.0.0/16", "target": "peering", "via": f"t{t}-{min(v, o)}-{max(v, o)}"}
                for o in range(vpcs) if o != v
            ]  # fmt: skip
            blackholes = [{"prefix": f"192.0.{b}.0/24", "target": "blackhole"} for b in range(8)]
            tables = [
                {"name": "public", "routes": [{"prefix": "0.0.0.0/0", "target": "internet_gateway"},
                                             {"prefix": "::/0", "target": "internet_gateway"},
                                             *peer_routes, *blackholes]},
                {"name": "private", "routes": [{"prefix": "0.0.0.0/0", "target": "nat_gateway", "via": "nat"},
                                              {"prefix": "::/0", "target": "internet_gateway"},
                                              *peer_routes, *blackholes]},
            ]  # fmt: skip
            es, eips = [], []
            for e in range(enis):
                s = e % 4
                es.append({"name": f"e{e}", "subnet": f"s{s}", "host": f"host{(t * 7 + v * 3 + e) % 64}",
                           "ipv4": f"10.{k}.{s}.{10 + e // 4}", "ipv6": f"fd{t:02x}:{k}:0:{s}::{10 + e // 4:x}",
                           "security_groups": [f"g{e % 4}", f"g{(e + 1) % 4}"]})  # fmt: skip
                if s == 0 and e % 8 == 0:
                    eip_n += 1
                    eips.append({"ip": f"100.{64 + eip_n // 65536}.{(eip_n // 256) % 256}.{eip_n % 256}",
                                 "eni": f"e{e}"})  # fmt: skip
            eip_n += 1
            nat_ip = f"100.{64 + eip_n // 65536}.{(eip_n // 256) % 256}.{eip_n % 256}"
            vs.append({
                "name": f"v{v}", "vni": 1000 * (t + 1) + v, "cidrs": [f"10.{k}.0.0/16", f"fd{t:02x}:{k}::/48"],
                "subnets": subnets, "enis": es, "security_groups": groups,
                "network_acls": [{"name": "tiers", "rules": acl}], "route_tables": tables,
                "nat_gateways": [{"name": "nat", "public_ips": [nat_ip]}], "eips": eips,
            })  # fmt: skip
        out_t.append({"name": f"t{t}", "vpcs": vs})
    peerings = [
        {"name": f"t{t}-{a}-{b}", "a": f"t{t}/v{a}", "b": f"t{t}/v{b}"}
        for t in range(tenants) for a in range(vpcs) for b in range(a + 1, vpcs)
    ]  # fmt: skip
    return {"hosts": hosts, "tenants": out_t, "peerings": peerings}


def packets(data: dict[str, Any], n: int, rng: np.random.Generator) -> PacketBatch:
    """n first packets drawn over the region: mostly east-west, some peered, out, in."""
    src: list[tuple[int, int, int, int, int]] = []  # (vni, v4 lo, v6 hi, v6 lo, eip lo)
    for t in data["tenants"]:
        for v in t["vpcs"]:
            eips = {x["eni"]: ip_to_halves(x["ip"])[1] for x in v["eips"]}
            for e in v["enis"]:
                h6 = ip_to_halves(e["ipv6"])
                src.append(
                    (v["vni"], ip_to_halves(e["ipv4"])[1], h6[0], h6[1], eips.get(e["name"], 0))
                )
    arr = np.array(src, dtype=np.uint64)
    a = rng.integers(0, len(arr), n)
    b = rng.integers(0, len(arr), n)
    kind = rng.choice(5, n, p=[0.55, 0.15, 0.15, 0.1, 0.05])
    v6 = rng.random(n) < 0.15
    vni = arr[a, 0].astype(np.uint32)
    s_hi = np.where(v6, arr[a, 2], 0).astype(np.uint64)
    s_lo = np.where(v6, arr[a, 3], arr[a, 1]).astype(np.uint64)
    same_vpc = arr[rng.integers(0, len(arr), n), 1]  # some ENI address, maybe other VPC
    d_hi = np.where(v6, arr[b, 2], 0).astype(np.uint64)
    d_lo = np.where(v6, arr[b, 3], np.where(kind == 1, same_vpc, arr[b, 1])).astype(np.uint64)
    ext = np.uint64(ip_to_halves("198.18.0.0")[1]) + rng.integers(0, 1 << 17, n).astype(np.uint64)
    ext6_hi = np.uint64(ip_to_halves("2001:db8::")[0])
    out = kind == 2
    d_hi[out] = np.where(v6[out], ext6_hi, 0)
    d_lo[out] = np.where(v6[out], ext[out], ext[out])
    inb = (kind == 3) & (arr[b, 4] != 0)
    vni[inb], s_hi[inb], s_lo[inb], d_hi[inb], d_lo[inb] = 0, 0, ext[inb], 0, arr[b, 4][inb]
    stranger = kind == 4
    s_hi[stranger] = np.where(v6[stranger], ext6_hi, 0)
    s_lo[stranger] = ext[stranger]
    proto = rng.choice(np.array([6, 17, 1], np.uint8), n, p=[0.75, 0.2, 0.05])
    proto[(proto == 1) & v6 & ~inb] = 58
    dport = rng.choice(np.array([443, 80, 22, 23, 1000, 1220, 8004, 8009, 3306, 53]), n)
    dport = np.where(np.isin(proto, [1, 58]), np.where(proto == 1, 8, 128) << 8, dport)
    return PacketBatch.from_columns(
        time_ns=np.arange(n, dtype=np.int64), vni=vni, src_hi=s_hi, src_lo=s_lo, dst_hi=d_hi,
        dst_lo=d_lo, proto=proto, sport=rng.integers(32768, 61000, n).astype(np.uint16),
        dport=dport.astype(np.uint16), tcp_flags=np.full(n, 2, np.uint8),
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller region and batch")
    ap.add_argument("--json", type=Path, default=None, help="write figures here")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    console = Console(highlight=False)
    tenants, vpcs, enis, rules = (4, 4, 64, 10) if args.quick else (16, 8, 250, 20)
    n, n_ref = (200_000, 2_000) if args.quick else (2_000_000, 5_000)
    rng = np.random.default_rng(args.seed)

    t0 = time.perf_counter()
    data = region(tenants, vpcs, enis, rules)
    spec = parse_vpc_spec(data)
    compiled = compile_policy(spec)
    compile_s = time.perf_counter() - t0
    batch = packets(data, n, rng)
    evaluate(compiled, batch.take(np.arange(1000)))  # compile / load the kernels

    runs = []
    for _ in range(3):
        t = time.perf_counter()
        res = evaluate(compiled, batch)
        runs.append(time.perf_counter() - t)
    evals_per_s = n / min(runs)

    ref = ReferencePolicy(spec)
    sample = batch.take(np.arange(n_ref))
    rows = []
    t = time.perf_counter()
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("reference evaluator", total=n_ref)
        for i in range(0, n_ref, 250):
            rows += ref.evaluate_batch(sample.take(np.arange(i, min(i + 250, n_ref))))
            bar.advance(task, min(250, n_ref - i))
    ref_per_s = n_ref / (time.perf_counter() - t)
    mismatches = sum(describe(compiled, res, i) != rows[i] for i in range(n_ref))
    allowed = float((res.reason == 0).mean())

    figures = {
        "tenants": tenants,
        "vpcs": tenants * vpcs,
        "enis": compiled.n_enis,
        "sg_rules": len(compiled.sg_rule_names),
        "prefixes": len(compiled.route_names),
        "actions": len(compiled.actions),
        "compile_s": round(compile_s, 3),
        "packets": n,
        "allowed_share": round(allowed, 3),
        "evals_per_s": round(evals_per_s),
        "reference_packets": n_ref,
        "reference_evals_per_s": round(ref_per_s),
        "mismatches": int(mismatches),
        "speedup": round(evals_per_s / ref_per_s, 1),
    }
    for k, v in figures.items():
        if k != "speedup":
            console.print(f"{k:>22}: {v}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    console.print(f"{'speedup':>22}: {figures['speedup']}x (numba batch vs plain-Python reference)")


if __name__ == "__main__":
    main()
