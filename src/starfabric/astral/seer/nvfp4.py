"""NVFP4 training GEMMs on Blackwell: their tensor-core rate and their quantization bytes.

An NVFP4 run (Transformer Engine `NVFP4BlockScaling`; Megatron-Core `--fp4-format e2m1
--fp4-recipe nvfp4`) runs the transformer layers' TE linear GEMMs (fprop, dgrad and wgrad
alike) in E2M1 with one E4M3 scale per 16 values and one FP32 scale per tensor (TE
`transformer_engine/common/recipe/__init__.py` @d0067d0, class `NVFP4BlockScaling`). What
stays in higher precision is what stays out of FP8 under TE: the output layer and the MoE
router (`cost.BF16_GEMMS`), and attention (the recipe's `fp8_dpa = False`: an NVFP4 run's
attention is BF16 unless the row states FP8 attention, which seer/fp8_attention.py prices with
current scaling, the MLPerf NVFP4 configs' `NVTE_DPA_FP8_RECIPE`). Megatron-Core's optional BF16 first/last
layers (`--first-last-layers-bf16`; the NVFP4 pretraining paper, arXiv 2509.25149, keeps about
16% of a 12B model's linear layers in BF16) default off and are not read: none of the rows states
them, and MLPerf v5.1's NeMo configs leave `FIRST_LAST_LAYERS_BF16` at its default False.

Two parts, each relative to what Seer already prices:

- **The GEMM rate** (`rate_over_fp8`). Measured: TE's GEMM profiling guide (PR #2863,
  `tests/data/fp8_recipes/te_gemm_profiling.csv`) times one layer's GEMMs on B300 with operands
  quantized beforehand: tensor-scaled FP8 6.812 ms, NVFP4 3.764 ms, so the NVFP4 kernel runs
  `NVFP4_BLACKWELL_GEMM_RATE` = 1.810x the tensor-scaled FP8 kernel Seer's
  `fp8_gemm_peak_fraction` is calibrated on. Taken for every Blackwell GPU (assumption, as
  `fp8_recipe.MXFP8_BLACKWELL_GEMM_RATE` is), capped where a GPU's FP4 peak (`gpus.yaml`
  `nvfp4`, NVIDIA datasheets) over its FP8 peak, at the MXFP8 kernel's share
  (`NVFP4_PEAK_FRACTION`), allows less; no catalogued GPU is capped (B200/GB200 2 x 0.951 =
  1.90, B300 2.92 x 0.951, GB300 3 x 0.951). The measured kernel reaches 0.62 of B300's FP4/FP8
  peak ratio: on that GPU the FP4 peak is not what bounds it.
- **The quantization** (`quant_bytes`): a 16-bit operand is read twice — once by the amax
  kernel, once by one fused cast that writes both the rowwise and the columnwise (wgrad) FP4
  copy (0.5 B/value + 1 B per 16 values of E4M3 scale each). Both ways a run can take:
  with the recipe's default random Hadamard transform (RHT) on the columnwise copy of inputs and
  gradients, TE >= v2.15 reads once in `nvte_hadamard_transform_amax` (rowwise and RHT
  columnwise amax together) and once in `nvte_quantize_with_hadamard_transform` (rowwise cast +
  RHT + columnwise cast in one kernel; TE PR #2555, 2026-03-16; `quantizer.cpp`
  `NVFP4Quantizer::quantize_impl` @d0067d0, for BF16 inputs with rows % 64 == 0 and
  cols % 128 == 0 on SM100-110: every training shape); with RHT off (`NVTE_NVFP4_DISABLE_RHT=1`,
  the "vanilla recipe" of every MLPerf Training v5.1 NVFP4 config, `config_common_fp4.sh`) any
  release since v2.8 reads once in `nvte_compute_amax_with_config` and once in
  `nvfp4_quantize_transpose` (`cast_kernels.cuh`). Only TE v2.8-v2.14 with RHT on ran the
  rowwise and the RHT columnwise cast as two kernels (three reads, 7.125 B/value); no row states
  that pairing, and it is not priced. Stochastic rounding of gradients happens inside the cast
  (no bytes); weights' 16x16 2D scales are weight casts, which Seer's cast model does not price
  for any recipe. The bytes are taken over delayed scaling's on the same GPU, as
  `fp8_recipe.cast_factor` does for the FP8 recipes; nothing is fitted.
"""

from __future__ import annotations

from typing import Literal, get_args

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer.fp8_recipe import (
    BF16_READ_BYTES,
    MXFP8_BLACKWELL_GEMM_RATE,
)
from starfabric.astral.seer.fp8_recipe import (
    quant_bytes as fp8_quant_bytes,
)
from starfabric.errors import ConfigError

Fp4Recipe = Literal["nvfp4"]
"""Megatron-Core's `--fp4-recipe` choice Seer prices (`nvfp4` = TE `NVFP4BlockScaling`)."""
FP4_RECIPES: tuple[str, ...] = get_args(Fp4Recipe)

