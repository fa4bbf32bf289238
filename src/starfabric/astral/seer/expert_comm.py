"""The expert all-to-all of a node-deduplicating dispatcher (DeepEP), as a formula.

NCCL's all-to-all (Megatron-Core's `alltoall` token dispatcher) sends every (token, expert)
copy to the expert's GPU: a token routed to k experts crosses the inter-host fabric once per
remote expert. DeepEP's internode kernels (DeepSeek-V3 report section 3.2.2; Megatron-Core's
`flex` dispatcher) send a token once to each remote *node* that holds one of its experts — over
the RDMA NIC to the GPU of the same NVLink index — and fan it out to the expert GPUs over
NVLink there; the combine reduces within the node before the return trip. The inter-host bytes
therefore scale with the distinct nodes a token reaches, which DeepSeek's node-limited routing
further caps (at most M nodes per token). The kernel's time from these bytes is
`deepep_kernels.deepep_internode_time`.
"""

from __future__ import annotations

from math import comb

DEEPEP_FP8_BYTES_PER_ELEM = 1.0 + 4.0 / 128
"""DeepEP dispatches FP8 tokens with one fp32 scale per 128 values (DeepSeek-V3 report)."""


def distinct_nodes(experts: int, topk: int, nodes: int, max_nodes: int = 0) -> float:
    """Expected distinct nodes one token's top-k experts live on, experts spread evenly over
    `nodes` and chosen uniformly without replacement (hypergeometric: a node is missed with
    probability C(E - E/N, k) / C(E, k)), capped by node-limited routing (`max_nodes` > 0)."""
    if nodes <= 1:
        return 1.0
    per_node = experts // nodes
    miss = comb(experts - per_node, topk) / comb(experts, topk) if experts >= topk else 0.0
    d = nodes * (1.0 - miss)
    return min(d, float(max_nodes)) if max_nodes > 0 else d


def remote_copy_fraction(experts: int, topk: int, nodes: int, max_nodes: int = 0) -> float:
    """Inter-host bytes of a node-deduplicating dispatch as a fraction of the all-to-all's
    (which sends all k*(N-1)/N remote copies): distinct remote nodes / remote copies."""
    if nodes <= 1 or topk < 1:
        return 1.0
    return min(1.0, distinct_nodes(experts, topk, nodes, max_nodes) / topk)


__all__ = ["DEEPEP_FP8_BYTES_PER_ELEM", "distinct_nodes", "remote_copy_fraction"]
