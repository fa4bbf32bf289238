"""Fused-attention kernels before FlashAttention-2 (seer/flash_generation.py), checked against
the FlashAttention-2 paper's own end-to-end table — not against development rows."""

from __future__ import annotations

import pytest

from starfabric.astral.seer import flash_generation as fg
from starfabric.astral.seer.model import param_counts
from starfabric.astral.seer.predict import make_job, predict
from starfabric.astral.seer.validate import _framework

# Dao 2023 (arXiv:2307.08691) Table 1: training TFLOP/s per A100 80GB SXM4 (8 GPUs, one node)
# of GPT-style models, FlashAttention (1.x) and FlashAttention-2, FLOPs counted as
# 6·seqlen·params + 12·layers·hidden·seqlen² per sequence.
TABLE1 = {
    ("1.3B", 2048): (189.0, 196.0),
    ("1.3B", 8192): (170.0, 220.0),
    ("2.7B", 2048): (189.0, 205.0),
    ("2.7B", 8192): (175.0, 225.0),
}
# The runs' settings, from the paper's training code (Dao-AILab/flash-attention
# training/configs/experiment/pile/gpt3xl-flash*.yaml, gpt3-2.7B-flash-hdim128.yaml,
# gpt3-2.7B-flash-8k.yaml): GPT-2 blocks (GELU MLP 4h, LayerNorm, biases, learned positions,
# tied embeddings, dropout 0.1), vocabulary 50257 padded to a multiple of 8, bf16, ZeRO-1 DDP,
# no activation checkpointing, per-GPU batch 8 / 4 (1.3B at 2k / 8k) and 4 (2.7B), global batch
# 512 sequences at 2k and 128 at 8k; the 2.7B model with head dimension 128 (README).
SHAPES = {"1.3B": (24, 2048, 16), "2.7B": (32, 2560, 20)}
MICRO = {("1.3B", 2048): 8, ("1.3B", 8192): 4, ("2.7B", 2048): 4, ("2.7B", 8192): 4}


def _tflops(name: str, seq: int, kernel: str) -> float:
    layers, hidden, heads = SHAPES[name]
    model = {
        "name": f"gpt3-{name}", "layers": layers, "hidden": hidden, "ffn_hidden": 4 * hidden,
        "heads": heads, "kv_heads": heads, "head_dim": hidden // heads, "vocab": 50264,
        "max_seq_len": seq, "activation": "gelu", "norm": "layernorm", "linear_bias": True,
        "qkv_bias": True, "learned_pos_emb": True, "tied_embeddings": True,
        "attention_dropout": True,
    }  # fmt: skip
    batch = 512 if seq == 2048 else 128
    ex = {
        "global_batch": batch, "micro_batch": MICRO[(name, seq)], "seq_len": seq,
        "precision": "bf16", "zero": 1, "recompute": "none", "flash_kernel": kernel,
    }  # fmt: skip
    p = predict(make_job(model, ex, {"gpu": "A100-SXM-80GB", "gpus": 8}))
    n = param_counts(p.job.model).total
    flops = batch * (6.0 * seq * n + 12.0 * layers * hidden * seq**2)
    return flops / (p.iteration_s * 8) / 1e12


@pytest.mark.parametrize(("name", "seq"), list(TABLE1))
def test_fa1_and_fa2_columns_of_the_fa2_paper_table1(name: str, seq: int) -> None:
    fa1_pub, fa2_pub = TABLE1[(name, seq)]
    fa1, fa2 = _tflops(name, seq, "fa1"), _tflops(name, seq, "cudnn")
    # FA2 is the A100 reference rate; FA1 is it divided by the microbenchmark speedup (2x).
    assert fa2 == pytest.approx(fa2_pub, rel=0.05)
    assert fa1 == pytest.approx(fa1_pub, rel=0.06)
    # The end-to-end gain grows with the sequence as the paper's does (1.04-1.09 at 2k,
    # 1.29 at 8k), although the 2x was measured on the attention kernel alone.
    assert fa2 / fa1 == pytest.approx(fa2_pub / fa1_pub, abs=0.065)


def test_speedups_are_the_papers_section_4_1() -> None:
    assert fg.PRE_FA2_SPEEDUP["fa1"] == fg.PRE_FA2_SPEEDUP["xformers"] == (2.0, 2.0)
    fwd, bwd = fg.PRE_FA2_SPEEDUP["triton"]
    assert 1.3 <= fwd <= 1.5 and bwd == 2.0
    assert fg.kernel_rates("triton") == pytest.approx((1 / fwd, 0.5))
    assert fg.kernel_rates("cudnn") == fg.kernel_rates("fa2") == (1.0, 1.0)


@pytest.mark.parametrize(
    ("framework", "citation", "kernel"),
    [
        ("InternEvo (2023; FlashAttention v1.0.5, Apex)", "", "fa1"),
        ("trainer (flash-attn 1.0.4)", "", "fa1"),
        ("Meta xformers + custom backward (2022-23)", "arXiv:2302.13971 (LLaMA)", "xformers"),
        ("Megatron-LM fork (2023; FlashAttention)", "arXiv:2305.06161", "fa1"),
        ("Gigatron (Triton FlashAttention kernels; 2023-03)", "", "triton"),
        # Undated or dated after FlashAttention-2's release: nothing to say.
        ("Gigatron (Triton FlashAttention kernels; 2023)", "model card", None),
        ("XTuner 0.1.x (DeepSpeed + HF transformers, flash-attn)", "github.com/x", None),
        ("Megatron-LM fork (2023; FlashAttention)", "arXiv:2310.01234", None),
        ("trainer (FlashAttention-2, 2023-05)", "", None),
        ("Megatron-LM (2021)", "arXiv:2104.04473", None),
    ],
)
def test_the_kernel_is_read_from_the_framework_cell(
    framework: str, citation: str, kernel: str | None
) -> None:
    assert fg.pre_fa2_kernel(framework, citation) == kernel


def test_a_pre_2023_row_that_names_its_fused_kernel_runs_it() -> None:
    row = {
        "framework": "Meta xformers + custom backward (2022-23; model parallelism)",
        "citation": "arXiv:2302.13971 (LLaMA) section 2.4",
    }
    fw = _framework(row)
    assert fw["attention"] == "flash" and fw["flash_kernel"] == "xformers"
    assert fw["overlap_grad_reduce"] is False  # the rest of that era's defaults stay
    plain = _framework({"framework": "Megatron-LM (2021)", "citation": "arXiv:2104.04473"})
    assert plain["attention"] == "unfused" and "flash_kernel" not in plain


def test_an_older_kernel_slows_only_the_attention() -> None:
    layers, hidden, heads = SHAPES["1.3B"]
    model = {
        "layers": layers, "hidden": hidden, "ffn_hidden": 4 * hidden, "heads": heads,
        "kv_heads": heads, "head_dim": hidden // heads, "vocab": 50264, "max_seq_len": 8192,
    }  # fmt: skip
    ex = {"global_batch": 16, "micro_batch": 2, "seq_len": 8192, "recompute": "none"}
    system = {"gpu": "A100-SXM-80GB", "gpus": 8}
    new = predict(make_job(model, ex, system))
    old = predict(make_job(model, ex | {"flash_kernel": "triton"}, system))
    tri = predict(make_job(model, ex | {"flash_kernel": "fa1"}, system))
    assert new.iteration_s < old.iteration_s < tri.iteration_s
    assert old.breakdown["dp"] == pytest.approx(new.breakdown["dp"])
