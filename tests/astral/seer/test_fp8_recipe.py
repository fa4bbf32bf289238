"""FP8 recipes are not one rate (seer/fp8_recipe.py): the GEMM kernel rate and the cast bytes
per recipe, re-derived from Transformer Engine's GEMM profiling guide (the same layer timed
per recipe on one H200 NVL and one B300) and checked against an end-to-end table that is in no
development set (torchao's MXFP8 vs float8 on 8 B200)."""

import csv
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import make_job, predict, search
from starfabric.astral.seer.cost import FP8_CAST_BYTES, CostContext, make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fp8_recipe import (
    BLOCKWISE_HOPPER_GEMM_RATE,
    MXFP8_BLACKWELL_GEMM_RATE,
    RECIPES,
    cast_factor,
    gemm_rate,
    is_mxfp8,
    native_mx,
    quant_bytes,
    row_recipe,
    stated_recipe,
)
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.ops import OpTable
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout
from starfabric.astral.seer.validate import row_setup
from starfabric.errors import ConfigError

DATA = Path(__file__).resolve().parents[2] / "data" / "fp8_recipes"
RUNS = Path(__file__).resolve().parents[2] / "data" / "published_runs"


def _te() -> dict[tuple[str, str, str], float]:
    """(gpu, mode, recipe) -> per-layer GEMM ms of the guide."""
    with open(DATA / "te_gemm_profiling.csv") as f:
        return {
            (r["gpu"], r["mode"], r["recipe"]): float(r["per_layer_ms"]) for r in csv.DictReader(f)
        }


H200, B300 = "H200 NVL", "B300 SXM6 AC"


def _per_byte_ms(t: dict[tuple[str, str, str], float], gpu: str, hopper_gpu: str) -> float:
    """Quantization ms per byte/element of one run: current scaling's autocast time less its
    pre-quantized kernel, over current scaling's bytes on that GPU."""
    q = t[(gpu, "autocast", "tensorwise")] - t[(gpu, "prequantized", "tensorwise")]
    return q / quant_bytes("tensorwise", get_gpu(hopper_gpu))


def test_blockwise_hopper_kernel_rate_is_rederived_from_the_guide() -> None:
    t = _te()
    per_byte = _per_byte_ms(t, H200, "H200")
    kernel_block = t[(H200, "autocast", "blockwise")] - per_byte * quant_bytes(
        "blockwise", get_gpu("H200")
    )
    rate = t[(H200, "prequantized", "tensorwise")] / kernel_block
    assert rate == pytest.approx(BLOCKWISE_HOPPER_GEMM_RATE, abs=0.002)
    # the outside check (FBGEMM PR #2546, H100, 2024 kernels): block-only below row-only there too
    with open(DATA / "fbgemm_h100_row_block.csv") as f:
        fb = [float(r["block_gemm_only_tflops"]) / float(r["row_gemm_only_tflops"])
              for r in csv.DictReader(f)]  # fmt: skip
    assert all(0.70 < r < BLOCKWISE_HOPPER_GEMM_RATE for r in fb)


def test_mxfp8_blackwell_kernel_rate_is_the_guides_prequantized_ratio() -> None:
    t = _te()
    rate = t[(B300, "prequantized", "tensorwise")] / t[(B300, "prequantized", "mxfp8")]
    assert rate == pytest.approx(MXFP8_BLACKWELL_GEMM_RATE, abs=0.001)


def test_byte_model_matches_the_measured_quantization_times() -> None:
    """Quantization time = autocast - pre-quantized kernel (the tensor-scaled kernel is the
    same cuBLAS GEMM for delayed and current scaling)."""
    t = _te()
    kernel_h = t[(H200, "prequantized", "tensorwise")]
    q_cur_h = t[(H200, "autocast", "tensorwise")] - kernel_h
    q_del_h = t[(H200, "autocast", "delayed")] - kernel_h
    h200 = get_gpu("H200")
    model = quant_bytes("tensorwise", h200) / quant_bytes("delayed", h200)  # 6 / 4
    assert q_cur_h / q_del_h == pytest.approx(model, rel=0.08)  # measured 1.596
    q_cur_b = t[(B300, "autocast", "tensorwise")] - t[(B300, "prequantized", "tensorwise")]
    q_mx_b = t[(B300, "autocast", "mxfp8")] - t[(B300, "prequantized", "mxfp8")]
    b300 = get_gpu("B300")
    model_b = quant_bytes("mxfp8", b300) / quant_bytes("tensorwise", b300)  # 4.0625 / 5
    assert q_mx_b / q_cur_b == pytest.approx(model_b, rel=0.06)  # measured 0.781


