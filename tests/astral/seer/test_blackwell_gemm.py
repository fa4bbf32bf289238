"""Blackwell's GEMM efficiency is derived from measured GEMM rates, not copied from Hopper:
OpenXLA's measured matmul table (H100 = sm_90, B200 = sm_100) fitted through Seer's own
shape model gives each chip's isolated saturation; Blackwell's in-training fraction is
Hopper's calibrated one scaled by their ratio (efficiency.yaml)."""

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.efficiency import efficiency_for, gemm_time

TABLE = Path(__file__).parents[2] / "data" / "gemm" / "xla_matmul_perf_table.csv"


def _rows(arch: str) -> list[dict[str, str]]:
    with TABLE.open() as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [r for r in rows if r["arch"] == arch]


def _fit(arch: str, gpu_name: str) -> float:
    """The saturation fraction whose shape-model times best match the measured ones."""
    spec = get_gpu(gpu_name)
    base = efficiency_for(spec)
    rows = _rows(arch)
    b, m, n, k = (np.array([float(r[c]) for r in rows]) for c in "bmnk")
    measured = 2 * b * m * n * k / np.array([float(r["bf16_flops"]) for r in rows])
    peak = spec.tflops("bf16") * 1e12

    def err(frac: float) -> float:
        eff = replace(base, gemm_peak_fraction=frac)
        pred = gemm_time(m, n, k, b, peak, spec.hbm_gbps * 1e9, eff, peak_fraction=frac)
        return float(np.mean(np.abs(np.log(pred / measured))))

    grid = np.linspace(0.3, 1.0, 141)
    errs = [err(float(f)) for f in grid]
    assert min(errs) < 0.1  # the shape model reproduces the measured table within 10%
    return float(grid[int(np.argmin(errs))])


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
