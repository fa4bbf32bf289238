"""Builders recompute the paper's figures from their own wiring (Astral SIGCOMM'25, section 3)."""

import numpy as np
import pytest

from starfabric.astral.topology import (
    LINK_AGG_CORE,
    LINK_NIC,
    LINK_TOR_AGG,
    TIER_AGG,
    TIER_CORE,
    TIER_TOR,
    ClusterSpec,
    Topology,
    build,
)
from starfabric.astral.topology.inventory import inventory
from starfabric.errors import ConfigError, InfeasibleError


def _ports(topo: Topology, tier: int, kind: int, up: bool) -> np.ndarray:
    """Links of `kind` leaving each node of `tier` (up = towards higher tiers)."""
    lo, hi = topo.links_of_kind(kind)
    ids = np.arange(lo + (0 if up else 1), hi, 2)
    src = topo.link_src[ids]
    nodes = topo.nodes_of(tier)
    return (
        np.bincount(src - nodes[0], minlength=nodes.size)[: nodes.size]
        if src.size
        else np.zeros(nodes.size, dtype=np.int64)
    )


@pytest.fixture(scope="module")
def astral_512k() -> Topology:
    return build(ClusterSpec(topology="astral", pods=8))


def test_512k_cluster_figures(astral_512k: Topology) -> None:
    t = astral_512k
    assert t.meta["gpus_per_pod"] == 65_536
    assert t.n_gpus == 524_288
    assert t.count(TIER_TOR) == 8 * 8 * 128 and t.count(TIER_AGG) == 8 * 8 * 128
    assert t.count(TIER_CORE) == 4_096


