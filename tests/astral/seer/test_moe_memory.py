"""Seer's per-GPU memory for DeepSeek-V3 on Megatron-Core against published figures (issue 32).

Published memory anatomy: "Scalable Training of Mixture-of-Experts Models with Megatron
Core" (NVIDIA, arXiv 2603.07685, section "Breaking the Memory Wall"), DeepSeek-V3 on 256
GPUs with PP4 x VPP4 x EP64 (TP1, so DP 64 and expert-DP 1), 4K sequences, micro-batch 1:
weights and gradients 36.4 GB, main weights and optimizer states 32.1 GB, activations
131.0 GB, total 199.5 GB per GPU; BF16 moments save 10-12 GB of the 32.1; FP8 activations
save roughly 16 GB; recomputing LayerNorm saves 8.2 GB, MLA up-projection 30.4 GB, the
SwiGLU activation 3.8 GB. The paper gives no layout; Seer uses its default uneven split of
61 layers over 16 virtual stages, whose stage 1 holds 15 MoE layers and no embedding or
dense layer (the only composition that gives 36.4 GB of 6-byte weights+gradients).

Bands: static memory 5% (exact byte counts of the same tensors), total and activations 10%
(the paper's layout and allocator are not stated), the FP8 and recompute savings 25% (a
difference of two estimates). The SwiGLU saving matches only with FP8 inputs (Seer 4.4 GB;
8.8 GB in BF16): the paper does not say which precision its table used.
"""

from typing import Any

import pytest

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.activations import activation_bytes_per_layer
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.optimizer_state import (
    offers_bf16_moments,
    optimizer_bytes,
    stated_bf16_moments,
)
from starfabric.astral.seer.parallel import uneven_pipeline_layers
from starfabric.astral.seer.predict import Prediction
from starfabric.astral.seer.schedule import stage_params
from starfabric.astral.seer.validate import selective_module_sets

GB = 1e9
DSV3 = load_model("deepseek-v3")
EX: dict[str, Any] = {
    "global_batch": 1024, "micro_batch": 1, "seq_len": 4096, "precision": "bf16", "tp": 1,
    "pp": 4, "vpp": 4, "ep": 64, "pipeline_layers": uneven_pipeline_layers(61, 16),
    "recompute": "none",
}  # fmt: skip
SYS = {"gpu": "GB200", "gpus": 256}


def _pred(**kw: Any) -> Prediction:
    return predict(make_job(DSV3, {**EX, **kw}, SYS))


def _stage0_moe_acts(**kw: Any) -> float:
    """Activation bytes of stage 0's in-flight MoE layers (fixed stage, so that a saving is
    not a move of the peak to another stage)."""
    p = _pred(**kw)
    per = activation_bytes_per_layer(DSV3, p.job.execution, p.layout, moe=True)
    return float(p.timeline.peak_inflight_layers[0]) * per


def test_static_memory_of_a_15_moe_layer_stage_matches_the_paper() -> None:
    p = _pred()
    sp = stage_params(DSV3, p.layout)[1]
    assert p.layout.stage_layers[1] == (3, 4, 4, 4) and p.layout.edp == 1
    params = sp.dense + sp.expert
    wg = (2.0 + 4.0) * params  # bf16 weights + fp32 main grads
    opt = optimizer_bytes("fp32") * (sp.dense / p.layout.dp + sp.expert / p.layout.edp)
    assert wg / GB == pytest.approx(36.4, rel=0.05)
    assert opt / GB == pytest.approx(32.1, rel=0.05)
    saved = (optimizer_bytes("fp32") - optimizer_bytes("bf16")) * (
        sp.dense / p.layout.dp + sp.expert / p.layout.edp
    )
    assert 10.0 * 0.95 <= saved / GB <= 12.0 * 1.05  # "on the order of 10-12 GB"


def test_peak_total_and_activations_match_the_paper() -> None:
    m = _pred().memory
    assert m.total / GB == pytest.approx(199.5, rel=0.10)
    assert m.activations / GB == pytest.approx(131.0, rel=0.10)


def test_bf16_moments_shrink_only_the_optimizer_share() -> None:
    a, b = _pred().memory, _pred(optimizer_moments="bf16").memory
    assert (a.weights, a.grads, a.activations) == (b.weights, b.grads, b.activations)
    assert b.optimizer == pytest.approx(a.optimizer * 8.0 / 12.0)


def test_fp8_activation_saving_matches_the_paper() -> None:
    whole = _pred().memory.activations - _pred(precision="fp8").memory.activations
    assert whole / GB == pytest.approx(16.0, rel=0.25)


@pytest.mark.parametrize(
    ("mods", "precision", "published_gb"),
    [(("layernorm",), "bf16", 8.2), (("mla_up_proj",), "bf16", 30.4), (("moe_act",), "fp8", 3.8)],
)
def test_recompute_savings_match_the_paper(
    mods: tuple[str, ...], precision: str, published_gb: float
) -> None:
    base = _stage0_moe_acts(precision=precision)
    sel = _stage0_moe_acts(precision=precision, recompute="selective", recompute_modules=mods)
    assert (base - sel) / GB == pytest.approx(published_gb, rel=0.25)


