"""EPW weather read strictly; vectorised psychrometrics agree with psychrolib."""

from pathlib import Path

import numpy as np
import psychrolib
import pytest

from starfabric.astral.power.weather import (
    humidity_ratio_from_dew_point,
    load_weather,
    read_epw,
    saturation_humidity_ratio,
    saturation_vapor_pressure,
    wet_bulb,
)
from starfabric.errors import DataError

psychrolib.SetUnitSystem(psychrolib.SI)


def _epw(tmp_path: Path, rows: int = 8760, edit: dict[int, tuple[int, str]] | None = None) -> Path:
    head = [
        "LOCATION,Testville,XX,USA,TMY3,000000,40.0,-90.0,-6.0,200.0",
        *["HEADER"] * 6,
        "DATA PERIODS,1,1,Data,Sunday, 1/ 1,12/31",
    ]
    days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    lines = []
    for m, nd in enumerate(days, 1):
        for d in range(1, nd + 1):
            for h in range(1, 25):
                f = ["1999", str(m), str(d), str(h), "60", "x", "10.0", "5.0", "70", "99000"]
                f += ["0"] * 25
                lines.append(f)
    for i, (k, v) in (edit or {}).items():
        lines[i][k] = v
    p = tmp_path / "w.epw"
    p.write_text("\n".join(head + [",".join(f) for f in lines[:rows]]) + "\n")
    return p


def test_psychrometrics_match_psychrolib() -> None:
    t = np.array([-25.0, -0.5, 0.01, 0.5, 12.0, 30.0, 45.0])
    ref = [psychrolib.GetSatVapPres(x) for x in t]
    assert saturation_vapor_pressure(t) == pytest.approx(ref, rel=1e-12)
    assert saturation_humidity_ratio(t, 101325.0) == pytest.approx(
        [psychrolib.GetSatHumRatio(x, 101325.0) for x in t], rel=1e-12
    )
    dew = np.array([-20.0, 2.0, 15.0, 24.0])
    w = humidity_ratio_from_dew_point(dew, 98000.0)
    assert w == pytest.approx([psychrolib.GetHumRatioFromTDewPoint(x, 98000.0) for x in dew])
    db = np.array([-10.0, 10.0, 30.0, 35.0])
    wb = wet_bulb(db, w, 98000.0)
    ref_wb = [psychrolib.GetTWetBulbFromHumRatio(a, b, 98000.0) for a, b in zip(db, w, strict=True)]
    assert wb == pytest.approx(ref_wb, abs=2e-3)


def test_bundled_weather_years() -> None:
    chi, tpa = load_weather("chicago"), load_weather("tampa")
    assert chi.hours == tpa.hours == 8760
    assert chi.summary()["dry_bulb_mean_c"] < 12 < tpa.summary()["dry_bulb_mean_c"]
    assert (chi.wet_bulb_c <= chi.dry_bulb_c + 1e-6).all()
    assert tpa.summary()["wet_bulb_0.4pct_c"] > chi.summary()["wet_bulb_0.4pct_c"]


def test_strict_epw(tmp_path: Path) -> None:
    assert read_epw(_epw(tmp_path)).hours == 8760
    with pytest.raises(DataError, match="8759 hourly records"):
        read_epw(_epw(tmp_path, rows=8759))
    with pytest.raises(DataError, match=r"line 109: dry bulb is nan"):
        read_epw(_epw(tmp_path, edit={100: (6, "nan")}))
    with pytest.raises(DataError, match="missing-value code"):
        read_epw(_epw(tmp_path, edit={5: (9, "999999")}))
    with pytest.raises(DataError, match="outside"):
        read_epw(_epw(tmp_path, edit={5: (8, "150")}))
    with pytest.raises(DataError, match="does not follow"):
        read_epw(_epw(tmp_path, edit={5: (3, "2")}))
