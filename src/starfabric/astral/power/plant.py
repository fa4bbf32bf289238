"""The cooling plant hour by hour over a year: PUE, WUE, design-day peak, hours per mode.

Every hour (8760 of them, as whole numpy arrays) the IT heat is split between liquid (cold
plates → CDU → facility water) and air (CRAH fans → chilled-water coil). Each path is the
physics of its equipment, with the published curves of `curves`:

- **Air side.** The CRAH fans move m = Q_design / (c_p ΔT) of air at design (constant volume,
  or variable volume on ASHRAE 90.1's VFD fan curve); their power, V ΔP / η, heats the air
  after the coil. The return air is supply + Q / (m c_p). An air-side economizer (the
  EnergyPlus Controller:OutdoorAir logic) opens when outdoor air is colder than the return
  air, below the dry-bulb limit and below the dew-point limit, and mixes outdoor and return
  air down to the coil's leaving setpoint (all outdoor air when even that is warmer). The coil
  removes m (h_mixed - h_leaving); the zone's humidity follows the outdoor air mixed in.
- **Chilled water.** A variable-speed pump (its heat goes into the water) and an EIR chiller
  (Chiller:Electric:EIR: capacity and EIR biquadratic in leaving chilled water and entering
  condenser temperature: the lift; EIR quadratic in part load; cycling and false loading at
  low load). Air-cooled chillers see the outdoor dry bulb; water-cooled ones the tower's
  water. A water-side economizer pre-cools the chilled-water return with tower water through
  a plate heat exchanger when the tower is cold enough.
- **Towers.** A variable-speed tower on the YorkCalc approach correlation calibrated to its
  design point, its fan modulated (or cycled at minimum speed, or off in free convection) to
  hold the leaving water setpoint, as EnergyPlus's CoolingTower:VariableSpeed does; water use
  is evaporation from a saturated-exit-air balance, drift and blowdown at the cycles of
  concentration.
- **Liquid.** The CDU's pump drives the technology cooling loop (its heat in the loop); the
  facility water loop's pump and towers (or dry coolers) hold the facility water supply,
  checked against the ASHRAE liquid class; a trim chiller takes what the towers cannot.
- **Power chain** (`chain`): IT through the UPS / HVDC stages at their part load, mechanical
  load through the transformer.

The EnergyPlus cross-check (`energyplus`) writes the same equipment, curves and weather into
an EnergyPlus input and compares the annual and monthly facility energy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from starfabric.astral.power.ashrae import (
    RECOMMENDED_MAX_DEW_POINT_C,
    check_liquid_supply,
    check_supply_air,
)
from starfabric.astral.power.chain import ChainResult, ChainSpec, chain_input
from starfabric.astral.power.curves import (
    CHILLERS,
    CUBE,
    FAN_VAV_90_1,
    PUMP_VS_90_1,
    YORK_LG_MAX,
    YORK_RANGE,
    YORK_TWB,
    YORK_WATER_RATIO,
    chiller_power,
    yorkcalc_approach,
    yorkcalc_calibrate,
)
from starfabric.astral.power.weather import (
    Weather,
    dry_bulb_from_enthalpy,
    enthalpy,
    saturation_humidity_ratio,
    saturation_temperature_from_enthalpy,
)
from starfabric.config import Spec
from starfabric.errors import ConfigError

Array = np.ndarray[Any, Any]

STD_RHO_AIR = 1.2041
"""kg/m³ of dry air at 101 325 Pa and 20 °C: EnergyPlus's standard density for volume flows."""
CP_WATER = 4180.0
"""J/(kg K) of water near 20-30 °C (EnergyPlus's water property table gives 4178-4192)."""
RHO_WATER = 998.0
H_FG = 2.45e6
"""J/kg, latent heat of evaporation of water near 20 °C."""


def cp_air(w: Array | float) -> Array:
    """Moist-air specific heat J/(kg dry air K): EnergyPlus PsyCpAirFnW, 1004.84 + 1858.95 W."""
    return 1004.84 + 1858.95 * np.asarray(w, dtype=float)


class AirSideSpec(Spec):
    """CRAH / air handler: supply temperature, fans and the air-side economizer."""

    supply_c: float = Field(22.0, description="CRAH supply air = IT inlet (°C)")
    delta_t_k: float = Field(12.0, gt=0, description="air temperature rise across the IT at design")
    fan_pressure_pa: float = Field(500.0, gt=0, description="fan total pressure rise")
    fan_efficiency: float = Field(0.6, gt=0, le=1, description="fan total efficiency")
    fan_control: Literal["constant", "variable"] = "variable"
    min_flow_fraction: float = Field(0.3, ge=0, le=1)
    economizer: Literal["none", "air", "water"] = "air"
    economizer_max_dry_bulb_c: float | None = Field(
        None, description="air economizer high limit (None: the return air temperature)"
    )
    economizer_max_dew_point_c: float = Field(
        RECOMMENDED_MAX_DEW_POINT_C,
        description="air economizer closes above this outdoor dew point",
    )
    ashrae_class: str = "A1"

    @model_validator(mode="after")
    def _check(self) -> AirSideSpec:
        check_supply_air(self.supply_c, self.ashrae_class)
        return self


