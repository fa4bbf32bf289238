"""Blackwell's GEMM efficiency is derived from measured GEMM rates, not copied from Hopper:
OpenXLA's measured matmul table (H100 = sm_90, B200 = sm_100) fitted through Seer's own
shape model gives each chip's isolated saturation; Blackwell's in-training fraction is
Hopper's calibrated one scaled by their ratio (efficiency.yaml)."""

import pytest

from astral.seer.gemm_fit import GEMM_DATA, fit_saturation, table_rows
from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.efficiency import efficiency_for

TABLE = GEMM_DATA / "xla_matmul_perf_table.csv"


def _rows(arch: str) -> list[dict[str, str]]:
    return table_rows(TABLE, arch)


def _fit(arch: str, gpu_name: str) -> float:
    """The saturation fraction whose shape-model times best match the measured ones."""
    frac, err = fit_saturation(_rows(arch), gpu_name, "bf16_flops", "bf16")
    assert err < 0.1  # the shape model reproduces the measured table within 10%
    return frac


def test_measured_table_puts_blackwell_below_hopper_as_a_fraction_of_peak() -> None:
    h100 = max(float(r["bf16_flops"]) for r in _rows("sm_90")) / 989.4e12
    b200 = max(float(r["bf16_flops"]) for r in _rows("sm_100")) / 2250e12
    assert h100 == pytest.approx(0.79, abs=0.01) and b200 == pytest.approx(0.69, abs=0.01)


@pytest.mark.parametrize("name", ["B200", "B300", "GB200", "GB300"])
def test_blackwell_gemm_fraction_is_hoppers_scaled_by_the_measured_ratio(name: str) -> None:
    ratio = _fit("sm_100", "B200") / _fit("sm_90", "H100")
    hopper = efficiency_for(get_gpu("H100")).gemm_peak_fraction
    assert efficiency_for(get_gpu(name)).gemm_peak_fraction == pytest.approx(
        hopper * ratio, abs=0.01
    )
