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