class TowerSpec(Spec):
    """Variable-speed open cooling tower (YorkCalc), its pump and its water."""

    design_wet_bulb_c: float = Field(25.6, description="EnergyPlus's default design wet bulb")
    approach_k: float = Field(3.9, gt=0, description="design approach (7 °F, CTI rating point)")
    range_k: float = Field(5.6, gt=0, description="design range (10 °F)")
    fan_w_per_w: float = Field(
        0.0127,
        gt=0,
        description="fan W per W rejected: ASHRAE 90.1-2019 Table 6.8.1-7 minimum 40.2 gpm/hp "
        "for axial open towers at 95/85/75 °F",
    )
    min_air_flow_ratio: float = Field(0.2, gt=0, le=1)
    free_convection_fraction: float = Field(0.125, ge=0, le=0.5)
    lg_ratio: float = Field(1.2, gt=0, description="design water/air mass flow ratio")
    pump_head_pa: float = Field(200e3, gt=0)
    pump_efficiency: float = Field(0.7, gt=0, le=1)
    cycles_of_concentration: float = Field(3.0, gt=1)
    drift_fraction: float = Field(
        0.00008, ge=0, description="of the water flow (EnergyPlus 0.008 %)"
    )
    setpoint: Literal["fixed", "reset"] = "fixed"
    setpoint_c: float = Field(29.4, description="fixed leaving-water setpoint (85 °F)")
    reset_min_c: float = Field(18.0, description="lowest condenser water under wet-bulb reset")


class ChilledWaterSpec(Spec):
    """Chillers and the chilled-water loop."""

    chiller: str = "doe2-centrifugal"
    cop: float | None = Field(None, gt=0, description="reference COP (None: the curve set's)")
    supply_c: float = Field(10.0, description="chilled water leaving the chiller (°C)")
    delta_t_k: float = Field(6.0, gt=0)
    sizing_factor: float = Field(1.2, ge=1.0, description="chiller capacity over design load")
    pump_head_pa: float = Field(300e3, gt=0)
    pump_efficiency: float = Field(0.7, gt=0, le=1)
    motor_efficiency: float = Field(0.9, gt=0, le=1)
    pump_control: Literal["constant", "variable"] = "variable"
    hx_approach_k: float = Field(1.5, gt=0, description="water-side economizer HX approach")

    @model_validator(mode="after")
    def _check(self) -> ChilledWaterSpec:
        if self.chiller not in CHILLERS:
            raise ConfigError(
                f"chiller {self.chiller!r} unknown", fix=f"use one of {', '.join(CHILLERS)}"
            )
        return self


class LiquidSpec(Spec):
    """Direct liquid cooling: technology cooling loop, CDU, facility water and its heat rejection."""

    fraction: float = Field(0.0, ge=0, le=1, description="share of IT heat into liquid")
    liquid_class: str = "W32"
    facility_supply_c: float = Field(30.0, description="facility water supply to the CDUs (°C)")
    facility_delta_t_k: float = Field(8.0, gt=0)
    cdu_approach_k: float = Field(3.0, gt=0)
    tcs_delta_t_k: float = Field(10.0, gt=0)
    cdu_pump_head_pa: float = Field(150e3, gt=0)
    facility_pump_head_pa: float = Field(200e3, gt=0)
    pump_efficiency: float = Field(0.7, gt=0, le=1)
    heat_rejection: Literal["tower", "drycooler"] = "tower"
    drycooler_approach_k: float = Field(6.0, gt=0, description="design approach to dry bulb")
    drycooler_fan_w_per_w: float = Field(0.02, gt=0)
    trim_chiller: bool = True

    @model_validator(mode="after")
    def _check(self) -> LiquidSpec:
        if self.fraction > 0:
            check_liquid_supply(self.facility_supply_c, self.liquid_class)
        return self


class HeatReuseSpec(Spec):
    """Heat taken from the facility water to heat buildings (ventilation air, offices): that
    heat leaves through the building, not the towers, so it costs no tower water or fan power.

    The buildings' heating demand follows the outdoor degree-hours below `balance_point_c`
    (the degree-day model: demand ∝ max(balance − dry bulb, 0)); its scale is whatever takes
    `annual_fraction` of the year's IT energy, each hour capped by the heat the facility water
    carries. 0 (the default) reuses nothing."""

    annual_fraction: float = Field(
        0.0, ge=0, le=1, description="share of the year's IT energy reused as building heat"
    )
    balance_point_c: float = Field(
        18.3, description="heating balance point: the 65 °F base of ASHRAE's heating degree-days"
    )


class PlantSpec(Spec):
    """The whole facility plant: air side, chilled water, towers, liquid, power chain."""

    name: str = "plant"
    air: AirSideSpec = Field(default_factory=AirSideSpec)
    chilled_water: ChilledWaterSpec = Field(default_factory=ChilledWaterSpec)
    tower: TowerSpec = Field(default_factory=TowerSpec)
    liquid: LiquidSpec = Field(default_factory=LiquidSpec)
    heat_reuse: HeatReuseSpec = Field(default_factory=HeatReuseSpec)
    chain: ChainSpec = Field(default_factory=ChainSpec)
    other_fraction: float = Field(
        0.01, ge=0, description="lighting, offices, security: fraction of design IT, constant"
    )


