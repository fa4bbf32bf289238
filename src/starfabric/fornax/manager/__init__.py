"""The light-weight Fornax software manager: misses, events, policy changes, NAT, recovery.

`Manager` drives any SessionEngine through engine/interface.py only; `run_scenario` replays a
scenario (workload + VPC on a simulated clock) through engine + manager.
"""

from starfabric.fornax.manager.accounting import DropReason, Fate, Final, Ledger
from starfabric.fornax.manager.config import ManagerConfig, TokenBucket
from starfabric.fornax.manager.events import handle_events, patrol
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.manager.scenario import Scenario, load_scenario, run_scenario

__all__ = [
    "DropReason",
    "Fate",
    "Final",
    "Ledger",
    "Manager",
    "ManagerConfig",
    "Metrics",
    "NatPools",
    "Scenario",
    "TokenBucket",
    "handle_events",
    "load_scenario",
    "patrol",
    "run_scenario",
]
