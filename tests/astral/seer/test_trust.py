"""seer/trust.py: error ranges per mechanism class and the range `seer predict` states for one job.

The statistics are checked on synthetic results; the committed table against the data files it
names (without rerunning Seer: `python scripts/seer_trust_table.py --check` does that)."""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from astral.seer.load_script import load_script
from starfabric.astral.seer import load_job, predict
from starfabric.astral.seer.classes import DIMENSIONS, classes_of
from starfabric.astral.seer.predict import Prediction
from starfabric.astral.seer.trust import (
    COLUMNS,
    MIN_HEADLINE_ROWS,
    POOLED,
    SET_GROUPS,
    ClassRange,
    MeasuredSet,
    bundled_table,
    class_range,
    class_ranges,
    lines,
    measured_range,
    pct,
    quantile,
    read_table,
    seconds,
    trust_for,
    trust_for_classes,
    write_rows,
    write_table,
)
from starfabric.astral.seer.validate import RowResult, excluded_reason, read_rows
from starfabric.cli import app
from starfabric.errors import DataError

ROOT = Path(__file__).parents[3]
EXAMPLES = ROOT / "examples" / "jobs"
DATA = ROOT / "tests" / "data" / "published_runs"
errors = st.lists(st.floats(-0.9, 2.0, allow_nan=False), min_size=1, max_size=60)


@dataclass(frozen=True)
class Result:
    """What a class range needs of a validated row (validate.RowResult)."""

    prediction: Prediction
    error: float


@pytest.fixture(scope="module")
def preds() -> dict[str, Prediction]:
    return {
        "dense": predict(load_job(str(EXAMPLES / "llama31_70b_dense.yaml"))),
        "moe": predict(load_job(str(EXAMPLES / "deepseek_v3_moe.yaml"))),
    }


@given(errors, st.floats(0.0, 1.0))
def test_quantile_is_the_inclusive_linear_quantile(xs: list[float], q: float) -> None:
    v = quantile(xs, q)
    assert min(xs) <= v <= max(xs)
    if len(xs) >= 2:
        deciles = statistics.quantiles(xs, n=10, method="inclusive")
        assert quantile(xs, 0.1) == pytest.approx(deciles[0], abs=1e-12)
        assert quantile(xs, 0.9) == pytest.approx(deciles[8], abs=1e-12)


@given(errors, errors)
def test_a_range_brackets_its_median_and_counts_every_set(a: list[float], b: list[float]) -> None:
    r = class_range("arch", "dense", POOLED, {"b.csv": b, "a.csv": a})
    assert r.min <= r.p10 <= r.median <= r.p90 <= r.max
    assert r.rows == len(a) + len(b) and r.sets == (("a.csv", len(a)), ("b.csv", len(b)))
    assert r.mean_abs == pytest.approx(statistics.fmean(abs(x) for x in a + b))
    inside = sum(r.p10 <= x <= r.p90 for x in a + b)
    assert inside >= 0.8 * (r.rows - 1) - 1  # the middle 80%, up to the interpolated ends


def test_ranges_pool_the_sets_and_keep_development_and_outside_apart(preds) -> None:
    dev = MeasuredSet("d.csv", "development", [Result(preds["dense"], e) for e in (-0.1, 0.0, 0.1)])
    out = MeasuredSet("o.csv", "outside", [Result(preds["moe"], -0.4), Result(preds["dense"], 0.2)])
    table = {(r.dimension, r.cls, r.group): r for r in class_ranges([dev, out])}
    assert table[("arch", "dense", POOLED)].rows == 4
    assert table[("arch", "dense", "development")].sets == (("d.csv", 3),)
    assert table[("arch", "dense", "outside")].median == pytest.approx(0.2)
    assert table[("arch", "MoE", POOLED)].min == pytest.approx(-0.4)
    assert ("arch", "MoE", "development") not in table
    for dim in DIMENSIONS:  # every run is in exactly one class of each dimension
        assert sum(r.rows for (d, _, g), r in table.items() if d == dim and g == POOLED) == 5
    with pytest.raises(ValueError, match="group"):
        class_ranges([MeasuredSet("x.csv", POOLED, [])])


def _range(
    dim: str, cls: str, rows: int, p10: float, p90: float, group: str = POOLED
) -> ClassRange:
    return ClassRange(
        dim, cls, group, rows, (p10 + p90) / 2, p10, p90, p10, p90, 0.1, (("s", rows),)
    )