@dataclass
class YearResult:
    """One year of the plant, hourly, and its annual figures."""

    spec: PlantSpec
    weather: str
    it_w: Array
    facility_w: Array
    parts_w: dict[str, Array]
    water_m3: Array
    modes: dict[str, Array]
    month: Array
    chain: ChainResult
    elapsed_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pue(self) -> float:
        return float(self.facility_w.sum() / self.it_w.sum())

    @property
    def wue_l_per_kwh(self) -> float:
        """Site water per IT energy (The Green Grid WUE, L/kWh)."""
        return float(self.water_m3.sum() * 1000.0 / (self.it_w.sum() / 1000.0))

    def monthly_kwh(self) -> Array:
        return np.array([self.facility_w[self.month == m].sum() / 1000.0 for m in range(1, 13)])

    def design_day(self) -> dict[str, Any]:
        """The hour of peak facility power and the worst day's PUE."""
        i = int(np.argmax(self.facility_w))
        day = np.arange(self.facility_w.size) // 24
        pue_day = np.bincount(day, self.facility_w) / np.maximum(np.bincount(day, self.it_w), 1)
        d = int(np.argmax(pue_day))
        return {
            "peak_facility_w": float(self.facility_w[i]),
            "peak_hour": i,
            "peak_pue": float(self.facility_w[i] / max(self.it_w[i], 1.0)),
            "worst_day": d,
            "worst_day_pue": float(pue_day[d]),
            "dry_bulb_c": float(self.extra["dry_bulb_c"][i]),
            "wet_bulb_c": float(self.extra["wet_bulb_c"][i]),
        }

    def hours_per_mode(self) -> dict[str, int]:
        return {k: int(np.count_nonzero(v)) for k, v in self.modes.items()}

    def summary(self) -> dict[str, Any]:
        it_kwh = self.it_w.sum() / 1e3
        return {
            "plant": self.spec.name,
            "weather": self.weather,
            "pue": self.pue,
            "wue_l_per_kwh": self.wue_l_per_kwh,
            "it_mwh": it_kwh / 1e3,
            "facility_mwh": self.facility_w.sum() / 1e6,
            "water_m3": float(self.water_m3.sum()),
            "heat_reused_mwh": float(self.extra.get("heat_reused_w", np.zeros(1)).sum() / 1e6),
            "ere": float(
                (self.facility_w.sum() - self.extra.get("heat_reused_w", np.zeros(1)).sum())
                / self.it_w.sum()
            ),
            "parts_mwh": {k: float(v.sum() / 1e6) for k, v in self.parts_w.items()},
            "parts_share_of_it": {
                k: float(v.sum() / 1e3 / it_kwh) for k, v in self.parts_w.items()
            },
            "design_day": self.design_day(),
            "hours_per_mode": self.hours_per_mode(),
            "monthly_facility_mwh": [float(x / 1e3) for x in self.monthly_kwh()],
            "chain_efficiency": float(
                (self.it_w.sum() + sum(v.sum() for k, v in self.parts_w.items() if k != "chain"))
                / self.facility_w.sum()
            ),
            "elapsed_s": self.elapsed_s,
        }


# --- the tower -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TowerResult:
    leaving_c: Array
    fan_w: Array
    air_ratio: Array
    water_m3: Array
    full_fan: Array


def _bisect(f: Any, lo: Array, hi: Array, n: int = 40) -> Array:
    """Vectorised bisection of f on [lo, hi]; where f(lo) and f(hi) have one sign there is no
    root and lo comes back (EnergyPlus's SolveRoot returns its first bound then)."""
    flo = f(lo)
    no_root = np.sign(flo) == np.sign(f(hi))
    a, b = lo.copy(), hi.copy()
    for _ in range(n):
        mid = 0.5 * (a + b)
        fm = f(mid)
        same = np.sign(fm) == np.sign(flo)
        a = np.where(same, mid, a)
        flo = np.where(same, fm, flo)
        b = np.where(same, b, mid)
    return np.where(no_root, lo, 0.5 * (a + b))


def tower_design(
    ts: TowerSpec, design_q_w: float, range_k: float | None = None
) -> tuple[float, float, float]:
    """(design water kg/s, design range K, design fan W) of a tower rejecting design_q_w."""
    rng = ts.range_k if range_k is None else range_k
    return design_q_w / (CP_WATER * rng), rng, design_q_w * ts.fan_w_per_w


