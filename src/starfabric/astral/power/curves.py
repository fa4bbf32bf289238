"""Published performance curves, evaluated as EnergyPlus evaluates them.

A curve clamps each input to its [min, max] before evaluating and clamps the output to its
limits where it has them (EnergyPlus Input/Output Reference, "Curve:Biquadratic"). The plant
uses the very curves the EnergyPlus cross-check writes into its input, so that the two
models differ by what they compute, never by which data they were given:

- chillers: EnergyPlus's DataSets/Chillers.idf "DOE-2 Centrifugal/5.50COP" (DOE-2.1E
  HERM-CENT-CAP-FT / EIR-FT / EIR-FPLR) for a water-cooled centrifugal chiller, and
  DataSets/AirCooledChiller.idf "ElectricEIRChiller Carrier 30XA500 1609.4kW/2.9COP" for an
  air-cooled screw chiller; the EIR model is Hydeman et al., "Development and testing of a
  reformulated regression-based electric chiller model", ASHRAE Trans. 108(2), 2002, as
  EnergyPlus's Chiller:Electric:EIR implements it;
- cooling tower: the YorkCalc approach correlation of York International (EnergyPlus
  Engineering Reference, "Variable Speed Cooling Towers Empirical Model", table of YorkCalc
  coefficients), with its bounds;
- fans: ASHRAE 90.1-2019 Appendix G, Table G3.1.3.15, VAV fan part-load curve (method 2);
- pumps: the variable-speed pump curve with differential-pressure reset that NREL's
  openstudio-standards applies for ASHRAE 90.1 baselines ("VSD DP Reset").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Biquadratic:
    """z = c1 + c2 x + c3 x² + c4 y + c5 y² + c6 x y, inputs and output clamped."""

    name: str
    c: tuple[float, float, float, float, float, float]
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    out_range: tuple[float | None, float | None] = (None, None)

    def __call__(self, x: Array | float, y: Array | float) -> Array:
        xx = np.clip(np.asarray(x, dtype=float), *self.x_range)
        yy = np.clip(np.asarray(y, dtype=float), *self.y_range)
        c = self.c
        z = c[0] + c[1] * xx + c[2] * xx * xx + c[3] * yy + c[4] * yy * yy + c[5] * xx * yy
        lo, hi = self.out_range
        return np.clip(z, -np.inf if lo is None else lo, np.inf if hi is None else hi)


@dataclass(frozen=True)
class Polynomial:
    """z = Σ c_k x^k (quadratic, cubic, quartic), input and output clamped."""

    name: str
    c: tuple[float, ...]
    x_range: tuple[float, float]
    out_range: tuple[float | None, float | None] = (None, None)

    def __call__(self, x: Array | float) -> Array:
        xx = np.clip(np.asarray(x, dtype=float), *self.x_range)
        z = np.zeros_like(xx)
        for k, ck in enumerate(self.c):
            z = z + ck * xx**k
        lo, hi = self.out_range
        return np.clip(z, -np.inf if lo is None else lo, np.inf if hi is None else hi)


@dataclass(frozen=True)
class ChillerCurves:
    """One chiller's reference point and its three EIR-model curves (EnergyPlus dataset)."""

    source: str
    condenser: str  # "air" or "water"
    ref_cop: float
    ref_chw_c: float
    ref_cond_c: float
    min_plr: float
    max_plr: float
    min_unload: float
    capft: Biquadratic
    eirft: Biquadratic
    eirfplr: Polynomial


