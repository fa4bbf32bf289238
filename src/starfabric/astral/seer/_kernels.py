"""Numba kernels of Seer: the pipeline-schedule list simulation (arrays in, arrays out)."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit


@njit
def pipeline_times(
    is_fwd: np.ndarray,  # (p, n) int8: 1 forward, 0 backward
    mb: np.ndarray,  # (p, n) int64 micro-batch id
    chunk: np.ndarray,  # (p, n) int64 virtual chunk on that stage
    fdur: np.ndarray,  # (p, v) forward seconds of one micro-batch through a chunk
    bdur: np.ndarray,  # (p, v) backward seconds (incl. recompute)
    p2p: float,  # seconds to hand an activation/gradient to the next stage
    m: int,
    solo: np.ndarray,  # (p, n) int8: 1 where the op takes fsolo/bsolo (no overlap partner)
    fsolo: np.ndarray,  # (p, v) forward seconds of such an op
    bsolo: np.ndarray,  # (p, v) backward seconds of such an op
) -> tuple[np.ndarray, np.ndarray, int]:
    """Start/end of every operation of every stage's ordered list, honouring cross-stage
    dependencies (virtual stage vs = chunk*p + stage). Returns (start, end, ok)."""
    p, n = is_fwd.shape
    v = fdur.shape[1]
    nv = p * v
    fdone = np.full((nv, m), -1.0)
    bdone = np.full((nv, m), -1.0)
    start = np.zeros((p, n))
    end = np.zeros((p, n))
    ptr = np.zeros(p, np.int64)
    free = np.zeros(p)
    remaining = p * n
    hop = p2p if p > 1 else 0.0
    while remaining > 0:
        progress = False
        for s in range(p):
            while ptr[s] < n:
                i = ptr[s]
                c = chunk[s, i]
                b = mb[s, i]
                vs = c * p + s
                if is_fwd[s, i] == 1:
                    if vs == 0:
                        dep = 0.0
                    else:
                        d = fdone[vs - 1, b]
                        if d < 0.0:
                            break
                        dep = d + hop
                    dur = fsolo[s, c] if solo[s, i] else fdur[s, c]
                else:
                    if vs == nv - 1:
                        d = fdone[vs, b]
                        if d < 0.0:
                            break
                        dep = d
                    else:
                        d = bdone[vs + 1, b]
                        if d < 0.0:
                            break
                        dep = d + hop
                    dur = bsolo[s, c] if solo[s, i] else bdur[s, c]
                t0 = max(free[s], dep)
                start[s, i] = t0
                end[s, i] = t0 + dur
                free[s] = t0 + dur
                if is_fwd[s, i] == 1:
                    fdone[vs, b] = t0 + dur
                else:
                    bdone[vs, b] = t0 + dur
                ptr[s] += 1
                remaining -= 1
                progress = True
        if not progress:
            return start, end, 0
    return start, end, 1


@njit
def peak_inflight(is_fwd: np.ndarray, chunk: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """Per stage, the most layer-activations held at once (+layers on F, -layers on B)."""
    p, n = is_fwd.shape
    out = np.zeros(p)
    for s in range(p):
        cur = 0.0
        for i in range(n):
            c = chunk[s, i]
            if is_fwd[s, i] == 1:
                cur += layers[s, c]
                if cur > out[s]:
                    out[s] = cur
            else:
                cur -= layers[s, c]
    return out
