"""Astral network simulation: the backend contract, flow-level and analytical backends."""

from starfabric.astral.netsim.analytical import Analytical
from starfabric.astral.netsim.backend import (
    BUILTIN_BACKENDS,
    FlowResults,
    Flows,
    NetworkBackend,
    backend_names,
    make_backend,
    register_backend,
    steady_rates,
)
from starfabric.astral.netsim.failures import LinkEvent, run_with_failures
from starfabric.astral.netsim.flowsim import FlowSim, maxmin

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
