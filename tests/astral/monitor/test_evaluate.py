"""The 1K-GPU scenario suite meets the issue's thresholds; scoring is exact on hand cases."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from rich.console import Console

from starfabric.astral.monitor import FAULT_KINDS, Fault, evaluate, scenarios
from starfabric.astral.monitor.evaluate import Scenario, occurred, score, summarize
from starfabric.astral.monitor.localize import Cause, Diagnosis
from starfabric.errors import ConfigError


def test_suite_covers_every_class_three_times() -> None:
    suite = scenarios(1024, seeds=3, healthy=6, multi=4)
    kinds = Counter(sc.faults[0].kind for sc in suite if len(sc.faults) == 1)
    assert all(kinds[k] == 3 for k in FAULT_KINDS)
    assert sum(len(sc.faults) > 1 for sc in suite) == 4
    assert sum(not sc.faults for sc in suite) == 6
    with pytest.raises(ConfigError, match="seeds"):
        scenarios(1024, seeds=0)


@pytest.mark.slow
def test_1k_suite_meets_thresholds() -> None:
    summ = evaluate(1024, seeds=3, healthy=6, multi=4, console=Console(file=io.StringIO()))
    assert summ["f1"] >= 0.95
    assert summ["top1"] >= 0.90
    assert summ["fp_rate"] <= 0.02
    assert summ["max_localize_s"] <= 10
    assert {"f1", "top1", "fp_rate", "max_localize_s"} <= set(summ)
    assert len(summ["per_scenario"]) == summ["scenarios"] == 43


def _diag(*pairs: tuple[str, str, float]) -> Diagnosis:
    return Diagnosis([], [Cause(c, c, f, conf, []) for c, f, conf in pairs], {}, [], 0.1)


def test_score_and_summary_by_hand() -> None:
    sc = Scenario("x", (Fault("link_crc", 5), Fault("gpu_throttle", 3)), 0, 0)
    r = score(
        sc,
        _diag(
            ("cable:5", "link_crc", 0.9),
            ("gpu:4", "gpu_throttle", 0.8),
            ("gpu:3", "gpu_throttle", 0.3),
        ),
    )
    assert (r.tp, r.fp, r.fn, r.top1) == (1, 1, 1, True)
    h = score(Scenario("h", (), 0, 0), _diag(("gpu:1", "gpu_xid", 0.6)))
    assert (h.fp, h.top1) == (1, None)
    s = summarize([r, h])
    assert s["precision"] == pytest.approx(1 / 3)
    assert s["recall"] == pytest.approx(1 / 2)
    assert s["f1"] == pytest.approx(0.4)
    assert s["fp_rate"] == 1.0 and s["top1"] == 1.0


@pytest.mark.slow
def test_other_seeds_and_milder_faults_still_localized() -> None:
    summ = evaluate(
        1024,
        seeds=1,
        healthy=4,
        multi=3,
        seed0=57,
        severity=(0.25, 0.5),
        console=Console(file=io.StringIO()),
    )
    assert summ["f1"] >= 0.95 and summ["top1"] >= 0.9 and summ["fp_rate"] == 0.0


def test_occurred_drops_faults_after_a_hang() -> None:
    sc = Scenario("m", (Fault("gpu_xid", 1, 0.5, 1), Fault("link_crc", 2, 0.5, 3)), 0, 0)
    assert occurred(sc, {"iterations": 2}).faults == (Fault("gpu_xid", 1, 0.5, 1),)
    with pytest.raises(ConfigError, match="severity range"):
        scenarios(1024, severity=(0.0, 0.5))


@pytest.mark.slow
def test_1k_sections_meet_thresholds() -> None:
    summ = evaluate(
        1024,
        seeds=2,
        healthy=2,
        multi=1,
        sections=("silent", "gray", "confounders"),
        console=Console(file=io.StringIO()),
    )
    sec = summ["sections"]
    assert sec["silent"]["top1_component"] >= 0.9 and sec["gray"]["top1_component"] >= 0.9
    assert sec["confounders"]["fp_rate"] <= 0.02 and sec["confounders"]["named"] >= 0.9
    assert max(s["max_localize_s"] for s in sec.values()) <= 10
    assert "per_scenario" not in summ  # the suite was not run


def test_visible_impact_compares_with_the_healthy_twin() -> None:
    from starfabric.astral.monitor.evaluate import healthy_twin, run_scenario

    sc = Scenario("t", (Fault("gpu_slow", 5, 0.8, 1, "off"),), 4, 4)
    twin = healthy_twin(1024, sc)
    try:
        r, _ = run_scenario(1024, sc, twin=twin)
        assert r.impact is True and r.top1_component
        h, _ = run_scenario(1024, Scenario("h", (), 4, 4), twin=twin)
        assert h.impact is False and h.top1_component is None
    finally:
        twin.close()