def tower_hour(
    ts: TowerSpec,
    q_w: Array,
    water_kg_s: float,
    design: tuple[float, float, float],
    setpoint_c: Array,
    weather: Weather,
) -> TowerResult:
    """A variable-speed tower holding `setpoint_c` with heat q_w and water flow water_kg_s.

    EnergyPlus CoolingTower:VariableSpeed (YorkCalc) in steady state: the range is the load
    over the water's heat capacity; at full fan the leaving water is wet bulb + approach; if
    that is above the setpoint the fan runs flat out and the water floats up; else free
    convection (fan off, a fraction of full-fan capacity), cycling at minimum speed, or the
    air-flow ratio that gives exactly the setpoint's approach.
    """
    q = np.maximum(np.asarray(q_w, dtype=float), 0.0)
    twb = weather.wet_bulb_c
    des_kg_s, des_range, p_des = design
    cal = yorkcalc_calibrate(ts.design_wet_bulb_c, des_range, ts.approach_k)
    wfr = np.clip(water_kg_s / des_kg_s * cal, *YORK_WATER_RATIO)
    rng = q / (water_kg_s * CP_WATER)
    r_cap = np.clip(rng, *YORK_RANGE)
    t_cap = np.clip(twb, *YORK_TWB)
    sp = np.broadcast_to(np.asarray(setpoint_c, dtype=float), q.shape)
    t_in = sp + rng

    def outlet(af: Array | float) -> Array:
        # E+ calculateVariableTowerOutletTemp: Twb + approach(Tr) + Tr = T_in, solved for Tr
        af_a = np.broadcast_to(np.asarray(af, dtype=float), q.shape)
        lg = np.minimum(wfr / af_a, YORK_LG_MAX)

        def g(tr: Array) -> Array:
            return twb + yorkcalc_approach(t_cap, tr, lg) + tr - t_in

        tr = _bisect(g, np.full(q.shape, 0.001), np.full(q.shape, 22.222))
        return t_in - tr

    t_on = outlet(1.0)
    full = t_on > sp
    # leaving water at full fan in steady state (inlet = outlet + range)
    t_full = twb + yorkcalc_approach(t_cap, r_cap, np.minimum(wfr, YORK_LG_MAX))
    fc = ts.free_convection_fraction
    t_off = t_in - fc * (t_in - t_on)
    fan_off = (~full) & (t_off <= sp)
    t_min = outlet(ts.min_air_flow_ratio)
    cycling = (~full) & (~fan_off) & (t_min < sp)
    modulate = (~full) & (~fan_off) & (~cycling)
    # modulating: approach(af) = setpoint - Twb
    ta = np.clip(sp - twb, 1.1111, 40.0)

    def h(af: Array) -> Array:
        return yorkcalc_approach(t_cap, r_cap, np.minimum(wfr / af, YORK_LG_MAX)) - ta

    af_mod = _bisect(h, np.full(q.shape, ts.min_air_flow_ratio), np.ones(q.shape))
    cyc = np.where(cycling, (t_off - sp) / np.maximum(t_off - t_min, 1e-9), 0.0)
    fan = np.select(
        [full, fan_off, cycling, modulate],
        [
            np.full(q.shape, p_des),
            np.zeros(q.shape),
            p_des * CUBE(ts.min_air_flow_ratio) * cyc,
            p_des * CUBE(af_mod),
        ],
    )
    air_ratio = np.select(
        [full, fan_off, cycling, modulate],
        [
            np.ones(q.shape),
            np.full(q.shape, fc),
            cyc * ts.min_air_flow_ratio + (1 - cyc) * fc,
            af_mod,
        ],
    )
    leaving = np.where(full, t_full, np.where(fan_off, np.minimum(t_off, sp), sp))
    fan = np.where(q > 0, fan, 0.0)
    # water: evaporation from a saturated-exit-air balance (EnergyPlus "SaturatedExit")
    air_kg_s = des_kg_s / ts.lg_ratio * air_ratio
    h_in = enthalpy(twb, saturation_humidity_ratio(twb, weather.pressure_pa))
    h_out = h_in + q / np.maximum(air_kg_s, 1e-9)
    t_sat = saturation_temperature_from_enthalpy(h_out, weather.pressure_pa)
    w_out = saturation_humidity_ratio(t_sat, weather.pressure_pa)
    evap = np.where(q > 0, air_kg_s * np.maximum(w_out - weather.humidity_ratio, 0.0), 0.0)
    drift = ts.drift_fraction * water_kg_s * air_ratio * (q > 0)
    blowdown = np.maximum(evap / (ts.cycles_of_concentration - 1.0) - drift, 0.0)
    water_m3 = (evap + drift + blowdown) * 3600.0 / RHO_WATER
    return TowerResult(leaving, fan, air_ratio, water_m3, full)


def heat_reuse(spec: HeatReuseSpec, q_avail_w: Array, it_energy: float, dry_bulb_c: Array) -> Array:
    """Hourly heat (W) the buildings take from the facility water: a degree-hour demand
    k · max(balance − dry bulb, 0), capped by what the water carries, with k the scale that
    makes the year's reuse `annual_fraction` of the IT energy (bisection: reuse rises with k).
    Where even an unbounded k cannot reach it (warm climates), every cold hour takes all."""
    q = np.asarray(q_avail_w, dtype=float)
    if spec.annual_fraction <= 0 or it_energy <= 0:
        return np.zeros_like(q)
    dh = np.maximum(spec.balance_point_c - np.asarray(dry_bulb_c, dtype=float), 0.0)
    target = spec.annual_fraction * it_energy
    if float(np.minimum(q, np.where(dh > 0, np.inf, 0.0)).sum()) <= target:
        return np.where(dh > 0, q, 0.0)
    lo, hi = 0.0, float(q.max() / max(dh[dh > 0].min(), 1e-9)) * 2.0
    for _ in range(60):
        k = 0.5 * (lo + hi)
        if float(np.minimum(q, k * dh).sum()) < target:
            lo = k
        else:
            hi = k
    return np.minimum(q, hi * dh)


def wse_setpoint(spec: PlantSpec, weather: Weather) -> Array:
    """The free-cooling tower's setpoint: as cold as the wet bulb allows (wet bulb + the
    design approach), not below the plate HX's target (chilled-water supply - HX approach)."""
    cw = spec.chilled_water
    return np.maximum(weather.wet_bulb_c + spec.tower.approach_k, cw.supply_c - cw.hx_approach_k)


def water_side_economizer(
    spec: PlantSpec, sz: Sizing, weather: Weather, q_evap: Array, running: Array
) -> tuple[Array, Array, Array, Array, Array]:
    """The plate HX in series ahead of the chillers on its own tower loop, hour by hour:
    (free cooling W, tower fan W, pump W, water m3, tower water °C).

    The HX runs when its tower water is colder than the chilled-water return; it then takes
    ε C_min (return - tower water), at most the whole load (counterflow ε-NTU at the flows of
    the hour, the UA of `wse_ua`). With a constant chilled-water pump the HX sees the design
    flow and the return diluted by the bypass, supply + load / (flow c_p); with a variable one
    the flow that carries the load at the design temperature difference."""
    cw, ts = spec.chilled_water, spec.tower
    n = weather.hours
    sp = wse_setpoint(spec, weather)
    ua = wse_ua(spec, sz)
    c_w = sz.wse_kg_s * CP_WATER
    if cw.pump_control == "constant":
        c_chw = np.full(n, sz.chw_kg_s * CP_WATER)
        t_ret = cw.supply_c + q_evap / c_chw
    else:
        c_chw = np.maximum(q_evap / cw.delta_t_k, 1e-9)
        t_ret = np.full(n, cw.supply_c + cw.delta_t_k)
    eps = hx_effectiveness(ua, c_chw, c_w)
    c_min = np.minimum(c_chw, c_w)
    pump_heat = sz.wse_pump_w * cw.motor_efficiency
    t_tw = sp.copy()
    q_free = np.zeros(n)
    on = np.zeros(n, dtype=bool)
    tw = tower_hour(ts, np.zeros(n), sz.wse_kg_s, sz.wse_tower, sp, weather)
    for _ in range(4):
        on = running & (t_ret > t_tw)
        q_free = np.where(on, np.minimum(eps * c_min * np.maximum(t_ret - t_tw, 0.0), q_evap), 0.0)
        q_tower = np.where(on, q_free + pump_heat, 0.0)
        tw = tower_hour(ts, q_tower, sz.wse_kg_s, sz.wse_tower, sp, weather)
        # off hours: the tower's water would sit at what full fan gives, the enable test
        t_tw = np.where(on, tw.leaving_c, np.maximum(sp, weather.wet_bulb_c + ts.approach_k))
    pump = np.where(on, sz.wse_pump_w, 0.0)
    return q_free, tw.fan_w, pump, tw.water_m3, t_tw