def test_a_class_under_the_minimum_rows_does_not_set_the_headline() -> None:
    cls = {"arch": "dense", "scale": "<=64 GPUs", "gpu_generation": "Hopper"}
    table = [
        _range("arch", "dense", MIN_HEADLINE_ROWS, -0.10, 0.05),
        _range("scale", "<=64 GPUs", MIN_HEADLINE_ROWS - 1, -0.90, 0.90),  # too few runs
        _range("gpu_generation", "Hopper", 40, -0.20, 0.02),
        _range("gpu_generation", "Hopper", 40, -0.70, 0.50, group="outside"),  # not pooled
        _range("gpu_generation", "Ampere", 90, -0.99, 0.99),  # not this job's class
    ]
    t = trust_for_classes(cls, table)
    assert t.low is not None and t.high is not None
    assert (t.low.p10, t.high.p90) == (-0.20, 0.05)
    assert (t.low.cls, t.high.cls) == ("Hopper", "dense")
    assert len(t.ranges) == 4  # every range of its classes is still reported
    few = trust_for_classes({"scale": "<=64 GPUs"}, table)
    assert few.low is None and few.summary(1.0)["headline"] is None
    assert "no range" in lines(few, 1.0)[1]
    assert lines(few, 1.0)[2] == "  scale = <=64 GPUs: n=9 median 0% [−90%, +90%]"
    unseen = trust_for_classes({"gpu_generation": "Volta"}, table)
    assert lines(unseen, 1.0)[2] == "  gpu generation = Volta: no measured runs"


@given(st.floats(1e-3, 1e4), st.floats(1e-3, 1e4))
def test_sign_convention_and_the_measured_time_it_implies(
    published: float, predicted: float
) -> None:
    r = RowResult("R", "m", 8, published, predicted, 1.0, 1.0, "6N", {}, None)  # type: ignore[arg-type]
    assert (r.error < 0) == (predicted < published)  # negative: Seer too fast
    lo, hi = measured_range(predicted, r.error, r.error)
    assert lo == pytest.approx(published, rel=1e-9) and hi == pytest.approx(published, rel=1e-9)


@given(st.floats(0.01, 100.0), st.floats(-0.95, 1.0), st.floats(0.0, 1.0))
def test_a_higher_error_means_a_shorter_measured_time(
    pred_s: float, low: float, gap: float
) -> None:
    short, long = measured_range(pred_s, low, low + gap)
    assert short <= long and long == pytest.approx(pred_s / (1 + low))
    with pytest.raises(ValueError):
        measured_range(pred_s, low + gap + 0.1, low)
    with pytest.raises(ValueError):
        measured_range(pred_s, -1.0, 0.0)


def test_formatting() -> None:
    assert (pct(-0.2504), pct(0.0049), pct(-0.004), pct(0.09)) == ("−25%", "0%", "0%", "+9%")
    assert (seconds(25.0), seconds(7.6213), seconds(123.4)) == ("25.0", "7.62", "123")


def test_a_written_table_reads_back_and_a_bad_one_is_named(tmp_path: Path) -> None:
    rows = [
        _range("arch", "dense", 12, -0.123456, 0.0),
        _range("scale", ">2048 GPUs", 3, -0.2, 0.1),
    ]
    path = tmp_path / "t.csv"
    write_table(rows, path)
    again = read_table(path)
    assert [r.cells() for r in again] == [r.cells() for r in rows]
    assert again[0].p10 == -0.1235  # 4 decimals
    text = path.read_text().replace("-0.1235", "minus", 1)
    path.write_text(text)
    with pytest.raises(DataError, match="line 2"):
        read_table(path)
    with pytest.raises(DataError, match="cannot be read"):
        read_table(tmp_path / "none.csv")


# --- the committed table against the data files it names -------------------------------------


