import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.maxmin import maxmin_reference
from starfabric.astral.netsim import Analytical, Flows, FlowSim, maxmin
from starfabric.errors import ConfigError


def _csr(paths: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(paths) + 1, np.int64)
    ptr[1:] = np.cumsum([len(p) for p in paths])
    links = np.array([x for p in paths for x in p], np.int64)
    return ptr, links


instances = st.integers(1, 6).flatmap(
    lambda n_links: st.tuples(
        st.lists(st.floats(1.0, 100.0), min_size=n_links, max_size=n_links),
        st.lists(
            st.lists(st.integers(0, n_links - 1), min_size=1, max_size=4, unique=True),
            min_size=1,
            max_size=8,
        ),
    )
)


@settings(max_examples=200, deadline=None)
@given(instances)
def test_maxmin_equals_reference(inst: tuple[list[float], list[list[int]]]) -> None:
    cap, paths = inst
    ptr, links = _csr(paths)
    fast = maxmin(ptr, links, cap)
    ref = maxmin_reference(paths, cap)
    np.testing.assert_allclose(fast, ref, rtol=1e-9)


@settings(max_examples=100, deadline=None)
@given(instances)
def test_maxmin_is_feasible_and_every_flow_has_a_bottleneck(
    inst: tuple[list[float], list[list[int]]],
) -> None:
    cap, paths = inst
    ptr, links = _csr(paths)
    rate = maxmin(ptr, links, cap)
    load = np.zeros(len(cap))
    np.add.at(load, links, np.repeat(rate, np.diff(ptr)))
    assert (load <= np.asarray(cap) * (1 + 1e-9)).all()
    for i, p in enumerate(paths):
        # a bottleneck: saturated, and no flow on it is faster than flow i
        assert any(
            load[link] >= cap[link] * (1 - 1e-9)
            and all(rate[j] <= rate[i] * (1 + 1e-9) for j, q in enumerate(paths) if link in q)
            for link in p
        )


def test_flows_sharing_one_link_finish_together() -> None:
    n, size, cap = 4, 1e9, 100e9
    sim = FlowSim([cap])
    sim.submit(Flows(np.full(n, size), np.arange(n + 1), np.zeros(n, np.int64)))
    sim.advance()
    res = sim.results()
    np.testing.assert_allclose(res.finish_s, n * size * 8 / cap)
    assert res.link_bytes[0] == pytest.approx(n * size)


def test_short_flow_leaves_and_long_flow_speeds_up() -> None:
    sim = FlowSim([8e9])  # 1 GB/s
    sim.submit(Flows(np.array([1e9, 3e9]), np.array([0, 1, 2]), np.array([0, 0])))
    sim.advance()
    fin = sim.results().finish_s
    # both at 0.5 GB/s until the short one ends at 2 s; the long one then has 2 GB left at 1 GB/s
    np.testing.assert_allclose(fin, [2.0, 4.0])


def test_dependencies_latency_and_conservation() -> None:
    cap = np.array([8e9, 8e9, 4e9])
    lat = np.array([1e-6, 2e-6, 3e-6])
    sim = FlowSim(cap, lat)
    paths = [[0, 1], [1, 2], [2]]
    ptr, links = _csr(paths)
    # flow 2 waits for flows 0 and 1
    sim.submit(
        Flows(
            np.array([1e9, 1e9, 5e8]),
            ptr,
            links,
            dep_ptr=np.array([0, 0, 0, 2]),
            dep_ids=np.array([0, 1]),
        )
    )
    sim.advance()
    res = sim.results()
    assert res.completed.all()
    assert res.start_s[2] == pytest.approx(max(res.finish_s[:2]))
    expected = np.zeros(3)
    for size, p in zip([1e9, 1e9, 5e8], paths, strict=True):
        expected[p] += size
    np.testing.assert_allclose(res.link_bytes, expected)


def test_analytical_matches_flowsim_without_sharing() -> None:
    rng = np.random.default_rng(3)
    n = 50
    cap = rng.uniform(10e9, 400e9, n)
    lat = rng.uniform(0, 5e-6, n)
    sizes = rng.uniform(1e3, 1e9, n)
    ptr, links = np.arange(n + 1), np.arange(n)
    dep_ptr = np.concatenate([[0], np.arange(n)])  # chain: flow i waits for i-1
    dep_ids = np.arange(n - 1)
    flows = Flows(sizes, ptr, links, dep_ptr=dep_ptr, dep_ids=dep_ids)
    a, f = Analytical(cap, lat), FlowSim(cap, lat)
    a.submit(flows)
    f.submit(flows)
    f.advance()
    np.testing.assert_allclose(f.results().finish_s, a.results().finish_s, rtol=1e-9)


def test_failed_link_strands_flows_until_rerouted() -> None:
    cap = np.array([8e9, 8e9, 8e9])
    sim = FlowSim(cap)
    sim.submit(Flows(np.array([2e9, 2e9]), np.array([0, 1, 2]), np.array([0, 1])))
    sim.advance(1.0)
    sim.set_capacity([0], 0.0)
    stranded = sim.stranded()
    assert list(stranded) == [0]
    sim.reroute(stranded, np.array([0, 1]), np.array([2]))
    sim.advance()
    res = sim.results()
    assert res.completed.all()
    # flow 0 sent 1 GB on link 0 in the first second, the rest on link 2
    np.testing.assert_allclose(res.link_bytes, [1e9, 2e9, 1e9])
    np.testing.assert_allclose(res.finish_s, [2.0, 2.0])


def test_degraded_link_slows_its_flows() -> None:
    sim = FlowSim([8e9])
    sim.submit(Flows(np.array([2e9]), np.array([0, 1]), np.array([0])))
    sim.advance(1.0)
    sim.set_capacity([0], 4e9)
    sim.advance()
    assert sim.results().finish_s[0] == pytest.approx(3.0)


def test_bad_paths_are_refused() -> None:
    sim = FlowSim([1e9])
    with pytest.raises(ConfigError, match="path_links"):
        sim.submit(Flows(np.array([1.0]), np.array([0, 1]), np.array([5])))
    with pytest.raises(ConfigError, match="path_ptr"):
        sim.submit(Flows(np.array([1.0]), np.array([0, 2]), np.array([0])))


def test_tolerance_bounds_error_and_saves_events() -> None:
    rng = np.random.default_rng(7)
    n_links, n_flows = 40, 400
    cap = rng.uniform(10e9, 100e9, n_links)
    paths = [
        sorted(rng.choice(n_links, size=rng.integers(1, 5), replace=False).tolist())
        for _ in range(n_flows)
    ]
    ptr, links = _csr(paths)
    sizes = rng.uniform(1e6, 1e8, n_flows)
    exact, approx = FlowSim(cap), FlowSim(cap, rel_tol=0.02)
    for sim in (exact, approx):
        sim.submit(Flows(sizes, ptr, links))
        sim.advance()
    fe, fa = exact.results().finish_s, approx.results().finish_s
    assert approx.events < exact.events
    # max-min is not monotone, so a flow may end a little early or late; the error stays small
    assert np.abs(fa / fe - 1).max() < 0.05
    assert abs(fa.max() / fe.max() - 1) < 0.02
    np.testing.assert_allclose(approx.results().link_bytes, exact.results().link_bytes, rtol=1e-9)
