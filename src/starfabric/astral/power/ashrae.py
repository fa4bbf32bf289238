"""ASHRAE TC9.9 thermal classes and rack power limits per cooling type.

Air classes (ASHRAE TC9.9, "Thermal Guidelines for Data Processing Environments", 5th ed.,
2021): the recommended envelope is 18-27 °C at the IT inlet with a dew point from -9 to
15 °C and at most 70 % RH; each class's allowable envelope is wider (A1 15-32 °C, A2 10-35,
A3 5-40, A4 5-45; H1, for high-density air-cooled equipment, 5-25 °C allowable and 18-22 °C
recommended). Liquid classes (ASHRAE TC9.9, "Liquid Cooling Guidelines", 2021) bound the
facility water supply temperature: W17 ≤ 17 °C, W27 ≤ 27, W32 ≤ 32, W40 ≤ 40, W45 ≤ 45,
W+ above 45.
"""

from __future__ import annotations

from dataclasses import dataclass

from starfabric.errors import ConfigError, InfeasibleError


@dataclass(frozen=True)
class AirClass:
    name: str
    allowable_c: tuple[float, float]
    max_dew_point_c: float
    recommended_c: tuple[float, float] = (18.0, 27.0)


AIR_CLASSES = {
    "A1": AirClass("A1", (15.0, 32.0), 17.0),
    "A2": AirClass("A2", (10.0, 35.0), 21.0),
    "A3": AirClass("A3", (5.0, 40.0), 24.0),
    "A4": AirClass("A4", (5.0, 45.0), 24.0),
    "H1": AirClass("H1", (5.0, 25.0), 17.0, (18.0, 22.0)),
}

RECOMMENDED_MAX_DEW_POINT_C = 15.0
"""ASHRAE recommended envelope's upper dew point: an air economizer closes above it."""

LIQUID_CLASSES = {"W17": 17.0, "W27": 27.0, "W32": 32.0, "W40": 40.0, "W45": 45.0, "W+": 60.0}
"""Highest facility water supply temperature (°C) of each ASHRAE liquid-cooling class."""

RACK_LIMIT_KW = {"air": 30.0, "rear-door": 50.0, "air-liquid": 140.0, "liquid": 250.0}
"""Assumption: the most a rack can dissipate per cooling type: room air with containment
(~30 kW), rear-door heat exchangers (~50 kW), direct liquid to the chips with the rest in air
(NVL72-class racks at ~120-140 kW), full immersion / all-liquid (~250 kW)."""


def check_supply_air(supply_c: float, ashrae_class: str) -> AirClass:
    """The class, or a one-line refusal when the supply air is outside its allowable range."""
    cls = AIR_CLASSES.get(ashrae_class)
    if cls is None:
        raise ConfigError(
            f"ASHRAE air class {ashrae_class!r} unknown", fix=f"use one of {', '.join(AIR_CLASSES)}"
        )
    lo, hi = cls.allowable_c
    if not lo <= supply_c <= hi:
        raise InfeasibleError(
            f"supply air {supply_c} °C is outside ASHRAE class {cls.name}'s allowable {lo}-{hi} °C",
            fix=f"set the supply between {lo} and {hi} °C or choose another class",
        )
    return cls


def check_liquid_supply(supply_c: float, liquid_class: str) -> float:
    limit = LIQUID_CLASSES.get(liquid_class)
    if limit is None:
        raise ConfigError(
            f"ASHRAE liquid class {liquid_class!r} unknown",
            fix=f"use one of {', '.join(LIQUID_CLASSES)}",
        )
    if supply_c > limit:
        raise InfeasibleError(
            f"facility water supply {supply_c} °C exceeds ASHRAE class {liquid_class}'s {limit} °C",
            fix="lower the supply temperature or choose equipment of a warmer class",
        )
    return limit


def check_rack(rack_kw: float, cooling: str) -> None:
    """Refuse a rack that its cooling type cannot remove, naming the fix."""
    limit = RACK_LIMIT_KW.get(cooling)
    if limit is None:
        raise ConfigError(
            f"cooling type {cooling!r} unknown", fix=f"use one of {', '.join(RACK_LIMIT_KW)}"
        )
    if rack_kw > limit:
        better = [k for k, v in RACK_LIMIT_KW.items() if v >= rack_kw]
        fix = (
            f"use {better[0]} cooling (up to {RACK_LIMIT_KW[better[0]]:.0f} kW) or spread the "
            f"load over {rack_kw / limit:.1f}x as many racks"
            if better
            else f"spread the load over {rack_kw / limit:.1f}x as many racks"
        )
        raise InfeasibleError(
            f"a {rack_kw:.1f} kW rack exceeds what {cooling} cooling removes ({limit:.0f} kW)",
            fix=fix,
        )
