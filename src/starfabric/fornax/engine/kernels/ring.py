"""The event ring (hardware -> software): bounded, with a RING_OVERFLOW marker carrying the
count of events lost while it was full (interface.py's E_* words)."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit
from starfabric.fornax.engine import interface as itf
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.kernels.codes import (
    C_EV_LOST,
    C_EV_RAISED,
    C_OVERFLOW,
    EV_OVERFLOW,
    F_ORIG_B,
    M8,
    M16,
    M32,
    N_EW,
    S8,
    S16,
    S24,
    S32,
    S48,
    U0,
)


@njit
def _ring_write_marker(ring, rmeta, ctr, t) -> None:
    cap = ring.shape[0]
    idx = (rmeta[0] + rmeta[1]) % cap
    for k in range(N_EW):
        ring[idx, k] = U0
    ring[idx, itf.E_HEAD] = np.uint64(EV_OVERFLOW)
    ring[idx, itf.E_TIME] = np.uint64(t)
    ring[idx, itf.E_SLOT] = np.uint64(-1)
    ring[idx, itf.E_DETAIL] = np.uint64(rmeta[2])
    rmeta[1] += 1
    rmeta[2] = 0
    ctr[C_OVERFLOW] += 1


@njit
def ring_alloc(ring, rmeta, ctr, t) -> int:
    """Index of a zeroed ring record for a new event, or -1 when it is lost."""
    cap = ring.shape[0]
    ctr[C_EV_RAISED] += 1
    if rmeta[2] > 0:
        if cap - rmeta[1] >= 2:
            _ring_write_marker(ring, rmeta, ctr, t)
        else:
            rmeta[2] += 1
            rmeta[3] = t
            ctr[C_EV_LOST] += 1
            return -1
    if rmeta[1] >= cap:
        rmeta[2] += 1
        rmeta[3] = t
        ctr[C_EV_LOST] += 1
        return -1
    idx = (rmeta[0] + rmeta[1]) % cap
    for k in range(N_EW):
        ring[idx, k] = U0
    rmeta[1] += 1
    return idx


@njit
def ring_pop(ring, rmeta, ctr, max_n, out) -> int:
    cap = ring.shape[0]
    n = min(max_n, rmeta[1])
    for i in range(n):
        idx = (rmeta[0] + i) % cap
        for k in range(N_EW):
            out[i, k] = ring[idx, k]
    rmeta[0] = (rmeta[0] + n) % cap
    rmeta[1] -= n
    if rmeta[2] > 0 and rmeta[1] < cap:
        _ring_write_marker(ring, rmeta, ctr, rmeta[3])
    return n


@njit
def emit_simple(ring, rmeta, ctr, etype, t, port, detail) -> None:
    idx = ring_alloc(ring, rmeta, ctr, t)
    if idx < 0:
        return
    ring[idx, itf.E_HEAD] = np.uint64(etype) | (np.uint64(port) << S48)
    ring[idx, itf.E_TIME] = np.uint64(t)
    ring[idx, itf.E_SLOT] = np.uint64(-1)
    ring[idx, itf.E_DETAIL] = np.uint64(detail)


@njit
def emit_entry(ring, rmeta, ctr, etype, reason, rec, s, slot, t, port, detail) -> None:
    """Event describing the record in rec[s], reported in ORIGINAL orientation."""
    idx = ring_alloc(ring, rmeta, ctr, t)
    if idx < 0:
        return
    meta = rec[s, L.W_META]
    flags = (meta >> S16) & M8
    ob = (flags & F_ORIG_B) != U0
    ring[idx, itf.E_HEAD] = (
        np.uint64(etype)
        | (((meta >> S8) & M8) << S8)
        | ((meta & M8) << S16)
        | (np.uint64(reason) << S24)
        | (flags << S32)
        | (np.uint64(port) << S48)
    )
    pw = rec[s, L.W_PORTS]
    ring[idx, itf.E_VNI] = pw >> S32
    ring[idx, itf.E_TIME] = np.uint64(t)
    ring[idx, itf.E_SLOT] = np.uint64(slot)
    pa = (pw >> S16) & M16
    pb = pw & M16
    act = rec[s, L.W_ACT]
    pk = rec[s, L.W_PKTS]
    if ob:
        ring[idx, itf.E_SRC_HI] = rec[s, L.W_B_HI]
        ring[idx, itf.E_SRC_LO] = rec[s, L.W_B_LO]
        ring[idx, itf.E_DST_HI] = rec[s, L.W_A_HI]
        ring[idx, itf.E_DST_LO] = rec[s, L.W_A_LO]
        ring[idx, itf.E_PORTS] = pb | (pa << S16)
        ring[idx, itf.E_ACT] = (act >> S32) | ((act & M32) << S32)
        ring[idx, itf.E_PKTS] = (pk >> S32) | ((pk & M32) << S32)
        ring[idx, itf.E_BYTES_ORIG] = rec[s, L.W_BYTES1]
        ring[idx, itf.E_BYTES_REPLY] = rec[s, L.W_BYTES0]
    else:
        ring[idx, itf.E_SRC_HI] = rec[s, L.W_A_HI]
        ring[idx, itf.E_SRC_LO] = rec[s, L.W_A_LO]
        ring[idx, itf.E_DST_HI] = rec[s, L.W_B_HI]
        ring[idx, itf.E_DST_LO] = rec[s, L.W_B_LO]
        ring[idx, itf.E_PORTS] = pa | (pb << S16)
        ring[idx, itf.E_ACT] = act
        ring[idx, itf.E_PKTS] = pk
        ring[idx, itf.E_BYTES_ORIG] = rec[s, L.W_BYTES0]
        ring[idx, itf.E_BYTES_REPLY] = rec[s, L.W_BYTES1]
    ring[idx, itf.E_SCOPE] = rec[s, L.W_SCOPE]
    ring[idx, itf.E_VER] = rec[s, L.W_VER]
    ring[idx, itf.E_AUX] = rec[s, L.W_AUX]
    ring[idx, itf.E_DETAIL] = np.uint64(detail)
