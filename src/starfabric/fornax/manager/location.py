"""Where a session lives, as one explicit state with one transition function (as Open
vSwitch's `ukey_state` with `transition_ukey_at()`, ofproto/ofproto-dpif-upcall.c).

The manager keeps nothing per hardware session; what it does hold for a while — software
sessions waiting for their push to hardware within a batch, keys pinned to software by a
failover, quarantined keys, suspect ECC losses — moves only through `transition`, which
refuses a move that the design does not allow (an InvariantError, never a silent fix).

`Outbox` is the push queue of one batch: software slots PENDING_INSERT (new, or re-created
with other scopes) and PENDING_MODIFY (re-decided with the same scopes: one modify); ending
a session (the tracker closed it in the batch) takes it out before its slot can be reused.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import numpy.typing as npt

from starfabric.errors import InvariantError


class Location(IntEnum):
    """Where one session is (hardware entries are the engine's; the rest the manager's)."""

    GONE = 0  # no session (never created, ended, aged, refused)
    SOFTWARE = 1  # forwarded by the software datapath, promotable later
    PENDING_INSERT = 2  # software, to be inserted into hardware at the end of the batch
    PENDING_MODIFY = 3  # software, re-decided from a stale hardware entry: one modify
    HARDWARE = 4  # the engine holds it
    PINNED = 5  # software, its scope failed over: never promoted (failover.py)
    QUARANTINED = 6  # a lost session not rebuilt for certain: its packets are dropped
    SUSPECT = 7  # an ECC loss whose key was read back damaged: waiting for a packet


class Move(IntEnum):
    """What happens to a session."""

    CREATE = 0  # a first packet decided into a software session
    REDECIDE = 1  # a stale hardware session read back and decided again, same scopes
    RECREATE = 2  # ... with other scopes (the entry is re-created)
    PUSHED = 3  # hardware took it
    REFUSED = 4  # hardware refused it or the budget was spent: it stays in software
    END = 5  # the tracker ended it, it aged, or policy refuses it now
    PIN = 6  # its scope failed over to software
    UNPIN = 7  # failback
    QUARANTINE = 8  # lost, and not to be forwarded on a guess
    LOSE = 9  # ECC uncorrectable with a damaged key
    REBUILD = 10  # an ECC loss rebuilt in software from the event and current policy
    PROMOTE = 11  # a software session chosen for hardware later (tick)


_L, _M = Location, Move
#: (from, move) -> to: every move the design allows.
TRANSITIONS: dict[tuple[Location, Move], Location] = {
    (_L.GONE, _M.CREATE): _L.PENDING_INSERT,
    (_L.GONE, _M.REBUILD): _L.PENDING_INSERT,
    (_L.GONE, _M.QUARANTINE): _L.QUARANTINED,
    (_L.HARDWARE, _M.REDECIDE): _L.PENDING_MODIFY,
    (_L.HARDWARE, _M.RECREATE): _L.PENDING_INSERT,
    (_L.HARDWARE, _M.PIN): _L.PINNED,
    (_L.HARDWARE, _M.END): _L.GONE,
    (_L.HARDWARE, _M.LOSE): _L.SUSPECT,
    (_L.HARDWARE, _M.REBUILD): _L.PENDING_INSERT,
    (_L.HARDWARE, _M.QUARANTINE): _L.QUARANTINED,
    (_L.PENDING_INSERT, _M.PUSHED): _L.HARDWARE,
    (_L.PENDING_INSERT, _M.REFUSED): _L.SOFTWARE,
    (_L.PENDING_INSERT, _M.END): _L.GONE,
    (_L.PENDING_INSERT, _M.PIN): _L.PINNED,
    (_L.PENDING_MODIFY, _M.PUSHED): _L.HARDWARE,
    (_L.PENDING_MODIFY, _M.RECREATE): _L.PENDING_INSERT,  # its entry vanished meanwhile
    (_L.PENDING_MODIFY, _M.REFUSED): _L.SOFTWARE,  # no budget: the entry is deleted
    (_L.PENDING_MODIFY, _M.END): _L.GONE,
    (_L.PENDING_MODIFY, _M.PIN): _L.PINNED,
    (_L.SOFTWARE, _M.PROMOTE): _L.PENDING_INSERT,
    (_L.SOFTWARE, _M.END): _L.GONE,
    (_L.SOFTWARE, _M.PIN): _L.PINNED,
    (_L.PINNED, _M.UNPIN): _L.SOFTWARE,
    (_L.PINNED, _M.END): _L.GONE,
    (_L.SUSPECT, _M.REBUILD): _L.PENDING_INSERT,
    (_L.SUSPECT, _M.QUARANTINE): _L.QUARANTINED,
    (_L.SUSPECT, _M.END): _L.GONE,
    (_L.QUARANTINED, _M.REBUILD): _L.PENDING_INSERT,  # a late event confirmed it
    (_L.QUARANTINED, _M.END): _L.GONE,  # idle long enough
}
_TABLE = np.full((len(Location), len(Move)), 255, np.uint8)
for (_f, _m), _t in TRANSITIONS.items():
    _TABLE[_f, _m] = _t


def transition(at: Location | npt.NDArray[np.uint8], move: Move) -> npt.NDArray[np.uint8]:
    """The locations after `move` (element-wise); InvariantError for a move not allowed."""
    frm = np.asarray(at, np.uint8)
    to = _TABLE[frm, int(move)]
    if (to == 255).any():
        bad = Location(int(frm[to == 255].flat[0]))
        raise InvariantError(f"session location: {move.name} is not a move from {bad.name}")
    return to


class Outbox:
    """Software slots waiting for their push to hardware at the end of a batch."""

    def __init__(self) -> None:
        self.slot = np.zeros(0, np.int64)
        self.at = np.zeros(0, np.uint8)

    def add(self, slots: npt.NDArray[np.int64], frm: Location, move: Move) -> None:
        """Sessions now in software slots `slots` that came from `frm` by `move`."""
        if not len(slots):
            return
        to = transition(np.full(len(slots), int(frm), np.uint8), move)
        if not np.isin(to, (Location.PENDING_INSERT, Location.PENDING_MODIFY)).all():
            raise InvariantError(f"outbox: {move.name} from {frm.name} is not a pending push")
        self.slot = np.concatenate([self.slot, np.asarray(slots, np.int64)])
        self.at = np.concatenate([self.at, to])

    def pending(self, where: Location) -> npt.NDArray[np.int64]:
        """Slots pending at `where`, in the order they were added."""
        return self.slot[self.at == where]

    def end(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Sessions of `slots` ended in the batch leave the queue (before a new session can
        reuse the slot); returns those that were PENDING_MODIFY (their stale hardware entry
        is to be deleted: the connection is over)."""
        dead = np.isin(self.slot, slots)
        if not dead.any():
            return np.zeros(0, np.int64)
        transition(self.at[dead], Move.END)
        was_mod = self.slot[dead & (self.at == Location.PENDING_MODIFY)]
        self.slot, self.at = self.slot[~dead], self.at[~dead]
        return was_mod

    def pin(self, mask: npt.NDArray[np.bool_], where: Location) -> None:
        """Pending sessions at `where` selected by `mask` (in `pending` order) stay in
        software: their scope is failed over."""
        idx = np.flatnonzero(self.at == where)[mask]
        transition(self.at[idx], Move.PIN)
        keep = np.ones(len(self.slot), bool)
        keep[idx] = False
        self.slot, self.at = self.slot[keep], self.at[keep]

    def take(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(PENDING_MODIFY slots, PENDING_INSERT slots), emptying the queue."""
        mod, new = self.pending(Location.PENDING_MODIFY), self.pending(Location.PENDING_INSERT)
        self.slot, self.at = self.slot[:0], self.at[:0]
        return mod, new

    def __len__(self) -> int:
        return len(self.slot)


__all__ = ["TRANSITIONS", "Location", "Move", "Outbox", "transition"]
