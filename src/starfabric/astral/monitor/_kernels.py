"""Numba kernels of the monitor: path-aware QP placement over ECMP candidates."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit


@njit
def balance_pick(
    offsets: np.ndarray,
    links: np.ndarray,
    n_qp: int,
    n_cand: int,
    load: np.ndarray,
    passes: int,
) -> np.ndarray:
    """Greedy min-max choice of one ECMP candidate path per QP (candidates qp*n_cand + c).

    The first pass places QPs in order; each further pass lifts every QP off its path and
    places it again against everyone else (local search). `load` (QPs per directed link) is
    updated in place; an unreachable candidate (empty path) is chosen only when every
    candidate of the QP is unreachable.
    """
    chosen = np.full(n_qp, -1, dtype=np.int64)
    for it in range(passes * n_qp):
        q = it % n_qp
        if chosen[q] >= 0:
            f = q * n_cand + chosen[q]
            for i in range(offsets[f], offsets[f + 1]):
                load[links[i]] -= 1
        best = -1
        best_score = np.int64(1) << 60
        best_sum = np.int64(1) << 60
        for c in range(n_cand):
            f = q * n_cand + c
            a, b = offsets[f], offsets[f + 1]
            if b == a:
                continue
            mx = np.int64(0)
            sm = np.int64(0)
            for i in range(a, b):
                v = load[links[i]]
                sm += v
                if v > mx:
                    mx = v
            if mx < best_score or (mx == best_score and sm < best_sum):
                best, best_score, best_sum = c, mx, sm
        if best < 0:
            best = 0
        chosen[q] = best
        f = q * n_cand + best
        for i in range(offsets[f], offsets[f + 1]):
            load[links[i]] += 1
    return chosen
