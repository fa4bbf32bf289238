"""Published measurements reproduced from mechanisms (sources in docs/astral.md)."""

import pytest

from starfabric.astral.power.published import CASES, ROLES, Result


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_published_measurement(case) -> None:  # type: ignore[no-untyped-def]
    r = Result(case, float(case.run()))
    assert r.ok, r.as_dict()


def test_at_least_six_kinds_that_are_evidence() -> None:
    # calibration cases (and those sharing their campaign) do not count as checks
    assert {c.role for c in CASES} <= set(ROLES)
    evidence = [c for c in CASES if c.role in ("independent", "held-out")]
    assert len({c.kind for c in evidence}) >= 6
    assert sum(c.role == "held-out" for c in CASES) >= 2
