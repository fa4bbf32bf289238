"""Slow, obvious reference twins of Seer's kernels and vectorized timers."""

from __future__ import annotations

import math


def pipeline_reference(
    order: list[list[tuple[bool, int, int]]],
    fdur: list[list[float]],
    bdur: list[list[float]],
    p2p: float,
) -> list[list[tuple[float, float]]]:
    """Event-by-event: repeatedly run any stage whose next op has its input ready."""
    p = len(order)
    v = len(fdur[0])
    done: dict[tuple[str, int, int], float] = {}
    out: list[list[tuple[float, float]]] = [[] for _ in range(p)]
    free = [0.0] * p
    ptr = [0] * p
    hop = p2p if p > 1 else 0.0
    while any(ptr[s] < len(order[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while ptr[s] < len(order[s]):
                fwd, mb, c = order[s][ptr[s]]
                vs = c * p + s
                if fwd:
                    need = None if vs == 0 else ("F", vs - 1, mb)
                    extra = hop
                else:
                    need = ("F", vs, mb) if vs == p * v - 1 else ("B", vs + 1, mb)
                    extra = 0.0 if vs == p * v - 1 else hop
                if need is not None and need not in done:
                    break
                dep = 0.0 if need is None else done[need] + extra
                t0 = max(free[s], dep)
                dur = fdur[s][c] if fwd else bdur[s][c]
                out[s].append((t0, t0 + dur))
                free[s] = t0 + dur
                done[("F" if fwd else "B", vs, mb)] = t0 + dur
                ptr[s] += 1
                moved = True
        if not moved:
            raise RuntimeError("deadlock")
    return out


def gemm_time_reference(
    m: float, n: float, k: float, batch: float, peak: float, hbm: float, eff: object
) -> float:
    """Scalar twin of efficiency.gemm_time (same formula written with plain loops)."""
    best = math.inf
    frac = eff.gemm_peak_fraction  # type: ignore[attr-defined]
    sms = eff.sms  # type: ignore[attr-defined]
    hbm_eff = hbm * eff.mem_bw_fraction  # type: ignore[attr-defined]
    for tm, tn in eff.gemm_tiles:  # type: ignore[attr-defined]
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
        split = max(1, min(sms // tiles, max(1, k // 256)))
        for sp in {1, split}:
            kk = k / sp
            waves = math.ceil(tiles * sp / sms)
            t = waves * (2.0 * tm * tn * kk) / (peak * frac * (kk / (kk + eff.gemm_k_half)) / sms)  # type: ignore[attr-defined]
            if sp > 1:
                t += (sp + 1) * 4.0 * m * n * batch / hbm_eff + eff.kernel_overhead_s  # type: ignore[attr-defined]
            best = min(best, t)
    mem = 2.0 * (m * k + k * n + m * n) * batch / (hbm * eff.mem_bw_fraction)  # type: ignore[attr-defined]
    return max(best, mem) + eff.kernel_overhead_s  # type: ignore[attr-defined]
