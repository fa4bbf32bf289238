"""Per-rank timelines of one training iteration: 1F1B / interleaved 1F1B, DP overlap, optimizer.

Each PP stage runs Megatron's operation order (warm-up forwards, steady 1F1B, cool-down
backwards; interleaved with virtual chunks when vpp > 1). A numba list simulation gives every
forward/backward its start and end under cross-stage dependencies, so the bubble is measured,
not assumed. Gradient reduction runs on its own stream in buckets as each chunk's last backward
produces them; what is left after the pipeline drains is exposed. The optimizer step and the
distributed-optimizer parameter all-gather close the iteration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from starfabric.astral.seer import (
    _kernels,
    cpu_optimizer_offload,
    fine_grained_offload,
    host_ops,
    host_segments,
    offload,
    partial_recompute,
    recompute_host,
    router_launches,
)
from starfabric.astral.seer.activations import activation_bytes_per_layer
from starfabric.astral.seer.comm import Kind
from starfabric.astral.seer.cost import (
    DP_OVERLAP_RESIDUAL,
    CostContext,
    OpCosts,
    op_costs,
    pair_ep_overlap,
    pair_megatron_overlap,
    refit_fsdp_side,
)
from starfabric.astral.seer.deepspeed_bf16_pipe import all_reduces_gradients
from starfabric.astral.seer.dist_opt_gather import gather_bytes_per_param
from starfabric.astral.seer.ep_overlap import solo_ops
from starfabric.astral.seer.fsdp_cp_window import ring_window
from starfabric.astral.seer.model import ModelSpec, attention_params, mlp_params, mtp_params
from starfabric.astral.seer.ops import (
    COMM,
    OpTable,
    backward_of,
    embedding_ops,
    layer_ops,
    logits_ops,
    mtp_ops,
)
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, chunk_moe_layers, zero_shard
from starfabric.errors import InvariantError

DP_BUCKET_PARAMS = 40_000_000
"""Gradient bucket size in parameters (Megatron-Core DDP default `bucket_size` = 40M)."""
OPTIMIZER_BYTES_PER_PARAM = 32.0
"""HBM bytes a fused Adam step moves per parameter: read fp32 param/grad/m/v, write param/m/v,
write the 16-bit copy (assumption from the kernel's tensors)."""
ITERATION_OVERHEAD_S = 0.010
"""Per-iteration host work outside the GPU timeline: data loader hand-off, loss logging,
learning-rate update, grad-norm host sync (assumption)."""
COMPONENTS = (
    "compute",
    "recompute",
    "tp",
    "cp",
    "ep",
    "pp",
    "dp",
    "offload",
    "bubble",
    "optimizer",
    "overhead",
    "host",
)
"""Breakdown components of the iteration time."""


@dataclass(frozen=True)
class PassCost:
    """Time of one micro-batch through one piece of model (forward or backward)."""

    compute: float
    comm: dict[str, float]
    flops: float

    @property
    def total(self) -> float:
        """Critical-path seconds of this pass."""
        return self.compute + sum(self.comm.values())


_BREAKDOWN_GROUP = {"etp": "ep", "edp": "dp", "fsdp_dp": "dp", "fsdp_edp": "dp",
                    "cp_a2a": "cp", "cp_p2p": "cp"}  # fmt: skip
"""Breakdown component of a parallel group's collectives (others: the group's own name)."""


def pass_cost(t: OpTable, c: OpCosts, mask: np.ndarray[Any, Any] | None = None) -> PassCost:
    """Critical-path cost of the operators of `t` selected by `mask` (all by default)."""
    sel = np.ones(len(t), dtype=bool) if mask is None else mask
    comp = float(c.exposed[sel & (c.kind != COMM)].sum())
    comm: dict[str, float] = {}
    for i in np.flatnonzero(sel & (c.kind == COMM)):
        g = _BREAKDOWN_GROUP.get(t.group[i], t.group[i])
        comm[g] = comm.get(g, 0.0) + float(c.exposed[i])
    flops = float(np.asarray(t.flops)[sel].sum())
    return PassCost(comp, comm, flops)


def _scale(pc: PassCost, k: float) -> PassCost:
    return PassCost(pc.compute * k, {g: v * k for g, v in pc.comm.items()}, pc.flops * k)


def _add(a: PassCost, b: PassCost) -> PassCost:
    comm = dict(a.comm)
    for g, v in b.comm.items():
        comm[g] = comm.get(g, 0.0) + v
    return PassCost(a.compute + b.compute, comm, a.flops + b.flops)


_ZERO = PassCost(0.0, {}, 0.0)


@dataclass(frozen=True)
class PieceCost:
    """Forward, backward and recompute cost of one piece (a layer type, embedding, logits)."""

    fwd: PassCost
    bwd: PassCost
    recompute: PassCost
    fwd_table: OpTable
    fwd_costs: OpCosts
    bwd_table: OpTable
    bwd_costs: OpCosts
    fwd_solo: PassCost | None = None
    """Forward of a micro-batch with no partner under Megatron's EP overlap (warm-up):
    its all-to-all unhidden; None where it is `fwd`."""
    bwd_solo: PassCost | None = None
    """Backward with no partner (cool-down), likewise."""
    fwd_solo_costs: OpCosts | None = None
    """Per-operator costs of `fwd_solo` (`with_host` splits them over the host segments)."""


def full_recompute_cost(t: OpTable, fc: OpCosts, regather: bool = False) -> PassCost:
    """What full recompute re-runs: the forward, except the ZeRO-3/FSDP parameter gathers —
    flat-buffer FSDP gathers a layer once for recompute and backward together (its
    pre-backward hook runs before the checkpointed forward). DeepSpeed's per-parameter ZeRO-3
    of 2021 (`regather`) fetched again in the re-run forward's module hooks."""
    if regather:
        return pass_cost(t, fc)
    grp = np.asarray(t.group, dtype=str)
    return pass_cost(t, fc, ~((fc.kind == COMM) & np.char.startswith(grp, "fsdp")))


def recompute_window(fc: OpCosts, recompute: str, ctx: CostContext) -> float:
    """Seconds of full recompute's re-run forward that the backward's ZeRO-3/FSDP collectives
    overlap. Megatron-FSDP (NVIDIA/Megatron-LM `distributed/custom_fsdp/
    fully_sharded_data_parallel.py` at 1e057005): the layer's full-backward pre-hook gathers it
    and prefetches the next layers in backward order; the re-run forward of a checkpointed layer
    finds its parameters gathered ("in activation recomputation case, we need to cancel forward
    prefetch"); `optim_grads_params` reduce-scatters every backward. So the prefetched gather
    and the previous layer's reduce-scatter share the link while this layer recomputes *and*
    back-propagates (PyTorch FSDP's BACKWARD_PRE prefetch orders it the same way). 0 for other
    policies and for per-parameter ZeRO-3, whose re-run forward fetches its parameters again."""
    if recompute != "full" or ctx.fsdp_regather:
        return 0.0
    return float(fc.time[fc.kind != COMM].sum())


def rerun_ring_window(t: OpTable, fc: OpCosts, ctx: CostContext, window: float) -> float:
    """`window` (the re-run forward's compute, `recompute_window`) with that forward's CP ring
    sharing it as in the backward (`fsdp_cp_window`): on FSDP's link its hidden exchanges take
    link time, on another its stall adds free time. Unchanged when there is no window."""
    if window <= 0:
        return window
    compute, stall = ring_window(
        window, np.asarray(t.group), np.asarray(t.coll), fc.kind == COMM, fc.time, fc.exposed,
        ctx.ring_fsdp_shared_link, ctx.fsdp_side_groups,
    )  # fmt: skip
    return compute + stall


def host_pass(pc: PassCost, host_s: float, rerun: PassCost = _ZERO) -> PassCost:
    """A pass that starts from an empty GPU queue: max(host, GPU) (`host_ops.segment_time`);
    the host's excess is reported as its own component. `rerun`: a selective recompute's
    re-run issued inside this pass (its GPU seconds stay in the piece's recompute entry, which
    `build_timeline` adds to the backward): the two together last max(host, pass + re-run GPU),
    the excess put on this pass."""
    gpu = pc.total + rerun.total
    extra = host_ops.segment_time(host_s, gpu) - gpu
    return _add(pc, PassCost(0.0, {"host": extra}, 0.0)) if extra > 0 else pc


def _launch_spec(
    model: ModelSpec, ex: ExecutionSpec, lay: Layout, moe: bool
) -> host_ops.LayerLaunchSpec:
    """A layer's `host_ops.LayerLaunchSpec`: its MoE shape (experts per EP rank), CUDA graphs,
    MLA, QK-norm, RoPE fused (or no RoPE: nothing unfused), SwiGLU fused (the flag is SwiGLU's
    only), the QKV all-gather when TP exceeds the KV heads, the fused router, TE's MXFP8 path
    (te_mxfp8_host), and the router's modules for the model's routing (router_launches)."""
    return host_ops.LayerLaunchSpec(
        moe,
        dispatcher=ex.moe_dispatcher,
        local_experts=model.moe_experts // lay.ep if moe else 1,
        shared_experts=model.moe_shared_experts if moe else 0,
        cuda_graphs=ex.cuda_graphs,
        mla=model.is_mla,
        qk_norm=model.qk_norm,
        rope_fused=ex.rope_fusion or model.learned_pos_emb,
        swiglu_fused=ex.swiglu_fusion or model.activation != "swiglu",
        qkv_gather=model.kv_heads < lay.tp,
        router_fused=ex.moe_router_fusion,
        mxfp8_stage=ex.te_mxfp8_stage if ex.precision == "fp8" else None,
        router_extra=router_launches.router_modules(
            ex.moe_router_fusion, model.moe_router_score, model.moe_router_groups,
            model.moe_router_group_topk, model.moe_router_expert_bias, model.moe_router_aux_loss,
        ),
    )  # fmt: skip


def piece_host_s(model: ModelSpec, ex: ExecutionSpec, lay: Layout, moe: bool) -> tuple[float, ...]:
    """(forward, backward, recompute) host seconds of one layer and micro-batch
    (`host_ops.layer_launches`); zeros where the row's stack is not counted. The recompute
    entry is what the re-run issues: full recompute's whole forward, or selective recompute's
    re-run modules (`recompute_host.recompute_launches`), both forward code priced at
    `HOST_S_PER_LAUNCH_FWD`."""
    if not ex.host_launches:
        return (0.0, 0.0, 0.0)
    spec = _launch_spec(model, ex, lay, moe)
    hf, hb = host_ops.host_seconds(host_ops.layer_launches(spec))
    if ex.recompute == "full":
        return (hf, hb, hf)
    if ex.recompute == "selective":
        rerun = recompute_host.recompute_launches(spec, ex.recompute_modules)
        return (hf, hb, rerun * host_ops.HOST_S_PER_LAUNCH_FWD)
    return (hf, hb, 0.0)


def with_host(
    pc: PieceCost, model: ModelSpec, ex: ExecutionSpec, lay: Layout, moe: bool
) -> PieceCost:
    """A piece whose forward waits for the GPU (`host_ops.host_synced`): its forward and full
    recompute's re-run forward last the flow shop of the modules between two waits
    (`host_segments`, at least max(host, GPU)); the backward, which never waits, max(host, GPU)
    — under selective recompute over the backward and the re-run together, whose launches
    the host issues inside the backward (`host_pass`'s `rerun`). Other pieces are returned
    unchanged (the host runs ahead; only the iteration floor in `build_timeline` applies)."""
    # Token counts are known only on the GPU unless the experts' inputs are padded to capacity.
    dynamic = ex.moe_capacity_factor is None or not ex.moe_pad_to_capacity
    if not host_ops.host_synced(ex.host_launches, moe, lay.ep, dynamic):
        return pc
    _, hb, hr = piece_host_s(model, ex, lay, moe)
    # The forward (and full recompute's re-run of it) waits once per layer, before the EP
    # dispatch: a segment is a flow shop of the modules between two waits (host_segments).
    nl = host_segments.launches_by_module(_launch_spec(model, ex, lay, moe))
    host = {n: c * host_ops.HOST_S_PER_LAUNCH_FWD for n, c in nl.items()}

    def segment(costs: OpCosts, total: float) -> float:
        gpu = host_segments.gpu_by_module(pc.fwd_table.name, costs.exposed)
        # per-operator times cover the pass's critical path; scale to the pass's total
        k = total / max(sum(gpu.values()), 1e-30)
        return host_segments.segment_seconds(host, {n: v * k for n, v in gpu.items()}, nl)

    fwd = _host_excess(pc.fwd, segment(pc.fwd_costs, pc.fwd.total))
    rec = pc.recompute
    full = ex.recompute == "full"
    if full and hr > 0:
        rec = _host_excess(pc.recompute, segment(pc.fwd_costs, pc.recompute.total))
    # Selective recompute's re-run is issued inside the backward: one stream of hb + hr host
    # seconds against the backward's and the re-run's GPU time (no wait between them).
    rerun = _ZERO if full else pc.recompute
    hbr = hb if full else hb + hr
    # The EP overlap's unpaired warm-up forward (ep_overlap) is a forward alone: it waits
    # before each dispatch as the no-overlap forward does, so it lasts the same flow shop
    # over its own, unhidden, operator times.
    fwd_solo = pc.fwd_solo
    if fwd_solo is not None:
        solo_costs = pc.fwd_solo_costs if pc.fwd_solo_costs is not None else pc.fwd_costs
        fwd_solo = _host_excess(fwd_solo, segment(solo_costs, fwd_solo.total))
    return PieceCost(
        fwd, host_pass(pc.bwd, hbr, rerun), rec,
        pc.fwd_table, pc.fwd_costs, pc.bwd_table, pc.bwd_costs,
        fwd_solo,
        None if pc.bwd_solo is None else host_pass(pc.bwd_solo, hbr, rerun),
        pc.fwd_solo_costs,
    )  # fmt: skip


def _host_excess(pc: PassCost, seconds: float) -> PassCost:
    """`pc` lasting `seconds` where that is longer: the excess is the `host` component."""
    extra = seconds - pc.total
    return _add(pc, PassCost(0.0, {"host": extra}, 0.0)) if extra > 0 else pc


def piece_cost(t: OpTable, ctx: CostContext, recompute: str) -> PieceCost:
    """Costs of a forward table, its backward, and what the recompute policy re-runs."""
    fc = op_costs(t, ctx)
    bt = backward_of(t)
    window = rerun_ring_window(t, fc, ctx, recompute_window(fc, recompute, ctx))
    bc = op_costs(bt, ctx, backward=True, fsdp_window_s=window)
    solo: tuple[PassCost, PassCost, OpCosts] | None = None
    fc_alone = fc  # a re-run forward (full recompute) has no partner: its all-to-all stays
    if ctx.dualpipe and ctx.ep_comm_overlap:
        fc, bc = pair_ep_overlap(t, fc, bt, bc, ctx)
        fc, bc = refit_fsdp_side(t, fc, ctx), refit_fsdp_side(bt, bc, ctx, window)
        fc_alone = fc
    elif ctx.megatron_ep_overlap:
        solo = (pass_cost(t, fc), pass_cost(bt, bc), fc)
        fc, bc = pair_megatron_overlap(t, fc, bt, bc, ctx)
        # Megatron-FSDP's side window is the all-to-all wait the overlap leaves.
        fc, bc = refit_fsdp_side(t, fc, ctx), refit_fsdp_side(bt, bc, ctx, window)
    fwd = pass_cost(t, fc)
    if recompute == "full":
        rec = full_recompute_cost(t, fc_alone, ctx.fsdp_regather)
    elif recompute == "selective":
        rec = pass_cost(t, fc, np.asarray(t.selective, dtype=bool))
    else:
        rec = _ZERO
    if solo is None:
        return PieceCost(fwd, pass_cost(bt, bc), rec, t, fc, bt, bc)
    return PieceCost(fwd, pass_cost(bt, bc), rec, t, fc, bt, bc, solo[0], solo[1], solo[2])


def schedule_order(p: int, v: int, m: int, extra_warm: int = 0) -> tuple[np.ndarray[Any, Any], ...]:
    """Megatron's per-stage op order: arrays (is_fwd, micro-batch, chunk), each (p, 2*m*v).
    `extra_warm`: more warm-up forwards under interleaving (Megatron schedules one more with
    the EP overlap on, schedules.py get_pp_rank_microbatches)."""
    n = 2 * m * v
    is_fwd = np.zeros((p, n), np.int8)
    mbs = np.zeros((p, n), np.int64)
    chs = np.zeros((p, n), np.int64)
    total = m * v
    for s in range(p):
        if v == 1:
            warm = min(p - s - 1, m)
        else:
            warm = total if m == p else min((p - s - 1) * 2 + (v - 1) * p + extra_warm, total)
        seq: list[tuple[int, int]] = [(1, k) for k in range(warm)]
        for k in range(total - warm):
            seq.append((1, warm + k))
            seq.append((0, k))
        seq.extend((0, k) for k in range(total - warm, total))
        for i, (f, k) in enumerate(seq):
            c = (k % (p * v)) // p
            if not f:
                c = v - 1 - c
            is_fwd[s, i] = f
            mbs[s, i] = (k // (p * v)) * p + k % p if v > 1 else k
            chs[s, i] = c
    return is_fwd, mbs, chs


@dataclass(frozen=True)
class StageParams:
    """Parameters held by one PP stage on one rank, split by how they are reduced."""

    dense: float  # reduced over the DP(xCP) group
    expert: float  # reduced over the expert-DP group
    per_chunk: tuple[float, ...]  # dense+expert params of each virtual chunk


def stage_params(model: ModelSpec, lay: Layout, mtp_embedding: bool = True) -> list[StageParams]:
    """Per-rank parameter counts of every stage (TP/EP shards, embedding on first/last).

    `mtp_embedding`: the MTP stage holds its own copy of the input embedding (Megatron-Core);
    False where the schedule puts it on the embedding's rank and shares it (DualPipe)."""
    norm_w = 2 if model.norm == "layernorm" else 1
    attn = attention_params(model) / lay.tp + 2 * norm_w * model.hidden
    dense_mlp = mlp_params(model, model.ffn_hidden) / lay.tp
    shared = (
        model.moe_shared_experts * mlp_params(model, model.moe_ffn_hidden) / lay.tp
        if model.is_moe
        else 0.0
    )
    expert = (
        model.moe_experts / lay.ep * mlp_params(model, model.moe_ffn_hidden) / lay.etp
        if model.is_moe
        else 0.0
    )
    router = model.moe_experts * model.hidden if model.is_moe else 0
    mtp_d, mtp_e = mtp_params(model)
    emb = model.vocab * model.hidden / lay.tp
    pos = model.max_seq_len * model.hidden if model.learned_pos_emb else 0
    out: list[StageParams] = []
    last_vs = lay.pp * lay.vpp - 1
    for s in range(lay.pp):
        dense_tot, exp_tot = 0.0, 0.0
        chunks: list[float] = []
        for c, nl in enumerate(lay.stage_layers[s]):
            n_moe = chunk_moe_layers(model, lay, s, c)
            d = nl * attn + (nl - n_moe) * dense_mlp + n_moe * (shared + router)
            e = n_moe * expert
            vs = c * lay.pp + s
            if vs == 0:
                d += emb + pos
            if vs == last_vs and (not model.tied_embeddings or lay.pp > 1 or lay.vpp > 1):
                d += (0 if model.tied_embeddings and vs == 0 else emb) + norm_w * model.hidden
            if vs == last_vs and model.mtp_layers:
                # MTP modules sit with the output head (DeepSeek-V3 section 3.2.1). Megatron-
                # Core builds a full input embedding on the MTP stage for the shifted tokens
                # (gpt_model.py @007562f: `if self.pre_process or self.mtp_process:
                # self.embedding = ...`), a second copy of the table when that stage is not
                # also the first; DualPipe shares it physically (DeepSeek-V3 section 3.2.1).
                d += mtp_d / lay.tp + (emb if vs != 0 and mtp_embedding else 0.0)
                e += mtp_e / (lay.ep * lay.etp)
            dense_tot += d
            exp_tot += e
            chunks.append(d + e)
        out.append(StageParams(dense_tot, exp_tot, tuple(chunks)))
    return out


@dataclass(frozen=True)
class Timeline:
    """Result of the schedule: per-stage op lists with times and the iteration breakdown."""

    iteration_s: float
    breakdown: dict[str, float]
    stage_end_s: np.ndarray[Any, Any]
    is_fwd: np.ndarray[Any, Any]
    mb: np.ndarray[Any, Any]
    chunk: np.ndarray[Any, Any]
    start: np.ndarray[Any, Any]
    end: np.ndarray[Any, Any]
    dp_windows: list[list[tuple[float, float]]]
    tail_s: np.ndarray[Any, Any]
    critical_stage: int
    """`dp_windows`, `tail_s` and `critical_stage` index the rank that holds a stage: the stage
    itself, or under DualPipe rank r, which holds stages r and pp-1-r (`dualpipe_pairs`)."""
    hardware_flops: float
    recompute_flops: float
    peak_inflight_layers: np.ndarray[Any, Any]
    pieces: dict[str, PieceCost]
    chunk_fwd: np.ndarray[Any, Any]
    chunk_bwd: np.ndarray[Any, Any]
    boundary_s: float = 0.0
    """Work only the last micro-batch of the step runs (accumulation boundary): the optimizer,
    the ZeRO-1/2 parameter all-gather and, below ZeRO-2, the exposed end-of-step gradient
    reduction, on the critical stage's rank (xtuner_throughput reads per-micro-step figures
    with it). ZeRO >= 2 partitions the gradients and reduces them in every backward (DeepSpeed
    engine.py v0.12.3 `allreduce_gradients`: `zero_optimization_partition_gradients()`
    communicates off the boundary too), so its reduction is not boundary-only."""


def chunk_pieces(
    model: ModelSpec, lay: Layout, s: int, c: int, ex: ExecutionSpec | None = None
) -> dict[str, int]:
    """How many of each piece (dense/moe layers, embedding, logits) chunk c of stage s runs.
    Under block recompute (`ex.recompute_method`) only the chunk's first N layers are the
    recomputing "dense"/"moe" pieces; the rest are "dense_norec"/"moe_norec", which re-run
    nothing (partial_recompute)."""
    nl = lay.stage_layers[s][c]
    n_moe = chunk_moe_layers(model, lay, s, c)
    vs = c * lay.pp + s
    split: dict[str, int] = {}
    n_dense = nl - n_moe
    if ex is not None and ex.recompute_method == "block":
        rec = partial_recompute.recomputed_layers("block", ex.recompute_num_layers, nl)
        rd, rm = partial_recompute.recomputed_split(n_dense, n_moe, rec)
        split = {"dense_norec": n_dense - rd, "moe_norec": n_moe - rm}
        n_dense, n_moe = rd, rm
    return {
        "dense": n_dense,
        "moe": n_moe,
        **split,
        "embedding": int(vs == 0),
        "logits": int(vs == lay.pp * lay.vpp - 1),
        "mtp": int(vs == lay.pp * lay.vpp - 1 and model.mtp_layers > 0),
    }


def layer_params(model: ModelSpec, lay: Layout, moe: bool) -> float:
    """Parameters of one dense or MoE layer held by one rank (TP/EP/expert-TP shards)."""
    norm_w = 2 if model.norm == "layernorm" else 1
    p = attention_params(model) / lay.tp + 2 * norm_w * model.hidden
    if not moe:
        return p + mlp_params(model, model.ffn_hidden) / lay.tp
    expert = mlp_params(model, model.moe_ffn_hidden)
    p += model.moe_shared_experts * expert / lay.tp + model.moe_experts * model.hidden
    return p + model.moe_experts / lay.ep * expert / lay.etp


def grad_bytes(ex: ExecutionSpec) -> float:
    """Bytes per gradient element (fp32 reduction by default for bf16/fp8)."""
    fp32 = ex.grad_reduce_fp32 if ex.grad_reduce_fp32 is not None else ex.precision != "fp16"
    return 4.0 if fp32 else 2.0


def _with_transfer(pc: PieceCost, f_bytes: float, b_bytes: float, bw: float) -> PieceCost:
    """`pc` with host-memory copies of `f_bytes` in its forward and `b_bytes` in its backward
    at `bw` bytes/s, each exposed by what it exceeds the pass's own compute (and recompute),
    as group "offload" (`offload.exposed`)."""
    f_x = offload.exposed(f_bytes, pc.fwd.total, bw)
    b_x = offload.exposed(b_bytes, pc.bwd.total + pc.recompute.total, bw)
    fo, bo = PassCost(0.0, {"offload": f_x}, 0.0), PassCost(0.0, {"offload": b_x}, 0.0)
    return PieceCost(_add(pc.fwd, fo), _add(pc.bwd, bo), pc.recompute, pc.fwd_table,
                     pc.fwd_costs, pc.bwd_table, pc.bwd_costs,
                     None if pc.fwd_solo is None else _add(pc.fwd_solo, fo),
                     None if pc.bwd_solo is None else _add(pc.bwd_solo, bo),
                     pc.fwd_solo_costs)  # fmt: skip


def _with_offload(pc: PieceCost, key: str, model: ModelSpec, ex: ExecutionSpec,
                  lay: Layout) -> PieceCost:  # fmt: skip
    """A layer piece with its offload traffic (`offload.py`): the transfer beyond the pass's
    own compute lands on the critical path as group "offload"."""
    if key not in ("dense", "moe", "dense_norec", "moe_norec"):
        return pc
    moe = key.startswith("moe")
    if key.endswith("_norec"):  # block recompute's plain layers keep all their tensors
        ex = partial_recompute.plain_execution(ex)
    act = activation_bytes_per_layer(model, ex, lay, moe=moe)
    f_b, b_b = offload.pass_bytes(act, layer_params(model, lay, moe), grad_bytes(ex),
                                  ex.offload_activations, ex.offload_weights)  # fmt: skip
    bw = offload.link_bytes_per_s(lay.gpu)
    return _with_transfer(pc, f_b, b_b, bw)


def _with_module_offload(pc: PieceCost, model: ModelSpec, ex: ExecutionSpec,
                         lay: Layout) -> PieceCost:  # fmt: skip
    """A MoE layer piece with Megatron-Core's fine-grained offload of its experts' inputs
    (`fine_grained_offload.py`): out in the forward, back in the backward, each exposed by what
    it exceeds the pass's own compute, as group "offload"."""
    nbytes = fine_grained_offload.offloaded_bytes_per_layer(model, ex, lay)
    if nbytes <= 0:
        return pc
    bw = fine_grained_offload.link_bytes_per_s(lay.gpu)
    if bw <= 0:
        raise InvariantError(  # resolve_layout refuses such a GPU first
            f"{lay.gpu.name} has no host link to offload activations over"
        )
    return _with_transfer(pc, nbytes, nbytes, bw)


def weight_grad_s(pc: PieceCost) -> float:
    """Critical-path seconds of a piece's weight-gradient GEMMs (W in DualPipe's terms)."""
    mask = np.fromiter((n.endswith(".wgrad") for n in pc.bwd_table.name), bool, len(pc.bwd_table))
    return float(pc.bwd_costs.exposed[mask].sum())


def dualpipe_bubble(f: float, b: float, w: float, pp: int) -> float:
    """DualPipe's pipeline bubble (DeepSeek-V3 Table 2): (PP/2 - 1)(F&B + B - 3W), with F&B
    the time of a mutually overlapped forward + backward chunk pair (here F + B: the pair's
    all-to-all hiding is already in F and B, `cost.pair_ep_overlap`)."""
    return max(0.0, (pp / 2 - 1) * (f + b + b - 3 * w))


def dualpipe_pairs(p: int) -> list[tuple[int, int]]:
    """DualPipe's placement: rank r runs stage r of one direction and stage p-1-r of the
    other, half the micro-batches each (DeepSeek-V3 section 3.2.1), so the embedding and the
    output head (and MTP) share ranks 0 and p-1."""
    return [(r, p - 1 - r) for r in range(p)]


def dualpipe_times(
    start: np.ndarray[Any, Any],
    end: np.ndarray[Any, Any],
    fwd: np.ndarray[Any, Any],
    bwd: np.ndarray[Any, Any],
    wgrad: np.ndarray[Any, Any],
    m: int,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per-stage op times under DualPipe, as a closed form of the bidirectional schedule: a
    rank's busy time is half the micro-batches of each of its two stages, plus DualPipe's
    bubble of the busiest rank; each stage keeps the 1F1B list schedule's op order, its times
    scaled to end there (a stage's work is split over two ranks, so a trace of it shows
    the order, not the durations, of DualPipe)."""
    p = fwd.shape[0]
    per_mb = fwd.sum(axis=1) + bwd.sum(axis=1)
    pairs = dualpipe_pairs(p)
    rank_busy = np.array([m / 2 * (per_mb[a] + per_mb[b]) for a, b in pairs])
    crit = int(np.argmax(rank_busy))
    a, b = pairs[crit]
    target = dualpipe_bubble(
        float(fwd[a].sum() + fwd[b].sum()) / 2,
        float(bwd[a].sum() + bwd[b].sum()) / 2,
        float(wgrad[a].sum() + wgrad[b].sum()) / 2,
        p,
    )
    old_end = np.maximum(end.max(axis=1), 1e-30)
    k = (rank_busy + target) / old_end
    return start * k[:, None], end * k[:, None]


def build_timeline(model: ModelSpec, ex: ExecutionSpec, lay: Layout, ctx: CostContext) -> Timeline:
    """Simulate one iteration on every PP stage and return times and breakdown."""
    pieces: dict[str, PieceCost] = {
        "dense": piece_cost(layer_ops(model, ex, lay, moe=False), ctx, ex.recompute),
        "embedding": piece_cost(embedding_ops(model, ex, lay), ctx, "none"),
        "logits": piece_cost(logits_ops(model, ex, lay), ctx, "none"),
    }
    if model.is_moe:
        pieces["moe"] = with_host(
            piece_cost(layer_ops(model, ex, lay, moe=True), ctx, ex.recompute),
            model, ex, lay, True,
        )  # fmt: skip
    if model.mtp_layers:
        pieces["mtp"] = piece_cost(mtp_ops(model, ex, lay), ctx, ex.recompute)
    if ex.recompute_method == "block":
        # The layers past a chunk's first N run plainly: no recompute of any kind
        # (partial_recompute).
        plain = partial_recompute.plain_execution(ex)
        pieces["dense_norec"] = piece_cost(layer_ops(model, plain, lay, moe=False), ctx, "none")
        if model.is_moe:
            pieces["moe_norec"] = with_host(
                piece_cost(layer_ops(model, plain, lay, moe=True), ctx, "none"),
                model, plain, lay, True,
            )  # fmt: skip
    if ex.offload_activations or ex.offload_weights:
        pieces = {k: _with_offload(pc, k, model, ex, lay) for k, pc in pieces.items()}
    if ex.offload_modules and "moe" in pieces:
        pieces["moe"] = _with_module_offload(pieces["moe"], model, ex, lay)
    p, v, m = lay.pp, lay.vpp, lay.micro_batches
    # Activations cross stages split over the TP ranks (Megatron's scatter/gather optimization,
    # Narayanan et al. SC'21 section 4.1, or sequence parallelism), re-gathered over NVLink.
    act_bytes = 2.0 * ex.micro_batch * ex.seq_len / lay.cp * model.hidden / lay.tp
    p2p = 0.0
    if p > 1:
        p2p = ctx.comm.time("p2p", act_bytes, "pp")
        if lay.tp > 1 and not lay.sp:
            p2p += ctx.comm.time("all_gather", act_bytes * lay.tp, "tp")
    blocking = p > 1 and not ex.overlap_p2p
    fwd = np.zeros((p, v))
    bwd = np.zeros((p, v))
    fsolo = np.zeros((p, v))
    bsolo = np.zeros((p, v))
    layers = np.zeros((p, v))
    chunk_parts: list[list[dict[str, PassCost]]] = []
    last_vs = p * v - 1
    for s in range(p):
        row: list[dict[str, PassCost]] = []
        for c in range(v):
            counts = chunk_pieces(model, lay, s, c, ex)
            f, b, r, fs, bs = _ZERO, _ZERO, _ZERO, _ZERO, _ZERO
            for key, cnt in counts.items():
                if cnt:
                    pc = pieces[key]
                    f = _add(f, _scale(pc.fwd, cnt))
                    b = _add(b, _scale(pc.bwd, cnt))
                    r = _add(r, _scale(pc.recompute, cnt))
                    fs = _add(fs, _scale(pc.fwd_solo or pc.fwd, cnt))
                    bs = _add(bs, _scale(pc.bwd_solo or pc.bwd, cnt))
            vs = c * p + s
            if blocking:
                # Blocking send/recv: the sender waits for its hand-off after every pass.
                if vs != last_vs:
                    f = _add(f, PassCost(0.0, {"pp": p2p}, 0.0))
                    fs = _add(fs, PassCost(0.0, {"pp": p2p}, 0.0))
                if vs != 0:
                    b = _add(b, PassCost(0.0, {"pp": p2p}, 0.0))
                    bs = _add(bs, PassCost(0.0, {"pp": p2p}, 0.0))
            fwd[s, c] = f.total
            bwd[s, c] = b.total + r.total
            fsolo[s, c] = fs.total
            bsolo[s, c] = bs.total + r.total
            layers[s, c] = lay.stage_layers[s][c]
            row.append({"fwd": f, "bwd": b, "rec": r, "fwd_solo": fs, "bwd_solo": bs})
        chunk_parts.append(row)
    hop = 0.0 if blocking else p2p
    # Megatron's EP overlap: one more warm-up forward under interleaving, and the passes
    # with no partner (warm-up, cool-down) keep their all-to-all (`ep_overlap`).
    paired = ctx.megatron_ep_overlap and model.is_moe
    is_fwd, mbs, chs = schedule_order(p, v, m, 1 if paired and v > 1 else 0)
    solo = solo_ops(is_fwd, p) if paired else np.zeros(is_fwd.shape, np.int8)
    start, end, ok = _kernels.pipeline_times(is_fwd, mbs, chs, fwd, bwd, hop, m, solo, fsolo, bsolo)
    if not ok:
        raise InvariantError(
            f"pipeline schedule deadlocked (pp={p}, vpp={v}, micro-batches={m})",
            fix="report this configuration; it is a scheduler bug",
        )
    if ex.pipeline_schedule == "dualpipe":
        wgrad = np.zeros((p, v))
        for s in range(p):
            for c in range(v):
                wgrad[s, c] = sum(
                    cnt * weight_grad_s(pieces[k]) for k, cnt in chunk_pieces(model, lay, s, c, ex).items()
                    if cnt
                )  # fmt: skip
        start, end = dualpipe_times(start, end, fwd, bwd, wgrad, m)
    stage_end = end.max(axis=1)
    inflight = _kernels.peak_inflight(is_fwd, chs, layers)
    if ex.pipeline_schedule == "dualpipe":
        inflight = inflight * (p + 1) / p  # PP + 1 micro-batches in flight (DeepSeek-V3 Table 2)

    # Gradient reduction, optimizer and parameter all-gather, per stage.
    params = stage_params(model, lay, ex.pipeline_schedule != "dualpipe")
    grad_b = grad_bytes(ex)
    ag_b = gather_bytes_per_param(ex.param_gather_dtype, grad_b)  # dist_opt_gather
    dp_name = "dp_cp" if lay.cp > 1 else "dp"
    # DeepSpeed's BF16 pipeline engine all-reduces the FP32 gradients (deepspeed_bf16_pipe).
    full = all_reduces_gradients(ex.zero, ex.deepspeed_bf16_pipe, p)
    coll: Kind = "all_reduce" if full else "reduce_scatter"
    # Hybrid sharding (parallel.zero_shard): ZeRO shards over k DP ranks; the gradients are
    # reduce-scattered inside the shard group and each rank's 1/k shard is all-reduced across
    # the dp/k replicas (MiCS, Zhang et al. VLDB 2022 section 3.3; InternEvo's hybrid ZeRO),
    # and the parameters are gathered inside the shard group only.
    k = zero_shard(ex, lay)
    hybrid = k < lay.dp
    shard_grp = "dp_shard" if hybrid else dp_name
    # Per stage: its gradient buckets (ready time, seconds), optimizer step and parameter
    # gather. They queue on the rank that holds the stage: under DualPipe rank r holds stages
    # r and p-1-r and reduces both stages' gradients (deepseek-ai/DualPipe
    # examples/example_dualpipe.py @7cb1e5e: `local_modules` = stages rank and pp-1-rank,
    # each with its own .grad), so the per-rank arrays below add both.
    dualpipe = ex.pipeline_schedule == "dualpipe"
    owners = [list(pr) for pr in dualpipe_pairs(p)] if dualpipe else [[s] for s in range(p)]
    held_mb = m / 2 if dualpipe else float(m)  # micro-batches each held stage runs on a rank
    buckets: list[list[tuple[float, float]]] = []
    opt_s = np.zeros(p)
    ag_s = np.zeros(p)
    for s in range(p):
        sp_ = params[s]
        bk: list[tuple[float, float]] = []
        # Chunks queue their reductions in the order their last backward finishes (under
        # interleaving chunk v-1 is done first and chunk 0 last).
        last_b = [
            float(end[s, np.flatnonzero((is_fwd[s] == 0) & (chs[s] == c) & (mbs[s] == m - 1))[0]])
            for c in range(v)
        ]
        for c in sorted(range(v), key=lambda k: last_b[k]):
            share = sp_.per_chunk[c] / max(sp_.dense + sp_.expert, 1.0)
            dense_c, exp_c = sp_.dense * share, sp_.expert * share
            t_c = ctx.comm.time(coll, dense_c * grad_b, shard_grp)
            t_c += ctx.comm.time(coll, exp_c * grad_b, "edp")
            if ex.zero == 3 and p == 1:
                t_c = 0.0  # ZeRO-3 reduce-scatters gradients inside every backward pass
            if hybrid:
                t_c += ctx.comm.time("all_reduce", dense_c * grad_b / k, "dp_replica")
            idx = np.flatnonzero((is_fwd[s] == 0) & (chs[s] == c) & (mbs[s] == m - 1))
            b0, b1 = float(start[s, idx[0]]), float(end[s, idx[0]])
            nb = max(1, int(np.ceil(sp_.per_chunk[c] / DP_BUCKET_PARAMS)))
            for j in range(nb):
                ready = b0 + (j + 1) / nb * (b1 - b0) if ex.overlap_grad_reduce else stage_end[s]
                bk.append((ready, t_c / nb))
        buckets.append(bk)
        shard = ex.zero >= 1
        local = sp_.dense / (k * lay.cp if shard else 1) + sp_.expert / (lay.edp if shard else 1)
        opt_s[s] = (
            local * OPTIMIZER_BYTES_PER_PARAM / (ctx.hbm_bytes_per_s * ctx.eff.mem_bw_fraction)
        )
        if ex.offload_weights:  # the states stream through the tier's link
            opt_s[s] = max(opt_s[s], offload.optimizer_s(local, offload.link_bytes_per_s(lay.gpu)))
        if ex.optimizer_offload_fraction > 0:  # Megatron's HybridDeviceOptimizer
            opt_s[s] = cpu_optimizer_offload.step_s(
                local, ex.optimizer_offload_fraction, float(opt_s[s]), lay.gpu,
                ex.overlap_cpu_optimizer, ex.cpu_optimizer_threads,
            )  # fmt: skip
        if ex.zero in (1, 2) or (ex.zero == 3 and p > 1):
            ag_s[s] = ctx.comm.time("all_gather", sp_.dense * ag_b, shard_grp)
            ag_s[s] += ctx.comm.time("all_gather", sp_.expert * ag_b, "edp")
    # Index i below is stage i, or under DualPipe rank i (whose stages both end at its end).
    tails = np.zeros(p)
    dp_exposed = np.zeros(p)
    ag_exposed = np.zeros(p)
    opt = np.zeros(p)
    rank_end = np.array([max(float(stage_end[st]) for st in own) for own in owners])
    windows: list[list[tuple[float, float]]] = []
    for i, own in enumerate(owners):
        queue = [bk for st in sorted(own) for bk in buckets[st]]
        if len(own) > 1:  # one reduction stream per rank: both stages' buckets as they are ready
            queue.sort(key=lambda bk: bk[0])
        free = 0.0
        win: list[tuple[float, float]] = []
        for ready, dur in queue:
            t0 = max(ready, free)
            free = t0 + dur
            win.append((t0, free))
        windows.append(win)
        # Reductions that ran under compute still slow it: NCCL kernels take SMs and HBM
        # bandwidth from the GEMMs they overlap (the same residual as ZeRO-3 prefetch).
        hidden = sum(max(0.0, min(w1, rank_end[i]) - w0) for w0, w1 in win)
        dp_exposed[i] = max(0.0, free - rank_end[i]) + DP_OVERLAP_RESIDUAL * hidden
        # DualPipe: the optimizer states of a rank's two stages are spread over the two ranks
        # that hold each stage (as `memory.memory_report` counts them): half of each.
        opt[i] = sum(opt_s[st] for st in own) / len(own)
        ag = float(sum(ag_s[st] for st in own))
        if ag > 0 and ex.overlap_param_gather:
            held = sum(params[st].dense + params[st].expert for st in own)
            nb_all = max(1, int(np.ceil(held / DP_BUCKET_PARAMS)))
            first_f = sum(float(fwd[st, 0]) * held_mb for st in own)
            ag_exposed[i] = ag / nb_all + max(0.0, ag * (1 - 1 / nb_all) - first_f)
        else:
            ag_exposed[i] = ag
        tails[i] = dp_exposed[i]
    total = rank_end + dp_exposed
    # The breakdown follows the busiest stage (the pipeline's bottleneck); its idle time up to
    # the slowest stage's finish is bubble.
    busy_all = (fwd.sum(axis=1) + bwd.sum(axis=1)) * m
    crit = int(np.argmax(busy_all))
    # Whose work the breakdown adds up: the busiest stage's m micro-batches, or under
    # DualPipe the busiest rank's two stages, m/2 micro-batches each.
    whose: list[tuple[int, float]] = [(crit, float(m))]
    if dualpipe:
        pairs = dualpipe_pairs(p)
        rank = int(np.argmax([busy_all[a] + busy_all[b] for a, b in pairs]))
        crit = rank
        whose = [(pairs[rank][0], m / 2), (pairs[rank][1], m / 2)]
    # The host issues every micro-batch's launches; where it runs ahead of the GPU it still
    # cannot finish a stage's m micro-batches faster than it issues them (host_ops).
    host_floor = 0.0
    if ex.host_launches:
        # host seconds of one layer and micro-batch, by piece (the same on every stage)
        layer_host = {k: sum(piece_host_s(model, ex, lay, k == "moe")) for k in ("dense", "moe")}
        per_mb = np.zeros(p)
        for s in range(p):
            for c in range(v):
                for key, cnt in chunk_pieces(model, lay, s, c, ex).items():
                    if cnt and key in layer_host:
                        per_mb[s] += cnt * layer_host[key]
        # a rank issues the launches of every stage it holds (DualPipe: two, m/2 each)
        rank_host = [sum(per_mb[st] for st in own) * held_mb for own in owners]
        host_floor = max(0.0, float(max(rank_host) - total.max()))
    iteration = float(
        total.max() + host_floor + opt.max() + ag_exposed.max() + ITERATION_OVERHEAD_S
    )

    # Breakdown along the busiest stage.
    comp = rec = 0.0
    comm: dict[str, float] = {}
    busy = 0.0
    for st, n_mb in whose:
        busy += float(fwd[st].sum() + bwd[st].sum()) * n_mb
        for c in range(v):
            parts = chunk_parts[st][c]
            # passes without an overlap partner (`solo`) count at their own cost
            ns = {
                "fwd": float(((is_fwd[st] == 1) & (chs[st] == c) & (solo[st] == 1)).sum()),
                "bwd": float(((is_fwd[st] == 0) & (chs[st] == c) & (solo[st] == 1)).sum()),
            }
            busy += ns["fwd"] * (fsolo[st, c] - fwd[st, c])
            busy += ns["bwd"] * (bsolo[st, c] - bwd[st, c])
            rec += n_mb * parts["rec"].total
            for key in ("fwd", "bwd"):
                k_mb = n_mb - ns[key]
                comp += k_mb * parts[key].compute + ns[key] * parts[key + "_solo"].compute
                for g, val in parts[key].comm.items():
                    comm[g] = comm.get(g, 0.0) + k_mb * val
                for g, val in parts[key + "_solo"].comm.items():
                    comm[g] = comm.get(g, 0.0) + ns[key] * val
    bubble = max(0.0, float(total.max() - dp_exposed[crit]) - busy)
    breakdown = {
        "compute": comp,
        "recompute": rec,
        "tp": comm.get("tp", 0.0),
        "cp": comm.get("cp", 0.0),
        "ep": comm.get("ep", 0.0),
        "pp": 0.0,
        "dp": comm.get("dp", 0.0) + float(dp_exposed[crit] + ag_exposed.max()),
        "offload": comm.get("offload", 0.0),
        "bubble": bubble,
        "optimizer": float(opt.max()),
        "overhead": ITERATION_OVERHEAD_S,
        "host": comm.get("host", 0.0) + host_floor,
    }
    # p2p hand-offs show up as waits in the list simulation: those on the fill and drain
    # path (2 * (pp - 1) hops) are reported as exposed PP communication, the rest as bubble.
    if p > 1:
        p2p_on_path = min(bubble, 2 * (p - 1) * hop)
        breakdown["pp"] = comm.get("pp", 0.0) + p2p_on_path
        breakdown["bubble"] = bubble - p2p_on_path
    diff = sum(breakdown.values()) - iteration
    if abs(diff) > 1e-9 * max(iteration, 1.0):
        raise InvariantError(
            f"breakdown sums to {sum(breakdown.values()):.6f}s but iteration is {iteration:.6f}s",
            fix="report this configuration; it is a scheduler bug",
        )
    hw = 0.0
    recf = 0.0
    for s in range(p):
        for c in range(v):
            parts = chunk_parts[s][c]
            hw += m * (parts["fwd"].flops + parts["bwd"].flops + parts["rec"].flops)
            recf += m * parts["rec"].flops
    return Timeline(
        iteration_s=iteration,
        breakdown=breakdown,
        stage_end_s=stage_end,
        is_fwd=is_fwd,
        mb=mbs,
        chunk=chs,
        start=start,
        end=end,
        dp_windows=windows,
        tail_s=tails,
        critical_stage=crit,
        hardware_flops=hw * lay.gpus / p,
        recompute_flops=recf * lay.gpus / p,
        peak_inflight_layers=inflight,
        pieces=pieces,
        chunk_fwd=fwd,
        chunk_bwd=bwd,
        boundary_s=float((dp_exposed[crit] if ex.zero < 2 else 0.0) + ag_exposed.max() + opt.max()),
    )
