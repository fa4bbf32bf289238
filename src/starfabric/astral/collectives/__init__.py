"""Astral collectives: NCCL-like algorithms and MoE all-to-all as steps of flows."""

from starfabric.astral.collectives.algorithms import alltoall, hierarchical, ring, sendrecv
from starfabric.astral.collectives.plan import Plan, Step

__all__ = ["Plan", "Step", "alltoall", "hierarchical", "ring", "sendrecv"]