@pytest.mark.parametrize(
    ("gpu", "catalog", "recipe"), [(H200, "H200", "delayed"), (B300, "B300", "delayed"),
                                   (B300, "B300", "mxfp8")],
)  # fmt: skip
def test_kernel_plus_bytes_reproduces_autocast_totals_not_used_to_fit(
    gpu: str, catalog: str, recipe: str
) -> None:
    t = _te()
    g = get_gpu(catalog)
    kernel = t[(gpu, "prequantized", "tensorwise")] / gemm_rate(recipe, g)
    total = kernel + _per_byte_ms(t, gpu, catalog) * quant_bytes(recipe, g)
    measured = [t[(gpu, m, recipe)] for m in ("autocast", "prequantized") if (gpu, m, recipe) in t]
    assert min(abs(total / x - 1) for x in measured) < 0.02


def test_cells_state_the_recipe_and_a_plain_fp8_cell_states_none() -> None:
    cells = {}
    for name in ("development_runs.csv", "development_runs_2.csv"):
        with open(RUNS / name) as f:
            cells.update({r["row_id"]: r["precision"] for r in csv.DictReader(f)})
    assert stated_recipe(cells["DSV3-01"]) == "blockwise"  # 1x128 act / 128x128 weight
    assert stated_recipe(cells["NEMO2407-01"]) is None  # "FP8 (Transformer Engine)": delayed ref
    assert stated_recipe(cells["TT24-T2-01"]) == "torchao_tensorwise"
    assert stated_recipe(cells["TTDSV3-01"]) == "mxfp8"
    assert stated_recipe("NVFP4 (E2M1, 16-value blocks)") is None  # FP4 rows: FP8 rate as before
    assert row_recipe("FP8 hybrid", "Megatron-Core, --fp8-recipe blockwise") == "blockwise"
    assert row_recipe("FP8 hybrid", "no recipe named") is None


@pytest.mark.parametrize(
    ("cell", "recipe"),
    [
        # A negated recipe states nothing; the one the cell affirms wins.
        ("FP8 current scaling (not delayed)", "tensorwise"),
        ("FP8 (no delayed scaling; current scaling)", "tensorwise"),
        ("FP8 blockwise, not MXFP8", "blockwise"),
        ("BF16 elsewhere; no FP4; FP8 1x128 / 128x128 blockwise", "blockwise"),
        ("FP8 E4M3, 1×128 tiles and 128×128 blocks (DeepSeek-V3 §3.3)", "blockwise"),
        # torchao named after the scaling is still torchao's dynamic scaling.
        ("FP8 tensorwise (torchao)", "torchao_tensorwise"),
        ("FP8 per-tensor dynamic scaling (torchao)", "torchao_tensorwise"),
        ("torchao float8 rowwise (dynamic scaling)", None),  # rowwise: not modelled
        # Transformer Engine's recipe class names (core_v0.17.1 fp8_utils.py).
        ("FP8 (TE DelayedScaling)", "delayed"),
        ("FP8 (TE Float8CurrentScaling)", "tensorwise"),
        ("FP8 (TE Float8BlockScaling)", "blockwise"),
        ("FP8 (TE MXFP8BlockScaling)", "mxfp8"),
        # Megatron-Bridge's own names (scripts/performance --compute_dtype, mixed_precision.py).
        ("FP8-CS", "tensorwise"),
        ("fp8_mx", "mxfp8"),
        ("FP8-SC (subchannel)", "blockwise"),
        ("fp8_ds", "delayed"),
        # ... bracketed as a table may abbreviate them (read as no recipe before).
        ("FP8 (MX)", "mxfp8"),
        ("FP8 (CS)", "tensorwise"),
        ("FP8 ( SC )", "blockwise"),
        ("FP8 (DS)", "delayed"),
        ("FP8 (MXT)", None),
        ("bf16_with_fp8_current_scaling_mixed", "tensorwise"),
        ("bf16_with_mxfp8_mixed", "mxfp8"),
        ("bf16_with_fp8_subchannel_scaling_mixed", "blockwise"),
        ("bf16_with_fp8_delayed_scaling_mixed", "delayed"),
        ("bf16_with_nvfp4_mixed", None),
        ("FP8 scaling unstated", None),
        # "delayed" that is not the scaling recipe.
        ("FP8 hybrid with delayed wgrad", None),
    ],
)
def test_the_precision_reader_reads_negations_order_and_te_class_names(
    cell: str, recipe: str | None
) -> None:
    assert stated_recipe(cell) == recipe