DOE2_CENTRIFUGAL = ChillerCurves(
    source="EnergyPlus DataSets/Chillers.idf 'DOE-2 Centrifugal/5.50COP' (DOE-2.1E CCAPT3/EIRT3/EIRPLR3)",
    condenser="water",
    ref_cop=5.5,
    ref_chw_c=6.67,
    ref_cond_c=29.4,
    min_plr=0.1,
    max_plr=1.0,
    min_unload=0.2,
    capft=Biquadratic(
        "DOE-2 Centrifugal/5.50COP CAPFT",
        (0.257896, 0.0389016, -0.00021708, 0.0468684, -0.00094284, -0.00034344),
        (5.0, 10.0),
        (24.0, 35.0),
    ),
    eirft=Biquadratic(
        "DOE-2 Centrifugal/5.50COP EIRFT",
        (0.933884, -0.058212, 0.00450036, 0.00243, 0.000486, -0.001215),
        (5.0, 10.0),
        (24.0, 35.0),
    ),
    eirfplr=Polynomial(
        "DOE-2 Centrifugal/5.50COP EIRFPLR", (0.222903, 0.313387, 0.46371), (0.0, 1.0)
    ),
)

CARRIER_30XA_AIR = ChillerCurves(
    source=(
        "EnergyPlus DataSets/AirCooledChiller.idf 'ElectricEIRChiller Carrier 30XA500 "
        "1609.4kW/2.9COP' (air-cooled screw)"
    ),
    condenser="air",
    ref_cop=2.9,
    ref_chw_c=6.67,
    ref_cond_c=35.0,
    min_plr=0.10,
    max_plr=1.15,
    min_unload=0.10,
    capft=Biquadratic(
        "Carrier 30XA500 CAPFT",
        (-0.3479426478, 0.0637388098, -0.0007955045, 0.0712741456, -0.0010660025, -0.0009234587),
        (4.44, 10.0),
        (29.44, 46.11),
        (0.7513, 1.1148),
    ),
    eirft=Biquadratic(
        "Carrier 30XA500 EIRFT",
        (0.089134815, 0.0280734482, 0.0016909915, 0.0230561531, 0.0001663802, -0.0015023227),
        (4.44, 10.0),
        (29.44, 46.11),
        (0.8809, 1.3909),
    ),
    eirfplr=Polynomial("Carrier 30XA500 EIRFPLR", (0.0, 1.0, 0.0), (0.15, 1.0)),
)

CHILLERS = {"doe2-centrifugal": DOE2_CENTRIFUGAL, "carrier-30xa-air": CARRIER_30XA_AIR}


def chiller_power(
    ch: ChillerCurves,
    ref_cap_w: float,
    cop: float,
    load_w: Array,
    chw_c: Array | float,
    cond_c: Array | float,
) -> tuple[Array, Array, Array]:
    """Electric input (W), load met (W) and part-load ratio of an EIR chiller.

    EnergyPlus Chiller:Electric:EIR (Engineering Reference, "Electric Chiller Model Based on
    Condenser Entering Temperature"): available capacity = reference capacity × CAPFT(T_chw,
    T_cond); PLR = load / capacity; below the minimum PLR the chiller cycles (FRAC = PLR /
    min PLR); below the minimum unloading ratio it false-loads (PLR for power = min unload);
    power = capacity / COP × EIRFT × EIRFPLR(PLR) × FRAC.
    """
    load = np.maximum(np.asarray(load_w, dtype=float), 0.0)
    avail = ref_cap_w * ch.capft(chw_c, cond_c)
    met = np.minimum(load, avail * ch.max_plr)
    plr = np.where(avail > 0, met / np.maximum(avail, 1e-9), 0.0)
    frac = np.where(plr < ch.min_plr, np.minimum(1.0, plr / ch.min_plr), 1.0)
    plr_e = np.maximum(plr, ch.min_unload)
    p = avail / cop * ch.eirft(chw_c, cond_c) * ch.eirfplr(plr_e) * frac
    p = np.where(load > 0, p, 0.0)
    return p, met, plr


