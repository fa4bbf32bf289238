"""Vectorized ECMP routing: many (src, dst, flow hash) at once → CSR paths of link ids.

`route` is the contract the network simulator consumes: `path_offsets[i]:path_offsets[i+1]`
indexes `path_links` for flow i (int64 link ids of the topology, in order from src to dst).
Structured topologies use closed-form up/down paths; an arbitrary one (no `structure`) uses
shortest-path ECMP by BFS. Failed links or switches reroute the flows that crossed them by
BFS over what is left. An unreachable flow gets an empty path and reachable=False (a status,
not an exception); so does src == dst, with reachable=True.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from starfabric.astral.routing import _kernels as K
from starfabric.astral.topology.model import LINK_NVLINK, TIER_GPU, Topology
from starfabric.errors import ConfigError

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Routes:
    """Paths of a batch of flows (CSR) and whether each found one."""

    offsets: IntArray
    links: IntArray
    reachable: npt.NDArray[np.bool_]
    rerouted: npt.NDArray[np.bool_]

    def path(self, i: int) -> IntArray:
        """Link ids of flow i's path."""
        return self.links[self.offsets[i] : self.offsets[i + 1]]

    def hops(self) -> IntArray:
        """Links per path."""
        return np.diff(self.offsets)


def failed_link_mask(
    topo: Topology,
    links: npt.ArrayLike | None = None,
    nodes: npt.ArrayLike | None = None,
) -> npt.NDArray[np.bool_]:
    """Mask over directed links: a failed link fails both directions; a failed node all its links."""
    mask = np.zeros(topo.n_links, dtype=np.bool_)
    if links is not None:
        ids = np.asarray(links, dtype=np.int64).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= topo.n_links):
            raise ConfigError(
                f"failed link id outside 0..{topo.n_links - 1}", fix="use this topology's ids"
            )
        mask[ids] = True
        mask[ids ^ 1] = True
    if nodes is not None:
        ids = np.asarray(nodes, dtype=np.int64).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= topo.n_nodes):
            raise ConfigError(
                f"failed node id outside 0..{topo.n_nodes - 1}", fix="use this topology's ids"
            )
        dead = np.zeros(topo.n_nodes, dtype=np.bool_)
        dead[ids] = True
        mask |= dead[topo.link_src] | dead[topo.link_dst]
    return mask


def _check(
    topo: Topology, src: npt.ArrayLike, dst: npt.ArrayLike, fh: npt.ArrayLike
) -> tuple[IntArray, IntArray, npt.NDArray[np.uint64]]:
    s = np.ascontiguousarray(src, dtype=np.int64).ravel()
    d = np.ascontiguousarray(dst, dtype=np.int64).ravel()
    h = np.ascontiguousarray(np.asarray(fh).astype(np.uint64, copy=False)).ravel()
    if not (s.shape == d.shape == h.shape):
        raise ConfigError(
            f"route: src, dst, flow_hash have lengths {s.size}, {d.size}, {h.size}",
            fix="give one src, dst and hash per flow",
        )
    n = topo.n_gpus
    for name, a in (("src", s), ("dst", d)):
        if a.size and (a.min() < 0 or a.max() >= n):
            raise ConfigError(f"route: {name} GPU id outside 0..{n - 1}", fix="use GPU ids")
    return s, d, h


def _ints(topo: Topology) -> IntArray:
    st = topo.structure
    if st is None:
        raise ConfigError("topology has no closed-form structure", fix="use method='bfs'")
    tb = topo.tier_base
    lb = topo.link_base
    return np.array(
        [
            st.gpu_tor.shape[1],
            st.gpus_per_host,
            st.tors_per_group,
            st.aggs_per_group,
            st.tor_agg_parallel,
            int(st.has_core),
            st.groups_per_domain,
            st.aggs_per_core,
            st.agg_uplinks,
            st.cores_per_domain,
            int(st.nvlink_forwarding),
            int(topo.count(4) > 0),
            0,
            tb[2] - tb[1],
            tb[3] - tb[1],
            lb[0],
            lb[1],
            lb[2],
            lb[3],
        ],
        dtype=np.int64,
    )


