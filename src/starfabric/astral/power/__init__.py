"""Astral power and cooling: the facility that follows the training job and the weather.

One job per module:

- `ratings`  — the cluster YAML's `power:` block and its named ratings (data only; the cluster
  spec imports it, nothing heavier)
- `ledger`   — the static ledger: nameplate power, racks, PUE and cost of a built cluster
- `weather`  — EPW/TMY weather files and the psychrometrics of each hour (psychrolib)
- `curves`   — published performance curves (DOE-2 / EnergyPlus chiller EIR, ASHRAE 90.1 fans
  and pumps, YorkCalc cooling tower)
- `chain`    — power-chain part-load efficiency (HVDC, double-conversion UPS, eco-mode UPS)
- `ashrae`   — ASHRAE TC9.9 thermal classes and rack kW limits per cooling type
- `plant`    — the cooling plant hour by hour over a year: PUE, WUE, design day, hours per mode
- `energyplus` — the same plant, IT load and weather written as an EnergyPlus input and run
- `timeline` — the job's power waveform from a Seer prediction, rack → pod → site
- `smoothing` — power floor, ramp limiter and energy storage, with what each costs
- `provision` — the provisioning hierarchy: GPUs per MW, what fails first

The package namespace keeps the old `astral/power.py` API (`PowerSpec`, `power_report`, ...);
the new modules load on first use so that importing the spec stays cheap.
"""

from typing import Any

from starfabric.astral.power.ledger import (
    WANG_GPUS,
    WANG_HB_DOMAIN,
    WANG_SWITCHES,
    PowerReport,
    Savings,
    power_report,
    rail_only_savings,
)
from starfabric.astral.power.ratings import CHAIN_EFFICIENCY, COOLING_OVERHEAD, RACK_KW, PowerSpec

_LAZY: dict[str, str] = {
    "Weather": "starfabric.astral.power.weather",
    "load_weather": "starfabric.astral.power.weather",
    "read_epw": "starfabric.astral.power.weather",
    "ChainSpec": "starfabric.astral.power.chain",
    "chain_input": "starfabric.astral.power.chain",
    "PlantSpec": "starfabric.astral.power.plant",
    "YearResult": "starfabric.astral.power.plant",
    "preset": "starfabric.astral.power.plant",
    "simulate_year": "starfabric.astral.power.plant",
    "cross_check": "starfabric.astral.power.energyplus",
    "GpuPowerModel": "starfabric.astral.power.timeline",
    "job_timeline": "starfabric.astral.power.timeline",
    "SmoothingSpec": "starfabric.astral.power.smoothing",
    "UtilityLimits": "starfabric.astral.power.smoothing",
    "LIMIT_PROFILES": "starfabric.astral.power.smoothing",
    "limit_profile": "starfabric.astral.power.smoothing",
    "HierarchySpec": "starfabric.astral.power.provision",
    "provision": "starfabric.astral.power.provision",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'starfabric.astral.power' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "CHAIN_EFFICIENCY",
    "COOLING_OVERHEAD",
    "RACK_KW",
    "WANG_GPUS",
    "WANG_HB_DOMAIN",
    "WANG_SWITCHES",
    "PowerReport",
    "PowerSpec",
    "Savings",
    "power_report",
    "rail_only_savings",
    *_LAZY,
]
