"""The engine's demo step runs, writes its JSON, and its accounting adds up."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from starfabric.fornax.demo.engine import engine_demo


def test_engine_demo(tmp_path: Path) -> None:
    summary = engine_demo(tmp_path, 3, Console(file=open(tmp_path / "log.txt", "w")))  # noqa: SIM115
    data = json.loads((tmp_path / "fornax_engine.json").read_text())
    assert summary["packets"] == sum(summary["outcomes"].values()) == data["counters"]["packets"]
    assert all(summary["outcomes"][k] > 0 for k in ("HIT", "MISS", "STALE", "DROP_HW", "PORT_HUNG"))
    ev = summary["events"]
    assert ev["AGED"] > 0 and ev["VERSION_MISMATCH"] > 0 and ev["PIPELINE_HANG"] == 1
    assert ev["ECC_CORRECTED"] > 0 and ev["ECC_UNCORRECTABLE"] > 0
