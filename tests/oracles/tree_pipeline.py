"""A chunk-level reference for the pipeline fill of NCCL's tree all-reduce between nodes.

Every tree edge has two connections (reduce up, broadcast down), each a FIFO of `slots`
chunks, as NCCL's runTreeSplit / NVLS-tree warp groups run them; a node forwards a chunk once
it holds it whole (up: from all its children; down: from its parent); each node's NIC egress
and ingress (capacity 1 chunk per time unit) is shared max-min among connections with data
and room. Time is in units of one chunk at the full NIC rate. Slow (Python loop per unit):
for small trees in tests only.
"""

from __future__ import annotations

import numpy as np

from starfabric.astral.collectives.nccl import _dbt


def _maxmin(src: np.ndarray, dst: np.ndarray, demand: np.ndarray, m: int) -> np.ndarray:
    """Max-min rates of connections over per-node egress/ingress capacity 1, capped by demand."""
    rate = np.zeros(len(src))
    free = demand > 1e-12
    eg, ig = np.ones(m), np.ones(m)
    while free.any():
        ne = np.bincount(src[free], minlength=m)
        ni = np.bincount(dst[free], minlength=m)
        share = np.minimum(
            np.where(ne[src] > 0, eg[src] / np.maximum(ne[src], 1), np.inf),
            np.where(ni[dst] > 0, ig[dst] / np.maximum(ni[dst], 1), np.inf),
        )
        inc = float(np.min(np.where(free, np.minimum(share, demand - rate), np.inf)))
        rate[free] += inc
        np.subtract.at(eg, src[free], inc)
        np.subtract.at(ig, dst[free], inc)
        done = free & ((demand - rate < 1e-12) | (eg[src] < 1e-12) | (ig[dst] < 1e-12))
        free &= ~done
    return rate


def tree_allreduce_units(m: int, chunks: int, slots: int = 8, lat: int = 0) -> tuple[float, float]:
    """(time, bottleneck work) of a double-binary-tree all-reduce of `chunks` chunks per
    connection over `m` nodes, in chunk times at the full NIC rate (one channel per tree).
    `lat` units pass before sent data (and returned credit) reach the other end of a hop."""
    conns: list[tuple[int, int, int, int]] = []  # (src, dst, up?, tree)
    for t, (child, parent) in enumerate(_dbt(m)):
        for c, p in zip(child.tolist(), parent.tolist(), strict=True):
            conns += [(c, p, 1, t), (p, c, 0, t)]
    src = np.array([c[0] for c in conns])
    dst = np.array([c[1] for c in conns])
    n = len(conns)
    feeds: list[list[int]] = []  # connections whose received data this one forwards
    for s, _d, up, t in conns:
        if up:
            feeds.append([j for j, c in enumerate(conns) if c[2] == 1 and c[3] == t and c[1] == s])
        else:
            par = [j for j, c in enumerate(conns) if c[2] == 0 and c[3] == t and c[1] == s]
            kids = [j for j, c in enumerate(conns) if c[2] == 1 and c[3] == t and c[1] == s]
            feeds.append(par if par else kids)  # the root broadcasts what it reduced
    users: list[list[int]] = [[] for _ in range(n)]
    for i, f in enumerate(feeds):
        for j in f:
            users[j].append(i)
    sent = np.zeros(n)
    history = [sent]
    steps = 0
    while (sent < chunks - 1e-9).any():
        seen = history[max(0, len(history) - 1 - lat)]  # what has arrived `lat` units later
        whole = np.floor(seen + 1e-9)
        ready = np.array([min((whole[j] for j in f), default=chunks) for f in feeds], float)
        freed = np.array([min((seen[i] for i in u), default=seen[j]) for j, u in enumerate(users)])
        demand = np.maximum(np.minimum(np.minimum(ready, freed + slots), chunks) - sent, 0.0)
        sent = sent + _maxmin(src, dst, demand, m)
        history.append(sent)
        steps += 1
        if steps > 20 * chunks * m:
            raise RuntimeError("reference pipeline stalled")
    work = max(np.bincount(src, minlength=m).max(), np.bincount(dst, minlength=m).max())
    return float(steps + lat), float(work * chunks)  # the last chunk still has to arrive