def test_every_tier_is_one_to_one(astral_512k: Topology) -> None:
    t = astral_512k
    r = 256
    # every ToR: R/2 NIC ports down and R/2 up; every Agg: R/2 down and R/2 up; Core: R down.
    assert (_ports(t, TIER_TOR, LINK_NIC, up=False) == r // 2).all()
    assert (_ports(t, TIER_TOR, LINK_TOR_AGG, up=True) == r // 2).all()
    assert (_ports(t, TIER_AGG, LINK_TOR_AGG, up=False) == r // 2).all()
    assert (_ports(t, TIER_AGG, LINK_AGG_CORE, up=True) == r // 2).all()
    assert (_ports(t, TIER_CORE, LINK_AGG_CORE, up=False) == r).all()
    inv = inventory(t, ClusterSpec(topology="astral", pods=8))
    assert inv.oversubscription == {"tor": 1.0, "agg": 1.0}
    assert inv.bisection_bps == pytest.approx(524_288 * 400e9 / 2)


def test_25t_pod_is_16k() -> None:
    t = build(ClusterSpec(topology="astral", switch="25.6T", pods=1))
    assert t.n_gpus == 16_384 and t.meta["radix"] == 128


def test_nic_ports_on_different_tors(astral_512k: Topology) -> None:
    lo, hi = astral_512k.links_of_kind(LINK_NIC)
    tor = astral_512k.link_dst[lo:hi:2].reshape(-1, 2)
    gpu = astral_512k.link_src[lo:hi:2].reshape(-1, 2)
    assert (gpu[:, 0] == gpu[:, 1]).all() and (gpu[:, 0] == np.arange(524_288)).all()
    assert (tor[:, 0] != tor[:, 1]).all()


def test_aggs_see_only_one_rail(astral_512k: Topology) -> None:
    t = astral_512k
    lo, hi = t.links_of_kind(LINK_NIC)
    tor_rail = np.full(t.n_nodes, -1)
    tor_rail[t.link_dst[lo:hi:2]] = t.link_src[lo:hi:2] % 8
    lo, hi = t.links_of_kind(LINK_TOR_AGG)
    rails = tor_rail[t.link_src[lo:hi:2]]
    aggs = t.link_dst[lo:hi:2]
    # min and max rail under every Agg agree.
    n = t.n_nodes
    mn = np.full(n, 99)
    mx = np.full(n, -1)
    np.minimum.at(mn, aggs, rails)
    np.maximum.at(mx, aggs, rails)
    sel = t.nodes_of(TIER_AGG)
    assert (mn[sel] == mx[sel]).all() and (mn[sel] >= 0).all()


def test_infeasible_pods_name_nearest_valid() -> None:
    with pytest.raises(InfeasibleError) as exc:
        build(ClusterSpec(topology="astral", pods=5))
    msg = exc.value.one_line()
    assert "pods: 4 or 8" in msg and "\n" not in msg


def test_gpus_and_pods_must_agree() -> None:
    with pytest.raises(InfeasibleError, match="65,536"):
        build(ClusterSpec(topology="astral", pods=2, gpus=65_536))
    with pytest.raises(InfeasibleError, match="gpus: 65,536 or 131,072"):
        build(ClusterSpec(topology="astral", gpus=100_000))
    assert build(ClusterSpec(topology="astral", gpus="131072", switch="25.6T")).meta["pods"] == 8


def test_bad_input_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"unknown topology 'torus'.*astral, fat-tree"):
        build(ClusterSpec(topology="torus"))
    with pytest.raises(ConfigError, match="no 300G port mode"):
        build(ClusterSpec(port_speed="300G"))
    with pytest.raises(InfeasibleError, match="port_speed: 200G"):
        build(ClusterSpec(port_speed="400G"))


def test_other_designs_at_equal_gpu_count() -> None:
    n = 16_384
    base = {"switch": "25.6T", "gpus": n}
    ft = build(ClusterSpec(topology="fat-tree", **base))
    dp = build(ClusterSpec(topology="dual-plane", **base))
    ro = build(ClusterSpec(topology="rail-only", **base))
    for t in (ft, dp, ro):
        assert t.n_gpus == n
    # fat-tree and dual-plane are non-blocking 3-tier Clos here: 5 switches per R NIC ports.
    assert sum(ft.count(k) for k in (1, 2, 3)) == 5 * n * 2 // 128
    assert sum(dp.count(k) for k in (1, 2, 3)) == 5 * n * 2 // 128
    assert dp.meta["planes"] == 2 and dp.meta["pods"] == 4
    one = build(ClusterSpec(topology="dual-plane", switch="25.6T", gpus=8192))
    assert one.count(TIER_CORE) == 0 and one.count(TIER_TOR) == 2 * 128
    # rail-only: 2048 hosts per rail fit a 2-tier rail Clos; no Core.
    assert ro.count(TIER_CORE) == 0 and ro.meta["rail_tiers"] == 2
    inv = inventory(ro, ClusterSpec(topology="rail-only", **base))
    assert inv.network_bisection_bps == 0.0 and inv.bisection_bps > 0


def test_fat_tree_is_not_rail_optimized_but_rail_layout_is() -> None:
    for layout, one_rail in (("host", False), ("rail", True)):
        t = build(ClusterSpec(topology="fat-tree", switch="25.6T", gpus=16_384, layout=layout))
        st = t.structure
        assert st is not None
        rails_per_tor = np.zeros((t.count(TIER_TOR), 8), dtype=bool)
        g = np.arange(t.n_gpus)
        rails_per_tor[st.gpu_tor.ravel(), np.repeat(g % 8, 2)] = True
        assert (rails_per_tor.sum(axis=1) == 1).all() == one_rail


def test_arrays_are_read_only(astral_512k: Topology) -> None:
    with pytest.raises(ValueError):
        astral_512k.link_capacity_bps[0] = 1.0


def test_inventory_optics_and_largest_cluster() -> None:
    spec = ClusterSpec(topology="astral", switch="25.6T", pods=1)
    inv = inventory(build(spec), spec)
    # 16,384 GPUs x 2 ports: 32,768 links per tier, two transceivers per link
    assert inv.links == {"nic-tor": 32_768, "tor-agg": 32_768, "agg-core": 32_768, "nvlink": 16_384}
    assert inv.media == {"nic-tor": "200G-SR4", "tor-agg": "200G-SR4", "agg-core": "200G-FR4"}
    assert inv.optics == {"200G-SR4": 131_072, "200G-FR4": 65_536}
    assert inv.ports_used["core"] == 256 * 128 and inv.ports_total == 1280 * 128
    # largest 1:1 astral with 128-port switches: pods*rails = R groups -> 16 pods
    assert inv.max_gpus == 16 * 16_384
    biggest = build(ClusterSpec(topology="astral", switch="test-16x200G", pods=2))
    assert (
        biggest.n_gpus
        == inventory(
            biggest, ClusterSpec(topology="astral", switch="test-16x200G", pods=2)
        ).max_gpus
    )
    short = ClusterSpec(topology="astral", switch="25.6T", pods=1, agg_core_cable_m=3000)
    with pytest.raises(InfeasibleError, match="reaches 3000 m"):
        inventory(build(short), short)
    dac = ClusterSpec(topology="astral", switch="25.6T", pods=1, media={"agg-core": "DAC-200G"})
    with pytest.raises(InfeasibleError, match=r"media\.agg-core = DAC-200G"):
        inventory(build(dac), dac)


def test_size_errors_of_other_builders() -> None:
    with pytest.raises(InfeasibleError, match="use gpus: 8,192 or 16,384"):
        build(ClusterSpec(topology="dual-plane", switch="25.6T", gpus=10_000))
    with pytest.raises(InfeasibleError, match="set gpus"):
        build(ClusterSpec(topology="rail-only"))
    with pytest.raises(InfeasibleError, match="use gpus: 8,192 or 16,384"):
        build(ClusterSpec(topology="fat-tree", switch="25.6T", gpus=12_288))


def test_astral_package_reexports() -> None:
    import starfabric.astral as astral

    assert astral.build is build and astral.ClusterSpec is ClusterSpec
    with pytest.raises(AttributeError):
        _ = astral.no_such_name  # type: ignore[attr-defined]
