"""The registry of SessionEngine implementations the contract-conformance suite
(test_contract_conformance.py) runs: one line per engine, a factory from an EngineConfig."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from starfabric.fornax.engine import EngineConfig, FastEngine, SessionEngine
from starfabric.fornax.engine.reference import ReferenceEngine
from starfabric.fornax.softengine import SoftEngine
from starfabric.fornax.softpath import SoftPath, SoftPathConfig

EngineFactory = Callable[[EngineConfig], SessionEngine]

#: Every SessionEngine, by name. The conformance suite runs each against BASELINE on the same
#: histories; a new engine (a later datapath) joins it by adding one line here.
ENGINES: dict[str, EngineFactory] = {
    "reference": ReferenceEngine,
    "fast": FastEngine,
    "soft": lambda cfg: SoftEngine(SoftPath(cfg, SoftPathConfig(capacity=cfg.capacity))),
}
#: The engine the others are compared with: the plain, obvious implementation of the contract.
BASELINE = "reference"


@pytest.fixture(params=sorted(set(ENGINES) - {BASELINE}))
def engine_pair(request: pytest.FixtureRequest) -> tuple[str, EngineFactory, EngineFactory]:
    """(name, factory of the engine under test, factory of the baseline): one per engine."""
    return request.param, ENGINES[request.param], ENGINES[BASELINE]