def condenser_setpoint(spec: PlantSpec, weather: Weather) -> Array:
    """The towers' leaving-water setpoint each hour: fixed, or reset to follow the wet bulb
    (wet bulb + the design approach, not below `reset_min_c`). EnergyPlus gets the same
    hourly schedule."""
    ts = spec.tower
    if ts.setpoint == "reset":
        return np.maximum(weather.wet_bulb_c + ts.approach_k, ts.reset_min_c)
    return np.full(weather.hours, ts.setpoint_c)


def hx_effectiveness(ua: float, c1: Array | float, c2: Array | float) -> Array:
    """Counterflow ε-NTU (EnergyPlus HeatExchanger:FluidToFluid, CounterFlow)."""
    c1a, c2a = np.asarray(c1, dtype=float), np.asarray(c2, dtype=float)
    cmin, cmax = np.minimum(c1a, c2a), np.maximum(c1a, c2a)
    ntu = ua / np.maximum(cmin, 1e-12)
    cr = cmin / np.maximum(cmax, 1e-12)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-ntu * (1 - cr))
        eps = np.where(np.abs(1 - cr) < 1e-9, ntu / (1 + ntu), (1 - e) / (1 - cr * e))
    return np.clip(np.nan_to_num(eps, nan=0.0), 0.0, 1.0)


def wse_ua(spec: PlantSpec, sz: Sizing) -> float:
    """UA of the water-side economizer's plate HX: at design flows it brings the whole design
    chilled-water return down to the supply temperature with tower water `hx_approach_k`
    colder (counterflow ε-NTU inverted)."""
    cw = spec.chilled_water
    c_chw = sz.chw_kg_s * CP_WATER
    c_w = sz.wse_kg_s * CP_WATER
    cmin, cmax = min(c_chw, c_w), max(c_chw, c_w)
    eps = min(c_chw * cw.delta_t_k / (cmin * (cw.delta_t_k + cw.hx_approach_k)), 0.99)
    cr = cmin / cmax
    if abs(1 - cr) < 1e-9:
        ntu = eps / (1 - eps)
    else:
        ntu = float(np.log((1 - eps * cr) / (1 - eps)) / (1 - cr))
    return float(ntu * cmin)


def pump_design_w(flow_kg_s: float, head_pa: float, efficiency: float) -> float:
    return flow_kg_s / RHO_WATER * head_pa / efficiency


# --- the year --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizing:
    """Design flows and powers of the plant for a design IT load (what EnergyPlus is given too)."""

    design_it_w: float
    air_w: float
    liquid_w: float
    air_kg_s: float = 0.0
    air_m3_s: float = 0.0
    fan_w: float = 0.0
    supply_c: float = 0.0
    coil_leaving_c: float = 0.0
    return_c: float = 0.0
    coil_w: float = 0.0
    chw_kg_s: float = 0.0
    chw_pump_w: float = 0.0
    chiller_ref_w: float = 0.0
    chiller_cop: float = 0.0
    cond_w: float = 0.0
    cond_tower: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cond_pump_w: float = 0.0
    wse_kg_s: float = 0.0
    wse_tower: tuple[float, float, float] = (0.0, 0.0, 0.0)
    wse_pump_w: float = 0.0
    tcs_kg_s: float = 0.0
    fws_kg_s: float = 0.0
    cdu_pump_w: float = 0.0
    fws_pump_w: float = 0.0
    fws_w: float = 0.0
    liquid_tower: tuple[float, float, float] = (0.0, 0.0, 0.0)


