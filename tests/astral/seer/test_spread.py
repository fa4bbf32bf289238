import csv
import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.seer.spread import ONE_AWAY, row_spread, spread_summary
from starfabric.astral.seer.validate import Alternative, read_rows, summary, validate_row
from starfabric.cli import app
from starfabric.errors import ConfigError

CSV = Path(__file__).parents[2] / "data" / "published_runs" / "megatron_weak_scaling.csv"
ROWS = {r["row_id"]: r for r in read_rows(CSV)}
ONE_OPEN = "N21-T1-01"
"""Narayanan et al. 2021 Table 1, GPT-1.7B: micro-batch UNVERIFIED, PP 1 (no interleaving),
full recompute stated — one unstated setting."""
TWO_OPEN = "N21-T1-05"
"""GPT-39.1B: micro-batch and interleaving (VPP) both unstated, 32 feasible combinations."""


@pytest.fixture(scope="module")
def one_open():
    return validate_row(ROWS[ONE_OPEN], alternatives=True)


def test_one_unstated_setting_range_contains_seers_choice(one_open) -> None:
    sp = row_spread(one_open)
    assert sp.varied == ["micro_batch"]
    assert all(set(a.settings) == {"micro_batch"} for a in sp.compared)  # recompute is stated
    assert sp.feasible == len(sp.compared) >= 2
    (mine,) = [a for a in sp.compared if a.chosen]
    assert mine.error == pytest.approx(one_open.error, rel=1e-12)
    assert sp.low is not None and sp.high is not None
    assert sp.low.error <= one_open.error <= sp.high.error
    assert sp.high.error > sp.low.error  # the micro-batch moves the prediction
    assert sp.contains_published == (sp.low.error <= 0 <= sp.high.error)


def test_a_stated_setting_is_not_varied(one_open) -> None:
    by_mb = {a.settings["micro_batch"]: a.error for a in one_open.alternatives}
    mb = next(m for m in by_mb if m != one_open.choices["micro_batch"])
    stated = validate_row(dict(ROWS[ONE_OPEN], micro_batch=str(mb)), alternatives=True)
    sp = row_spread(stated)
    assert sp.varied == [] and len(sp.compared) == 1 and sp.compared[0].chosen
    assert sp.compared[0].settings == {}
    # The stated micro-batch's prediction is the alternative the open row listed for it.
    assert stated.error == pytest.approx(by_mb[mb], rel=1e-9)
    assert sp.low is not None and sp.low is sp.high
    assert sp.low.error == pytest.approx(stated.error, rel=1e-12)


def test_without_the_flag_nothing_is_kept() -> None:
    r = validate_row(ROWS[ONE_OPEN])
    assert r.alternatives == ()
    assert "spread" not in summary([r]) and "spread" not in summary([r])["rows"][0]


def test_cap_takes_one_setting_at_a_time() -> None:
    r = validate_row(ROWS[TWO_OPEN], alternatives=True)
    full = row_spread(r)
    assert set(full.varied) == {"micro_batch", "vpp"}
    capped = row_spread(r, cap=len(r.alternatives) - 1)
    assert capped.enumeration == ONE_AWAY and capped.feasible == full.feasible
    mine = next(a for a in r.alternatives if a.chosen)
    for a in capped.compared:
        assert sum(a.settings[k] != mine.settings[k] for k in ("micro_batch", "vpp")) <= 1
    expected = [
        a
        for a in r.alternatives
        if a.settings["micro_batch"] == mine.settings["micro_batch"]
        or a.settings["vpp"] == mine.settings["vpp"]
    ]
    assert len(capped.compared) == len(expected) < len(r.alternatives)
    assert capped.low is not None and full.low is not None
    assert full.low.error <= capped.low.error <= r.error
    with pytest.raises(ConfigError):
        row_spread(r, cap=0)