def test_mtp_stage_holds_its_own_embedding_copy_except_under_dualpipe() -> None:
    lay = _pred().layout
    emb = DSV3.vocab * DSV3.hidden
    with_copy, without = stage_params(DSV3, lay), stage_params(DSV3, lay, mtp_embedding=False)
    assert with_copy[-1].dense - without[-1].dense == pytest.approx(emb)
    assert [s.dense for s in with_copy[:-1]] == [s.dense for s in without[:-1]]


def test_published_modelzoo_configs_fit() -> None:
    """NVIDIA's DeepSeek-V3 recipes ran (Megatron-MoE-ModelZoo best_practice/DeepSeekV3/
    run.sh @c1ad0b5): 1,024 H100 TP2 PP8 VPP4 EP64 and 256 B200 TP1 PP8 VPP4 EP32, FP8,
    recompute mla_up_proj + mlp, MTP, layout Et|(tt|)*30mL, BF16 moments (readme)."""
    layout = (1, *([2] * 30), 0)
    common = {"micro_batch": 1, "seq_len": 4096, "precision": "fp8", "vpp": 4,
              "pipeline_layers": layout, "recompute": "selective",
              "recompute_modules": ("mla_up_proj", "mlp"), "optimizer_moments": "bf16"}  # fmt: skip
    h100 = {**common, "global_batch": 8192, "tp": 2, "pp": 8, "ep": 64}
    b200 = {**common, "global_batch": 2048, "tp": 1, "pp": 8, "ep": 32}
    assert not predict(make_job(DSV3, h100, {"gpu": "H100", "gpus": 1024})).memory.oom
    assert not predict(make_job(DSV3, b200, {"gpu": "B200", "gpus": 256})).memory.oom


@pytest.mark.parametrize(
    ("framework", "offered"),
    [
        ("Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1 (NeMo 26.04.01 image)", True),
        ("Megatron-Core 0.13.0", True),
        ("Megatron-Core 0.12.0", False),
        ("Megatron-Core v0.9 (2024; PyTorch 24.09 container, TE 1.11)", False),
        ("Megatron-Core 5D parallelism (2025)", False),
        ("NeMo 25.09 container", True),
        ("NeMo 24.07 container (NeMo 1.x/Megatron-Core)", False),
        ("TorchTitan (2025-10; PyTorch 2.9.0)", False),
    ],
)
def test_bf16_moments_offered_from_megatron_core_0_13(framework: str, offered: bool) -> None:
    assert offers_bf16_moments(framework) is offered


def test_stated_bf16_moments_are_read() -> None:
    assert stated_bf16_moments("--use-precision-aware-optimizer --exp-avg-dtype bf16")
    assert stated_bf16_moments("BF16 optimizer states")
    assert not stated_bf16_moments("BF16 mixed (FP32 master weights)")
    ex = parse_megatron_command(
        "pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
        "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
        "--global-batch-size 8 --use-distributed-optimizer --use-precision-aware-optimizer "
        "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --bf16"
    )["execution"]
    assert ex["optimizer_moments"] == "bf16"
    ex = parse_megatron_command(
        "pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
        "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
        "--global-batch-size 8 --use-precision-aware-optimizer --bf16"
    )["execution"]
    assert "optimizer_moments" not in ex  # the dtypes default to fp32


def test_recompute_candidates_include_nvidia_recipe_sets_before_full() -> None:
    sets = [mods for _, mods in selective_module_sets(DSV3)]
    assert ("layernorm", "moe_act", "mla_up_proj", "mlp") in sets
    assert sets[-1] == ("layernorm", "moe", "mla_up_proj", "mlp")
    mixtral = [mods for _, mods in selective_module_sets(load_model("mixtral-8x7b-v0.1"))]
    assert all("mlp" not in mods for mods in mixtral)  # no dense layers to recompute


def test_whole_moe_recompute_is_cheaper_than_full_and_saves_more_than_moe_act() -> None:
    kw = {"precision": "fp8", "recompute": "selective"}
    act = _pred(**kw, recompute_modules=("layernorm", "moe_act", "mla_up_proj", "mlp"))
    moe = _pred(**kw, recompute_modules=("layernorm", "moe", "mla_up_proj", "mlp"))
    full = _pred(precision="fp8", recompute="full")
    assert moe.memory.activations < act.memory.activations
    assert act.iteration_s < moe.iteration_s < full.iteration_s


def test_fp8_16bit_copies_are_the_attention_output_and_router_input() -> None:
    """Per token, TP1, an MoE layer: the 16-bit attention output (heads x v_head_dim) and
    the router's 16-bit input (hidden) are the only FP8 extras; DeepSeek's own stack
    (fp8_16bit_copies False) shares one copy (DeepSeek-V3 section 3.3.2)."""
    p = _pred(precision="fp8")
    te = activation_bytes_per_layer(DSV3, p.job.execution, p.layout, moe=True)
    shared_ex = p.job.execution.model_copy(update={"fp8_16bit_copies": False})
    shared = activation_bytes_per_layer(DSV3, shared_ex, p.layout, moe=True)
    per_token = 2.0 * (DSV3.heads * DSV3.vo_head_dim + DSV3.hidden)
    assert te - shared == pytest.approx(per_token * EX["seq_len"])
    bf16 = _pred().job.execution
    dense_bf16 = activation_bytes_per_layer(DSV3, bf16, p.layout, moe=True)
    off = bf16.model_copy(update={"fp8_16bit_copies": False})
    assert activation_bytes_per_layer(DSV3, off, p.layout, moe=True) == dense_bf16
