import numpy as np
import pytest

from starfabric.astral.netsim.failures import LinkEvent, run_with_failures
from starfabric.astral.topology import LINK_TOR_AGG, ClusterSpec, build
from starfabric.errors import InfeasibleError

TOPO = build(
    ClusterSpec(topology="astral", switch="25.6T", port_speed="400G", nic="CX7-400G", pods=1)
)


def _flows(
    n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    src = rng.integers(0, TOPO.n_gpus, n)
    dst = (src + 8 * 32 * rng.integers(1, 8, n)) % TOPO.n_gpus  # same rail, another ToR: via an Agg
    return src, dst, np.full(n, 1e8), rng.integers(0, 2**63, n).astype(np.uint64)


def test_failed_uplink_mid_run_reroutes_and_every_flow_completes() -> None:
    rng = np.random.default_rng(5)
    src, dst, size, h = _flows(400, rng)
    healthy, _ = run_with_failures(TOPO, src, dst, size, h, [])
    # fail the busiest ToR→Agg uplink at a tenth of the healthy makespan
    lo, hi = TOPO.links_of_kind(LINK_TOR_AGG)
    busiest = lo + int(np.argmax(healthy.link_bytes[lo:hi]))
    ev = [LinkEvent(healthy.makespan_s / 10, (busiest,))]
    res, rerouted = run_with_failures(TOPO, src, dst, size, h, ev)
    assert rerouted > 0
    assert res.completed.all()
    # what crossed the dead link was sent before it failed, and only then
    assert res.link_bytes[busiest] < healthy.link_bytes[busiest]
    assert res.link_bytes[busiest] <= healthy.link_bytes[busiest] / 10 * 1.01 + 1
    # every byte still reaches its destination NIC
    np.testing.assert_allclose(res.size_bytes.sum(), size.sum())


def test_degraded_link_slows_but_keeps_its_flows() -> None:
    rng = np.random.default_rng(6)
    src, dst, size, h = _flows(200, rng)
    healthy, _ = run_with_failures(TOPO, src, dst, size, h, [])
    lo, hi = TOPO.links_of_kind(LINK_TOR_AGG)
    busiest = lo + int(np.argmax(healthy.link_bytes[lo:hi]))
    res, rerouted = run_with_failures(TOPO, src, dst, size, h, [LinkEvent(0.0, (busiest,), 40e9)])
    assert rerouted == 0 and res.completed.all()
    assert res.makespan_s > healthy.makespan_s
    np.testing.assert_allclose(res.link_bytes[busiest], healthy.link_bytes[busiest])


def test_a_gpu_cut_off_is_reported() -> None:
    src, dst = np.array([0]), np.array([8 * 32])
    # fail every link out of GPU 0: nothing can carry its flow
    lo = TOPO.out_ptr[0]
    links = tuple(int(x) for x in TOPO.out_links[lo : TOPO.out_ptr[1]])
    with pytest.raises(InfeasibleError, match="no path left"):
        run_with_failures(
            TOPO, src, dst, np.array([1e6]), np.array([1], np.uint64), [LinkEvent(0.0, links)]
        )
