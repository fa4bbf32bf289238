"""Where a session lives, as one explicit state with one transition function (as Open
vSwitch's `ukey_state` with `transition_ukey_at()`, ofproto/ofproto-dpif-upcall.c).

The manager keeps nothing per hardware session; what it does hold for a while — software
sessions waiting for their push to hardware within a batch, keys pinned to software by a
failover, quarantined keys, suspect ECC losses — moves only through `transition`, which
refuses a move that the design does not allow (an InvariantError, never a silent fix).

`Held` is where the manager keeps, per key hash, the sessions it holds beyond the datapaths'
own tables: PINNED to software by a failed port (with the port) and QUARANTINED (with the
last packet time) — numpy columns of location codes, one row per key, never one Python
object per session. SUSPECT losses stay event records (rebuild.py: their key was read
back damaged, so it is no row key) and HARDWARE/SOFTWARE sessions are the engines' (the
manager keeps nothing per session there: it asks them, moves.py).

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
    (_L.PINNED, _M.QUARANTINE): _L.QUARANTINED,  # a pinned key's session is lost
    (_L.SUSPECT, _M.REBUILD): _L.PENDING_INSERT,
    (_L.SUSPECT, _M.QUARANTINE): _L.QUARANTINED,
    (_L.SUSPECT, _M.END): _L.GONE,
    (_L.QUARANTINED, _M.REBUILD): _L.PENDING_INSERT,  # a late event confirmed it
    (_L.QUARANTINED, _M.END): _L.GONE,  # idle long enough
    (_L.QUARANTINED, _M.PIN): _L.PINNED,  # ... or rebuilt, while its port is failed over
}
#: the locations `Held` keeps a row for
HELD = (Location.PINNED, Location.QUARANTINED)
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


class Held:
    """Key hashes the manager holds PINNED or QUARANTINED (see the module docstring):
    columns sorted by hash; every change goes through `transition`, and a row whose new
    location is not held (software, pending insert, gone) leaves the table."""

    def __init__(self) -> None:
        self.hash = np.zeros(0, np.uint64)
        self.at = np.zeros(0, np.uint8)
        self.port = np.zeros(0, np.int64)  # the failed port that pins the key, -1: none
        self.seen_ns = np.zeros(0, np.int64)  # last packet of a quarantined key

    def __len__(self) -> int:
        return len(self.hash)

    def find(self, h: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """Row of each hash, -1 where the table holds none."""
        if not len(self.hash) or not len(h):
            return np.full(len(h), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.hash, h), len(self.hash) - 1)
        return np.where(self.hash[pos] == h, pos, -1).astype(np.int64)

    def hashes(self, *where: Location) -> npt.NDArray[np.uint64]:
        """Sorted hashes of the rows at any of `where` (default: every row)."""
        if not where:
            return self.hash
        return self.hash[np.isin(self.at, [int(w) for w in where])]

    def count(self, where: Location) -> int:
        return int((self.at == where).sum())

    def move(self, rows: npt.NDArray[np.int64], move: Move) -> None:
        """Rows take `move`; those no longer held leave the table."""
        if not len(rows):
            return
        self.at[rows] = transition(self.at[rows], move)
        self._drop_unheld()

    def add(
        self, h: npt.NDArray[np.uint64], frm: Location, move: Move, *, port: int = -1,
        now_ns: int = 0,
    ) -> None:  # fmt: skip
        """New rows for hashes the table does not hold (unique), from `frm` by `move`."""
        if not len(h):
            return
        to = transition(np.full(len(h), int(frm), np.uint8), move)
        allh = np.concatenate([self.hash, h])
        order = np.argsort(allh, kind="stable")
        self.hash = allh[order]
        self.at = np.concatenate([self.at, to])[order]
        self.port = np.concatenate([self.port, np.full(len(h), port, np.int64)])[order]
        self.seen_ns = np.concatenate([self.seen_ns, np.full(len(h), now_ns, np.int64)])[order]
        self._drop_unheld()

    def _drop_unheld(self) -> None:
        keep = np.isin(self.at, [int(w) for w in HELD])
        if not keep.all():
            self.hash, self.at = self.hash[keep], self.at[keep]
            self.port, self.seen_ns = self.port[keep], self.seen_ns[keep]

    # ---- the moves failover makes (failover.Resilience) ---------------------------------
    def quarantine(self, h: npt.NDArray[np.uint64], now_ns: int) -> int:
        """Keys whose packets are dropped as lost until they go idle; returns how many were
        not quarantined before (pinned ones keep their port, for when it ends)."""
        h = np.unique(h)
        rows = self.find(h)
        pinned = rows[rows >= 0][self.at[rows[rows >= 0]] == Location.PINNED]
        self.seen_ns[pinned] = now_ns
        self.move(pinned, Move.QUARANTINE)
        self.add(h[rows < 0], Location.GONE, Move.QUARANTINE, now_ns=now_ns)
        return len(pinned) + int((rows < 0).sum())

    def lift(self, rows: npt.NDArray[np.int64], move: Move) -> None:
        """End the quarantine of rows (`move`: REBUILD, a late event confirmed the session,
        or END, idle long enough): still pinned where their port is failed over."""
        rows = rows[self.at[rows] == Location.QUARANTINED]
        by_port = self.port[rows] >= 0
        self.at[rows[by_port]] = transition(self.at[rows[by_port]], Move.PIN)
        self.move(rows[~by_port], move)

    def touch(
        self, h: npt.NDArray[np.uint64], t_ns: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """Packets of keys `h` at times `t_ns`: which are quarantined (their last packet
        time is kept, so the key goes idle only once its packets stop)."""
        rows = self.find(h)
        q = rows >= 0
        q[q] = self.at[rows[q]] == Location.QUARANTINED
        if q.any():
            np.maximum.at(self.seen_ns, rows[q], t_ns[q])
        return q

    def pin_port(self, h: npt.NDArray[np.uint64], port: int) -> None:
        """Keys of a failed port, held by no scope yet, are pinned to software (a key
        already held keeps its row: one port pins it)."""
        h = np.unique(h)
        self.add(h[self.find(h) < 0], Location.SOFTWARE, Move.PIN, port=port)

    def failback_port(self, port: int) -> None:
        """The port is back: its pinned keys are unpinned (promotable again); quarantined
        ones stay quarantined, no longer pinned by it."""
        of = self.port == port
        self.port[of & (self.at == Location.QUARANTINED)] = -1
        self.move(np.flatnonzero(of & (self.at == Location.PINNED)), Move.UNPIN)


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


__all__ = ["HELD", "TRANSITIONS", "Held", "Location", "Move", "Outbox", "transition"]
