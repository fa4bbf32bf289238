"""PyTorch's BF16 `torch._grouped_mm` on Blackwell at its measured rate (seer/torch_grouped_mm.py):
the constant is re-derived from torchao's B200 timings (pytorch/ao @ff163084e README) and
OpenXLA's dense B200 table through Seer's own shape model, not from any row's error; it applies
to TorchTitan's routed experts in 16 bit on Blackwell and nowhere else."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from astral.seer.gemm_fit import GEMM_DATA, fit_saturation, table_rows
from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import torch_grouped_mm as tgm
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for, gemm_time, mem_time
from starfabric.astral.seer.ops import GEMM, layer_ops
from starfabric.astral.seer.validate import read_rows, row_setup, validate_row

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
TORCHAO = GEMM_DATA / "torchao_grouped_mm_b200.csv"


def _torchao_rows() -> list[dict[str, str]]:
    with TORCHAO.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _benchmark_s(row: dict[str, str], frac: float) -> float:
    """Seer's time of one torchao fwd+bwd call: out = A @ B_g, dA = dout @ B_g^T, dB_g =
    A_g^T @ dout (equal groups), plus the benchmark's loss and gradient-accumulation bytes."""
    spec = get_gpu("B200")
    eff = replace(efficiency_for(spec), gemm_peak_fraction=frac)
    peak, hbm = spec.tflops("bf16") * 1e12, spec.hbm_gbps * 1e9
    m_total, n, k, g = (float(row[c]) for c in ("total_m", "n", "k", "groups"))
    m = m_total / g
    shapes = ((m, n, k), (m, k, n), (n, k, m))
    t = sum(float(gemm_time(a, b, c, g, peak, hbm, eff, peak_fraction=frac)) for a, b, c in shapes)
    return t + float(mem_time(tgm.benchmark_overhead_bytes(m_total, n, k, g), hbm, eff))


def _fit_torchao() -> tuple[float, float]:
    rows = _torchao_rows()
    measured = np.array([float(r["bf16_fwd_bwd_us"]) * 1e-6 for r in rows])
    grid = np.linspace(0.3, 1.0, 141)
    errs = [
        float(np.mean(np.abs(np.log(np.array([_benchmark_s(r, f) for r in rows]) / measured))))
        for f in grid
    ]
    best = int(np.argmin(errs))
    return float(grid[best]), errs[best]


def test_torchao_table_is_transcribed() -> None:
    rows = _torchao_rows()
    assert len(rows) == 8
    assert {(r["n"], r["k"]) for r in rows} == {("8192", "5120"), ("2048", "7168")}
    assert float(rows[0]["bf16_fwd_bwd_us"]) == 43140.20  # Llama4 shapes, G = 1
    assert float(rows[-1]["bf16_fwd_bwd_us"]) == 14966.80  # DeepSeek-V3 shapes, G = 8


def test_grouped_fraction_is_the_fit_of_torchaos_b200_timings() -> None:
    frac, err = _fit_torchao()
    assert frac == pytest.approx(tgm.GROUPED_MM_ISOLATED_FRACTION, abs=0.003)
    assert err < 0.06  # the shape model reproduces the eight timings within 6% (log mean)


def test_dense_fraction_is_the_fit_of_openxlas_b200_table() -> None:
    rows = table_rows(GEMM_DATA / "xla_matmul_perf_table.csv", "sm_100")
    frac, _ = fit_saturation(rows, "B200", "bf16_flops", "bf16")
    assert frac == pytest.approx(tgm.DENSE_ISOLATED_FRACTION, abs=0.003)


def test_grouped_kernel_reaches_about_half_a_dense_gemm() -> None:
    assert 0.5 < tgm.GROUPED_MM_BF16_SM100_RATIO < 0.6
    # measured directly: DeepSeek-V3 shapes at G = 1 run 863 TFLOP/s (6 M N K / time) where the
    # dense table's best B200 GEMM runs 1,544, i.e. the same kernel family at ~0.56 of dense
    tflops = 6 * 128000 * 2048 * 7168 / 13064.8e-6 / 1e12
    assert tflops == pytest.approx(863, abs=2)
    assert tflops / 1544 == pytest.approx(tgm.GROUPED_MM_BF16_SM100_RATIO, abs=0.01)


def test_benchmark_overhead_bytes_by_hand() -> None:
    # DeepSeek-V3 shapes, G = 8: loss 5 M N, A.grad 3 M K, B.grad 3 G N K elements of 2 bytes
    m, n, k, g = 128000, 2048, 7168, 8
    assert tgm.benchmark_overhead_bytes(m, n, k, g) == 2 * (5 * m * n + 3 * m * k + 3 * g * n * k)


@pytest.mark.parametrize(
    ("gpu", "grouped", "fp8", "ratio"),
    [
        ("B200", True, False, tgm.GROUPED_MM_BF16_SM100_RATIO),
        ("GB200", True, False, tgm.GROUPED_MM_BF16_SM100_RATIO),
        ("B200", True, True, 1.0),  # FP8/MXFP8 experts are other kernels
        ("B200", False, False, 1.0),  # not torch._grouped_mm (Megatron's TE, DistMoE)
        ("H100", True, False, 1.0),  # no measured sm_90 rate read
    ],
)
def test_where_the_ratio_applies(gpu: str, grouped: bool, fp8: bool, ratio: float) -> None:
    assert tgm.expert_gemm_ratio(get_gpu(gpu), grouped, fp8) == ratio


def test_read_from_the_framework_cell() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    assert row_setup(rows["TTDEEPEP-01"]).execution["moe_torch_grouped_mm"] is True
    assert row_setup(rows["TTDSV3-01"]).execution["moe_torch_grouped_mm"] is False  # DistMoE
    assert row_setup(rows["MZQ3-05"]).execution["moe_torch_grouped_mm"] is False  # Megatron
    assert tgm.runs_torch_grouped_mm("TorchTitan (2025-10; DeepEP)", fused_dispatch=False)
    assert not tgm.runs_torch_grouped_mm("TorchTitan DistMoE", fused_dispatch=True)
    assert not tgm.runs_torch_grouped_mm("Megatron-Core 0.14", fused_dispatch=False)


def test_only_the_expert_gemms_slow_down_by_the_ratio() -> None:
    """Qwen3-30B-A3B on B200 (TTDEEPEP-01's job): the routed-expert GEMMs take the grouped
    fraction, every other operator keeps its time."""
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    pred = validate_row(rows["TTDEEPEP-01"]).prediction
    ex, lay, model = pred.job.execution, pred.layout, pred.job.model
    assert ex.moe_torch_grouped_mm
    eff = efficiency_for(lay.gpu)
    t = layer_ops(model, ex, lay, moe=True)
    on = op_costs(t, make_context(ex, lay, eff, pred.job.system, model)).time
    off_ex = ex.model_copy(update={"moe_torch_grouped_mm": False})
    off = op_costs(t, make_context(off_ex, lay, eff, pred.job.system, model)).time
    expert = np.array([n.startswith(tgm.EXPERT_GEMMS) for n in t.name]) & (
        t.arrays()["kind"] == GEMM
    )
    assert expert.sum() == 2
    assert np.allclose(on[~expert], off[~expert])
    slow = on[expert] / off[expert]
    # compute-bound shapes (M = 16,384 tokens per local expert): close to 1 / ratio
    assert np.all(slow > 0.9 / tgm.GROUPED_MM_BF16_SM100_RATIO)
    assert np.all(slow <= 1.0 / tgm.GROUPED_MM_BF16_SM100_RATIO + 1e-9)
