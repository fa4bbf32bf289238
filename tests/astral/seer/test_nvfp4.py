"""seer/nvfp4.py: NVFP4 GEMMs at the Blackwell FP4 peak (NVIDIA datasheets), the TE NVFP4
recipe's quantization bytes, and FP4 refused on GPUs without FP4 tensor cores."""

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.cost import FP8_CAST_BYTES, CostContext, make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fp8_recipe import MXFP8_BLACKWELL_GEMM_RATE
from starfabric.astral.seer.fp8_recipe import quant_bytes as fp8_quant_bytes
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.nvfp4 import (
    NVFP4_BLACKWELL_GEMM_RATE,
    NVFP4_PEAK_FRACTION,
    NVFP4_READS,
    cast_factor,
    has_fp4,
    quant_bytes,
    rate_over_fp8,
)
from starfabric.astral.seer.ops import OpTable
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout
from starfabric.astral.seer.validate import row_setup
from starfabric.cli import app
from starfabric.errors import ConfigError

RUNS = Path(__file__).parents[2] / "data" / "published_runs"
GUIDE = Path(__file__).parents[2] / "data" / "fp8_recipes" / "te_gemm_profiling.csv"
B300 = "B300 SXM6 AC"


def _guide() -> dict[tuple[str, str], float]:
    """(mode, recipe) -> B300 per-layer GEMM ms of TE's GEMM profiling guide."""
    with open(GUIDE) as f:
        return {(r["mode"], r["recipe"]): float(r["per_layer_ms"])
                for r in csv.DictReader(f) if r["gpu"] == B300}  # fmt: skip


def test_nvfp4_kernel_rate_is_the_guides_prequantized_ratio() -> None:
    t = _guide()
    rate = t[("prequantized", "tensorwise")] / t[("prequantized", "nvfp4")]
    assert rate == pytest.approx(NVFP4_BLACKWELL_GEMM_RATE, abs=0.001)
    # below what B300's FP4 peak would allow at MXFP8's share: the measured rate is not capped
    b300 = get_gpu("B300")
    assert rate < b300.tflops("nvfp4") / b300.tflops("fp8") * NVFP4_PEAK_FRACTION


def test_byte_model_against_the_guides_quantization_time_outside_check() -> None:
    """Not used to set anything: the guide's NVFP4 quantization time (autocast - kernel) per
    current-scaling byte implies 5.76 B/value; the TE-source byte model says 5.125 (2 reads:
    the guide's TE has the fused rowwise + RHT columnwise cast, PR #2555). The measured time
    also covers work that moves no bytes (the RHT's MMAs, stochastic rounding's RNG), so the
    model must stay below it; recorded within 15%."""
    t = _guide()
    per_byte = (t[("autocast", "tensorwise")] - t[("prequantized", "tensorwise")]) / (
        fp8_quant_bytes("tensorwise", get_gpu("B300"))
    )
    implied = (t[("autocast", "nvfp4")] - t[("prequantized", "nvfp4")]) / per_byte
    assert implied == pytest.approx(5.76, abs=0.01)
    assert 0.85 < quant_bytes() / implied < 1.0


# TE GEMM profiling guide's layer (SOURCES.md): hidden 4096, FFN 16384, M = 31 x 512 tokens;
# QKV (3 x hidden), attention out, MLP up, MLP down, each as fprop, dgrad and wgrad
# (`benchmarks/gemm/benchmark_gemm.py`, 2 * M * N * K per GEMM).
GUIDE_LAYER_FLOP = 3 * 2 * 15872 * 4096 * (3 * 4096 + 4096 + 16384 + 16384)
TORCHAO_B200 = Path(__file__).parents[2] / "data" / "fp8_recipes" / "torchao_b200_nvfp4_matmul.csv"


