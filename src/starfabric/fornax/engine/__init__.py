"""The emulated Fornax SmartNIC session engine: contract, fast engine, plain reference."""

from starfabric.fornax.engine.config import EngineConfig, make_config
from starfabric.fornax.engine.engine import FastEngine
from starfabric.fornax.engine.interface import (
    ENTRY_DTYPE,
    EVENT_DTYPE,
    Counter,
    EventType,
    FlowKeys,
    Outcome,
    ProcessResult,
    Reason,
    Scope,
    ScrubResult,
    SessionEngine,
    Status,
)
from starfabric.fornax.engine.proxy import EngineProxy
from starfabric.fornax.engine.reference import ReferenceEngine
from starfabric.fornax.engine.tcp import TcpEvent, TcpState, initial_tcp_state

__all__ = [
    "ENTRY_DTYPE",
    "EVENT_DTYPE",
    "Counter",
    "EngineConfig",
    "EngineProxy",
    "EventType",
    "FastEngine",
    "FlowKeys",
    "Outcome",
    "ProcessResult",
    "Reason",
    "ReferenceEngine",
    "Scope",
    "ScrubResult",
    "SessionEngine",
    "Status",
    "TcpEvent",
    "TcpState",
    "initial_tcp_state",
    "make_config",
]
