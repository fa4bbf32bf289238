"""TorchTitan's DeepEP unpermute (`seer/scatter_unpermute.py`, `scripts/seer_scatter_unpermute.py`):
the BF16 atomic scatters a MoE layer runs, counted from the source, and priced at the rate
derived from the worklog's kernel figures.

Checked against: pytorch/torchtitan @5d4bdd0 `torchtitan/distributed/deepep/utils.py`
(`permute`: `index_select`, whose backward is `index_add_`; `unpermute`: `scatter_add_` into
`zeros(restore_shape)`), the Qwen3-30B-A3B rows' shapes (8 x 4,096 tokens a rank, top-8 of 128
experts, hidden 2,048, EP 8, full activation checkpointing), TorchTitan's round-robin forced
balance (a token's 8 experts on one rank), and Phuc Nguyen's worklog (B200; 'November 18':
96 `indexFuncLargeIndex<c10::BFloat16,...>` calls, 419.0 ms, avg 4364.7 us; 'November 14'
Nsight tables at EP 4 / EP 2)."""

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astral.seer.load_script import load_script
from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer import scatter_unpermute as sm
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.deepep_kernels import rank_copy_fraction
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.ops import MEM, OpTable, backward_of, layer_ops
from starfabric.astral.seer.predict import Job
from starfabric.astral.seer.validate import read_rows, row_setup, validate_row
from starfabric.errors import ConfigError

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


def test_worklog_figures_reproduce() -> None:
    total_ms = sm.WORKLOG_INDEX_ADD_US * sm.WORKLOG_INDEX_ADD_CALLS / 1e3
    assert total_ms == pytest.approx(sm.WORKLOG_INDEX_ADD_TOTAL_MS, abs=0.1)
    assert sm.worklog_scatter_ratio("EP4") == pytest.approx(0.835, abs=1e-3)
    assert sm.worklog_scatter_ratio("EP2") == pytest.approx(1.058, abs=1e-3)
    # Read as one EP-8 rank's permute backward at local batch 8 or 6.
    assert sm.worklog_index_add_rate(8) == pytest.approx(123.0e9, rel=1e-3)
    assert sm.worklog_index_add_rate(6) == pytest.approx(92.3e9, rel=1e-3)


def test_adopted_rates_derive_from_the_worklog() -> None:
    # 8 x 4,096 tokens x top-8 rows of 2,048 elements in one 4,364.7 us index_add call.
    index_add, per_call, scatter = (
        sm.INDEX_ADD_ELEMENTS_PER_S, sm.SCATTER_TO_INDEX_ADD, sm.SCATTER_ELEMENTS_PER_S
    )  # fmt: skip
    assert index_add == pytest.approx(536_870_912 / 4364.7e-6)
    # a forward scatter call: the two tables' mean forward/backward ratio over two forward runs
    mean = (3.583 / 4.289 + 1.843 / 1.742) / 2
    assert per_call == pytest.approx(mean / 2)
    assert per_call == pytest.approx(0.473, abs=1e-3)
    assert scatter == pytest.approx(index_add / (mean / 2))
    # the bounds the two tables give
    assert sm.scatter_to_index_add(sm.worklog_scatter_ratio("EP4")) == pytest.approx(
        0.418, abs=1e-3
    )
    assert sm.scatter_to_index_add(sm.worklog_scatter_ratio("EP2")) == pytest.approx(
        0.529, abs=1e-3
    )


@pytest.mark.parametrize(
    ("gpu", "flag", "priced"),
    [("B200", True, True), ("GB200", True, True), ("B300", True, True),
     ("H100", True, False), ("H200", True, False), ("B200", False, False)],
)  # fmt: skip
def test_rate_applies_on_blackwell_only(gpu: str, flag: bool, priced: bool) -> None:
    rates = sm.atomic_rates(get_gpu(gpu), flag)
    if priced:
        assert rates == (sm.INDEX_ADD_ELEMENTS_PER_S, sm.SCATTER_ELEMENTS_PER_S)
    else:
        assert rates == (0.0, 0.0)  # Hopper: no measurement at this shape, streaming stays


