import numpy as np
import pytest

from starfabric.astral.collectives import alltoall, hierarchical, moe_alltoall, ring
from starfabric.astral.collectives.moe import MoEShape
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.topology import LINK_NIC, ClusterSpec, build
from starfabric.errors import InfeasibleError

# one 8K-GPU pod, 64-port switches, one 400G port per GPU: 32 hosts' rail-r GPUs share a ToR
TOPO = build(
    ClusterSpec(topology="astral", switch="25.6T", port_speed="400G", nic="CX7-400G", pods=1)
)
NIC_BPS = 400e9


def _path_latency(kind_links: int) -> float:
    lo, _ = TOPO.links_of_kind(LINK_NIC)
    return float(TOPO.link_latency_s[lo]) * kind_links


@pytest.mark.parametrize("size", [64 * 2**20, 2**30])
def test_ring_allreduce_matches_the_alpha_beta_formula(size: int) -> None:
    n = 32
    gpus = 8 * np.arange(n)  # rail 0 of hosts 0..31: one ToR, no ECMP choice, no collisions
    alpha = 5e-6
    res = run_plan(TOPO, ring("all_reduce", n, size), placement=gpus, step_latency_s=alpha)
    expected = 2 * (n - 1) / n * size * 8 / NIC_BPS + 2 * (n - 1) * (alpha + _path_latency(2))
    assert res.time_s == pytest.approx(expected, rel=0.02)
    assert res.busbw_gbps == pytest.approx(2 * (n - 1) / n * size / expected / 1e9, rel=0.02)


def test_flow_and_analytical_agree_without_sharing() -> None:
    gpus = 8 * np.arange(16)
    plan = ring("all_gather", 16, 2**28)
    a = run_plan(TOPO, plan, placement=gpus, backend="analytical")
    f = run_plan(TOPO, plan, placement=gpus, backend="flow")
    assert f.time_s == pytest.approx(a.time_s, rel=1e-9)


def test_intra_host_ring_runs_at_nvlink_speed() -> None:
    size = 2**30
    res = run_plan(TOPO, ring("all_reduce", 8, size), step_latency_s=0.0)
    nvl = 200e9 * 8  # H800 NVLink: 200 GB/s per direction
    assert res.time_s == pytest.approx(2 * 7 / 8 * size * 8 / nvl, rel=0.02)


def test_ecmp_collisions_slow_a_cross_rail_ring() -> None:
    # a flat ring over 64 hosts crosses rails through the Aggs: ECMP collisions cost time
    n, size = 512, 2**28
    plan = ring("all_reduce", n, size)
    f = run_plan(TOPO, plan, backend="flow", step_latency_s=0.0)
    ideal = 2 * (n - 1) / n * size * 8 / NIC_BPS
    assert f.time_s > ideal * 1.05
    assert f.steps[0].imbalance > 1.0
    # equal-size flows: the static equal-share estimate sees the same bottleneck
    a = run_plan(TOPO, plan, backend="analytical", step_latency_s=0.0)
    assert a.time_s == pytest.approx(f.time_s, rel=0.05)


def test_bytes_conserved_on_nics() -> None:
    plan = hierarchical("all_reduce", 64, 2**26, 8)
    res = run_plan(TOPO, plan)
    lo, hi = TOPO.links_of_kind(LINK_NIC)
    up = res.link_bytes[lo:hi:2].sum()  # GPU → ToR direction
    inter = [s for s in plan.steps if s.phase.startswith("inter")]
    assert up == pytest.approx(sum(s.total_bytes for s in inter), rel=1e-9)


def test_moe_and_alltoall_run() -> None:
    res = run_plan(TOPO, moe_alltoall(MoEShape(ranks=32, tokens_per_rank=256)))
    assert res.time_s > 0 and res.steps[0].flows > 0
    a2a = run_plan(TOPO, alltoall(64, 2**26, local=8, pxn=True))
    assert a2a.busbw_gbps > 0


def test_too_many_ranks_is_refused() -> None:
    with pytest.raises(InfeasibleError, match="does not fit"):
        run_plan(TOPO, ring("all_reduce", 2, 1e6), placement=[0, 10**6])


def test_completion_tolerance_changes_little() -> None:
    plan = alltoall(96, 2**28, local=8)
    exact = run_plan(TOPO, plan)
    approx = run_plan(TOPO, plan, rel_tol=0.02)
    assert approx.time_s == pytest.approx(exact.time_s, rel=0.02)
