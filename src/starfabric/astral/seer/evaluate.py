"""The search's evaluator: each distinct layer shape (tp, cp, micro-batch, ep, etp, TP overlap,
ZeRO-3 group) priced once with the operator model (`layer_costs`), then every layout built on
it as numpy vectors over all configurations at once (`evaluate`: pipeline fill/drain,
interleaving, DP gradient traffic, optimizer, offload, memory). search.py enumerates the
layouts and ranks them; distributed.py runs `evaluate_vectorized` on chunks of them as Ray
tasks. Both import this module and it imports neither, so they form no import cycle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import cpu_optimizer_offload, offload
from starfabric.astral.seer.comm import make_fabric, nvlink_domain
from starfabric.astral.seer.cost import DP_OVERLAP_RESIDUAL, CostContext, make_context
from starfabric.astral.seer.deepspeed_bf16_pipe import all_reduces_gradients
from starfabric.astral.seer.dist_opt_gather import gather_bytes_per_param
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fabric import (
    COLLECTIVE_LAUNCH_S,
    NIC_STEP_LATENCY_S,
    NVLINK_STEP_LATENCY_S,
    Fabric,
)
from starfabric.astral.seer.memory import (
    RESERVED_BYTES,
    activation_bytes_per_layer,
)
from starfabric.astral.seer.model import ModelSpec, attention_params, mlp_params, mtp_params
from starfabric.astral.seer.ops import OpTable, embedding_ops, layer_ops, logits_ops, mtp_ops
from starfabric.astral.seer.optimizer_state import optimizer_bytes
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, SystemSpec
from starfabric.astral.seer.schedule import (
    DP_BUCKET_PARAMS,
    ITERATION_OVERHEAD_S,
    OPTIMIZER_BYTES_PER_PARAM,
    PieceCost,
    full_recompute_cost,
    grad_bytes,
    pass_cost,
    piece_cost,
)
from starfabric.units import parse_bandwidth

RECOMPUTE = ("none", "selective", "full")
"""Recompute policies, in the order of a configuration's `rec` column and of `layer_costs`' rows."""


@dataclass(frozen=True)
class LayerKey:
    tp: int
    cp: int
    mb: int
    ep: int
    etp: int
    tpo: int
    fsdp_dp: int
    """DP size of a ZeRO-3 run without pipelining (its gathers sit in the layer), else 0."""


def _layout(system: SystemSpec, key: LayerKey, nic: float) -> Layout:
    """A one-stage layout carrying what layer costs depend on (tp, cp, ep, etp, placement)."""
    tp, cp = key.tp, key.cp
    gpus = max(tp * cp * max(1, key.fsdp_dp), key.ep * key.etp)
    edp = max(1, gpus // (key.ep * key.etp)) if key.fsdp_dp else 1
    return Layout(
        gpus=gpus, gpus_per_node=system.gpus_per_node, tp=tp, pp=1, vpp=1,
        dp=max(1, gpus // (tp * cp)), cp=cp, ep=key.ep, etp=key.etp, edp=edp, sp=tp > 1,
        micro_batches=1, stage_layers=((1,),), chunk_first_layer=((0,),),
        nic_bytes_per_s=nic, gpu=get_gpu(system.gpu),
    )  # fmt: skip


def layer_costs(
    model: ModelSpec,
    system: SystemSpec,
    key: LayerKey,
    seq_len: int,
    precision: str,
    nic: float,
    base: ExecutionSpec | None = None,
) -> np.ndarray[Any, Any]:
    """Per recompute policy (rows, RECOMPUTE order): [dense fwd, dense bwd+rec, moe fwd,
    moe bwd+rec, embedding+logits(+MTP) fwd+bwd, activation bytes per layer, p2p bytes,
    dense activation bytes, MoE activation bytes]. `base`: the stack (search_stack.py) the
    layer runs with; its layout fields are replaced by the key's, None: the defaults."""
    lay = _layout(system, key, nic)
    layout = {
        "global_batch": key.mb, "micro_batch": key.mb, "seq_len": seq_len,
        "precision": precision, "tp": key.tp, "cp": key.cp, "ep": key.ep, "etp": key.etp,
        "recompute": "none", "tp_comm_overlap": bool(key.tpo), "zero": 3 if key.fsdp_dp else 1,
    }  # fmt: skip
    if base is None:
        ex = ExecutionSpec(**layout)
    else:  # every other layout field back to its default (one stage, no offload)
        ex = base.model_copy(update={**_ONE_STAGE, **layout})
    eff = efficiency_for(lay.gpu, system.efficiency)
    ctx: CostContext = make_context(ex, lay, eff, model=model)  # model: DeepEP dedup (comm.py)
    out = np.zeros((len(RECOMPUTE), 9))
    emb = piece_cost(embedding_ops(model, ex, lay), ctx, "none")
    head = piece_cost(logits_ops(model, ex, lay), ctx, "none")
    out[:, 4] = emb.fwd.total + emb.bwd.total + head.fwd.total + head.bwd.total
    out[:, 6] = 2.0 * key.mb * seq_len / key.cp * model.hidden / key.tp
    tables = [(0, layer_ops(model, ex, lay, moe=False))]
    if model.is_moe:
        tables.append((2, layer_ops(model, ex, lay, moe=True)))
    for col, table in tables:
        plain = piece_cost(table, ctx, "none")
        for r, rec in enumerate(RECOMPUTE):
            pc = _with_recompute(plain, table, rec)
            out[r, col] = pc.fwd.total
            out[r, col + 1] = pc.bwd.total + pc.recompute.total
    if model.mtp_layers:
        mtp_table = mtp_ops(model, ex, lay)
        mtp = piece_cost(mtp_table, ctx, "none")
        for r, rec in enumerate(RECOMPUTE):
            pc = _with_recompute(mtp, mtp_table, rec)
            out[r, 4] += pc.fwd.total + pc.bwd.total + pc.recompute.total
    frac = model.moe_layers / model.layers
    for r, rec in enumerate(RECOMPUTE):
        exr = ex.model_copy(update={"recompute": rec})
        dense_act = activation_bytes_per_layer(model, exr, lay, moe=False)
        moe_act = (
            activation_bytes_per_layer(model, exr, lay, moe=True) if model.is_moe else dense_act
        )
        out[r, 5] = (1 - frac) * dense_act + frac * moe_act
        out[r, 7], out[r, 8] = dense_act, moe_act
    return out


