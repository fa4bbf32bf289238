"""Every experiment's plot shows every contender (issue 19: E6 and the hero plot were empty,
Fornax and DOCA-like lines hid each other in E1/E3). The rows are a `--scale ci` run's
(tests/data/fornax_experiments_ci.json, made by `starfabric fornax experiment all --scale ci
--json`) and the paper-scale run's in docs/results/; plotting them needs no experiment to run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from plotcheck import invisible
from starfabric.fornax.experiments import EXPERIMENTS
from starfabric.fornax.experiments.output import Result, bar_plot, line_plot

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "fornax_experiments_ci.json"
DOC: dict[str, Any] = json.loads(DATA.read_text())
PAPER: dict[str, Any] = json.loads(
    (ROOT / "docs" / "results" / "fornax-experiments-paper.json").read_text()
)
"""The paper-scale run (16M sessions): values 150x apart, drops that are not zero."""


def _result(doc: dict[str, Any], name: str) -> Result:
    d = doc["experiments"][name]
    return Result(d["name"], d["title"], [], d["rows"], d.get("summary", {}), d.get("notes", []))


@pytest.mark.parametrize("scale", ["ci", "paper"])
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_contender_is_visible_in_every_panel(name: str, scale: str) -> None:
    res = _result(DOC if scale == "ci" else PAPER, name)
    before = json.dumps(res.as_dict(), sort_keys=True)
    fig = EXPERIMENTS[name].plot(res)
    try:
        assert invisible(fig) == []
        assert json.dumps(res.as_dict(), sort_keys=True) == before, "plot changed the result"
    finally:
        plt.close(fig)


def test_the_stored_run_has_every_experiment_and_contender() -> None:
    assert set(DOC["experiments"]) == set(EXPERIMENTS)
    for d in DOC["experiments"].values():
        # E9's rows are the ablation presets; E7 runs the two managers it can crash
        want = {"fornax", "ovs_like"} if d["name"] == "E7" else {"fornax", "ovs_like", "doca_like"}
        if d["name"] != "E9":
            assert {r["controller"] for r in d["rows"]} >= want


def test_the_check_sees_an_empty_plot_and_a_hidden_line() -> None:
    """The checks above can fail: all-zero bars with no series, and two coinciding lines
    drawn alike (the second hides the first) are both reported."""
    fig, ax = plt.subplots()
    ax.bar(range(3), [0, 0, 0])
    assert invisible(fig) == ["panel 0: empty"]
    plt.close(fig)
    fig, ax = plt.subplots()
    for name in ("fornax", "doca_like"):
        ax.plot([1, 2, 3], [4, 5, 6], marker="o", linewidth=3, markersize=8, label=name)
    ax.legend()
    assert [p.split(" (")[0] for p in invisible(fig)] == ["panel 0: fornax"]
    plt.close(fig)


def test_coinciding_contenders_stay_visible_in_the_shared_plots() -> None:
    rows = [{"controller": c, "sessions": n, "bytes": 10.0 * n, "drops": 0}
            for c in ("fornax", "ovs_like", "doca_like") for n in (1e3, 1e4, 1e5)]  # fmt: skip
    res = Result("X", "same values for every contender", [], rows)
    for fig in (line_plot(res, "sessions", "bytes", "sessions", "bytes"),
                bar_plot(res, "drops", "drops")):  # fmt: skip
        assert invisible(fig) == []
        plt.close(fig)
