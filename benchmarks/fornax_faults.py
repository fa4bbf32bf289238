"""Benchmark Fornax fault tolerance on a filled table (the experiments' background sessions):

  patrol_entries_per_s        hardware sessions the patrol inspects per wall second (dump,
                              key-consistency query, policy re-decision and compare),
  dump_entries_per_s          the same table read by plain dumps (the reference),
  ecc_rebuild_per_s           uncorrectable entries rebuilt per second (first hit -> event ->
                              policy-confirmed rebuild -> re-insert),
  hw_pps / failover_pps       packets/s of the same established sessions through hardware and,
                              with every port failed over, through software forwarding (after
                              the sessions were taken over), wall clock,
and prints failover_pps / hw_pps (software failover capacity vs the hardware path, same run)
LAST.

    python benchmarks/fornax_faults.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from starfabric.fornax.engine import FastEngine
from starfabric.fornax.engine import layout as L
from starfabric.fornax.experiments import traffic
from starfabric.fornax.manager import Final, HealthConfig, ResilientManager, patrol_step
from starfabric.fornax.softpath import SoftPathConfig
from starfabric.fornax.vpc import compile_policy

#: Fill rate below the manager's setup budget (4M/s), so every session ends up in hardware.
FILL_CPS = 2.0e6


def filled(n: int) -> tuple[ResilientManager, FastEngine, int]:
    """A manager over an engine holding n background sessions; returns the clock (ns)."""
    eng = FastEngine(capacity=max(1024, -(-int(n * 1.5) // 8) * 8), ring_capacity=1 << 20)
    sp = SoftPathConfig(capacity=max(1024, n), max_pps=1e12)
    m = ResilientManager(eng, compile_policy(traffic.vpc_spec(n)), softpath_config=sp,
                         health=HealthConfig(patrol_rate=1.0))  # fmt: skip
    for b in traffic.background_fill_batches(n, 0, FILL_CPS):
        m.process(b)
    now = int(n * 1e9 / FILL_CPS) + 1
    m.tick(now)
    return m, eng, now


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64k sessions instead of 1M")
    ap.add_argument("--json", type=Path, help="write the figures as JSON")
    args = ap.parse_args()
    console = Console(highlight=False)
    n = 1 << 16 if args.quick else 1 << 20
    out: dict[str, Any] = {"sessions": n}
    m, eng, now = filled(n)
    occupied = eng.occupancy()
    cap = eng.config.capacity
    # plain dumps (reference) and the patrol over the whole table
    t0 = time.perf_counter()
    cursor, read = 0, 0
    while cursor < cap:
        recs, cursor = eng.dump(cursor, 4096)
        read += len(recs)
    out["dump_entries_per_s"] = read / (time.perf_counter() - t0)
    m.patrol_cursor = 0
    t0 = time.perf_counter()
    r = patrol_step(m, occupied, chunk=4096)
    out["patrol_entries_per_s"] = r["entries"] / (time.perf_counter() - t0)
    out["patrol_found"] = {k: r[k] for k in ("key_inconsistent", "policy_drift")}
    # hardware path, then every port failed over to software
    ids = np.arange(n, dtype=np.int64)
    hw = traffic.keepalive(ids, now, now + n * 100)
    t0 = time.perf_counter()
    f = m.process(hw)
    out["hw_pps"] = n / (time.perf_counter() - t0)
    out["hw_forwarded_share"] = float((f.final == Final.HW_FORWARDED).mean())
    m.health.port_failed[:] = True
    now += n * 200
    m.process(traffic.keepalive(ids, now, now + n * 100))  # takes every session over
    now += n * 200
    t0 = time.perf_counter()
    f = m.process(traffic.keepalive(ids, now, now + n * 100))
    out["failover_pps"] = n / (time.perf_counter() - t0)
    out["failover_forwarded_share"] = float((f.final == Final.SW_FORWARDED).mean())
    # ECC rebuild: uncorrectable errors in k hardware entries, each found by its next packet
    m2, eng2, now2 = filled(min(n, 1 << 16))
    k = 4096
    rng = np.random.default_rng(1)
    slots = rng.choice(eng2.dump(0, eng2.config.capacity)[0]["slot"], k, replace=False)
    for s in slots:
        eng2.flip_bits(int(s), [L.W_BYTES0 * 64 + 1, L.W_BYTES1 * 64 + 2])
    t0 = time.perf_counter()
    m2.process(traffic.keepalive(np.arange(min(n, 1 << 16)), now2, now2 + 10**8))
    dt = time.perf_counter() - t0
    out["ecc_rebuilt"] = int(m2.metrics.counts.get("ecc_rebuilt", 0))
    out["ecc_rebuild_per_s"] = out["ecc_rebuilt"] / dt
    out["ratio_failover_vs_hw_pps"] = out["failover_pps"] / out["hw_pps"]
    console.print(
        f"{n:,} sessions: patrol {out['patrol_entries_per_s']:,.0f} entries/s "
        f"(plain dump {out['dump_entries_per_s']:,.0f}/s), ECC rebuild "
        f"{out['ecc_rebuild_per_s']:,.0f}/s ({out['ecc_rebuilt']} rebuilt), hardware "
        f"{out['hw_pps']:,.0f} pkt/s, software failover {out['failover_pps']:,.0f} pkt/s "
        f"({out['failover_forwarded_share']:.3f} forwarded)"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
    console.print(
        f"software failover / hardware forwarding pkt/s (same sessions, same run): "
        f"{out['ratio_failover_vs_hw_pps']:.3f}"
    )


if __name__ == "__main__":
    main()
