"""Configuration search: every valid parallel layout of a model on N GPUs, ranked by throughput.

The space is what Calculon (Isaev et al., SC'23) varies: TP/CP/PP/VPP/DP/EP/expert-TP,
micro-batch, recompute, TP communication overlap, DP overlap, optimizer sharding (ZeRO 0-3,
ZeRO-1 = Megatron's distributed optimizer), and activation/weight offload where the GPU has a
second memory tier in the hardware catalog (GH200/GB200 Grace memory; none on HGX H100).
The analytical search mode prices each distinct *layer shape* (tp, cp, micro-batch, ep, etp,
TP overlap, ZeRO-3 group) once with the operator model, then evaluates every layout built on
it — pipeline fill/drain, interleaving, DP gradient traffic, optimizer, offload, memory — as
numpy vectors over all configurations at once, with the same offload functions as the
schedule (evaluate.py; distributed.py runs it on chunks of layouts as Ray tasks).
`mode="scalar"` runs the same formulas one configuration at a time with no sharing (the
reference, and the baseline of the benchmark). The best layouts can then be re-run through
the full timeline with `predict`.

PP hand-offs are priced as predict's schedule exposes them (evaluate.pipeline_hop_s,
evaluate.exposed_hops): 2 * (pp * vpp - 1) activation hops per iteration, on the NICs when the
PP group spans nodes. Before (2 * (pp - 1) hops), Llama-3.1-8B on 16 GPUs with PP 2, VPP 8 and
2 micro-batches was 43 ms under predict on H100 and B200 alike (3.9% and 7.1%: the same
network seconds on B200's shorter iteration); now 0.02% (test_search_pipeline_p2p.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import cpu_optimizer_offload
from starfabric.astral.seer.distributed import evaluate_on_ray
from starfabric.astral.seer.evaluate import (
    LAYER_KEYS,
    RECOMPUTE,
    LayerKey,
    evaluate,
    evaluate_vectorized,
    key_columns,
    layer_costs,
)
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import (
    ExecutionSpec,
    SystemSpec,
    check_cp_comm,
    check_dense_stack,
    uneven_pipeline_layers,
)
from starfabric.astral.seer.search_stack import search_base, stack_settings
from starfabric.errors import ConfigError, InfeasibleError
from starfabric.units import parse_bandwidth

MICRO_BATCHES = (1, 2, 4, 8)
"""Micro-batch sizes the search tries."""
MAX_VPP = 8
"""Largest number of virtual stages per PP rank the search tries (assumption: beyond this the
extra p2p traffic outweighs the smaller bubble)."""
MAX_CP = 16
"""Largest context-parallel size the search tries."""
RAY_MIN_CHUNK = 256
"""Fewest layouts per Ray task when the chunk size is chosen automatically (one chunk per
cluster CPU otherwise; assumption: below this Ray's per-task overhead of milliseconds
outweighs the work)."""

OFFLOAD = ("none", "activations", "weights", "both", "optimizer", "activations+optimizer")
"""Offload settings (bit 0: activations, bit 1: weights + optimizer states to the second tier,
bit 2: Megatron-Core's optimizer CPU offload, all of it, seer/cpu_optimizer_offload.py)."""
ZERO_STAGES = (0, 1, 2, 3)
"""Optimizer sharding the search tries when DP > 1 (ZeRO-1 alone otherwise)."""

COLUMNS = ("tp", "cp", "pp", "vpp", "dp", "ep", "etp", "mb", "rec", "tpo", "dpo", "zero", "off")
"""Integer columns of a configuration table (rec indexes RECOMPUTE; tpo: TP comm overlap;
dpo: DP gradient-reduce and parameter-gather overlap; zero: ZeRO stage; off indexes OFFLOAD)."""


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_configs(
    model: ModelSpec,
    system: SystemSpec,
    global_batch: int,
    seq_len: int,
    base: ExecutionSpec | None = None,
) -> dict[str, np.ndarray[Any, Any]]:
    """Every layout `resolve_layout` accepts with `base`'s stack (its CP algorithm and
    optimizer moments decide some), as integer column arrays (zero = 1)."""
    gpus, gpn = system.gpus, system.gpus_per_node
    rows: Any = []
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
            if base is not None and not _cp_ok(model, base, tp, cp, gpn):
                continue
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
                                rows.append((tp, cp, pp, vpp, dp, ep, etp, mb, rec, 0, 1, 1, 0))
    if rows:
        rows = _expand(np.asarray(rows, dtype=np.int64), model, system, base)
    if not len(rows):
        raise InfeasibleError(
            f"no valid parallel layout of {model.name} on {gpus} GPUs with global_batch "
            f"{global_batch}",
            fix="change the GPU count or the global batch",
        )
    arr = np.asarray(rows, dtype=np.int64)
    return {c: arr[:, i] for i, c in enumerate(COLUMNS)}


def _cp_ok(model: ModelSpec, stack: ExecutionSpec, tp: int, cp: int, gpus_per_node: int) -> bool:
    """Whether the stack's CP algorithm splits this tp x cp (TransformerEngine's checks)."""
    try:
        check_cp_comm(model, stack.model_copy(update={"tp": tp, "cp": cp}), gpus_per_node)
    except InfeasibleError:
        return False
    return True


def _expand(
    rows: np.ndarray[Any, Any], model: ModelSpec, system: SystemSpec, stack: ExecutionSpec | None
) -> Any:
    """Every base layout crossed with the switches that apply to it: TP overlap when tp > 1,
    DP overlap and ZeRO 0-3 when a DP group exists, offload when the GPU has a second memory
    tier (hardware catalog `offload_gib`), the optimizer CPU offload when the catalog knows
    the GPU's host (`host_link_gbps`, ...) and the stack keeps fp32 moments (resolve_layout)."""
    base = rows
    col = {c: i for i, c in enumerate(COLUMNS)}
    gpu = get_gpu(system.gpu)
    offs = [0, 1, 2, 3] if gpu.offload_gib else [0]
    fp32_moments = stack is None or stack.optimizer_moments == "fp32"
    if cpu_optimizer_offload.available(gpu) and fp32_moments:
        offs += [4, 5] if gpu.offload_gib else [4]
    parts = []
    for tpo in (0, 1):
        for dpo in (1, 0):
            for zero in ZERO_STAGES:
                for off in offs:
                    a = base.copy()
                    a[:, col["tpo"]], a[:, col["dpo"]] = tpo, dpo
                    a[:, col["zero"]], a[:, col["off"]] = zero, off
                    tp, dp, cp = a[:, col["tp"]], a[:, col["dp"]], a[:, col["cp"]]
                    ok = (tp > 1) | (tpo == 0)
                    ok &= (dp * cp > 1) | ((dpo == 1) & (zero == 1))
                    parts.append(a[ok])
    return np.concatenate(parts)


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
    offloaded_bytes: np.ndarray[Any, Any] | None = None
    global_batch: int = 0
    seq_len: int = 0
    precision: str = "bf16"
    base: ExecutionSpec | None = None
    """The stack every layout was priced with (search_stack.py); None: the defaults."""

    def __len__(self) -> int:
        return len(self.iteration_s)

    def ranked(self) -> np.ndarray[Any, Any]:
        """Indices of memory-feasible configurations, fastest first."""
        idx = np.flatnonzero(self.feasible)
        return idx[np.argsort(self.iteration_s[idx], kind="stable")]

    def row(self, i: int) -> dict[str, Any]:
        """One configuration as a JSON-ready mapping."""
        out: dict[str, Any] = {
            c: int(self.configs[c][i]) for c in COLUMNS if c not in ("rec", "tpo", "dpo", "off")
        }
        out["recompute"] = RECOMPUTE[int(self.configs["rec"][i])]
        out["tp_comm_overlap"] = bool(self.configs["tpo"][i])
        out["dp_overlap"] = bool(self.configs["dpo"][i])
        out["offload"] = OFFLOAD[int(self.configs["off"][i])]
        out["iteration_s"] = float(self.iteration_s[i])
        out["tokens_per_s"] = float(self.tokens_per_s[i])
        out["memory_gib"] = float(self.memory_bytes[i] / 2**30)
        return out

    def execution(self, i: int) -> dict[str, Any]:
        """Configuration i as `predict`'s execution settings: the base stack and the layout, the
        same job the search priced (uneven pipelines get `uneven_pipeline_layers`)."""
        c = {k: int(v[i]) for k, v in self.configs.items()}
        ex: dict[str, Any] = stack_settings(self.base) if self.base is not None else {}
        ex |= {
            "global_batch": self.global_batch, "seq_len": self.seq_len,
            "precision": self.precision, "tp": c["tp"], "pp": c["pp"], "vpp": c["vpp"],
            "dp": c["dp"], "cp": c["cp"], "ep": c["ep"], "micro_batch": c["mb"],
            "recompute": RECOMPUTE[c["rec"]], "tp_comm_overlap": bool(c["tpo"]),
            "overlap_grad_reduce": bool(c["dpo"]), "overlap_param_gather": bool(c["dpo"]),
            # OFFLOAD's index is its bit mask: "activations+optimizer" (5) has bit 0 too
            "zero": c["zero"], "offload_activations": bool(c["off"] & 1),
            "offload_weights": bool(c["off"] & 2),
            "optimizer_offload_fraction": 1.0 if c["off"] & 4 else 0.0,
        }  # fmt: skip
        if self.model.is_moe:
            ex["etp"] = c["etp"]
        chunks = c["pp"] * c["vpp"]
        if self.model.layers % chunks:
            ex["pipeline_layers"] = list(uneven_pipeline_layers(self.model.layers, chunks))
        return ex

    def top(self, n: int = 10) -> list[dict[str, Any]]:
        """The n fastest memory-feasible configurations."""
        return [self.row(int(i)) for i in self.ranked()[:n]]


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
    stack: ExecutionSpec | None = None,
) -> SearchResult:
    """Rank every valid layout of `model` on `system` by predicted throughput (`limit`: an
    evenly spread subset of that many layouts; `ray`: "local" or a cluster address to spread
    the vectorized sweep over Ray tasks of `ray_chunk` layouts each, by default one per cluster
    CPU — same results; `stack`: the user's execution, whose stack fields every layout is
    priced with and whose layout fields the search replaces — search_stack.py)."""
    if mode not in ("vectorized", "scalar"):
        raise ConfigError(f"unknown search mode {mode!r}", fix="use vectorized or scalar")
    if ray is not None and mode != "vectorized":
        raise ConfigError(
            f"mode = {mode!r} cannot run on Ray", fix="use mode vectorized with ray, or no ray"
        )
    base = search_base(stack, global_batch, seq_len, precision)
    if not model.is_moe:
        check_dense_stack(base)  # as predict's resolve_layout refuses it
    cfg = enumerate_configs(model, system, global_batch, seq_len, base)
    if limit is not None and limit < len(cfg["tp"]):
        if limit < 1:
            raise ConfigError(f"limit = {limit} must be >= 1", fix="give a positive count")
        pick = np.unique(np.linspace(0, len(cfg["tp"]) - 1, limit).astype(np.int64))
        cfg = {c: v[pick] for c, v in cfg.items()}
    nic = parse_bandwidth(system.nic_bandwidth, "system.nic_bandwidth") / 8.0
    n = len(cfg["tp"])
    if ray is not None:
        it, mem, moved = evaluate_on_ray(
            ray,
            model,
            system,
            cfg,
            global_batch,
            seq_len,
            precision,
            ray_chunk,
            RAY_MIN_CHUNK,
            base,
        )
    elif mode == "vectorized":
        it, mem, moved = evaluate_vectorized(
            model, system, cfg, global_batch, seq_len, precision, base
        )
    else:
        it, mem, moved = np.zeros(n), np.zeros(n), np.zeros(n)
        keys = key_columns(cfg)
        for i in range(n):
            one = {c: cfg[c][i : i + 1] for c in COLUMNS}
            key = LayerKey(*(int(keys[k][i]) for k in LAYER_KEYS))
            costs = layer_costs(model, system, key, seq_len, precision, nic, base)
            lc1 = costs[int(cfg["rec"][i])][None, :]
            a, bm, mv = evaluate(model, system, one, lc1, global_batch, seq_len, precision, base)
            it[i], mem[i], moved[i] = a[0], bm[0], mv[0]
    gpu = get_gpu(system.gpu)
    capacity = gpu.hbm_gib * 2**30
    off_capacity = (gpu.offload_gib or 0.0) * 2**30
    tokens = float(global_batch) * seq_len
    return SearchResult(
        model=model, configs=cfg, iteration_s=it, tokens_per_s=tokens / it,
        memory_bytes=mem, feasible=(mem <= capacity) & (moved <= off_capacity),
        capacity_bytes=capacity, offloaded_bytes=moved, global_batch=global_batch,
        seq_len=seq_len, precision=precision, base=base,
    )  # fmt: skip