def test_a_negated_megatron_flag_is_not_the_recipe() -> None:
    notes = "not --fp8-recipe blockwise (slower on H100); ran --fp8-recipe tensorwise"
    assert row_recipe("FP8 hybrid", notes) == "tensorwise"
    assert row_recipe("FP8 hybrid", "without --fp8-recipe mxfp8") is None


def test_a_row_that_states_blockwise_reads_it() -> None:
    with open(RUNS / "development_runs.csv") as f:
        row = next(r for r in csv.DictReader(f) if r["row_id"] == "DSV3-01")
    setup = row_setup(row)
    assert setup.execution["fp8_recipe"] == "blockwise"


def _ctx(recipe: str | None, gpu: str = "H100") -> CostContext:
    ex = ExecutionSpec(global_batch=64, seq_len=4096, precision="fp8", dp=8, fp8_recipe=recipe)
    lay = resolve_layout(load_model("llama-3.1-8b"), ex, SystemSpec(gpu=gpu, gpus=8))
    return make_context(ex, lay, efficiency_for(lay.gpu))


def test_blockwise_gemm_is_timed_at_the_blockwise_rate_and_cast() -> None:
    ref, blk = _ctx(None), _ctx("blockwise")
    assert blk.gemm_fraction == pytest.approx(ref.gemm_fraction * BLOCKWISE_HOPPER_GEMM_RATE)
    assert blk.fp8_cast_bytes == pytest.approx(FP8_CAST_BYTES * 4.0625 / 4.0)
    # a large compute-bound FP8 GEMM (TE guide's MLP down, M = 15,872): kernel time / 0.818
    t = OpTable()
    t.gemm("mlp.fc2", m=15872, n=4096, k=16384)
    tr, tb = op_costs(t, ref).time[0], op_costs(t, blk).time[0]
    assert 1.0 / BLOCKWISE_HOPPER_GEMM_RATE * 0.97 < tb / tr < 1.0 / BLOCKWISE_HOPPER_GEMM_RATE


def test_no_recipe_keeps_todays_timing() -> None:
    def it(recipe: str | None) -> float:
        ex = dict(global_batch=64, seq_len=4096, precision="fp8", tp=2, dp=8, micro_batch=1)
        if recipe:
            ex["fp8_recipe"] = recipe
        return predict(make_job("llama-3.1-8b", ex, dict(gpu="H100", gpus=16))).iteration_s

    base = it(None)
    assert it("delayed") == base and it("torchao_tensorwise") == base
    assert it("tensorwise") > base and it("blockwise") > it("tensorwise")


