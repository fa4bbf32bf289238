"""Benchmark: NCCL's algorithms on topologies against real nccl-tests logs and at scale.

1. Every nccl-tests log in tests/data/nccl_tests with a cluster file in tests/data/nccl_hardware:
   `sim collective`'s model (NCCL tuner choice, pipelined plan, flow-level network, no
   fitting) against the log's busbw at every size >= 64 MiB; for the one-domain NVLS logs also
   NCCL's own tuner estimate on the NVLS graph its search builds there (collectives/search.py).
2. all_reduce of 1 GiB on 1,024 and 4,096 GPUs of an H100 fat-tree with one 400G NIC per GPU
   (tests/data/clusters/fat-tree-h100-4k.yaml), RoCE and IB transport, against the 400 GB/s
   line-rate bound (NIC rate x NICs per host), split into bandwidth part, NCCL's latency
   (tuning.cc) and the pipeline fill, beside NCCL's own tuner estimate.
Printed last: the 1,024-GPU IB all_reduce busbw over 400 GB/s.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from starfabric.astral.collectives import nccl as N
from starfabric.astral.collectives.plan import Plan
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.collectives.search import nvls_domain_graph
from starfabric.astral.nccltests import parse_nccl_tests
from starfabric.astral.topology import ClusterSpec, Topology, build
from starfabric.config import load_spec

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "nccl_tests"
HW = ROOT / "tests" / "data" / "nccl_hardware"
LINE_RATE_BOUND_GBPS = 400.0

SEARCH_SPEED_SM90_GBS = 48.0
"""sm90SpeedArrayInter[0] (search.cc): the fastest per-channel rate NCCL's search tries on Hopper
across nodes, the one a 400G (50 GB/s) NIC per channel reaches."""

H100_400G_GRAPHS = {
    # one channel per NIC at 48 GB/s; not duplicated (bwIntra 48 < 50 with 8 > 4 channels on
    # sm90, ncclTopoDupChannels), so 16 coll channels run but the tuner counts 8 x 48
    "ring": N.SearchGraph(8, SEARCH_SPEED_SM90_GBS, SEARCH_SPEED_SM90_GBS),
    "tree": N.SearchGraph(8, SEARCH_SPEED_SM90_GBS, SEARCH_SPEED_SM90_GBS),
    # NVLS-tree reads nvlsGraph: one channel per head (8), never duplicated; multi-node NVLS
    # searches with the inter speed array (48 / 48 taken; the estimate is the same for any
    # bwIntra >= 30.6 and bwInter >= 45.5, where perChMaxNVLSTreeBw binds)
    "nvls_tree": N.SearchGraph(8, SEARCH_SPEED_SM90_GBS, SEARCH_SPEED_SM90_GBS),
}
"""NCCL's search graphs on an H100 host with 8 x 400G NICs (search.cc, as worked out in
docs/astral.md 'at scale: why not 400'), beside the shape approximation `auto` uses."""

SCALE_ALGOS = ("nvls_tree", "tree", "ring")


def logs() -> list[dict[str, object]]:
    index = yaml.safe_load((HW / "logs.yaml").read_text())["logs"]
    out = []
    for name, entry in index.items():
        run = parse_nccl_tests(DATA / name).at_least(64 * 2**20)
        spec = load_spec(ClusterSpec, HW / entry["cluster"])
        topo = build(spec)
        env = entry.get("nccl_env") or {}  # what the log's published job set (logs.yaml)
        shape = N.with_nccl_env(N.shape_of(topo, int(entry["gpus"])), env, "logs.yaml nccl_env")
        rows = []
        algo = str(entry.get("algo", "auto"))  # NCCL_ALGO where the run forced it
        for size, meas in zip(run.size_bytes, run.busbw_mean_gbps, strict=True):
            plan = N.nccl_collective(run.collective, shape, float(size), algo)
            res = run_plan(topo, plan, transport=spec.transport, rel_tol=0.02)
            row: dict[str, object] = {
                "size_bytes": int(size),
                "algorithm": plan.algorithm,
                "busbw_gbps": res.busbw_gbps,
                "measured_gbps": float(meas),
                "rel_err": res.busbw_gbps / float(meas) - 1.0,
            }
            if plan.algorithm == "nvls" and run.collective == "all_reduce":
                # NCCL's own estimate on the NVLS graph its search builds in one domain
                t = N.tuner_time_s(
                    "all_reduce", "nvls", "Simple", float(size), shape, nvls_domain_graph(shape)
                )
                tuner = busbw_gbps(plan, float(size), t)
                row["tuner_busbw_gbps"] = tuner
                row["tuner_rel_err"] = tuner / float(meas) - 1.0
            rows.append(row)
        out.append({"log": name, "collective": run.collective, "rows": rows})
    return out


def busbw_gbps(plan: Plan, size: float, time_s: float) -> float:
    """nccl-tests' bus bandwidth of `size` bytes in time_s (the plan's bus factor): what the
    tuner's time estimates are set beside the model and the logs in."""
    return size * plan.bus_factor / time_s / 1e9


FAT_TREE = ROOT / "tests" / "data" / "clusters" / "fat-tree-h100-4k.yaml"


def fat_tree() -> Topology:
    """The 4,096-GPU H100 fat-tree both at-scale sections run on (built once)."""
    return build(load_spec(ClusterSpec, FAT_TREE))


