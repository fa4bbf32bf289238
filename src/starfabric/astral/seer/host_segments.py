"""Where a Megatron-Core MoE layer's forward waits for the GPU, and the pass that follows.

`host_ops.segment_time` charged a synced forward pass max(host, GPU): as if the host's
launches and the GPU's kernels overlapped perfectly between two waits. The wait splits the
timeline into segments; inside one the host issues modules in order and the GPU runs each
module only after the host has issued it, so a segment is a two-stage flow shop with a fixed
order (host, then GPU, per module) whose makespan is

    T = max over j of ( sum_{i <= j} host_i + sum_{i >= j} gpu_i )      (`flow_shop`)

(Johnson 1954, the permutation flow shop's critical path). T lies between max(H, G) (host
work early and GPU work late in the segment overlap) and H + G (everything in one module).

Where the wait sits, read from NVIDIA/Megatron-LM `megatron/core/transformer/moe/`:

| release (commit) | dispatcher | forward wait | backward |
|---|---|---|---|
| core_v0.11.0 (aa6207e) | alltoall | `token_permutation`: `torch.cuda.current_stream().synchronize()` at `before_ep_alltoall` (dropless, EP > 1; `token_dispatcher.py` 519-520), after the fused permute is queued; D2H copies `non_blocking=True` in `preprocess` | splits reused, no wait |
| core_v0.13.0 (c550cf6), core_v0.14.0 (23e00ed), core_v0.17.1 (266f1c9) | alltoall | `_maybe_dtoh_and_synchronize`: D2H on a side stream at `before_permutation_1`, `d2h_event.synchronize()` at `before_ep_alltoall` (`token_dispatch`), after the permute is queued | splits reused, no wait |
| core_v0.13.0 … core_v0.17.1 | flex (DeepEP) | `fused_a2a.py` dispatch: "the CPU will wait for GPU's signal to arrive" (notify, then the dispatch kernel); counts come back as a host list | handle reused, no wait |

So in every release the rows use, with either dispatcher, a dropless layer waits once per
forward at the same place: after routing, the count exchange and the permute, before the EP
dispatch. No release drops the wait for dropless routing (CUDA-graph capture of
`moe_preprocess` moves the D2H copy, not the wait, in 0.17.1). The cyclic segment of one layer
is therefore: after the wait — dispatch collective, local sort, experts, combine, shared expert,
bias-dropout-add — then the next layer's attention, router and dispatcher preprocess up to the
wait (`forward_modules`). Launches per module are `host_ops.LAUNCHES`, split at the wait by
`PRE_WAIT_LAUNCHES` (the launches of the dispatch module issued before it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from starfabric.astral.seer import host_ops, router_launches, te_mxfp8_host
from starfabric.astral.seer.expert_sort import SORT_SUFFIX
from starfabric.errors import InvariantError

PRE_WAIT_LAUNCHES = {"dispatch_alltoall": 18, "dispatch_deepep": 5}
"""Launches of the dispatch module issued before the host waits (from `host_ops.LAUNCHES`'
table, core_v0.17.1): alltoall — preprocess 8, four D2H copies + stream wait + event record 6,
fused permute 4 (the two `all_to_all` calls follow the wait); DeepEP — multihot routing map 3,
layout + notify 2 (dispatch kernel, D2H counts + event, permute 7 follow it)."""


def flow_shop(host: np.ndarray[Any, Any], gpu: np.ndarray[Any, Any]) -> float:
    """Makespan of modules issued in order by the host and run in order by the GPU, the GPU
    starting a module only once the host has issued it, from an empty queue."""
    h = np.cumsum(np.asarray(host, dtype=float))
    g = np.cumsum(np.asarray(gpu, dtype=float)[::-1])[::-1]
    return float((h + g).max()) if len(h) else 0.0


def _gpu_module(name: str) -> str:
    """The segment module an operator of `ops.layer_ops` belongs to."""
    if name.startswith(("attn.", "mlp.norm")):
        return "attention"
    if name in ("moe.router", "moe.topk"):
        return "router"
    if name == "moe.permute" or name.startswith(("moe.ep_dispatch", "moe.etp_all_gather")):
        return "dispatch"
    if name.startswith(("moe.expert_", f"moe.{SORT_SUFFIX}")):
        return "experts"
    if name.startswith(("moe.shared", "mlp.shared")):
        return "shared_expert"
    return "combine"  # un-sort, ETP reduce-scatter, combine, unpermute, dropout-add, FSDP


SEGMENT_ORDER = ("dispatch", "experts", "combine", "shared_expert", "attention", "router",
                 "pre_wait")  # fmt: skip
"""Modules of one layer's cyclic forward segment, in issue order from one wait to the next."""


