"""Demo-scale Fornax vs the software-centric baselines: E1 (software storage), E2 (management
CPU) and E3 (highest zero-drop CPS) between the ci and default scales, their tables and plots, and the headline
ratios against the OVS-like baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from starfabric import outputs
from starfabric.fornax.experiments.runner import run_experiments
from starfabric.fornax.experiments.scales import Scale

#: The experiments the demo runs (the issue's three headline comparisons).
DEMO_EXPERIMENTS = "E1,E2,E3"
#: Between `ci` and `default`: tables up to 512k sessions, so the baselines' per-flow costs
#: show, in about a minute (a display choice, not a paper figure).
DEMO_SCALE = Scale(
    name="demo", sizes=(1 << 15, 1 << 17, 1 << 19), cps=10000.0, measure_s=1.0,
    table=1 << 17, e3_cps=(1e4, 3e4, 1e5, 3e5, 1e6), probe_s=0.2, e4_timeouts=(0.5, 1.0),
    e5_fractions=(0.25, 1.0), surge_base_cps=10000.0, surge_s=1.0, hero_sessions=1 << 15,
    hero_s=6.0,
)  # fmt: skip


def baselines_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Run E1-E3 at DEMO_SCALE; write out/fornax_experiments.json and out/fornax_E*.png."""
    doc = run_experiments(
        DEMO_EXPERIMENTS, DEMO_SCALE, out_dir=out / "fornax_experiments", console=console
    )
    out.mkdir(parents=True, exist_ok=True)
    for name, exp in doc["experiments"].items():
        png = Path(exp.get("plot", ""))
        if png.is_file():
            outputs.write_bytes(out / f"fornax_{name}.png", png.read_bytes())
    outputs.write_json(out / "fornax_experiments.json", doc, default=str)
    head = {k: doc.get(k) for k in ("storage_ratio", "cpu_ratio", "zero_drop_cps_ratio")}
    out_ = {f"{k} (Fornax / OVS-like)": v for k, v in head.items()}
    out_["OVS-like calibration"] = doc["ovs_calibration"]["describe"]  # whose machine it is
    return out_


__all__ = ["DEMO_EXPERIMENTS", "baselines_demo"]
