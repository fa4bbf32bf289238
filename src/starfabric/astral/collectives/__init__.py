"""Astral collectives: NCCL-like algorithms and MoE all-to-all as steps of flows."""

from starfabric.astral.collectives.algorithms import alltoall, hierarchical, ring, sendrecv
from starfabric.astral.collectives.deepep import DeepEPRow, deepep_sweep
from starfabric.astral.collectives.fit import (
    FabricFit,
    FabricParams,
    FabricSpec,
    SweepRow,
    fabric_for,
    fabric_topology,
    fit_fabric,
    nccl_plan,
    predict_run,
    sweep,
)
from starfabric.astral.collectives.moe import MoEShape, moe_alltoall, route_tokens
from starfabric.astral.collectives.plan import Plan, Step

__all__ = [
    "DeepEPRow",
    "FabricFit",
    "FabricParams",
    "FabricSpec",
    "MoEShape",
    "Plan",
    "Step",
    "SweepRow",
    "alltoall",
    "deepep_sweep",
    "fabric_for",
    "fabric_topology",
    "fit_fabric",
    "hierarchical",
    "moe_alltoall",
    "nccl_plan",
    "predict_run",
    "ring",
    "route_tokens",
    "sendrecv",
    "sweep",
]
