"""scripts/seer_trust_table.py: a stale table is named by its first differing cell, and the
headline rules are scored on held-out outside files (synthetic runs; the full regeneration is
for developers: `python scripts/seer_trust_table.py --check`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from astral.seer.load_script import load_script
from starfabric.astral.seer import load_job, predict
from starfabric.astral.seer.predict import Prediction
from starfabric.astral.seer.trust import COLUMNS, MeasuredSet, class_ranges, write_table

EXAMPLES = Path(__file__).parents[1] / "examples" / "jobs"


@dataclass(frozen=True)
class Result:
    prediction: Prediction
    error: float


@pytest.fixture(scope="module")
def script() -> Any:
    return load_script("seer_trust_table")


@pytest.fixture(scope="module")
def dense() -> Prediction:
    return predict(load_job(str(EXAMPLES / "llama31_70b_dense.yaml")))


def _record(script: Any, name: str, group: str, pred: Prediction, errs: list[float]) -> Any:
    return script.SetRecord(
        MeasuredSet(name, group, [Result(pred, e) for e in errs]), len(errs), (), ()
    )


def test_a_stale_table_is_named_by_its_first_differing_cell(script, dense, tmp_path: Path) -> None:
    ranges = class_ranges(
        [MeasuredSet("a.csv", "development", [Result(dense, -0.1), Result(dense, 0.2)])]
    )
    path = tmp_path / "t.csv"
    write_table(ranges, path)
    fresh = [r.cells() for r in ranges]
    assert script.first_difference(path, fresh, COLUMNS) is None
    moved = [dict(row) for row in fresh]
    moved[3]["p90_error"] = "0.5000"
    diff = script.first_difference(path, moved, COLUMNS)
    assert diff is not None and "line 5" in diff and "p90_error" in diff and "0.5000" in diff
    n = len(fresh)
    assert script.first_difference(path, fresh[:-1], COLUMNS).endswith(
        f"committed {n} rows, now {n - 1}"
    )
    assert "does not exist" in script.first_difference(tmp_path / "none.csv", fresh, COLUMNS)


def test_held_out_scores_each_rule_on_outside_files_only(script, dense) -> None:
    dev = _record(script, "d.csv", "development", dense, [i / 100 for i in range(-10, 11)])
    near = _record(script, "near.csv", "outside", dense, [0.0, 0.05, -0.05])
    far = _record(script, "far.csv", "outside", dense, [-0.6, -0.7])
    cover = script.held_out([dev, near, far])
    adopted = cover["pooled envelope (adopted)"]
    assert adopted["runs"] == 5  # the development runs are never held out
    assert adopted["per_file"] == {
        "near.csv": {"held": 3, "runs": 3},
        "far.csv": {"held": 0, "runs": 2},
    }
    assert adopted["coverage"] == pytest.approx(3 / 5)
    assert set(cover) == set(script.RULES)


def test_most_specific_takes_the_smallest_cell_sharing_the_most_classes(script) -> None:
    base = {"arch": "dense", "context_parallel": "no CP", "expert_parallel": "no EP",
            "gpu_generation": "Hopper", "scale": "<=64 GPUs"}  # fmt: skip
    other = {**base, "gpu_generation": "Ampere"}
    rows = [(base, 0.0)] * 10 + [(other, -0.5)] * 30
    assert script.most_specific(base, None, rows) == (0.0, 0.0)
    assert script.most_specific({**base, "scale": ">2048 GPUs"}, None, rows) == (0.0, 0.0)
    assert (
        script.most_specific({**base, "arch": "MoE", "gpu_generation": "Volta"}, None, rows)[0] < 0
    )


def test_markdown_prints_the_docs_tables(script, dense) -> None:
    ranges = class_ranges([MeasuredSet("a.csv", "development", [Result(dense, -0.25)])])
    cover = {"rule": {"held": 3, "runs": 4, "coverage": 0.75, "median_width": 0.301}}
    text = script.markdown(ranges, cover).splitlines()
    assert text[2] == "| rule | 3 of 4 (75%) | 30 points |"
    assert "| arch | dense | 1, −25% [−25%, −25%] | 1, −25% [−25%, −25%] | — |" in text


def _no_work() -> Any:
    raise AssertionError("validated the sets before checking where to write")


@pytest.mark.parametrize(
    ("where", "argv"),
    [
        ("json-folder", ["--json", "{tmp}"]),  # a folder, not a file
        ("json-missing", ["--json", "{tmp}/no/such/out.json"]),
        ("json-under-file", ["--json", "{tmp}/a_file/out.json"]),
        ("tables", []),  # the tables' folder cannot be written
    ],
)
def test_an_output_it_cannot_write_fails_before_any_work(
    script, monkeypatch, capsys, tmp_path: Path, where: str, argv: list[str]
) -> None:
    (tmp_path / "a_file").write_text("x")
    monkeypatch.setattr(script, "validate_sets", _no_work)
    if where == "tables":
        monkeypatch.setattr(script, "OUT", tmp_path / "a_file" / "published_runs")
    code = script.main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err


def test_check_writes_no_table_so_needs_no_writable_folder(script, monkeypatch) -> None:
    monkeypatch.setattr(script, "OUT", Path("/nonexistent/published_runs"))
    monkeypatch.setattr(script, "validate_sets", _no_work)
    with pytest.raises(AssertionError, match="validated the sets"):
        script.main(["--check"])


def test_the_json_is_written_atomically(script, monkeypatch, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text('{"old": true}\n')
    monkeypatch.setattr(script, "validate_sets", lambda: [])
    monkeypatch.setattr(script, "OUT", tmp_path)

    def boom(*_: Any, **__: Any) -> str:
        raise RuntimeError("interrupted while encoding")

    monkeypatch.setattr(script.json, "dumps", boom)
    with pytest.raises(RuntimeError):
        script.main(["--json", str(out)])
    assert out.read_text() == '{"old": true}\n'  # the old file is whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("out.json")] == ["out.json"]
