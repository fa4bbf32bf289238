"""Integer ranges, checked in one place: a CLI option, a spec field and a Python call that get
a value outside its field's range all refuse it with the same words,
``vni=-1 is outside 0..16777215 (24-bit VXLAN VNI)``, naming where the value came from
(``--vni``, ``scenario.yaml: sessions[0].vni``, ``vni``), before any cast can wrap it or a
kernel can crash on it.

`IntRange` is the domain (usually a numpy dtype's, sometimes narrower); `check_int` and
`check_values` raise the ConfigError; `option` is the Typer callback and `ranged` the pydantic
validator built on them (`config.validation_message` words its error the same way).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from starfabric.errors import ConfigError

RANGE_ERROR = "int_range"
"""The pydantic error type `ranged` raises; `config.validation_message` words it."""


@dataclass(frozen=True)
class IntRange:
    """The whole numbers lo..hi (both included); `what` names the domain (a dtype, a standard)."""

    lo: int
    hi: int
    what: str

    @classmethod
    def of_dtype(cls, dtype: npt.DTypeLike, what: str | None = None) -> IntRange:
        """Every value an integer dtype holds; `what` defaults to the dtype's name."""
        dt = np.dtype(dtype)
        if dt == np.bool_:
            return cls(0, 1, what or "bool")
        info = np.iinfo(dt)
        return cls(int(info.min), int(info.max), what or dt.name)

    @classmethod
    def bits(cls, n: int, what: str) -> IntRange:
        """The unsigned n-bit numbers 0..2**n - 1."""
        return cls(0, (1 << n) - 1, what)

    def narrower(self, lo: int | None = None, hi: int | None = None, what: str = "") -> IntRange:
        """This range with a tighter bound (a field whose valid values are a sub-range)."""
        return IntRange(
            self.lo if lo is None else max(lo, self.lo),
            self.hi if hi is None else min(hi, self.hi),
            what or self.what,
        )

    def __contains__(self, value: object) -> bool:
        n = _number(value)
        return n is not None and self.lo <= n <= self.hi

    def __str__(self) -> str:
        return f"{self.lo}..{self.hi} ({self.what})"


def _number(value: object) -> int | float | None:
    """`value` as a Python int (or float, if not whole); None if it is not a finite number."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            return None
        return int(f) if f.is_integer() else f
    return None


def _shown(value: object) -> str:
    n = _number(value)
    text = str(n) if n is not None else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def message(where: str, value: object, r: IntRange) -> str:
    """The one wording of an out-of-range value: ``WHERE=VALUE is outside LO..HI (WHAT)``."""
    return f"{where}={_shown(value)} is outside {r}"


def fix_for(where: str, r: IntRange) -> str:
    """The fix that goes with `message`."""
    return f"give {where} a whole number in {r.lo}..{r.hi}"


def out_of_range(
    where: str, value: object, r: IntRange, *, field: str = "", fix: str = ""
) -> ConfigError:
    """The ConfigError for `where` = `value` outside `r` (`field`: what the fix names, when
    `where` is one element of it; `fix`: a fix in the user's units, if not whole numbers)."""
    return ConfigError(message(where, value, r), fix=fix or fix_for(field or where, r))


def check_int(where: str, value: object, r: IntRange, *, fix: str = "") -> int:
    """`value` as an int if it is a whole number in `r`, else the one-line ConfigError."""
    n = _number(value)
    if n is None or isinstance(n, float) or not r.lo <= n <= r.hi:
        raise out_of_range(where, value, r, fix=fix)
    return n


def check_values(where: str, values: npt.ArrayLike, r: IntRange) -> None:
    """Every element of a scalar or array in `r` (non-whole numbers are truncated by the cast
    that follows and pass); the first one outside is named, with its row if there are several.
    An integer array whose dtype cannot hold a value outside `r` is passed without a scan."""
    if isinstance(values, np.ndarray | np.generic):
        arr = np.asarray(values)
    elif isinstance(values, list | tuple):  # keep Python ints exact (no float64 detour)
        arr = np.empty(np.shape(values), dtype=object)
        arr[...] = values
    else:
        arr = np.asarray(values, dtype=object)
    if arr.size == 0:
        return
    kind = arr.dtype.kind
    if kind in "iub":
        full = IntRange.of_dtype(arr.dtype)
        if r.lo <= full.lo and full.hi <= r.hi:
            return
        lo, hi = int(arr.min()), int(arr.max())
        if r.lo <= lo and hi <= r.hi:
            return
        bad = (arr < r.lo) | (arr > r.hi)
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr < r.lo) | (arr > r.hi)
        if not bad.any():
            return
    else:
        flat = arr.ravel()
        ok = [(n := _number(v)) is not None and r.lo <= n <= r.hi for v in flat]
        if all(ok):
            return
        bad = ~np.asarray(ok).reshape(arr.shape)
    i = int(np.flatnonzero(bad.ravel())[0])
    label = f"{where}[{i}]" if arr.size > 1 else where
    raise out_of_range(label, arr.ravel()[i], r, field=where)


def option(flag: str, r: IntRange) -> Callable[[Any], Any]:
    """A Typer option callback: the value (or each of a multiple option's values) in `r`."""

    def cb(value: Any) -> Any:
        if isinstance(value, list | tuple):
            for v in value:
                check_int(flag, v, r)
        elif value is not None:
            check_int(flag, value, r)
        return value

    return cb


def field_value(v: int, r: IntRange) -> int:
    """`v` if in `r`; else, inside a pydantic validator, the error `ranged` raises."""
    if not r.lo <= v <= r.hi:
        raise PydanticCustomError(
            RANGE_ERROR,
            "{value} is outside {range}",
            {"value": v, "lo": r.lo, "hi": r.hi, "what": r.what, "range": str(r)},
        )
    return v


def ranged(r: IntRange) -> AfterValidator:
    """The validator of an int spec field that must lie in `r`:
    ``vni: Annotated[int, ranged(VNI)]``; refused with `message`'s words
    (config.validation_message adds the field's path)."""
    return AfterValidator(lambda v: field_value(v, r))


__all__ = [
    "RANGE_ERROR",
    "IntRange",
    "check_int",
    "check_values",
    "field_value",
    "fix_for",
    "message",
    "option",
    "out_of_range",
    "ranged",
]
