"""NVFP4 training GEMMs on Blackwell: their tensor-core rate and their quantization bytes.

An NVFP4 run (Transformer Engine `NVFP4BlockScaling`; Megatron-Core `--fp4-format e2m1
--fp4-recipe nvfp4`) runs the transformer layers' TE linear GEMMs (fprop, dgrad and wgrad
alike) in E2M1 with one E4M3 scale per 16 values and one FP32 scale per tensor (TE
`transformer_engine/common/recipe/__init__.py` @d0067d0, class `NVFP4BlockScaling`). What
stays in higher precision is what stays out of FP8 under TE: the output layer and the MoE
router (`cost.BF16_GEMMS`), and attention (the recipe's `fp8_dpa = False`; Seer times
attention the same way whatever the GEMM precision). Megatron-Core's optional BF16 first/last
layers (`--first-last-layers-bf16`) default off and are not read (none of the rows states them).

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
- **The quantization** (`quant_bytes`): the recipe's defaults (`fp4_quant_fwd_inp`,
  `fp4_quant_bwd_grad`) apply a random Hadamard transform to the columnwise (wgrad) copy of
  inputs and gradients, so a 16-bit operand is read by one amax kernel that takes the rowwise
  and the Hadamard-transformed columnwise amax together (`nvte_hadamard_transform_amax`,
  `hadamard_transform.h`), then once by the rowwise cast and once by the fused Hadamard
  columnwise cast (`nvte_hadamard_transform_cast_fusion_columnwise`): three 2-byte reads and two
  FP4 copies (0.5 B/value + 1 B per 16 values of E4M3 scale). Stochastic rounding of gradients
  happens inside the cast (no bytes); weights' 16x16 2D scales are weight casts, which Seer's
  cast model does not price for any recipe. The bytes are taken over delayed scaling's on the
  same GPU, as `fp8_recipe.cast_factor` does for the FP8 recipes; nothing is fitted.
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
NVFP4_READS = 3.0
"""16-bit reads of one operand: the fused rowwise + Hadamard amax kernel, the rowwise cast and
the fused Hadamard columnwise cast (TE `hadamard_transform.h`; with `NVTE_NVFP4_DISABLE_RHT`
the reads would differ — the default recipe is priced)."""
NVFP4_COPIES = 2.0
"""Rowwise and columnwise copies: block scales run along one direction, so TE quantizes both
from the 16-bit input (`NVFP4BlockScaling` docstring)."""
NVFP4_BLACKWELL_GEMM_RATE = 1.810
"""NVFP4 GEMM kernel rate over the tensor-scaled FP8 one, TE GEMM profiling guide on B300,
pre-quantized operands (kernel alone): 6.812 ms (current scaling) / 3.764 ms (NVFP4) = 1.810.
Taken for every Blackwell GPU (assumption: B200/GB200/GB300 NVFP4 kernels lead their
tensor-scaled FP8 ones by B300's factor; their FP4/FP8 peak ratios, 2 and 3, leave room)."""
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