def test_reading_is_torchtitan_with_deepeps_own_dispatch_only() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    for rid in TTDEEPEP:
        assert row_setup(rows[rid]).execution.get("moe_atomic_unpermute") is True
        row, job, _, _ = _row(rid)
        assert su.runs_deepep_unpermute(row["framework"], job)
    # DistMoE's fused backend has no unpermute of its own; the 2025-06 H200 rows are dense;
    # Megatron-Core rows (DeepEP flex, alltoall over EFA) run their own permute.
    for rid in ("TTDSV3-01", "TTH200-01", "MZQ3-05", "MCGB-L03", "AWSQ235-EP32-MB4"):
        assert not row_setup(rows[rid]).execution.get("moe_atomic_unpermute", False)
    for rid in ("TTDSV3-01", "TTH200-01"):
        row, job, _, _ = _row(rid)
        assert not su.runs_deepep_unpermute(row["framework"], job)
    assert sm.runs_deepep_unpermute("TorchTitan (2025-10; DeepEP)", "deepep", False)
    assert not sm.runs_deepep_unpermute("TorchTitan (2025-10)", "alltoall", False)
    assert not sm.runs_deepep_unpermute("TorchTitan DistMoE", "deepep", True)
    assert not sm.runs_deepep_unpermute("Megatron-Core 0.13 (flex / DeepEP)", "deepep", False)


def _ctx_and_tables(job: Job):  # type: ignore[no-untyped-def]
    from starfabric.astral.seer.parallel import resolve_layout

    lay = resolve_layout(job.model, job.execution, job.system)
    ctx = make_context(job.execution, lay, efficiency_for(lay.gpu), job.system, job.model)
    fwd = layer_ops(job.model, job.execution, lay, True)
    return ctx, fwd, backward_of(fwd)


def test_priced_ops_take_elements_over_rate_and_nothing_else_moves() -> None:
    _, job, _, _ = _row("TTDEEPEP-01")
    off = su.with_atomic(job, False)
    ctx, fwd, bwd = _ctx_and_tables(job)
    ctx_off, _, _ = _ctx_and_tables(off)
    for table, backward, name, rate in (
        (fwd, False, "moe.unpermute", sm.SCATTER_ELEMENTS_PER_S),
        (bwd, True, "moe.permute.bwd", sm.INDEX_ADD_ELEMENTS_PER_S),
    ):
        on_t = op_costs(table, ctx, backward=backward).time
        off_t = op_costs(table, ctx_off, backward=backward).time
        hit = np.array([n == name for n in table.name])
        assert hit.sum() == 1
        assert on_t[hit][0] == pytest.approx(536_870_912 / rate)
        assert np.allclose(on_t[~hit], off_t[~hit])  # the gathers keep the streaming price


def test_seer_charge_is_the_adopted_rate_and_the_step_moves_by_it() -> None:
    """Differential: Seer's step with the mechanism minus without it is the three operators'
    atomic time minus their streaming price (full recompute runs the scatter twice)."""
    _, job, _, pred = _row("TTDEEPEP-01")
    step, per_layer = su.seer_charge_s(job)
    assert step == pytest.approx(per_layer * 48)  # 48 MoE layers, one micro-batch, pp 1
    mean = sm.SCATTER_TO_INDEX_ADD * sm.WORKLOG_FORWARD_CALLS
    assert step == pytest.approx(su.atomic_step_seconds(job, sm.INDEX_ADD_ELEMENTS_PER_S, mean))
    assert step == pytest.approx(48 * 536_870_912 * (
        1 / sm.INDEX_ADD_ELEMENTS_PER_S + 2 / sm.SCATTER_ELEMENTS_PER_S))  # fmt: skip
    off = su.with_atomic(job, False)
    streaming, _ = su.seer_charge_s(off)
    c = su.count(job)
    assert 1e12 < c.elements * c.calls * 48 / streaming < 2e12  # HBM-streaming elements/s
    delta = predict(job).iteration_s - predict(off).iteration_s
    assert delta == pytest.approx(step - streaming, rel=1e-6)
    assert pred == pytest.approx(predict(job).iteration_s)


def test_hopper_keeps_the_streaming_price() -> None:
    _, job, _, _ = _row("TTDEEPEP-01")
    system = job.system.model_copy(update={"gpu": "H100"})
    on = predict(Job(job.model, job.execution, system)).iteration_s
    off = predict(Job(job.model, su.with_atomic(job, False).execution, system)).iteration_s
    assert on == off


