"""TorchTitan's DeepEP unpermute (`scripts/seer_scatter_unpermute.py`): the BF16 atomic scatters
a MoE layer runs, counted from the source, and the worklog figures the script reports.

Checked against: pytorch/torchtitan @5d4bdd0 `torchtitan/distributed/deepep/utils.py`
(`permute`: `index_select`, whose backward is `index_add_`; `unpermute`: `scatter_add_` into
`zeros(restore_shape)`), the Qwen3-30B-A3B rows' shapes (8 x 4,096 tokens a rank, top-8 of 128
experts, hidden 2,048, EP 8, full activation checkpointing), TorchTitan's round-robin forced
balance (a token's 8 experts on one rank), and Phuc Nguyen's worklog (B200; 'November 18':
96 `indexFuncLargeIndex<c10::BFloat16,...>` calls, 419.0 ms, avg 4364.7 us; 'November 14'
Nsight tables at EP 4 / EP 2)."""

from functools import cache
from pathlib import Path

import pytest

from astral.seer.load_script import load_script
from starfabric.astral.seer.deepep_kernels import rank_copy_fraction
from starfabric.astral.seer.predict import Job
from starfabric.astral.seer.validate import read_rows, validate_row

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
TTDEEPEP = tuple(f"TTDEEPEP-0{i}" for i in range(1, 7))

su = load_script("seer_scatter_unpermute")


@cache
def _row(row_id: str) -> tuple[dict[str, str], Job, float, float]:
    row = next(r for r in read_rows(DEV2) if r["row_id"] == row_id)
    res = validate_row(row)
    return row, res.prediction.job, res.published_iter_s, res.predicted_iter_s


def test_qwen3_30b_counts_from_the_source_shapes() -> None:
    # 8 sequences x 4,096 tokens on a rank, top-8: 262,144 (token, expert) rows of 2,048; the
    # round-robin routing puts all 8 copies of a token on one rank, so they are added into
    # 32,768 received tokens, 8 adds a row; full recompute runs the scatter twice, and the
    # permute's backward index_add once.
    _, job, _, _ = _row("TTDEEPEP-01")
    c = su.count(job)
    assert c.rows == 8 * 4096 * 8
    assert c.dest_rows == 8 * 4096
    assert c.adds_per_row == 8.0
    assert c.elements == 536_870_912
    assert (c.forward_calls, c.backward_calls, c.calls) == (2, 1, 3)
    # TTDEEPEP-06 ran local batch 10 (the README's weak-scaling row).
    assert su.count(_row("TTDEEPEP-06")[1]).rows == 10 * 4096 * 8


def test_random_routing_and_no_recompute_change_the_count() -> None:
    _, job, _, _ = _row("TTDEEPEP-01")
    ex = job.execution.model_copy(update={"moe_round_robin_routing": False})
    c = su.count(Job(job.model, ex, job.system))
    # DeepEP's random-routing expectation: ~5.25 distinct ranks of 8 for 128 experts, top-8.
    distinct = rank_copy_fraction(128, 8, 8) * 8
    assert c.rows == 8 * 4096 * 8
    assert c.adds_per_row == pytest.approx(8 / distinct)
    assert 1.4 < c.adds_per_row < 1.7
    ex = job.execution.model_copy(update={"recompute": "none"})
    assert su.count(Job(job.model, ex, job.system)).forward_calls == 1


def test_reading_is_torchtitan_with_deepeps_own_dispatch_only() -> None:
    for rid in ("TTDEEPEP-01", "TTDEEPEP-05"):
        row, job, _, _ = _row(rid)
        assert su.runs_deepep_unpermute(row["framework"], job)
    # DistMoE's fused backend has no unpermute of its own; the 2025-06 H200 rows are dense.
    for rid in ("TTDSV3-01", "TTH200-01"):
        row, job, _, _ = _row(rid)
        assert not su.runs_deepep_unpermute(row["framework"], job)
    # The same job under another framework's name is not TorchTitan's code path.
    row, job, _, _ = _row("TTDEEPEP-01")
    assert not su.runs_deepep_unpermute("Megatron-Core 0.13 (flex / DeepEP)", job)


def test_seer_charge_is_the_streaming_price_of_the_three_operators() -> None:
    _, job, _, _ = _row("TTDEEPEP-01")
    step, per_layer = su.seer_charge_s(job)
    assert step == pytest.approx(per_layer * 48)  # 48 MoE layers, one micro-batch, pp 1
    # Forward scatter bytes 2 x 2 B x 262,144 x 2,048 and 1.5x that backward, at one rate:
    # the two forward runs and the index_add backward cost 2 + 1.5 forward-units.
    assert 0.03 < step < 0.15
    c = su.count(job)
    rate = c.elements * c.calls * 48 / step
    assert 1e12 < rate < 2e12  # streaming elements/s (about 6 TB/s of HBM on B200)


def test_worklog_figures_reproduce() -> None:
    total_ms = su.WORKLOG_INDEX_ADD_US * su.WORKLOG_INDEX_ADD_CALLS / 1e3
    assert total_ms == pytest.approx(su.WORKLOG_INDEX_ADD_TOTAL_MS, abs=0.1)
    assert su.worklog_scatter_ratio("EP4") == pytest.approx(0.835, abs=1e-3)
    assert su.worklog_scatter_ratio("EP2") == pytest.approx(1.058, abs=1e-3)
    # Read as one EP-8 rank's permute backward at local batch 8 or 6.
    assert su.worklog_index_add_rate(8) == pytest.approx(123.0e9, rel=1e-3)
    assert su.worklog_index_add_rate(6) == pytest.approx(92.3e9, rel=1e-3)


def test_atomic_seconds_scale_with_rate_and_forward_calls() -> None:
    _, job, _, _ = _row("TTDEEPEP-01")
    a = su.atomic_step_seconds(job, 1e11, 1.0)
    assert su.atomic_step_seconds(job, 2e11, 1.0) == pytest.approx(a / 2)
    # index_add alone, then + both forward scatters at the index_add's time each
    assert su.atomic_step_seconds(job, 1e11, 0.0) == pytest.approx(a / 2)
    assert a == pytest.approx(536_870_912 / 1e11 * 2 * 48)


def test_rows_the_script_reports_and_what_they_imply() -> None:
    found = {r.row_id: r for r in su.rows_scatter(DEV2)}
    assert tuple(sorted(found)) == TTDEEPEP
    for r in found.values():
        gap = r.published_s - r.predicted_s
        assert gap > 0  # every TorchTitan DeepEP row is predicted too fast
        c = r.count
        elements = c.elements * c.calls * 48
        assert r.implied_rate == pytest.approx(elements / (r.charge_s + gap))
        assert r.implied_rate < r.streaming_rate
        # the worklog's kernel time, read either way, adds seconds to Seer's step
        assert all(s > r.predicted_s for s in r.worklog_s.values())