def _sets() -> list[dict[str, str]]:
    with bundled_table().with_name("trust_sets.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_committed_sets_are_the_development_and_outside_files() -> None:
    script = load_script("seer_trust_table")
    outside = load_script("seer_outside_truth").OUTSIDE_FILES
    sets = _sets()
    assert [s["set"] for s in sets if s["group"] == "development"] == list(script.DEVELOPMENT_FILES)
    assert [s["set"] for s in sets if s["group"] == "outside"] == list(outside)
    for s in sets:
        rows = read_rows(DATA / s["set"])
        excluded = [r["row_id"] for r in rows if excluded_reason(r) is not None]
        not_read = [x for x in s["not_read"].split(";") if x]
        assert int(s["csv_rows"]) == len(rows), s["set"]
        assert s["excluded"].split(";") == (excluded or [""]), s["set"]
        assert int(s["compared"]) + len(excluded) + len(not_read) == len(rows), s["set"]
        assert set(not_read) <= {r["row_id"] for r in rows}, s["set"]


def test_each_sets_runs_fall_in_one_class_per_dimension_of_its_own_group() -> None:
    table = read_table()
    sets = {s["set"]: s for s in _sets()}
    for r in table:
        assert r.rows == sum(n for _, n in r.sets)
        assert r.min <= r.p10 <= r.median <= r.p90 <= r.max
        for name, _ in r.sets:
            assert name in sets and r.group in (POOLED, sets[name]["group"]), (r, name)
    for dim in DIMENSIONS:
        for group in (POOLED, *SET_GROUPS):
            counts: dict[str, int] = {}
            for r in table:
                if r.dimension == dim and r.group == group:
                    for name, n in r.sets:
                        counts[name] = counts.get(name, 0) + n
            want = {k: int(s["compared"]) for k, s in sets.items()
                    if group in (POOLED, s["group"]) and int(s["compared"])}  # fmt: skip
            assert counts == want, (dim, group)


def test_trust_for_a_prediction_reads_its_own_classes(preds) -> None:
    t = trust_for(preds["moe"])
    assert t.classes == classes_of(preds["moe"])
    assert {r.cls for r in t.ranges if r.dimension == "arch"} == {"MoE"}
    assert t.low is not None and t.high is not None and t.low.group == POOLED
    assert t.low.rows >= MIN_HEADLINE_ROWS and t.high.rows >= MIN_HEADLINE_ROWS


# --- seer predict ------------------------------------------------------------------------------

runner = CliRunner()


def test_predict_prints_and_returns_runs_like_this_one() -> None:
    job = str(EXAMPLES / "llama31_70b_dense.yaml")
    res = runner.invoke(app, ["astral", "seer", "predict", job])
    assert res.exit_code == 0, res.output
    block = res.output[res.output.index("Runs like this one") :].splitlines()
    assert "(10th–90th pct) → measured ≈" in block[1]
    assert block[2].strip().startswith("arch = dense: n=")
    assert [b.split("=")[0].strip() for b in block[2:7]] == [
        d.replace("_", " ") for d in DIMENSIONS
    ]
    out = json.loads(runner.invoke(app, ["astral", "seer", "predict", job, "--json"]).output)
    head = out["trust"]["headline"]
    assert head["measured_s"] == pytest.approx(
        [
            out["iteration_s"] / (1 + head["high_error"]),
            out["iteration_s"] / (1 + head["low_error"]),
        ]
    )
    assert out["trust"]["classes"]["arch"] == "dense"


def test_predict_without_the_table_says_so_in_one_line(monkeypatch, tmp_path: Path) -> None:
    import starfabric.astral.seer.trust as trust

    monkeypatch.setattr(trust, "bundled_table", lambda: tmp_path / "missing.csv")
    res = runner.invoke(
        app, ["astral", "seer", "predict", str(EXAMPLES / "llama31_70b_dense.yaml")]
    )
    assert res.exit_code == 0, res.output
    said = [line for line in res.output.splitlines() if "Runs like this one" in line]
    assert len(said) == 1 and "unavailable" in said[0] and "MFU" in res.output


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-0.5, 0.5, allow_nan=False), min_size=MIN_HEADLINE_ROWS, max_size=40))
def test_the_headline_holds_the_middle_of_every_class_it_reads(errs: list[float]) -> None:
    dims = {"arch": "dense", "scale": "<=64 GPUs"}
    table = [
        class_range("arch", "dense", POOLED, {"a.csv": errs}),
        class_range("scale", "<=64 GPUs", POOLED, {"a.csv": [e / 2 for e in errs]}),
    ]
    t = trust_for_classes(dims, table)
    assert t.low is not None and t.high is not None
    for r in table:
        assert t.low.p10 <= r.p10 and r.p90 <= t.high.p90


