"""TorchTitan's forced load balance: round-robin expert IDs, and the ranks a token reaches.

**What the source does.** TorchTitan's `TokenChoiceTopKRouter._debug_force_load_balance_routing`
(pytorch/torchtitan @5d4bdd0 `torchtitan/models/moe/moe.py`; on when `MoEArgs.
_debug_force_load_balance` / `training.debug_moe_force_load_balance` is set, as in its
`30B-A3B-deepep` flavor and `qwen3_*_with_deepep.toml`) replaces the router's top-k by
`arange(n_tokens * top_k).reshape(n_tokens, top_k) % num_experts`: token i gets the k
consecutive experts k·i … k·i + k − 1 (mod E). Every expert gets the same tokens, as Seer's
"forced" balance already assumes — but, unlike Megatron-Core's `--moe-router-force-load-
balancing` (random logits), the k experts of a token are *neighbours*. Expert parallelism
places E / ep consecutive experts on each rank (`ExpertParallel._partition_fn`: `Shard(0)` of
the expert dimension), so a token's k experts sit on ⌈k / (E/ep)⌉ or one more ranks — for
Qwen3-30B-A3B (E 128, k 8, ep 8: 16 experts a rank, windows starting at multiples of 8) on
exactly one.

**Why it matters.** DeepEP sends a token once to every rank that holds one of its experts
(`get_dispatch_layout` → `is_token_in_rank`; Seer's `deepep_kernels.rank_copy_fraction` takes
the expected distinct ranks under uniform random routing, 5.25 of 8 for this model) and once
to every node (`expert_comm.remote_copy_fraction`). Under the round-robin routing the distinct
ranks (and nodes) are the ones the window of k consecutive experts spans,
`round_robin_distinct`, averaged exactly over one period of the token index.

Applied (`ExecutionSpec.moe_round_robin_routing`) where a TorchTitan row states forced balance
and dispatches with DeepEP's own kernels; not under the fused DistMoE backend, whose routing
code at the rows' release was not read.
"""

from __future__ import annotations

from math import gcd

from starfabric.astral.seer.torchtitan_pp import is_torchtitan


def round_robin_distinct(experts: int, topk: int, groups: int) -> float:
    """Mean distinct groups (ranks, or nodes) the k experts k·i … k·i+k−1 (mod `experts`) of
    token i live on, `groups` groups of experts / groups consecutive experts each, averaged
    over one period (experts / gcd(k, experts) tokens) of the round-robin assignment."""
    if experts <= 0 or topk <= 0 or groups <= 0:
        raise ValueError(f"round_robin_distinct({experts}, {topk}, {groups}): all must be > 0")
    per_group = experts / groups
    period = experts // gcd(topk, experts)
    total = 0
    for i in range(period):
        start = topk * i
        total += len({int(((start + j) % experts) // per_group) for j in range(topk)})
    return total / period


def round_robin_copy_fraction(experts: int, topk: int, groups: int) -> float:
    """Bytes of a per-group deduplicating dispatch as a fraction of the k (token, expert)
    copies under the round-robin routing: distinct groups / k."""
    return min(1.0, round_robin_distinct(experts, topk, groups) / topk)


def runs_round_robin(framework: str | None, forced: bool, fused_dispatch: bool) -> bool:
    """Whether a row ran TorchTitan's round-robin forced balance through DeepEP's own kernels:
    a TorchTitan framework cell, forced balance stated, no fused DistMoE backend."""
    return is_torchtitan(framework) and forced and not fused_dispatch


__all__ = ["round_robin_copy_fraction", "round_robin_distinct", "runs_round_robin"]
