"""The share of the hideable EP all-to-all Megatron-Core's combined 1F1B hides
(`ep_overlap_hidden`), against NVIDIA/Megatron-LM PR #6311's A/B (and its main-branch twin
PR #6429): the job `test_ep_overlap.PR6311` builds, full recompute in both arms, 32 CUDA
connections."""

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer import ep_overlap_hidden
from starfabric.astral.seer.ep_overlap_hidden import (
    EP_OVERLAP_HIDDEN_FRACTION,
    PR6311_AB,
    PR6311_GAIN,
    realized_exposed_fraction,
)
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.predict import make_job, predict

sys.path.insert(0, str(Path(__file__).parent))
from test_ep_overlap import PR6311, SYSTEM, _proxy

PR6429_GAIN = 199.5 / 185.2 - 1  # PR #6429's table: B (overlap + recompute) vs C (recompute)


def _gain(ex: dict[str, object] = PR6311) -> float:
    """Seer's speed-up of the overlap on the PR's job at equal (full) recompute."""
    base = {**ex, "recompute": "full"}
    off = predict(make_job(_proxy(), base, SYSTEM)).iteration_s
    on = predict(make_job(_proxy(), {**base, "ep_comm_overlap": True}, SYSTEM)).iteration_s
    return off / on - 1


def _fit(target: float, mp: pytest.MonkeyPatch) -> float:
    """The hidden share at which Seer's gain equals `target` (bisection: the gain grows with
    the share)."""
    lo, hi = 0.0, 1.0
    for _ in range(14):
        mid = (lo + hi) / 2
        mp.setattr(ep_overlap_hidden, "EP_OVERLAP_HIDDEN_FRACTION", mid)
        if _gain() > target:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def test_the_pr_table_gives_plus_7_8_percent_at_32_connections() -> None:
    assert [a[:2] for a in PR6311_AB] == [("no overlap", 1), ("overlap", 1), ("overlap", 32)]
    assert abs(PR6311_GAIN - 0.0776) < 5e-4
    assert abs(PR6429_GAIN - 0.0772) < 5e-4


def test_the_stream_replay_alone_hides_more_than_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Everything the replay hides, hidden: +13.7% against the measured +7.8% (the gap this
    module exists for)."""
    monkeypatch.setattr(ep_overlap_hidden, "EP_OVERLAP_HIDDEN_FRACTION", 1.0)
    assert _gain() > PR6311_GAIN + 0.05


def test_the_fraction_is_refit_from_pr6311_and_pr6429_agrees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fit = _fit(PR6311_GAIN, monkeypatch)
    assert fit == pytest.approx(EP_OVERLAP_HIDDEN_FRACTION, abs=0.01)
    # the main-branch twin of the same job, measured separately (+7.7%)
    assert _fit(PR6429_GAIN, monkeypatch) == pytest.approx(fit, abs=0.01)


def test_with_the_constant_seer_gains_what_the_pr_measured() -> None:
    assert _gain() == pytest.approx(PR6311_GAIN, abs=0.003)


def test_the_saving_in_seconds_is_near_the_prs() -> None:
    """Not fitted: 563.7 TFLOP per GPU and iteration (184.2 TFLOP/s x 3.060 s) makes the PR's
    saving 0.220 s (#6429's iteration means: 3.044 -> 2.839 s, 0.205 s); Seer's off arm is 9%
    slower than the PR's (its full-recompute cost), so the fit on the ratio saves a little more."""
    base = {**PR6311, "recompute": "full"}
    off = predict(make_job(_proxy(), base, SYSTEM)).iteration_s
    on = predict(make_job(_proxy(), {**base, "ep_comm_overlap": True}, SYSTEM)).iteration_s
    flop = PR6311_AB[0][2] * 1e12 * 3.060
    measured = flop / (PR6311_AB[0][2] * 1e12) - flop / (PR6311_AB[2][2] * 1e12)
    assert measured == pytest.approx(0.220, abs=0.002)
    assert 0.9 * measured < off - on < 1.25 * measured


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_realized_exposure_is_bounded_and_monotone(x: float, eta: float, y: float) -> None:
    got = realized_exposed_fraction(x, eta)
    assert x - 1e-12 <= got <= 1.0
    assert realized_exposed_fraction(x, 1.0) == pytest.approx(x)
    assert realized_exposed_fraction(x, 0.0) == 1.0
    if y >= x:
        assert realized_exposed_fraction(y, eta) >= got - 1e-12
    if y >= eta:
        assert realized_exposed_fraction(x, y) <= got + 1e-12


def test_only_megatrons_combined_schedule_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """DualPipe keeps its own pairing (`cost.pair_ep_overlap`); the plain 1F1B schedule with
    PP > 1 and no VPP has no combined step: neither moves with the fraction."""
    m = load_model("mixtral-8x7b-v0.1")
    dual = {"global_batch": 64, "seq_len": 4096, "tp": 1, "pp": 4, "ep": 8,
            "ep_comm_overlap": True, "pipeline_schedule": "dualpipe"}  # fmt: skip
    plain = {**PR6311, "vpp": 1, "pipeline_layers": [4, 4, 3, 3], "ep_comm_overlap": True}
    jobs = [make_job(m, dual, {"gpu": "H800", "gpus": 64}), make_job(_proxy(), plain, SYSTEM)]
    before = [predict(j).iteration_s for j in jobs]
    monkeypatch.setattr(ep_overlap_hidden, "EP_OVERLAP_HIDDEN_FRACTION", 0.2)
    assert [predict(j).iteration_s for j in jobs] == pytest.approx(before)
    assert _gain() < PR6311_GAIN  # while the combined schedule does move


def test_a_fused_dispatch_keeps_its_own_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchTitan's DistMoE kernel (`moe_fused_dispatch`) hides its all-to-all behind its own
    expert GEMMs (`cost.op_costs`); a row that also states an EP overlap does not run
    Megatron's combined 1F1B: neither the replay nor the fraction replaces that rule."""
    m = load_model("mixtral-8x7b-v0.1")
    ex = {"global_batch": 64, "seq_len": 4096, "tp": 1, "pp": 1, "ep": 8,
          "moe_fused_dispatch": True}  # fmt: skip
    sys_ = {"gpu": "H100", "gpus": 16, "gpus_per_node": 8}
    fused = predict(make_job(m, ex, sys_))
    both = predict(make_job(m, {**ex, "ep_comm_overlap": True}, sys_))
    assert both.breakdown["ep"] == pytest.approx(fused.breakdown["ep"])
    assert both.iteration_s == pytest.approx(fused.iteration_s)
    monkeypatch.setattr(ep_overlap_hidden, "EP_OVERLAP_HIDDEN_FRACTION", 0.2)
    assert predict(make_job(m, {**ex, "ep_comm_overlap": True}, sys_)).iteration_s == (
        pytest.approx(both.iteration_s)
    )
