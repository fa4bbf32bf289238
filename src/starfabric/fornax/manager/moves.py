"""Moves of sessions between the two datapaths through the one engine contract: hardware (the
SessionEngine the manager drives, counted by the EngineDriver) and software (softengine.
SoftEngine over the SoftPath), as Open vSwitch's dpif-netdev and dpif-netlink both implement
dpif_class. A move reads a session from one engine (query, or software's columns by slot),
inserts it into the other at that engine's current scope versions with its tracker state
and cookie, and deletes it from the first once the second took it: promotion and the
end-of-batch push (software -> hardware), the read-back of a stale or failed-over session
and an ECC rebuild (hardware or an event -> software); failback is the end of a pin, after
which promotion moves it back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import FlowKeys, Scope, SessionEngine, Status
from starfabric.fornax.manager.decide import Decision, original_from_sessions
from starfabric.fornax.manager.driver import EngineDriver, scope_versions
from starfabric.fornax.softengine import SoftEngine


class Datapaths:
    """The hardware driver and the software engine, and the moves between them."""

    def __init__(self, hw: EngineDriver, sw: SoftEngine) -> None:
        self.hw = hw
        self.sw = sw

    def keys(self, slots: npt.NDArray[np.int64]) -> FlowKeys:
        """ORIGINAL keys of software sessions (by their software slots)."""
        return original_from_sessions(self.sw.move_columns(slots))

    def to_hardware(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
        """Insert software sessions into hardware as software holds them; those hardware
        took leave software. Returns the hardware status of each."""
        return self._leave_software(slots, self.hw.insert_columns)

    def refresh_hardware(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
        """Modify hardware entries to what software re-decided for them (same scopes); those
        refreshed leave software. Returns the hardware status of each."""
        return self._leave_software(slots, self.hw.modify_columns)

    def _leave_software(
        self, slots: npt.NDArray[np.int64],
        put: Callable[[FlowKeys, Mapping[str, np.ndarray]], npt.NDArray[np.uint8]],
    ) -> npt.NDArray[np.uint8]:  # fmt: skip
        """Write software sessions into hardware with `put` (insert or modify from their
        columns, SoftEngine.move_columns); those hardware took are deleted from software
        by slot."""
        cols = self.sw.move_columns(slots)
        st = put(original_from_sessions(cols), cols)
        self.sw.delete_slots(slots[st == Status.OK])
        return st

    def to_software(
        self, keys: FlowKeys, d: Decision, sel: npt.NDArray[np.bool_] | npt.NDArray[np.int64],
        now_ns: int, *, track: np.ndarray | None = None,
        tcp_state: npt.NDArray[np.uint8] | None = None,
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:  # fmt: skip
        """Insert sessions (ORIGINAL `keys`, decided `d[sel]`) into software at its current
        versions, keeping the tracker rows `track` (or installing `tcp_state`); returns
        which software took and their slots (-1 where it did not)."""
        eni, vpc = d.eni_scope[sel], d.vpc_scope[sel]
        st, slot = self.sw.insert_slots(
            keys, action_orig=d.action_orig[sel], action_reply=d.action_reply[sel],
            eni_scope=eni, vpc_scope=vpc, eni_version=scope_versions(self.sw, Scope.ENI, eni),
            vpc_version=scope_versions(self.sw, Scope.VPC, vpc), now_ns=now_ns,
            track=track, tcp_state=0 if tcp_state is None else tcp_state, aux=d.aux[sel],
        )  # fmt: skip
        return st == Status.OK, slot


def held_by(engine: SessionEngine, keys: FlowKeys) -> npt.NDArray[np.bool_]:
    """Whether `engine` holds a session of each key."""
    return np.asarray(engine.slot_of(keys) >= 0)


__all__ = ["Datapaths", "held_by"]
