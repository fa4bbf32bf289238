"""NCCL-like decompositions of collectives into steps of rank-to-rank flows.

Sizes follow nccl-tests (PERFORMANCE.md): `size` is the buffer a user passes (the total output
for all_gather, the total input for reduce_scatter, each rank's send buffer for alltoall), and
busbw = algbw × bus_factor. Ranks are numbered host-major: rank r sits on host r // local as
local rank r % local (the placement layer may permute this).
"""

from __future__ import annotations

import numpy as np

from starfabric.astral.collectives.plan import FloatArray, IntArray, Plan, Step
from starfabric.astral.nccltests import busbw_factor
from starfabric.errors import ConfigError

MAX_A2A_FLOWS = 262_144
"""Assumption: above this many flows, an all-to-all is simulated on a sample of its shifts."""


def _check(n: int, size: float, channels: int) -> None:
    if n < 2:
        raise ConfigError(
            f"collective: ranks = {n}; a collective needs at least 2", fix="use --gpus >= 2"
        )
    if size <= 0:
        raise ConfigError(
            f"collective: size = {size}; must be positive", fix="use e.g. --size 1GiB"
        )
    if channels < 1:
        raise ConfigError(f"collective: channels = {channels}", fix="use channels >= 1")


def _split_channels(
    src: IntArray, dst: IntArray, size: FloatArray, channels: int
) -> tuple[IntArray, IntArray, FloatArray, IntArray]:
    """Each transfer split over `channels` QPs carrying equal shares (NCCL channels)."""
    c = np.arange(channels, dtype=np.int64)
    return (
        np.repeat(src, channels),
        np.repeat(dst, channels),
        np.repeat(size / channels, channels),
        np.tile(c, len(src)),
    )


def _ring_step(ring: IntArray, chunk: float, channels: int, phase: str, repeat: int) -> Step:
    src = ring
    dst = np.roll(ring, -1)
    s, d, b, q = _split_channels(src, dst, np.full(len(ring), chunk), channels)
    return Step(s, d, b, q, phase, repeat=repeat)


def ring(op: str, n: int, size: float, channels: int = 1) -> Plan:
    """Flat ring over all ranks: all_reduce, all_gather, reduce_scatter or broadcast."""
    _check(n, size, channels)
    order = np.arange(n, dtype=np.int64)
    if op == "all_reduce":
        steps = (_ring_step(order, size / n, channels, "ring", 2 * (n - 1)),)
    elif op in ("all_gather", "reduce_scatter"):
        steps = (_ring_step(order, size / n, channels, "ring", n - 1),)
    elif op == "broadcast":
        # pipelined chain root → … → last: every hop carries the whole buffer once
        src, dst = order[:-1], order[1:]
        s, d, b, q = _split_channels(src, dst, np.full(n - 1, size), channels)
        steps = (Step(s, d, b, q, "chain"),)
    else:
        raise ConfigError(
            f"ring: op {op!r} has no ring form",
            fix="use all_reduce, all_gather, reduce_scatter or broadcast",
        )
    return Plan(op, "ring", n, size, steps, busbw_factor(op, n))