def test_b200_and_b300_nvfp4_kernels_run_at_about_one_absolute_rate_outside_check() -> None:
    """Why the B300 rate is taken for B200 alike (nvfp4.NVFP4_BLACKWELL_GEMM_RATE): B300's FP4
    peak is 1.46x B200's at the same FP8 peak, but the measured B300 NVFP4 layer kernel (5.09
    PF/s) runs no faster than B200's isolated cuBLAS NVFP4 GEMM (torchao PR #2427, 5.37-5.50
    PF/s); scaling B300's rate up by its FP4 peak has no measurement behind it."""
    b300_kernel = GUIDE_LAYER_FLOP / (_guide()[("prequantized", "nvfp4")] * 1e-3)
    assert b300_kernel == pytest.approx(5.094e15, rel=1e-3)
    with open(TORCHAO_B200) as f:
        rows = list(csv.DictReader(f))
    for r in rows:  # the transcription: tops/sec = 2 M K N / time
        flop = 2 * int(r["m"]) * int(r["k"]) * int(r["n"])
        assert flop / float(r["time_s"]) == pytest.approx(float(r["flops_per_s"]), rel=0.01)
    b200_best = max(float(r["flops_per_s"]) for r in rows)
    b200, b300 = get_gpu("B200"), get_gpu("B300")
    peak_gain = b300.tflops("nvfp4") / b200.tflops("nvfp4")
    assert peak_gain == pytest.approx(1.458, abs=0.001)
    assert b300_kernel / b200_best < 1.0 < peak_gain
    # so Seer gives the two GPUs (equal FP8 peaks) one NVFP4 rate
    assert b200.tflops("fp8") == b300.tflops("fp8")
    assert rate_over_fp8(b200) == rate_over_fp8(b300) == NVFP4_BLACKWELL_GEMM_RATE


# NVIDIA datasheets' "FP4 Tensor Core" line: (system PFLOPS, GPUs in the system, sparse?)
DATASHEET_FP4 = {
    "B200": (144.0, 8, True),  # HGX B200: 144 PF with sparsity
    "GB200": (1440.0, 72, True),  # GB200 NVL72: 1,440 PF with sparsity
    "GB300": (1080.0, 72, False),  # GB300 NVL72: 1,080 PF dense (1,440 sparse)
    "B300": (105.0, 8, False),  # HGX B300: 105 PF dense (144 sparse)
}


@pytest.mark.parametrize("gpu", sorted(DATASHEET_FP4))
def test_fp4_peaks_are_the_datasheets_dense_figures(gpu: str) -> None:
    pf, n, sparse = DATASHEET_FP4[gpu]
    dense_tflops = pf * 1000.0 / n / (2.0 if sparse else 1.0)
    assert get_gpu(gpu).tflops("nvfp4") == pytest.approx(dense_tflops)
    assert has_fp4(get_gpu(gpu))


@pytest.mark.parametrize("gpu", ["A100", "H100", "H200", "H800", "GH200"])
def test_hopper_and_ampere_have_no_fp4_peak(gpu: str) -> None:
    assert not has_fp4(get_gpu(gpu))
    with pytest.raises(ConfigError, match="nvfp4"):
        get_gpu(gpu).tflops("nvfp4")


def test_quantization_bytes_follow_the_te_recipe() -> None:
    # two 16-bit reads (the amax kernel; one fused rowwise + columnwise cast, with or without
    # the Hadamard transform), two E2M1 copies with one E4M3 scale per 16 values
    assert NVFP4_READS == 2.0
    assert quant_bytes() == pytest.approx(2 * 2.0 + 2 * (0.5 + 1.0 / 16))
    # over delayed scaling on Blackwell (one read, one FP8 copy shared by both directions)
    assert cast_factor(get_gpu("GB200")) == pytest.approx(5.125 / 3.0)


def _ctx(fp4: str | None, gpu: str) -> CostContext:
    ex = ExecutionSpec(global_batch=64, seq_len=4096, precision="fp8", dp=8, fp4_recipe=fp4)
    lay = resolve_layout(load_model("llama-3.1-8b"), ex, SystemSpec(gpu=gpu, gpus=8))
    return make_context(ex, lay, efficiency_for(lay.gpu))


