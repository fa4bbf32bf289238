"""The demo's steps: each subsystem contributes one function that runs at demo scale.

A step takes the output folder, a seed and a console, writes its files and returns a small
summary mapping; `run_demo` runs them in order and writes `summary.json`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from starfabric import outputs
from starfabric.report.demo_page import demo_report

DemoStep = Callable[[Path, int, Console], dict[str, Any]]


def _steps() -> list[tuple[str, DemoStep]]:
    """The demo's steps in order, imported lazily so `--help` stays fast."""
    from starfabric.astral.demo import network_demo, power_demo, seer_demo
    from starfabric.astral.monitor.demo import monitor_demo
    from starfabric.fornax.demo.chaos import chaos_demo
    from starfabric.fornax.demo.engine import engine_demo
    from starfabric.fornax.demo.manager import manager_demo
    from starfabric.fornax.experiments.demo import baselines_demo

    return [
        ("fornax engine", engine_demo),
        ("fornax manager", manager_demo),
        ("fornax vs baselines", baselines_demo),
        ("fornax chaos", chaos_demo),
        ("astral network", network_demo),
        ("astral seer", seer_demo),
        ("astral power", power_demo),
        ("astral monitor", monitor_demo),
    ]


def run_demo(out: Path, *, seed: int = 1, console: Console | None = None) -> dict[str, Any]:
    """Run every step, write out/summary.json, return the summaries by step name."""
    console = console or Console()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    for name, step in _steps():
        console.rule(f"[bold]{name}")
        t0 = time.perf_counter()
        result = step(out, seed, console)
        result["wall_s"] = round(time.perf_counter() - t0, 3)
        summary[name] = result
    outputs.write_json(out / "summary.json", summary)
    demo_report(out, summary, seed=seed).write(out / "report.html")
    console.print(f"wrote {out / 'summary.json'} and {out / 'report.html'}")
    return summary