def size_plant(spec: PlantSpec, design_it_w: float) -> Sizing:
    """Size every component for the design IT load: air and water flows from the design
    temperature differences, fan and pump powers from flow × pressure / efficiency, chillers
    with the sizing factor, towers at their design range (the flow through them)."""
    a, cw, ts, lq = spec.air, spec.chilled_water, spec.tower, spec.liquid
    des_air = design_it_w * (1.0 - lq.fraction)
    des_liq = design_it_w * lq.fraction
    kw: dict[str, Any] = {"design_it_w": design_it_w, "air_w": des_air, "liquid_w": des_liq}
    if des_air > 0:
        cp0 = float(cp_air(0.008))
        m_des = des_air / (cp0 * a.delta_t_k)
        v_des = m_des / STD_RHO_AIR
        fan = v_des * a.fan_pressure_pa / a.fan_efficiency
        coil = des_air + fan
        chw_kg_s = coil / (CP_WATER * cw.delta_t_k)
        chw_pump = pump_design_w(chw_kg_s, cw.pump_head_pa, cw.pump_efficiency)
        ch = CHILLERS[cw.chiller]
        cop = cw.cop or ch.ref_cop
        ref = cw.sizing_factor * (coil + chw_pump * cw.motor_efficiency)
        cond = ref * (1.0 + 1.0 / cop)
        tower = tower_design(ts, cond)
        kw.update(
            air_kg_s=m_des,
            air_m3_s=v_des,
            fan_w=fan,
            supply_c=a.supply_c,
            coil_leaving_c=a.supply_c - fan / (m_des * cp0),
            return_c=a.supply_c + des_air / (m_des * cp0),
            coil_w=coil,
            chw_kg_s=chw_kg_s,
            chw_pump_w=chw_pump,
            chiller_ref_w=ref,
            chiller_cop=cop,
            cond_w=cond,
            cond_tower=tower,
            cond_pump_w=pump_design_w(tower[0], ts.pump_head_pa, ts.pump_efficiency),
        )
        if a.economizer == "water":
            # the free-cooling loop: its own tower cell and pump, the chilled-water design flow
            # through the plate HX, the tower sized for the whole design coil load
            q_wse = coil + chw_pump * cw.motor_efficiency
            kw.update(
                wse_kg_s=chw_kg_s,
                wse_tower=tower_design(ts, q_wse, cw.delta_t_k),
                wse_pump_w=pump_design_w(chw_kg_s, ts.pump_head_pa, ts.pump_efficiency),
            )
    if des_liq > 0:
        tcs = des_liq / (CP_WATER * lq.tcs_delta_t_k)
        fws = des_liq / (CP_WATER * lq.facility_delta_t_k)
        cdu = pump_design_w(tcs, lq.cdu_pump_head_pa, lq.pump_efficiency)
        fwp = pump_design_w(fws, lq.facility_pump_head_pa, lq.pump_efficiency)
        q_fws = des_liq + (cdu + fwp) * cw.motor_efficiency
        kw.update(
            tcs_kg_s=tcs,
            fws_kg_s=fws,
            cdu_pump_w=cdu,
            fws_pump_w=fwp,
            fws_w=q_fws,
            liquid_tower=(fws, lq.facility_delta_t_k, q_fws * ts.fan_w_per_w),
        )
    return Sizing(**kw)


MIN_MEAN_PART_LOAD = 0.05
"""Assumption: a plant whose mean IT load is below 5% of its design load is refused. The
part-load curves (ASHRAE 90.1 fan and pump curves, chiller EIR vs part-load ratio, whose
minimum unloading is 10-25%) have no data that far down, and the fixed losses sized for the
design would be divided by almost nothing (a 100 GW plant at 8 MW reads PUE 311)."""


