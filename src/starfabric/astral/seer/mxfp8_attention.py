"""MXFP8 dot-product attention: how fast cuDNN's MXFP8 fused attention runs against its BF16
kernel, by GPU generation and attention shape, and the quantization Transformer Engine adds.

**When it runs.** Transformer Engine pairs FP8 attention (`fp8_dpa=True`; MLPerf / NeMo
`FP8_DPA=True`) with the linear layers' recipe. Under `MXFP8BlockScaling` TE v2.14 asserts that
DotProductAttention does not support the recipe; v2.15 (cherry-pick 8e73f54 of PR #2719, "Add
MXFP8 attention") runs cuDNN's MXFP8 SDPA forward and backward on SM100+ with cuDNN >= 9.21.0,
`fp8_mha=False` and a bshd/sbhd layout (`dot_product_attention.py` recipe table: "MXFP8 | MXFP8 |
Pass MXFP8 to autocast()"; `utils.get_attention_backend`). So a run that states FP8 attention
with MXFP8 GEMMs, and trained, ran this kernel (`fp8_attention.row_dpa_recipe` -> "mxfp8").

**The rate** (`curves`). cudnn-frontend's training sweep publishes MXFP8 SDPA at one release,
cuDNN 9.22.0, on GB200 and GB300, for two training shapes (tests/data/attention/
cudnn_mxfp8_training.csv): DeepSeek-V3's MLA (128 query = 128 KV heads, Q/K head dim 192, V 128)
and Llama 3.1 405B's GQA (64 query / 8 KV heads, head dim 128). The ratio depends on the shape
far more than the tensor-scaled FP8 one does: at 4K the MLA backward runs 1.29-1.33x BF16, the
GQA backward 0.92x (MXFP8 slower than BF16). A model with MLA takes the MLA curve, every other
model the GQA one (assumption: a model's attention is nearer the measured shape of its own kind;
no other shape is measured in MXFP8 except gpt-oss's sink/sliding-window kernel, another path).
The generation split is `fp8_attention`'s: GB200's curve for B200 and GB200, GB300's for B300 and
GB300 (Blackwell Ultra's doubled exponential rate lifts its MXFP8 forward to 1.58x BF16 at 4K
against GB200's 1.37x). The release: TE v2.15 admits cuDNN 9.21.x, which no sweep measures in
MXFP8; 9.22.0's ratio is taken for it (assumption; `fp8_attention.RELEASE_SPREAD` bounds how far
a release moved the tensor-scaled ratios, up to 20%).

**The quantization** (`QUANT_BYTES`). TE v2.15's `FusedAttnFunc.forward` calls
`combine_and_quantize(..., used_in_backward=is_training)`: in training Q, K and V are quantized
once each into both MXFP8 layouts (rowwise, blocks along the head dim, for the forward;
columnwise, blocks along the sequence, for the backward), one read of the BF16 value;
`backward` quantizes dO the same way (`mxfp8_quantize_fast_path`). O and dQ, dK, dV stay BF16
(the recipe table's MXFP8 row: `out_`, `dq_`, `dk_`, `dv_` are torch tensors), so nothing is
dequantized. The scale permute/swizzle kernels move only the scales (1/32 of the values) and are
not priced.
"""

from __future__ import annotations

from starfabric.astral.seer.fp8_recipe import BF16_READ_BYTES, FP8_WRITE_BYTES, MX_SCALE_BYTES

SEQ_POINTS: tuple[int, ...] = (2048, 4096, 8192, 16384, 32768)
"""Causal sequence lengths of the cuDNN 9.22.0 sweep (the same points as fp8_attention's)."""

