"""The light-weight Fornax software manager: misses, events, policy changes, NAT, recovery.

`Manager` drives any SessionEngine through engine/interface.py only, composed of an engine
driver (driver.py), explicit session locations (location.py), an event-handler table
(events.py) and parts (parts.py). `ResilientManager` is the Manager with the `Resilience`
part: ECC rebuild, hang failover, patrol, multi-scope failover (failover.py, health.py,
rebuild.py). Scenario and chaos runs live above it, in fornax/run/.
"""

from starfabric.fornax.manager.accounting import DropReason, Fate, Final, Ledger
from starfabric.fornax.manager.config import ManagerConfig, TokenBucket
from starfabric.fornax.manager.events import handle_events, patrol, patrol_step
from starfabric.fornax.manager.failover import ResilientManager
from starfabric.fornax.manager.health import FaultKind, Health, HealthConfig, ScopeKind
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.manager.nat import NatPools

__all__ = [
    "DropReason",
    "Fate",
    "FaultKind",
    "Final",
    "Health",
    "HealthConfig",
    "Ledger",
    "Manager",
    "ManagerConfig",
    "Metrics",
    "NatPools",
    "ResilientManager",
    "ScopeKind",
    "TokenBucket",
    "handle_events",
    "patrol",
    "patrol_step",
]
