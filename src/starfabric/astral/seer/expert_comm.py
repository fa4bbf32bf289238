"""The expert all-to-all of a node-deduplicating dispatcher (DeepEP), as a formula.

NCCL's all-to-all (Megatron-Core's `alltoall` token dispatcher) sends every (token, expert)
copy to the expert's GPU: a token routed to k experts crosses the inter-host fabric once per
remote expert. DeepEP's internode kernels (DeepSeek-V3 report section 3.2.2; Megatron-Core's
`flex` dispatcher) send a token once to each remote *node* that holds one of its experts — over
the RDMA NIC to the GPU of the same NVLink index — and fan it out to the expert GPUs over
NVLink there; the combine reduces within the node before the return trip. The inter-host bytes
therefore scale with the distinct nodes a token reaches, which DeepSeek's node-limited routing
further caps (at most M nodes per token).
"""

from __future__ import annotations

from math import comb

from starfabric.astral.seer.fabric import COLLECTIVE_LAUNCH_S, NIC_STEP_LATENCY_S, Fabric, Group

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


def deepep_time(
    nbytes: float, group: Group, fabric: Fabric, copy_fraction: float, fp8_dispatch: bool
) -> float:
    """Seconds of one DeepEP dispatch or combine over `nbytes` (every (token, expert) copy of
    the rank's tokens in 16 bit) on an EP `group` spanning nodes: the inter-host share of the
    copies, deduplicated per node, at the NIC rate, against the NVLink fan-out at the NVLink
    rate (the two run concurrently); FP8 dispatch carries 1 byte + scales per element."""
    n, g = group.size, group.per_node
    if n <= 1 or nbytes <= 0:
        return 0.0
    nvl_bw, nic_bw, _, _ = fabric.tiers("all_to_all")
    size = nbytes * (DEEPEP_FP8_BYTES_PER_ELEM / 2.0 if fp8_dispatch else 1.0)
    inter = size * (n - g) / n * copy_fraction / nic_bw
    intra = size * (g - 1) / g / nvl_bw  # forwarded and local copies over NVLink
    return COLLECTIVE_LAUNCH_S + 2 * NIC_STEP_LATENCY_S + max(inter, intra)


__all__ = ["DEEPEP_FP8_BYTES_PER_ELEM", "deepep_time", "distinct_nodes", "remote_copy_fraction"]
