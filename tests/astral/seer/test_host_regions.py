"""Host seconds per launch over a pass's annotated regions (seer/host_regions.py).

The per-launch host cost Seer charges (`host_ops.HOST_S_PER_LAUNCH_*`) is recomputed from the
bundled HolisticTraceAnalysis A100 trace; the estimator is checked on a hand-built trace; and
Megatron-Core's single shared-expert module is counted once."""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from starfabric.astral.seer.host_ops import (
    HOST_S_PER_LAUNCH_BWD,
    HOST_S_PER_LAUNCH_FWD,
    LAUNCHES,
    LayerLaunchSpec,
    layer_launches,
)
from starfabric.astral.seer.host_regions import region_per_launch
from starfabric.astral.seer.host_trace import host_per_launch, load_events

CONTROL = (
    Path(__file__).resolve().parents[2]
    / "data"
    / "kineto"
    / ("hta_trace_diff_control_a100_ws8_rank3.json.gz")
)


def _ev(
    name: str, ts: float, dur: float, cat: str = "cuda_runtime", tid: int = 1
) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def test_hand_built_trace() -> None:
    # A 100 us region with 4 launches (one on another thread) and a 20 us synchronize:
    # (100 - 20) / 4 = 20 us per launch; a launch outside the region does not count.
    ev = [
        _ev("fwd", 0, 100, cat="user_annotation"),
        *[_ev("cudaLaunchKernel", t, 2) for t in (5, 30, 60)],
        _ev("cudaLaunchKernel", 70, 2, tid=2),
        _ev("cudaStreamSynchronize", 40, 20),
        _ev("cudaLaunchKernel", 150, 2),
        _ev("other", 0, 500, cat="user_annotation"),
    ]
    per, n = region_per_launch(ev, ["fwd"])
    assert n == 4 and per == pytest.approx(20e-6)
    per2, n2 = region_per_launch([*ev, _ev("fwd", 200, 30, cat="user_annotation")], ["fwd"])
    assert n2 == 4 and per2 == pytest.approx(110e-6 / 4)  # an empty region still costs time
    nan, zero = region_per_launch(ev, ["absent"])
    assert zero == 0 and nan != nan


def test_charged_cost_is_the_control_traces_region_mean() -> None:
    ev = load_events(CONTROL)
    fwd, nf = region_per_launch(ev, ["## forward ##"])
    bwd, nb = region_per_launch(ev, ["## backward ##"])
    assert (nf, nb) == (2532, 5562)  # 6 steps: 422 forward, 927 backward launches each
    assert fwd == pytest.approx(HOST_S_PER_LAUNCH_FWD, abs=0.1e-6)
    assert bwd == pytest.approx(HOST_S_PER_LAUNCH_BWD, abs=0.1e-6)
    # The starved-interval median (31/34 us) samples only the short intervals: it is below
    # the mean a pass pays, by 1.5x forward and 1.1x backward on this trace.
    mf, mb = host_per_launch(CONTROL)
    assert mf < fwd and mb < bwd


def test_deepseek_h800_check_is_within_the_stated_spread() -> None:
    # DeepSeek's H800 DualPipe trace (deepseek-ai/profile-data train.json, not bundled):
    # 47.0 us forward (347 launches), 43.4 us backward (604), host_regions docstring.
    assert abs(47.0e-6 / HOST_S_PER_LAUNCH_FWD - 1) < 0.05
    assert abs(43.4e-6 / HOST_S_PER_LAUNCH_BWD - 1) < 0.20


def test_one_shared_expert_module_per_layer() -> None:
    # Qwen2-57B-A14B's shared expert (20480 wide) is written as 8 experts of 2560 for its
    # FLOPs; Megatron-Core runs one SharedExpertMLP of moe_shared_expert_intermediate_size.
    moe = LayerLaunchSpec(True, dispatcher="alltoall", local_experts=16)
    one = layer_launches(replace(moe, shared_experts=1))
    eight = layer_launches(replace(moe, shared_experts=8))
    none = layer_launches(replace(moe, shared_experts=0))
    assert one == eight
    assert one.fwd - none.fwd == LAUNCHES["shared_expert"].fwd
