"""The per-session words the kernel does not hand back everywhere: a DESTROY event carries an
entry's tuples, mark, state and counters but not its ct labels (ctnetlink_conntrack_event
dumps labels only for NEW/UPDATE), so the aux cookie and the two actions an AGED/CLOSED event
must return are kept here too — numpy columns over a KeyIndex of canonical keys (keys.py), the
same index whose slot numbers the sender uses as connection ids for TCP sequence numbering.
The contract's tcp_state field of a non-TCP entry (software may set it; no kernel tracker
has one) is kept here as well."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.fornax.keyindex import KeyIndex
from starfabric.fornax.keys import CanonicalKeys, key_hash


class SideTable:
    """aux and (action_orig, action_reply) by canonical key; `size` slots (a power of two)."""

    def __init__(self, size: int) -> None:
        self.index = KeyIndex(size)
        self.count = 0
        self.aux = np.zeros(size, np.uint64)
        self.act = np.zeros((size, 2), np.uint32)
        self.state = np.zeros(size, np.uint8)  # the tcp_state field of non-TCP entries

    def slots(self, ck: CanonicalKeys, add: bool = True) -> npt.NDArray[np.int64]:
        """Slot of each key (indexed now if `add`); -1 where absent or the index is full."""
        h = key_hash(ck)
        if not add:
            return self.index.lookup(h, ck.words(), ck.proto)
        _st, slot, self.count = self.index.insert(h, ck.words(), ck.proto, self.count)
        return slot

    def put(self, slot: npt.NDArray[np.int64], aux: npt.ArrayLike, orig: npt.ArrayLike,
            reply: npt.ArrayLike, state: npt.ArrayLike) -> None:  # fmt: skip
        ok = slot >= 0
        self.state[slot[ok]] = np.asarray(state, np.uint8)[ok]
        self.aux[slot[ok]] = np.asarray(aux, np.uint64)[ok]
        self.act[slot[ok], 0] = np.asarray(orig, np.uint32)[ok]
        self.act[slot[ok], 1] = np.asarray(reply, np.uint32)[ok]

    def forget(self, slot: npt.NDArray[np.int64]) -> None:
        self.count -= self.index.forget(slot[slot >= 0])

    @property
    def nbytes(self) -> int:
        return int(self.index.nbytes + self.aux.nbytes + self.act.nbytes + self.state.nbytes)


__all__ = ["SideTable"]
