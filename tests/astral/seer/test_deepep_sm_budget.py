"""DeepEP SM budget and NVLink-5 ceiling (seer/deepep_sm_budget.py) against TorchTitan's own
DeepEP tuning on B200 (tests/data/deepep/torchtitan_b200_num_sms.csv): the rate Seer gives
DeepEP's intranode kernels at 128 and 24 SMs, EP 4 and 8, against the measured ones."""

import csv
from pathlib import Path

import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.comm import make_fabric
from starfabric.astral.seer.deepep_kernels import DEEPEP_NUM_SMS, deepep_nvlink_bytes_per_s
from starfabric.astral.seer.deepep_sm_budget import (
    DEEPEP_NVL5_CEILING_BYTES_PER_S,
    nvlink_ceiling,
    stated_num_sms,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.parallel import ExecutionSpec

TABLE = Path(__file__).parents[2] / "data" / "deepep" / "torchtitan_b200_num_sms.csv"
SATURATED_BAND = 0.05
"""At 128 SMs every measured rate within 5% of the ceiling (their own spread is +-4.5%)."""
SM_BOUND_BAND = 0.35
"""At 24 SMs the SM copy model (calibrated on H20 and GB200, not here) within 35%: it has one
rate for dispatch and combine, and the measured combine is 17-20% below dispatch."""


def _rows() -> list[dict[str, str]]:
    with TABLE.open() as f:
        return list(csv.DictReader(f))


def _seer_rate(gpu_name: str, ranks: int, sms: int) -> float:
    gpu = get_gpu(gpu_name)
    fabric = make_fabric(gpu.nvlink_gbps * 1e9, 50e9, efficiency_for(gpu))
    link = fabric.tiers("all_to_all")[0]
    ceiling = nvlink_ceiling(gpu.nvlink_gbps)
    if ceiling is not None:
        link = min(link, ceiling)
    return deepep_nvlink_bytes_per_s(link, ranks, sms)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["id"])
def test_rate_against_torchtitan_tuning(row: dict[str, str]) -> None:
    seer = _seer_rate(row["gpu"], int(row["ep"]), int(row["num_sms"]))
    measured = float(row["gbps"]) * 1e9
    band = SATURATED_BAND if int(row["num_sms"]) == 128 else SM_BOUND_BAND
    assert abs(seer / measured - 1) <= band, (row["id"], seer / 1e9, measured / 1e9)


def test_ceiling_is_the_mean_of_the_saturated_measurements() -> None:
    sat = [float(r["gbps"]) for r in _rows() if r["num_sms"] == "128"]
    assert pytest.approx(sum(sat) / len(sat) * 1e9) == DEEPEP_NVL5_CEILING_BYTES_PER_S


def test_ceiling_only_on_nvlink5_and_below_the_link() -> None:
    b200 = get_gpu("B200")
    link = make_fabric(b200.nvlink_gbps * 1e9, 50e9, efficiency_for(b200)).tiers("all_to_all")[0]
    assert link > DEEPEP_NVL5_CEILING_BYTES_PER_S  # the kernels, not NVLink, bind at 128 SMs
    assert nvlink_ceiling(get_gpu("H100-SXM").nvlink_gbps) is None
    assert nvlink_ceiling(get_gpu("H800").nvlink_gbps) is None
    for name in ("B200", "GB200", "GB300"):
        assert nvlink_ceiling(get_gpu(name).nvlink_gbps) == DEEPEP_NVL5_CEILING_BYTES_PER_S


def test_more_sms_never_slower_and_saturate() -> None:
    rates = [_seer_rate("B200", 8, s) for s in (8, 16, 20, 24, 32, 64, 128)]
    assert rates == sorted(rates)
    assert rates[-1] == pytest.approx(DEEPEP_NVL5_CEILING_BYTES_PER_S)
    # DeepEP's default budget is SM-bound on B200 at EP 8 (281 GB/s).
    assert _seer_rate("B200", 8, DEEPEP_NUM_SMS) < 0.6 * DEEPEP_NVL5_CEILING_BYTES_PER_S


@pytest.mark.parametrize(
    ("text", "sms"),
    [
        ("TorchTitan (2025-10; DeepEP dispatcher, num_sms 128 set by its dispatcher)", 128),
        ("Megatron-Core 0.14 flex dispatcher DeepEP num_sms=24", 24),
        ("DeepEP on 32 SMs", 32),
        ("TorchTitan (2025-10; DeepEP dispatcher)", None),
        ("NCCL all-to-all on 128 SMs", None),
        (None, None),
    ],
)
def test_stated_num_sms(text: str | None, sms: int | None) -> None:
    assert stated_num_sms(text) == sms


def test_execution_default_is_deepeps() -> None:
    ex = ExecutionSpec(seq_len=4096, global_batch=8)
    assert ex.deepep_num_sms == DEEPEP_NUM_SMS
