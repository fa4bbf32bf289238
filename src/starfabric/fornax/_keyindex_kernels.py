"""Numba kernels of the open-addressing index of canonical keys (keyindex.py): linear
probing over uint64[n, 5] key words + protocol, with tombstones (used = 2) that keep probe
chains intact. Shared by the software datapath's session table and the OVS-like mirror."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit

ST_OK = 0
ST_EXISTS = 1
ST_FULL = 3


@njit
def _find(key, kproto, used, mask, h, k0, k1, k2, k3, k4, p):
    s = np.int64(h & np.uint64(mask))
    for _ in range(mask + 1):
        u = used[s]
        if u == 0:
            return -1
        if (
            u == 1
            and key[s, 4] == k4
            and key[s, 1] == k1
            and key[s, 3] == k3
            and key[s, 0] == k0
            and key[s, 2] == k2
            and kproto[s] == p
        ):
            return s
        s = (s + 1) & mask
    return -1


@njit
def sp_lookup(h, k, proto, key, kproto, used, out_slot):
    """Slot of each canonical key (k: uint64[n, 5]) or -1."""
    mask = np.int64(len(used) - 1)
    for i in range(len(h)):
        out_slot[i] = _find(
            key, kproto, used, mask, h[i], k[i, 0], k[i, 1], k[i, 2], k[i, 3], k[i, 4], proto[i]
        )


@njit
def sp_insert(h, k, proto, count, capacity, key, kproto, used, out_status, out_slot):
    """Insert keys (values are written by the caller at out_slot); returns the new count."""
    mask = np.int64(len(used) - 1)
    for i in range(len(h)):
        found = _find(
            key, kproto, used, mask, h[i], k[i, 0], k[i, 1], k[i, 2], k[i, 3], k[i, 4], proto[i]
        )
        if found >= 0:
            out_status[i] = ST_EXISTS
            out_slot[i] = found
            continue
        if count >= capacity:
            out_status[i] = ST_FULL
            out_slot[i] = -1
            continue
        s = np.int64(h[i] & np.uint64(mask))
        while used[s] == 1:
            s = (s + 1) & mask
        used[s] = 1
        for j in range(5):
            key[s, j] = k[i, j]
        kproto[s] = proto[i]
        count += 1
        out_status[i] = ST_OK
        out_slot[i] = s
    return count


@njit
def sp_forget(slots, used):
    """Tombstone the slots that hold a key (each once, whatever repeats); returns how many."""
    n = 0
    for i in range(len(slots)):
        s = slots[i]
        if s >= 0 and used[s] == 1:
            used[s] = 2
            n += 1
    return n


__all__ = ["ST_EXISTS", "ST_FULL", "ST_OK", "sp_forget", "sp_insert", "sp_lookup"]
