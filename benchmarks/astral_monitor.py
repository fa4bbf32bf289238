"""Benchmark: the monitor's evaluation at 16,384 GPUs (--quick: 1,024): the suite (signatures
on), every class with its signature off, the gray classes and the confounders, four-layer
localizer vs an application-layer-only straggler baseline on the same synthesized telemetry.

Keys: f1, top1, fp_rate, max_localize_s, precision, recall, scenarios (the suite);
silent_top1_component, partial_top1_component, gray_top1_component (runs with a visible
impact; *_no_impact counts the others), confounder_fp_rate, confounder_named, healthy_fp_rate,
max_localize_s_all, synth_s_mean, baseline_f1, baseline_gray_silent_top1 and, printed last,
gray_silent_top1_vs_app_only = top-1 component over silent + gray runs / the baseline's (same
run, same scenarios). Targets (issue 18) at 1,024 and 16,384 GPUs: top-1 component >= 0.90 on
silent and gray, f1 >= 0.95 on the suite, false positives <= 0.02 on healthy runs and
confounders, max_localize_s <= 10.
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
from starfabric.astral.monitor.evaluate import (
    SECTIONS,
    ScenarioResult,
    healthy_twin,
    occurred,
    render_section,
    render_table,
    scenarios,
    score,
    section_scenarios,
    summarize,
    summarize_section,
    visible_impact,
)
from starfabric.astral.monitor.localize import diagnose
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.monitor.synth import SynthSpec, synthesize


def _top1(rs: list[ScenarioResult]) -> float:
    seen = [r for r in rs if r.top1_component is not None and r.impact is not False]
    return sum(bool(r.top1_component) for r in seen) / max(len(seen), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,024 GPUs instead of 16,384")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--seeds", type=int, default=3, help="seeds/placements per fault class")
    args = ap.parse_args(argv)
    if args.json is not None and args.json.is_dir():
        raise SystemExit(f"error: --json {args.json} is a folder; give a file path")
    gpus = 1024 if args.quick else 16384
    suites = {"suite": scenarios(gpus, seeds=args.seeds)}
    for sec in SECTIONS[1:]:
        suites[sec] = section_scenarios(sec, gpus, args.seeds)
    full: dict[str, list[ScenarioResult]] = {k: [] for k in suites}
    base: dict[str, list[ScenarioResult]] = {k: [] for k in suites}
    synth_s: list[float] = []
    con = Console(stderr=True)
    total = sum(len(v) for v in suites.values())
    with Progress(console=con, transient=True) as prog:
        task = prog.add_task(f"monitor evaluation at {gpus} GPUs", total=total)
        for sec, suite in suites.items():
            twins: dict[int, TelemetryStore] = {}
            for sc in suite:
                spec = SynthSpec(
                    gpus=gpus, seed=sc.seed, placement_seed=sc.placement_seed, ms_series=False
                )
                twin = None
                if sec in ("silent", "partial", "gray"):
                    if sc.seed not in twins:
                        for t in twins.values():
                            t.close()
                        twins = {sc.seed: healthy_twin(gpus, sc)}
                    twin = twins[sc.seed]
                with TelemetryStore() as st:
                    t0 = time.perf_counter()
                    summ = synthesize(spec, list(sc.faults), st)
                    synth_s.append(time.perf_counter() - t0)
                    seen = occurred(sc, summ)
                    impact = visible_impact(st, twin) if twin is not None else None
                    for out, loc in ((full, diagnose), (base, diagnose_app_only)):
                        r = score(seen, loc(st))
                        r.impact = impact
                        out[sec].append(r)
                prog.advance(task)
            for t in twins.values():
                t.close()
    s = summarize(full["suite"])
    b = summarize(base["suite"])
    s["gpus"] = gpus
    out_con = Console()
    out_con.print(render_table(full["suite"], s))
    secs = {k: summarize_section(k, full[k]) for k in SECTIONS[1:]}
    for k, v in secs.items():
        v["gpus"] = gpus
        out_con.print(render_section(k, full[k], v))
    gray_silent = full["silent"] + full["gray"]
    base_gs = base["silent"] + base["gray"]
    out = {
        "gpus": gpus,
        "scenarios": s["scenarios"],
        "f1": s["f1"],
        "precision": s["precision"],
        "recall": s["recall"],
        "top1": s["top1"],
        "fp_rate": s["fp_rate"],
        "healthy_fp_rate": s["fp_rate"],
        "max_localize_s": s["max_localize_s"],
        "mean_localize_s": s["mean_localize_s"],
        "silent_top1_component": secs["silent"]["top1_component"],
        "silent_no_impact": secs["silent"]["no_impact"],
        "partial_top1_component": secs["partial"]["top1_component"],
        "partial_no_impact": secs["partial"]["no_impact"],
        "gray_top1_component": secs["gray"]["top1_component"],
        "gray_no_impact": secs["gray"]["no_impact"],
        "confounder_fp_rate": secs["confounders"]["fp_rate"],
        "confounder_named": secs["confounders"]["named"],
        "max_localize_s_all": max(
            [s["max_localize_s"]] + [v["max_localize_s"] for v in secs.values()]
        ),
        "synth_s_mean": sum(synth_s) / len(synth_s),
        "baseline_f1": b["f1"],
        "baseline_top1": b["top1"],
        "gray_silent_top1": _top1(gray_silent),
        "baseline_gray_silent_top1": _top1(base_gs),
    }
    out["gray_silent_top1_vs_app_only"] = out["gray_silent_top1"] / max(
        out["baseline_gray_silent_top1"], 1e-9
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(out, indent=1))
        tmp.replace(args.json)
    for k in (
        "f1",
        "top1",
        "fp_rate",
        "silent_top1_component",
        "partial_top1_component",
        "gray_top1_component",
        "confounder_fp_rate",
        "confounder_named",
        "max_localize_s_all",
        "baseline_gray_silent_top1",
    ):
        print(f"{k}: {out[k]:.4f}")
    print(
        f"gray_silent_top1_vs_app_only: {out['gray_silent_top1_vs_app_only']:.2f}x "
        "(four layers vs application layer only, silent + gray runs)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
