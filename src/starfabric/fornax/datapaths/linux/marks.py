"""What the engine keeps in an entry's ct mark and ct labels, and the scope version table.

ct mark (32 bits):  bits 0..28  combo id — an interned (eni_scope, vpc_scope, eni_version,
                                vpc_version) snapshot; 0 = no entry the manager admitted
                    bit 29      a STALE packet was reported (VERSION_MISMATCH raised, once per
                                session until modify writes a new mark)
                    bit 30      the REPLY direction's action is drop
                    bit 31      the ORIGINAL direction's action is drop
ct labels (128 bits): aux (bits 0..63) | action_orig << 64 | action_reply << 96

The kernel judges staleness per packet: the ruleset (pipeline.py) drops a packet whose entry's
combo id is not in set `fresh`. `fresh` holds exactly the combos whose two snapshots equal
their scopes' current versions, so a version bump removes that scope's combos from the set —
work proportional to the scope's distinct snapshots (usually one), never to its sessions.
Combos are interned once and never reused (ids only grow, 2**29 of them)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.errors import InfeasibleError

COMBO_BITS = 29
COMBO_MASK = (1 << COMBO_BITS) - 1
MISMATCH_BIT = 1 << 29
DROP_REPLY_BIT = 1 << 30
DROP_ORIG_BIT = 1 << 31
_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1


def labels_of(aux: int, action_orig: int, action_reply: int) -> int:
    return (int(aux) & _M64) | (int(action_orig) & _M32) << 64 | (int(action_reply) & _M32) << 96


def split_labels(labels: int) -> tuple[int, int, int]:
    """(aux, action_orig, action_reply) of a ct labels value."""
    return labels & _M64, (labels >> 64) & _M32, (labels >> 96) & _M32


class ScopeMarks:
    """The scope version table and the combo interning (see module doc)."""

    def __init__(self, eni_scopes: int, vpc_scopes: int) -> None:
        self.eni = np.zeros(eni_scopes, np.uint32)
        self.vpc = np.zeros(vpc_scopes, np.uint32)
        self._ids: dict[tuple[int, int, int, int], int] = {}
        self._combo: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)]  # id 0: not admitted
        #: combo ids of each scope, to find what a bump makes stale
        self._by_eni: dict[int, list[int]] = {}
        self._by_vpc: dict[int, list[int]] = {}

    def current(self, combo: int) -> bool:
        e, v, ev, vv = self._combo[combo]
        return combo != 0 and int(self.eni[e]) == ev and int(self.vpc[v]) == vv

    def intern(self, eni_scope: int, vpc_scope: int, eni_version: int, vpc_version: int
               ) -> tuple[int, bool]:  # fmt: skip
        """(combo id, whether it was new and is current: the caller adds it to `fresh`)."""
        key = (int(eni_scope), int(vpc_scope), int(eni_version), int(vpc_version))
        cid = self._ids.get(key)
        if cid is not None:
            return cid, False
        cid = len(self._combo)
        if cid > COMBO_MASK:
            raise InfeasibleError(f"more than {COMBO_MASK} version snapshots interned")
        self._ids[key] = cid
        self._combo.append(key)
        self._by_eni.setdefault(key[0], []).append(cid)
        self._by_vpc.setdefault(key[1], []).append(cid)
        return cid, self.current(cid)

    def combo(self, cid: int) -> tuple[int, int, int, int]:
        return self._combo[cid] if 0 <= cid < len(self._combo) else (0, 0, 0, 0)

    def combos(self, cids: npt.NDArray[np.int64]) -> np.ndarray:
        """(eni_scope, vpc_scope, eni_version, vpc_version) rows of each combo id."""
        table = np.asarray(self._combo, dtype=np.int64)
        ok = (cids >= 0) & (cids < len(table))
        return np.where(ok[:, None], table[np.where(ok, cids, 0)], 0)

    def fresh_mask(self, cids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        rows = self.combos(cids)
        return (
            (cids > 0) & (self.eni[rows[:, 0]] == rows[:, 2]) & (self.vpc[rows[:, 1]] == rows[:, 3])
        )

    def bump(self, eni: bool, scope_id: int) -> tuple[int, list[int], list[int]]:
        """Increment one scope's version: (new version, combo ids leaving `fresh`, combo ids
        joining it — snapshots someone had already written at the new version)."""
        table, by = (self.eni, self._by_eni) if eni else (self.vpc, self._by_vpc)
        affected = by.get(int(scope_id), [])
        before = [c for c in affected if self.current(c)]
        table[scope_id] += np.uint32(1)
        after = [c for c in affected if self.current(c)]
        return int(table[scope_id]), before, after

    def nbytes(self) -> int:
        """Software bytes this table holds (scope arrays + interned snapshots)."""
        return int(self.eni.nbytes + self.vpc.nbytes) + 4 * 8 * len(self._combo)


def mark_of(combo: int, drop_orig: bool, drop_reply: bool) -> int:
    return (combo & COMBO_MASK) | (DROP_ORIG_BIT if drop_orig else 0) | (
        DROP_REPLY_BIT if drop_reply else 0)  # fmt: skip


__all__ = ["COMBO_MASK", "DROP_ORIG_BIT", "DROP_REPLY_BIT", "MISMATCH_BIT", "ScopeMarks", "labels_of", "mark_of",
           "split_labels"]  # fmt: skip
