"""Benchmark Fornax against its software-centric baselines on the same engine, workload and
code: software bytes per session and management CPU per 1k connections at 1M live sessions
(--quick; without it also 4M), for fornax, doca_like and ovs_like (baselines/config.py).

Scenario (simulated clock): connections open at `--cps` (first packets in batches of 8192,
examples/vpc.yaml: 3/4 web ENIs to the internet, 1/4 through the SNAT gateway), one tick
per batch, then `--steady` seconds of ticks every 100 ms with the full table, and one policy
change touching the web security group (egress rule added: every web connection is in an
affected scope, decisions unchanged). Management CPU is the thread CPU by activity with
engine emulation excluded for everyone; software bytes are measured (numpy nbytes).

Settings that keep the comparison about management, not about different outcomes
(assumptions, stated in the JSON): ovs_like's idle timeout is set to the engine's SYN_SENT
timeout (120 s) so all three hold the same live sessions, and its dynamic flow limit is off
(with it OVS keeps at most 200k flows in hardware: the rest would be software-forwarded).

    python benchmarks/fornax_baselines.py [--quick] [--json PATH]

Prints the ovs_like / fornax ratios (storage, CPU) LAST.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

sys.path.insert(0, str(Path(__file__).parent))
from fornax_manager import first_packets
from starfabric.config import read_mapping
from starfabric.fornax.baselines import (
    SoftwareCentric,
    SoftwareCentricConfig,
    doca_like,
    fornax,
    ovs_like,
)
from starfabric.fornax.engine import FastEngine
from starfabric.fornax.manager import Final, ManagerConfig
from starfabric.fornax.softpath import SoftPathConfig
from starfabric.fornax.vpc import compile_policy, parse_vpc_spec

BATCH = 8192
TICK_NS = 100_000_000


def spec_data(n_ips: int) -> dict[str, Any]:
    """examples/vpc.yaml with the prod NAT gateway holding n_ips public IPs."""
    data = read_mapping("examples/vpc.yaml")
    for t in data["tenants"]:
        for v in t["vpcs"]:
            for g in v.get("nat_gateways", []):
                if g["name"] == "egress-nat":
                    g["public_ips"] = [f"100.64.{i // 256}.{i % 256}" for i in range(1, n_ips + 1)]
    return data


def changed(data: dict[str, Any]) -> dict[str, Any]:
    """The policy change: the acme/prod web group gains an egress rule (allows no less)."""
    d = copy.deepcopy(data)
    g = next(g for g in d["tenants"][0]["vpcs"][0]["security_groups"] if g["name"] == "web")
    g["rules"].append({"direction": "egress", "protocol": "udp", "ports": 123, "cidr": "0.0.0.0/0"})
    return d


def presets() -> dict[str, SoftwareCentricConfig]:
    ovs = ovs_like().model_copy(update={"idle_timeout_s": 120.0, "flow_limit": None})
    return {"fornax": fornax(), "doca_like": doca_like(), "ovs_like": ovs}


def run_one(
    name: str, cfg: SoftwareCentricConfig, n: int, cps: float, steady_s: float, bar: Progress
) -> dict[str, Any]:
    data = spec_data(max(2, -(-n // 4 // 60000) + 1))
    policy = compile_policy(parse_vpc_spec(data))
    flows = n * cfg.entries_per_connection
    eng = FastEngine(
        capacity=1 << max(16, int(flows * 1.25 - 1).bit_length()), ring_capacity=1 << 16
    )
    m = SoftwareCentric(eng, policy, cfg, ManagerConfig(setup_rate=1e12, setup_burst=1 << 30),
                        softpath_config=SoftPathConfig(capacity=BATCH * 4))  # fmt: skip
    steps = -(-n // BATCH) + int(steady_s * 1e9 // TICK_NS)
    task = bar.add_task(f"{name}: {n:,} connections", total=steps)
    t0 = time.perf_counter()
    t_ns = 0
    for start in range(0, n, BATCH):
        k = min(BATCH, n - start)
        t_ns = int(start * 1e9 / cps)
        fate = m.process(first_packets(start, k, t_ns))
        if (fate.final != Final.SW_FORWARDED).any():
            raise SystemExit(f"{name}: benchmark traffic was not all set up")
        m.tick(t_ns + int(k * 1e9 / cps))
        bar.advance(task)
    change_at = t_ns + int(steady_s * 1e9 / 2)
    end = t_ns + int(steady_s * 1e9)
    policy_done = False
    while t_ns < end:
        t_ns += TICK_NS
        if not policy_done and t_ns >= change_at:
            m.apply_policy(parse_vpc_spec(changed(data)))
            policy_done = True
        m.tick(t_ns)
        bar.advance(task)
    wall = time.perf_counter() - t0
    m.ledger.check()
    s = m.summary()
    live = m.sessions()
    if live != n:
        raise SystemExit(f"{name}: {live} live sessions, expected {n}")
    return {
        "sessions": live,
        "hardware_flows": m.flows(),
        "software_bytes": m.software_bytes,
        "sw_bytes_per_session": m.software_bytes / live,
        "ovs_ukey_model_bytes_per_session": m.ovs_ukey_model_bytes / live,
        "mgmt_cpu_s": s["mgmt_cpu_s"],
        "mgmt_cpu_s_per_1k_conn": 1000 * s["mgmt_cpu_s"] / n,
        "cpu_s_by_activity": s["cpu_s_by_activity"],
        "engine_emulation_cpu_s": s["engine_emulation_cpu_s"],
        "engine_ops": s["engine_ops"],
        "aging_passes": m.passes,
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1M sessions only")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--cps", type=float, default=100_000.0, help="connection rate (simulated)")
    ap.add_argument("--steady", type=float, default=10.0, help="seconds of full-table ticks")
    args = ap.parse_args()
    console = Console()
    scales = {"1M": 1 << 20} if args.quick else {"1M": 1 << 20, "4M": 1 << 22}
    cfgs = presets()
    out: dict[str, Any] = {
        "quick": args.quick,
        "cps": args.cps,
        "steady_s": args.steady,
        "assumptions": {
            "ovs_like_idle_timeout_s": 120.0,
            "ovs_like_flow_limit": None,
            "batch": BATCH,
            "tick_s": TICK_NS / 1e9,
        },
        "configs": {k: v.model_dump() for k, v in cfgs.items()},
        "scales": {},
    }
    with Progress(console=console, transient=True) as bar:
        warm = SoftwareCentric(FastEngine(capacity=1 << 16),
                               compile_policy(parse_vpc_spec(spec_data(2))), ovs_like())  # fmt: skip
        warm.process(first_packets(0, 2 * BATCH, 0))  # compile every kernel first
        warm.tick(10**9)
        warm.tick(2 * 10**9)
        for scale, n in scales.items():
            out["scales"][scale] = {
                name: run_one(name, cfg, n, args.cps, args.steady, bar)
                for name, cfg in cfgs.items()
            }
    for scale, res in out["scales"].items():
        for name, v in res.items():
            console.print(
                f"{scale} {name:9s}: {v['sw_bytes_per_session']:10.3f} software B/session, "
                f"mgmt CPU {v['mgmt_cpu_s_per_1k_conn'] * 1e3:8.3f} ms/1k conn "
                f"({v['hardware_flows']:,} hw flows, {v['aging_passes']} aging passes)"
            )
    first = out["scales"]["1M"]
    f, o = first["fornax"], first["ovs_like"]
    out["storage_ratio"] = f["software_bytes"] / o["software_bytes"]
    out["cpu_ratio"] = f["mgmt_cpu_s"] / o["mgmt_cpu_s"]
    out["ovs_like_over_fornax"] = {
        "software_bytes": o["software_bytes"] / f["software_bytes"],
        "mgmt_cpu": o["mgmt_cpu_s"] / f["mgmt_cpu_s"],
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
    r = out["ovs_like_over_fornax"]
    console.print(
        f"ovs_like / fornax at 1M sessions (same run): software bytes {r['software_bytes']:.0f}x, "
        f"management CPU {r['mgmt_cpu']:.2f}x (fornax / ovs_like: storage "
        f"{out['storage_ratio']:.4f}, CPU {out['cpu_ratio']:.3f})"
    )


if __name__ == "__main__":
    main()
