"""Quantities with units ("400G", "51.2T", "2us", "80GiB", "1.5kW") parsed in one place.

Bandwidth is returned in bits per second, sizes in bytes, durations in seconds, power in
watts. Decimal prefixes (k, M, G, T, P) are powers of 1000, binary ones (Ki, Mi, Gi, Ti) of
1024, as in networking and memory datasheets.
"""

from __future__ import annotations

import math
import re

from starfabric.errors import ConfigError

_DEC = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_NUM = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"
_TIME = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def _fail(field: str, value: object, expect: str) -> ConfigError:
    """The error for a quantity that does not parse; a negative or non-finite one says so
    (`cps: -5k` is refused for its sign, not for its spelling)."""
    text = str(value).strip()
    if re.fullmatch(r"-" + _NUM + r"\S*", text) or (
        isinstance(value, int | float) and not isinstance(value, bool) and value < 0
    ):
        return ConfigError(
            f"{field}: {value!r} is negative", fix=f"give {field} >= 0, written like {expect}"
        )
    if text.lower().lstrip("+-") in ("nan", "inf", "infinity", ".nan", ".inf"):
        return ConfigError(
            f"{field}: {value!r} is not a finite quantity", fix=f"write it like {expect}"
        )
    return ConfigError(f"{field}: cannot read {value!r} as {expect}", fix=f"write it like {expect}")


def _finite(x: float, field: str, value: object, expect: str) -> float:
    """`x` if finite; '1e308G' overflows to inf once scaled and is refused like 'inf'."""
    if not math.isfinite(x):
        raise ConfigError(
            f"{field}: {value!r} is not a finite quantity (it overflows)",
            fix=f"write it like {expect}",
        )
    return x


def _prefix(p: str) -> float | None:
    return _BIN.get(p, _DEC.get(p))


def parse_bandwidth(value: str | float | int, field: str = "bandwidth") -> float:
    """'400G', '400Gbps', '51.2T', '50GB/s' → bits per second (numbers pass through as bit/s)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise _fail(field, value, "'400G' or '50GB/s'")
        return float(value)
    m = re.fullmatch(_NUM + r"([KkMGTP]i?|)\s*(bps|b/s|bit/s|B/s|Bps|)\s*", str(value))
    if not m:
        raise _fail(field, value, "'400G' or '50GB/s'")
    scale = _prefix(m.group(2))
    if scale is None:
        raise _fail(field, value, "'400G' or '50GB/s'")
    bits = 8.0 if m.group(3) in ("B/s", "Bps") else 1.0
    return _finite(float(m.group(1)) * scale * bits, field, value, "'400G' or '50GB/s'")


def parse_bytes(value: str | float | int, field: str = "size") -> int:
    """'80GiB', '1MB', '4096', '1.5KiB' → bytes (an integer)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise _fail(field, value, "'80GiB' or '1MB'")
        return int(value)
    m = re.fullmatch(_NUM + r"([KkMGTP]i?|)\s*(B|bytes|)\s*", str(value))
    if not m:
        raise _fail(field, value, "'80GiB' or '1MB'")
    scale = _prefix(m.group(2))
    if scale is None:
        raise _fail(field, value, "'80GiB' or '1MB'")
    return int(round(_finite(float(m.group(1)) * scale, field, value, "'80GiB' or '1MB'")))


def parse_duration(value: str | float | int, field: str = "duration") -> float:
    """'2us', '500ms', '10s', '5min', '5d' → seconds (numbers pass through as seconds)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise _fail(field, value, "'2us' or '500ms'")
        return float(value)
    m = re.fullmatch(_NUM + r"(ns|us|µs|ms|s|min|h|d)\s*", str(value))
    if not m:
        raise _fail(field, value, "'2us' or '500ms'")
    return _finite(float(m.group(1)) * _TIME[m.group(2)], field, value, "'2us' or '500ms'")


def parse_power(value: str | float | int, field: str = "power") -> float:
    """'700W', '10.5kW', '1.2MW' → watts."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise _fail(field, value, "'700W' or '10.5kW'")
        return float(value)
    m = re.fullmatch(_NUM + r"([kMG]|)\s*W\s*", str(value))
    if not m:
        raise _fail(field, value, "'700W' or '10.5kW'")
    return _finite(float(m.group(1)) * _DEC[m.group(2)], field, value, "'700W' or '10.5kW'")


def parse_count(value: str | float | int, field: str = "count") -> int:
    """'16M', '512K', '1e6', 4096 → an integer count (decimal prefixes)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise _fail(field, value, "'16M' or 4096")
        return value
    m = re.fullmatch(_NUM + r"([kKMGT]|)\s*", str(value))
    if not m:
        raise _fail(field, value, "'16M' or 4096")
    return int(round(_finite(float(m.group(1)) * _DEC[m.group(2)], field, value, "'16M' or 4096")))


def format_bytes(n: float) -> str:
    """Human-readable binary size: 1536 → '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
