"""Astral's demo steps: the network (designs, collectives) and Seer, at demo scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from starfabric import outputs

DEMO_JOB: dict[str, Any] = {
    "model": "llama-3.1-70b",
    "execution": {
        "global_batch": 1024, "micro_batch": 1, "seq_len": 8192, "precision": "bf16",
        "tp": 8, "sp": True, "pp": 4, "vpp": 5, "zero": 1, "recompute": "selective",
    },
    "system": {"gpu": "H100", "gpus": 1024, "gpus_per_node": 8, "nic_bandwidth": "400G"},
}  # fmt: skip
"""The demo's training job: Llama-3.1-70B on 1,024 H100s (Megatron-style TP8 PP4 VPP5 DP32)."""


def network_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Build the 16K-GPU pod, compare designs, sweep an all-reduce; write astral_network.json."""
    from dataclasses import asdict

    from starfabric.astral.collectives.compare import compare_designs, plot_compare
    from starfabric.astral.collectives.fit import sweep
    from starfabric.astral.topology import ClusterSpec, build
    from starfabric.astral.topology.inventory import inventory

    spec = ClusterSpec(
        name="astral-16k", topology="astral", switch="25.6T", port_speed="200G", pods=1
    )
    topo = build(spec)
    inv = inventory(topo, spec)
    rows = compare_designs(spec, seed=seed, progress=True)
    tab = Table(title=f"designs at {topo.n_gpus:,} GPUs (1 GiB per collective)")
    for col in ("design", "workload", "hashing", "time (ms)", "busbw (GB/s)", "imbalance"):
        tab.add_column(col, justify="right")
    for r in rows:
        tab.add_row(r.design, r.workload, "polarized" if r.polarized else "ECMP",
                    f"{r.time_ms:.2f}", f"{r.busbw_gbps:.1f}", f"{r.imbalance:.2f}")  # fmt: skip
    console.print(tab)
    fig = plot_compare([r for r in rows if r.feasible])
    outputs.save_figure(fig, out / "astral_compare.png", dpi=110, bbox_inches="tight")
    sizes = [2**k for k in range(20, 31, 2)]
    curve = [asdict(r) for r in sweep(topo, "all_reduce", 1024, sizes)]
    summary = {
        "gpus": topo.n_gpus,
        "inventory": inv.as_dict(),
        "compare": [asdict(r) for r in rows],
        "allreduce_1024_sweep": curve,
    }
    outputs.write_json(out / "astral_network.json", summary, default=float)
    return {
        "gpus": topo.n_gpus,
        "designs": len({r.design for r in rows}),
        "sweep_points": len(curve),
    }


def power_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """The demo job's power at 1 ms on 1,024 H100s (PNG, Perfetto counters) with smoothing, and
    each named plant's year in a cold and a hot-humid climate; writes astral_power.json."""
    from starfabric.astral.power.plant import PRESETS, preset, simulate_year
    from starfabric.astral.power.smoothing import compare, parse_smoothing
    from starfabric.astral.power.timeline import (
        cluster_shape,
        job_timeline,
        write_counter_trace,
        write_png,
    )
    from starfabric.astral.power.weather import load_weather
    from starfabric.astral.seer import make_job, predict

    del seed
    pred = predict(make_job(DEMO_JOB["model"], DEMO_JOB["execution"], DEMO_JOB["system"]))
    tl = job_timeline(pred, cluster_shape(1024, pred.layout.pp, "H100", 8, 4000.0, 25.0, 50.0))
    rows = compare(tl, parse_smoothing("floor=0.6,ramp=20000,storage=50kWh/1000kW"))
    write_png(tl, str(out / "astral_power.png"), {r.name: r.site_w for r in rows[1:]})
    write_counter_trace(tl, str(out / "astral_power_trace.json"))
    years = {}
    tab = Table(title="annual PUE / WUE (L/kWh) of each plant at 60 % of a 10 MW design")
    for col in ("plant", "Chicago", "Tampa"):
        tab.add_column(col, justify="right")
    for name in PRESETS:
        cells = []
        for city in ("chicago", "tampa"):
            r = simulate_year(preset(name), load_weather(city), 6e6, 10e6)
            years[f"{name}/{city}"] = r.summary()
            cells.append(f"{r.pue:.3f} / {r.wue_l_per_kwh:.2f}")
        tab.add_row(name, *cells)
    console.print(tab)
    s = tl.summary()
    console.print(
        f"demo job power: site {s['site']['mean_w'] / 1e6:.2f} MW mean, swing "
        f"{s['site']['swing_w'] / 1e6:.2f} MW in the iteration, {s['job_start_step_w'] / 1e6:.2f} "
        "MW job start step"
    )
    outputs.write_json(
        out / "astral_power.json",
        {"timeline": s, "smoothing": [r.as_dict() for r in rows], "years": years},
        default=float,
    )
    return {"site_mean_mw": s["site"]["mean_w"] / 1e6, "plants": len(PRESETS)}


def seer_validation(out: Path) -> dict[str, Any]:
    """Seer on the bundled published Megatron-LM runs (as `seer validate`); writes
    out/seer_validation.json and returns its per-row errors and mean/max |error|."""
    from starfabric.astral.seer.validate import summary, validate_all

    doc = summary(*validate_all())
    outputs.write_json(out / "seer_validation.json", doc, default=float)
    return doc


def seer_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Predict the demo job's iteration and write its Perfetto timeline and breakdown; measure
    Seer's error on the published runs (the headline's "how accurate is Seer")."""
    from starfabric.astral.seer import make_job, predict, write_trace

    job = make_job(DEMO_JOB["model"], DEMO_JOB["execution"], DEMO_JOB["system"])
    pred = predict(job)
    summ = pred.summary()
    write_trace(pred, out / "seer_timeline.json")
    outputs.write_json(out / "seer_prediction.json", summ, default=float)
    tab = Table(title=f"Seer: {summ['model']} on {summ['gpus']} x {summ['gpu']}")
    tab.add_column("component")
    tab.add_column("seconds", justify="right")
    for key, val in summ["breakdown_s"].items():
        tab.add_row(key, f"{val:.4f}")
    tab.add_row("iteration", f"{summ['iteration_s']:.4f}")
    console.print(tab)
    val = seer_validation(out)
    n = len(val["rows"])
    console.print(f"published runs: {n} predicted, mean |error| {val['mean_abs_error']:.1%}, "
                  f"max {val['max_abs_error']:.1%}")  # fmt: skip
    return {
        "iteration_s": summ["iteration_s"],
        "trace": "seer_timeline.json",
        "published_runs": f"{n} of {n + len(val['not_predicted'])} predicted",
        "published_mean_error_pct": round(100 * val["mean_abs_error"], 2),
        "published_max_error_pct": round(100 * val["max_abs_error"], 2),
    }
