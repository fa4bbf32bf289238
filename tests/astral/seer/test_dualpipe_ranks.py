"""DualPipe's per-rank step: rank r holds stage r of one direction and stage pp-1-r of the
other (DeepSeek-V3 section 3.2.1; deepseek-ai/DualPipe examples/example_dualpipe.py @7cb1e5e:
`local_modules` = stages rank and pp-1-rank, each keeping its own gradients), so a rank's
gradient reduction, parameter gather and host launches cover both its stages. Uneven stages
make the per-rank and per-stage figures differ."""

from __future__ import annotations

import numpy as np
import pytest

from starfabric.astral.seer import load_model, make_job, predict

SYSTEM = {"gpu": "H800", "gpus": 64}
# uneven: stage 0 and stage 3 (rank 0) hold 2 + 6 layers, stages 1 and 2 (rank 1) 8 + 16
UNEVEN = [2, 8, 16, 6]


def _tl(schedule: str, **ex: object):  # type: ignore[no-untyped-def]
    base = {"global_batch": 64, "seq_len": 4096, "tp": 1, "pp": 4, "ep": 8, "zero": 1,
            "ep_comm_overlap": True, "pipeline_layers": UNEVEN,
            "pipeline_schedule": schedule}  # fmt: skip
    return predict(make_job(load_model("mixtral-8x7b-v0.1"), {**base, **ex}, SYSTEM)).timeline


def test_a_rank_and_its_mirror_hold_the_same_stages() -> None:
    tl = _tl("dualpipe")
    p = len(UNEVEN)
    for r in range(p):
        assert tl.tail_s[r] == pytest.approx(tl.tail_s[p - 1 - r], rel=1e-12)
        mine, mirror = np.array(tl.dp_windows[r]), np.array(tl.dp_windows[p - 1 - r])
        assert mine.shape == mirror.shape
        np.testing.assert_allclose(mine, mirror, rtol=1e-12)


def test_a_rank_reduces_the_gradients_of_both_its_stages() -> None:
    # With the reduction after the backward (nothing hidden), a stage's exposed reduction is
    # its gradients' collective time, the same under either schedule (same layout, no MTP):
    # a DualPipe rank's is the sum of its two stages'.
    one = _tl("1f1b", overlap_grad_reduce=False)
    dual = _tl("dualpipe", overlap_grad_reduce=False)
    p = len(UNEVEN)
    assert one.tail_s[0] != pytest.approx(one.tail_s[p - 1], rel=1e-3)  # uneven stages
    for r in range(p):
        assert dual.tail_s[r] == pytest.approx(one.tail_s[r] + one.tail_s[p - 1 - r], rel=1e-9)


def test_boundary_work_holds_the_critical_ranks_whole_reduction() -> None:
    # ZeRO-1: the accumulation boundary runs the critical rank's exposed gradient reduction
    # (both its stages', here rank 1: stages 1 and 2, the busiest), then gather and optimizer.
    one = _tl("1f1b", overlap_grad_reduce=False)
    dual = _tl("dualpipe", overlap_grad_reduce=False)
    assert dual.critical_stage == 1
    assert dual.boundary_s >= one.tail_s[1] + one.tail_s[2] - 1e-12
