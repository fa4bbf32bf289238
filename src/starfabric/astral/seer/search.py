"""Configuration search: every valid parallel layout of a model on N GPUs, ranked by throughput.

The analytical search mode prices each distinct *layer shape* (tp, cp, micro-batch, ep, etp,
recompute) once with the operator model, then evaluates every layout built on it — pipeline
fill/drain, interleaving, DP gradient traffic, optimizer, memory — as numpy vectors over all
configurations at once. `mode="scalar"` runs the same formulas one configuration at a time with
no sharing (the reference, and the baseline of the benchmark). The best layouts can then be
re-run through the full timeline with `predict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.comm import make_fabric
from starfabric.astral.seer.cost import DP_OVERLAP_RESIDUAL, CostContext, make_context
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.memory import RESERVED_BYTES, activation_bytes_per_layer
from starfabric.astral.seer.model import ModelSpec, attention_params, mlp_params
from starfabric.astral.seer.ops import OpTable, embedding_ops, layer_ops, logits_ops
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, SystemSpec
from starfabric.astral.seer.schedule import (
    DP_BUCKET_PARAMS,
    ITERATION_OVERHEAD_S,
    OPTIMIZER_BYTES_PER_PARAM,
    PieceCost,
    pass_cost,
    piece_cost,
)
from starfabric.errors import ConfigError, InfeasibleError
from starfabric.units import parse_bandwidth

MICRO_BATCHES = (1, 2, 4, 8)
"""Micro-batch sizes the search tries."""
MAX_VPP = 8
"""Largest number of virtual stages per PP rank the search tries (assumption: beyond this the
extra p2p traffic outweighs the smaller bubble)."""
MAX_CP = 16
"""Largest context-parallel size the search tries."""
RECOMPUTE = ("none", "selective", "full")
RAY_MIN_CHUNK = 256
"""Fewest layouts per Ray task when the chunk size is chosen automatically (one chunk per
cluster CPU otherwise; assumption: below this Ray's per-task overhead of milliseconds
outweighs the work)."""

COLUMNS = ("tp", "cp", "pp", "vpp", "dp", "ep", "etp", "mb", "rec")
"""Integer columns of a configuration table (rec indexes RECOMPUTE)."""


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_configs(
    model: ModelSpec, system: SystemSpec, global_batch: int, seq_len: int
) -> dict[str, np.ndarray[Any, Any]]:
    """Every layout `resolve_layout` accepts, as integer column arrays (zero = 1)."""
    gpus, gpn = system.gpus, system.gpus_per_node
    rows: list[tuple[int, ...]] = []
    tps = [
        t
        for t in _divisors(gpn)
        if model.heads % t == 0 and (model.is_mla or model.kv_heads % t == 0)
    ]
    tps = [t for t in tps if seq_len % t == 0]
    cps = [c for c in _divisors(gpus) if c <= MAX_CP and seq_len % (2 * c) == 0] or [1]
    if 1 not in cps:
        cps.insert(0, 1)
    eps = [e for e in _divisors(model.moe_experts) if e <= gpus] if model.is_moe else [1]
    for tp in tps:
        for cp in cps:
            # Any pp up to the layer count: uneven splits (first/last stages lighter) run
            # without virtual stages.
            for pp in (
                (d for d in _divisors(gpus // (tp * cp)) if d <= model.layers)
                if gpus % (tp * cp) == 0
                else ()
            ):
                mp = tp * cp * pp
                dp = gpus // mp
                per_stage = model.layers // pp if model.layers % pp == 0 else 0
                for mb in MICRO_BATCHES:
                    if global_batch % (mb * dp):
                        continue
                    m = global_batch // (mb * dp)
                    vpps = [1]
                    if pp > 1 and m % pp == 0 and per_stage:
                        vpps += [v for v in _divisors(per_stage) if 1 < v <= MAX_VPP]
                    for vpp in vpps:
                        for ep in eps:
                            etp = 1 if ep > 1 else tp
                            if model.is_moe and (tp * cp * dp) % (ep * etp):
                                continue
                            for rec in range(len(RECOMPUTE)):
                                rows.append((tp, cp, pp, vpp, dp, ep, etp, mb, rec))
    if not rows:
        raise InfeasibleError(
            f"no valid parallel layout of {model.name} on {gpus} GPUs with global_batch "
            f"{global_batch}",
            fix="change the GPU count or the global batch",
        )
    arr = np.asarray(rows, dtype=np.int64)
    return {c: arr[:, i] for i, c in enumerate(COLUMNS)}


@dataclass(frozen=True)
class _LayerKey:
    tp: int
    cp: int
    mb: int
    ep: int
    etp: int


def _layout(system: SystemSpec, key: _LayerKey, nic: float) -> Layout:
    """A one-stage layout carrying what layer costs depend on (tp, cp, ep, etp, placement)."""
    tp, cp = key.tp, key.cp
    gpus = max(tp * cp, key.ep * key.etp)
    return Layout(
        gpus=gpus, gpus_per_node=system.gpus_per_node, tp=tp, pp=1, vpp=1,
        dp=max(1, gpus // (tp * cp)), cp=cp, ep=key.ep, etp=key.etp, edp=1, sp=tp > 1,
        micro_batches=1, stage_layers=((1,),), chunk_first_layer=((0,),),
        nic_bytes_per_s=nic, gpu=get_gpu(system.gpu),
    )  # fmt: skip


def _layer_costs(
    model: ModelSpec, system: SystemSpec, key: _LayerKey, seq_len: int, precision: str, nic: float
) -> np.ndarray[Any, Any]:
    """Per recompute policy (rows, RECOMPUTE order): [dense fwd, dense bwd+rec, moe fwd,
    moe bwd+rec, embedding+logits fwd+bwd, activation bytes per layer, p2p bytes]."""
    lay = _layout(system, key, nic)
    ex = ExecutionSpec(
        global_batch=key.mb, micro_batch=key.mb, seq_len=seq_len, precision=precision,
        tp=key.tp, cp=key.cp, ep=key.ep, etp=key.etp, recompute="none",
    )  # fmt: skip
    ctx: CostContext = make_context(ex, lay, efficiency_for(lay.gpu, system.efficiency))
    out = np.zeros((len(RECOMPUTE), 7))
    emb = piece_cost(embedding_ops(model, ex, lay), ctx, "none")
    head = piece_cost(logits_ops(model, ex, lay), ctx, "none")
    out[:, 4] = emb.fwd.total + emb.bwd.total + head.fwd.total + head.bwd.total
    out[:, 6] = 2.0 * key.mb * seq_len / key.cp * model.hidden / key.tp
    tables = [(0, layer_ops(model, ex, lay, moe=False))]
    if model.is_moe:
        tables.append((2, layer_ops(model, ex, lay, moe=True)))
    for col, table in tables:
        base = piece_cost(table, ctx, "none")
        for r, rec in enumerate(RECOMPUTE):
            pc = _with_recompute(base, table, rec)
            out[r, col] = pc.fwd.total
            out[r, col + 1] = pc.bwd.total + pc.recompute.total
    frac = model.moe_layers / model.layers
    for r, rec in enumerate(RECOMPUTE):
        exr = ex.model_copy(update={"recompute": rec})
        dense_act = activation_bytes_per_layer(model, exr, lay, moe=False)
        moe_act = (
            activation_bytes_per_layer(model, exr, lay, moe=True) if model.is_moe else dense_act
        )
        out[r, 5] = (1 - frac) * dense_act + frac * moe_act
    return out


def _with_recompute(pc: PieceCost, table: OpTable, rec: str) -> PieceCost:
    """The same piece priced under another recompute policy (no re-timing of operators)."""
    if rec == "none":
        return pc
    if rec == "full":
        again = pc.fwd
    else:
        again = pass_cost(table, pc.fwd_costs, np.asarray(table.selective, dtype=bool))
    return PieceCost(pc.fwd, pc.bwd, again, pc.fwd_table, pc.fwd_costs, pc.bwd_table, pc.bwd_costs)


@dataclass(frozen=True)
class SearchResult:
    """All configurations with predicted iteration time, throughput and memory."""

    model: ModelSpec
    configs: dict[str, np.ndarray[Any, Any]]
    iteration_s: np.ndarray[Any, Any]
    tokens_per_s: np.ndarray[Any, Any]
    memory_bytes: np.ndarray[Any, Any]
    feasible: np.ndarray[Any, Any]
    capacity_bytes: float

    def __len__(self) -> int:
        return len(self.iteration_s)

    def ranked(self) -> np.ndarray[Any, Any]:
        """Indices of memory-feasible configurations, fastest first."""
        idx = np.flatnonzero(self.feasible)
        return idx[np.argsort(self.iteration_s[idx], kind="stable")]

    def row(self, i: int) -> dict[str, Any]:
        """One configuration as a JSON-ready mapping."""
        out: dict[str, Any] = {c: int(self.configs[c][i]) for c in COLUMNS if c != "rec"}
        out["recompute"] = RECOMPUTE[int(self.configs["rec"][i])]
        out["iteration_s"] = float(self.iteration_s[i])
        out["tokens_per_s"] = float(self.tokens_per_s[i])
        out["memory_gib"] = float(self.memory_bytes[i] / 2**30)
        return out

    def top(self, n: int = 10) -> list[dict[str, Any]]:
        """The n fastest memory-feasible configurations."""
        return [self.row(int(i)) for i in self.ranked()[:n]]


def _evaluate(
    model: ModelSpec,
    system: SystemSpec,
    cfg: dict[str, np.ndarray[Any, Any]],
    lc: np.ndarray[Any, Any],
    global_batch: int,
    seq_len: int,
    precision: str,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Iteration seconds and peak memory bytes for configuration columns `cfg` whose layer
    costs are the rows of `lc` (vectorized over configurations)."""
    gpu = get_gpu(system.gpu)
    eff = efficiency_for(gpu, system.efficiency)
    nic = parse_bandwidth(system.nic_bandwidth, "system.nic_bandwidth") / 8.0
    tp, cp, pp, vpp, dp = cfg["tp"], cfg["cp"], cfg["pp"], cfg["vpp"], cfg["dp"]
    ep, etp, mb = cfg["ep"], cfg["etp"], cfg["mb"]
    f = lc[:, 0] * (1 - model.moe_layers / model.layers) + lc[:, 2] * (
        model.moe_layers / model.layers
    )
    b = lc[:, 1] * (1 - model.moe_layers / model.layers) + lc[:, 3] * (
        model.moe_layers / model.layers
    )
    layers_stage = np.ceil(model.layers / pp)  # the heaviest stage of an uneven split
    m = global_batch / (mb * dp)
    per_mb_stage = layers_stage * (f + b)
    stage_max = per_mb_stage + lc[:, 4]  # the last stage also runs embedding/logits (pp = 1: all)
    chunk = per_mb_stage / vpp
    # p2p hand-off: inter-node when a PP neighbour sits on another node.
    # The formula CommModel's bus rates (search's closed form is its DP/PP ring on arrays).
    fabric = make_fabric(gpu.nvlink_gbps * 1e9, nic, eff)
    nvl, nicb = fabric.nvlink_bus_bytes_per_s, fabric.nic_bus_bytes_per_s
    cross = (tp * cp * dp) >= system.gpus_per_node
    p2p = np.where(pp > 1, lc[:, 6] / np.where(cross, nicb, nvl), 0.0)
    pipeline = m * stage_max + (pp - 1) * (chunk + 2 * p2p)
    # Parameters per rank on the heaviest stage and their DP gradient traffic.
    norm_w = 2 if model.norm == "layernorm" else 1
    attn = attention_params(model) + 2 * norm_w * model.hidden
    dense_mlp = mlp_params(model, model.ffn_hidden)
    expert = mlp_params(model, model.moe_ffn_hidden) if model.is_moe else 0
    shared = model.moe_shared_experts * expert
    dense_layers = model.dense_layers / pp
    moe_layers = model.moe_layers / pp
    emb = model.vocab * model.hidden
    p_dense = (
        layers_stage * attn + dense_layers * dense_mlp + moe_layers * shared + emb
    ) / tp + moe_layers * model.moe_experts * model.hidden
    p_exp = moe_layers * model.moe_experts / ep * expert / etp
    edp = np.maximum(1, tp * cp * dp // (ep * etp))
    dp_ranks = dp * cp
    # DP(xCP) group: members tp ranks apart (Megatron order); inside a node it runs on NVLink,
    # across nodes on the NICs of its members on each node.
    gpn = system.gpus_per_node
    per_node = np.where(tp >= gpn, 1, np.minimum(dp_ranks, gpn // np.minimum(tp, gpn)))
    ring = np.where(dp_ranks * tp <= gpn, nvl, np.minimum(nvl, per_node * nicb))
    grad_b = 2.0 if precision == "fp16" else 4.0
    t_rs = grad_b * p_dense * (dp_ranks - 1) / dp_ranks / ring
    t_rs += np.where(edp > 1, grad_b * p_exp * (edp - 1) / np.maximum(edp, 1) / nicb, 0.0)
    nb = np.maximum(1.0, np.ceil((p_dense + p_exp) / DP_BUCKET_PARAMS))
    last_bwd = layers_stage * b
    excess = np.where(vpp > 1, _interleaved_dp_exposed(t_rs, nb, vpp, pp, last_bwd / vpp),
                      np.maximum(t_rs / nb, t_rs - last_bwd))  # fmt: skip
    # What ran under the backward still costs DP_OVERLAP_RESIDUAL of it (schedule.py does the
    # same bucket by bucket).
    dp_exposed = excess + DP_OVERLAP_RESIDUAL * np.maximum(0.0, t_rs - excess)
    ag = 2.0 * p_dense * (dp_ranks - 1) / dp_ranks / ring
    ag_exposed = ag / nb
    local = p_dense / dp_ranks + p_exp / edp
    opt = local * OPTIMIZER_BYTES_PER_PARAM / (gpu.hbm_gbps * 1e9 * eff.mem_bw_fraction)
    iteration = pipeline + dp_exposed + ag_exposed + opt + ITERATION_OVERHEAD_S
    # Memory on stage 0: Megatron's warm-up keeps this many chunks in flight.
    inflight = np.where(
        vpp > 1,
        np.minimum(m * vpp, (pp - 1) * 2 + (vpp - 1) * pp + 1) * layers_stage / vpp,
        np.minimum(pp, m) * layers_stage,
    )
    mem = (
        2.0 * (p_dense + p_exp) + grad_b * (p_dense + p_exp) + 12.0 * local
        + inflight * lc[:, 5] + RESERVED_BYTES
    )  # fmt: skip
    return iteration, mem


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


def _evaluate_vectorized(
    model: ModelSpec,
    system: SystemSpec,
    cfg: dict[str, np.ndarray[Any, Any]],
    global_batch: int,
    seq_len: int,
    precision: str,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Price each distinct layer shape of `cfg` once, then evaluate every layout as vectors
    (the search's analytical mode; also what each Ray task runs on its chunk)."""
    nic = parse_bandwidth(system.nic_bandwidth, "system.nic_bandwidth") / 8.0
    stacked = np.stack([cfg[k] for k in _LAYER_KEYS], axis=1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    table = np.stack(
        [
            _layer_costs(model, system, _LayerKey(*map(int, u)), seq_len, precision, nic)
            for u in uniq
        ]
    )
    lc = table[inverse.reshape(-1), cfg["rec"]]
    return _evaluate(model, system, cfg, lc, global_batch, seq_len, precision)


_LAYER_KEYS = ("tp", "cp", "mb", "ep", "etp")


def search(
    model: ModelSpec,
    system: SystemSpec,
    global_batch: int,
    seq_len: int,
    precision: Literal["bf16", "fp16", "fp8"] = "bf16",
    mode: Literal["vectorized", "scalar"] = "vectorized",
    limit: int | None = None,
    ray: str | None = None,
    ray_chunk: int | None = None,
) -> SearchResult:
    """Rank every valid layout of `model` on `system` by predicted throughput (`limit`: an
        evenly spread subset of that many layouts; `ray`: "local" or a cluster address to spread
        the vectorized sweep over Ray tasks of `ray_chunk` layouts each, by default one per cluster
    CPU — same results)."""
    if mode not in ("vectorized", "scalar"):
        raise ConfigError(f"unknown search mode {mode!r}", fix="use vectorized or scalar")
    if ray is not None and mode != "vectorized":
        raise ConfigError(
            f"mode = {mode!r} cannot run on Ray", fix="use mode vectorized with ray, or no ray"
        )
    cfg = enumerate_configs(model, system, global_batch, seq_len)
    if limit is not None and limit < len(cfg["tp"]):
        if limit < 1:
            raise ConfigError(f"limit = {limit} must be >= 1", fix="give a positive count")
        pick = np.unique(np.linspace(0, len(cfg["tp"]) - 1, limit).astype(np.int64))
        cfg = {c: v[pick] for c, v in cfg.items()}
    nic = parse_bandwidth(system.nic_bandwidth, "system.nic_bandwidth") / 8.0
    n = len(cfg["tp"])
    if ray is not None:
        from starfabric.astral.seer.distributed import evaluate_on_ray

        it, mem = evaluate_on_ray(
            ray, model, system, cfg, global_batch, seq_len, precision, ray_chunk, RAY_MIN_CHUNK
        )
    elif mode == "vectorized":
        it, mem = _evaluate_vectorized(model, system, cfg, global_batch, seq_len, precision)
    else:
        it = np.zeros(n)
        mem = np.zeros(n)
        for i in range(n):
            one = {c: cfg[c][i : i + 1] for c in COLUMNS}
            key = _LayerKey(*(int(cfg[k][i]) for k in _LAYER_KEYS))
            costs = _layer_costs(model, system, key, seq_len, precision, nic)
            lc1 = costs[int(cfg["rec"][i])][None, :]
            a, bm = _evaluate(model, system, one, lc1, global_batch, seq_len, precision)
            it[i], mem[i] = a[0], bm[0]
    capacity = get_gpu(system.gpu).hbm_gib * 2**30
    tokens = float(global_batch) * seq_len
    return SearchResult(
        model=model, configs=cfg, iteration_s=it, tokens_per_s=tokens / it,
        memory_bytes=mem, feasible=mem <= capacity, capacity_bytes=capacity,
    )  # fmt: skip
