"""What the manager's step modules need of the manager they run on, as structural types.

events.py (event handlers, the patrol) and recover.py (restart recovery) are functions over a
running manager, and manager.py composes them: `Manager.__init__` builds its handler table
with `events.default_handlers(self)`, `poll_events` and `recover` call into them. They name
the manager they get by `ManagerState` below instead of importing `Manager`, so no module of
the manager imports one that imports it back (tests/test_import_cycles.py). `Manager`
satisfies the protocol; mypy checks it wherever the manager hands itself over.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import EventType, FlowKeys, SessionEngine
from starfabric.fornax.manager.config import ManagerConfig, TokenBucket
from starfabric.fornax.manager.decide import Decision
from starfabric.fornax.manager.driver import EngineDriver
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.manager.parts import Handler, Part
from starfabric.fornax.softengine import SoftEngine
from starfabric.fornax.vpc import CompiledPolicy


class ManagerState(Protocol):
    """The part of a `Manager` that event handling, the patrol and recovery read and write."""

    #: key hashes re-decided on the punt path since the last poll (events.resync skips them)
    redecided: npt.NDArray[np.uint64]
    #: where the next patrol dump starts
    patrol_cursor: int

    @property
    def engine(self) -> SessionEngine: ...

    @property
    def config(self) -> ManagerConfig: ...

    @property
    def policy(self) -> CompiledPolicy: ...

    @property
    def nat(self) -> NatPools: ...

    @property
    def budget(self) -> TokenBucket: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def driver(self) -> EngineDriver: ...

    @property
    def soft(self) -> SoftEngine: ...

    @property
    def drop(self) -> int: ...

    @property
    def now_ns(self) -> int: ...

    @property
    def handlers(self) -> dict[EventType, Handler]: ...

    @property
    def parts(self) -> list[Part]: ...

    def decide(self, keys: FlowKeys, old_aux: npt.NDArray[np.uint64] | None = None) -> Decision: ...

    def release(self, aux: npt.NDArray[np.uint64]) -> int: ...


__all__ = ["ManagerState"]
