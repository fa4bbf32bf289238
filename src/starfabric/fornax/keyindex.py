"""An open-addressing index of canonical session keys (keys.py words + protocol): linear
probing, tombstones on removal, the caller's slot numbers for its own columns. The software
datapath's session table and the OVS-like baseline's ukey mirror both find keys with it."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric._jit import frozen
from starfabric.fornax import _keyindex_kernels as K

OK = K.ST_OK
EXISTS = K.ST_EXISTS
FULL = K.ST_FULL


class KeyIndex:
    """`size` slots (a power of two): key words, protocol and a used flag per slot."""

    def __init__(self, size: int) -> None:
        self.used = np.zeros(size, np.uint8)
        self.key = np.zeros((size, 5), np.uint64)
        self.proto = np.zeros(size, np.uint8)

    def __len__(self) -> int:
        return len(self.used)

    def lookup(
        self, h: npt.NDArray[np.uint64], words: npt.NDArray[np.uint64], proto: npt.NDArray[np.uint8]
    ) -> npt.NDArray[np.int64]:
        """Slot of each key (hash, words, protocol), -1 where it is not indexed."""
        out = np.empty(len(h), np.int64)
        K.sp_lookup(frozen(h), frozen(words), frozen(proto), self.key, self.proto, self.used, out)
        return out

    def insert(
        self,
        h: npt.NDArray[np.uint64],
        words: npt.NDArray[np.uint64],
        proto: npt.NDArray[np.uint8],
        count: int = 0,
        capacity: int | None = None,
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], int]:
        """Index keys, in order: (OK | EXISTS | FULL per key, its slot, the new count);
        FULL once `count` reaches `capacity` (default: every slot)."""
        st = np.empty(len(h), np.uint8)
        slot = np.empty(len(h), np.int64)
        cap = len(self.used) if capacity is None else capacity
        keys = (frozen(h), frozen(words), frozen(proto))
        n = int(K.sp_insert(*keys, count, cap, self.key, self.proto, self.used, st, slot))
        return st, slot, n

    def forget(self, slots: npt.NDArray[np.int64]) -> int:
        """Remove the keys at these slots (tombstones: other probe chains stay intact);
        slots holding no key, or repeated, are skipped. Returns how many were removed."""
        return int(K.sp_forget(np.asarray(slots, np.int64), self.used))

    @property
    def nbytes(self) -> int:
        return int(self.used.nbytes + self.key.nbytes + self.proto.nbytes)


__all__ = ["EXISTS", "FULL", "OK", "KeyIndex"]