def test_a_parallel_layout_counts_as_one_setting(one_open) -> None:
    alts = (
        Alternative({"tp": 2, "pp": 4, "micro_batch": 1}, -0.10, True),
        Alternative({"tp": 4, "pp": 2, "micro_batch": 1}, 0.05, False),  # layout only
        Alternative({"tp": 2, "pp": 4, "micro_batch": 2}, 0.08, False),  # micro-batch only
        Alternative({"tp": 4, "pp": 2, "micro_batch": 2}, 0.30, False),  # both
    )
    sp = row_spread(dataclasses.replace(one_open, alternatives=alts), cap=3)
    assert sp.enumeration == ONE_AWAY
    assert [a.error for a in sp.compared] == [-0.10, 0.05, 0.08]
    assert sp.contains_published and sp.high is alts[2]
    assert sp.reaches(0.1) and not dataclasses.replace(sp, compared=alts[3:]).reaches(0.25)


def test_summary_counts_rows_inside_above_below(one_open) -> None:
    def fake(rid: str, src: str, *errs: float) -> object:
        alts = tuple(Alternative({"micro_batch": i}, e, i == 0) for i, e in enumerate(errs))
        res = dataclasses.replace(one_open, row_id=rid, source=src, alternatives=alts)
        return row_spread(res)

    spreads = [fake("a", "S1", -0.2, 0.1), fake("b", "S1", 0.1, 0.3), fake("c", "S2", -0.3),
               fake("d", "S2")]  # fmt: skip
    out = spread_summary(spreads, 7)  # type: ignore[arg-type]
    assert out["max_candidates"] == 7
    assert out["all"] == {"rows": 4, "contains_published": 1, "all_slower": 1, "all_faster": 1,
                          "none_fits": 1}  # fmt: skip
    assert out["per_source"]["S1"]["contains_published"] == 1
    assert out["per_source"]["S2"] == {"rows": 2, "contains_published": 0, "all_slower": 0,
                                       "all_faster": 1, "none_fits": 1}  # fmt: skip


runner = CliRunner()


def _two_rows(tmp_path: Path) -> Path:
    rows = [ROWS[ONE_OPEN], ROWS[TWO_OPEN]]
    p = tmp_path / "two.csv"
    with p.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return p


def test_cli_spread_json_shape(tmp_path: Path) -> None:
    p, out, plain = _two_rows(tmp_path), tmp_path / "s.json", tmp_path / "p.json"
    res = runner.invoke(
        app, ["astral", "seer", "validate", "--csv", str(p), "--spread", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "spread per source" in res.output and "NARAYANAN21_T1" in res.output
    data = json.loads(out.read_text())
    assert data["spread"]["max_candidates"] == 512 and data["spread"]["all"]["rows"] == 2
    assert set(data["spread"]["per_source"]) == {"NARAYANAN21_T1"}
    for row in data["rows"]:
        sp = row["spread"]
        assert set(sp) == {"enumeration", "feasible", "compared", "varied", "low", "high",
                           "closest", "contains_published"}  # fmt: skip
        assert sp["enumeration"] == "every combination" and sp["compared"] == sp["feasible"]
        assert sp["low"]["error"] <= row["error"] <= sp["high"]["error"]
        assert sp["contains_published"] == (sp["low"]["error"] <= 0 <= sp["high"]["error"])
    assert data["rows"][0]["spread"]["varied"] == ["micro_batch"]
    res = runner.invoke(app, ["astral", "seer", "validate", "--csv", str(p), "--json", str(plain)])
    assert res.exit_code == 0, res.output
    base = json.loads(plain.read_text())
    assert "spread" not in base and all("spread" not in r for r in base["rows"])
    assert "spread per source" not in res.output
    for row in data["rows"]:
        row.pop("spread")
    data.pop("spread")
    assert data == base  # --spread adds fields and changes none


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--spread", "--spread-cap", "0"], "error: --spread-cap 0: must be at least 1"),
        (["--spread-cap", "4"], "error: --spread-cap is used only with --spread"),
        (["--spread", "--spread-cap", "many"], "error: starfabric astral seer validate: Invalid"),
    ],
)
def test_cli_bad_spread_options_are_one_line_exit_2(args: list[str], says: str) -> None:
    res = runner.invoke(app, ["astral", "seer", "validate", *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(says) and res.output.count("\n") == 1, res.output
    assert "--spread-cap" in res.output and "(fix: " in res.output
