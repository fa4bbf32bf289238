"""DeepSpeed ZeRO-3's gathers: per tensor before v0.6.0, one flat buffer per fetch since
(deepspeed_flat_gather.py, DeepSpeed commit 4912e0ad7 = PR #1453). Checked against the PR's own
measurements on AWS p4d, not against a development row's error."""

from pathlib import Path

import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.comm import PER_PARAMETER_RAILS, collective_time, make_fabric
from starfabric.astral.seer.deepspeed_flat_gather import (
    FLAT_GATHER_SINCE,
    PR1453_GPUS,
    PR1453_PARAMS,
    PR1453_TFLOPS_AFTER,
    PR1453_TOKENS_PER_GPU,
    gathers_per_tensor,
)
from starfabric.astral.seer.efa import EFA_P4D_BUS_FRACTION
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fabric import Group
from starfabric.astral.seer.releases import DEEPSPEED

ROOT = Path(__file__).parents[2]
BF16 = 2


@pytest.mark.parametrize(
    ("framework", "year", "want"),
    [
        ("DeepSpeed v0.5 ZeRO-3", 2022, True),  # the named release decides, not the year
        ("deepspeed==0.5.5", None, True),
        ("DeepSpeed v0.6 + Megatron-LM", 2021, False),
        ("deepspeed==0.9.5, HF transformers", None, False),
        ("DeepSpeed ZeRO-3 (2022-01)", 2022, True),  # before the v0.6.0 tag (2022-03)
        ("DeepSpeed ZeRO-3 (2022-03)", 2022, False),
        ("DeepSpeed ZeRO-3", 2021, True),  # a year only: before 2022
        ("DeepSpeed ZeRO-3", 2022, False),
        ("DeepSpeed ZeRO-3", None, False),  # undated: today's DeepSpeed
    ],
)
def test_release_boundary(framework: str, year: int | None, want: bool) -> None:
    assert gathers_per_tensor(framework, year) is want


def test_boundary_is_the_release_that_carries_the_commit() -> None:
    """PR #1453 (merged 2022-01-20) is first tagged in v0.6.0, whose tag date the release
    table holds."""
    assert FLAT_GATHER_SINCE == DEEPSPEED[(0, 6)] == (2022, 3)


def test_set_one_deepspeed_rows_keep_per_tensor_gathers() -> None:
    """Narayanan et al. SC'21 Table 2's ZeRO-3 rows (DeepSpeed of early 2021, the calibration
    of comm.PER_PARAMETER_RAILS) still gather per tensor; no row of the three sets moves."""
    from starfabric.astral.seer.validate import read_rows, row_setup

    rows = read_rows(ROOT / "data/published_runs/development_runs.csv")
    zero3 = [r for r in rows if r["row_id"].startswith("N21-T2-") and "zero-3" in
             r["zero_or_fsdp"].lower()]  # fmt: skip
    assert len(zero3) == 6
    for row in zero3:
        assert row_setup(row).execution.get("fsdp_collectives") == "parameter", row["row_id"]


def _p4d_step_traffic_s(gpus: int, rails: int | None) -> float:
    """Seconds of one step's ZeRO-3 traffic for PR #1453's 52B model on `gpus` p4d GPUs:
    forward gather, recompute-forward gather, backward gather and the gradients'
    reduce-scatter, each of the whole BF16 model over all ranks; `rails`=None: flat buffers on
    all 8 GPUs' NIC shares per node, else the per-tensor pricing's rails per node."""
    eff = efficiency_for(get_gpu("A100"), {"nic_bus_fraction": EFA_P4D_BUS_FRACTION})
    fab = make_fabric(300e9, 50e9 / 8, eff)  # 4 x 100 Gb/s EFA per 8 GPUs
    group = Group(gpus, 8 if rails is None else rails)
    nbytes = PR1453_PARAMS * BF16
    gather = collective_time("all_gather", nbytes, group, fab)
    return 3 * gather + collective_time("reduce_scatter", nbytes, group, fab)


def _measured_step_s(tflops: float) -> float:
    """Step time the PR's TFLOPS/GPU imply (model FLOPs 6N per token: the PR ignores the
    recompute)."""
    return 6 * PR1453_PARAMS * PR1453_TOKENS_PER_GPU / (tflops * 1e12)


@pytest.mark.parametrize("gpus", PR1453_GPUS)
def test_flat_gathers_fit_inside_the_measured_step(gpus: int) -> None:
    """With flat buffers the step's whole ZeRO-3 traffic (priced at the p4d NCCL rate,
    efa.py) fits inside the step PR #1453 measured after the change (22.0 s on 64 GPUs, 23.7 s
    on 256): overlap can hide it. The bound needs only the parameter count."""
    step = _measured_step_s(PR1453_TFLOPS_AFTER[gpus])
    assert _p4d_step_traffic_s(gpus, None) < 0.75 * step


@pytest.mark.parametrize("gpus", PR1453_GPUS)
def test_per_tensor_pricing_cannot_reach_the_measured_step(gpus: int) -> None:
    """The per-tensor pricing (one NIC share per GPU) of the same traffic exceeds the measured
    post-change step several times over: a DeepSpeed >= v0.6 run priced that way would be
    predicted far too slow, which is what the release boundary prevents."""
    step = _measured_step_s(PR1453_TFLOPS_AFTER[gpus])
    assert _p4d_step_traffic_s(gpus, PER_PARAMETER_RAILS) > 3.0 * step