@pytest.mark.parametrize(
    ("column", "value"),
    [("p10_error", "nan"), ("p90_error", "inf"), ("p10_error", "-1.5000"), ("min_error", "-1")],
)
def test_a_table_with_an_error_no_run_can_have_is_named(
    tmp_path: Path, column: str, value: str
) -> None:
    """A corrupted cell that parses as a number but is no signed error (NaN, infinite, at or
    below -100%: a measured time would be infinite or negative) is a DataError naming the line,
    not a crash in `measured_range` or `seconds`."""
    path = tmp_path / "t.csv"
    write_table([_range("arch", "dense", 12, -0.1, 0.2)], path)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[0][column] = value
    write_rows(path, COLUMNS, rows)
    with pytest.raises(DataError, match="line 2"):
        read_table(path)


def test_a_table_whose_range_is_out_of_order_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    write_table([_range("arch", "dense", 12, -0.1, 0.2)], path)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[0]["p10_error"], rows[0]["p90_error"] = rows[0]["p90_error"], rows[0]["p10_error"]
    write_rows(path, COLUMNS, rows)
    with pytest.raises(DataError, match="line 2"):
        read_table(path)


def _every(text: str, column: str, value: str) -> str:
    """The table's text with `column` set to `value` in every row."""
    rows = list(csv.DictReader(text.splitlines()))
    head = ",".join(COLUMNS)
    body = [",".join(value if c == column else r[c] for c in COLUMNS) for r in rows]
    return "\n".join([head, *body]) + "\n"


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: _every(text, "p10_error", "nan"),  # NaN errors
        lambda text: _every(text, "p10_error", "-1.5000"),  # errors below -100%
        lambda text: _every(text, "p90_error", "inf"),  # infinite errors
        lambda text: text[: len(text) // 2],  # truncated mid-row
        lambda text: "",  # empty
        lambda text: "\xff\xfe" + text,  # not UTF-8 (written as latin-1 below)
    ],
)
def test_predict_with_a_damaged_table_still_prints_the_prediction(
    monkeypatch, tmp_path: Path, damage: Any
) -> None:
    import starfabric.astral.seer.trust as trust

    path = tmp_path / "trust_by_class.csv"
    path.write_bytes(damage(bundled_table().read_text(encoding="utf-8")).encode("latin-1"))
    monkeypatch.setattr(trust, "bundled_table", lambda: path)
    job = str(EXAMPLES / "llama31_70b_dense.yaml")
    res = runner.invoke(app, ["astral", "seer", "predict", job])
    assert res.exit_code == 0, res.output
    assert "MFU" in res.output
    said = [line for line in res.output.splitlines() if "Runs like this one" in line]
    assert len(said) == 1, res.output
    out = json.loads(runner.invoke(app, ["astral", "seer", "predict", job, "--json"]).output)
    assert out["iteration_s"] > 0 and set(out["trust"]) <= {"unavailable", "headline",
                                                           "min_headline_rows", "classes",
                                                           "ranges"}  # fmt: skip


@pytest.mark.parametrize("how", ["profile", "job"])
def test_a_job_with_its_own_efficiencies_gets_no_borrowed_range(tmp_path: Path, how: str) -> None:
    """The table holds Seer's errors at its own efficiency parameters; a job whose efficiencies
    were overridden (`--profile` from `seer calibrate`, or `system.efficiency`) is a different
    predictor, so the ranges and the measured time they imply would mislead: one line says so
    and --json carries the reason instead of a range."""
    import yaml

    spec = yaml.safe_load((EXAMPLES / "llama31_70b_dense.yaml").read_text())
    args = ["astral", "seer", "predict"]
    if how == "profile":
        prof = tmp_path / "profile.yaml"
        prof.write_text(yaml.safe_dump({"gpu": "H100", "efficiency": {"gemm_peak_fraction": 0.5}}))
        args += ["--profile", str(prof)]
    else:
        spec["system"]["efficiency"] = {"gemm_peak_fraction": 0.5}
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(spec))
    res = runner.invoke(app, [*args, str(job)])
    assert res.exit_code == 0, res.output
    said = [line for line in res.output.splitlines() if "Runs like this one" in line]
    assert len(said) == 1 and "efficienc" in said[0] and "MFU" in res.output
    assert "measured ≈" not in res.output
    out = json.loads(runner.invoke(app, [*args, str(job), "--json"]).output)
    assert set(out["trust"]) == {"unavailable"}
