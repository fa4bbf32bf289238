"""Memory per GPU: weights, gradients, optimizer states and activations, with an OOM verdict.

Activations follow Korthikanti et al. ("Reducing Activation Recomputation in Large Transformer
Models", MLSys 2023): 34·s·b·h + 5·a·s²·b bytes per GPT layer, divided by t under tensor +
sequence parallelism, with selective recompute dropping the attention-score terms and full
recompute keeping only each layer's input. The terms are derived per saved tensor, so GQA,
gated MLPs, MoE and flash attention change them the way they change the tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from starfabric.astral.seer import (
    cpu_optimizer_offload,
    fine_grained_offload,
    offload,
    partial_recompute,
    stage_activations,
    torchtitan_memory,
)
from starfabric.astral.seer.activations import activation_bytes_per_layer
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.optimizer_state import optimizer_bytes
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, zero_shard
from starfabric.astral.seer.schedule import (
    StageParams,
    Timeline,
    grad_bytes,
    layer_params,
    stage_params,
)
from starfabric.errors import InvariantError

RESERVED_BYTES = 3.0 * 2**30
"""CUDA context, NCCL buffers, cuBLAS workspaces and allocator fragmentation per GPU
(assumption)."""
WEIGHT_BYTES = 2.0
"""16-bit model weights."""
MASTER_OPTIMIZER_BYTES = optimizer_bytes("fp32")
"""fp32 master weights + Adam first and second moments (Megatron mixed precision); BF16
moments (precision-aware optimizer) take optimizer_state.optimizer_bytes("bf16")."""


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
    offloaded: float = 0.0
    """Bytes kept in the second memory tier (offload), not counted in `total`."""
    offload_capacity: float = 0.0
    host: float = 0.0
    """Pinned host bytes of the CPU-offloaded optimizer (cpu_optimizer_offload.py) on an x86
    host (on Grace superchips they count in `offloaded`)."""
    host_capacity: float = 0.0

    @property
    def oom(self) -> bool:
        """True when the job would not fit in GPU memory (or in its offload tier, or the
        offloaded optimizer in host memory)."""
        return (
            self.total > self.capacity
            or self.offloaded > self.offload_capacity
            or self.host > self.host_capacity
        )


def memory_report(model: ModelSpec, ex: ExecutionSpec, lay: Layout, tl: Timeline) -> MemoryReport:
    """Peak memory per GPU over the PP stages (in-flight micro-batches from the schedule)."""
    params = stage_params(model, lay, ex.pipeline_schedule != "dualpipe")
    capacity = lay.gpu.hbm_gib * 2**30
    dp_shard = zero_shard(ex, lay) * lay.cp  # hybrid sharding: one shard group's ranks
    grad_b = grad_bytes(ex)
    best: MemoryReport | None = None

    def layer_bytes(e: ExecutionSpec) -> tuple[float, float]:
        """(dense, MoE) activation bytes one layer of a micro-batch saves under `e`."""
        dense = activation_bytes_per_layer(model, e, lay, moe=False)
        return dense, activation_bytes_per_layer(model, e, lay, moe=True) if model.is_moe else dense

    per_dense, per_moe = layer_bytes(ex)
    dualpipe = ex.pipeline_schedule == "dualpipe"

    # Each chunk's own layers, walked through the simulated schedule (stage_activations).
    # uniform groups / block's first N (partial_recompute): what an unrecomputed layer keeps
    plain = layer_bytes(partial_recompute.plain_execution(ex)) if ex.recompute_method else None

    def stage_bytes(moe_layer: float) -> Any:
        if plain is not None:
            chunk_bytes = partial_recompute.chunk_bytes(
                model, ex, lay, (per_dense, moe_layer), plain
            )
        else:
            chunk_bytes = stage_activations.chunk_activation_bytes(model, lay, per_dense, moe_layer)
        if dualpipe:  # two opposite 1F1B pipelines per rank: PP + 1 micro-batches on every rank
            return stage_activations.dualpipe_rank_bytes(chunk_bytes)
        return stage_activations.stage_peak_bytes(tl.is_fwd, tl.chunk, chunk_bytes)

    stage_acts = stage_bytes(per_moe)
    # Fine-grained offload of the experts' inputs (fine_grained_offload): those tensors of all
    # in-flight MoE layers but `RESIDENT_LAYERS` live in host memory.
    # (ExecutionSpec refuses them beside the whole-layer offload, as Megatron-Core does.)
    moe_off = fine_grained_offload.offloaded_bytes_per_layer(model, ex, lay)
    module_off = stage_acts - stage_bytes(per_moe - moe_off) if moe_off > 0 else stage_acts * 0.0
    module_off = np.maximum(0.0, module_off - fine_grained_offload.resident_bytes(moe_off))
    # Micro-batches holding the loss chunk's logits and MTP tensors at once (1F1B: one; the
    # EP overlap's extra interleaved warm-up: two). DualPipe's two directions: one each.
    loss_mbs = 1 if dualpipe else stage_activations.loss_chunk_inflight(tl.is_fwd, tl.chunk)
    host_peak = 0.0
    block_p = max(layer_params(model, lay, False), layer_params(model, lay, model.is_moe))
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
        local = shard(sp_.dense, sp_.expert, ex.zero >= 1)
        frac = ex.optimizer_offload_fraction
        opt = cpu_optimizer_offload.hbm_kept(optimizer_bytes(ex.optimizer_moments), frac) * local
        host = cpu_optimizer_offload.host_bytes(local, frac)
        if dualpipe:
            opt /= 2.0
            host /= 2.0
        layer_acts = float(stage_acts[s])
        if plain is not None:  # set exactly when ex.recompute_method is
            layer_acts += partial_recompute.replay_bytes(ex, lay, s, plain)
        acts = layer_acts
        tok = ex.micro_batch * ex.seq_len / lay.cp
        if s == lay.pp - 1 or (dualpipe and s == 0):
            heads = 1 + model.mtp_layers  # the output head, and each MTP module's
            # fp32 logits for the loss backward, per micro-batch holding the loss chunk.
            acts += loss_mbs * heads * 4.0 * tok * model.vocab / lay.tp
            # Each MTP module keeps one more block's activations per such micro-batch.
            acts += loss_mbs * model.mtp_layers * (per_moe if model.is_moe else per_dense)
            if ex.torchtitan_memory:
                acts += torchtitan_memory.loss_extra_bytes(model, ex, lay)
        if ex.torchtitan_memory:
            loss_stage = s == lay.pp - 1
            acts += torchtitan_memory.fsdp2_inflight_bytes(
                ex, lay, block_p, torchtitan_memory.root_params(model, lay), loss_stage
            )
        off = 0.0
        acts -= float(module_off[s])
        host += float(module_off[s])  # pinned host memory (on a Grace superchip: the tier)
        if ex.offload_activations:
            # Two layers' tensors stay in HBM (offload.RESIDENT_LAYERS); the rest is out.
            resident = offload.RESIDENT_LAYERS * max(per_dense, per_moe)
            off += max(0.0, layer_acts - resident)
            acts -= max(0.0, layer_acts - resident)
        if ex.offload_weights:
            lp = max(layer_params(model, lay, False), layer_params(model, lay, model.is_moe))
            keep = offload.RESIDENT_LAYERS * lp
            off += weights + grads + opt
            weights, grads, opt = WEIGHT_BYTES * keep, grad_b * keep, 0.0
        total = weights + grads + opt + acts + RESERVED_BYTES
        tier = (lay.gpu.offload_gib or 0.0) * 2**30
        host_cap = (lay.gpu.host_mem_gib or 0.0) * 2**30
        if tier:  # on a Grace superchip the host memory is the second tier itself
            off += host
            host, host_cap = 0.0, 0.0
        rep = MemoryReport(weights, grads, opt, acts, RESERVED_BYTES, total, capacity, s, off,
                           tier, host, host_cap)  # fmt: skip
        if best is None or rep.total > best.total:
            best = rep
        host_peak = max(host_peak, rep.host)
    if best is None:
        raise InvariantError("memory report found no pipeline stage", fix="report this job")
    # Each stage's ranks pin their own offloaded optimizer in host memory: the fullest counts.
    return replace(best, host=host_peak)
