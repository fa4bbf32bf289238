"""`starfabric fornax experiment`: one-line errors for a bad name or scale, JSON of one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.cli import app
from starfabric.errors import ConfigError
from starfabric.fornax.experiments import EXPERIMENTS, SCALES, get_experiment, get_scale
from starfabric.fornax.experiments.runner import names_for


@pytest.mark.parametrize(
    ("args", "word"),
    [(["E77"], "E77"), (["E1", "--scale", "huge"], "huge"), (["E1x"], "E1x"), (["E1,E99"], "E99")],
)
def test_bad_name_or_scale_is_one_line_exit_2(args: list[str], word: str) -> None:
    res = CliRunner().invoke(app, ["fornax", "experiment", *args])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0]


def test_names_all_one_or_a_list() -> None:
    assert names_for("all") == list(EXPERIMENTS)
    assert names_for("E2, E1") == ["E2", "E1"]
    assert names_for("e7,hero") == ["E7", "hero"]  # names are case-insensitive (the e7)


def test_lookups_name_the_choices() -> None:
    with pytest.raises(ConfigError, match="E1, E2"):
        get_experiment("nope")
    with pytest.raises(ConfigError, match="ci, default, paper"):
        get_scale("nope")
    assert SCALES["paper"].sizes[-1] == 1 << 24 and SCALES["paper"].cps == 100_000


def test_one_experiment_writes_json_and_png(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["fornax", "experiment", "E1", "--scale", "ci",
                                   "--json", str(tmp_path / "e1.json"),
                                   "--out", str(tmp_path)])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "e1.json").read_text())
    assert doc["scale"] == "ci" and list(doc["experiments"]) == ["E1"]
    assert doc["storage_ratio"] is not None and doc["cpu_ratio"] is None  # E2 did not run
    e1 = doc["experiments"]["E1"]
    assert {"rows", "summary", "title"} <= set(e1)
    assert (tmp_path / "E1.png").exists()
    assert doc["complete"] is True and not (tmp_path / "e1.json.tmp").exists()


def test_partial_results_are_handed_out_after_each_experiment() -> None:
    from starfabric.fornax.experiments import Result, register
    from starfabric.fornax.experiments.registry import EXPERIMENTS as REG
    from starfabric.fornax.experiments.registry import Experiment
    from starfabric.fornax.experiments.runner import run_experiments

    def boom(ctx: object) -> Result:
        raise RuntimeError("second experiment fails")

    register(Experiment("ZZ1", "fast", lambda ctx: Result("ZZ1", "fast", []), lambda r: None))
    register(Experiment("ZZ2", "fails", boom, lambda r: None))
    seen: list[dict[str, object]] = []
    try:
        with pytest.raises(RuntimeError, match="second"):
            run_experiments("ZZ1,ZZ2", "ci", on_result=seen.append, contenders=[])
    finally:
        del REG["ZZ1"], REG["ZZ2"]
    assert len(seen) == 1 and seen[0]["complete"] is False
    assert list(seen[0]["experiments"]) == ["ZZ1"]  # type: ignore[call-overload]
