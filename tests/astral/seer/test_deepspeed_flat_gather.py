"""DeepSpeed ZeRO-3's gathers: per tensor before v0.6.0, one flat buffer per fetch since
(deepspeed_flat_gather.py, DeepSpeed commit 4912e0ad7 = PR #1453). Checked against the PR's own
measurements on AWS p4d, not against a development row's error."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.comm import PER_PARAMETER_RAILS, collective_time, make_fabric
from starfabric.astral.seer.deepspeed_flat_gather import (
    FLAT_GATHER_RELEASE,
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

ROOT = Path(__file__).parents[2]
BF16 = 2


@pytest.mark.parametrize(
    ("framework", "year", "want"),
    [
        ("DeepSpeed v0.5 ZeRO-3", 2022, True),  # the named release decides, not the year
        ("deepspeed==0.5.5", None, True),
        ("DeepSpeed v0.6 + Megatron-LM", 2021, False),
        ("deepspeed==0.9.5, HF transformers", None, False),
        ("DeepSpeed v0.5.10", 2023, True),  # a patch of 0.5: still per tensor
        ("DeepSpeed 0.10.0", 2021, False),  # 0.10 > 0.6 (numbers, not strings)
        ("DeepSpeed version 1.0", None, False),
        ("DeepSpeed ZeRO-3 (2022-01)", 2022, True),  # before the v0.6.0 tag (2022-03)
        ("DeepSpeed ZeRO-3 (2022-02-28)", 2022, True),  # the last month before it
        ("DeepSpeed ZeRO-3 (2022-03)", 2022, False),
        ("DeepSpeed ZeRO-3 (2021-12)", 2022, True),  # the month decides over the year
        ("DeepSpeed ZeRO-3", 2021, True),  # a year only: before 2022
        ("DeepSpeed ZeRO-3", 2022, False),  # v0.6.0 was tagged in 2022-03 (assumption)
        ("DeepSpeed ZeRO-3", 2023, False),
        ("DeepSpeed ZeRO-3", None, False),  # undated: today's DeepSpeed
    ],
)
def test_release_boundary(framework: str, year: int | None, want: bool) -> None:
    assert gathers_per_tensor(framework, year) is want


@given(
    minor=st.integers(0, 30),
    year=st.one_of(st.none(), st.integers(2019, 2030)),
    month=st.integers(1, 12),
)
def test_a_named_release_decides_over_any_date(minor: int, year: int | None, month: int) -> None:
    """Whatever year or month the cell and the row also state, "DeepSpeed v0.M" alone decides:
    per tensor exactly when M < 6 (the release that carries PR #1453)."""
    cell = f"DeepSpeed v0.{minor} ZeRO-3 ({year or 2022}-{month:02d})"
    assert gathers_per_tensor(cell, year) is (minor < FLAT_GATHER_RELEASE[1])


@given(year=st.integers(2019, 2030), month=st.integers(1, 12))
def test_a_stated_month_decides_at_the_v060_tag(year: int, month: int) -> None:
    """Without a named release, a YYYY-MM the cell writes is compared with the v0.6.0 tag
    month (DEEPSPEED table), whatever the row's year."""
    cell = f"DeepSpeed ZeRO-3 ({year}-{month:02d})"
    assert gathers_per_tensor(cell, 2030) is ((year, month) < FLAT_GATHER_SINCE)


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


@pytest.mark.parametrize(
    ("framework", "want"),
    [
        ("DeepSpeed ZeRO-3", "parameter"),  # the set-one cell, dated 2021 by its citation
        ("DeepSpeed v0.6 ZeRO-3", None),  # a release with the flat gather
        ("DeepSpeed ZeRO-3 (2022-05)", None),  # a month after the v0.6.0 tag
        ("PyTorch FSDP", None),  # not DeepSpeed: flat buffers whatever the year
    ],
)
def test_validate_applies_the_boundary_only_to_deepspeed_zero3(
    framework: str, want: str | None
) -> None:
    """row_setup sets the per-tensor pricing from the framework cell through
    gathers_per_tensor, for DeepSpeed ZeRO-3 only."""
    from starfabric.astral.seer.validate import read_rows, row_setup

    rows = read_rows(ROOT / "data/published_runs/development_runs.csv")
    base = next(r for r in rows if r["row_id"] == "N21-T2-07")
    row = {**base, "framework": framework}
    assert row_setup(row).execution.get("fsdp_collectives") == want
    zero2 = {**base, "zero_or_fsdp": "ZeRO-2 (DeepSpeed)"}
    assert row_setup(zero2).execution.get("fsdp_collectives") is None


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
