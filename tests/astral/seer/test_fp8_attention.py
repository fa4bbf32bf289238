"""seer/fp8_attention.py: the FP8-attention statement reader, cuDNN's FP8/BF16 fused-attention
rate per GPU generation (cudnn-frontend's sweep, tests/data/attention/cudnn_fp8_training.csv),
the casts TE adds, and a row stating FP8 attention timed faster than the same row without."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import fp8_attention as fa
from starfabric.astral.seer.cost import CostContext, make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.ops import FLASH, FP8_DPA_CASTS, OpTable, backward_of, layer_ops
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout
from starfabric.astral.seer.predict import make_job, predict
from starfabric.astral.seer.validate import row_setup, validate_row
from starfabric.errors import ConfigError

DATA = Path(__file__).parents[2] / "data"
SWEEP = DATA / "attention" / "cudnn_fp8_training.csv"
RUNS = DATA / "published_runs"


def _sweep() -> dict[tuple[str, str, str, int, str], tuple[float, float]]:
    """(gpu, cudnn, mask, seq, pass) -> (bf16, fp8) TFLOP/s of the transcribed sweep."""
    with open(SWEEP) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {
            (r["gpu"], r["cudnn"], r["mask"], int(r["seq"]), r["pass"]): (
                float(r["bf16_tflops"]),
                float(r["fp8_tflops"]),
            )
            for r in rows
        }


# --- the reader -------------------------------------------------------------------------------

STATED = [
    "NVFP4 (config_common_fp4.sh); attention in FP8 (FP8_DPA=True, config_common_fp8attn.sh)",
    "NVFP4 (TE NVFP4 GEMMs; attention FP8 current scaling)",
    "FP8 hybrid, FP8_DPA=1",
    "FP8 (fp8_dpa: True)",
    "FP8 delayed; NVTE_FP8_DPA=1",
    "FP8, fp8_dot_product_attention=True",
    "FP8 with --fp8-dot-product-attention",
    "FP8 (E4M3) with FP8 attention",
    "FP8 GEMMs and FP8 fused attention",
    "FP8 incl. FP8 SDPA",
    "BF16 attention benchmarked; this run: FP8_DPA=1",  # affirmed wins over the BF16 words
]
NOT_STATED = [
    "FP8 delayed scaling (FP8=True); attention BF16 (FP8_DPA unset: conf/custom.yaml default False)",
    "FP8, FP8_DPA=0",
    "FP8 (fp8_dpa: false)",
    "FP8, no FP8 attention",
    "FP8 without fp8_dot_product_attention",
    "FP8 DPA off",
    "FP8, FP8 DPA disabled",
    "FP8, attention in BF16",
    "FP8_DPA=1 but NVTE_DPA_FP8_RECIPE=F16",  # TE's override back to 16-bit attention
]
SILENT = [
    "FP8 hybrid",
    "BF16",
    "FP8; NVTE_FP8_DPA_BWD=1",  # the backward's switch alone states nothing
    "FP8 attention-output kept in BF16",  # a compound, not the attention's precision
    "FP8 (attention output saved in BF16)",
]


@pytest.mark.parametrize("cell", STATED)
def test_stated_phrasings_read_as_fp8_attention(cell: str) -> None:
    assert fa.stated_fp8_attention(cell) is True


@pytest.mark.parametrize("cell", NOT_STATED)
def test_negated_or_unset_phrasings_state_it_off(cell: str) -> None:
    assert fa.stated_fp8_attention(cell) is False


@pytest.mark.parametrize("cell", SILENT)
def test_silent_cells_state_nothing(cell: str) -> None:
    assert not fa.stated_fp8_attention(cell)


def test_framework_and_notes_cells_are_read_for_the_setting_only() -> None:
    assert fa.stated_fp8_attention("FP8", "NeMo 2 (FP8_DPA=1)") is True
    assert fa.stated_fp8_attention("FP8", None, "launch sets fp8_dpa: false") is False
    # free words in a notes cell are not a statement of the run's attention precision
    assert fa.stated_fp8_attention("FP8", None, "compared with FP8 attention runs") is None


def test_recipe_follows_the_gemm_recipe_unless_te_is_told_otherwise() -> None:
    assert fa.row_dpa_recipe(None, False, "FP8, FP8_DPA=1") == "delayed"
    assert fa.row_dpa_recipe("delayed", False) == "delayed"
    assert fa.row_dpa_recipe("tensorwise", False) == "tensorwise"
    assert fa.row_dpa_recipe("mxfp8", False) == "mxfp8"
    assert fa.row_dpa_recipe(None, True) == "tensorwise"  # NVFP4 GEMMs
    stated_cs = "FP8 delayed; NVTE_DPA_FP8_RECIPE=Float8CurrentScaling"
    assert fa.row_dpa_recipe("delayed", False, stated_cs) == "tensorwise"
    stated_ds = "MXFP8; NVTE_DPA_FP8_RECIPE=DelayedScaling"
    assert fa.row_dpa_recipe("mxfp8", False, stated_ds) == "delayed"


def test_mlperf_rows_read_fp8_attention_exactly_where_their_configs_set_it() -> None:
    """The 8B file: the 14 NVFP4 rows source config_common_fp8attn.sh (FP8_DPA=True); the others
    leave FP8_DPA unset (default False)."""
    with open(RUNS / "mlperf_llama31_8b_runs.csv") as f:
        rows = list(csv.DictReader(f))
    on = 0
    for row in rows:
        ex = row_setup(row).execution
        states = "FP8_DPA=True" in row["precision"]
        assert (ex.get("fp8_attention") == "tensorwise") == states, row["row_id"]
        on += states
    assert on == 14


# --- the rate ---------------------------------------------------------------------------------

CURVES = {
    "H200": (fa.HOPPER_FWD, None),
    "GB200": (fa.BLACKWELL_FWD, fa.BLACKWELL_BWD),
    "GB300": (fa.BLACKWELL_ULTRA_FWD, fa.BLACKWELL_ULTRA_BWD),
}


@pytest.mark.parametrize("gpu", sorted(CURVES))
def test_rate_constants_are_the_sweeps_ratios(gpu: str) -> None:
    t = _sweep()
    fwd, bwd = CURVES[gpu]
    for i, seq in enumerate(fa.SEQ_POINTS):
        b, f = t[(gpu, "9.19.1", "top_left", seq, "fwd")]
        assert fwd[i] == pytest.approx(f / b, abs=0.0006)
        if bwd is not None:
            b, f = t[(gpu, "9.19.1", "top_left", seq, "bwd")]
            assert bwd[i] == pytest.approx(f / b, abs=0.0006)


def test_hopper_backward_assumption_rests_on_what_the_sweep_shows() -> None:
    """HOPPER_BWD's docstring: the causal FP8 backward trails BF16 from 8K on while the
    non-causal FP8 backward leads it at every length (the causal kernel does not skip tiles)."""
    t = _sweep()
    for seq in fa.SEQ_POINTS:
        b, f = t[("H200", "9.19.1", "no_mask", seq, "bwd")]
        assert 1.05 <= f / b <= 1.18
        if seq >= 8192:
            b, f = t[("H200", "9.19.1", "top_left", seq, "bwd")]
            assert f / b < 0.8
    assert fa.HOPPER_BWD == 1.0


def test_release_spread_is_the_largest_9_22_change() -> None:
    t = _sweep()
    changes = []
    for gpu in ("GB200", "GB300"):
        for seq in fa.SEQ_POINTS[1:]:
            for p in ("fwd", "bwd"):
                b0, f0 = t[(gpu, "9.19.1", "top_left", seq, p)]
                b1, f1 = t[(gpu, "9.22.0", "top_left", seq, p)]
                changes.append(abs((f1 / b1) / (f0 / b0) - 1.0))
    assert max(changes) <= fa.RELEASE_SPREAD
    assert max(changes) > fa.RELEASE_SPREAD - 0.01


@pytest.mark.parametrize("gpu", ["H100", "H200", "B200", "GB200", "B300", "GB300"])
@pytest.mark.parametrize("backward", [False, True])
def test_rate_is_monotone_in_length_where_measured_so_and_bounded_by_the_fp8_peak(
    gpu: str, backward: bool
) -> None:
    g = get_gpu(gpu)
    keys = np.geomspace(256, 65536, 40)
    r = fa.rate_over_bf16(g, keys, backward)
    assert np.all(r <= g.tflops("fp8") / g.tflops("bf16"))
    assert np.all(r > 0.9)
    c = fa.curve(g)
    ys = np.array(c.backward if backward else c.forward)
    if np.all(np.diff(ys) >= 0):
        assert np.all(np.diff(r) >= -1e-12)
    # held at the ends, equal to the measured points between
    assert r[0] == pytest.approx(ys[0]) and r[-1] == pytest.approx(ys[-1])
    mid = fa.rate_over_bf16(g, np.array(fa.SEQ_POINTS) / 2.0, backward)
    assert mid == pytest.approx(ys)


def test_generations_take_their_own_curves() -> None:
    assert fa.curve(get_gpu("H100")).forward == fa.HOPPER_FWD
    assert fa.curve(get_gpu("B200")).forward == fa.BLACKWELL_FWD
    assert fa.curve(get_gpu("GB300")).forward == fa.BLACKWELL_ULTRA_FWD
    assert fa.is_blackwell_ultra(get_gpu("B300")) and not fa.is_blackwell_ultra(get_gpu("GB200"))
    with pytest.raises(ConfigError):
        fa.curve(get_gpu("A100"))


def test_fp8_attention_within_the_fa3_abstracts_fp8_over_fp16_forward() -> None:
    """Outside check (not a source of any number): FA3's abstract, H100, up to 740 TFLOP/s FP16
    and close to 1.2 PFLOP/s FP8 forward: cuDNN's measured causal forward gain on Hopper stays
    below that best-shape ratio, and above 1.4."""
    assert 1.4 < max(fa.HOPPER_FWD) < 1200.0 / 740.0


# --- the casts --------------------------------------------------------------------------------


def test_cast_bytes_follow_te_fused_attn_func() -> None:
    assert fa.quant_bytes("tensorwise") == (5.0, 0.0)  # amax read + cast read + FP8 write
    assert fa.quant_bytes("delayed") == (3.0, 3.0)  # one read + write; dequant 1 B in, 2 out
    assert fa.quant_traffic("tensorwise", 10.0, 4.0) == (50.0, 20.0)
    assert fa.quant_traffic("delayed", 10.0, 4.0) == (3.0 * 10 + 3.0 * 4, 3.0 * 4 + 3.0 * 10)


def _ctx_and_ops(gpu: str, dpa: str | None, seq: int = 8192) -> tuple[CostContext, OpTable]:
    model = load_model("llama-3.1-8b")
    ex = ExecutionSpec(global_batch=8, seq_len=seq, precision="fp8", dp=8, fp8_attention=dpa)
    lay = resolve_layout(model, ex, SystemSpec(gpu=gpu, gpus=8))
    ctx = make_context(ex, lay, efficiency_for(lay.gpu))
    return ctx, layer_ops(model, ex, lay, moe=False)


def test_cast_op_carries_qkv_and_do_bytes() -> None:
    _, fwd = _ctx_and_ops("B200", "tensorwise")
    bwd = backward_of(fwd)
    i = fwd.name.index(FP8_DPA_CASTS)
    j = bwd.name.index(FP8_DPA_CASTS + ".bwd")
    tok, hd = 8192.0, 128.0  # micro-batch 1, llama-3.1-8b: 32 heads, 8 KV heads
    assert fwd.arrays()["nbytes"][i] == pytest.approx(5.0 * tok * (32 + 16) * hd)
    assert bwd.arrays()["nbytes"][j] == pytest.approx(5.0 * tok * 32 * hd)
    _, plain = _ctx_and_ops("B200", None)
    assert FP8_DPA_CASTS not in plain.name


@pytest.mark.parametrize("gpu", ["H100", "B200", "GB300"])
def test_flash_kernels_run_at_the_measured_rate(gpu: str) -> None:
    ctx8, fwd = _ctx_and_ops(gpu, "delayed")
    ctx16, _ = _ctx_and_ops(gpu, None)
    f = np.array(fwd.kind) == FLASH
    keys = fwd.arrays()["k"][f]
    t8 = op_costs(fwd, ctx8).time[f]
    t16 = op_costs(fwd, ctx16).time[f]
    over = ctx8.eff.kernel_overhead_s
    ratio = (t16 - over) / (t8 - over)
    assert ratio == pytest.approx(fa.rate_over_bf16(get_gpu(gpu), keys, False), rel=1e-9)


# --- end to end -------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", ["H100", "B200", "GB200", "B300", "GB300"])
def test_a_row_stating_fp8_attention_predicts_faster(gpu: str) -> None:
    base = {"global_batch": 16, "seq_len": 8192, "precision": "fp8", "dp": 8}
    system = {"gpu": gpu, "gpus": 8}
    t16 = predict(make_job("llama-3.1-8b", base, system)).iteration_s
    t8 = predict(make_job("llama-3.1-8b", base | {"fp8_attention": "tensorwise"}, system))
    assert t8.iteration_s < t16
    assert not math.isclose(t8.iteration_s, t16, rel_tol=1e-4)


def test_a_published_row_with_fp8_dpa_is_faster_than_the_same_row_without() -> None:
    with open(RUNS / "mlperf_llama31_8b_runs.csv") as f:
        row = next(r for r in csv.DictReader(f) if r["row_id"] == "MLP51-NV-GB200-0008")
    without = dict(row)
    without["precision"] = (
        row["precision"]
        .replace("FP8_DPA=True", "FP8_DPA=0")
        .replace("config_common_fp8attn.sh", "no fp8attn config")
        .replace("attention in FP8", "attention")
    )
    assert fa.stated_fp8_attention(without["precision"]) is False
    assert validate_row(row).predicted_iter_s < validate_row(without).predicted_iter_s


@pytest.mark.parametrize(
    "bad",
    [
        {"precision": "bf16"},
        {"precision": "fp8", "flash_kernel": "fa2"},
        {"precision": "fp8", "attention": "unfused"},
    ],
)
def test_fp8_attention_needs_fp8_and_tes_cudnn_attention(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="fp8_attention"):
        ExecutionSpec(global_batch=8, seq_len=1024, fp8_attention="delayed", **bad)


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        (("FP8, BF16 attention vs. FP8 attention",), False),
        (("FP8; attention BF16 (compared with FP8 attention: 3% slower)",), False),
        (("FP8, BF16 attention rather than FP8 SDPA",), False),
        (("FP8 delayed scaling", None, "baseline; compared with FP8_DPA=1 runs"), None),
        (("FP8 attention vs. BF16 attention",), True),  # the run's side of the comparison
        (("FP8 (FP8_DPA=1, instead of BF16 attention)",), True),
        (("FP8, compared with BF16 attention runs",), None),
    ],
)
def test_the_reference_of_a_comparison_states_nothing(
    cells: tuple[str | None, ...], expected: bool | None
) -> None:
    """A mention that is what the run is compared with ("vs. FP8 attention", "compared with
    FP8_DPA=1 runs": statements.compared_at) is not the run's attention precision."""
    assert fa.stated_fp8_attention(*cells) is expected


@pytest.mark.parametrize("other", ['FP8_DPA="False"', "FP8_DPA='0'", "fp8_dpa: 'false'"])
def test_a_quoted_off_value_states_fp8_attention_off(other: str) -> None:
    assert fa.stated_fp8_attention("MXFP8", other) is False
    assert fa.stated_fp8_attention("MXFP8", other.replace("False", "True")
                                   .replace("'0'", "'1'").replace("false", "true")) is True  # fmt: skip
