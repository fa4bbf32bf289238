import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astral.seer.naive import pipeline_reference
from starfabric.astral.seer import _kernels, make_job, predict
from starfabric.astral.seer.schedule import COMPONENTS, schedule_order


def _run(p: int, v: int, m: int, fdur: np.ndarray, bdur: np.ndarray, p2p: float):
    order = schedule_order(p, v, m)
    solo = np.zeros(order[0].shape, np.int8)
    start, end, ok = _kernels.pipeline_times(*order, fdur, bdur, p2p, m, solo, fdur, bdur)
    return order, start, end, ok


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 3),
    st.integers(1, 4),
    st.floats(0.0, 0.5),
    st.randoms(use_true_random=False),
)
def test_kernel_matches_event_by_event_reference(p: int, v: int, k: int, p2p: float, rnd) -> None:
    if p == 1:
        v = 1
    m = p * k if v > 1 else k + p  # interleaving needs m % p == 0
    fdur = np.array([[rnd.uniform(0.5, 2.0) for _ in range(v)] for _ in range(p)])
    bdur = np.array([[rnd.uniform(1.0, 4.0) for _ in range(v)] for _ in range(p)])
    (is_fwd, mb, ch), start, end, ok = _run(p, v, m, fdur, bdur, p2p)
    assert ok == 1
    order = [
        [(bool(is_fwd[s, i]), int(mb[s, i]), int(ch[s, i])) for i in range(is_fwd.shape[1])]
        for s in range(p)
    ]
    ref = pipeline_reference(order, fdur.tolist(), bdur.tolist(), p2p)
    for s in range(p):
        np.testing.assert_allclose(start[s], [a for a, _ in ref[s]], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(end[s], [b for _, b in ref[s]], rtol=1e-12, atol=1e-12)


def test_every_microbatch_runs_forward_and_backward_through_every_chunk() -> None:
    p, v, m = 4, 3, 8
    is_fwd, mb, ch = schedule_order(p, v, m)
    for s in range(p):
        pairs = sorted(zip(is_fwd[s].tolist(), mb[s].tolist(), ch[s].tolist(), strict=True))
        assert pairs == sorted((f, b, c) for f in (0, 1) for b in range(m) for c in range(v))


def test_1f1b_bubble_is_p_minus_1_stage_times() -> None:
    p, m, f, b = 4, 16, 1.0, 2.0
    fdur, bdur = np.full((p, 1), f), np.full((p, 1), b)
    _, _start, end, _ = _run(p, 1, m, fdur, bdur, 0.0)
    # Classic result (Narayanan et al. SC'21, section 2.2): makespan = (m + p - 1) (f + b).
    assert end.max() == pytest.approx((m + p - 1) * (f + b))


def test_interleaving_shrinks_the_bubble_by_v() -> None:
    p, m, f, b = 4, 16, 1.0, 2.0
    plain = _run(p, 1, m, np.full((p, 1), f), np.full((p, 1), b), 0.0)[2].max()
    inter = _run(p, 2, m, np.full((p, 2), f / 2), np.full((p, 2), b / 2), 0.0)[2].max()
    ideal = m * (f + b)
    assert (inter - ideal) == pytest.approx((plain - ideal) / 2)


def test_breakdown_adds_up_to_iteration_time() -> None:
    pred = predict(make_job("llama-3.1-70b", {"global_batch": 256, "seq_len": 4096, "tp": 8,
                                              "pp": 4, "vpp": 2, "recompute": "selective"},
                            {"gpu": "H100", "gpus": 256}))  # fmt: skip
    assert set(pred.breakdown) == set(COMPONENTS)
    assert sum(pred.breakdown.values()) == pytest.approx(pred.iteration_s, rel=1e-9)
    assert all(v >= -1e-12 for v in pred.breakdown.values())
    assert pred.breakdown["bubble"] > 0 and pred.breakdown["tp"] > 0 and pred.breakdown["dp"] > 0
