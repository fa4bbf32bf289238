"""Activation bytes one transformer layer keeps for its backward pass (Korthikanti et al.,
MLSys 2023, per saved tensor), shared by the memory report, the offload model and search."""

from __future__ import annotations

from starfabric.astral.seer import fp8_activations, mla_activations, torchtitan_memory
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, Layout


def activation_bytes_per_layer(
    model: ModelSpec, ex: ExecutionSpec, lay: Layout, moe: bool
) -> float:
    """Bytes one layer keeps for backward for one micro-batch on one rank."""
    e = 2.0
    # Transformer Engine FP8 saves each GEMM's input for the backward pass as its FP8 cast
    # (1 byte), not the 16-bit tensor; norms, softmax statistics and residuals stay 16-bit.
    g = 1.0 if ex.precision == "fp8" else e
    h, t = model.hidden, lay.tp
    tok = ex.micro_batch * ex.seq_len / lay.cp
    sp_div = t if lay.sp else 1
    if ex.recompute == "full":
        return e * tok * h / sp_div
    heads = model.heads / t
    kvh = max(1.0, model.kv_heads / t)
    dq, dv = model.qk_head_dim, model.vo_head_dim
    if ex.torchtitan_op_sac and ex.recompute == "selective" and not moe and not model.is_mla:
        return (
            torchtitan_memory.op_sac_bytes_per_token(
                h, heads, kvh, dq, dv, model.ffn_hidden / t, t, sp_div
            )
            * tok
        )
    # Tensors outside TP regions (divided by t only under SP): 2 norm inputs (16-bit), the
    # QKV and fc1 inputs (GEMM inputs), and the 2 dropout masks (1 byte) when the model trains
    # with dropout: Korthikanti et al.'s 10sbh (section 4.1; Llama-style models train without
    # dropout, so 8sbh).
    masks = 2.0 if model.attention_dropout else 0.0
    mods = set(ex.recompute_modules) if ex.recompute == "selective" else set()
    # Norm recompute (Megatron-Core "layernorm", DeepSeek-V3 section 3.2.3) drops the norm
    # outputs that feed the QKV and fc1 GEMMs; the norm inputs are kept to re-run them.
    gemm_in = 0.0 if "layernorm" in mods else 2 * g
    outside = (2 * e + gemm_in + masks) * h / sp_div
    if model.is_mla and "mla_up_proj" in mods:
        # MLA up-projections recomputed: only the compressed latents stay; Q, K, V for the
        # attention backward are rebuilt from them.
        qkv = g * (model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim)
    else:
        qkv = e * (heads * dq + kvh * (dq + dv)) + mla_activations.up_gemm_input_bytes(model, g, t)
    # The latent norms' inputs stay saved either way (mla_activations).
    qkv += mla_activations.norm_input_bytes(model, e, t)
    proj_in = g * heads * dv
    per_token = outside + qkv + proj_in
    if ex.attention == "flash":
        per_token += 4.0 * heads  # softmax log-sum-exp statistics, fp32
        # Fused attention keeps its own 16-bit output for its backward; in 16-bit training
        # that is the projection's saved input (one tensor), under FP8 the projection saves
        # its FP8 cast beside it (Megatron-LM docs/discussions/deepseek-v3-gb200-
        # optimization @1d9edcf, section 2.2.2: "These two tensors do not share memory").
        per_token += fp8_activations.attention_output_copy(e, g, heads * dv, ex.fp8_16bit_copies)
    elif "core_attn" not in mods:
        per_token += (2 * e + (e + 1 if model.attention_dropout else 0)) * heads * ex.seq_len
    gated = model.activation == "swiglu"
    if ("moe" if moe else "mlp") in mods:
        # The whole MLP / MoE layer is recomputed: only its input (the norm output, counted
        # above unless norms are recomputed too) is kept.
        return per_token * tok
    if moe:
        k = model.moe_topk
        f = model.moe_ffn_hidden / lay.etp
        act_out = 0.0 if "moe_act" in mods else g * f  # the expert activation's output
        # The dispatcher routes the rank's sequence shard (tokens / tp under SP); expert TP
        # gathers etp shards, so a rank holds k * tok_sp * etp token copies on average.
        share = lay.etp / sp_div
        per_token += share * k * (g * h + e * f * (2 if gated else 1) + act_out)
        if ex.moe_unpermute_keeps_output:
            # Megatron-Core < 0.13 (mcore_release): the combine's k expert outputs, back on the
            # rank after the expert-TP reduce-scatter and the all-to-all, are multiplied by
            # the router probabilities in `unpermute` and kept, 16-bit, for their gradient.
            per_token += e * k * h / sp_div
        per_token += 4.0 * model.moe_experts / sp_div
        # The router's gating GEMM runs outside FP8 and saves its 16-bit input (the norm
        # output), beside the FP8 casts the expert GEMMs save.
        per_token += fp8_activations.router_input_copy(e, g, h / sp_div, ex.fp8_16bit_copies)
        if model.moe_shared_experts:
            fs = model.moe_ffn_hidden * model.moe_shared_experts / t
            per_token += e * fs * (2 if gated else 1) + g * fs
    else:
        f = model.ffn_hidden / t
        per_token += e * f * (2 if gated else 1) + g * f
    return per_token * tok
