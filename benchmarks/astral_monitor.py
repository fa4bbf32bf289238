"""Benchmark: the monitor's scenario suite at 16,384 GPUs (--quick: 1,024), four-layer
localizer vs an application-layer-only straggler baseline on the same synthesized telemetry.

Keys: f1, top1, fp_rate, max_localize_s, precision, recall, scenarios, gpus, synth_s_mean,
baseline_f1, baseline_top1 and, printed last, f1_vs_app_only = f1 / baseline_f1 (same run,
same scenarios). Targets (issue 9): f1 >= 0.95, top1 >= 0.90, fp_rate <= 0.02,
max_localize_s <= 10 at 16K GPUs with >= 3 scenarios per fault class.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from starfabric.astral.monitor.baseline import diagnose_app_only
from starfabric.astral.monitor.evaluate import occurred, render_table, scenarios, score, summarize
from starfabric.astral.monitor.localize import diagnose
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.monitor.synth import SynthSpec, synthesize


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,024 GPUs instead of 16,384")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--seeds", type=int, default=3, help="seeds/placements per fault class")
    args = ap.parse_args(argv)
    gpus = 1024 if args.quick else 16384
    suite = scenarios(gpus, seeds=args.seeds)
    full, base, synth_s = [], [], []
    con = Console(stderr=True)
    with Progress(console=con, transient=True) as prog:
        task = prog.add_task(f"monitor suite at {gpus} GPUs", total=len(suite))
        for sc in suite:
            spec = SynthSpec(
                gpus=gpus, seed=sc.seed, placement_seed=sc.placement_seed, ms_series=False
            )
            with TelemetryStore() as st:
                t0 = time.perf_counter()
                summ = synthesize(spec, list(sc.faults), st)
                synth_s.append(time.perf_counter() - t0)
                seen = occurred(sc, summ)
                full.append(score(seen, diagnose(st)))
                base.append(score(seen, diagnose_app_only(st)))
            prog.advance(task)
    s = summarize(full)
    b = summarize(base)
    s["gpus"] = gpus
    Console().print(render_table(full, s))
    out = {
        "gpus": gpus,
        "scenarios": s["scenarios"],
        "f1": s["f1"],
        "precision": s["precision"],
        "recall": s["recall"],
        "top1": s["top1"],
        "fp_rate": s["fp_rate"],
        "max_localize_s": s["max_localize_s"],
        "mean_localize_s": s["mean_localize_s"],
        "synth_s_mean": sum(synth_s) / len(synth_s),
        "baseline_f1": b["f1"],
        "baseline_top1": b["top1"],
        "f1_vs_app_only": s["f1"] / max(b["f1"], 1e-9),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    for k in ("f1", "top1", "fp_rate", "max_localize_s", "baseline_f1"):
        print(f"{k}: {out[k]:.4f}")
    print(f"f1_vs_app_only: {out['f1_vs_app_only']:.2f}x (four layers vs application layer only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
