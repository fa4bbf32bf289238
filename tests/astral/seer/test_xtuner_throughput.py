"""XTuner's ThroughputHook reader (seer/xtuner_throughput.py), checked against the hook's and
the launcher's code @7575f2c: the printed figure is the current mmengine iteration's
(`get_scalar('train/time').current()`, `window_size = log_interval = 1`), one iteration is one
micro-step (DeepSpeed `gradient_accumulation_steps` = `accumulative_counts`), and only the
boundary iteration runs the optimizer step (DeepSpeed engine `step`)."""

import csv
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.validate import validate_row
from starfabric.astral.seer.xtuner_throughput import (
    boundary_line_share,
    comparable_step_s,
    logged_iteration_s,
    reads_hook_figure,
)

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
SMALL = {
    "name": "small", "layers": 4, "hidden": 4096, "heads": 32, "kv_heads": 8,
    "head_dim": 128, "ffn_hidden": 11008, "vocab": 32000, "activation": "swiglu",
}  # fmt: skip


@given(
    step=st.floats(1e-3, 1e5),
    frac=st.floats(0.0, 1.0),
    acc=st.integers(1, 128),
)
def test_logged_iterations_of_one_step_add_up_to_the_step(
    step: float, frac: float, acc: int
) -> None:
    # Every iteration of a step is timed once by IterTimerHook; the G lines sum to the step.
    boundary = frac * step
    lines = [
        logged_iteration_s(step, boundary, acc, at_boundary=(i == acc - 1)) for i in range(acc)
    ]
    assert sum(lines) == pytest.approx(step, rel=1e-9)
    # The published reading (tokens per step / (TGS x GPUs) from a non-boundary line).
    expected = step if acc == 1 else step - boundary
    assert comparable_step_s(step, boundary, acc) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_gradient_accumulation_one_reads_the_whole_step() -> None:
    assert comparable_step_s(37.0, 14.0, 1) == 37.0
    assert logged_iteration_s(37.0, 14.0, 1, at_boundary=False) == 37.0


@pytest.mark.parametrize(
    ("acc", "interval", "share"),
    [(1, 1, 1.0), (4, 1, 0.25), (16, 1, 1 / 16), (4, 10, 0.5), (8, 10, 0.25), (64, 10, 1 / 32)],
)
def test_share_of_printed_lines_at_the_boundary(acc: int, interval: int, share: float) -> None:
    # LoggerHook prints when (iter + 1) % interval == 0; DeepSpeed steps when
    # (micro_step + 1) % accumulation == 0. XTuner's benchmark configs: interval 1.
    assert boundary_line_share(acc, interval) == pytest.approx(share)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        logged_iteration_s(1.0, 2.0, 4, at_boundary=False)
    with pytest.raises(ValueError):
        boundary_line_share(0)


def _rows() -> dict[str, dict[str, str]]:
    with DEV2.open() as f:
        return {r["row_id"]: r for r in csv.DictReader(f)}


def test_reader_names_the_xtuner_rows_only() -> None:
    rows = _rows()
    xt = [r for r in rows.values() if r["source_id"] == "XTUNER_SP_BENCH"]
    assert xt and all(
        reads_hook_figure(r["framework"], r["metric_primary"], r["tflops_flop_convention"])
        for r in xt
    )
    others = [r for r in rows.values() if r["source_id"] != "XTUNER_SP_BENCH"]
    assert not any(
        reads_hook_figure(r["framework"], r["metric_primary"], r["tflops_flop_convention"])
        for r in others
    )
    assert not reads_hook_figure("not XTuner (Megatron-LM)", "TGS", "")


