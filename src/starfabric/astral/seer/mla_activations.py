"""Tensors an MLA attention block saves for its backward besides the up-projected Q, K, V.

Multi-head latent attention (DeepSeek-V2/V3) projects the norm output down to a query latent
(`q_lora_rank`) and a KV latent (`kv_lora_rank`, plus the shared RoPE key), normalises each
latent and projects it up to the heads. Besides the up-projected Q, K and V the attention
core reads (counted in activations.py), the backward needs each latent norm's input and each
up-projection GEMM's input: per token q_down_out, q_norm_out, kv_compressed and kv_norm_out.
NVIDIA's memory estimator for DeepSeek-V3 on Megatron-Core lists them as saved ("cached by
q_norm", "cached by q_up", "cached by kv_norm", "cached by kv_up"; Megatron-MoE-ModelZoo
misc/tools/deepseek_mem_estimate.py @e865051), the norm inputs in 16-bit, the GEMM inputs in
the GEMM input precision, all divided by TP except the KV up-projection's input, which that
estimator keeps whole on every TP rank. Recomputing the up-projections (`mla_up_proj`) keeps
only the latents, which activations.py charges on its own.
"""

from __future__ import annotations

from starfabric.astral.seer.model import ModelSpec


def norm_input_bytes(model: ModelSpec, e: float, tp: int) -> float:
    """Bytes per token of the two latent norms' 16-bit inputs (q_down_out, kv_compressed),
    saved whether or not the up-projections are recomputed (`mla_up_proj` discards only the
    up-projections' outputs). 0 for a model without MLA."""
    if not model.is_mla:
        return 0.0
    return e * (model.q_lora_rank + model.kv_lora_rank) / tp


def up_gemm_input_bytes(model: ModelSpec, g: float, tp: int) -> float:
    """Bytes per token of the two up-projection GEMMs' saved inputs (q_norm_out divided by
    TP, kv_norm_out whole, as the estimator counts them) at the GEMM input precision `g`.
    0 for a model without MLA."""
    if not model.is_mla:
        return 0.0
    return g * model.q_lora_rank / tp + g * model.kv_lora_rank


__all__ = ["norm_input_bytes", "up_gemm_input_bytes"]
