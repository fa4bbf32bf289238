import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.errors import ConfigError
from starfabric.units import (
    format_bytes,
    parse_bandwidth,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_power,
)


@pytest.mark.parametrize(
    ("text", "bits"),
    [("400G", 400e9), ("400Gbps", 400e9), ("51.2T", 51.2e12), ("50GB/s", 400e9), ("100 M", 100e6)],
)
def test_bandwidth(text: str, bits: float) -> None:
    assert parse_bandwidth(text) == pytest.approx(bits)


@pytest.mark.parametrize(
    ("text", "n"), [("80GiB", 80 * 2**30), ("1MB", 10**6), ("4096", 4096), ("1.5KiB", 1536)]
)
def test_bytes(text: str, n: int) -> None:
    assert parse_bytes(text) == n


@pytest.mark.parametrize(
    ("text", "s"), [("2us", 2e-6), ("500ms", 0.5), ("10s", 10.0), ("5min", 300.0), ("5d", 432000.0)]
)
def test_duration(text: str, s: float) -> None:
    assert parse_duration(text) == pytest.approx(s)


def test_power_and_count() -> None:
    assert parse_power("10.5kW") == pytest.approx(10500.0)
    assert parse_count("16M") == 16_000_000
    assert parse_count(4096) == 4096


@pytest.mark.parametrize("bad", ["fast", "400X", "-3G", "G400", ""])
def test_bad_bandwidth_names_field_and_fix(bad: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_bandwidth(bad, field="switch.port_speed")
    msg = exc.value.one_line()
    assert "switch.port_speed" in msg and "fix:" in msg and "\n" not in msg


@given(st.integers(min_value=0, max_value=2**50))
def test_bytes_roundtrip_plain_integers(n: int) -> None:
    assert parse_bytes(str(n)) == n
    assert format_bytes(n).split()[-1] in {"B", "KiB", "MiB", "GiB", "TiB"}