_SEGMENT_OF = {
    "attention": "attention", "mla_attention": "attention", "qk_norm": "attention",
    "qkv_gather": "attention", "rope_unfused": "attention", "mla_rope_unfused": "attention",
    "grad_adds_attention": "attention", "grad_adds_mla": "attention",
    "grad_adds_qk_norm": "attention", "router": "router", "grad_adds_router": "router",
    "dispatch_alltoall": "dispatch", "dispatch_deepep": "dispatch", "sort_alltoall": "experts",
    "experts_fixed": "experts", "experts_per_local": "experts", "swiglu_unfused": "experts",
    "combine_alltoall": "combine", "combine_deepep": "combine",
    "shared_expert": "shared_expert", "mlp_swiglu_unfused": "shared_expert",
    "router_fused": "router",
    **{f"mxfp8_{k}_{s}": "experts" for k in ("expert", "layer") for s in te_mxfp8_host.STAGES},
    **{f"mxfp8_attn_linear_{s}": "attention" for s in te_mxfp8_host.STAGES},
    **{f"mxfp8_mlp_linear_{s}": "shared_expert" for s in te_mxfp8_host.STAGES},
    **dict.fromkeys((*router_launches.UNFUSED, *router_launches.FUSED), "router"),
}  # fmt: skip
"""Segment module of each `host_ops.LAUNCHES` module of a MoE layer."""


def launches_by_module(spec: host_ops.LayerLaunchSpec) -> dict[str, int]:
    """Forward launches of each segment module of a MoE layer (`host_ops.LAUNCHES` over
    `host_ops.layer_modules`); their sum is `host_ops.layer_launches(spec).fwd`."""
    if not spec.moe:
        raise InvariantError("host_segments.launches_by_module: a dense layer has no segments")
    lc = host_ops.LAUNCHES
    graphed = host_ops.CUDA_GRAPH_MODULES if spec.cuda_graphs else ()
    out = dict.fromkeys(SEGMENT_ORDER, 0)
    for mod, k in host_ops.layer_modules(spec):
        if mod in graphed:
            continue
        n = k * lc[mod].fwd
        seg = _SEGMENT_OF[mod]
        if seg == "dispatch":
            pre = PRE_WAIT_LAUNCHES[mod]
            out["pre_wait"] += pre
            n -= pre
        out[seg] += n
    out["attention"] += 1 if spec.cuda_graphs else 0
    return out


def gpu_by_module(names: list[str], seconds: np.ndarray[Any, Any]) -> dict[str, float]:
    """GPU seconds of each segment module from a forward table's per-operator times."""
    out = dict.fromkeys(SEGMENT_ORDER, 0.0)
    for name, s in zip(names, np.asarray(seconds, dtype=float), strict=True):
        out[_gpu_module(name)] += float(s)
    return out


def segment_seconds(
    host: dict[str, float], gpu: dict[str, float], launches: dict[str, int] | None = None
) -> float:
    """One layer's forward from one wait to the next: `flow_shop` over `SEGMENT_ORDER`, each
    module cut into its `launches` equal steps (a module's GPU work spread evenly over its
    launches, assumption: the GPU starts a module's first kernel once that one is issued, not
    the whole module); without `launches`, one step per module."""
    hs: list[float] = []
    gs: list[float] = []
    for k in SEGMENT_ORDER:
        n = max(1, (launches or {}).get(k, 1))
        hs += [host.get(k, 0.0) / n] * n
        gs += [gpu.get(k, 0.0) / n] * n
    return flow_shop(np.array(hs), np.array(gs))


__all__ = [
    "PRE_WAIT_LAUNCHES",
    "SEGMENT_ORDER",
    "flow_shop",
    "gpu_by_module",
    "launches_by_module",
    "segment_seconds",
]