def test_zero3_boundary_is_the_optimizer_only() -> None:
    # DeepSpeed engine.allreduce_gradients: ZeRO >= 2 reduces in every backward, so under
    # ZeRO-3 (no pipeline) the only boundary-only work is the optimizer step.
    ex = {"global_batch": 32, "seq_len": 8192, "tp": 1, "pp": 1, "zero": 3, "recompute": "full"}
    pred = predict(make_job(SMALL, ex, {"gpu": "A100", "gpus": 8, "gpus_per_node": 8}))
    assert pred.layout.micro_batches == 4
    assert pred.timeline.boundary_s == pytest.approx(pred.breakdown["optimizer"])
    # ZeRO-1: the gradient reduce-scatter and parameter all-gather wait for the boundary too.
    pred1 = predict(make_job(SMALL, {**ex, "zero": 1},
                             {"gpu": "A100", "gpus": 8, "gpus_per_node": 8}))  # fmt: skip
    b = pred1.breakdown
    assert b["optimizer"] < pred1.timeline.boundary_s <= b["optimizer"] + b["dp"] + 1e-12


def test_validate_compares_a_micro_step_reading_when_accumulating() -> None:
    rows = _rows()
    ga4 = validate_row(rows["XTSP-11"])  # SP 4, DP 8, accumulative_counts 4
    step = ga4.prediction.iteration_s
    assert ga4.predicted_iter_s == pytest.approx(step - ga4.prediction.timeline.boundary_s)
    assert "ThroughputHook" in str(ga4.choices["published_figure"])
    ga1 = validate_row(rows["XTSP-10"])  # SP 1, DP 32, accumulative_counts 1
    assert ga1.predicted_iter_s == ga1.prediction.iteration_s
    assert "published_figure" not in ga1.choices


def test_zero2_gradient_reduction_is_not_boundary_only() -> None:
    """DeepSpeed `allreduce_gradients`: ZeRO stage >= 2 (`zero_optimization_partition_gradients`)
    reduces in every backward, so under ZeRO-2 the boundary is the optimizer and the parameter
    all-gather, not the end-of-step reduction that ZeRO-1 (boundary only) adds."""
    ex = {"global_batch": 32, "seq_len": 4096, "tp": 1, "pp": 1, "zero": 1, "recompute": "full"}
    sys_ = {"gpu": "A100", "gpus": 16, "gpus_per_node": 8}
    one = predict(make_job(SMALL, ex, sys_)).timeline
    two = predict(make_job(SMALL, {**ex, "zero": 2}, sys_)).timeline
    tail = float(one.tail_s[one.critical_stage])
    assert tail > 0  # two nodes: the reduction's tail is exposed
    assert two.iteration_s == pytest.approx(one.iteration_s)  # same step, same costs
    assert two.boundary_s == pytest.approx(one.boundary_s - tail)


HOOK_SPELLINGS = ("TGS", "tokens/GPU/s", "tokens/s/GPU", "tokens per GPU per second",
                  "tok/s/GPU", "token/s per GPU", "ThroughputHook", "throughput_hook.py",
                  "throughput hook")  # fmt: skip
NOT_HOOK = ("TFLOP/s per GPU", "iteration time (s)", "MFU", "tokens/s (cluster)", "samples/s")


@given(
    pre=st.sampled_from(("", "XTuner speed benchmark: ", "per-iteration ")),
    word=st.sampled_from(HOOK_SPELLINGS),
    neg=st.sampled_from(("", "not ", "without ")),
    other=st.sampled_from(NOT_HOOK),
)
def test_reader_takes_every_spelling_of_the_hooks_figure(
    pre: str, word: str, neg: str, other: str
) -> None:
    """How another transcriber writes the metric cell: TGS spelled out, the hook's class or
    file name; negated ("not TGS") or another figure, it is not the hook's."""
    fw = "XTuner v0.1.23 (DeepSpeed ZeRO-3)"
    assert reads_hook_figure(fw, pre + neg + word, "") is (neg == "")
    assert reads_hook_figure(fw, other, pre + neg + word) is (neg == "")
    assert not reads_hook_figure(fw, other, "")
    assert not reads_hook_figure("Megatron-LM", pre + word, "")
