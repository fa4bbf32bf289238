"""What a cluster spec says about power: the named ratings and the `power:` block of its YAML.

Data only (pydantic and the config base, nothing heavier), so that the cluster spec
(`astral/topology/spec.py`) can import `PowerSpec` without pulling the plant, the timeline or
the catalog in. Every number below that is not cited is an assumption.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from starfabric.config import Spec

CHAIN_EFFICIENCY = {"hvdc": 0.97, "ac-ups": 0.94}
"""Assumption (reference table, astral.md): HVDC chain ~97% vs double-conversion AC UPS ~94%."""

COOLING_OVERHEAD = {"air": 0.30, "air-liquid": 0.12, "liquid": 0.06}
"""Assumption: cooling power as a fraction of IT power (fans/CRAH/chillers vs CDUs)."""

RACK_KW = {"air": 20.0, "air-liquid": 50.0, "liquid": 120.0}
"""Assumption: usable rack power budget per cooling type (astral.md: liquid-assisted 40-60 kW)."""


class PowerSpec(Spec):
    """Named assumptions of the power, cooling and cost model (all overridable in YAML)."""

    cooling: Literal["air", "air-liquid", "liquid"] = "air-liquid"
    power_chain: Literal["hvdc", "ac-ups"] = "hvdc"
    host_overhead_w: float = Field(
        4000.0, ge=0, description="assumption: CPUs, memory, fans, PSU loss per 8 GPUs of a host"
    )
    rack_kw: float | None = Field(None, gt=0, description="override the cooling type's budget")
    other_overhead: float = Field(0.03, ge=0, description="assumption: lighting, offices, loss")
    gpu_cost_usd: float = Field(25000.0, ge=0, description="assumption: per GPU")
    host_cost_usd: float = Field(60000.0, ge=0, description="assumption: server minus GPUs")
    usd_per_kwh: float = Field(0.08, ge=0, description="assumption: electricity price")
    include_nics_in_network: bool = Field(
        False, description="network totals count switches and optics; NICs belong to hosts"
    )
