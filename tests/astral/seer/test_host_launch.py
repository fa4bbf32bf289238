"""Host launch time of Megatron-Core layers (seer/host_ops.py, seer/host_trace.py).

The per-launch host cost is measured again here from the real Kineto trace it was taken from;
the launch counts follow Megatron-Core core_v0.17.1's code path; a pass that starts after the
MoE dispatcher's host wait lasts max(host, GPU); a GPU-bound job does not move."""

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.host_ops import (
    HOST_S_PER_LAUNCH_BWD,
    HOST_S_PER_LAUNCH_FWD,
    LAUNCHES,
    LayerLaunchSpec,
    host_seconds,
    host_synced,
    layer_launches,
    segment_time,
)
from starfabric.astral.seer.host_trace import host_per_launch, launch_intervals, load_events
from starfabric.astral.seer.schedule import PassCost, host_pass
from starfabric.errors import DataError

KINETO = Path(__file__).resolve().parents[2] / "data" / "kineto"
CONTROL = KINETO / "hta_trace_diff_control_a100_ws8_rank3.json.gz"


def test_starved_median_of_the_control_trace() -> None:
    # The GPU-starved intervals' median (Seer's per-launch cost before host_regions): 31/34 us,
    # below the launch-weighted mean a pass pays (test_host_regions.py).
    fwd, bwd = host_per_launch(CONTROL)
    assert fwd == pytest.approx(31e-6, abs=0.5e-6)
    assert bwd == pytest.approx(34e-6, abs=0.5e-6)
    assert fwd < HOST_S_PER_LAUNCH_FWD and bwd < HOST_S_PER_LAUNCH_BWD
    li = launch_intervals(load_events(CONTROL))
    # Enough host-bound intervals to make a median (288 forward, 2,384 backward).
    assert li.forward.size > 200 and li.backward.size > 2000


def test_other_traces_medians_are_the_same_order() -> None:
    # The sampled 128-rank trace's Python thread: 45-52 us per launch (a spread, not a fit).
    fwd, _ = host_per_launch(KINETO / "hta_sampled_rank-0.json.gz")
    assert 31e-6 < fwd < 3 * HOST_S_PER_LAUNCH_FWD


def test_trace_without_launches_has_no_median_and_bad_file_is_an_error(tmp_path: Path) -> None:
    li = launch_intervals(load_events(KINETO / "hta_trace_compare_base_tiny.json.gz"))
    assert li.forward.size == 0
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(DataError, match="traceEvents"):
        load_events(bad)


def test_op_count_table() -> None:
    dense = layer_launches(LayerLaunchSpec(False))
    # + the DDP hook's main_grad adds of the two norm weights (grad_adds_attention)
    assert (dense.fwd, dense.bwd) == (12 + 6, 19 + 2 + 10)
    one = layer_launches(LayerLaunchSpec(True, dispatcher="alltoall", local_experts=1))
    # attention + router + dispatch + combine + experts (fixed + 1 local), no sort
    assert one.fwd == 12 + 28 + 20 + 3 + 11 + 2
    assert one.bwd == 19 + 2 + 13 + 1 + 4 + 4 + 11 + 4  # + norm and router weight adds
    moe8 = LayerLaunchSpec(True, dispatcher="alltoall", local_experts=8)
    eight = layer_launches(moe8)
    # the sort/un-sort appears with a second local expert; each local expert adds one GEMM per
    # grouped linear forward, dgrad + wgrad backward
    assert eight.fwd - one.fwd == LAUNCHES["sort_alltoall"].fwd + 7 * 2
    assert eight.bwd - one.bwd == LAUNCHES["sort_alltoall"].bwd + 7 * 4
    shared = layer_launches(replace(moe8, shared_experts=1))
    assert shared.fwd - eight.fwd == LAUNCHES["shared_expert"].fwd
    deepep = layer_launches(replace(moe8, dispatcher="deepep"))
    assert deepep.fwd < eight.fwd  # no separate NCCL calls, no sort
    graphs = layer_launches(replace(moe8, cuda_graphs=True))
    assert graphs.fwd == eight.fwd - 12 - 28 + 1
    qk = layer_launches(replace(moe8, qk_norm=True))
    # two norms on non-contiguous slices (copy + norm each); backward norm + dgamma, grad adds
    assert (qk.fwd - eight.fwd, qk.bwd - eight.bwd) == (4, 4 + 2)
    mla = layer_launches(replace(moe8, mla=True, qk_norm=True))  # MLA has its own norms
    assert mla.fwd - eight.fwd == LAUNCHES["mla_attention"].fwd - LAUNCHES["attention"].fwd
    f, b = host_seconds(eight)
    assert f == pytest.approx(95 * HOST_S_PER_LAUNCH_FWD)
    assert b == pytest.approx(90 * HOST_S_PER_LAUNCH_BWD)


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_exposure_is_max_per_segment(host: float, compute: float, comm: float) -> None:
    pc = PassCost(compute, {"ep": comm}, 1.0)
    out = host_pass(pc, host)
    assert out.total == pytest.approx(segment_time(host, pc.total))
    assert out.compute == compute and out.comm["ep"] == comm  # GPU time itself is untouched
    assert out.comm.get("host", 0.0) == pytest.approx(max(0.0, host - pc.total))