def _bfs(
    topo: Topology,
    s: IntArray,
    d: IntArray,
    h: npt.NDArray[np.uint64],
    alive: npt.NDArray[np.bool_],
    seed: int,
    polarized: bool,
) -> tuple[npt.NDArray[np.int64], IntArray]:
    order = np.argsort(d, kind="stable").astype(np.int64)
    buf = np.full((s.size, K.BFS_MAX_HOPS), -1, dtype=np.int64)
    lens = np.zeros(s.size, dtype=np.int64)
    transit = bool(topo.structure is not None and topo.structure.nvlink_forwarding)
    K.route_bfs(
        order,
        s,
        d,
        h,
        topo.out_ptr,
        topo.out_links,
        topo.link_dst,
        topo.node_tier,
        alive,
        transit,
        np.uint64(seed),
        polarized,
        buf,
        lens,
    )
    return buf, lens


def route_flows(
    topo: Topology,
    src: npt.ArrayLike,
    dst: npt.ArrayLike,
    flow_hash: npt.ArrayLike,
    *,
    seed: int = 0,
    polarized: bool = False,
    failed: npt.NDArray[np.bool_] | None = None,
    method: str = "auto",
) -> Routes:
    """ECMP paths for GPU pairs; `failed` is a mask from `failed_link_mask` (or None)."""
    s, d, h = _check(topo, src, dst, flow_hash)
    if method not in ("auto", "closed-form", "bfs"):
        raise ConfigError(f"route: method {method!r}", fix="use auto, closed-form or bfs")
    if failed is not None and failed.shape != (topo.n_links,):
        raise ConfigError("route: failed mask has the wrong length", fix="use failed_link_mask")
    useq = method == "closed-form" or (method == "auto" and topo.structure is not None)
    rerouted = np.zeros(s.size, dtype=np.bool_)
    if useq:
        st = topo.structure
        if st is None:
            raise ConfigError("topology has no closed-form structure", fix="use method='bfs'")
        buf = np.full((s.size, K.MAX_HOPS), -1, dtype=np.int64)
        lens = np.zeros(s.size, dtype=np.int64)
        gt = np.ascontiguousarray(st.gpu_tor, dtype=np.int64)
        K.route_clos(s, d, h, gt, _ints(topo), np.uint64(seed), polarized, buf, lens)
        if failed is not None and failed.any():
            K.any_failed(buf, lens, failed, rerouted)
            if rerouted.any():
                idx = np.flatnonzero(rerouted)
                b2, l2 = _bfs(topo, s[idx], d[idx], h[idx], ~failed, seed, polarized)
                wide = np.full((s.size, K.BFS_MAX_HOPS), -1, dtype=np.int64)
                wide[:, : K.MAX_HOPS] = buf
                wide[idx] = b2
                buf, lens = wide, lens.copy()
                lens[idx] = l2
    else:
        alive = np.ones(topo.n_links, dtype=np.bool_) if failed is None else ~failed
        buf, lens = _bfs(topo, s, d, h, alive, seed, polarized)
        rerouted[:] = failed is not None and bool(failed.any())
    reachable = lens >= 0
    offsets = np.zeros(s.size + 1, dtype=np.int64)
    np.cumsum(np.maximum(lens, 0), out=offsets[1:])
    links = np.empty(int(offsets[-1]), dtype=np.int64)
    K.compact(buf, lens, offsets, links)
    return Routes(offsets=offsets, links=links, reachable=reachable, rerouted=rerouted)


def route(
    topology: Topology,
    src: npt.ArrayLike,
    dst: npt.ArrayLike,
    flow_hash: npt.ArrayLike,
    *,
    seed: int = 0,
    polarized: bool = False,
    failed: npt.NDArray[np.bool_] | None = None,
) -> tuple[IntArray, IntArray]:
    """(path_offsets, path_links) CSR arrays over many flows; see `route_flows` for statuses."""
    r = route_flows(topology, src, dst, flow_hash, seed=seed, polarized=polarized, failed=failed)
    return r.offsets, r.links


def path_nodes(topo: Topology, links: IntArray) -> IntArray:
    """Node sequence of a path given as link ids (src first)."""
    if links.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([[topo.link_src[links[0]]], topo.link_dst[links]]).astype(np.int64)


def is_gpu(topo: Topology, node: int) -> bool:
    """Whether a node id is a GPU."""
    return int(topo.node_tier[node]) == TIER_GPU


def uses_nvlink(topo: Topology, links: IntArray) -> bool:
    """Whether a path crosses NVLink (same-host, or rail-only forwarding)."""
    lo, hi = topo.links_of_kind(LINK_NVLINK)
    return bool(((links >= lo) & (links < hi)).any())
