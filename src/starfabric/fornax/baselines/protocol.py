"""ControlPlane: what experiments drive. Manager and SoftwareCentric both satisfy it."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from starfabric.fornax.manager import Fate, Ledger, Metrics
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.vpc import VpcSpec


@runtime_checkable
class ControlPlane(Protocol):
    """A session manager over an engine: packets, policy changes, time, state."""

    metrics: Metrics  # mgmt_cpu_s: thread CPU by activity, engine emulation excluded
    ledger: Ledger  # every packet's fate

    def process(self, batch: PacketBatch) -> Fate: ...

    def apply_policy(self, spec: VpcSpec) -> dict[str, int]: ...

    def tick(self, now_ns: int, scrub_slots: int | None = None) -> None: ...

    @property
    def software_bytes(self) -> int: ...

    def sessions(self) -> int: ...

    def summary(self) -> dict[str, Any]: ...


__all__ = ["ControlPlane"]