def test_sync_only_for_dropless_moe_with_ep() -> None:
    assert host_synced(True, True, 16, True)
    assert not host_synced(True, True, 1, True)  # no EP: split sizes never leave the GPU
    assert not host_synced(True, True, 16, False)  # capacity: static sizes
    assert not host_synced(True, False, 16, True)  # dense layer
    assert not host_synced(False, True, 16, True)  # a stack whose launches are not counted


QWEN3_30B = {  # Qwen/Qwen3-30B-A3B config.json
    "name": "qwen3-30b-a3b", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4,
    "head_dim": 128, "ffn_hidden": 6144, "vocab": 151936, "activation": "swiglu",
    "moe_experts": 128, "moe_topk": 8, "moe_ffn_hidden": 768, "qk_norm": True,
}  # fmt: skip


def _iter(model: str | dict, host: bool, **ex: object) -> tuple[float, float]:  # type: ignore[type-arg]
    base = {"global_batch": 256, "seq_len": 4096, "micro_batch": 1, "tp": 8, "pp": 4,
            "ep": 16, "etp": 1, "sp": True, "moe_dispatcher": "alltoall",
            "host_launches": host}  # fmt: skip
    job = make_job(model, {**base, **ex}, {"gpu": "H100", "gpus": 64, "gpus_per_node": 8})
    p = predict(job)
    return p.iteration_s, p.breakdown.get("host", 0.0)


def test_host_bound_moe_layer_pays_the_host_time() -> None:
    off, h0 = _iter(QWEN3_30B, False)
    on, h1 = _iter(QWEN3_30B, True)
    # The host time on the critical stage's passes, plus the fill/drain slots it lengthens.
    assert h0 == 0.0 and h1 > 0 and on >= off + h1 - 1e-9
    # 512 tokens per rank per micro-batch: the GPU finishes a layer long before the host has
    # issued its ~180 launches, so per layer and micro-batch the stage costs at least the host
    # time of its 12 layers (67 micro-batches + 3 fill/drain slots on the critical stage).
    fh, bh = host_seconds(
        layer_launches(LayerLaunchSpec(True, dispatcher="alltoall", local_experts=8))
    )
    assert on > 64 * 12 * (fh + bh)


def test_gpu_bound_layers_do_not_move() -> None:
    # Dense 70B-class layer, micro-batch 2 of 4K tokens over TP 4: ~10 ms of GPU per layer pass
    # against ~1.5 ms of host; no wait in a dense layer, and the iteration floor does not bind.
    dense = {
        "name": "d70", "layers": 16, "hidden": 8192, "heads": 64, "kv_heads": 8,
        "head_dim": 128, "ffn_hidden": 28672, "vocab": 128256, "activation": "swiglu",
    }  # fmt: skip
    a, _ = _iter(dense, False, tp=4, pp=1, ep=1, micro_batch=2, moe_dispatcher="alltoall")
    b, hb = _iter(dense, True, tp=4, pp=1, ep=1, micro_batch=2, moe_dispatcher="alltoall")
    assert a == b and hb == 0.0
    # The same MoE job at micro-batch 8: the GPU time per pass exceeds the host's, so the
    # synced layers do not move either.
    c, _ = _iter(QWEN3_30B, False, micro_batch=8, tp=4, pp=1, ep=8)
    d, hd = _iter(QWEN3_30B, True, micro_batch=8, tp=4, pp=1, ep=8)
    assert hd == pytest.approx(d - c) and (d - c) / c < 0.02