FP4_WRITE_BYTES = 0.5
"""Bytes written per value by one E2M1 copy (two values per byte)."""
NVFP4_SCALE_BYTES = 1.0 / 16
"""One E4M3 (1-byte) scale per 16 values, per copy (TE `NVFP4BlockScaling` docstring)."""
NVFP4_READS = 2.0
"""16-bit reads of one operand: the amax kernel and the one fused rowwise + columnwise cast.
With RHT (TE >= v2.15): `nvte_hadamard_transform_amax`, then
`nvte_quantize_with_hadamard_transform` (TE PR #2555; `quantizer.cpp` @d0067d0). Without RHT
(`NVTE_NVFP4_DISABLE_RHT=1`, MLPerf v5.1's NVFP4 configs; TE v2.8 on): `nvte_compute_amax`, then
`nvfp4_quantize_transpose` (`cast_kernels.cuh` @v2.8). TE v2.8-v2.14 with RHT read three times
(separate rowwise and RHT columnwise casts): not priced, no row states it."""
NVFP4_COPIES = 2.0
"""Rowwise and columnwise copies: block scales run along one direction, so TE writes both from
the 16-bit input (`NVFP4BlockScaling` docstring), in the one fused cast of `NVFP4_READS`."""
NVFP4_BLACKWELL_GEMM_RATE = 1.810
"""NVFP4 GEMM kernel rate over the tensor-scaled FP8 one, TE GEMM profiling guide on B300,
pre-quantized operands (kernel alone): 6.812 ms (current scaling) / 3.764 ms (NVFP4) = 1.810.
Taken for every Blackwell GPU (assumption: B200/GB200/GB300 NVFP4 kernels lead their
tensor-scaled FP8 ones by B300's factor; their FP4/FP8 peak ratios, 2 and 3, leave room).
Why alike rather than scaled by the FP4 peak (B300's is 1.46x B200's at the same FP8 peak): the
measured B300 kernel runs 5.09 PF/s (the guide's 1.917e13 FLOP per layer / 3.764 ms), 0.39 of
its FP4 peak, and B200's cuBLAS NVFP4 GEMM ran 5.37-5.50 PF/s at 6144^3-8192^3 in isolation
(pytorch/ao PR #2427, `bench_matmul.py --recipe nvfp4`, 2025-06; 0.60-0.61 of 9 PF): about the
same absolute rate on both GPUs, which one factor over their equal FP8 peaks gives. Scaling
B300 up by its FP4 peak, or B200 down by 2/2.92 (to 1.24x), has no measurement behind it."""
NVFP4_PEAK_FRACTION = MXFP8_BLACKWELL_GEMM_RATE
"""The cap on `rate_over_fp8`: an NVFP4 GEMM reaches at most the share of its FP4 peak that an
MXFP8 GEMM reaches of its FP8 peak (both block-scaled on Blackwell tensor cores; assumption)."""


def has_fp4(gpu: GPUSpec) -> bool:
    """True where the catalog gives the GPU an NVFP4 tensor peak (Blackwell)."""
    return gpu.dense_tflops.get("nvfp4", 0.0) > 0


def check_supported(recipe: str | None, gpu: GPUSpec) -> None:
    """A one-line error for an FP4 recipe on a GPU without FP4 tensor cores (Hopper, Ampere)."""
    if recipe is not None and not has_fp4(gpu):
        raise ConfigError(
            f"fp4_recipe {recipe!r} on {gpu.name}: NVFP4 GEMMs need Blackwell FP4 tensor cores "
            "(SM100+); the GPU has no FP4 peak",
            fix="train in FP8 (precision fp8, no fp4_recipe / --fp4-format) on this GPU, "
            "or use a Blackwell GPU (B200, B300, GB200, GB300)",
        )


def quant_bytes() -> float:
    """HBM bytes per value one NVFP4 quantization of a 16-bit GEMM operand moves (module doc)."""
    return NVFP4_READS * BF16_READ_BYTES + NVFP4_COPIES * (FP4_WRITE_BYTES + NVFP4_SCALE_BYTES)


def cast_factor(gpu: GPUSpec) -> float:
    """NVFP4 quantization bytes over delayed scaling's on the same GPU: multiplies Seer's
    calibrated cast (`cost.FP8_CAST_BYTES`), as `fp8_recipe.cast_factor` does."""
    return quant_bytes() / fp8_quant_bytes("delayed", gpu)


def gemm_peak_tflops(gpu: GPUSpec) -> float:
    """The GPU's dense NVFP4 peak (TFLOP/s); an error on a GPU without one."""
    check_supported("nvfp4", gpu)
    return gpu.tflops("nvfp4")


def rate_over_fp8(gpu: GPUSpec) -> float:
    """An NVFP4 GEMM kernel's rate over a tensor-scaled FP8 one at the same shape:
    NVFP4_BLACKWELL_GEMM_RATE, capped by the FP4/FP8 peak ratio at NVFP4_PEAK_FRACTION."""
    cap = gemm_peak_tflops(gpu) / gpu.tflops("fp8") * NVFP4_PEAK_FRACTION
    return min(NVFP4_BLACKWELL_GEMM_RATE, cap)


__all__ = [
    "FP4_RECIPES",
    "FP4_WRITE_BYTES",
    "NVFP4_BLACKWELL_GEMM_RATE",
    "NVFP4_COPIES",
    "NVFP4_PEAK_FRACTION",
    "NVFP4_READS",
    "NVFP4_SCALE_BYTES",
    "Fp4Recipe",
    "cast_factor",
    "check_supported",
    "gemm_peak_tflops",
    "has_fp4",
    "quant_bytes",
    "rate_over_fp8",
]
