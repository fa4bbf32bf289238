"""The registry of SessionEngine implementations the contract-conformance suite
(test_contract_conformance.py) runs: one line per engine, a factory from an EngineConfig."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from starfabric.fornax.datapaths.linux.netns import linux_support
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
#: Why the Linux datapath cannot run here (None: it can): not root, no nftables, no conntrack.
LINUX_WHY = linux_support()
LINUX_MIN_TIMEOUT_S = 60
_linux: dict[str, Any] = {"lab": None, "engine": None}


def linux_engine(cfg: EngineConfig) -> SessionEngine:
    """A LinuxEngine on the session's one lab (namespaces are made once: ~0.2 s each time
    otherwise); the previous engine on it is closed first (it holds the NFLOG group)."""
    if LINUX_WHY is not None:
        pytest.skip(f"Linux datapath: {LINUX_WHY}")
    from starfabric.fornax.datapaths.linux import Lab, LabConfig, LinuxEngine

    if _linux["engine"] is not None:
        _linux["engine"].close()
    if _linux["lab"] is None:
        _linux["lab"] = Lab(LabConfig(prefix="sfxk")).__enter__()  # a prefix no other test uses
    # histories are compared before their first scrub, where no entry ages on the packets'
    # clock: kernel timeouts of at least a minute keep a loaded host from aging any meanwhile
    _linux["engine"] = LinuxEngine(cfg, _linux["lab"], min_timeout_s=LINUX_MIN_TIMEOUT_S)
    return _linux["engine"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Close the shared lab (its namespaces go too; Lab also cleans up on signals/exit)."""
    if _linux["engine"] is not None:
        _linux["engine"].close()
    if _linux["lab"] is not None:
        _linux["lab"].close()
    _linux.update(lab=None, engine=None)


ENGINES["linux"] = linux_engine
#: The engine the others are compared with: the plain, obvious implementation of the contract.
BASELINE = "reference"


@pytest.fixture(params=sorted(set(ENGINES) - {BASELINE}))
def engine_pair(request: pytest.FixtureRequest) -> tuple[str, EngineFactory, EngineFactory]:
    """(name, factory of the engine under test, factory of the baseline): one per engine."""
    return request.param, ENGINES[request.param], ENGINES[BASELINE]
