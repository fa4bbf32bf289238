"""What the manager's step modules need of the objects they run on, as structural types.

events.py (event handlers, the patrol) and recover.py (restart recovery) are functions over a
running manager, and manager.py composes them: `Manager.__init__` builds its handler table
with `events.default_handlers(self)`, `poll_events` and `recover` call into them. rebuild.py
(ECC rebuild) is likewise run by failover.Resilience on itself. They name what they get by
`ManagerState` and `ResilienceState` below instead of importing `Manager` or `Resilience`,
so no module of the manager imports one that imports it back (tests/test_import_cycles.py).
`Manager` and `Resilience` satisfy the protocols; mypy checks it wherever one hands itself
over.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import EventType, FlowKeys, SessionEngine
from starfabric.fornax.keys import CanonicalKeys
from starfabric.fornax.manager.config import ManagerConfig, TokenBucket
from starfabric.fornax.manager.decide import Decision
from starfabric.fornax.manager.driver import EngineDriver
from starfabric.fornax.manager.health import Health
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.manager.moves import Datapaths
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.manager.parts import Handler, Part
from starfabric.fornax.softengine import SoftEngine
from starfabric.fornax.vpc import CompiledPolicy


class ManagerState(Protocol):
    """The part of a `Manager` that event handling, the patrol, recovery and ECC rebuild read
    and write."""

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
    def paths(self) -> Datapaths: ...

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

    def rebuilt(self, slots: npt.NDArray[np.int64]) -> None: ...


class ResilienceState(Protocol):
    """The part of a `failover.Resilience` that ECC rebuild (rebuild.py) reads and writes."""

    #: KEY_SUSPECT losses (event records) not yet matched to a punted packet
    suspects: np.ndarray

    @property
    def m(self) -> ManagerState: ...

    @property
    def health(self) -> Health: ...

    def quarantine(self, ck: CanonicalKeys) -> int: ...

    def unquarantine(self, ck: CanonicalKeys) -> None: ...


__all__ = ["ManagerState", "ResilienceState"]