YORKCALC = (
    -0.359741205, -0.055053608, 0.0023850432, 0.173926877, -0.0248473764, 0.00048430224,
    -0.005589849456, 0.0005770079712, -0.00001342427256, 2.84765801111111, -0.121765149,
    0.0014599242, 1.680428651, -0.0166920786, -0.0007190532, -0.025485194448, 0.0000487491696,
    0.00002719234152, -0.0653766255555556, -0.002278167, 0.0002500254, -0.0910565458,
    0.00318176316, 0.000038621772, -0.0034285382352, 0.00000856589904, -0.000001516821552,
)  # fmt: skip
"""YorkCalc approach-temperature coefficients (EnergyPlus Engineering Reference table)."""

YORK_TWB: tuple[float, float] = (-34.4, 29.4444)
YORK_RANGE: tuple[float, float] = (1.1111, 22.2222)
YORK_WATER_RATIO: tuple[float, float] = (0.75, 1.25)
YORK_LG_MAX = 8.0
"""Validity bounds EnergyPlus applies to the YorkCalc inputs (inputs are capped to them)."""


def yorkcalc_approach(twb: Array, rng: Array, lg: Array) -> Array:
    """Tower approach (K) from inlet wet bulb (°C), range (K) and water/air flow-ratio quotient."""
    t = np.asarray(twb, dtype=float)
    r = np.asarray(rng, dtype=float)
    g = np.asarray(lg, dtype=float)
    c = YORKCALC
    a0 = c[0] + c[1] * t + c[2] * t * t
    a1 = c[3] + c[4] * t + c[5] * t * t
    a2 = c[6] + c[7] * t + c[8] * t * t
    b0 = c[9] + c[10] * t + c[11] * t * t
    b1 = c[12] + c[13] * t + c[14] * t * t
    b2 = c[15] + c[16] * t + c[17] * t * t
    d0 = c[18] + c[19] * t + c[20] * t * t
    d1 = c[21] + c[22] * t + c[23] * t * t
    d2 = c[24] + c[25] * t + c[26] * t * t
    return (
        a0 + a1 * r + a2 * r * r
        + g * (b0 + b1 * r + b2 * r * r)
        + g * g * (d0 + d1 * r + d2 * r * r)
    )  # fmt: skip


def yorkcalc_calibrate(twb_des: float, range_des: float, approach_des: float) -> float:
    """Water-flow ratio at which the correlation gives the design approach at full air flow.

    EnergyPlus calibrates a variable-speed tower this way (CondenserLoopTowers, "calibrated
    water flow rate"): the design water flow corresponds to this ratio, so the correlation
    reproduces the user's design point at 1.01 air-flow ratio.
    """
    lo, hi = 0.5, 5.0

    def f(x: float) -> float:
        return approach_des - float(
            yorkcalc_approach(np.array(twb_des), np.array(range_des), np.array(x / 1.01))
        )

    if f(lo) * f(hi) > 0:
        from starfabric.errors import ConfigError

        raise ConfigError(
            f"cooling tower: a design approach of {approach_des} K at {twb_des} °C wet bulb and "
            f"{range_des} K range is outside the YorkCalc correlation",
            fix="use an approach between about 2 and 12 K",
        )
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if f(lo) * f(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


FAN_VAV_90_1 = Polynomial(
    "ASHRAE 90.1-2019 G3.1.3.15 VAV fan (method 2)",
    (0.0013, 0.1470, 0.9506, -0.0998),
    (0.0, 1.0),
)
"""Fan power fraction vs flow fraction of a VAV fan with a VFD (ASHRAE 90.1 Appendix G)."""

PUMP_VS_90_1 = Polynomial(
    "openstudio-standards variable-speed pump, VSD DP Reset",
    (0.0, 0.0205, 0.4101, 0.5753),
    (0.0, 1.0),
)
"""Pump power fraction vs flow fraction of a variable-speed pump with differential-pressure
reset (openstudio-standards' 90.1 baseline curve: 0.0205 x + 0.4101 x² + 0.5753 x³, which sums
to 1.0059 at full flow and is used as written)."""

CUBE = Polynomial("fan affinity law (cube)", (0.0, 0.0, 0.0, 1.0), (0.0, 1.0))