@settings(max_examples=40, deadline=None)
@given(
    rows=st.floats(1e3, 1e7), hidden=st.sampled_from([1024, 2048, 4096, 7168]),
    more=st.floats(1.01, 4.0),
)  # fmt: skip
def test_time_is_linear_and_monotonic_in_elements(rows: float, hidden: int, more: float) -> None:
    _, job, _, _ = _row("TTDEEPEP-01")
    ctx, _, _ = _ctx_and_tables(job)

    def t(r: float, name: str, backward: bool) -> float:
        tab = OpTable()
        tab.add(name, MEM, nbytes=4 * r * hidden, m=r, n=hidden)
        return float(op_costs(tab, ctx, backward=backward).time[0])

    for name, backward, rate in (("moe.unpermute", False, sm.SCATTER_ELEMENTS_PER_S),
                                 ("moe.permute.bwd", True, sm.INDEX_ADD_ELEMENTS_PER_S)):  # fmt: skip
        assert t(rows, name, backward) == pytest.approx(rows * hidden / rate)
        assert t(rows * more, name, backward) > t(rows, name, backward)


def test_busiest_rank_share_scales_the_rows() -> None:
    """Dropless routing: the DeepEP path permutes what the busiest rank received."""
    _, job, _, _ = _row("TTDEEPEP-01")
    ex = job.execution.model_copy(
        update={"moe_load_balance": "dropless", "moe_round_robin_routing": False}
    )
    dropless = Job(job.model, ex, job.system)
    ctx, fwd, _ = _ctx_and_tables(dropless)
    assert ctx.scatter_rows_factor > 1.0
    i = fwd.name.index("moe.unpermute")
    t = op_costs(fwd, ctx).time[i]
    assert t == pytest.approx(536_870_912 * ctx.scatter_rows_factor / sm.SCATTER_ELEMENTS_PER_S)


def test_refused_where_it_cannot_apply() -> None:
    sys_ = {"gpu": "B200", "gpus": 64}
    with pytest.raises(ConfigError, match="moe_atomic_unpermute = True on a dense model"):
        predict(make_job("llama-3.1-8b", {"global_batch": 64, "seq_len": 4096,
                                          "moe_atomic_unpermute": True,
                                          "moe_dispatcher": "deepep"}, sys_))  # fmt: skip
    moe = {"global_batch": 64, "seq_len": 4096, "ep": 8, "moe_atomic_unpermute": True}
    with pytest.raises(ConfigError, match="moe_atomic_unpermute = True with moe_fused_dispatch"):
        make_job("mixtral-8x7b-v0.1", {**moe, "moe_dispatcher": "deepep",
                                       "moe_fused_dispatch": True}, sys_)  # fmt: skip
    # The scatters are TorchTitan's DeepEP path: not the all-to-all dispatcher's, not HybridEP's.
    with pytest.raises(ConfigError, match=r"moe_dispatcher 'alltoall'.*set moe_dispatcher: deepep"):
        make_job("mixtral-8x7b-v0.1", moe, sys_)
    with pytest.raises(ConfigError, match="moe_flex_backend 'hybridep'"):
        make_job("mixtral-8x7b-v0.1", {**moe, "moe_dispatcher": "deepep",
                                       "moe_flex_backend": "hybridep"}, sys_)  # fmt: skip
    job = make_job("mixtral-8x7b-v0.1", {**moe, "moe_dispatcher": "deepep"}, sys_)
    assert job.execution.moe_atomic_unpermute


def test_rows_the_script_reports() -> None:
    found = {r.row_id: r for r in su.rows_scatter(DEV2)}
    assert tuple(sorted(found)) == TTDEEPEP
    for r in found.values():
        # at the streaming price every row was >= 16% fast; the adopted rate adds its charge
        assert (r.streaming_s - r.published_s) / r.published_s < -0.15
        assert r.predicted_s - r.streaming_s == pytest.approx(
            r.charge_s - r.streaming_charge_s, rel=1e-6
        )
        readings = r.reading_s
        assert readings["adopted (LBS 8, mean)"] == pytest.approx(r.predicted_s)
        # fewer elements per call (LBS 6) means a slower rate, so a slower step; the EP-4
        # table's ratio is the lower bound of the forward scatter's time, EP 2 the upper
        assert readings["LBS 6, mean"] > r.predicted_s
        assert readings["LBS 8, EP4"] < r.predicted_s < readings["LBS 8, EP2"]


def test_megatron_experiment_reads_the_unfused_rows_only() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    # Megatron-Bridge recipes set moe_permute_fusion; MCGB states --moe-permute-fusion.
    for rid in ("AWSQ235-EP32-MB4", "MCGB-L03"):
        assert not su.runs_megatron_unfused(rows[rid], validate_row(rows[rid]).prediction.job)
    assert su.runs_megatron_unfused(rows["MZQ3-05"], validate_row(rows["MZQ3-05"]).prediction.job)
    _, job, _, _ = _row("TTDEEPEP-01")
    assert not su.runs_megatron_unfused(rows["TTDEEPEP-01"], job)
