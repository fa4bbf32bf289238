"""Physical bounds for ingested measurements: a value a real run cannot print is a corrupt
cell, refused with the file, the row, the value and the bound before anything is stored.

Every reader of measured data (nccl-tests logs, Kineto traces, the monitor's telemetry
formats) checks its cells here, so `astral monitor ingest`, `astral sim fit` and `seer
calibrate` refuse the same values with the same words:

    FILE: line 42: out-of-place time 1e+308 us is above 3.156e+13 us (a year,
    bounds.MAX_DURATION_S) (fix: repair or drop the row: no measured time lasts that long)

The bounds are physical, not statistical: a slow but real measurement always passes. The
bandwidth ceiling is read from the hardware catalog (astral/hardware_data, or entries a user
added with `load_catalog`) each time, never a constant, so faster hardware raises it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from starfabric.errors import DataError

MAX_DURATION_S = 365.25 * 86400.0
"""Assumption: no measured time (a collective, a kernel, an iteration, a trace's span) lasts a
year (365.25 days); a longer one is a corrupt cell (1e308, a unit slip of 10^9)."""

LINK_DIRECTIONS = 2.0
"""How far a bandwidth nccl-tests prints can exceed one direction of the link it ran on: busbw
of an all_reduce with in-network reduction (NVLS, SHARP) reaches 2(n-1)/n of the link rate
(the GB200 NVL72 logs in tests/data print 847 GB/s on 900 GB/s NVLink), alltoall and
all_gather algbw n/(n-1) of it; both are below 2 (nccl-tests PERFORMANCE.md) [fact]. So the
ceiling is the fastest catalogued link counted in both directions."""

MAX_COUNTER = float(2**64 - 1)
"""Largest value of an unsigned 64-bit counter (sysfs port counters, ECC counts, bytes) [fact]."""

ABSOLUTE_ZERO_C = -273.15
"""No temperature is below absolute zero [fact]."""

MAX_SENSOR_TEMPERATURE_C = 1000.0
"""Assumption: a GPU, CPU or module sensor reading above 1000 degC is corrupt (every part's
junction limit is near 100 degC; silicon would have melted long before)."""

DDM_TEMPERATURE_C = (-128.0, 128.0)
"""SFF-8636/SFF-8472 module temperature: a signed 16-bit value in 1/256 degC [fact]."""

DDM_POWER_DBM_MAX = 10.0 * math.log10(6.5535)
"""SFF-8636/SFF-8472 optical power: an unsigned 16-bit value in 0.1 uW, at most 6.5535 mW
(+8.16 dBm) [fact]."""

DDM_BIAS_MA_MAX = 131.07
"""SFF-8636/SFF-8472 laser bias: an unsigned 16-bit value in 2 uA, at most 131.07 mA [fact]."""


@dataclass(frozen=True)
class Bound:
    """A physical range lo..hi in `unit`; `why` names the bound (a constant of this module)."""

    lo: float
    hi: float
    unit: str
    why: str

    def check(self, value: float, where: str, what: str, fix: str) -> float:
        """`value` if finite and inside lo..hi; else a DataError: `where`: `what` value unit is
        below/above the bound (why) (fix: `fix`)."""
        if not math.isfinite(value):
            raise DataError(f"{where}: {what} {value!r} is not a finite number", fix=fix)
        if value < self.lo:
            raise DataError(
                f"{where}: {what} {value:g} {self.unit} is below {self.lo:g} {self.unit} "
                f"({self.why})",
                fix=fix,
            )
        if value > self.hi:
            raise DataError(
                f"{where}: {what} {value:g} {self.unit} is above {self.hi:.4g} {self.unit} "
                f"({self.why})",
                fix=fix,
            )
        return value


def duration(unit: str, per_second: float) -> Bound:
    """0..MAX_DURATION_S, in a unit with `per_second` units a second (us: 1e6, ms: 1e3)."""
    return Bound(0.0, MAX_DURATION_S * per_second, unit, "a year, bounds.MAX_DURATION_S")


def max_link_gbytes_per_s() -> float:
    """The fastest link in the hardware catalog, GB/s per direction: GPU NVLink and the
    GPU-to-CPU link (offload_gbps, GB/s), NIC ports and optics/cables (Gbit/s / 8)."""
    from starfabric.astral.hardware import GPUS, NICS, OPTICS

    rates = [g.nvlink_gbps for g in GPUS.all()]
    rates += [g.offload_gbps for g in GPUS.all() if g.offload_gbps is not None]
    rates += [g.nic_gbps / 8.0 for g in GPUS.all() if g.nic_gbps is not None]
    rates += [n.port_gbps / 8.0 for n in NICS.all()]
    rates += [o.gbps / 8.0 for o in OPTICS.all()]
    return max(rates)


def bandwidth() -> Bound:
    """0..the fastest catalogued link in both directions (LINK_DIRECTIONS), GB/s."""
    top = max_link_gbytes_per_s()
    return Bound(
        0.0,
        LINK_DIRECTIONS * top,
        "GB/s",
        f"the fastest link in the hardware catalog, {top:g} GB/s, both directions",
    )


def message_bytes() -> Bound:
    """0..the largest GPU memory in the catalog: a collective's buffer lives in one GPU's HBM."""
    from starfabric.astral.hardware import GPUS

    top = max(g.hbm_gib for g in GPUS.all())
    return Bound(
        0.0, top * 2**30, "B", f"the largest GPU memory in the hardware catalog, {top:g} GiB"
    )


def counter() -> Bound:
    """0..MAX_COUNTER (an unsigned 64-bit counter)."""
    return Bound(0.0, MAX_COUNTER, "", "an unsigned 64-bit counter, bounds.MAX_COUNTER")


def magnitude() -> Bound:
    """-MAX_COUNTER..MAX_COUNTER: a reading of unknown unit no sensor or counter exceeds."""
    return Bound(-MAX_COUNTER, MAX_COUNTER, "", "a 64-bit counter's range, bounds.MAX_COUNTER")


def temperature_c() -> Bound:
    """ABSOLUTE_ZERO_C..MAX_SENSOR_TEMPERATURE_C, degC."""
    return Bound(
        ABSOLUTE_ZERO_C,
        MAX_SENSOR_TEMPERATURE_C,
        "degC",
        "absolute zero .. bounds.MAX_SENSOR_TEMPERATURE_C",
    )


def ddm(kind: str) -> Bound:
    """The range an SFF-8636/8472 module can report: `temp` degC, `tx`/`rx` dBm, `bias` mA."""
    if kind == "temp":
        return Bound(*DDM_TEMPERATURE_C, "degC", "SFF-8636 temperature, bounds.DDM_TEMPERATURE_C")
    if kind == "bias":
        return Bound(0.0, DDM_BIAS_MA_MAX, "mA", "SFF-8636 bias, bounds.DDM_BIAS_MA_MAX")
    return Bound(-math.inf, DDM_POWER_DBM_MAX, "dBm", "SFF-8636 power, bounds.DDM_POWER_DBM_MAX")


__all__ = [
    "ABSOLUTE_ZERO_C",
    "DDM_BIAS_MA_MAX",
    "DDM_POWER_DBM_MAX",
    "DDM_TEMPERATURE_C",
    "LINK_DIRECTIONS",
    "MAX_COUNTER",
    "MAX_DURATION_S",
    "MAX_SENSOR_TEMPERATURE_C",
    "Bound",
    "bandwidth",
    "counter",
    "ddm",
    "duration",
    "magnitude",
    "max_link_gbytes_per_s",
    "message_bytes",
    "temperature_c",
]
