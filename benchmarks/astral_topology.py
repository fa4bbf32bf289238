"""Benchmark: build Astral's 512K-GPU cluster with its inventory, route 1M random GPU pairs, and
build one 64K-GPU pod as arrays vs as a networkx graph from the same wiring.

Prints the figures and, last, speedup_vs_networkx = networkx build time / our build time of
the same pod (same run, same machine). --quick routes fewer pairs and compares a 16K-GPU pod.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from rich.progress import Progress

from starfabric.astral.routing import route_flows
from starfabric.astral.topology import ClusterSpec, build
from starfabric.astral.topology.export import to_networkx
from starfabric.astral.topology.inventory import inventory


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer pairs, 16K-GPU pod for networkx")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    pairs = 200_000 if args.quick else 1_000_000
    pod_spec = (
        ClusterSpec(name="pod-16k", switch="25.6T", pods=1)
        if args.quick
        else ClusterSpec(name="pod-64k", switch="51.2T", pods=1)
    )
    out: dict[str, float | int | str] = {"quick": int(args.quick), "pairs": pairs}
    with Progress(transient=True) as prog:
        task = prog.add_task("astral topology benchmark", total=5)
        build(ClusterSpec(switch="25.6T", pods=1))  # warm caches and imports
        spec = ClusterSpec(name="astral-512k", pods=8)
        t0 = time.perf_counter()
        topo = build(spec)
        inv = inventory(topo, spec)
        out["build_s"] = time.perf_counter() - t0
        out["gpus"] = topo.n_gpus
        out["switches"] = sum(inv.switches.values())
        out["links"] = topo.n_links
        prog.advance(task)
        rng = np.random.default_rng(args.seed)
        src = rng.integers(0, topo.n_gpus, pairs)
        dst = rng.integers(0, topo.n_gpus, pairs)
        fh = rng.integers(0, 2**63, pairs, dtype=np.int64).astype(np.uint64)
        route_flows(topo, src[:100], dst[:100], fh[:100])  # compile (cached) kernels
        t0 = time.perf_counter()
        r = route_flows(topo, src, dst, fh)
        route_s = time.perf_counter() - t0
        out["route_s"] = route_s
        out["route_pairs_per_s"] = pairs / route_s
        out["route_reachable"] = float(r.reachable.mean())
        out["peak_rss_gb"] = _rss_gb()
        del topo, r
        prog.advance(task)
        ours = []
        for _ in range(3):
            t0 = time.perf_counter()
            pod = build(pod_spec)
            ours.append(time.perf_counter() - t0)
        out["pod_gpus"] = pod.n_gpus
        out["pod_build_s"] = statistics.median(ours)
        prog.advance(task)
        prog.update(task, description=f"networkx build of the {pod.n_gpus:,}-GPU pod")
        t0 = time.perf_counter()
        g = to_networkx(pod)
        out["networkx_build_s"] = time.perf_counter() - t0
        out["networkx_edges"] = g.number_of_edges()
        del g
        prog.advance(task, 2)
    out["peak_rss_gb_with_networkx"] = _rss_gb()
    out["speedup_vs_networkx"] = float(out["networkx_build_s"]) / float(out["pod_build_s"])
    out["cpu_count"] = os.cpu_count() or 0
    for key in ("gpus", "build_s", "route_pairs_per_s", "peak_rss_gb", "pod_gpus", "pod_build_s",
                "networkx_build_s"):  # fmt: skip
        val = out[key]
        print(f"{key}: {val:,.3f}" if isinstance(val, float) else f"{key}: {val:,}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"speedup_vs_networkx: {out['speedup_vs_networkx']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
