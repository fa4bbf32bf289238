"""DeepSpeed's pipeline engine runs Megatron's 1F1B order (issue 32, A100-era DeepSpeed rows).

Seer prices a DeepSpeed-pipeline run (GLM-130B's "DeepSpeed PipeDream-Flush", the 2021-22
Megatron-DeepSpeed 3D runs) with the per-stage op order `schedule.schedule_order` builds for
Megatron's non-interleaved 1F1B. This checks that assumption against DeepSpeed's own schedule:
`TrainSchedule` in deepspeed/runtime/pipe/schedule.py at v0.6.0 (read, re-stated here) runs
2 (m + p - 1) steps; on a stage with the same parity as the step the step is a forward of
micro-batch step//2 - stage//2, otherwise a backward of micro-batch
step//2 - p + (stage + 1)//2 (even steps) or (step - 1)//2 - p + 1 + stage//2 (odd steps);
ids outside 0..m-1 are idle steps. The compute order this gives must be exactly Megatron's, so
DeepSpeed's engine adds no bubble of its own (docs/astral.md, "A100 runs outside Selene").
"""

import numpy as np
import pytest

from starfabric.astral.seer._kernels import pipeline_times
from starfabric.astral.seer.schedule import schedule_order


def deepspeed_train_order(p: int, m: int, stage: int) -> list[tuple[int, int]]:
    """(is_forward, micro-batch) of every compute step of `stage`, in DeepSpeed v0.6.0's
    TrainSchedule order."""
    order = []
    for step in range(2 * (m + p - 1)):
        forward = step % 2 == stage % 2
        if forward:
            mb = step // 2 - stage // 2 if step % 2 == 0 else (step - 1) // 2 - stage // 2
        elif step % 2 == 0:
            mb = step // 2 - p + (stage + 1) // 2
        else:
            mb = (step - 1) // 2 - p + 1 + stage // 2
        if 0 <= mb < m:
            order.append((int(forward), mb))
    return order


@pytest.mark.parametrize("p", [1, 2, 3, 4, 8, 12, 35])
@pytest.mark.parametrize("m", [1, 2, 5, 16, 35, 176])
def test_deepspeed_order_is_megatron_1f1b(p: int, m: int) -> None:
    is_fwd, mbs, _ = schedule_order(p, 1, m)
    for s in range(p):
        seer = [(int(is_fwd[s, i]), int(mbs[s, i])) for i in range(2 * m)]
        assert deepspeed_train_order(p, m, s) == seer


def test_each_micro_batch_once_forward_then_backward() -> None:
    """The re-stated schedule is a schedule: every micro-batch exactly one forward and one
    backward per stage, the forward first."""
    for p, m in [(8, 176), (4, 16), (35, 280)]:
        for s in range(p):
            seen: dict[int, list[int]] = {}
            for fwd, mb in deepspeed_train_order(p, m, s):
                seen.setdefault(mb, []).append(fwd)
            assert sorted(seen) == list(range(m))
            assert all(v == [1, 0] for v in seen.values())


@pytest.mark.parametrize(
    ("p", "m", "f", "b"), [(8, 176, 1.0, 3.0), (4, 16, 1.0, 2.0), (35, 280, 1.0, 3.0)]
)
def test_bubble_is_p_minus_1_steps(p: int, m: int, f: float, b: float) -> None:
    """With uniform stages and free hand-offs the order gives (m + p - 1)(F + B): the bubble
    (p - 1)/m of the PipeDream-Flush analysis the GLM-130B paper states (appendix B.4, 3.8% at
    m = 176, p = 8)."""
    is_fwd, mbs, ch = schedule_order(p, 1, m)
    ones = np.ones((p, 1))
    solo = np.zeros_like(is_fwd)
    _, end, ok = pipeline_times(
        is_fwd, mbs, ch, f * ones, b * ones, 0.0, m, solo, f * ones, b * ones
    )
    assert ok == 1
    assert end.max() == pytest.approx((m + p - 1) * (f + b))
