"""Run one experiment or all of them at a scale, in one process, and assemble the JSON
(`all` adds the headline ratios: storage_ratio, cpu_ratio, zero_drop_cps_ratio)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from starfabric.fornax.baselines.ovs_calibration import BUILTIN_CALIBRATION, OvsCalibration
from starfabric.fornax.experiments.contenders import default_contenders
from starfabric.fornax.experiments.harness import Contender, Context
from starfabric.fornax.experiments.output import print_result, write_png
from starfabric.fornax.experiments.registry import EXPERIMENTS, get_experiment
from starfabric.fornax.experiments.scales import Scale, get_scale

#: The software-centric baseline the headline ratios are taken against (the issue's margins).
HEADLINE_BASELINE = "ovs_like"


def names_for(name: str) -> list[str]:
    """Experiment names `name` stands for: `all` (every registered one, in order), one name,
    or a comma-separated list."""
    if name == "all":
        return list(EXPERIMENTS)
    return [get_experiment(part.strip()).name for part in name.split(",")]


def headline(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Fornax / OVS-like: software bytes (E1) and management CPU (E2) at the largest size,
    highest zero-drop CPS (E3)."""

    def pick(exp: str) -> float | None:
        r = results.get(exp)
        if r is None:
            return None
        v = r["summary"].get("ratio_vs", {}).get(HEADLINE_BASELINE)
        return None if v is None else float(v)

    return {"storage_ratio": pick("E1"), "cpu_ratio": pick("E2"),
            "zero_drop_cps_ratio": pick("E3")}  # fmt: skip


def run_experiments(
    name: str,
    scale: str | Scale,
    *,
    out_dir: Path | None = None,
    console: Console | None = None,
    progress: Any = None,
    contenders: list[Contender] | None = None,
    on_result: Callable[[dict[str, Any]], object] | None = None,
    ovs_calibration: OvsCalibration | None = None,
) -> dict[str, Any]:
    """Run `name` (or `all`) at `scale` (a name or a Scale); prints a table per experiment when `console` is
    given, writes `out_dir/NAME.png`; returns the JSON document (`complete`: True).
    `on_result(doc)` receives the document so far after each experiment (`complete`: False),
    so a caller can write partial results. The OVS-like contenders run with `ovs_calibration`
    (None: the built-in one); the document's `ovs_calibration` says which ran and whose it is."""
    names = names_for(name)
    sc = scale if isinstance(scale, Scale) else get_scale(scale)
    cal = ovs_calibration if ovs_calibration is not None else BUILTIN_CALIBRATION
    if contenders is None:
        contenders = default_contenders(ovs_calibration)
    ctx = Context(sc, contenders, progress, ovs_calibration=cal)
    doc: dict[str, Any] = {"scale": sc.name, "contenders": [c.name for c in ctx.contenders],
                           "ovs_calibration": cal.report(), "experiments": {}}  # fmt: skip
    if console is not None:
        console.print(f"OVS-like model: {cal.describe()}", markup=False)
    t0 = time.perf_counter()
    for n in names:
        exp = EXPERIMENTS[n]
        t = time.perf_counter()
        res = exp.run(ctx)
        d = res.as_dict()
        d["wall_s"] = time.perf_counter() - t
        if out_dir is not None:
            d["plot"] = str(write_png(res, exp.plot, out_dir / f"{n}.png"))
        doc["experiments"][n] = d
        if console is not None:
            print_result(console, res)
        if on_result is not None:  # partial results survive a later failure or interrupt
            on_result({**doc, **_headline_of(name, names, doc), "complete": False})
    doc["wall_s"] = time.perf_counter() - t0
    doc.update(_headline_of(name, names, doc))
    doc["complete"] = True
    return doc


def _headline_of(name: str, names: list[str], doc: dict[str, Any]) -> dict[str, Any]:
    if name == "all" or {"E1", "E2", "E3"} & set(names):
        return dict(headline(doc["experiments"]))
    return {}


__all__ = ["HEADLINE_BASELINE", "headline", "names_for", "run_experiments"]
