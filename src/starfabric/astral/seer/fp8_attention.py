"""FP8 dot-product attention (Transformer Engine `fp8_dpa`): what a run states, how fast cuDNN's
FP8 fused attention runs against its BF16 kernel, and the quantization it adds.

A run with FP8 attention (TE recipe `fp8_dpa=True`; Megatron-Core
`TransformerConfig.fp8_dot_product_attention`; NeMo / Megatron-Bridge
`fp8_dot_product_attention`; MLPerf's NeMo configs `FP8_DPA=1`, `config_common_fp8attn.sh`) runs
TE's FusedAttention through cuDNN's FP8 kernels, forward and backward (`NVTE_FP8_DPA_BWD`
defaults to 1). Seer otherwise times fused attention at one (BF16) rate whatever the GEMM
precision; this module supplies the three pieces that change.

**What a row states** (`stated_fp8_attention`, `row_dpa_recipe`). A mention of the setting
("FP8_DPA=1", "fp8_dpa: True", "NVTE_FP8_DPA=1", "fp8_dot_product_attention=True",
"--fp8-dot-product-attention", "config_common_fp8attn.sh") in the precision, framework or notes
cell, or, in the precision cell, the words ("FP8 attention", "attention in FP8", "attention FP8
current scaling", "FP8 fused attention", "FP8 SDPA"). A negated mention states nothing
(`statements.negated_at`: "FP8_DPA=0", "fp8_dpa: false", "no FP8 attention", "FP8 DPA off");
so does an unset one ("FP8_DPA unset": an unset variable is its default, and every default is
off: TE recipes `fp8_dpa = False`, Megatron-Core `fp8_dot_product_attention: bool = False`).
"attention BF16" / "BF16 attention" in the precision cell states BF16 attention. An affirmed
mention wins over a negated one (`statements.stated`). The reference of a comparison states
nothing ("BF16 attention vs. FP8 attention", "compared with FP8_DPA=1 runs":
`statements.compared_at`). `NVTE_FP8_DPA_BWD` alone states nothing
(it only chooses the backward's precision when FP8 attention is on); `NVTE_DPA_FP8_RECIPE=F16`
turns FP8 attention off (TE `dot_product_attention.py` recipe table).

**The rate** (`rate_over_bf16`). cudnn-frontend's training sweep measures cuDNN 9.19.1's FP8
(tensor-scaled E4M3) and BF16 fused attention on H200, GB200 and GB300 with the same shape
(Llama 3.1 405B: 64 query / 8 KV heads, head dim 128, causal, 2K-32K;
tests/data/attention/cudnn_fp8_training.csv). The FP8/BF16 rate by sequence length is taken
per GPU generation, forward and backward, interpolated in log(sequence) between the measured
lengths and held beyond them; Seer's keys per query per call (`ops`: sequence / 2 for a causal
call) index it at twice their number. Hopper's backward is not taken from the sweep
(`HOPPER_BWD`: 1.0, module constant). The rate is capped at the GPU's FP8/BF16 peak ratio
(`gpus.yaml`): no FP8 kernel runs above the FP8 peak (no measured ratio comes near the cap of 2).
FlashAttention-3's paper (Shah et al. 2024, arXiv 2407.08608, abstract) reaches up to 740
TFLOP/s in FP16 and close to 1.2 PFLOP/s in FP8 forward on H100: about 1.6x, against the
sweep's 1.44-1.52x for cuDNN's causal forward on H200 (same SM90 tensor cores) — the FA3
figures are its best shapes (head dim 256), not the same shape. NVIDIA's cuDNN 9 blog
("Accelerating Transformers with NVIDIA cuDNN 9", 2024) gives up to 1.2 PFLOP/s FP8 on H200 and
a Llama 2 70B LoRA step 1.15x (FP8 SDPA) against 1.11x (BF16 SDPA) over no cuDNN.

**The quantization** (`quant_bytes`). With FP8 attention and `fp8_mha` off (Megatron-Core's
default), TE's `FusedAttnFunc` (`backends.py` @0001d1b) quantizes the BF16 Q, K and V before
the forward kernel and dO before the backward one. Under current scaling (Float8CurrentScaling)
the kernels return O and dQ, dK, dV in BF16 (`NVTE_DPA_FP8CS_O_in_F16` defaults to 1, so O is
not re-quantized for the backward); under delayed scaling they return FP8, which TE
dequantizes for the output projection and for the QKV GEMM's backward. One quantization moves
the recipe's reads (current scaling: two, amax then cast; delayed: one, `fp8_recipe.quant_bytes`)
of 2 bytes and `DPA_COPIES` 1-byte FP8 copies per value; a dequantization reads 1 byte and
writes 2. The FP8 attention's recipe (`row_dpa_recipe`) follows the GEMM recipe (TE's table:
DelayedScaling -> delayed, Float8CurrentScaling -> current) unless `NVTE_DPA_FP8_RECIPE` names
another; NVFP4 and blockwise GEMMs are paired with current scaling there. MXFP8
attention (`MXFP8BlockScaling`, TE's default with MXFP8 GEMMs from v2.15) is another cuDNN
kernel, measured at cuDNN 9.22.0 only: its rates by attention shape and its casts are
seer/mxfp8_attention.py's, selected here (`curve`, `quant_bytes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer import mxfp8_attention
from starfabric.astral.seer.fp8_recipe import (
    BF16_READ_BYTES,
    FP8_WRITE_BYTES,
    native_mx,
)
from starfabric.astral.seer.statements import negated_at, stated_for_run
from starfabric.errors import ConfigError

DpaRecipe = Literal["delayed", "tensorwise", "mxfp8"]
"""The FP8 attention's scaling recipe (Megatron-Core's recipe names): delayed = TE
DelayedScaling, tensorwise = Float8CurrentScaling (the same tensor-scaled cuDNN kernel; they
differ in the quantization bytes), mxfp8 = MXFP8BlockScaling (cuDNN's MXFP8 kernel,
seer/mxfp8_attention.py; Blackwell only)."""
DPA_RECIPES: tuple[str, ...] = get_args(DpaRecipe)
"""The recipe names `DpaRecipe` admits (kept from the Literal, as nvfp4.FP4_RECIPES is)."""

SEQ_POINTS: tuple[int, ...] = (2048, 4096, 8192, 16384, 32768)
"""Causal sequence lengths of the cudnn-frontend sweep (tests/data/attention/cudnn_fp8_training.csv)."""

HOPPER_FWD: tuple[float, ...] = (1.442, 1.445, 1.497, 1.501, 1.515)
"""FP8 / BF16 causal forward rate at SEQ_POINTS, cuDNN 9.19.1 on H200 (TFLOP/s 698/484,
854/591, 964/644, 1010/673, 1042/688). Taken for every GPU with an FP8 peak and no MX block
scales (`cost.is_hopper`'s test; assumption: H100/H800/H20 run the H200's SM90 kernels at the
same FP8/BF16 ratio, attention being compute-bound, and only the ratio is carried)."""
HOPPER_BWD = 1.0
"""FP8 / BF16 backward rate on Hopper: 1.0, an assumption — no speed-up and no slow-down. The one
Hopper measurement (cuDNN 9.19.1, H200, the sweep above) runs the causal FP8 backward at
1.06/0.99/0.80/0.65/0.64x BF16 from 2K to 32K while its non-causal FP8 backward runs
1.05-1.18x faster (the same file's no_mask rows, 531/504 ... 674/572): that release's causal FP8
backward does not skip the masked tiles as its BF16 one does (370 causal against 674 non-causal
TFLOP/s at 32K, where BF16 keeps 581 against 572). Taking that as the Hopper FP8 backward would
contradict the end-to-end evidence at earlier releases (cuDNN 9 blog: FP8 SDPA speeds a Llama 2
70B LoRA step on H200 from 1.11x to 1.15x, which a backward 0.8x as fast at 8K would reverse),
and taking the non-causal gain would credit a causal kernel with a measurement it does not
reach; so neither is priced."""
BLACKWELL_FWD: tuple[float, ...] = (1.234, 1.279, 1.243, 1.266, 1.285)
"""FP8 / BF16 causal forward rate at SEQ_POINTS, cuDNN 9.19.1 on GB200 (1286/1042, 1707/1335,
1987/1598, 2135/1687, 2210/1720). Taken for B200 and GB200 (assumption: B200 runs the same
SM100 kernels at GB200's ratio, the two differing in clocks and power, not in the SM)."""
BLACKWELL_BWD: tuple[float, ...] = (1.073, 1.086, 1.127, 1.160, 1.158)
"""FP8 / BF16 causal backward rate, cuDNN 9.19.1 on GB200 (897/836, 1229/1132, 1478/1311,
1626/1402, 1705/1473)."""
BLACKWELL_ULTRA_FWD: tuple[float, ...] = (1.292, 1.390, 1.473, 1.534, 1.554)
"""FP8 / BF16 causal forward rate, cuDNN 9.19.1 on GB300 (1636/1266, 2324/1672, 2780/1887,
3019/1968, 3129/2014). Taken for B300 and GB300 (SM103). Blackwell Ultra doubles the SFUs'
MUFU.EX2 (exponential) throughput over Blackwell (NVIDIA technical blog "Making Softmax More
Efficient with NVIDIA Blackwell Ultra", 2026): the softmax that holds an FP8 forward on GB200
to ~1.27x BF16 lets GB300's reach ~1.5x, so the two parts take separate curves."""
BLACKWELL_ULTRA_BWD: tuple[float, ...] = (1.043, 1.095, 1.148, 1.181, 1.196)
"""FP8 / BF16 causal backward rate, cuDNN 9.19.1 on GB300 (945/906, 1309/1195, 1590/1385,
1759/1490, 1852/1549). Taken for B300 as for GB300 (assumption, as BLACKWELL_FWD's)."""
RELEASE_SPREAD = 0.20
"""How far a later release moves the Blackwell ratios: cuDNN 9.22.0 (the same sweep, batch 2)
against 9.19.1 at 4K-32K changes no ratio by more than 20%; the largest are the backwards at
32K (GB300 1.428 against 1.196, +19.4%; GB200 1.376 against 1.158, +18.8%); forwards move by at
most 7% (GB300 at 4K, 1.487 against 1.390). Later releases' backward gains are not priced: the
9.19.1 rows are the one release measured on Hopper and both Blackwell parts alike
(tests/astral/seer/test_fp8_attention.py re-derives the spread)."""
ULTRA_FP4_OVER_FP8 = 2.5
"""Assumption: a Blackwell GPU whose catalog NVFP4 peak exceeds this multiple of its FP8 peak is
Blackwell Ultra (B300 2.92, GB300 3.0, B200 and GB200 2.0: `gpus.yaml`, NVIDIA datasheets): the catalog
has no SM-version field, and the 1.5x dense-FP4 peak is Blackwell Ultra's other datasheet change."""

DPA_COPIES = 1.0
"""FP8 copies one quantization of Q, K, V or dO writes: one (assumption: cuDNN's FP8 attention
kernels read each of Q, K, V, O and dO in one layout in both passes, transposing in shared
memory as FlashAttention-3 does for V — unlike Hopper's FP8 GEMMs, which need a second,
transposed copy; `fp8_recipe.quant_bytes`)."""
DEQUANT_BYTES = FP8_WRITE_BYTES + BF16_READ_BYTES
"""HBM bytes per value of one dequantization: read the 1-byte FP8 value, write 2 bytes."""


@dataclass(frozen=True)
class Fp8AttentionCurve:
    """One GPU's FP8/BF16 fused-attention rate by causal sequence length, forward and backward,
    and the cap (FP8/BF16 peak ratio) no rate exceeds."""

    forward: tuple[float, ...]
    backward: tuple[float, ...]
    cap: float

    def rate(self, keys: Any, backward: bool) -> np.ndarray[Any, np.dtype[np.float64]]:
        """FP8 over BF16 rate for calls with `keys` keys per query, read at the causal call of
        length 2 x keys (`ops`: a causal query meets sequence / 2 keys on average), interpolated
        in log2(length) over SEQ_POINTS and held beyond them (assumption: a CP ring step or a
        sliding window with the same keys per query runs at the causal call's ratio; the sweep
        measures causal and, on H200 only, full calls)."""
        k = np.maximum(np.asarray(keys, dtype=np.float64), 1.0)
        ys = self.backward if backward else self.forward
        out = np.interp(np.log2(2.0 * k), np.log2(np.array(SEQ_POINTS, float)), np.array(ys))
        capped: np.ndarray[Any, np.dtype[np.float64]] = np.minimum(out, self.cap)
        return capped


def _fp8_peak_ratio(gpu: GPUSpec) -> float:
    return gpu.dense_tflops.get("fp8", 0.0) / gpu.tflops("bf16")


def is_blackwell_ultra(gpu: GPUSpec) -> bool:
    """B300 / GB300: Blackwell (an MXFP8 peak) whose NVFP4 peak exceeds ULTRA_FP4_OVER_FP8 x FP8."""
    fp8 = gpu.dense_tflops.get("fp8", 0.0)
    return native_mx(gpu) and gpu.dense_tflops.get("nvfp4", 0.0) > ULTRA_FP4_OVER_FP8 * fp8


def check_supported(gpu: GPUSpec, recipe: DpaRecipe | None = None) -> None:
    """A one-line error for FP8 attention on a GPU without FP8 tensor cores, or MXFP8 attention
    on one without MX block scales (TE v2.15 disables it below SM100)."""
    if gpu.dense_tflops.get("fp8", 0.0) <= 0:
        raise ConfigError(
            f"fp8_attention on {gpu.name}: cuDNN's FP8 fused attention needs FP8 tensor cores "
            "(Hopper or Blackwell); the GPU has no FP8 peak",
            fix="drop fp8_attention (attention runs in BF16), or use a Hopper/Blackwell GPU",
        )
    if recipe == "mxfp8" and not native_mx(gpu):
        raise ConfigError(
            f"fp8_attention 'mxfp8' on {gpu.name}: cuDNN's MXFP8 attention needs Blackwell "
            "tensor cores (Transformer Engine disables it below SM100)",
            fix="use fp8_attention tensorwise or delayed on this GPU, or a Blackwell GPU",
        )


def curve(gpu: GPUSpec, recipe: DpaRecipe = "tensorwise", mla: bool = False) -> Fp8AttentionCurve:
    """The GPU generation's measured FP8/BF16 rate curve (module docstring, The rate); under
    `recipe` mxfp8 the MXFP8/BF16 curve of the GPU generation and attention shape (`mla`: the
    model has multi-head latent attention; seer/mxfp8_attention.py)."""
    check_supported(gpu, recipe)
    cap = _fp8_peak_ratio(gpu)
    if recipe == "mxfp8":
        fwd, bwd = mxfp8_attention.curves(is_blackwell_ultra(gpu), mla)
        return Fp8AttentionCurve(fwd, bwd, cap)
    if is_blackwell_ultra(gpu):
        return Fp8AttentionCurve(BLACKWELL_ULTRA_FWD, BLACKWELL_ULTRA_BWD, cap)
    if native_mx(gpu):
        return Fp8AttentionCurve(BLACKWELL_FWD, BLACKWELL_BWD, cap)
    return Fp8AttentionCurve(HOPPER_FWD, (HOPPER_BWD,) * len(SEQ_POINTS), cap)


def rate_over_bf16(
    gpu: GPUSpec, keys: Any, backward: bool
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """cuDNN's FP8 fused attention rate over its BF16 one on `gpu` for calls with `keys` keys
    per query (`Fp8AttentionCurve.rate`)."""
    return curve(gpu).rate(keys, backward)


def quant_bytes(recipe: DpaRecipe) -> tuple[float, float]:
    """(quantize, dequantize) HBM bytes per value under `recipe`: a quantization reads the
    2-byte value once (delayed) or twice (current scaling's amax pass, as `fp8_recipe`) and
    writes one FP8 byte: 3 or 5 B; a dequantization (delayed only; current scaling's kernels
    return BF16) reads 1 byte and writes 2: 3 B, 0 under current scaling. MXFP8: one read, two
    scaled copies, nothing dequantized (mxfp8_attention.QUANT_BYTES)."""
    if recipe == "mxfp8":
        return mxfp8_attention.QUANT_BYTES, 0.0
    reads = 2.0 if recipe == "tensorwise" else 1.0
    quant = reads * BF16_READ_BYTES + DPA_COPIES * FP8_WRITE_BYTES
    return quant, DEQUANT_BYTES if recipe == "delayed" else 0.0


def quant_traffic(recipe: DpaRecipe, qkv_values: float, o_values: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes FP8 attention adds over BF16 attention for one call with
    `qkv_values` Q, K and V values and `o_values` output values (module docstring, The
    quantization): forward quantizes Q, K, V (and under delayed scaling dequantizes O); backward
    quantizes dO (and under delayed scaling dequantizes dQ, dK, dV)."""
    quant, dequant = quant_bytes(recipe)
    fwd = quant * qkv_values + dequant * o_values
    bwd = quant * o_values + dequant * qkv_values
    return fwd, bwd


_SETTING = re.compile(
    r"(?<![a-z0-9])(?:nvte[-_])?fp8[-_ ]?dpa(?![a-z0-9]|_bwd)"
    r"|(?<![a-z0-9])(?:--)?fp8[-_ ]dot[-_ ]product[-_ ]attention(?![a-z0-9])"
    r"|config_common_fp8attn",
    re.I,
)
"""The setting by name: MLPerf / NeMo `FP8_DPA`, TE's recipe field `fp8_dpa` ("FP8 DPA"),
`NVTE_FP8_DPA`, `fp8_dot_product_attention` (Megatron-Core / NeMo / Megatron-Bridge),
`--fp8-dot-product-attention`, MLPerf's `config_common_fp8attn.sh`; not `NVTE_FP8_DPA_BWD`."""
_WORDS = re.compile(
    r"(?<![a-z0-9])fp8\s+(?:fused\s+|dot[- ]product\s+|scaled[- ]dot[- ]product\s+)?"
    r"(?:attention|sdpa)(?![\w-])"
    r"|\battention\s+(?:in\s+)?fp8(?![a-z0-9])",
    re.I,
)
"""The words, read in a precision cell only: "FP8 attention", "FP8 fused attention", "FP8
SDPA", "attention in FP8", "attention FP8 current scaling"; not a compound ("FP8
attention-output")."""
_BF16_ATTENTION = re.compile(
    r"\battention\s+(?:in\s+)?(?:bf16|fp16|f16)\b|\b(?:bf16|fp16)\s+attention\b", re.I
)
"""A precision cell stating 16-bit attention ("attention BF16", "BF16 attention")."""
_UNSET_AFTER = re.compile(r"\s*(?:is\s+)?(?:unset|not\s+set)\b", re.I)
"""An unset variable ("FP8_DPA unset") is its default, off."""
_DPA_RECIPE = re.compile(
    r"NVTE_DPA_FP8_RECIPE\s*[=:]?\s*['\"]?"
    r"(Float8CurrentScaling|DelayedScaling|MXFP8BlockScaling|F16)\b",
    re.I,
)
"""TE's attention recipe override (`dot_product_attention.py`): "NVTE_DPA_FP8_RECIPE
Float8CurrentScaling", "NVTE_DPA_FP8_RECIPE=F16"."""


def _unset(text: str, m: re.Match[str]) -> bool:
    """An unset variable ("FP8_DPA unset") is its default, off."""
    return bool(_UNSET_AFTER.match(text, m.end()))


def _mentions(pattern: re.Pattern[str], cells: tuple[str | None, ...]) -> bool | None:
    """`statements.stated_for_run` with unset mentions read as negated; the reference of a
    comparison ("vs. FP8 attention") is not a mention."""
    return stated_for_run(pattern, *cells, off=_unset)


def stated_fp8_attention(precision: str | None, *others: str | None) -> bool | None:
    """True when a row states FP8 attention (module docstring, What a row states), False when it
    states it off or states BF16 attention, None when it says nothing. `precision` is read for
    the setting and the words; `others` (framework, notes) for the setting by name only."""
    named = _mentions(_SETTING, (precision, *others))
    words = _mentions(_WORDS, (precision,))
    recipe = _stated_dpa_recipe(precision, *others)
    if recipe == "f16":
        return False
    if named or words:
        return True
    if named is False or words is False or _mentions(_BF16_ATTENTION, (precision,)):
        return False
    return None


def _stated_dpa_recipe(*cells: str | None) -> str | None:
    """TE's NVTE_DPA_FP8_RECIPE value a row states, lower-cased, not negated ("f16" included)."""
    for cell in cells:
        text = cell or ""
        for m in _DPA_RECIPE.finditer(text):
            if not negated_at(text, m.start(), m.end()):
                return m.group(1).lower()
    return None


def row_dpa_recipe(gemm_recipe: str | None, fp4: bool, *cells: str | None) -> DpaRecipe:
    """The FP8 attention's recipe for a row that states FP8 attention: the stated
    NVTE_DPA_FP8_RECIPE, else the GEMM recipe's pairing in TE's table
    (`dot_product_attention.py` @0001d1b: delayed or none -> delayed, tensorwise -> tensorwise,
    mxfp8 -> mxfp8, TE v2.15's table). NVFP4 and blockwise GEMMs -> tensorwise (assumption:
    TE's table gives NVFP4 no default pairing, and the MLPerf NVFP4 configs and Megatron-Bridge's
    NVFP4 launcher set `NVTE_DPA_FP8_RECIPE=Float8CurrentScaling`)."""
    named = _stated_dpa_recipe(*cells)
    if named == "float8currentscaling":
        return "tensorwise"
    if named == "delayedscaling":
        return "delayed"
    if named == "mxfp8blockscaling":
        return "mxfp8"
    if fp4 or gemm_recipe in ("tensorwise", "torchao_tensorwise", "blockwise"):
        return "tensorwise"
    if gemm_recipe == "mxfp8":
        return "mxfp8"
    return "delayed"


__all__ = [
    "BLACKWELL_BWD",
    "BLACKWELL_FWD",
    "BLACKWELL_ULTRA_BWD",
    "BLACKWELL_ULTRA_FWD",
    "DEQUANT_BYTES",
    "DPA_COPIES",
    "DPA_RECIPES",
    "HOPPER_BWD",
    "HOPPER_FWD",
    "RELEASE_SPREAD",
    "SEQ_POINTS",
    "ULTRA_FP4_OVER_FP8",
    "DpaRecipe",
    "Fp8AttentionCurve",
    "check_supported",
    "curve",
    "is_blackwell_ultra",
    "quant_bytes",
    "quant_traffic",
    "rate_over_bf16",
    "row_dpa_recipe",
    "stated_fp8_attention",
]