def simulate_year(
    spec: PlantSpec,
    weather: Weather,
    it_w: Array | float,
    design_it_w: float | None = None,
) -> YearResult:
    """Simulate the plant for every hour of the weather year under the IT load it_w (W)."""
    t0 = time.perf_counter()
    n = weather.hours
    it = np.broadcast_to(np.asarray(it_w, dtype=float), (n,)).astype(float)
    if not np.isfinite(it).all() or (it < 0).any():
        raise ConfigError("IT load must be finite and non-negative every hour")
    design = float(design_it_w if design_it_w is not None else it.max())
    if design <= 0:
        raise ConfigError("design IT load must be positive")
    if (it > design * (1 + 1e-9)).any():
        raise ConfigError(
            f"IT load peaks at {it.max() / 1e6:.2f} MW, above the {design / 1e6:.2f} MW design",
            fix="raise the design IT load",
        )
    if it.mean() < MIN_MEAN_PART_LOAD * design:
        raise ConfigError(
            f"mean IT load {it.mean() / 1e6:.3g} MW is below {MIN_MEAN_PART_LOAD:.0%} of the "
            f"{design / 1e6:.3g} MW design (plant.MIN_MEAN_PART_LOAD): the part-load curves do "
            "not reach that far",
            fix="size the plant for the load (a design IT load near the peak)",
        )
    sz = size_plant(spec, design)
    a, cw, ts, lq = spec.air, spec.chilled_water, spec.tower, spec.liquid
    db, w_oa, twb = weather.dry_bulb_c, weather.humidity_ratio, weather.wet_bulb_c
    parts: dict[str, Array] = {}
    modes: dict[str, Array] = {}
    water = np.zeros(n)
    extra: dict[str, Any] = {"dry_bulb_c": db, "wet_bulb_c": twb, "sizing": sz}

    # --- air side and chilled water -----------------------------------------------------
    if sz.air_w > 0:
        q_air = it * (1.0 - lq.fraction)
        cp0 = float(cp_air(0.008))
        if a.fan_control == "variable":
            ff = np.clip(q_air / sz.air_w, a.min_flow_fraction, 1.0)
            fan = sz.fan_w * FAN_VAV_90_1(ff)
        else:
            ff = np.ones(n)
            fan = np.full(n, sz.fan_w)
        on = q_air > 0
        fan = np.where(on, fan, 0.0)
        m = sz.air_kg_s * ff
        t_c = a.supply_c - fan / (m * cp0)  # coil leaving setpoint: the fan heats after it
        t_r = a.supply_c + q_air / (m * cp0)
        if a.economizer == "air":
            hi = t_r
            if a.economizer_max_dry_bulb_c is not None:
                hi = np.minimum(t_r, a.economizer_max_dry_bulb_c)
            econ = on & (db < hi) & (weather.dew_point_c < a.economizer_max_dew_point_c)
            frac = np.where(
                db < t_c, np.clip((t_r - t_c) / np.maximum(t_r - db, 1e-9), 0.0, 1.0), 1.0
            )
            f_oa = np.where(econ, frac, 0.0)
        else:
            f_oa = np.zeros(n)
        # zone humidity: no moisture gains, so it follows the outdoor air that is mixed in.
        # Where the economizer modulates, the outdoor fraction is the one whose enthalpy mix
        # lands exactly on the coil's leaving setpoint (mixing by temperature alone would
        # leave a few mK that no coil controller acts on).
        w_sat_c = saturation_humidity_ratio(t_c, weather.pressure_pa)
        h_oa = enthalpy(db, w_oa)
        modul = (f_oa > 0) & (f_oa < 1)
        f_l, w_l, h_l = f_oa.tolist(), w_oa.tolist(), h_oa.tolist()
        tc_l, tr_l, ws_l, mod_l = t_c.tolist(), t_r.tolist(), w_sat_c.tolist(), modul.tolist()
        ret: list[float] = []
        wz = w_l[0]
        for i in range(n):
            ret.append(wz)
            f = f_l[i]
            if mod_l[i]:
                tc, tr = tc_l[i], tr_l[i]
                hr = (1.006 * tr + wz * (2501.0 + 1.86 * tr)) * 1000.0
                dw, dh = w_l[i] - wz, h_l[i] - hr
                den = tc * 1.86 * dw - dh / 1000.0 + 2501.0 * dw
                if den != 0.0:
                    num = hr / 1000.0 - 2501.0 * wz - tc * (1.006 + 1.86 * wz)
                    f = min(max(num / den, 0.0), 1.0)
                    f_l[i] = f
            wz = min(f * w_l[i] + (1.0 - f) * wz, ws_l[i])
        f_oa = np.array(f_l)
        w_ret = np.array(ret)
        w_mix = f_oa * w_oa + (1.0 - f_oa) * w_ret
        h_mix = f_oa * h_oa + (1.0 - f_oa) * enthalpy(t_r, w_ret)
        h_out = enthalpy(t_c, np.minimum(w_mix, w_sat_c))
        q_coil = np.where(on, m * np.maximum(h_mix - h_out, 0.0), 0.0)
        q_coil = np.where(q_coil > 1e-9 * sz.air_w, q_coil, 0.0)
        parts["crah_fans"] = fan
        tiny = 1e-6 * sz.air_w
        modes["air_economizer_full"] = on & (f_oa > 0) & (q_coil <= tiny)
        modes["air_economizer_partial"] = on & (f_oa > 0) & (q_coil > tiny)
        modes["mechanical_air"] = on & (f_oa == 0) & (q_coil > 0)
        extra.update(
            t_return_c=t_r, t_mixed_c=dry_bulb_from_enthalpy(h_mix, w_mix), oa_fraction=f_oa,
            coil_w=q_coil,
        )  # fmt: skip

        ch = CHILLERS[cw.chiller]
        running = q_coil > 0
        if cw.pump_control == "variable":
            chw_pump = sz.chw_pump_w * PUMP_VS_90_1(np.clip(q_coil / sz.coil_w, 0.0, 1.0))
        else:
            chw_pump = np.full(n, sz.chw_pump_w)
        chw_pump = np.where(running, chw_pump, 0.0)
        q_evap = q_coil + chw_pump * cw.motor_efficiency  # shaft work ends up in the water
        q_free = np.zeros(n)
        cond_pump = np.zeros(n)
        tower_fan = np.zeros(n)
        chiller = np.zeros(n)
        cond_kg_s = sz.cond_tower[0]
        if a.economizer == "water":
            q_free, wse_fan, wse_pump, wse_water, t_wse = water_side_economizer(
                spec, sz, weather, q_evap, running
            )
            tower_fan = tower_fan + wse_fan
            cond_pump = cond_pump + wse_pump
            water += wse_water
            extra["wse_water_c"] = t_wse
            modes["water_economizer_full"] = running & (q_free >= q_evap * (1 - 1e-9))
            modes["water_economizer_partial"] = (
                running & (q_free > 0) & (q_free < q_evap * (1 - 1e-9))
            )
        q_ch = q_evap - q_free
        if ch.condenser == "air":
            chiller, _, _ = chiller_power(
                ch, sz.chiller_ref_w, sz.chiller_cop, q_ch, cw.supply_c, db
            )
        else:
            sp = condenser_setpoint(spec, weather)
            # compressor heat joins the load at the condenser: iterate power and tower water
            t_cond = sp.copy()
            for _ in range(3):
                chiller, _, _ = chiller_power(
                    ch, sz.chiller_ref_w, sz.chiller_cop, q_ch, cw.supply_c, t_cond
                )
                q_rej = np.where(
                    q_ch > 0, q_ch + chiller + sz.cond_pump_w * cw.motor_efficiency, 0.0
                )
                tw = tower_hour(ts, q_rej, cond_kg_s, sz.cond_tower, sp, weather)
                t_cond = np.where(q_ch > 0, tw.leaving_c, sp)
            cond_pump = cond_pump + np.where(q_rej > 0, sz.cond_pump_w, 0.0)
            tower_fan = tower_fan + tw.fan_w
            water += tw.water_m3
            modes["tower_full_fan"] = tw.full_fan & (q_rej > 0)
            extra["condenser_water_c"] = t_cond
        extra["free_cooling_w"] = q_free
        parts["chw_pumps"] = chw_pump
        parts["chillers"] = chiller
        parts["condenser_pumps"] = cond_pump
        parts["tower_fans"] = tower_fan

    # --- liquid -------------------------------------------------------------------------
    if sz.liquid_w > 0:
        q_liq = it * lq.fraction
        on = q_liq > 0
        cdu = np.where(on, sz.cdu_pump_w, 0.0)
        fws = np.where(on, sz.fws_pump_w, 0.0)
        q_fws = np.where(on, q_liq + (cdu + fws) * cw.motor_efficiency, 0.0)
        reuse = heat_reuse(spec.heat_reuse, q_fws, float(it.sum()), db)
        q_fws = q_fws - reuse
        extra["heat_reused_w"] = reuse
        if spec.heat_reuse.annual_fraction > 0:
            modes["heat_reuse"] = reuse > 0
        sp = np.full(n, lq.facility_supply_c)
        if lq.heat_rejection == "tower":
            tw = tower_hour(ts, q_fws, sz.fws_kg_s, sz.liquid_tower, sp, weather)
            leaving, rej_fan = tw.leaving_c, tw.fan_w
            water += tw.water_m3
        else:
            # dry cooler: approach to dry bulb proportional to load / air flow (sensible ε fixed)
            need = np.maximum(sp - db, 0.1)
            app_full = lq.drycooler_approach_k * q_fws / sz.fws_w
            af = np.clip(app_full / need, 0.2, 1.0)
            leaving = np.maximum(db + app_full / af, sp)
            rej_fan = np.where(on, sz.fws_w * lq.drycooler_fan_w_per_w * af**3, 0.0)
        over = np.maximum(leaving - lq.facility_supply_c, 0.0)
        trim = np.zeros(n)
        if lq.trim_chiller:
            air_ch = CHILLERS["carrier-30xa-air"]
            q_trim = sz.fws_kg_s * CP_WATER * over
            trim, _, _ = chiller_power(
                air_ch, max(sz.liquid_w * 0.5, 1.0), air_ch.ref_cop, q_trim, 10.0, db
            )
        parts["cdu_pumps"] = cdu
        parts["facility_water_pumps"] = fws
        parts["liquid_heat_rejection_fans"] = rej_fan
        parts["trim_chiller"] = trim
        if not lq.trim_chiller:
            modes["liquid_over_class_limit"] = on & (over > 0.05)
        modes["liquid_trim_chiller"] = on & (trim > 0)
        modes["liquid_free_cooling"] = on & (trim == 0)
        extra["facility_water_supply_c"] = leaving

    parts["other"] = np.full(n, design * spec.other_fraction)
    mech = sum((v for k, v in parts.items() if k != "other"), np.zeros(n))
    design_mech = float(mech.max())
    ch_res = chain_input(
        spec.chain, it, mech + parts["other"], design, design_mech + design * spec.other_fraction
    )
    parts["chain"] = ch_res.input_w - it - mech - parts["other"]
    return YearResult(
        spec=spec,
        weather=weather.name,
        it_w=it,
        facility_w=ch_res.input_w,
        parts_w=parts,
        water_m3=water,
        modes=modes,
        month=weather.month.astype(float),
        chain=ch_res,
        elapsed_s=time.perf_counter() - t0,
        extra=extra,
    )


