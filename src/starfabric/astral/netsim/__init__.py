"""Astral network simulation: the backend contract, flow-level and analytical backends."""

from starfabric.astral.netsim.analytical import Analytical
from starfabric.astral.netsim.backend import FlowResults, Flows, NetworkBackend
from starfabric.astral.netsim.failures import LinkEvent, run_with_failures
from starfabric.astral.netsim.flowsim import FlowSim, maxmin

__all__ = [
    "Analytical",
    "FlowResults",
    "FlowSim",
    "Flows",
    "LinkEvent",
    "NetworkBackend",
    "maxmin",
    "run_with_failures",
]
