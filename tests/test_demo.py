import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import starfabric.demo as demo


def test_run_demo_writes_summary_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def step(out: Path, seed: int, console: Console) -> dict[str, Any]:
        (out / "astral_compare.png").write_bytes(b"\\x89PNG fake")
        return {"seed": seed, "outcomes": {"HIT": 3, "MISS": 1}}

    monkeypatch.setattr(demo, "_steps", lambda: [("astral network", step)])
    summary = demo.run_demo(tmp_path, seed=7, console=Console(quiet=True))
    assert summary["astral network"]["seed"] == 7
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["astral network"]["outcomes"] == {"HIT": 3, "MISS": 1}
    page = (tmp_path / "report.html").read_text()
    assert "outcomes › HIT" in page and "data:image/png;base64," in page
    assert 'id="headline"' in page and "starfabric version" in page


def test_demo_steps_cover_both_systems() -> None:
    names = [name for name, _ in demo._steps()]
    assert any(n.startswith("fornax") for n in names)
    assert any(n.startswith("astral") for n in names)
