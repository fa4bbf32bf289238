"""Property tests over many small builds: 1:1 tiers, valid loop-free paths, closed form = BFS."""

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from starfabric.astral.routing import path_nodes, route_flows
from starfabric.astral.topology import LINK_NIC, ClusterSpec, build
from starfabric.astral.topology.inventory import inventory
from starfabric.errors import InfeasibleError


@st.composite
def specs(draw: st.DrawFn) -> ClusterSpec:
    kind = draw(st.sampled_from(["astral", "fat-tree", "rail-only", "dual-plane"]))
    radix = draw(st.sampled_from([8, 16]))
    rails = draw(st.sampled_from([1, 2, 4]))
    nic = draw(st.sampled_from(["2x200G", "test-1x200G"]))
    dual = draw(st.booleans()) if kind != "dual-plane" else True
    size = draw(st.integers(1, 8))
    kw: dict[str, object] = {}
    if kind == "astral":
        kw["pods"] = size
    else:
        per = {
            "fat-tree": radix * radix // 8,
            "rail-only": rails * 4,
            "dual-plane": radix * radix // 4,
        }
        kw["gpus"] = size * per[kind] * (2 if nic == "test-1x200G" and kind == "fat-tree" else 1)
    return ClusterSpec(
        topology=kind,
        switch=f"test-{radix}x200G",
        gpus_per_host=rails,
        nic=nic,
        dual_tor=dual,
        **kw,  # type: ignore[arg-type]
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(spec=specs(), seed=st.integers(0, 2**31))
def test_any_feasible_build_routes_every_pair_on_shortest_paths(
    spec: ClusterSpec, seed: int
) -> None:
    try:
        topo = build(spec)
    except InfeasibleError:
        assume(False)
        return
    inv = inventory(topo, spec)
    # never oversubscribed; exactly 1:1 where every ToR is full (partly filled rails are < 1)
    assert all(v <= 1.0 for v in inv.oversubscription.values())
    if spec.topology == "astral":
        assert all(v == 1.0 for v in inv.oversubscription.values())
    if spec.dual_tor and topo.meta["nic_ports"] > 1:
        lo, hi = topo.links_of_kind(LINK_NIC)
        tors = topo.link_dst[lo:hi:2].reshape(topo.n_gpus, -1)
        assert (tors[:, 0] != tors[:, 1]).all()
    rng = np.random.default_rng(seed)
    n = 400
    s = rng.integers(0, topo.n_gpus, n)
    d = rng.integers(0, topo.n_gpus, n)
    h = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64)
    a = route_flows(topo, s, d, h, seed=seed)
    b = route_flows(topo, s, d, h, seed=seed, method="bfs")
    assert a.reachable.all() and b.reachable.all()
    assert (a.hops() == b.hops()).all()
    for i in range(n):
        p = a.path(i)
        if s[i] == d[i]:
            assert p.size == 0
            continue
        nodes = path_nodes(topo, p)
        assert nodes[0] == s[i] and nodes[-1] == d[i]
        assert (topo.link_dst[p[:-1]] == topo.link_src[p[1:]]).all()
        assert np.unique(nodes).size == nodes.size