MLA_BLACKWELL_FWD: tuple[float, ...] = (1.432, 1.369, 1.400, 1.403, 1.336)
"""MXFP8 / BF16 causal forward rate at SEQ_POINTS, DeepSeek-V3 MLA shape, cuDNN 9.22.0 on GB200
(TFLOP/s 1535/1072, 1925/1406, 2219/1585, 2355/1678, 2329/1743). Taken for B200 and GB200."""
MLA_BLACKWELL_BWD: tuple[float, ...] = (1.238, 1.290, 1.252, 1.369, 1.424)
"""MXFP8 / BF16 causal backward rate, MLA shape, GB200 (1047/846, 1364/1057, 1494/1193,
1552/1134, 1532/1076)."""
MLA_ULTRA_FWD: tuple[float, ...] = (1.610, 1.583, 1.550, 1.524, 1.486)
"""MXFP8 / BF16 causal forward rate, MLA shape, GB300 (2069/1285, 2517/1590, 2829/1825,
2998/1967, 2959/1991). Taken for B300 and GB300."""
MLA_ULTRA_BWD: tuple[float, ...] = (1.267, 1.332, 1.379, 1.416, 1.445)
"""MXFP8 / BF16 causal backward rate, MLA shape, GB300 (1158/914, 1522/1143, 1780/1291,
1844/1302, 1863/1289)."""
GQA_BLACKWELL_FWD: tuple[float, ...] = (1.212, 1.197, 1.208, 1.170, 1.261)
"""MXFP8 / BF16 causal forward rate, Llama 3.1 405B GQA shape, GB200 (1330/1097, 1685/1408,
1902/1574, 1999/1708, 2046/1622). Taken for B200 and GB200."""
GQA_BLACKWELL_BWD: tuple[float, ...] = (0.842, 0.918, 0.966, 1.081, 1.162)
"""MXFP8 / BF16 causal backward rate, GQA shape, GB200 (745/885, 1054/1148, 1287/1332,
1436/1328, 1425/1226): below 1 up to 8K, MXFP8 slower than BF16 there."""
GQA_ULTRA_FWD: tuple[float, ...] = (1.275, 1.334, 1.385, 1.424, 1.426)
"""MXFP8 / BF16 causal forward rate, GQA shape, GB300 (1751/1373, 2272/1703, 2570/1856,
2727/1915, 2785/1953). Taken for B300 and GB300."""
GQA_ULTRA_BWD: tuple[float, ...] = (0.839, 0.916, 0.978, 1.037, 1.067)
"""MXFP8 / BF16 causal backward rate, GQA shape, GB300 (811/967, 1143/1248, 1404/1435,
1563/1507, 1590/1490)."""

MXFP8_COPIES = 2.0
"""MXFP8 copies one quantization of Q, K, V or dO writes in training: rowwise and columnwise
(TE v2.15 `combine_and_quantize` with used_in_forward and used_in_backward both set keeps the
quantizer's two usages; `mxfp8_quantize_fast_path` for dO likewise)."""
QUANT_BYTES = BF16_READ_BYTES + MXFP8_COPIES * (FP8_WRITE_BYTES + MX_SCALE_BYTES)
"""HBM bytes per value of one MXFP8 attention quantization: one 2-byte read (MX scales need no
amax pass), two 1-byte copies, each with one E8M0 scale per 32 values: 4.0625 B."""


def curves(ultra: bool, mla: bool) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(forward, backward) MXFP8/BF16 rates at SEQ_POINTS for a Blackwell (`ultra`: B300/GB300)
    GPU and an MLA (`mla`) or other attention (module docstring, The rate)."""
    if mla:
        return (MLA_ULTRA_FWD, MLA_ULTRA_BWD) if ultra else (MLA_BLACKWELL_FWD, MLA_BLACKWELL_BWD)
    return (GQA_ULTRA_FWD, GQA_ULTRA_BWD) if ultra else (GQA_BLACKWELL_FWD, GQA_BLACKWELL_BWD)


__all__ = [
    "GQA_BLACKWELL_BWD",
    "GQA_BLACKWELL_FWD",
    "GQA_ULTRA_BWD",
    "GQA_ULTRA_FWD",
    "MLA_BLACKWELL_BWD",
    "MLA_BLACKWELL_FWD",
    "MLA_ULTRA_BWD",
    "MLA_ULTRA_FWD",
    "MXFP8_COPIES",
    "QUANT_BYTES",
    "SEQ_POINTS",
    "curves",
]
