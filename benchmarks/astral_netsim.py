"""Benchmark: one ring all-reduce (its network step) and one all-to-all among 64K GPUs.

The pod is Astral's 51.2T same-rail pod (65,536 GPUs, 2x200G dual-ToR NICs) with per-switch
ECMP. The all-reduce is NCCL-style hierarchical; its inter-host step is a ring per rail (65,536
flows). The all-to-all uses PXN and is simulated on a sample of its shifts (see
collectives.algorithms.alltoall) with FlowSim's 2% completion tolerance. Also timed: the
congestion-blind analytical backend on the same flows, to show what congestion costs.
Printed last: flows_per_s = flows simulated to completion per wall second (flow backend).
--quick uses a 4,096-GPU rail-optimized fat-tree (64-port switches) instead.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from starfabric.astral.collectives import alltoall, hierarchical
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.topology import ClusterSpec, build


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4K GPUs instead of 64K")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    spec = (
        ClusterSpec(
            name="fat-tree-4k",
            topology="fat-tree",
            layout="rail",
            gpus=4096,
            switch="25.6T",
            port_speed="400G",
            nic="CX7-400G",
        )
        if args.quick
        else ClusterSpec(name="astral-pod-64k", topology="astral", switch="51.2T", pods=1)
    )
    t0 = time.perf_counter()
    topo = build(spec)
    build_s = time.perf_counter() - t0
    n = topo.n_gpus
    local = topo.structure.gpus_per_host if topo.structure is not None else 8
    # warm the kernels' compile cache on a tiny run so timings measure simulation
    run_plan(topo, hierarchical("all_reduce", 64, 2**20, local))

    ar_plan = hierarchical("all_reduce", n, 2**30, local)
    t0 = time.perf_counter()
    ar = run_plan(topo, ar_plan, seed=args.seed)
    allreduce_s = time.perf_counter() - t0
    ar_flows = sum(len(s) for s in ar_plan.steps)
    t0 = time.perf_counter()
    ar_an = run_plan(topo, ar_plan, seed=args.seed, backend="analytical")
    ar_an_s = time.perf_counter() - t0

    a2a_plan = alltoall(n, 2**30, local=local, pxn=True, seed=args.seed)
    t0 = time.perf_counter()
    a2a = run_plan(topo, a2a_plan, seed=args.seed, rel_tol=0.02)
    alltoall_s = time.perf_counter() - t0
    a2a_flows = sum(len(s) for s in a2a_plan.steps)
    t0 = time.perf_counter()
    a2a_an = run_plan(topo, a2a_plan, seed=args.seed, backend="analytical")
    a2a_an_s = time.perf_counter() - t0

    flows = ar_flows + a2a_flows
    out = {
        "gpus": n,
        "topology": spec.name,
        "build_s": round(build_s, 3),
        "flows": flows,
        "allreduce_step_s": round(allreduce_s, 3),
        "allreduce_sim_time_ms": ar.time_s * 1e3,
        "allreduce_busbw_gbps": ar.busbw_gbps,
        "allreduce_analytical_ms": ar_an.time_s * 1e3,
        "allreduce_analytical_wall_s": round(ar_an_s, 3),
        "alltoall_s": round(alltoall_s, 3),
        "alltoall_sim_time_ms": a2a.time_s * 1e3,
        "alltoall_sampled_shifts": a2a_plan.notes.get("sampled_shifts", 0.0),
        "alltoall_analytical_ms": a2a_an.time_s * 1e3,
        "alltoall_analytical_wall_s": round(a2a_an_s, 3),
        "congestion_penalty_alltoall": a2a.time_s / a2a_an.time_s,
        "peak_rss_gb": round(_rss_gb(), 3),
        "flows_per_s": flows / (allreduce_s + alltoall_s),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    for key, val in out.items():
        if key != "flows_per_s":
            print(f"{key}: {val}")
    print(f"flows_per_s: {out['flows_per_s']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