def scale(topo: Topology) -> list[dict[str, object]]:
    out = []
    for gpus in (1024, 4096):
        shape = N.shape_of(topo, gpus)
        plan = N.nccl_collective("all_reduce", shape, 2.0**30)
        for transport in ("roce", "ib"):
            t0 = time.perf_counter()
            res = run_plan(topo, plan, transport=transport, rel_tol=0.02)
            size = 2.0**30
            tuner_s = N.tuner_time_s(
                "all_reduce",
                plan.algorithm,
                "Simple",
                size,
                shape,
                H100_400G_GRAPHS[plan.algorithm],
            )
            shape_s = N.tuner_time_s("all_reduce", plan.algorithm, "Simple", size, shape)
            bw_us = res.steps[0].time_s * 1e6
            lat_us = plan.notes.get("latency_s", 0.0) * 1e6
            out.append(
                {
                    "gpus": gpus,
                    "transport": transport,
                    "algorithm": plan.algorithm,
                    "busbw_gbps": res.busbw_gbps,
                    "bandwidth_part_us": bw_us,
                    "nccl_latency_us": lat_us,
                    "fill_and_step_us": res.time_s * 1e6 - bw_us - lat_us,
                    "time_us": res.time_s * 1e6,
                    # NCCL's own cost model (tuning.cc: latency + bytes / busbw) on its search
                    # graphs, and on the shape approximation `auto` ranks with
                    "tuner_busbw_gbps": busbw_gbps(plan, size, tuner_s),
                    "tuner_shape_busbw_gbps": busbw_gbps(plan, size, shape_s),
                    "wall_s": time.perf_counter() - t0,
                }
            )
    return out


def per_algorithm(topo: Topology) -> list[dict[str, object]]:
    """Each algorithm NCCL could run at 1,024 / 4,096 GPUs (1 GiB, Simple): the model's plan
    (IB) beside NCCL's tuner estimate on its search graphs and on the shape approximation."""
    size = 2.0**30
    out = []
    for gpus in (1024, 4096):
        shape = N.shape_of(topo, gpus)
        for algo in SCALE_ALGOS:
            plan = N.nccl_collective("all_reduce", shape, size, algo, "Simple")
            res = run_plan(topo, plan, transport="ib", rel_tol=0.02)
            graph = H100_400G_GRAPHS[algo]
            t_graph = N.tuner_time_s("all_reduce", algo, "Simple", size, shape, graph)
            t_shape = N.tuner_time_s("all_reduce", algo, "Simple", size, shape)
            lat = N.tuner_time_s("all_reduce", algo, "Simple", 0.0, shape, graph)
            out.append(
                {
                    "gpus": gpus,
                    "algorithm": algo,
                    "model_busbw_gbps": res.busbw_gbps,
                    "tuner_busbw_gbps": busbw_gbps(plan, size, t_graph),
                    "tuner_latency_us": lat * 1e6,
                    "tuner_shape_busbw_gbps": busbw_gbps(plan, size, t_shape),
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    per_log = logs()
    topo = fat_tree()
    at_scale = scale(topo)
    algos = per_algorithm(topo)
    for entry in per_log:
        rows = entry["rows"]
        assert isinstance(rows, list)
        worst = max(abs(r["rel_err"]) for r in rows)
        big = [abs(r["rel_err"]) for r in rows if r["size_bytes"] >= 2**30]
        print(
            f"{entry['log']:<62} {rows[0]['algorithm']:<10} worst>=64MiB {worst:6.1%}"
            f"  worst>=1GiB {max(big) if big else float('nan'):6.1%}"
        )
    for entry in per_log:  # one NVLink domain: NCCL's tuner beside the model and the log
        rows = entry["rows"]
        assert isinstance(rows, list)
        tuned = [r for r in rows if "tuner_rel_err" in r]
        if tuned:
            print(
                f"{entry['log']:<62} nvls: model / NCCL's tuner on its NVLS graph vs log: "
                + ", ".join(
                    f"{r['size_bytes'] / 2**20:.0f} MiB {r['rel_err']:+.1%} / "
                    f"{r['tuner_rel_err']:+.1%}"
                    for r in tuned
                )
            )
    for r in at_scale:
        print(
            f"fat-tree {r['gpus']:>5} GPUs {r['transport']:<4} {r['algorithm']}: busbw "
            f"{r['busbw_gbps']:.1f} GB/s (bandwidth {r['bandwidth_part_us']:.0f} + NCCL latency "
            f"{r['nccl_latency_us']:.0f} + fill {r['fill_and_step_us']:.0f} = {r['time_us']:.0f} us;"
            f" NCCL's tuner model {r['tuner_busbw_gbps']:.1f} GB/s on its search graphs,"
            f" {r['tuner_shape_busbw_gbps']:.1f} as `auto` approximates it)"
        )
    for r in algos:
        print(
            f"fat-tree {r['gpus']:>5} GPUs ib --algo {r['algorithm']:<9}: model "
            f"{r['model_busbw_gbps']:6.1f} GB/s; NCCL tuner {r['tuner_busbw_gbps']:6.1f} "
            f"(latency {r['tuner_latency_us']:.0f} us; shape approximation "
            f"{r['tuner_shape_busbw_gbps']:.1f})"
        )
    ref = next(r for r in at_scale if r["gpus"] == 1024 and r["transport"] == "ib")
    out = {
        "logs": per_log,
        "scale": at_scale,
        "per_algorithm": algos,
        "wall_s": time.perf_counter() - t0,
        "busbw_over_line_rate_1024_ib": float(ref["busbw_gbps"]) / LINE_RATE_BOUND_GBPS,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"busbw_over_line_rate_1024_ib: {out['busbw_over_line_rate_1024_ib']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
