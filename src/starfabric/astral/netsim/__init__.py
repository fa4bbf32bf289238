"""Astral network simulation: the backend contract (backend.py), flow-level and analytical
backends, and the registry that builds one by name (registry.py)."""

from starfabric.astral.netsim.analytical import Analytical
from starfabric.astral.netsim.backend import FlowResults, Flows, NetworkBackend, steady_rates
from starfabric.astral.netsim.failures import LinkEvent, run_with_failures
from starfabric.astral.netsim.flowsim import FlowSim, maxmin
from starfabric.astral.netsim.registry import (
    BUILTIN_BACKENDS,
    backend_names,
    make_backend,
    register_backend,
)

__all__ = [
    "BUILTIN_BACKENDS",
    "Analytical",
    "FlowResults",
    "FlowSim",
    "Flows",
    "LinkEvent",
    "NetworkBackend",
    "backend_names",
    "make_backend",
    "maxmin",
    "register_backend",
    "run_with_failures",
    "steady_rates",
]
