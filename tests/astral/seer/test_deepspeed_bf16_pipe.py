"""DeepSpeed's BF16 pipeline engine (seer/deepspeed_bf16_pipe.py), checked against the code:
from v0.6.2 (PR #1801) `PipelineEngine._bf16_reduce_grads` all-reduces BF16_Optimizer's whole
FP32 gradient buffer (`buffered_allreduce_fallback`), i.e. twice a reduce-scatter's ring
traffic, while the optimizer stays partitioned and all-gathers BF16 parameters."""

import pytest

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.comm import formula_comm
from starfabric.astral.seer.deepspeed_bf16_pipe import (
    BF16_PIPE_RELEASE,
    grad_coll_factor,
    named_release,
    runs_bf16_pipe_path,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.schedule import grad_bytes, stage_params


@pytest.mark.parametrize(
    ("framework", "precision", "want"),
    [
        ("Megatron-DeepSpeed (2022)", "bf16", True),
        ("DeepSpeed 0.6.2 + Megatron-LM", "bf16", True),
        ("deepspeed==0.8.0, Megatron-DeepSpeed", "bf16", True),
        ("DeepSpeed v0.6.1 + Megatron-LM", "bf16", False),  # before PR #1801
        ("DeepSpeed 0.5 + Megatron-LM (2021)", "bf16", False),
        ("DeepSpeed PipeDream-Flush + Megatron TP (2022)", "fp16", False),  # GLM-130B: FP16
        ("Megatron-LM (2022)", "bf16", False),
        ("Megatron-Core 0.12", "bf16", False),
        ("Megatron-LM (not DeepSpeed)", "bf16", False),  # a negated mention
    ],
)
def test_reader(framework: str, precision: str, want: bool) -> None:
    assert runs_bf16_pipe_path(framework, precision) is want


def test_release_reading() -> None:
    # the release the path entered in is the reader's boundary
    major, minor, patch = BF16_PIPE_RELEASE
    assert runs_bf16_pipe_path(f"DeepSpeed {major}.{minor}.{patch}", "bf16")
    assert not runs_bf16_pipe_path(f"DeepSpeed {major}.{minor}.{patch - 1}", "bf16")
    assert named_release("DeepSpeed 0.6.1 & Megatron") == (0, 6, 1)
    assert named_release("deepspeed v0.5.x + megatron-lm") == (0, 5, 0)
    assert named_release("Megatron-DeepSpeed") is None


def test_traffic_factor() -> None:
    assert grad_coll_factor(1, True, 8) == 2.0  # all-reduce = reduce-scatter + all-gather
    assert grad_coll_factor(1, True, 1) == 1.0  # no pipeline engine: ZeRO's reduce-scatter
    assert grad_coll_factor(1, False, 8) == 1.0
    assert grad_coll_factor(0, False, 8) == 2.0


def _job(flag: bool, pp: int) -> dict[str, object]:
    return {
        "global_batch": 64, "seq_len": 2048, "tp": 4, "pp": pp, "micro_batch": 1,
        "precision": "bf16", "zero": 1, "overlap_grad_reduce": False,
        "overlap_param_gather": False, "deepspeed_bf16_pipe": flag,
        # A DeepSpeed run blocks on the TP grad-input collective whichever the flag
        # (async_grad_input.job_default): stated, so that only the flag differs.
        "tp_async_backward": False,
    }  # fmt: skip


SYSTEM = {"gpu": "A100", "gpus": 64, "gpus_per_node": 8, "nic_bandwidth": "100Gbps"}


def test_step_grows_by_the_all_gather_half_of_the_all_reduce() -> None:
    """Differential: with the reduction after the flush (not overlapped), the step grows by
    all_reduce - reduce_scatter of one stage's FP32 gradients on the DP group; compute does
    not move."""
    model = load_model("llama-3.1-8b")
    p = {f: predict(make_job("llama-3.1-8b", _job(f, 2), SYSTEM)) for f in (False, True)}
    ex, lay = p[False].job.execution, p[False].layout
    comm = formula_comm(ex, lay, efficiency_for(lay.gpu, {}))
    gb = grad_bytes(ex)
    assert gb == 4.0
    deltas = [
        comm.time("all_reduce", sp.dense * gb, "dp")
        - comm.time("reduce_scatter", sp.dense * gb, "dp")
        for sp in stage_params(model, lay)
    ]
    got = p[True].iteration_s - p[False].iteration_s
    assert min(deltas) * (1 - 1e-6) <= got <= max(deltas) * (1 + 1e-6)
    assert got > 0
    for k in ("compute", "recompute", "tp", "pp"):
        assert p[True].breakdown[k] == pytest.approx(p[False].breakdown[k])


def test_no_pipeline_no_change() -> None:
    """PP 1 runs DeepSpeed's ordinary engine (ZeRO's reduce): the flag changes nothing."""
    t = {
        f: predict(make_job("llama-3.1-8b", _job(f, 1), SYSTEM)).iteration_s for f in (False, True)
    }
    assert t[True] == pytest.approx(t[False], rel=1e-12)
