"""DeepEP's normal (training) kernels as rates: per-rank deduplication, the SM budget and the
per-source forwarding pipeline (DeepEP kernel rates).

`expert_comm` prices DeepEP's inter-host bytes (one copy per remote *node*, node-limited
routing). This module adds what DeepEP's own benchmark tables show the hardware rates alone
miss, each from the library's published numbers (tests/data/deepep/):

- **Per-rank deduplication on NVLink.** Inside one NVLink domain (and for the NVLink fan-out
  of the internode kernels) a token goes once to every *rank* holding one or more of its top-k
  experts, not once per expert (DeepEP `intranode::dispatch`; its tests/test_intranode.py
  counts the bytes a rank receives, its own tokens included). DeepEP's intranode table
  (docs/legacy.md @0297fc8: H800, EP 8, 153 / 158 GB/s) is that volume at the achievable
  NVLink rate (~160 GB/s on H800).
- **The SM budget.** The kernels copy with a fixed number of SMs — 20 by default in DeepEP V1
  (`Buffer.num_sms`), Megatron-Core (`moe_deepep_num_sms`) and TorchTitan (which keeps the
  Buffer default) — and each channel splits its sender warps over the destination ranks.
  Where NVLink is faster than those SMs copy, the SMs bound the rate: 337 GB/s intranode on
  H20 (450 GB/s NVLink) at 24 SMs and 8 ranks (DeepEP issue #16: "increase the number of
  SMs"), 169 GB/s on GB200 at 24 SMs and 4 ranks (issue #394) — the same 1.76 GB/s per SM
  and destination rank on Hopper and Blackwell.
- **The per-source forwarding pipeline.** The internode kernels receive each source node's
  tokens in an RDMA buffer and forward them over NVLink in chunks, one pipeline per source
  node (DeepEP `internode::dispatch`: RDMA senders, RDMA-to-NVLink forwarders, NVLink
  receivers). DeepEP's 2-node row (EP 16, H800) moves 43 GB/s of "logical RDMA bandwidth"
  (bytes to every reached node, the own node included) where the NIC alone would allow ~88;
  the same kernel on H200 — 2.25x the NVLink bandwidth — gives 38-44 GB/s at 2 nodes (DeepEP
  issue #493), so NVLink does not set it: each source node's stream is held to ~21.5 GB/s per
  receiving GPU at 24 SMs. With 4 and 8 source nodes (EP 32 / 64: 58 / 51 GB/s) the NIC binds
  first.
"""

from __future__ import annotations

from starfabric.astral.seer.expert_comm import DEEPEP_FP8_BYTES_PER_ELEM, remote_copy_fraction
from starfabric.astral.seer.fabric import (
    COLLECTIVE_LAUNCH_S,
    NIC_STEP_LATENCY_S,
    NVLINK_STEP_LATENCY_S,
    Fabric,
    Group,
)

DEEPEP_NUM_SMS = 20
"""SMs DeepEP's normal kernels run on: DeepEP V1 `Buffer.num_sms` = 20 and Megatron-Core
`TransformerConfig.moe_deepep_num_sms` = 20 (defaults; a run that sets another value is not
read from its row)."""

DEEPEP_SM_RANK_COPY_BYTES_PER_S = 337.35e9 / (24 * 8)
"""NVLink bytes per second one SM of DeepEP V1's kernels copies per destination rank: each
channel splits its sender warps over the destination ranks, so the rate grows with SMs x
ranks until NVLink binds. 337.35 GB/s on H20 at 24 SMs and 8 ranks (DeepEP issue #16; NVLink
450 GB/s there) gives 1.757 GB/s; GB200 at 24 SMs and 4 ranks measures 169 GB/s dispatch
(DeepEP issue #394: 1.760 per SM and rank; its combine, 135 GB/s, is 20% lower)."""

DEEPEP_SOURCE_NODE_SM_BYTES_PER_S = 43.0e9 / 2 / 24
"""Logical RDMA bytes per second one SM's share of a source node's forwarding pipeline
delivers to a receiving GPU: DeepEP's EP 16 (2-node) row, 43 GB/s for dispatch and combine
(docs/legacy.md @0297fc8, H800, CX7 400 Gb/s) over its 2 source nodes and 24 SMs; checked
against H200 at 2 nodes, 38-44 GB/s (DeepEP issue #493). Scaling with the SM count (the
pipeline runs per channel, two SMs each) is an assumption: no SM sweep of it is published."""