def test_torchao_b200_mxfp8_over_tensorwise_end_to_end() -> None:
    """torchao's one-node B200 table (Llama3-8B, seq 8192, FSDP2, per-op SAC): MXFP8 runs
    10417.0 / 9969.0 = 1.045x the float8 tensorwise step; Seer lands within 2 points."""
    with open(DATA / "torchao_b200_e2e.csv") as f:
        tps = {r["scaling"]: float(r["median_tokens_per_s"]) for r in csv.DictReader(f)}
    measured = tps["float8 tensorwise (f8 all-gather)"] / tps["mxfp8_cublas"]

    def it(recipe: str) -> float:
        ex = dict(global_batch=8, seq_len=8192, precision="fp8", dp=8, micro_batch=1, zero=3,
                  recompute="selective", fp8_recipe=recipe)  # fmt: skip
        return predict(make_job("llama-3-8b", ex, dict(gpu="B200", gpus=8))).iteration_s

    seer = it("mxfp8") / it("torchao_tensorwise")
    assert measured == pytest.approx(1.045, abs=0.001)
    assert seer == pytest.approx(measured, abs=0.02)


def test_megatron_flag_sets_the_recipe_and_mxfp8_needs_blackwell() -> None:
    cmd = """torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 1 \\
      --num-layers 4 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 \\
      --seq-length 4096 --micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 \\
      --fp8-format hybrid {recipe}"""
    spec = parse_megatron_command(cmd.format(recipe="--fp8-recipe blockwise"))
    assert spec["execution"]["fp8_recipe"] == "blockwise"
    spec = parse_megatron_command(cmd.format(recipe=""))
    assert spec["execution"]["fp8_recipe"] == "delayed"  # Megatron's default
    spec = parse_megatron_command(cmd.format(recipe="--fp8-recipe mxfp8"))
    with pytest.raises(ConfigError, match="MXFP8 needs Blackwell"):
        predict(make_job(spec["model"], spec["execution"], {"gpu": "H100", "gpus": 8}))
    assert predict(make_job(spec["model"], spec["execution"], {"gpu": "B200", "gpus": 8}))


def test_a_recipe_without_fp8_is_refused() -> None:
    with pytest.raises(ValueError, match="fp8_recipe"):
        ExecutionSpec(global_batch=8, seq_len=2048, precision="bf16", fp8_recipe="blockwise")


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 65536), n=st.integers(1, 32768), k=st.integers(1, 32768),
    recipe=st.sampled_from(RECIPES),
    gpu=st.sampled_from(["H100", "H800", "B200", "GB300"]),
)  # fmt: skip
def test_a_recipe_never_speeds_a_gemm_and_is_bounded_by_its_factors(
    m: int, n: int, k: int, recipe: str, gpu: str
) -> None:
    """delayed <= recipe <= delayed x max(1 / kernel rate, cast factor), every shape."""
    g = get_gpu(gpu)
    assume(recipe != "mxfp8" or native_mx(g))  # MXFP8 on Hopper is refused (test above)
    assert 0 < gemm_rate(recipe, g) <= 1 and cast_factor(recipe, g) >= 1
    assert quant_bytes("tensorwise", g) > quant_bytes("delayed", g)
    assert native_mx(g) == gpu.startswith(("B", "GB"))
    ref, rec = _ctx(None, gpu), _ctx(recipe, gpu)
    t = OpTable()
    t.gemm("mlp.fc1", m=m, n=n, k=k)
    tr, tx = op_costs(t, ref).time[0], op_costs(t, rec).time[0]
    bound = max(1.0 / gemm_rate(recipe, g), cast_factor(recipe, g))
    assert tr * (1 - 1e-12) <= tx <= tr * bound * (1 + 1e-12)


def test_search_prices_the_stack_recipe_as_predict_does() -> None:
    m, sy = load_model("llama-3.1-8b"), SystemSpec(gpu="B200", gpus=16)
    st = ExecutionSpec(global_batch=64, seq_len=4096, precision="fp8", fp8_recipe="mxfp8")
    r = search(m, sy, 64, 4096, precision="fp8", stack=st)
    plain = search(m, sy, 64, 4096, precision="fp8")
    order = np.argsort(np.where(r.feasible, r.iteration_s, np.inf))[:5]
    for i in order:
        ex = r.execution(int(i))
        assert ex["fp8_recipe"] == "mxfp8"
        assert predict(make_job(m, ex, sy)).iteration_s == pytest.approx(r.iteration_s[i], rel=0.01)
    assert np.nanmin(np.where(r.feasible, r.iteration_s, np.inf)) > np.nanmin(
        np.where(plain.feasible, plain.iteration_s, np.inf)
    )