def _double_binary_trees(m: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """NCCL's two complementary binary trees over m nodes: (child, parent) edge lists of each.

    Tree 1 is the in-order binary tree of 0..m−1; tree 2 is tree 1 shifted by one (or mirrored
    for even m) so that a node that is a leaf in one tree is interior in the other.
    """

    def inorder(lo: int, hi: int, parent: int, out_c: list[int], out_p: list[int]) -> None:
        if lo > hi:
            return
        mid = (lo + hi + 1) // 2
        if parent >= 0:
            out_c.append(mid)
            out_p.append(parent)
        inorder(lo, mid - 1, mid, out_c, out_p)
        inorder(mid + 1, hi, mid, out_c, out_p)

    c1: list[int] = []
    p1: list[int] = []
    inorder(0, m - 1, -1, c1, p1)
    a1, b1 = np.array(c1, np.int64), np.array(p1, np.int64)
    if m % 2 == 0:
        a2, b2 = m - 1 - a1, m - 1 - b1  # mirror
    else:
        a2, b2 = (a1 + 1) % m, (b1 + 1) % m  # shift
    return a1, b1, a2, b2


def hierarchical(
    op: str, n: int, size: float, local: int, inter: str = "ring", channels: int = 1
) -> Plan:
    """Intra-host over NVLink + inter-host per rail (NCCL's default at scale).

    all_reduce = intra reduce-scatter → inter all-reduce of 1/local per rail (ring, or NCCL's
    double binary tree) → intra all-gather. all_gather/reduce_scatter = the inter ring per rail
    and an intra ring.
    """
    _check(n, size, channels)
    if local < 1 or n % local:
        raise ConfigError(
            f"hierarchical: ranks {n} is not a multiple of gpus per host {local}",
            fix="use whole hosts",
        )
    hosts = n // local
    if hosts == 1 or local == 1:
        return ring(op, n, size, channels)
    ranks = np.arange(n, dtype=np.int64).reshape(hosts, local)
    intra_rings = ranks  # each row is one host's ring
    shard = size / local
    steps: list[Step] = []

    def intra(phase: str) -> Step:
        src = intra_rings.ravel()
        dst = np.roll(intra_rings, -1, axis=1).ravel()
        s, d, b, q = _split_channels(src, dst, np.full(n, shard), channels)
        return Step(s, d, b, q, phase, repeat=local - 1)

    def inter_ring(chunk: float, repeat: int) -> Step:
        src = ranks.T.ravel()  # rail j: ranks[:, j] in host order
        dst = np.roll(ranks, -1, axis=0).T.ravel()
        s, d, b, q = _split_channels(src, dst, np.full(n, chunk), channels)
        return Step(s, d, b, q, "inter-ring", repeat=repeat)

    if op == "all_reduce":
        steps.append(intra("intra-reduce-scatter"))
        if inter == "tree":
            c1, p1, c2, p2 = _double_binary_trees(hosts)
            child = np.concatenate([c1, c2])
            parent = np.concatenate([p1, p2])
            # per rail j: child host → parent host (reduce) and back (broadcast), half the shard per tree
            src = np.concatenate([ranks[child].T.ravel(), ranks[parent].T.ravel()])
            dst = np.concatenate([ranks[parent].T.ravel(), ranks[child].T.ravel()])
            s, d, b, q = _split_channels(src, dst, np.full(len(src), shard / 2.0), channels)
            depth = int(np.ceil(np.log2(hosts + 1)))
            steps.append(Step(s, d, b, q, "inter-tree"))
            notes = {"latency_steps": float(2 * depth)}
        else:
            steps.append(inter_ring(shard / hosts, 2 * (hosts - 1)))
            notes = {}
        steps.append(intra("intra-all-gather"))
        return Plan(op, f"hierarchical-{inter}", n, size, tuple(steps), busbw_factor(op, n), notes)
    if op in ("all_gather", "reduce_scatter"):
        # all_gather: per-rail ring over hosts (chunks of size/n), then the intra-host ring moves
        # each rank's gathered 1/local share; reduce_scatter runs the same steps in reverse.
        rail, host = inter_ring(size / n, hosts - 1), intra("intra")
        steps_ = (rail, host) if op == "all_gather" else (host, rail)
        return Plan(op, "hierarchical-ring", n, size, steps_, busbw_factor(op, n))
    raise ConfigError(
        f"hierarchical: op {op!r} not supported", fix="use all_reduce, all_gather or reduce_scatter"
    )


def alltoall(
    n: int,
    size: float,
    local: int = 1,
    pxn: bool = False,
    channels: int = 1,
    max_flows: int = MAX_A2A_FLOWS,
    seed: int = 0,
) -> Plan:
    """Every rank sends size/n to every other rank at once (one concurrent step).

    With `pxn` (NCCL PXN), a transfer to a rank of another host on a different rail first
    crosses NVLink to the sender-host GPU on the destination's rail (`via`). Above `max_flows`
    the step is sampled on a random subset of shifts k (i → i+k) and scaled up.
    """
    _check(n, size, channels)
    shifts = np.arange(1, n, dtype=np.int64)
    scale = 1.0
    if (n - 1) * n * channels > max_flows:
        k = max(1, max_flows // (n * channels))
        shifts = np.sort(np.random.default_rng(seed).choice(shifts, size=k, replace=False))
        scale = (n - 1) / k
    src = np.tile(np.arange(n, dtype=np.int64), len(shifts))
    dst = (src + np.repeat(shifts, n)) % n
    s, d, b, q = _split_channels(src, dst, np.full(len(src), size / n), channels)
    via = None
    if pxn and local > 1:
        src_host, dst_host = s // local, d // local
        cross = (src_host != dst_host) & (s % local != d % local)
        via = np.where(cross, src_host * local + d % local, -1).astype(np.int64)
    step = Step(s, d, b, q, "alltoall-pxn" if via is not None else "alltoall", scale=scale, via=via)
    return Plan(
        "alltoall",
        "pxn" if via is not None else "direct",
        n,
        size,
        (step,),
        busbw_factor("alltoall", n),
        {"sampled_shifts": float(len(shifts))},
    )


def sendrecv(size: float, src: int = 0, dst: int = 1, channels: int = 1) -> Plan:
    """Point-to-point transfer between pipeline stages."""
    _check(2, size, channels)
    s, d, b, q = _split_channels(
        np.array([src]), np.array([dst]), np.array([float(size)]), channels
    )
    return Plan("sendrecv", "p2p", max(src, dst) + 1, size, (Step(s, d, b, q, "p2p"),), 1.0)