def rank_copy_fraction(experts: int, topk: int, ranks: int) -> float:
    """Bytes of a per-rank deduplicating dispatch as a fraction of the k (token, expert)
    copies: expected distinct ranks a token's top-k experts live on over k — the node
    deduplication of `expert_comm.remote_copy_fraction` with a rank as the unit."""
    return remote_copy_fraction(experts, topk, ranks)


def deepep_nvlink_bytes_per_s(nvlink_bytes_per_s: float, ranks: int,
                              sms: int = DEEPEP_NUM_SMS) -> float:  # fmt: skip
    """The rate DeepEP's kernels move NVLink bytes to `ranks` destination ranks: the achievable
    NVLink rate, or what their `sms` SMs copy (`DEEPEP_SM_RANK_COPY_BYTES_PER_S` per SM and
    rank), whichever is lower."""
    return min(nvlink_bytes_per_s, sms * max(1, ranks) * DEEPEP_SM_RANK_COPY_BYTES_PER_S)


def _elem_factor(fp8_dispatch: bool) -> float:
    return DEEPEP_FP8_BYTES_PER_ELEM / 2.0 if fp8_dispatch else 1.0


def deepep_intranode_time(
    nbytes: float, group: Group, nvl_bytes_per_s: float, rank_fraction: float, fp8_dispatch: bool
) -> float:
    """Seconds of one DeepEP intranode dispatch or combine over `nbytes` (every (token, expert)
    copy of the rank's tokens in 16 bit) on an EP `group` inside one NVLink domain: the
    per-rank deduplicated copies, the rank's own included, at DeepEP's NVLink rate
    `nvl_bytes_per_s` (`deepep_nvlink_bytes_per_s`)."""
    if group.size <= 1 or nbytes <= 0:
        return 0.0
    size = nbytes * _elem_factor(fp8_dispatch) * rank_fraction
    return COLLECTIVE_LAUNCH_S + NVLINK_STEP_LATENCY_S + size / nvl_bytes_per_s


def deepep_internode_time(
    nbytes: float,
    group: Group,
    fabric: Fabric,
    nvl_bytes_per_s: float,
    node_fraction: float,
    rank_fraction: float,
    fp8_dispatch: bool,
    sms: int = DEEPEP_NUM_SMS,
) -> float:
    """Seconds of one DeepEP internode dispatch or combine over `nbytes` (every (token, expert)
    copy of the rank's tokens in 16 bit) on an EP `group` spanning nodes. Three concurrent
    limits, the slowest sets the time: the remote nodes' copies at the NIC rate
    (`node_fraction` = distinct nodes / k, `expert_comm.remote_copy_fraction`), the per-rank
    deduplicated NVLink fan-out (`rank_fraction`) at DeepEP's NVLink rate `nvl_bytes_per_s`
    (`deepep_nvlink_bytes_per_s`), and the logical
    RDMA bytes (every reached node, the own one included) through one forwarding pipeline
    per source node on `sms` SMs."""
    n, g = group.size, group.per_node
    if n <= 1 or nbytes <= 0:
        return 0.0
    _, nic_bw, _, _ = fabric.tiers("all_to_all")
    size = nbytes * _elem_factor(fp8_dispatch)
    nodes = group.nodes
    logical = size * node_fraction  # bytes to every node a token reaches
    inter = logical * (n - g) / n / nic_bw
    nvl = size * rank_fraction / nvl_bytes_per_s
    fwd = logical / (nodes * sms * DEEPEP_SOURCE_NODE_SM_BYTES_PER_S)
    return COLLECTIVE_LAUNCH_S + 2 * NIC_STEP_LATENCY_S + max(inter, nvl, fwd)


__all__ = [
    "DEEPEP_NUM_SMS",
    "DEEPEP_SM_RANK_COPY_BYTES_PER_S",
    "DEEPEP_SOURCE_NODE_SM_BYTES_PER_S",
    "deepep_internode_time",
    "deepep_intranode_time",
    "deepep_nvlink_bytes_per_s",
    "rank_copy_fraction",
]
