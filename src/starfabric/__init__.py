"""starfabric — Fornax (SmartNIC session offload) and Astral (LLM-training datacenter),
emulated and simulated at real scale (Tencent Cloud, SIGCOMM 2025)."""

from starfabric.errors import (
    ConfigError,
    DataError,
    InfeasibleError,
    InvariantError,
    StarfabricError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataError",
    "InfeasibleError",
    "InvariantError",
    "StarfabricError",
    "__version__",
]
