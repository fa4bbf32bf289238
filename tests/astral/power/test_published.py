"""Published measurements reproduced from mechanisms (sources in docs/astral.md)."""

import pytest

from starfabric.astral.power.published import CASES, Result


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_published_measurement(case) -> None:  # type: ignore[no-untyped-def]
    r = Result(case, float(case.run()))
    assert r.ok, r.as_dict()


def test_at_least_six_kinds() -> None:
    assert len({c.kind for c in CASES}) >= 6
