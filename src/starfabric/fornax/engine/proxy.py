"""EngineProxy: a SessionEngine that forwards every call to a wrapped engine, the base of
wrappers that change one behaviour (fault injection in chaos runs, per-direction keys and
software aging in the baselines) and leave the rest to the engine underneath."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import (
    FlowKeys,
    ProcessResult,
    Scope,
    ScrubResult,
    SessionEngine,
)
from starfabric.fornax.packets import PacketBatch


class EngineProxy(SessionEngine):
    """Forwards every SessionEngine call to `inner` (same config)."""

    def __init__(self, inner: SessionEngine) -> None:
        self.inner = inner
        self.config = inner.config

    def process(self, batch: PacketBatch) -> ProcessResult:
        return self.inner.process(batch)

    def insert(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        return self.inner.insert(keys, **kw)

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        return self.inner.delete(keys)

    def modify(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        return self.inner.modify(keys, **kw)

    def query(
        self, keys: FlowKeys, now_ns: int | None = None
    ) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        return self.inner.query(keys, now_ns)

    def dump(self, cursor: int = 0, max_entries: int = 65536, **kw: Any) -> tuple[np.ndarray, int]:
        return self.inner.dump(cursor, max_entries, **kw)

    def bump_version(self, scope: Scope, scope_id: int) -> int:
        return self.inner.bump_version(scope, scope_id)

    def scope_version(self, scope: Scope, scope_id: int) -> int:
        return self.inner.scope_version(scope, scope_id)

    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        return self.inner.poll_events(max_n)

    def scrub(self, now_ns: int, n_slots: int | None = None) -> ScrubResult:
        return self.inner.scrub(now_ns, n_slots)

    def counters(self) -> dict[str, int]:
        return self.inner.counters()

    def occupancy(self) -> int:
        return self.inner.occupancy()

    def slot_of(self, keys: FlowKeys) -> npt.NDArray[np.int64]:
        return self.inner.slot_of(keys)

    def flip_bits(self, slot: int, bits: npt.ArrayLike) -> None:
        self.inner.flip_bits(slot, bits)

    def stall_port(self, port: int) -> None:
        self.inner.stall_port(port)

    def unstall_port(self, port: int) -> None:
        self.inner.unstall_port(port)


__all__ = ["EngineProxy"]
