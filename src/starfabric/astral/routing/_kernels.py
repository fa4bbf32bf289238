"""Numba kernels of ECMP routing: closed-form Clos paths and BFS paths; arrays in, arrays out.

Hashing: every switch picks among its equal-cost next hops with splitmix64(flow_hash ^
mix(node + seed)), so switches decide independently; with `polarized` every switch uses the
same mix(flow_hash ^ seed), as when all tiers hash the same header fields the same way.
"""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit

MAX_HOPS = 8
"""Longest closed-form path: NVLink forward (2) + NIC, ToR-Agg, Agg-Core up and down (6)."""

BFS_MAX_HOPS = 64
"""Longest path the graph-search router writes; longer ones are reported unreachable."""


@njit
def _mix(x: np.uint64) -> np.uint64:
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit
def _pick(
    fh: np.uint64, node: int | np.int64, seed: np.uint64, polarized: bool, n: int | np.int64
) -> int:
    h = _mix(fh ^ seed) if polarized else _mix(fh ^ _mix(np.uint64(node) + seed))
    return int(h % np.uint64(n))


@njit
def route_clos(
    src: np.ndarray,
    dst: np.ndarray,
    fh: np.ndarray,
    gpu_tor: np.ndarray,
    ints: np.ndarray,
    seed: np.uint64,
    polarized: bool,
    buf: np.ndarray,
    lens: np.ndarray,
) -> None:
    """Closed-form up/down ECMP paths of structured topologies; lens[f] = -1 when unreachable.

    ints = [p, gph, T, A, L, has_core, Gd, m, U, cores_per_domain, forwarding, has_nvs,
            tor0, agg0, core0, base_nic, base_ta, base_ac, base_nv]
    """
    p, gph, t_g, a_g, par = ints[0], ints[1], ints[2], ints[3], ints[4]
    has_core, gd_, m, u_n, cpd = ints[5] != 0, ints[6], ints[7], ints[8], ints[9]
    fwd, has_nvs = ints[10] != 0, ints[11] != 0
    tor0, agg0, core0 = ints[12], ints[13], ints[14]
    b_nic, b_ta, b_ac, b_nv = ints[15], ints[16], ints[17], ints[18]
    al = a_g * par
    cand = np.empty(p, np.int64)
    cgrp = np.empty(p, np.int64)
    for f in range(src.shape[0]):
        s = np.int64(src[f])
        d = np.int64(dst[f])
        h = np.uint64(fh[f])
        n = 0
        if s == d:
            lens[f] = 0
            continue
        if has_nvs and s // gph == d // gph:
            buf[f, 0] = b_nv + 2 * s
            buf[f, 1] = b_nv + 2 * d + 1
            lens[f] = 2
            continue
        if fwd and gpu_tor[s, 0] // t_g != gpu_tor[d, 0] // t_g:
            s2 = (s // gph) * gph + d % gph
            buf[f, 0] = b_nv + 2 * s
            buf[f, 1] = b_nv + 2 * s2 + 1
            n = 2
            s = s2
        k = _pick(h, s, seed, polarized, p)
        ts = gpu_tor[s, k]
        gs = ts // t_g
        dom_s = gs // gd_ if has_core else gs
        buf[f, n] = b_nic + 2 * (s * p + k)
        n += 1
        nc = 0
        ng = 0
        same = -1
        for kk in range(p):
            td = gpu_tor[d, kk]
            g2 = td // t_g
            dom2 = g2 // gd_ if has_core else g2
            if dom2 != dom_s:
                continue
            cand[nc] = kk
            nc += 1
            if td == ts:
                same = kk
            if g2 == gs:
                cgrp[ng] = kk
                ng += 1
        if nc == 0:
            lens[f] = -1
            continue
        if same >= 0:
            buf[f, n] = b_nic + 2 * (d * p + same) + 1
            lens[f] = n + 1
            continue
        if a_g == 0 or (ng == 0 and not has_core):
            lens[f] = -1
            continue
        u = _pick(h, tor0 + ts, seed, polarized, al)
        a = u % a_g
        buf[f, n] = b_ta + 2 * (ts * al + u)
        n += 1
        agg = gs * a_g + a
        if ng > 0:
            v = _pick(h, agg0 + agg, seed, polarized, ng * par)
            kk = cgrp[v % ng]
            l2 = v // ng
            td = gpu_tor[d, kk]
            buf[f, n] = b_ta + 2 * (td * al + l2 * a_g + a) + 1
            buf[f, n + 1] = b_nic + 2 * (d * p + kk) + 1
            lens[f] = n + 2
            continue
        j = _pick(h, agg0 + agg, seed, polarized, u_n)
        buf[f, n] = b_ac + 2 * (agg * u_n + j)
        n += 1
        plane = a // m
        core = dom_s * cpd + plane * u_n + j
        v = _pick(h, core0 + core, seed, polarized, nc * m)
        kk = cand[v % nc]
        i = v // nc
        td = gpu_tor[d, kk]
        g2 = td // t_g
        a2 = plane * m + i
        agg2 = g2 * a_g + a2
        buf[f, n] = b_ac + 2 * (agg2 * u_n + j) + 1
        n += 1
        l2 = _pick(h, agg0 + agg2, seed, polarized, par)
        buf[f, n] = b_ta + 2 * (td * al + l2 * a_g + a2) + 1
        buf[f, n + 1] = b_nic + 2 * (d * p + kk) + 1
        lens[f] = n + 2


@njit
def route_bfs(
    order: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    fh: np.ndarray,
    out_ptr: np.ndarray,
    out_links: np.ndarray,
    link_dst: np.ndarray,
    node_tier: np.ndarray,
    alive: np.ndarray,
    gpu_transit: bool,
    seed: np.uint64,
    polarized: bool,
    buf: np.ndarray,
    lens: np.ndarray,
) -> None:
    """Shortest-path ECMP over alive links: one BFS per distinct destination (flows sorted by dst).

    A GPU forwards only when `gpu_transit` (NVLink forwarding); lens[f] = -1 when unreachable.
    """
    n_nodes = out_ptr.shape[0] - 1
    dist = np.full(n_nodes, -1, np.int64)
    queue = np.empty(n_nodes, np.int64)
    fwd = np.zeros(n_nodes, np.bool_)
    touched = np.empty(n_nodes, np.int64)
    n_flows = order.shape[0]
    i = 0
    while i < n_flows:
        d = np.int64(dst[order[i]])
        j = i
        while j < n_flows and dst[order[j]] == d:
            j += 1
        head = 0
        tail = 1
        queue[0] = d
        dist[d] = 0
        while head < tail:
            v = queue[head]
            head += 1
            if v != d and node_tier[v] == 0 and not gpu_transit:
                continue
            fwd[v] = True
            for idx in range(out_ptr[v], out_ptr[v + 1]):
                e = out_links[idx]
                w = link_dst[e]
                if dist[w] < 0 and alive[e ^ 1]:
                    dist[w] = dist[v] + 1
                    queue[tail] = w
                    tail += 1
        for t in range(j - i):
            f = order[i + t]
            s = np.int64(src[f])
            if s == d:
                lens[f] = 0
                continue
            if dist[s] < 0 or dist[s] > buf.shape[1]:
                lens[f] = -1
                continue
            h = np.uint64(fh[f])
            u = s
            n = 0
            while u != d:
                cnt = 0
                for idx in range(out_ptr[u], out_ptr[u + 1]):
                    e = out_links[idx]
                    w = link_dst[e]
                    if alive[e] and dist[w] == dist[u] - 1 and (w == d or fwd[w]):
                        cnt += 1
                if cnt == 0:
                    n = -1
                    break
                pick = _pick(h, u, seed, polarized, cnt)
                for idx in range(out_ptr[u], out_ptr[u + 1]):
                    e = out_links[idx]
                    w = link_dst[e]
                    if alive[e] and dist[w] == dist[u] - 1 and (w == d or fwd[w]):
                        if pick == 0:
                            buf[f, n] = e
                            n += 1
                            u = w
                            break
                        pick -= 1
            lens[f] = n
        for t in range(tail):
            touched[t] = queue[t]
        for t in range(tail):
            dist[touched[t]] = -1
            fwd[touched[t]] = False
        i = j


@njit
def compact(buf: np.ndarray, lens: np.ndarray, offsets: np.ndarray, links: np.ndarray) -> None:
    """Copy the first lens[f] entries of each buffer row into CSR `links` at offsets[f]."""
    for f in range(lens.shape[0]):
        o = offsets[f]
        for k in range(max(lens[f], 0)):
            links[o + k] = buf[f, k]


@njit
def any_failed(buf: np.ndarray, lens: np.ndarray, failed: np.ndarray, out: np.ndarray) -> None:
    """out[f] = True when a link of flow f's path is in the failed mask."""
    for f in range(lens.shape[0]):
        hit = False
        for k in range(max(lens[f], 0)):
            if failed[buf[f, k]]:
                hit = True
                break
        out[f] = hit
