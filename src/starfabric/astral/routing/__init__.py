"""Astral routing: vectorized ECMP (closed-form for structured topologies, BFS otherwise)."""

from starfabric.astral.routing.ecmp import (
    Routes,
    failed_link_mask,
    path_nodes,
    route,
    route_flows,
    uses_nvlink,
)

__all__ = ["Routes", "failed_link_mask", "path_nodes", "route", "route_flows", "uses_nvlink"]