_ONE_STAGE = {
    k: ExecutionSpec.model_fields[k].default
    for k in ("pp", "vpp", "dp", "pipeline_layers", "overlap_grad_reduce", "overlap_param_gather",
              "offload_activations", "offload_weights", "optimizer_offload_fraction")
}  # fmt: skip
"""The layout fields a layer's cost does not depend on, at ExecutionSpec's defaults."""


def _with_recompute(pc: PieceCost, table: OpTable, rec: str) -> PieceCost:
    """The same piece priced under another recompute policy (no re-timing of operators)."""
    if rec == "none":
        return pc
    if rec == "full":
        again = full_recompute_cost(table, pc.fwd_costs)
    else:
        again = pass_cost(table, pc.fwd_costs, np.asarray(table.selective, dtype=bool))
    return PieceCost(pc.fwd, pc.bwd, again, pc.fwd_table, pc.fwd_costs, pc.bwd_table, pc.bwd_costs)


def evaluate(
    model: ModelSpec,
    system: SystemSpec,
    cfg: dict[str, np.ndarray[Any, Any]],
    lc: np.ndarray[Any, Any],
    global_batch: int,
    seq_len: int,
    precision: str,
    base: ExecutionSpec | None = None,
    terms: dict[str, np.ndarray[Any, Any]] | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Iteration seconds, peak HBM bytes and offloaded bytes for configuration columns `cfg`
    whose layer costs are the rows of `lc` (vectorized over configurations); `base`'s stack
    sets the gradient dtype, the optimizer moments and the CPU optimizer's overlap/threads.
    `terms`, when given, receives the iteration's parts by name (the DP collectives split dense/expert, their
    exposed parts, pipeline, optimizer), as
    `schedule.build_timeline`'s breakdown does for one layout (the search/predict harness)."""
    gpu = get_gpu(system.gpu)
    eff = efficiency_for(gpu, system.efficiency)
    nic = parse_bandwidth(system.nic_bandwidth, "system.nic_bandwidth") / 8.0
    tp, cp, pp, vpp, dp = cfg["tp"], cfg["cp"], cfg["pp"], cfg["vpp"], cfg["dp"]
    ep, etp, mb = cfg["ep"], cfg["etp"], cfg["mb"]
    zero, dpo = cfg["zero"], cfg["dpo"] > 0
    off_act, off_w = (cfg["off"] & 1) > 0, (cfg["off"] & 2) > 0
    off_cpu = (cfg["off"] & 4) > 0  # Megatron-Core's optimizer CPU offload, fraction 1
    if base is None:
        base = ExecutionSpec(global_batch=global_batch, seq_len=seq_len, precision=precision)
    grad_b = grad_bytes(base)
    ag_b = gather_bytes_per_param(base.param_gather_dtype, grad_b)  # dist_opt_gather
    # Parameters per rank of one dense / MoE layer (schedule.layer_params on arrays).
    norm_w = 2 if model.norm == "layernorm" else 1
    attn = attention_params(model) + 2 * norm_w * model.hidden
    dense_mlp = mlp_params(model, model.ffn_hidden)
    expert = mlp_params(model, model.moe_ffn_hidden) if model.is_moe else 0
    shared = model.moe_shared_experts * expert
    lp_d = (attn - 2 * norm_w * model.hidden + dense_mlp) / tp + 2 * norm_w * model.hidden
    lp_m = (
        (attn - 2 * norm_w * model.hidden + shared) / tp + 2 * norm_w * model.hidden
        + model.moe_experts * model.hidden + model.moe_experts / ep * expert / etp
    )  # fmt: skip
    # Offload traffic beyond each pass's compute (offload.py, as schedule._with_offload).
    link = offload.link_bytes_per_s(gpu)
    costs = []
    for col_f, col_act, lp in ((0, 7, lp_d), (2, 8, lp_m)):
        f_l, b_l = lc[:, col_f], lc[:, col_f + 1]
        if link > 0:
            fb, bb = offload.pass_bytes(lc[:, col_act], lp, grad_b, off_act, off_w)
            f_l = f_l + offload.exposed(fb, f_l, link)
            b_l = b_l + offload.exposed(bb, b_l, link)
        costs.append((f_l, b_l))
    frac = model.moe_layers / model.layers
    f = costs[0][0] * (1 - frac) + costs[1][0] * frac
    b = costs[0][1] * (1 - frac) + costs[1][1] * frac
    layers_stage = np.ceil(model.layers / pp)  # the heaviest stage of an uneven split
    m = global_batch / (mb * dp)
    per_mb_stage = layers_stage * (f + b)
    stage_max = per_mb_stage + lc[:, 4]  # the last stage also runs embedding/logits (pp = 1: all)
    chunk = per_mb_stage / vpp
    # The formula CommModel's bus rates (search's closed form is its DP/PP ring on arrays).
    fabric = make_fabric(gpu.nvlink_gbps * 1e9, nic, eff)
    nvl, nicb = fabric.nvlink_bus_bytes_per_s, fabric.nic_bus_bytes_per_s
    gpn = nvlink_domain(system.gpus_per_node, gpu, system.gpus)
    p2p = pipeline_hop_s(lc[:, 6], pp, tp * cp * dp, gpn, fabric)
    pipeline = m * stage_max + (pp - 1) * chunk + exposed_hops(pp, vpp) * p2p
    # Parameters per rank on the heaviest stage and their DP gradient traffic.
    dense_layers = model.dense_layers / pp
    moe_layers = model.moe_layers / pp
    # One pipeline stage holds both the input embedding and an untied output head
    # (schedule.stage_params); with pp > 1 the heaviest stage holds one of them. MTP modules
    # sit with the output head, and with pp > 1 that stage also builds its own copy of the
    # input embedding (schedule.stage_params, Megatron-Core gpt_model.py; not under DualPipe).
    mtp_d, mtp_e = mtp_params(model)
    mtp_emb = bool(model.mtp_layers) and base.pipeline_schedule != "dualpipe"
    emb = (
        model.vocab
        * model.hidden
        * np.where(pp == 1, 1 + int(not model.tied_embeddings), 1 + int(mtp_emb))
    )
    p_dense = (
        layers_stage * attn + dense_layers * dense_mlp + moe_layers * shared + emb + mtp_d
    ) / tp + moe_layers * model.moe_experts * model.hidden
    p_exp = moe_layers * model.moe_experts / ep * expert / etp + mtp_e / (ep * etp)
    edp = np.maximum(1, tp * cp * dp // (ep * etp))
    dp_ranks = dp * cp
    # DP(xCP) group: members tp ranks apart (Megatron order); inside a node it runs on NVLink,
    # across nodes on the NICs of its members on each node. The expert-DP group that reduces
    # and gathers the expert parameters is placed the same way, members etp*ep ranks apart
    # (Megatron-Core parallel_state.py @d98e8a6: `expert_decoder_rank_generator`, order
    # tp-ep-dp-pp with tp = ETP, cp = 1), as predict's comm.layout_groups "edp".
    ring = ring_bus(dp_ranks, tp, gpn, nvl, nicb)
    ring_e = ring_bus(edp, ep * etp, gpn, nvl, nicb)
    # ZeRO 0: all-reduce (twice a reduce-scatter's traffic); ZeRO-3 without PP reduces and
    # gathers inside every layer (in lc); otherwise reduce-scatter + parameter all-gather.
    fsdp = (zero == 3) & (pp == 1)
    full = all_reduces_gradients(zero, base.deepspeed_bf16_pipe, pp)  # deepspeed_bf16_pipe
    coll = np.where(full, 2.0, np.where(fsdp, 0.0, 1.0))
    rs_dense = coll * grad_b * p_dense * (dp_ranks - 1) / dp_ranks / ring
    rs_exp = coll * grad_b * p_exp * (edp - 1) / edp / ring_e
    t_rs = rs_dense + rs_exp
    nb = np.maximum(1.0, np.ceil((p_dense + p_exp) / DP_BUCKET_PARAMS))
    last_bwd = layers_stage * b
    excess = np.where(vpp > 1, _interleaved_dp_exposed(t_rs, nb, vpp, pp, last_bwd / vpp),
                      np.maximum(t_rs / nb, t_rs - last_bwd))  # fmt: skip
    # What ran under the backward still costs DP_OVERLAP_RESIDUAL of it (schedule.py does the
    # same bucket by bucket); without overlap the whole reduction follows the pipeline.
    dp_exposed = np.where(dpo, excess + DP_OVERLAP_RESIDUAL * np.maximum(0.0, t_rs - excess), t_rs)
    gathers = (zero >= 1) & ~fsdp
    ag_dense = np.where(gathers, ag_b * p_dense * (dp_ranks - 1) / dp_ranks / ring, 0.0)
    ag_exp = np.where(gathers, ag_b * p_exp * (edp - 1) / edp / ring_e, 0.0)
    ag = ag_dense + ag_exp
    # Overlapped, the first bucket's gather waits and the rest hide under the forward passes
    # of the stage's first chunk over all micro-batches; what outlasts them is exposed
    # (schedule.build_timeline's `first_f` window).
    first_f = m * layers_stage * f / vpp
    ag_exposed = np.where(dpo, ag / nb + np.maximum(0.0, ag * (1 - 1 / nb) - first_f), ag)
    shard = zero >= 1
    local = np.where(shard, p_dense / dp_ranks + p_exp / edp, p_dense + p_exp)
    opt = local * OPTIMIZER_BYTES_PER_PARAM / (gpu.hbm_gbps * 1e9 * eff.mem_bw_fraction)
    if link > 0:
        opt = np.where(off_w, np.maximum(opt, offload.optimizer_s(local, link)), opt)
    if off_cpu.any():  # as schedule.py: cpu_optimizer_offload.step_s, overlapped copies
        opt = np.where(
            off_cpu,
            cpu_optimizer_offload.step_s(
                local, 1.0, opt, gpu, base.overlap_cpu_optimizer, base.cpu_optimizer_threads
            ),
            opt,
        )
    iteration = pipeline + dp_exposed + ag_exposed + opt + ITERATION_OVERHEAD_S
    if terms is not None:
        terms.update(pipeline=pipeline, dense_rs=rs_dense, exp_rs=rs_exp, dense_ag=ag_dense,
                     exp_ag=ag_exp, dp_exposed=dp_exposed, ag_exposed=ag_exposed,
                     optimizer=opt)  # fmt: skip
    # Memory on stage 0: Megatron's warm-up keeps this many chunks in flight.
    inflight = np.where(
        vpp > 1,
        np.minimum(m * vpp, (pp - 1) * 2 + (vpp - 1) * pp + 1) * layers_stage / vpp,
        np.minimum(pp, m) * layers_stage,
    )
    params = p_dense + p_exp
    sharded = p_dense / dp_ranks + p_exp / edp
    weights = 2.0 * np.where(fsdp, sharded, params)
    grads = grad_b * np.where(zero >= 2, sharded, params)
    states = optimizer_bytes(base.optimizer_moments) * local
    acts = inflight * lc[:, 5]
    resident = offload.RESIDENT_LAYERS * np.maximum(lc[:, 7], lc[:, 8])
    moved_acts = np.where(off_act, np.maximum(0.0, acts - resident), 0.0)
    keep = offload.RESIDENT_LAYERS * np.maximum(lp_d, lp_m if model.is_moe else lp_d)
    moved = moved_acts + np.where(off_w, weights + grads + states, 0.0)
    weights = np.where(off_w, 2.0 * keep, weights)
    grads = np.where(off_w, grad_b * keep, grads)
    states = np.where(off_w | off_cpu, 0.0, states)
    mem = weights + grads + states + acts - moved_acts + RESERVED_BYTES
    host = np.where(off_cpu, cpu_optimizer_offload.host_bytes(1.0, 1.0) * local, 0.0)
    if gpu.offload_gib:  # on Grace the host memory is the second tier (memory.py)
        moved = moved + host
    else:  # pinned host memory short: the configuration does not fit
        mem = np.where(host > (gpu.host_mem_gib or 0.0) * 2**30, np.inf, mem)
    return iteration, mem, moved


def ring_bus(
    size: np.ndarray[Any, Any],
    stride: np.ndarray[Any, Any],
    gpn: int,
    nvl: float,
    nicb: float,
) -> np.ndarray[Any, Any]:
    """Bus bytes/s of a ring collective on a group of `size` ranks `stride` apart, as
    comm.collective_time prices comm.place_group's group: NVLink inside one node, else the
    NICs of its members on each node (at most NVLink)."""
    per_node = np.where(stride >= gpn, 1, np.minimum(size, gpn // np.minimum(stride, gpn)))
    return np.where(size * stride <= gpn, nvl, np.minimum(nvl, per_node * nicb))


def pipeline_hop_s(
    nbytes: np.ndarray[Any, Any],
    pp: np.ndarray[Any, Any],
    stride: np.ndarray[Any, Any],
    gpn: int,
    fabric: Fabric,
) -> np.ndarray[Any, Any]:
    """Seconds of one activation hand-off between PP stages, as predict prices it
    (comm.collective_time "p2p" on comm.place_group's PP group, members tp*cp*dp apart): on
    the NICs when the PP group spans nodes, else NVLink; launch and step latency included."""
    per_node = np.where(stride >= gpn, 1, np.minimum(pp, gpn // np.maximum(stride, 1)))
    cross = per_node < pp
    nvl_bw, nic_bw, _, _ = fabric.tiers("p2p")
    lat = np.where(cross, NIC_STEP_LATENCY_S, NVLINK_STEP_LATENCY_S)
    hop = COLLECTIVE_LAUNCH_S + lat + nbytes / np.where(cross, nic_bw, nvl_bw)
    return np.where(pp > 1, hop, 0.0)


def exposed_hops(pp: np.ndarray[Any, Any], vpp: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Activation hand-offs on the critical path of 1F1B: the fill and the drain cross every
    stage boundary a micro-batch crosses, pp - 1 without interleaving; with VPP v a micro-batch
    crosses pp * v - 1 chunk boundaries each way, and Megatron's interleaved warm-up (micro-batch
    groups of pp) waits for each chunk's hand-off to come round the ring before the next chunk,
    as predict's list schedule (_kernels.pipeline_times) measures: 2 * (pp * v - 1)."""
    return np.where(pp > 1, 2.0 * (pp * vpp - 1), 0.0)


def _interleaved_dp_exposed(
    t_rs: np.ndarray[Any, Any],
    nb: np.ndarray[Any, Any],
    vpp: np.ndarray[Any, Any],
    pp: np.ndarray[Any, Any],
    chunk_bwd: np.ndarray[Any, Any],
) -> np.ndarray[Any, Any]:
    """Gradient reduce-scatter left after the pipeline drains under interleaved 1F1B: chunk c
    finishes its last backward c*pp chunk-backwards before the end (the cool-down runs chunks
    v-1 ... 0, pp micro-batches each), its 1/v of the gradients then queue on one stream — the
    closed form of what `schedule.build_timeline` simulates bucket by bucket."""
    free = np.full(t_rs.shape, -np.inf)
    per_chunk = t_rs / vpp
    bucket = chunk_bwd / np.maximum(1.0, nb / vpp)
    for c in range(int(vpp.max()) - 1, -1, -1):
        on = c < vpp
        ready = -(c * pp + 1) * chunk_bwd + bucket
        free = np.where(on, np.maximum(ready, free) + per_chunk, free)
    return np.maximum(0.0, free)


def evaluate_vectorized(
    model: ModelSpec,
    system: SystemSpec,
    cfg: dict[str, np.ndarray[Any, Any]],
    global_batch: int,
    seq_len: int,
    precision: str,
    base: ExecutionSpec | None = None,
    terms: dict[str, np.ndarray[Any, Any]] | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Price each distinct layer shape of `cfg` once, then evaluate every layout as vectors
    (the search's analytical mode; also what each Ray task runs on its chunk) with `base`'s
    stack (search_stack.py; None: the defaults)."""
    nic = parse_bandwidth(system.nic_bandwidth, "system.nic_bandwidth") / 8.0
    stacked = np.stack([key_columns(cfg)[k] for k in LAYER_KEYS], axis=1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    table = np.stack(
        [
            layer_costs(model, system, LayerKey(*map(int, u)), seq_len, precision, nic, base)
            for u in uniq
        ]
    )
    lc = table[inverse.reshape(-1), cfg["rec"]]
    return evaluate(model, system, cfg, lc, global_batch, seq_len, precision, base, terms)


LAYER_KEYS = ("tp", "cp", "mb", "ep", "etp", "tpo", "fsdp_dp")


def key_columns(cfg: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
    """The columns a layer's cost depends on (fsdp_dp: the DP size when ZeRO-3 runs its
    gathers inside the layer, i.e. without pipelining)."""
    fsdp = (cfg["zero"] == 3) & (cfg["pp"] == 1) & (cfg["dp"] * cfg["cp"] > 1)
    return {**cfg, "fsdp_dp": np.where(fsdp, cfg["dp"], 0)}


__all__ = [
    "LAYER_KEYS",
    "RECOMPUTE",
    "LayerKey",
    "evaluate",
    "evaluate_vectorized",
    "key_columns",
    "layer_costs",
    "ring_bus",
]
