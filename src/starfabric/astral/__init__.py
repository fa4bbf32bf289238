"""Astral: datacenter infrastructure for LLM training at scale (SIGCOMM 2025)."""

from typing import Any

from starfabric.astral.hardware import (
    GPUSpec,
    NICSpec,
    OpticSpec,
    SwitchSpec,
    get_gpu,
    get_nic,
    get_optic,
    get_switch,
    list_gpus,
    load_catalog,
)

# Topology, routing and power pull in numba; they load on first use so that importing the
# hardware catalog stays cheap.
_LAZY = {
    "ClusterSpec": "starfabric.astral.topology",
    "Topology": "starfabric.astral.topology",
    "build": "starfabric.astral.topology",
    "inventory": "starfabric.astral.topology.inventory",
    "route": "starfabric.astral.routing",
    "route_flows": "starfabric.astral.routing",
    "failed_link_mask": "starfabric.astral.routing",
    "PowerSpec": "starfabric.astral.power",
    "power_report": "starfabric.astral.power",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'starfabric.astral' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "GPUSpec",
    "NICSpec",
    "OpticSpec",
    "SwitchSpec",
    "get_gpu",
    "get_nic",
    "get_optic",
    "get_switch",
    "list_gpus",
    "load_catalog",
    *_LAZY,
]
