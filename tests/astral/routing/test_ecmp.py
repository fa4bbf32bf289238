"""ECMP routing: valid paths for every pair, closed form = BFS, uniform spread, polarization, failures."""

import numpy as np
import pytest
from scipy import stats

from starfabric.astral.routing import failed_link_mask, path_nodes, route, route_flows, uses_nvlink
from starfabric.astral.topology import (
    LINK_AGG_CORE,
    TIER_AGG,
    TIER_CORE,
    TIER_TOR,
    ClusterSpec,
    Topology,
    build,
)
from starfabric.errors import ConfigError

SMALL = {
    "astral": {"switch": "test-8x200G", "gpus_per_host": 2, "pods": 2},
    "fat-tree": {"switch": "test-8x200G", "gpus_per_host": 2, "gpus": 32},
    "rail-only": {"switch": "test-8x200G", "gpus_per_host": 2, "gpus": 32},
    "dual-plane": {"switch": "test-8x200G", "gpus_per_host": 2, "gpus": 64},
}


def _small(kind: str) -> Topology:
    return build(ClusterSpec(topology=kind, **SMALL[kind]))


def _all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    s, d = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return s.ravel(), d.ravel()


def _check_paths(
    topo: Topology, s: np.ndarray, d: np.ndarray, off: np.ndarray, links: np.ndarray
) -> None:
    for i in range(s.size):
        p = links[off[i] : off[i + 1]]
        if s[i] == d[i]:
            assert p.size == 0
            continue
        assert p.size > 0, (s[i], d[i])
        nodes = path_nodes(topo, p)
        assert nodes[0] == s[i] and nodes[-1] == d[i]
        assert (topo.link_dst[p[:-1]] == topo.link_src[p[1:]]).all()
        assert len(set(nodes.tolist())) == nodes.size  # loop-free


@pytest.mark.parametrize("kind", list(SMALL))
def test_every_gpu_pair_has_a_valid_path(kind: str) -> None:
    topo = _small(kind)
    s, d = _all_pairs(topo.n_gpus)
    h = np.arange(s.size, dtype=np.uint64) * np.uint64(2654435761)
    off, links = route(topo, s, d, h)
    assert off.dtype == np.int64 and links.dtype == np.int64
    _check_paths(topo, s, d, off, links)


@pytest.mark.parametrize("kind", list(SMALL))
def test_closed_form_is_shortest_like_bfs(kind: str) -> None:
    topo = _small(kind)
    s, d = _all_pairs(topo.n_gpus)
    h = np.arange(s.size, dtype=np.uint64)
    a = route_flows(topo, s, d, h, method="closed-form")
    b = route_flows(topo, s, d, h, method="bfs")
    assert a.reachable.all() and b.reachable.all()
    assert (a.hops() == b.hops()).all()
    _check_paths(topo, s, d, b.offsets, b.links)


