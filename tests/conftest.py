"""Project-wide pytest options: `--update-golden` rewrites tests/golden/ instead of comparing."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden texts under tests/golden/ (and docs/cli.md) from this run",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when the run was asked to rewrite golden files rather than compare with them."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(autouse=True)
def _no_inherited_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist workers inherit COLUMNS=80 from the controller's terminal; the CLI tests
    stand for a user piping output, who has no COLUMNS (a test that wants one sets it)."""
    monkeypatch.delenv("COLUMNS", raising=False)
