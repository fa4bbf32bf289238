"""MoE dispatch and combine as DeepEP performs them (Tencent's PR #130 to deepseek-ai/DeepEP).

Each token goes to its top-k experts. Inter-node, DeepEP sends a token once per destination
*node* by RDMA to the GPU on that node with the sender's local index (same rail, so traffic
stays below the spine), which forwards it over NVLink to the expert GPUs there; intra-node
tokens go straight over NVLink. Each RDMA peer pair uses `qps_per_peer` queue pairs, whose
distinct 5-tuples let ECMP spread them over paths and NIC ports — the multi-QP gain.
Routing is node-limited as in DeepSeek-V3 (each token reaches at most `max_nodes_per_token`
nodes); expert popularity can be skewed (Zipf) to model token imbalance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from starfabric.astral.collectives.plan import IntArray, Plan, Step
from starfabric.errors import ConfigError


@dataclass(frozen=True)
class MoEShape:
    """One MoE layer's all-to-all. Defaults follow DeepEP's tests on DeepSeek-V3 shapes."""

    ranks: int = 64
    local: int = 8  # GPUs per node
    tokens_per_rank: int = 4096
    hidden: int = 7168
    experts: int = 256
    topk: int = 8
    max_nodes_per_token: int = 4  # DeepSeek-V3 node-limited routing
    dispatch_bytes_per_elem: float = 1.0 + 4.0 / 128  # FP8 + one fp32 scale per 128 values
    combine_bytes_per_elem: float = 2.0  # BF16
    zipf_s: float = 0.0  # 0 = balanced experts; assumption when > 0: Zipf popularity
    qps_per_peer: int = 1
    nvlink_forwarding: bool = True
    seed: int = 0

    def validate(self) -> None:
        if self.ranks < 2 or self.ranks % self.local:
            raise ConfigError(
                f"moe: ranks {self.ranks} must be a multiple of local {self.local}",
                fix="use whole nodes",
            )
        if self.experts % self.ranks:
            raise ConfigError(
                f"moe: experts {self.experts} not divisible by ranks {self.ranks}",
                fix="pick EP dividing the experts",
            )
        if not 1 <= self.topk <= self.experts:
            raise ConfigError(f"moe: topk {self.topk} out of range", fix=f"use 1..{self.experts}")
        if self.qps_per_peer < 1 or self.tokens_per_rank < 1:
            raise ConfigError(
                "moe: qps_per_peer and tokens_per_rank must be >= 1", fix="raise them"
            )


def route_tokens(shape: MoEShape) -> IntArray:
    """Expert ids chosen per token: int64[ranks * tokens_per_rank, topk] (Gumbel top-k)."""
    shape.validate()
    rng = np.random.default_rng(shape.seed)
    popularity = np.arange(1, shape.experts + 1, dtype=np.float64) ** (-shape.zipf_s)
    logp = np.log(popularity / popularity.sum())[rng.permutation(shape.experts)]
    nodes = shape.ranks // shape.local
    per_node = shape.experts // nodes
    limit = min(shape.max_nodes_per_token, nodes)
    out = np.empty((shape.ranks * shape.tokens_per_rank, shape.topk), np.int64)
    chunk = max(1, 2_000_000 // shape.experts)
    for lo in range(0, out.shape[0], chunk):
        hi = min(out.shape[0], lo + chunk)
        score = logp + rng.gumbel(size=(hi - lo, shape.experts))
        if limit < nodes:
            node_best = score.reshape(hi - lo, nodes, per_node).max(axis=2)
            keep = np.argpartition(-node_best, limit - 1, axis=1)[:, :limit]
            mask = np.full((hi - lo, nodes), -np.inf)
            np.put_along_axis(mask, keep, 0.0, axis=1)
            score = score + np.repeat(mask, per_node, axis=1)
        out[lo:hi] = np.argpartition(-score, shape.topk - 1, axis=1)[:, : shape.topk]
    return out


def _pairs(src: IntArray, dst: IntArray, n: int) -> tuple[IntArray, IntArray, IntArray]:
    """Unique (src, dst) pairs with counts."""
    keys, counts = np.unique(src * n + dst, return_counts=True)
    return keys // n, keys % n, counts.astype(np.int64)


def moe_alltoall(shape: MoEShape, phase: str = "dispatch") -> Plan:
    """The dispatch (or combine, the reverse) of one MoE layer as one concurrent step."""
    shape.validate()
    if phase not in ("dispatch", "combine"):
        raise ConfigError(f"moe: phase {phase!r}", fix="use dispatch or combine")
    n, local = shape.ranks, shape.local
    experts = route_tokens(shape)
    dst_rank = experts // (shape.experts // n)
    token_src = np.repeat(np.arange(n, dtype=np.int64), shape.tokens_per_rank)
    token_id = np.repeat(np.arange(len(token_src), dtype=np.int64), shape.topk)
    src_r = np.repeat(token_src, shape.topk)
    dst_r = dst_rank.ravel()
    # a token goes once to each destination GPU (several experts on one GPU share it)
    uniq = np.unique(token_id * n + dst_r)
    tok, dst_r = uniq // n, uniq % n
    src_r = token_src[tok]
    elem = shape.dispatch_bytes_per_elem if phase == "dispatch" else shape.combine_bytes_per_elem
    token_bytes = shape.hidden * elem
    same_node = src_r // local == dst_r // local
    srcs, dsts, sizes, qps, vias = [], [], [], [], []

    def add(s: IntArray, d: IntArray, count: IntArray, q: int, via: IntArray | None) -> None:
        k = np.arange(q, dtype=np.int64)
        srcs.append(np.repeat(s, q))
        dsts.append(np.repeat(d, q))
        sizes.append(np.repeat(count * token_bytes / q, q))
        qps.append(np.tile(k, len(s)))
        vias.append(np.full(len(s) * q, -1, np.int64) if via is None else np.repeat(via, q))

    s, d, c = _pairs(src_r[same_node], dst_r[same_node], n)
    add(s, d, c, 1, None)  # NVLink inside a node
    cross = ~same_node
    if shape.nvlink_forwarding:
        # RDMA once per (token, destination node) to the same-rail GPU there …
        node_key = np.unique(tok[cross] * (n // local) + dst_r[cross] // local)
        t2, node = node_key // (n // local), node_key % (n // local)
        relay = node * local + token_src[t2] % local
        s, d, c = _pairs(token_src[t2], relay, n)
        add(s, d, c, shape.qps_per_peer, None)
        # … which forwards over NVLink to each expert GPU of that node
        relay_of = (dst_r[cross] // local) * local + src_r[cross] % local
        fwd = relay_of != dst_r[cross]
        s, d, c = _pairs(relay_of[fwd], dst_r[cross][fwd], n)
        add(s, d, c, 1, None)
    else:
        s, d, c = _pairs(src_r[cross], dst_r[cross], n)
        add(s, d, c, shape.qps_per_peer, None)
    S, D = np.concatenate(srcs), np.concatenate(dsts)
    B, Q = np.concatenate(sizes), np.concatenate(qps)
    if phase == "combine":
        S, D = D, S  # results travel back along the same links
    step = Step(S, D, B, Q, f"moe-{phase}")
    total = float(len(token_src)) * token_bytes * shape.topk / n
    return Plan(
        f"moe_{phase}",
        "deepep" if shape.nvlink_forwarding else "direct",
        n,
        total,
        (step,),
        1.0,
        {"tokens": float(len(token_src)), "token_bytes": token_bytes},
    )
