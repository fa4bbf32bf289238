"""An infeasible layout's fix names only values that work: every `use KEY in [...]` value is
substituted and predicted, and a fix that finds none points at a search that does."""

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import SystemSpec, load_model, make_job, predict, search
from starfabric.errors import InfeasibleError

USE = re.compile(r"use (\w+) in \[([\d, ]+)\]")


def _suggested(model: str, ex: dict, system: dict) -> tuple[str, list[int], str] | None:
    """(key, values, message) of the fix, or None when the job is feasible."""
    try:
        predict(make_job(model, ex, system))
    except InfeasibleError as exc:
        msg = str(exc)
        m = USE.search(msg)
        if m is None:
            return ("", [], msg)
        return (m.group(1), [int(v) for v in m.group(2).split(",")], msg)
    return None


def _all_work(model: str, ex: dict, system: dict, key: str, values: list[int]) -> None:
    assert ex[key] not in values
    for v in values:
        p = predict(make_job(model, {**ex, key: v}, system))  # raises if the suggestion fails
        assert p.iteration_s > 0


@pytest.mark.parametrize(
    ("model", "ex", "system", "key"),
    [
        # the case: tp = 3 on the demo job (1,024 GPUs; 64 heads, 8 KV heads)
        ("llama-3.1-70b", {"tp": 3, "pp": 4, "vpp": 5}, {"gpus": 1024}, "tp"),
        ("llama-3.1-70b", {"tp": 3, "pp": 4, "global_batch": 1536}, {"gpus": 192}, "tp"),
        ("qwen2.5-32b-instruct", {"tp": 10, "global_batch": 640}, {"gpus": 160}, "tp"),
        ("llama-3.1-8b", {"tp": 3, "pp": 2, "global_batch": 96}, {"gpus": 48}, "tp"),
        ("llama-3.1-8b", {"cp": 8, "seq_len": 4100}, {"gpus": 64}, "cp"),
        ("mixtral-8x7b-v0.1", {"ep": 3}, {"gpus": 64}, "ep"),
    ],
)
def test_every_suggested_value_predicts(model: str, ex: dict, system: dict, key: str) -> None:
    ex = {"global_batch": 1024, "seq_len": 4096, **ex}
    system = {"gpu": "H100", **system}
    got = _suggested(model, ex, system)
    assert got is not None and got[0] == key, got
    _all_work(model, ex, system, key, got[1])


def test_no_working_value_points_at_a_search_that_finds_layouts() -> None:
    # 96 GPUs, global batch 1,024: tp = 3 does not divide the heads, and no other tp leaves a
    # dp that divides the batch with pp = 4; the fix must not list any tp.
    ex = {"global_batch": 1024, "seq_len": 8192, "tp": 3, "pp": 4}
    system = {"gpu": "H100", "gpus": 96}
    got = _suggested("llama-3.1-70b", ex, system)
    assert got is not None and got[0] == "" and "no tp works" in got[2]
    assert "seer search llama-3.1-70b --gpus 96 --global-batch 1024 --seq-len 8192" in got[2]
    res = search(load_model("llama-3.1-70b"), SystemSpec(gpu="H100", gpus=96), 1024, 8192)
    assert len(res.ranked()) > 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tp=st.sampled_from([1, 2, 3, 4, 6, 8, 16]),
    pp=st.sampled_from([1, 2, 3, 4]),
    cp=st.sampled_from([1, 2, 3]),
    nodes=st.sampled_from([2, 3, 4, 6, 8]),
    gb=st.sampled_from([96, 128, 256]),
)
@example(tp=3, pp=1, cp=1, nodes=3, gb=96)  # heads = 32: 16 and 32 divide it, not kv_heads = 8
def test_suggestions_hold_for_any_layout(tp: int, pp: int, cp: int, nodes: int, gb: int) -> None:
    ex = {"global_batch": gb, "seq_len": 4096, "tp": tp, "pp": pp, "cp": cp}
    system = {"gpu": "H100", "gpus": 8 * nodes}
    got = _suggested("llama-3.1-8b", ex, system)
    if got is not None and got[0]:
        _all_work("llama-3.1-8b", ex, system, got[0], got[1])
