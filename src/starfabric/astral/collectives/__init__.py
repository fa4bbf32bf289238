"""Astral collectives: NCCL-like algorithms and MoE all-to-all as steps of flows."""

from starfabric.astral.collectives.algorithms import alltoall, hierarchical, ring, sendrecv
from starfabric.astral.collectives.moe import MoEShape, moe_alltoall, route_tokens
from starfabric.astral.collectives.plan import Plan, Step

__all__ = [
    "MoEShape",
    "Plan",
    "Step",
    "alltoall",
    "hierarchical",
    "moe_alltoall",
    "ring",
    "route_tokens",
    "sendrecv",
]
