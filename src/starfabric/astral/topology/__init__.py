"""Astral topologies: builders registry, immutable array Topology, inventory, export."""

from starfabric.astral.topology.builders import BUILDERS, build, builder_names
from starfabric.astral.topology.model import (
    LINK_AGG_CORE,
    LINK_KIND_NAMES,
    LINK_NIC,
    LINK_NVLINK,
    LINK_TOR_AGG,
    TIER_AGG,
    TIER_CORE,
    TIER_GPU,
    TIER_NAMES,
    TIER_NVSWITCH,
    TIER_TOR,
    Structure,
    Topology,
)
from starfabric.astral.topology.spec import ClusterSpec

__all__ = [
    "BUILDERS",
    "LINK_AGG_CORE",
    "LINK_KIND_NAMES",
    "LINK_NIC",
    "LINK_NVLINK",
    "LINK_TOR_AGG",
    "TIER_AGG",
    "TIER_CORE",
    "TIER_GPU",
    "TIER_NAMES",
    "TIER_NVSWITCH",
    "TIER_TOR",
    "ClusterSpec",
    "Structure",
    "Topology",
    "build",
    "builder_names",
]