def test_same_rail_same_pod_meets_below_core() -> None:
    topo = build(ClusterSpec(topology="astral", switch="test-16x200G", pods=2))
    n = topo.n_gpus
    g = np.arange(n)
    per_pod = topo.meta["gpus_per_pod"]
    s, d = _all_pairs(n)
    same = (s % 8 == d % 8) & (s // per_pod == d // per_pod) & (s // 8 != d // 8)
    r = route_flows(topo, s[same], d[same], np.arange(same.sum(), dtype=np.uint64))
    lo, hi = topo.links_of_kind(LINK_AGG_CORE)
    assert not ((r.links >= lo) & (r.links < hi)).any()
    assert set(r.hops().tolist()) <= {2, 4}
    other = ~same & (s // 8 != d // 8)
    r2 = route_flows(topo, s[other], d[other], np.arange(other.sum(), dtype=np.uint64))
    assert (r2.hops() == 6).all()
    assert g.size == n


def test_rail_only_forwards_cross_rail_over_nvlink() -> None:
    topo = _small("rail-only")
    r = route_flows(topo, [0], [3], [7])
    assert uses_nvlink(topo, r.path(0))
    r = route_flows(topo, [0], [2], [7])  # same rail, other host
    assert not uses_nvlink(topo, r.path(0))


def _uplink_counts(topo: Topology, polarized: bool, n_flows: int) -> np.ndarray:
    """Per-uplink flow counts at the first Agg that src GPU 0's flows cross, to other pods."""
    per_pod = topo.meta["gpus_per_pod"]
    rng = np.random.default_rng(5)
    s = np.zeros(n_flows, dtype=np.int64)
    d = rng.integers(per_pod, topo.n_gpus, n_flows)
    h = rng.integers(0, 2**63, n_flows, dtype=np.int64).astype(np.uint64)
    r = route_flows(topo, s, d, h, polarized=polarized)
    lo, _ = topo.links_of_kind(LINK_AGG_CORE)
    third = r.links[r.offsets[:-1] + 2]  # NIC, ToR->Agg, Agg->Core
    agg = topo.link_src[third]
    busiest = np.bincount(agg).argmax()
    on = third[agg == busiest]
    return np.bincount(
        (on - lo) // 2 % (topo.meta["radix"] // 2), minlength=topo.meta["radix"] // 2
    )


def test_ecmp_spreads_uniformly_and_polarization_does_not() -> None:
    topo = build(ClusterSpec(topology="astral", switch="test-16x200G", pods=2))
    fair = _uplink_counts(topo, False, 40_000)
    chi = stats.chisquare(fair)
    assert chi.pvalue > 1e-3
    polar = _uplink_counts(topo, True, 40_000)
    assert stats.chisquare(polar).pvalue < 1e-12
    assert (polar > 0).sum() == 1  # the same hash at ToR and Agg: one uplink carries all


def test_link_and_switch_failures_reroute() -> None:
    topo = build(ClusterSpec(topology="astral", switch="test-16x200G", pods=2))
    s, d = _all_pairs(topo.n_gpus)
    keep = s // 8 != d // 8
    s, d = s[keep], d[keep]
    h = np.arange(s.size, dtype=np.uint64)
    base = route_flows(topo, s, d, h)
    core = int(topo.nodes_of(TIER_CORE)[0])
    agg = int(topo.nodes_of(TIER_AGG)[3])
    link = int(base.links[base.offsets[5] + 1])
    mask = failed_link_mask(topo, links=[link], nodes=[core, agg])
    r = route_flows(topo, s, d, h, failed=mask)
    assert r.reachable.all()
    assert not mask[r.links].any()
    assert r.rerouted.sum() > 0
    assert (r.hops() == base.hops()).all()  # a 1:1 Clos keeps shortest paths
    _check_paths(topo, s[:2000], d[:2000], r.offsets, r.links)
    # every ToR of GPU 0 dead: GPU 0 is cut off, a status not an exception
    tors = topo.link_dst[topo.out_links_of(0)]
    dead = failed_link_mask(topo, nodes=tors[topo.node_tier[tors] == TIER_TOR])
    r = route_flows(topo, [0, 9], [9, 10], [1, 2], failed=dead)
    assert r.reachable.tolist() == [False, True] and r.path(0).size == 0


def test_bad_route_input_is_one_line() -> None:
    topo = _small("astral")
    with pytest.raises(ConfigError, match="dst GPU id"):
        route(topo, [0], [10_000], [1])
    with pytest.raises(ConfigError, match="lengths"):
        route(topo, [0, 1], [1], [1])
    with pytest.raises(ConfigError, match="failed link id"):
        failed_link_mask(topo, links=[-1])


def test_arbitrary_topology_routes_by_graph_search() -> None:
    import dataclasses

    topo = _small("astral")
    bare = dataclasses.replace(topo, structure=None)
    s, d = _all_pairs(topo.n_gpus)
    h = np.arange(s.size, dtype=np.uint64)
    r = route_flows(bare, s, d, h)  # auto -> BFS: no closed form without structure
    assert r.reachable.all()
    assert (r.hops() == route_flows(topo, s, d, h).hops()).all()
    with pytest.raises(ConfigError, match="closed-form"):
        route_flows(bare, s, d, h, method="closed-form")
