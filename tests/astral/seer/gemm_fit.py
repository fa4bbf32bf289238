"""Shared by the Blackwell GEMM tests: read OpenXLA's measured matmul tables (tests/data/gemm/)
and fit the saturation fraction whose shape-model times best match the measured ones."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.efficiency import efficiency_for, gemm_time

GEMM_DATA = Path(__file__).parents[2] / "data" / "gemm"


def table_rows(table: Path, arch: str) -> list[dict[str, str]]:
    """The rows of one architecture (`sm_90`, `sm_100`) of a measured table; '#' lines are notes."""
    with table.open() as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [r for r in rows if r["arch"] == arch]


def fit_saturation(
    rows: list[dict[str, str]], gpu_name: str, column: str, dtype: str
) -> tuple[float, float]:
    """(fraction, mean |log error|): the gemm_peak_fraction on a 0.005 grid over 0.3-1.0 whose
    shape-model times of `rows` best match the measured FLOP/s in `column` at `dtype`'s peak."""
    spec = get_gpu(gpu_name)
    base = efficiency_for(spec)
    b, m, n, k = (np.array([float(r[c]) for r in rows]) for c in "bmnk")
    measured = 2 * b * m * n * k / np.array([float(r[column]) for r in rows])
    peak = spec.tflops(dtype) * 1e12

    def err(frac: float) -> float:
        eff = replace(base, gemm_peak_fraction=frac)
        pred = gemm_time(m, n, k, b, peak, spec.hbm_gbps * 1e9, eff, peak_fraction=frac)
        return float(np.mean(np.abs(np.log(pred / measured))))

    grid = np.linspace(0.3, 1.0, 141)
    errs = [err(float(f)) for f in grid]
    best = int(np.argmin(errs))
    return float(grid[best]), errs[best]
