"""scripts/seer_outside_truth.py: Seer's error on the runs recorded outside the development sets
agrees with `seer validate --csv` on each file, every listed file exists and is read in full,
and an unwritable --json path is refused with exit 2 before any work."""

from __future__ import annotations

import json
from typing import Any

import pytest

from astral.seer.load_script import load_script
from starfabric.astral.seer.validate import summary, validate_all


def _script() -> Any:
    return load_script("seer_outside_truth")


@pytest.fixture(scope="module")
def script() -> Any:
    return _script()


def test_every_outside_file_is_read_in_full_and_matches_validate(script) -> None:
    """The per-file figures are `seer validate`'s own on that file (differential), and no row of
    an outside file is left unread."""
    for name in script.OUTSIDE_FILES:
        path = script.DATA / name
        assert path.is_file(), name
        got = script.file_summary(path)
        results, failed = validate_all(path)
        want = summary(results, failed)
        assert got["rows"] == len(want["rows"]) > 0
        assert got["not_read"] == 0, (name, want["not_predicted"])
        assert got["mean_abs_error"] == pytest.approx(want["mean_abs_error"])
        assert got["max_abs_error"] == pytest.approx(want["max_abs_error"])
        assert abs(got["worst"][1]) == pytest.approx(want["max_abs_error"])
        errors = sorted(r["error"] for r in want["rows"])
        assert errors[0] <= got["median_error"] <= errors[-1]


def test_table_has_one_line_per_file_and_signs_the_median(script) -> None:
    sums = {
        name: {
            "rows": 3,
            "not_read": 1,
            "mean_abs_error": 0.2,
            "max_abs_error": 0.4,
            "median_error": -0.1,
            "worst": ("R-1", -0.4),
        }
        for name in script.OUTSIDE_FILES
    }
    out = script.table(sums).splitlines()
    assert len(out) == 2 + len(script.OUTSIDE_FILES)
    assert all("| 3 (1) | 20.0% / 40.0% | -10.0% | R-1 -40.0% |" in line for line in out[2:])


def test_unwritable_json_path_is_refused_before_work(script, tmp_path, capsys) -> None:
    rc = script.main(["--json", str(tmp_path / "missing" / "out.json")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--json" in err and "missing" in err and "existing folder" in err
    assert not (tmp_path / "missing").exists()


def test_json_is_written_whole(script, tmp_path, monkeypatch) -> None:
    """The JSON lands atomically with one entry per file (validated rows stubbed for speed)."""
    monkeypatch.setattr(
        script, "file_summary",
        lambda path: {"rows": 1, "not_read": 0, "mean_abs_error": 0.1, "max_abs_error": 0.1,
                      "median_error": 0.1, "worst": ("X", 0.1)},
    )  # fmt: skip
    out = tmp_path / "o.json"
    assert script.main(["--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert sorted(doc) == sorted(script.OUTSIDE_FILES)
    assert not list(tmp_path.glob("*.tmp"))
