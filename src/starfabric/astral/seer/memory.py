"""Memory per GPU: weights, gradients, optimizer states and activations, with an OOM verdict.

Activations follow Korthikanti et al. ("Reducing Activation Recomputation in Large Transformer
Models", MLSys 2023): 34·s·b·h + 5·a·s²·b bytes per GPT layer, divided by t under tensor +
sequence parallelism, with selective recompute dropping the attention-score terms and full
recompute keeping only each layer's input. The terms are derived per saved tensor, so GQA,
gated MLPs, MoE and flash attention change them the way they change the tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, Layout
from starfabric.astral.seer.schedule import StageParams, Timeline, stage_params
from starfabric.errors import InvariantError

RESERVED_BYTES = 3.0 * 2**30
"""CUDA context, NCCL buffers, cuBLAS workspaces and allocator fragmentation per GPU
(assumption)."""
WEIGHT_BYTES = 2.0
"""16-bit model weights."""
MASTER_OPTIMIZER_BYTES = 12.0
"""fp32 master weights + Adam first and second moments (Megatron mixed precision)."""


@dataclass(frozen=True)
class MemoryReport:
    """Bytes per GPU on the most loaded stage, and whether it fits in HBM."""

    weights: float
    grads: float
    optimizer: float
    activations: float
    reserved: float
    total: float
    capacity: float
    stage: int

    @property
    def oom(self) -> bool:
        """True when the job would not fit in GPU memory."""
        return self.total > self.capacity


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
        qkv = e * (heads * dq + kvh * (dq + dv))
    proj_in = g * heads * dv
    per_token = outside + qkv + proj_in
    if ex.attention == "flash":
        per_token += 4.0 * heads  # softmax log-sum-exp statistics, fp32
    elif "core_attn" not in mods:
        per_token += (2 * e + (e + 1 if model.attention_dropout else 0)) * heads * ex.seq_len
    gated = model.activation == "swiglu"
    if moe:
        k = model.moe_topk
        f = model.moe_ffn_hidden / lay.etp
        act_out = 0.0 if "moe_act" in mods else g * f  # the expert activation's output
        per_token += k * (g * h + e * f * (2 if gated else 1) + act_out)
        per_token += 4.0 * model.moe_experts / sp_div
        if model.moe_shared_experts:
            fs = model.moe_ffn_hidden * model.moe_shared_experts / t
            per_token += e * fs * (2 if gated else 1) + g * fs
    else:
        f = model.ffn_hidden / t
        per_token += e * f * (2 if gated else 1) + g * f
    return per_token * tok


def memory_report(model: ModelSpec, ex: ExecutionSpec, lay: Layout, tl: Timeline) -> MemoryReport:
    """Peak memory per GPU over the PP stages (in-flight micro-batches from the schedule)."""
    params = stage_params(model, lay)
    capacity = lay.gpu.hbm_gib * 2**30
    dp_shard = lay.dp * lay.cp
    grad_b = (
        4.0
        if (ex.grad_reduce_fp32 if ex.grad_reduce_fp32 is not None else ex.precision != "fp16")
        else 2.0
    )
    best: MemoryReport | None = None
    per_dense = activation_bytes_per_layer(model, ex, lay, moe=False)
    per_moe = activation_bytes_per_layer(model, ex, lay, moe=True) if model.is_moe else per_dense
    moe_frac = model.moe_layers / model.layers
    per_layer = (1 - moe_frac) * per_dense + moe_frac * per_moe
    dualpipe = ex.pipeline_schedule == "dualpipe"
    for s in range(lay.pp):
        sp_ = params[s]
        if dualpipe:
            # Each rank holds two stages, one per pipeline direction (DeepSeek-V3 Table 2:
            # 2x parameters); their optimizer shards are spread over both stages' ranks.
            o = params[lay.pp - 1 - s]
            sp_ = StageParams(sp_.dense + o.dense, sp_.expert + o.expert, sp_.per_chunk)

        def shard(x_dense: float, x_exp: float, on: bool) -> float:
            return x_dense / dp_shard + x_exp / lay.edp if on else x_dense + x_exp

        # ZeRO-3 with pipelines keeps the stage's parameters gathered across micro-batches.
        weights = WEIGHT_BYTES * shard(sp_.dense, sp_.expert, ex.zero >= 3 and lay.pp == 1)
        grads = grad_b * shard(sp_.dense, sp_.expert, ex.zero >= 2)
        opt = MASTER_OPTIMIZER_BYTES * shard(sp_.dense, sp_.expert, ex.zero >= 1)
        if dualpipe:
            opt /= 2.0
        acts = float(tl.peak_inflight_layers[s]) * per_layer
        tok = ex.micro_batch * ex.seq_len / lay.cp
        if s == lay.pp - 1 or (dualpipe and s == 0):
            heads = 1 + model.mtp_layers  # the output head, and each MTP module's
            acts += heads * 4.0 * tok * model.vocab / lay.tp  # fp32 logits for the loss backward
            # Each MTP module keeps one more block's activations for its one micro-batch.
            acts += model.mtp_layers * (per_moe if model.is_moe else per_dense)
        total = weights + grads + opt + acts + RESERVED_BYTES
        rep = MemoryReport(weights, grads, opt, acts, RESERVED_BYTES, total, capacity, s)
        if best is None or rep.total > best.total:
            best = rep
    if best is None:
        raise InvariantError("memory report found no pipeline stage", fix="report this job")
    return best
