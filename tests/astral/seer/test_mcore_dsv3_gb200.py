"""Megatron-Core's DeepSeek-V3 on 256 GB200 (development set 2, source MCORE_DSV3_GB200): the
rows read as their source states them, and the reader turns Megatron's printed TFLOP/s into
time with the run's own formula (Megatron-LM `num_floating_point_operations`, MLA branch).

Source: NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization/
deepseek-v3-gb200-optimization.md @1d9edcf and deepseek-v3-gb200-reproduce-guide.md @32ea0af."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer.model import ModelSpec, load_model
from starfabric.astral.seer.ops import megatron_core_transformer_flops, megatron_model_flops
from starfabric.astral.seer.validate import (
    published_iteration_s,
    read_rows,
    recompute_modules,
    row_setup,
    validate_row,
)

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
LADDER = {  # row -> section 3's TFLOPS/GPU
    "MCGB-L00": 494.46,
    "MCGB-L01": 529.55,
    "MCGB-L02": 540.00,
    "MCGB-L03": 566.07,
    "MCGB-L04": 610.71,
    "MCGB-L12": 970.01,
}


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in read_rows(DEV2) if r["source_id"] == "MCORE_DSV3_GB200"}


def _launch_script_flops_per_token(seq: int = 4096) -> float:
    """Megatron-LM `transformer_flops` (effebd81) written out for the reproduce guide's flags:
    --num-layers 61, --hidden-size 7168, --ffn-hidden-size 18432, --num-attention-heads 128,
    --q-lora-rank 1536, --kv-lora-rank 512, --qk-head-dim 128, --qk-pos-emb-head-dim 64,
    --v-head-dim 128, --moe-layer-freq ([0]*3+[1]*58), --moe-ffn-hidden-size 2048,
    --moe-shared-expert-intermediate-size 2048, --moe-router-topk 8, --swiglu, padded vocab
    129280 (DeepSeek-V3 tokenizer, divisible by 3232), no MTP."""
    h, heads, layers = 7168, 128, 61
    q_term = 1536 * (h + heads * (128 + 64) + 1)
    attn = (
        3
        * 2
        * (
            q_term
            + 512 * (h + heads * (128 + 128) + 1)
            + h * 64
            + heads * 128 * h
            + seq * heads * (128 + 64) / 2
            + seq * heads * 128 / 2
        )
    )
    mlp = (
        12
        * layers
        * h
        * (18432 * 1.5 * 3 / layers + 2048 * 8 * 1.5 * 58 / layers + 2048 * 1.5 * 58 / layers)
    )
    return mlp + attn * layers + 6 * h * 129280


def test_rows_read_with_the_stated_settings(rows) -> None:
    assert set(rows) == set(LADDER)
    for rid, r in rows.items():
        s = row_setup(r)
        ex, opts = s.execution, s.options
        assert [o[0] for o in opts] == [{"tp": 1, "pp": 8, "cp": 1, "ep": 32}]
        assert s.model.is_mla and s.model.mtp_layers == 0  # "MTP disabled"
        assert ex["pipeline_layers"] == [1] + [2] * 30 + [0]  # Et|(tt|)*30L
        assert ex["precision"] == "fp8" and ex["flash_kernel"] == "cudnn"
        assert opts[0][1]["optimizer_moments"] == ["bf16"]
        graphs = rid == "MCGB-L12"  # "CUDA graphs off" before; the launch script's scope
        assert ex["cuda_graphs"] is graphs, rid
        dispatcher = "alltoall" if rid in ("MCGB-L00", "MCGB-L01", "MCGB-L02") else "deepep"
        assert opts[0][1]["moe_dispatcher"] == [dispatcher], rid
        up_proj = rid in ("MCGB-L00", "MCGB-L01", "MCGB-L02", "MCGB-L03")
        mods = {"mlp", "mla_up_proj"} if up_proj else {"mlp", "moe_act"}
        assert set(opts[0][1]["recompute_modules"][0]) == mods, rid
    assert row_setup(rows["MCGB-L12"]).execution["moe_load_balance"] == "forced"
    assert row_setup(rows["MCGB-L00"]).execution.get("moe_load_balance") is None


def test_derived_iteration_time_is_megatron_flops_over_published_tflops(rows) -> None:
    tokens = 2048 * 4096
    flops = _launch_script_flops_per_token() * tokens
    for rid, tf in LADDER.items():
        r = rows[rid]
        expected = flops / (tf * 1e12 * 256)
        got = published_iteration_s(r, row_setup(r).model)
        assert got == pytest.approx(expected, rel=1e-9), rid
    # the baseline: 16.56 s per 2,048 x 4,096 tokens; the final state 8.44 s
    assert published_iteration_s(rows["MCGB-L00"], row_setup(rows["MCGB-L00"]).model) == (
        pytest.approx(16.555, abs=1e-3)
    )


def test_new_rows_are_predicted(rows) -> None:
    for rid in ("MCGB-L00", "MCGB-L12"):
        res = validate_row(rows[rid])
        assert res.published_tflops == pytest.approx(LADDER[rid])
        assert res.predicted_iter_s > 0


def test_megatron_mla_flops_against_the_bundled_config() -> None:
    m = load_model("deepseek-v3").model_copy(update={"mtp_layers": 0})
    got = megatron_model_flops(m, 4096.0, 4096, causal=True) / 4096.0
    assert got == pytest.approx(_launch_script_flops_per_token(), rel=1e-12)
    # Megatron's MTP terms: one more layer of the last kind, its norms + projection, logits
    one = load_model("deepseek-v3").model_copy(update={"mtp_layers": 1})
    h = 7168
    extra = megatron_core_transformer_flops(one, 1.0, 4096) - megatron_core_transformer_flops(
        m, 1.0, 4096
    )
    moe_layer = 12 * h * 2048 * 9 * 1.5 + 3 * 2 * (
        1536 * (h + 128 * 192 + 1) + 512 * (h + 128 * 256 + 1) + h * 64 + 128 * 128 * h
        + 4096 * 128 * 192 / 2 + 4096 * 128 * 128 / 2
    )  # fmt: skip
    assert extra == pytest.approx(moe_layer + 6 * (3 * h + 2 * h * h) + 6 * h * 129280, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(2, 96),
    hidden=st.sampled_from([1024, 4096, 8192]),
    heads=st.sampled_from([8, 32, 64]),
    kv=st.sampled_from([1, 8]),
    seq=st.sampled_from([2048, 8192]),
    moe=st.booleans(),
)
def test_gqa_without_mtp_is_the_causal_formula_unchanged(layers, hidden, heads, kv, seq, moe):
    kw = dict(moe_experts=64, moe_topk=4, moe_shared_experts=1, moe_ffn_hidden=512,
              moe_dense_layers=1) if moe else {}  # fmt: skip
    m = ModelSpec(name="x", layers=layers, hidden=hidden, ffn_hidden=4 * hidden, heads=heads,
                  kv_heads=kv, head_dim=hidden // heads, vocab=32000, max_seq_len=seq,
                  activation="swiglu", **kw)  # fmt: skip
    closed = megatron_model_flops(m, 1.0, seq, causal=True)  # the pre-MLA closed form
    assert megatron_core_transformer_flops(m, 1.0, seq) == pytest.approx(closed, rel=1e-12)


def test_recompute_module_spellings() -> None:
    assert recompute_modules("selective (--recompute-modules mlp up_proj: ...)") == (
        "mlp",
        "mla_up_proj",
    )
    assert recompute_modules("--recompute-modules moe_act mlp") == ("moe_act", "mlp")


def test_cuda_graphs_negated_and_sdpa_in_a_megatron_cell(rows) -> None:
    base = rows["MCGB-L04"]  # its framework cell says "SDPA output" and "CUDA graphs off"
    ex = row_setup(base).execution
    assert ex["cuda_graphs"] is False and ex["flash_kernel"] == "cudnn"
    on = {**base, "framework": base["framework"].replace("CUDA graphs off", "CUDA graphs")}
    assert row_setup(on).execution["cuda_graphs"] is True
    no = {**base, "framework": base["framework"].replace("CUDA graphs off", "no CUDA graphs")}
    assert row_setup(no).execution["cuda_graphs"] is False
