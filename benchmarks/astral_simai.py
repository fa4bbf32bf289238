"""Benchmark: starfabric's collectives beside Alibaba's SimAI on the same workload and fabric.

SimAI (github.com/aliyun/SimAI) is built outside this repository (`./scripts/build.sh -c ns3`
or `-c analytical`); pass its binary with --simai-bin. Without one the benchmark says why it
skips and writes that to --json. With one, for each GPU count: SimAI's topology generator
(`astra-sim-alibabacloud/inputs/topo/gen_Topo_Template.py`, Spectrum-X, H100, 400 Gb/s NICs)
builds the fabric, a one-layer micro workload in SimAI's format (as `example/microAllReduce.txt`)
holds the collective, and SimAI's EndToEnd CSV gives its busbw; starfabric runs the same
collective (NCCL's tuner choice) on a rail-optimized fat-tree of the same GPUs and NICs.
Printed last: SimAI wall time over starfabric's at the largest GPU count.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from starfabric.astral.collectives import nccl as N
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.topology import ClusterSpec, build
from starfabric.errors import DataError

OPS = {"all_reduce": "ALLREDUCE", "alltoall": "ALLTOALL"}


def simai_workload(op: str, gpus: int, size: int) -> str:
    """One layer whose forward pass is the collective over all GPUs (SimAI's micro format)."""
    header = (
        f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {gpus} ep: 1 pp: 1 vpp: 1 "
        f"ga: 1 all_gpus: {gpus} checkpoints: 0 checkpoint_initiates: 0"
    )
    row = f"micro_layer -1 1 {OPS[op]} {size} 1 NONE 0 1 NONE 0 1"
    return f"{header}\n1\n{row}\n"


def simai_busbw(folder: Path) -> float:
    """The forward collective's busbw from SimAI's EndToEnd CSV (columns named in its header)."""
    files = sorted(folder.glob("*EndToEnd*.csv"))
    if not files:
        raise DataError(f"{folder}: SimAI wrote no *EndToEnd*.csv", fix="check the SimAI run")
    with files[-1].open() as fh:
        rows = list(csv.reader(fh))
    head = [c.strip() for c in rows[0]]
    if "busbw" not in head or len(rows) < 2:
        raise DataError(f"{files[-1]}: no busbw column or no row", fix="check the SimAI version")
    return float(rows[1][head.index("busbw")])


def run_simai(binary: Path, root: Path, op: str, gpus: int, size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="sf21-simai-") as tmp:
        work = Path(tmp)
        gen = root / "astra-sim-alibabacloud" / "inputs" / "topo" / "gen_Topo_Template.py"
        subprocess.run(
            ["python3", str(gen), "-topo", "Spectrum-X", "-g", str(gpus), "-gt", "H100",
             "-bw", "400Gbps", "-nvbw", "2880Gbps"],
            cwd=work, check=True, capture_output=True,
        )  # fmt: skip
        topo = max((p for p in work.iterdir() if p.is_file()), key=lambda p: p.stat().st_mtime)
        wl = work / "workload.txt"
        wl.write_text(simai_workload(op, gpus, size))
        conf = root / "astra-sim-alibabacloud" / "inputs" / "config" / "SimAI.conf"
        env = dict(os.environ, AS_SEND_LAT="3", AS_NVLS_ENABLE="1")
        t0 = time.perf_counter()
        subprocess.run(
            [str(binary), "-t", "8", "-w", str(wl), "-n", str(topo), "-c", str(conf)],
            cwd=work, env=env, check=True, capture_output=True,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        return {"busbw_gbps": simai_busbw(work), "wall_s": wall}


def run_ours(op: str, gpus: int, size: int) -> dict[str, float]:
    spec = ClusterSpec(
        name="fat-tree-rail",
        topology="fat-tree",
        layout="rail",
        gpu="H100",
        switch="51.2T",
        port_speed="400G",
        nic="CX7-400G",
        dual_tor=False,
        gpus=4096,
    )
    topo = build(spec)
    t0 = time.perf_counter()
    plan = N.nccl_collective(op, N.shape_of(topo, gpus), float(size))
    res = run_plan(topo, plan, transport="roce", rel_tol=0.02)
    return {"busbw_gbps": res.busbw_gbps, "wall_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--simai-bin", type=Path, default=None, help="SimAI_simulator binary")
    ap.add_argument("--simai-root", type=Path, default=None, help="SimAI checkout (bin/..)")
    ap.add_argument("--op", choices=sorted(OPS), default="all_reduce")
    ap.add_argument("--gpus", default="16,64,128", help="GPU counts, comma-separated")
    ap.add_argument("--size", type=int, default=2**30, help="bytes (nccl-tests size)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    gpus = [int(x) for x in args.gpus.split(",") if x.strip()]
    out: dict[str, object] = {"op": args.op, "size_bytes": args.size}
    if args.simai_bin is None or not args.simai_bin.is_file():
        why = (
            "no SimAI binary given (--simai-bin)"
            if args.simai_bin is None
            else f"{args.simai_bin} is not a file"
        )
        out["skipped"] = (
            f"{why}: build aliyun/SimAI outside this repository (./scripts/build.sh -c ns3) "
            "and pass bin/SimAI_simulator"
        )
        print(f"skipped: {out['skipped']}")
    else:
        root = args.simai_root or args.simai_bin.resolve().parent.parent
        rows = []
        for g in gpus:
            theirs = run_simai(args.simai_bin, root, args.op, g, args.size)
            ours = run_ours(args.op, g, args.size)
            rows.append({"gpus": g, "simai": theirs, "starfabric": ours})
            print(
                f"{g:>6} GPUs  SimAI busbw {theirs['busbw_gbps']:8.1f} GB/s in "
                f"{theirs['wall_s']:8.1f} s   starfabric {ours['busbw_gbps']:8.1f} GB/s in "
                f"{ours['wall_s']:6.2f} s"
            )
        out["rows"] = rows
        last = rows[-1]
        out["wall_ratio"] = last["simai"]["wall_s"] / max(last["starfabric"]["wall_s"], 1e-9)
        print(f"wall_ratio_simai_over_starfabric: {out['wall_ratio']:.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
