"""A few-second monitor demo: 1K GPUs, one injected fault, diagnosis with its evidence chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from starfabric import outputs
from starfabric.astral.monitor.evaluate import Scenario, job_targets, random_fault, score
from starfabric.astral.monitor.faults import LINK_CRC
from starfabric.astral.monitor.localize import diagnose
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.monitor.synth import SynthSpec, synthesize

DEMO_GPUS = 1024


def monitor_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Inject a CRC-degraded link the job uses, localize it, print the chain, write monitor.json."""
    import numpy as np

    t = job_targets(DEMO_GPUS, seed)
    fault = random_fault(LINK_CRC, np.random.default_rng(seed), t, set())
    sc = Scenario("demo", (fault,), seed, seed)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "monitor.duckdb"
    if db.exists():
        db.unlink()
    spec = SynthSpec(gpus=DEMO_GPUS, seed=seed, placement_seed=seed, ms_series=False)
    with TelemetryStore(db) as st:
        synthesize(spec, [fault], st)
        d = diagnose(st)
    res = score(sc, d)
    console.print(f"[bold]monitor[/]: {DEMO_GPUS} GPUs, injected {fault.kind} at {fault.component}")
    top = d.causes[0] if d.causes else None
    if top is not None:
        console.print(f"  root cause: {top.fault} at {top.label} (confidence {top.confidence:.2f})")
        for e in top.evidence:
            console.print(f"    {e}", soft_wrap=True)
    console.print(f"  localized in {d.elapsed_s:.2f} s; correct: {bool(res.top1)}")
    summary = {
        "gpus": DEMO_GPUS,
        "injected": res.injected,
        "reported": res.reported,
        "top1_correct": bool(res.top1),
        "localize_s": d.elapsed_s,
        "diagnosis": d.to_dict(),
    }
    outputs.write_json(out / "monitor.json", summary, indent=1)
    return summary
