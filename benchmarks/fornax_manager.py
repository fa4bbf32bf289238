"""Benchmark the light-weight manager: connection setup through miss -> policy -> insert in
batches, management CPU per connection, and software bytes per session at 1M and 16M live
sessions (examples/vpc.yaml with its NAT gateway given enough public IPs).

New connections (distinct keys, allowed by policy) are offered in batches of first packets:
web ENIs to the internet through their EIPs (3/4), app ENIs through the shared-IP NAT gateway
(1/4, SNAT ports allocated). Reports
  setup_cps                 connections/s through engine.process -> punt -> policy ->
                            software forward -> one insert (wall clock, engine emulation in),
  mgmt_cpu_s_per_1k_conn    management CPU (thread clock, engine emulation excluded) per 1k,
  sw_bytes_per_session      {"1M": ..., "16M": ...} manager bytes / live sessions (--quick: 1M),
  engine_ops_per_connection control-channel operations per connection,
  reference_setup_cps       the same manager fed one first packet per call (unbatched path),
  ovs_mirror_bytes_per_session  software-centric model: 2 flows x ~1.5 KB udpif_key (OVS),
and prints setup_cps / reference_setup_cps (batched vs one-at-a-time, same run) LAST.

    python benchmarks/fornax_manager.py [--quick] [--json PATH]
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

from starfabric.config import read_mapping
from starfabric.fornax.engine import FastEngine
from starfabric.fornax.manager import Final, Manager, ManagerConfig
from starfabric.fornax.packets import PROTO_TCP, TCP_SYN, PacketBatch, ip_to_halves
from starfabric.fornax.vpc import compile_policy, evaluate, parse_vpc_spec

#: OVS keeps a udpif_key per datapath flow (~1.5 KB with its 640-byte key and mask buffers,
#: reference/fornax.md) and two flows per connection; the software-centric model we compare to.
OVS_UKEY_BYTES = 1536
BATCH = 8192


def spec_with_nat_ips(n_ips: int) -> Any:
    """examples/vpc.yaml with the prod NAT gateway holding n_ips public IPs."""
    data = read_mapping("examples/vpc.yaml")
    for t in data["tenants"]:
        for v in t["vpcs"]:
            for g in v.get("nat_gateways", []):
                if g["name"] == "egress-nat":
                    g["public_ips"] = [f"100.64.{i // 256}.{i % 256}" for i in range(1, n_ips + 1)]
    return parse_vpc_spec(data)


def first_packets(start: int, n: int, t_ns: int = 0) -> PacketBatch:
    """n distinct allowed first packets (connection ids start..start+n)."""
    i = np.arange(start, start + n, dtype=np.int64)
    kind = i % 4  # 0, 1, 3: web ENIs to the internet (EIP); 2: app ENIs through the NAT pool
    web = np.array([ip_to_halves(a)[1] for a in ("10.0.1.10", "10.0.1.11")], np.uint64)
    app = np.array([ip_to_halves(a)[1] for a in ("10.0.2.10", "10.0.2.11")], np.uint64)
    s_lo = np.where(kind == 2, app[i % 2], web[i % 2])
    j = i // 4
    d_lo = np.uint64(ip_to_halves("198.18.0.0")[1]) + (j // 50000 % 131072).astype(np.uint64)
    sport = (1024 + j % 50000).astype(np.uint16)
    dport = np.where(kind == 3, 80, 443)
    return PacketBatch.from_columns(
        time_ns=t_ns, vni=1001, src_lo=s_lo, dst_lo=d_lo, sport=sport, dport=dport,
        proto=PROTO_TCP, tcp_flags=TCP_SYN, length=64,
    )  # fmt: skip


def fill(m: Manager, n: int, t0_ns: int, bar: Progress | None = None) -> float:
    """Offer n new connections in batches; returns wall seconds of the setup path."""
    wall = 0.0
    task = bar.add_task(f"setting up {n:,} connections", total=n) if bar else None
    for start in range(0, n, BATCH):
        k = min(BATCH, n - start)
        b = first_packets(start, k, t0_ns + start * 1000)
        t = time.perf_counter()
        fate = m.process(b)
        wall += time.perf_counter() - t
        if (fate.final != Final.SW_FORWARDED).any():
            raise SystemExit("benchmark traffic was not allowed by policy: fix first_packets")
        if bar is not None and task is not None:
            bar.advance(task, k)
    return wall


def run_scale(n: int, bar: Progress | None) -> dict[str, Any]:
    n_ips = max(2, -(-n // 4 // 60000) + 1)
    policy = compile_policy(spec_with_nat_ips(n_ips))
    cap = 1 << max(16, int(n * 1.25 - 1).bit_length())
    eng = FastEngine(capacity=cap, ring_capacity=1 << 16)
    m = Manager(eng, policy, ManagerConfig(setup_rate=1e12, setup_burst=1 << 30))
    wall = fill(m, n, 10**9, bar)
    m.ledger.check()
    s = m.summary()
    live = m.sessions()
    if live != n:
        raise SystemExit(f"{live} live sessions after {n} setups")
    return {
        "sessions": live,
        "setup_cps": n / wall,
        "mgmt_cpu_s_per_1k_conn": 1000 * s["mgmt_cpu_s"] / n,
        "engine_emulation_cpu_s_per_1k_conn": 1000 * s["engine_emulation_cpu_s"] / n,
        "sw_bytes": m.software_bytes,
        "sw_bytes_per_session": m.software_bytes / live,
        "nat_ports_held": m.nat.allocated(),
        "engine_ops_per_connection": s["engine_ops_per_connection"],
    }


def reference_cps(n: int) -> float:
    """The same manager path fed one first packet per call (no batching)."""
    policy = compile_policy(spec_with_nat_ips(2))
    m = Manager(FastEngine(capacity=1 << 16), policy)
    pk = first_packets(0, n)
    m.process(pk.take([0]))  # warm
    t = time.perf_counter()
    for j in range(1, n):
        m.process(pk.take([j]))
    return (n - 1) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1M sessions only")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    console = Console()
    policy = compile_policy(spec_with_nat_ips(2))
    probe = first_packets(0, 64)
    if not (evaluate(policy, probe).reason == 0).all():
        raise SystemExit("benchmark traffic is not allowed by examples/vpc.yaml")
    scales = {"1M": 1 << 20} if args.quick else {"1M": 1 << 20, "16M": 1 << 24}
    out: dict[str, Any] = {"quick": args.quick, "batch": BATCH, "scales": {}}
    warm = Manager(FastEngine(capacity=1 << 16), policy)  # compile/load every kernel first
    fill(warm, 2 * BATCH, 10**9)
    with Progress(console=console, transient=True) as bar:
        for name, n in scales.items():
            out["scales"][name] = run_scale(n, bar)
    first = out["scales"]["1M"]
    out["setup_cps"] = first["setup_cps"]
    out["mgmt_cpu_s_per_1k_conn"] = first["mgmt_cpu_s_per_1k_conn"]
    out["engine_ops_per_connection"] = first["engine_ops_per_connection"]
    out["sw_bytes_per_session"] = {k: v["sw_bytes_per_session"] for k, v in out["scales"].items()}
    out["ovs_mirror_bytes_per_session"] = 2 * OVS_UKEY_BYTES
    out["reference_setup_cps"] = reference_cps(2000 if args.quick else 5000)
    out["ratio_setup_cps_batched_vs_unbatched"] = out["setup_cps"] / out["reference_setup_cps"]
    for name, v in out["scales"].items():
        console.print(
            f"{name}: {v['sessions']:,} sessions, setup {v['setup_cps']:,.0f} conn/s, "
            f"mgmt CPU {v['mgmt_cpu_s_per_1k_conn'] * 1e3:.2f} ms/1k conn, "
            f"{v['sw_bytes_per_session']:.4f} software B/session "
            f"(OVS-like mirror {2 * OVS_UKEY_BYTES} B), "
            f"{v['engine_ops_per_connection']:.2f} engine ops/conn"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
    console.print(
        f"setup_cps batched / one-at-a-time (same run): "
        f"{out['ratio_setup_cps_batched_vs_unbatched']:.1f}x"
    )


if __name__ == "__main__":
    main()