PRESETS: dict[str, dict[str, Any]] = {
    "legacy": {
        "name": "legacy",
        "air": {
            "supply_c": 18.0,
            "delta_t_k": 10.0,
            "fan_control": "constant",
            "economizer": "none",
        },
        "chilled_water": {
            "chiller": "doe2-centrifugal",
            "supply_c": 7.0,
            "pump_control": "constant",
        },
        "tower": {"setpoint": "fixed"},
        "chain": {"kind": "double-conversion", "redundancy": "2N", "module_shedding": False},
    },
    "air-econ": {
        "name": "air-econ",
        "air": {"supply_c": 24.0, "delta_t_k": 12.0, "economizer": "air"},
        "chilled_water": {"chiller": "carrier-30xa-air", "supply_c": 10.0},
        "chain": {"kind": "double-conversion-modern", "redundancy": "N+1"},
    },
    "water-econ": {
        "name": "water-econ",
        "air": {"supply_c": 24.0, "delta_t_k": 12.0, "economizer": "water"},
        "chilled_water": {"chiller": "doe2-centrifugal", "supply_c": 10.0},
        "tower": {"setpoint": "reset"},
        "chain": {"kind": "double-conversion-modern", "redundancy": "N+1"},
    },
    "liquid": {
        "name": "liquid",
        "air": {"supply_c": 24.0, "delta_t_k": 12.0, "economizer": "air"},
        "chilled_water": {"chiller": "carrier-30xa-air", "supply_c": 10.0},
        "liquid": {"fraction": 0.85, "facility_supply_c": 30.0, "liquid_class": "W32"},
        "chain": {"kind": "hvdc", "redundancy": "N+1"},
    },
}
"""Named plants: `legacy` (the survey's typical site: cold supply air, constant fans, chillers
year round, 2N double-conversion UPS), `air-econ` (air-side economizer, air-cooled chillers),
`water-econ` (a plate HX on its own tower cell pre-cooling the chilled-water return in
series with water-cooled chillers, condenser water reset to the wet bulb), `liquid` (85 % of the heat
into W32 facility water on towers, the rest on an air-economized CRAH plant, HVDC)."""


def preset(preset_name: str, **overrides: Any) -> PlantSpec:
    """A named plant, optionally with nested overrides."""
    if preset_name not in PRESETS:
        raise ConfigError(f"plant {preset_name!r} unknown", fix=f"use one of {', '.join(PRESETS)}")
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in PRESETS[preset_name].items()}
    for k, v in overrides.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            doc[k] = {**doc[k], **v}
        else:
            doc[k] = v
    return PlantSpec.model_validate(doc)
