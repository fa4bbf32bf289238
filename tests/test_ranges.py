"""starfabric.ranges: one wording for every out-of-range integer, from scalars, arrays of any
dtype, Typer options and pydantic fields alike."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.config import Spec, parse_spec
from starfabric.errors import ConfigError
from starfabric.ranges import IntRange, check_int, check_values, option, ranged

U8 = IntRange.of_dtype(np.uint8)
VNI = IntRange.bits(24, "24-bit VNI")


class _M(Spec):
    x: Annotated[int, ranged(U8)] = 0
    xs: tuple[Annotated[int, ranged(U8)], ...] = ()


def test_dtype_ranges() -> None:
    assert (U8.lo, U8.hi, U8.what) == (0, 255, "uint8")
    i64 = IntRange.of_dtype(np.int64)
    assert (i64.lo, i64.hi) == (-(2**63), 2**63 - 1)
    assert str(VNI) == "0..16777215 (24-bit VNI)"
    assert VNI.narrower(lo=1, what="VPC VNI") == IntRange(1, 2**24 - 1, "VPC VNI")
    assert 255 in U8 and 256 not in U8 and -1 not in U8 and "7" not in U8


@pytest.mark.parametrize("v", [-1, 256, 2**70, -(2**70)])
def test_scalar_refused_with_field_value_and_range(v: int) -> None:
    with pytest.raises(ConfigError) as e:
        check_int("proto", v, U8)
    assert e.value.one_line() == (
        f"proto={v} is outside 0..255 (uint8) (fix: give proto a whole number in 0..255)"
    )


@pytest.mark.parametrize("v", [0, 255, np.uint8(255), np.int64(3), 7.0])
def test_scalar_accepted(v: object) -> None:
    assert check_int("proto", v, U8) == int(v)  # type: ignore[call-overload]


@pytest.mark.parametrize("v", [1.5, float("nan"), float("inf"), "7", None])
def test_not_a_whole_number_refused(v: object) -> None:
    with pytest.raises(ConfigError, match=r"proto=.* is outside 0\.\.255"):
        check_int("proto", v, U8)


@pytest.mark.parametrize(
    "values",
    [
        [1, 2, 16777216],
        np.array([1, 2, 2**24], dtype=np.int64),
        np.array([1, 2, 2**31], dtype=np.uint32),
        np.array([1.0, 2.0, 2.0**24]),
        [1, 2, -1],
        [1, 2**63, -1],  # would be float64 without care
    ],
)
def test_array_names_the_first_bad_row(values: object) -> None:
    with pytest.raises(ConfigError) as e:
        check_values("vni", values, VNI)  # type: ignore[arg-type]
    msg = e.value.one_line()
    assert msg.startswith("vni[2]=") or msg.startswith("vni[1]="), msg
    assert "is outside 0..16777215 (24-bit VNI) (fix: give vni a whole number" in msg


def test_arrays_within_range_pass_and_single_values_have_no_row() -> None:
    check_values("vni", np.arange(2**24, dtype=np.uint32)[::4096], VNI)
    check_values("x", np.array([0, 255], dtype=np.uint8), U8)  # dtype fits: no scan
    check_values("x", np.zeros(0, dtype=np.int64), U8)
    check_values("x", 7, U8)
    with pytest.raises(ConfigError, match=r"^x=-1 is outside"):
        check_values("x", [-1], U8)
    with pytest.raises(ConfigError, match=r"^x=nan is outside"):
        check_values("x", np.array([np.nan]), U8)


@given(st.integers(min_value=-(2**80), max_value=2**80))
def test_check_int_agrees_with_the_bounds(v: int) -> None:
    ok = 0 <= v <= 2**24 - 1
    try:
        check_int("vni", v, VNI)
    except ConfigError as e:
        assert not ok and f"vni={v} is outside" in str(e)
    else:
        assert ok


def test_option_callback_checks_each_value() -> None:
    cb = option("--vni", VNI)
    assert cb(5) == 5 and cb(None) is None and cb([1, 2]) == [1, 2]
    with pytest.raises(ConfigError, match=r"^--vni=-1 is outside 0\.\.16777215"):
        cb(-1)
    with pytest.raises(ConfigError, match=r"^--vni=16777216 is outside"):
        cb((1, 16777216))


def test_spec_field_words_it_the_same_way() -> None:
    assert parse_spec(_M, {"x": 255}).x == 255
    with pytest.raises(ConfigError) as e:
        parse_spec(_M, {"x": 256}, source="f.yaml")
    assert e.value.one_line() == (
        "f.yaml: x=256 is outside 0..255 (uint8) (fix: give x a whole number in 0..255)"
    )
    with pytest.raises(ConfigError, match=r"^f\.yaml: xs\[1\]=-1 is outside 0\.\.255 \(uint8\)"):
        parse_spec(_M, {"xs": [1, -1]}, source="f.yaml")


def test_pydantic_bounds_say_which_bound_in_the_fix() -> None:
    from pydantic import Field

    class B(Spec):
        n: int = Field(1, ge=1)

    with pytest.raises(ConfigError, match=r"field 'n' = 0: .*\(fix: give n a value >= 1\)"):
        parse_spec(B, {"n": 0})
