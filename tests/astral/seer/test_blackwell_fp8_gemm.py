"""Blackwell FP8 GEMM efficiency is derived from measured FP8 and BF16 GEMM rates of the same
B200 shapes (OpenXLA's matmul table, the version with f8e4m3fn entries), not copied from
Hopper: the FP8 shape-model saturation over the BF16 one, times Blackwell's in-training BF16
fraction (efficiency.yaml)."""

import pytest

from astral.seer.gemm_fit import GEMM_DATA, fit_saturation, table_rows
from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.efficiency import efficiency_for

TABLE = GEMM_DATA / "xla_matmul_fp8_sm100.csv"


def _rows(arch: str) -> list[dict[str, str]]:
    return table_rows(TABLE, arch)


def _fit(column: str, dtype: str) -> float:
    """Saturation fraction of the B200 peak of `dtype` (same grid and error as
    test_blackwell_gemm.py)."""
    frac, err = fit_saturation(_rows("sm_100"), "B200", column, dtype)
    assert err < 0.12  # the shape model reproduces the measured rates within ~10%
    return frac


def test_b200_fp8_reaches_about_the_fraction_of_its_2x_peak_that_bf16_reaches() -> None:
    rows = _rows("sm_100")
    bf16 = max(float(r["bf16_flops"]) for r in rows) / 2250e12
    fp8 = max(float(r["fp8_flops"]) for r in rows) / 4500e12
    assert bf16 == pytest.approx(0.74, abs=0.01) and fp8 == pytest.approx(0.73, abs=0.01)
    for r in rows:  # every transcribed rate is below its datasheet peak
        assert float(r["fp8_flops"]) < 4500e12 and float(r["bf16_flops"]) < 2250e12


def test_hoppers_fp8_column_of_that_table_is_unphysical_so_not_a_reference() -> None:
    (row,) = _rows("sm_90")
    assert float(row["fp8_flops"]) > get_gpu("H100").tflops("fp8") * 1e12


@pytest.mark.parametrize("name", ["B200", "B300", "GB200", "GB300"])
def test_blackwell_fp8_fraction_is_its_bf16_fraction_scaled_by_the_measured_ratio(
    name: str,
) -> None:
    ratio = _fit("fp8_flops", "fp8") / _fit("bf16_flops", "bf16")
    eff = efficiency_for(get_gpu(name))
    assert 0.95 < ratio < 1.15
    assert eff.fp8_gemm_peak_fraction == pytest.approx(eff.gemm_peak_fraction * ratio, abs=0.01)


def test_hopper_fp8_fraction_is_unchanged() -> None:
    assert efficiency_for(get_gpu("H100")).fp8_gemm_peak_fraction == pytest.approx(0.60)