@pytest.mark.parametrize("gpu", sorted(DATASHEET_FP4))
def test_fp4_gemm_follows_the_stated_rate_over_fp8(gpu: str) -> None:
    fp8, fp4 = _ctx(None, gpu), _ctx("nvfp4", gpu)
    spec = get_gpu(gpu)
    cap = spec.tflops("nvfp4") / spec.tflops("fp8") * MXFP8_BLACKWELL_GEMM_RATE
    ratio = min(NVFP4_BLACKWELL_GEMM_RATE, cap)
    assert ratio == NVFP4_BLACKWELL_GEMM_RATE  # no catalogued Blackwell GPU is capped
    assert rate_over_fp8(spec) == pytest.approx(ratio)
    assert fp4.gemm_peak_flops == pytest.approx(spec.tflops("nvfp4") * 1e12)
    got = (fp4.gemm_peak_flops * fp4.gemm_fraction) / (fp8.gemm_peak_flops * fp8.gemm_fraction)
    assert got == pytest.approx(ratio)
    assert fp4.fp8_cast_bytes == pytest.approx(FP8_CAST_BYTES * cast_factor(spec))
    # a large compute-bound GEMM: its kernel time shrinks by the rate, its cast grows by the bytes
    t = OpTable()
    t.gemm("mlp.fc2", m=16384, n=8192, k=28672)
    t8, t4 = op_costs(t, fp8).time[0], op_costs(t, fp4).time[0]
    assert 1.0 / ratio < t4 / t8 < 1.0  # faster, but not by the whole peak ratio (the cast)
    # the output layer stays in BF16 under FP4 as under FP8
    h = OpTable()
    h.gemm("head.logits", m=16384, n=128256, k=4096)
    assert op_costs(h, fp4).time[0] == pytest.approx(op_costs(h, fp8).time[0])


def test_the_mlperf_nvfp4_rows_read_the_nvfp4_recipe() -> None:
    with open(RUNS / "mlperf_llama31_runs.csv") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        setup = row_setup(row)
        nv = row["precision"].startswith("NVFP4")
        assert (setup.execution.get("fp4_recipe") == "nvfp4") == nv
        assert setup.execution["precision"] == "fp8"


def test_megatron_fp4_flags_set_the_recipe() -> None:
    base = (
        "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 1024 --num-attention-heads 8 "
        "--seq-length 1024 --micro-batch-size 1 --global-batch-size 8 --vocab-size 32000 --bf16 "
    )
    ex = parse_megatron_command(base + "--fp4-format e2m1")["execution"]
    assert ex["precision"] == "fp8" and ex["fp4_recipe"] == "nvfp4"
    ex = parse_megatron_command(base + "--fp4-format e2m1 --fp4-recipe custom")["execution"]
    assert "fp4_recipe" not in ex


def test_fp4_with_an_fp8_recipe_is_an_error() -> None:
    with pytest.raises(ValueError, match="fp4_recipe"):
        ExecutionSpec(global_batch=8, seq_len=1024, precision="fp8", fp8_recipe="mxfp8",
                      fp4_recipe="nvfp4")  # fmt: skip


def test_a_hopper_fp4_run_exits_2_with_one_line(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 2 --hidden-size 1024 "
        "--num-attention-heads 8 --seq-length 1024 --micro-batch-size 1 --global-batch-size 8 "
        "--vocab-size 32000 --bf16 --fp4-format e2m1 --fp4-recipe nvfp4\n"
    )
    res = CliRunner().invoke(app, ["astral", "seer", "predict", str(script), "--gpu", "H100"])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: fp4_recipe 'nvfp4' on H100")
    assert "fix:" in res.output and "Blackwell" in res.output
    assert res.output.count("\n") == 1
    ok = CliRunner().invoke(app, ["astral", "seer", "predict", str(script), "--gpu", "B200"])
    assert ok.exit_code == 0, ok.output
