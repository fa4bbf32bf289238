"""How fast an FP8 GEMM and its quantization run under the FP8 recipe a run states.

Seer's FP8 GEMM rate (`efficiency.yaml` `fp8_gemm_peak_fraction`) and its cast
(`cost.FP8_CAST_BYTES`) are calibrated on NeMo 24.07 runs, i.e. Transformer Engine's
`DelayedScaling` (Megatron-Core's default `--fp8-recipe delayed`). The other recipes differ in
two places, each taken here relative to that reference:

- **The GEMM kernel.** Tensor-scaled FP8 (delayed and current scaling alike) applies its two
  scales in the epilogue. Block scaling on Hopper rescales every 128-wide K slice on CUDA cores
  inside the main loop (TE docs `fp8_blockwise_scaling.rst`: "On Hopper, block-scaled GEMMs are
  software-emulated"; DeepSeek-V3 report section 3.3.2). Blackwell's tensor cores apply MX
  block scales themselves (`mxfp8`); TE runs the blockwise recipe there through MXFP8 GEMMs.
- **The quantization.** Current ("tensorwise") scaling reads the tensor twice, once for its
  amax and once to cast; delayed scaling once (TE docs `fp8_current_scaling.rst`,
  `fp8_delayed_scaling.rst`). On Hopper the backward needs a second, transposed FP8 copy; on
  Blackwell tensor-scaled FP8 serves both directions from one copy, while MXFP8's rowwise and
  columnwise copies differ (`mxfp8.rst`). Block and MX recipes also write their scales.

The kernel rates are measured in one run per GPU of TE's GEMM profiling guide (PR #2863:
`tests/data/fp8_recipes/te_gemm_profiling.csv`, SOURCES.md there): the same layer's GEMMs timed
per recipe with and without quantization. `tests/astral/seer/test_fp8_recipe.py` re-derives
both rates from that table and checks the byte model against its quantization times.

A run that states FP8 without a recipe keeps the reference (`None`).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer.fp4_format import stated_fp4
from starfabric.astral.seer.statements import negated_at, stated
from starfabric.errors import ConfigError

Recipe = Literal["delayed", "tensorwise", "blockwise", "mxfp8", "torchao_tensorwise"]
"""Megatron-Core's `--fp8-recipe` choices with their TE recipe (core_v0.17.1 `fp8_utils.py`):
delayed = `DelayedScaling`, tensorwise = `Float8CurrentScaling`, blockwise =
`Float8BlockScaling` (DeepSeek-V3's 1x128 activation / 128x128 weight scales), mxfp8 =
`MXFP8BlockScaling`; plus torchao's float8 tensorwise (dynamic) scaling under torch.compile."""
RECIPES: tuple[str, ...] = get_args(Recipe)

BF16_READ_BYTES = 2.0
"""Bytes read per element by one pass over the 16-bit input."""
FP8_WRITE_BYTES = 1.0
"""Bytes written per element by one FP8 copy."""
BLOCK_SCALE_BYTES = 4.0 / 128
"""Blockwise recipe: one FP32 scale per 128 values, per copy (TE `fp8_blockwise_scaling.rst`)."""
MX_SCALE_BYTES = 1.0 / 32
"""MXFP8: one E8M0 (1-byte) scale per 32 values, per copy (TE `mxfp8.rst`, OCP MX spec)."""

BLOCKWISE_HOPPER_GEMM_RATE = 0.818
"""Hopper block-scaled FP8 GEMM kernel rate over the tensor-scaled one, TE GEMM profiling guide
on H200 NVL (one layer, M = 15,872): the blockwise autocast total (22.882 ms) less its
quantization by the byte model (4.0625 B/element x 3.500 ms / 6 B/element, the current-scaling
quantization time per byte of the same run) = 20.51 ms of kernel, against 16.785 ms of
pre-quantized tensor-scaled kernel: 16.785 / 20.51 = 0.818. The guide has no pre-quantized
Hopper blockwise row (cuBLAS takes no 2D x 2D scales there), so the kernel is split out this
way. Outside check, older kernels: FBGEMM PR #2546 (H100 500 W, 2024) block-only / row-only
0.73-0.77 at three training shapes. Taken for every Hopper GPU and every blockwise kernel
(assumption: the H200 NVL's ratio holds on H100/H800 SXM, which run the same SM90 kernels, and
for DeepSeek's own kernels, whose 2024 versions no same-GPU comparison times)."""
MXFP8_BLACKWELL_GEMM_RATE = 0.951
"""Blackwell MXFP8 GEMM kernel rate over the tensor-scaled FP8 one, the same guide on B300,
pre-quantized operands (kernel alone): 6.812 ms (current scaling) / 7.161 ms (MXFP8) = 0.951.
Taken for every Blackwell GPU (assumption: B200's MX kernels trail its tensor-scaled ones by
the same share as B300's)."""

_TENSOR_SCALED = ("delayed", "tensorwise", "torchao_tensorwise")


def native_mx(gpu: GPUSpec) -> bool:
    """True where the tensor cores apply MX block scales themselves (Blackwell): the hardware
    catalog gives the GPU an `mxfp8` peak."""
    return gpu.dense_tflops.get("mxfp8", 0.0) > 0


def check_supported(recipe: str | None, gpu: GPUSpec) -> None:
    """A one-line error for a recipe the GPU cannot run (MXFP8 needs Blackwell: Megatron-Core's
    `fp8_recipe` docstring, TE `mxfp8.rst` "Requires SM100")."""
    if recipe == "mxfp8" and not native_mx(gpu):
        raise ConfigError(
            f"fp8_recipe 'mxfp8' on {gpu.name}: MXFP8 needs Blackwell tensor cores (SM100+)",
            fix="use fp8_recipe blockwise, tensorwise or delayed on this GPU, or a Blackwell GPU",
        )


def quant_bytes(recipe: str, gpu: GPUSpec) -> float:
    """HBM bytes per element one quantization of a 16-bit GEMM operand moves under `recipe`:
    one read (two with current scaling's amax pass), one FP8 copy per layout the GEMMs need
    (two for block/MX scales, and for tensor scales on Hopper where the backward needs a
    transposed copy), plus their scales. Another framework's MXFP8 casts (torchao) are taken
    to move what TE's do (assumption). torchao's dynamic tensorwise under torch.compile
    costs what delayed scaling does (TorchTitan PR #698: Llama-3-8B, dynamic 6,810 wps vs
    delayed 6,750 in the same job): inductor fuses the amax reduction into the producer."""
    mx = native_mx(gpu)
    copies = 1.0 if mx and recipe in _TENSOR_SCALED else 2.0
    reads = 2.0 if recipe == "tensorwise" else 1.0
    scale = 0.0
    if recipe == "blockwise":
        # Blackwell runs the blockwise recipe through MXFP8 GEMMs (TE PR #2157, `fp8_blockwise_
        # scaling.rst`): its quantization is taken as MXFP8's (assumption).
        scale = MX_SCALE_BYTES if mx else BLOCK_SCALE_BYTES
    elif recipe == "mxfp8":
        scale = MX_SCALE_BYTES
    return reads * BF16_READ_BYTES + copies * (FP8_WRITE_BYTES + scale)


def cast_factor(recipe: str | None, gpu: GPUSpec) -> float:
    """Quantization bytes under `recipe` over the delayed-scaling reference on the same GPU
    (1 for `None`): multiplies Seer's calibrated cast (`cost.FP8_CAST_BYTES`)."""
    if recipe is None:
        return 1.0
    return quant_bytes(recipe, gpu) / quant_bytes("delayed", gpu)


def gemm_rate(recipe: str | None, gpu: GPUSpec) -> float:
    """FP8 GEMM kernel rate under `recipe` over the tensor-scaled kernel Seer is calibrated on
    (1 for `None` and the tensor-scaled recipes): multiplies `fp8_gemm_peak_fraction`."""
    if recipe in ("blockwise", "mxfp8"):
        return MXFP8_BLACKWELL_GEMM_RATE if native_mx(gpu) else BLOCKWISE_HOPPER_GEMM_RATE
    return 1.0


_STATED: tuple[tuple[Recipe, re.Pattern[str]], ...] = (
    (
        "mxfp8",
        re.compile(
            r"(?<![a-z0-9])mx-?\s*fp8|microscal|\bfp8(?:[-_ ]?|\s*\(\s*)mx(?![a-z0-9])", re.I
        ),
    ),
    (
        "blockwise",
        re.compile(
            r"\b1\s*[x×]\s*128\b|\b128\s*[x×]\s*128\b|block[- ]?(?:wise|scal)|deepseek[- ]style"
            r"|sub-?channel|\bfp8(?:[-_ ]?|\s*\(\s*)sc(?![a-z0-9])",
            re.I,
        ),
    ),
    (
        "delayed",
        re.compile(
            r"(?<![a-z0-9])delayed(?:[-_ ]?scaling)?(?![a-z0-9])(?![-_ ]wgrad)"
            r"|\bfp8(?:[-_ ]?|\s*\(\s*)ds(?![a-z0-9])",
            re.I,
        ),
    ),
    (
        "tensorwise",
        re.compile(
            r"\btensor[- ]?wise\b|current[-_ ]?scal|\bfp8(?:[-_ ]?|\s*\(\s*)cs(?![a-z0-9])", re.I
        ),
    ),
)
"""The recipe a precision cell states, first stated (not negated, `statements.stated`) wins:
"MXFP8 ..." (TE's `MXFP8BlockScaling` too), "FP8 (E4M3, 1x128 act / 128x128 weight scaling)",
"delayed scaling" (`DelayedScaling`; not "delayed wgrad"), "FP8 current scaling"
(`Float8CurrentScaling`); Megatron-Bridge's names (v0.5.0 `scripts/performance` `--compute_dtype`
fp8_cs / fp8_mx / fp8_sc, its `fp8_ds`, and `mixed_precision.py`'s
`bf16_with_fp8_current_scaling_mixed`, `bf16_with_mxfp8_mixed`,
`bf16_with_fp8_subchannel_scaling_mixed` = blockwise, `bf16_with_fp8_delayed_scaling_mixed`).
Megatron-Bridge's suffixes are read joined or bracketed ("FP8-MX", "FP8 MX", "FP8 (MX)").
A cell that says "current scaling, not delayed" states tensorwise.
Any other FP8 cell ("FP8 (Transformer Engine)", "FP8 hybrid") states no recipe."""
_TORCHAO = re.compile(r"\btorchao\b", re.I)
_DYNAMIC = re.compile(r"\bdynamic\b", re.I)
_ROWWISE = re.compile(r"\brow[- ]?wise\b", re.I)
"""torchao's float8 dynamic ("tensorwise") scaling: torchao named with tensorwise or dynamic
scaling anywhere in the cell, in either order ("torchao float8 tensorwise", "FP8 tensorwise
(torchao)"); torchao's rowwise recipe, also dynamic, is not it (no recipe read: left alone)."""


_ATTENTION_RECIPE = re.compile(r"NVTE_DPA_FP8_RECIPE\s*[=:]?\s*['\"]?\w*", re.I)
"""TE's FP8 attention recipe override with its value ("NVTE_DPA_FP8_RECIPE=DelayedScaling",
"NVTE_DPA_FP8_RECIPE Float8CurrentScaling"): the attention's recipe
(`fp8_attention.row_dpa_recipe` reads it), not the GEMMs', so `stated_recipe` reads a cell
without it."""


def stated_recipe(text: str | None) -> Recipe | None:
    """The FP8 recipe a precision cell names, or None when it names none (FP4 cells too:
    their GEMMs are priced by seer/nvfp4.py, or at the FP8 rate for MXFP4). Negated mentions
    ("not MXFP8", "no delayed scaling") state nothing, nor does the FP8 attention's own recipe
    (`_ATTENTION_RECIPE`)."""
    if stated_fp4(text) is not None:
        return None
    text = _ATTENTION_RECIPE.sub(" ", text or "")
    for name, pat in _STATED:
        if not stated(pat, text):
            continue
        if name == "tensorwise" and stated(_TORCHAO, text):
            return "torchao_tensorwise"
        return name
    if stated(_TORCHAO, text) and stated(_DYNAMIC, text) and not stated(_ROWWISE, text):
        return "torchao_tensorwise"
    return None


_FLAG = re.compile(r"fp8[-_ ]recipe\s*[=:]?\s*['\"]?(tensorwise|delayed|mxfp8|blockwise)\b", re.I)
"""An explicit Megatron-Core setting in a notes/framework cell: "--fp8-recipe blockwise",
"fp8_recipe: mxfp8"; a negated one ("not --fp8-recipe blockwise") is skipped."""


def row_recipe(precision: str | None, *others: str | None) -> Recipe | None:
    """The recipe a published row states: its precision cell (`stated_recipe`), else a
    Megatron `--fp8-recipe` setting written in another cell (notes, framework)."""
    recipe = stated_recipe(precision)
    if recipe is not None or stated_fp4(precision) is not None:
        return recipe
    for text in others:
        for m in _FLAG.finditer(text or ""):
            if not negated_at(text or "", m.start(), m.end()):
                return m.group(1).lower()  # type: ignore[return-value]
    return None


def is_mxfp8(precision: str | None, *others: str | None) -> bool:
    """Whether a row states the MXFP8 recipe (`row_recipe`): the one reading of "is this
    MXFP8" for the GEMM rate and cast here and for TE's MXFP8 launches (te_mxfp8_host), so the
    two cannot diverge ("MX-FP8", Megatron-Bridge's "fp8_mx" and "bf16_with_mxfp8_mixed",
    "--fp8-recipe mxfp8"; not "FP8 tensorwise, not MXFP8", not an FP4 cell)."""
    return row_recipe(precision, *others) == "mxfp8"


__all__ = [
    "BLOCKWISE_HOPPER_GEMM_RATE",
    "MXFP8_BLACKWELL_GEMM_RATE",
    "RECIPES",
    "Recipe",
    "cast_factor",
    "check_supported",
    "gemm_rate",
    "is_mxfp8",
    "native_mx",
    "quant_bytes",
    "row_recipe",
    "stated_recipe",
]