def test_te_mxfp8_stage_needs_an_mxfp8_run_on_blackwell() -> None:
    """TE's MXFP8 expert launches (seer/te_mxfp8_host.py) exist only under an MX recipe on MX
    tensor cores: a BF16 or tensor-scaled run, or a Hopper GPU, that names the stage is refused
    with the fix instead of being silently ignored (BF16) or charged MXFP8 launches (H100)."""
    base = dict(global_batch=64, seq_len=4096, micro_batch=1, tp=1, ep=8)
    with pytest.raises(ValueError, match="te_mxfp8_stage"):
        ExecutionSpec(**base, precision="bf16", te_mxfp8_stage="bulk_alloc")
    with pytest.raises(ValueError, match="te_mxfp8_stage"):
        ExecutionSpec(**base, precision="fp8", fp8_recipe="delayed", te_mxfp8_stage="bulk_alloc")
    ex = {**base, "precision": "fp8", "te_mxfp8_stage": "bulk_alloc", "host_launches": True}
    with pytest.raises(ConfigError, match="te_mxfp8_stage 'bulk_alloc' on H100"):
        predict(make_job("mixtral-8x7b-v0.1", ex, {"gpu": "H100", "gpus": 64}))
    assert predict(
        make_job("mixtral-8x7b-v0.1", {**ex, "fp8_recipe": "mxfp8"}, {"gpu": "B200", "gpus": 64})
    )


def test_a_negated_mxfp8_mention_sets_no_te_mxfp8_path() -> None:
    """A Megatron-Core row whose precision cell rules MXFP8 out ("FP8 tensorwise, not MXFP8")
    runs tensor-scaled FP8: no MXFP8 expert launches, and the row is still predicted."""
    with open(RUNS / "development_runs_2.csv") as f:
        row = next(r for r in csv.DictReader(f) if r["row_id"] == "MCGB-L12")
    row = {**row, "precision": "FP8 tensorwise (current scaling), not MXFP8"}
    st = row_setup(row)
    assert st.execution["fp8_recipe"] == "tensorwise"
    assert st.execution.get("te_mxfp8_stage") is None
    # The row's open settings (here the dispatcher, deepep: HybridEP is its backend) come from
    # its options, as validate tries them.
    fixed = {k: v for k, v in st.execution.items() if not k.startswith("_")}
    ExecutionSpec(**{**fixed, **{k: v[0] for k, v in st.options[0][1].items()}})


@pytest.mark.parametrize(
    ("cell", "recipe"),
    [
        ("FP8 current scaling; FP8_DPA=1, NVTE_DPA_FP8_RECIPE=DelayedScaling", "tensorwise"),
        ("FP8 current scaling (NVTE_DPA_FP8_RECIPE: 'DelayedScaling')", "tensorwise"),
        (
            "FP8 delayed scaling; attention in FP8 (NVTE_DPA_FP8_RECIPE=MXFP8BlockScaling)",
            "delayed",
        ),
        ("FP8; FP8_DPA=1; NVTE_DPA_FP8_RECIPE Float8CurrentScaling", None),
        ("FP8 tensorwise; NVTE_DPA_FP8_RECIPE=F16", "tensorwise"),
    ],
)
def test_attention_recipe_override_is_not_the_gemm_recipe(cell: str, recipe: str | None) -> None:
    """TE's NVTE_DPA_FP8_RECIPE names the FP8 attention's recipe (fp8_attention.row_dpa_recipe
    reads it), not the GEMMs': its value in a precision cell ("DelayedScaling",
    "MXFP8BlockScaling") is not read as the row's GEMM recipe."""
    assert stated_recipe(cell) == recipe
    assert is_mxfp8(cell) is (recipe == "mxfp8")
