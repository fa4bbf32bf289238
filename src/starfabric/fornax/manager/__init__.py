"""The light-weight Fornax software manager: misses, events, policy changes, NAT, recovery.

`Manager` drives any SessionEngine through engine/interface.py only; `run_scenario` replays a
scenario (workload + VPC on a simulated clock) through engine + manager. `ResilientManager`
adds fault tolerance (ECC rebuild, hang failover, patrol, multi-scope failover; failover.py,
health.py, rebuild.py); `run_chaos` injects faults under traffic (chaos.py).
"""

from starfabric.fornax.manager.accounting import DropReason, Fate, Final, Ledger
from starfabric.fornax.manager.chaos import ChaosSpec, load_chaos, run_chaos, summary_rows
from starfabric.fornax.manager.config import ManagerConfig, TokenBucket
from starfabric.fornax.manager.events import handle_events, patrol, patrol_step
from starfabric.fornax.manager.failover import ResilientManager
from starfabric.fornax.manager.health import FaultKind, Health, HealthConfig, ScopeKind
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.manager.scenario import Scenario, load_scenario, run_scenario

__all__ = [
    "ChaosSpec",
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
    "Scenario",
    "ScopeKind",
    "TokenBucket",
    "handle_events",
    "load_chaos",
    "load_scenario",
    "patrol",
    "patrol_step",
    "run_chaos",
    "run_scenario",
    "summary_rows",
]
