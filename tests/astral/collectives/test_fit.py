"""Fit on all_reduce, predict the other collectives measured on the same hardware (issue 5)."""

from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.collectives.fit import (
    FIT_MIN_BYTES,
    FabricFit,
    FabricParams,
    FabricSpec,
    fabric_for,
    fabric_topology,
    fit_fabric,
    fit_verdict,
    format_table,
    nccl_plan,
    pipelined,
    predict_run,
    sweep,
)
from starfabric.astral.nccltests import parse_nccl_tests
from starfabric.astral.topology import LINK_NIC
from starfabric.errors import ConfigError, DataError

DATA = Path(__file__).parents[2] / "data" / "nccl_tests"
SB = "superbench_1node_8xa100_40gb_nccl_"
A3 = "gcp_a3mega_2node_h100_tcpxo_"
V100 = "nccl-tests_issue78_8node_v100_ib100g_"
HARDWARE = {
    SB + "allreduce.log": [SB + "allgather.log", SB + "reducescatter.log", SB + "alltoall.log"],
    A3 + "all_reduce.txt": [A3 + "all_gather.txt"],
    V100 + "all_reduce.txt": [V100 + "alltoall.txt"],
}
# Measured busbw is the mean of nccl-tests' out-of-place and in-place columns (as its "Avg bus
# bandwidth" line): on 8xA100 the out-of-place all_gather at 128 MiB alone reads 168 GB/s, a dip
# between 155 (64 MiB) and 197 (256 MiB) that its in-place twin (179) does not share.

_FITS: dict[str, FabricFit] = {}


def _fit(ar: str) -> FabricFit:
    if ar not in _FITS:
        run = parse_nccl_tests(DATA / ar)
        _FITS[ar] = fit_fabric(fabric_for(ar), run)
        print(ar, _FITS[ar].params.describe())
    return _FITS[ar]


@pytest.mark.parametrize("ar", sorted(HARDWARE))
def test_fitted_all_reduce_curve_within_10_percent(ar: str) -> None:
    fit = _fit(ar)
    run = parse_nccl_tests(DATA / ar).at_least(FIT_MIN_BYTES)
    pred = np.array([r.busbw_gbps for r in predict_run(fit, "all_reduce", run.size_bytes)])
    err = np.abs(pred / run.busbw_mean_gbps - 1)
    assert err.max() <= 0.10, (fit.params.describe(), err)
    assert fit.max_rel_err == pytest.approx(err.max(), rel=1e-6)
    assert 0 < fit.params.nvlink_eff <= 1 and 0 < fit.params.nic_eff <= 1


def _errors(ar: str, other: str) -> dict[int, float]:
    fit = _fit(ar)
    run = parse_nccl_tests(DATA / other).at_least(FIT_MIN_BYTES)
    rows = predict_run(fit, run.collective, run.size_bytes)
    return {
        int(s): r.busbw_gbps / m - 1
        for s, r, m in zip(run.size_bytes, rows, run.busbw_mean_gbps, strict=True)
    }


@pytest.mark.parametrize(
    ("ar", "other"), [(ar, o) for ar, os in HARDWARE.items() if not ar.startswith(V100) for o in os]
)
def test_other_collectives_predicted_within_15_percent(ar: str, other: str) -> None:
    err = _errors(ar, other)
    assert all(abs(e) <= 0.15 for e in err.values()), (_fit(ar).params.describe(), err)


def test_busbw_mean_averages_both_columns() -> None:
    run = parse_nccl_tests(DATA / (SB + "allgather.log")).at_least(128 * 2**20)
    assert run.busbw_mean_gbps[0] == pytest.approx((168.12 + 178.67) / 2)
    one = parse_nccl_tests(DATA / (V100 + "alltoall.txt"))
    np.testing.assert_allclose(one.busbw_mean_gbps, (one.busbw_gbps + one.busbw_gbps_inplace) / 2)


def test_degraded_v100_alltoall_is_beyond_the_physics() -> None:
    """Issue #78's cluster: all_reduce reaches ~44% of the assumed NIC rate (4.3 GB/s busbw),
    but its alltoall (0.51 GB/s) only ~29%. A fabric model fitted on the all_reduce predicts
    what a healthy fabric at that rate would do for alltoall (+51%); the thread ("alltoall
    tests failing at 256 GPUs") reports an alltoall-specific fault the physics does not have.
    The test pins the miss so that a change of model that hides it is noticed."""
    err = _errors(V100 + "all_reduce.txt", V100 + "alltoall.txt")
    assert all(0.3 < e < 0.8 for e in err.values()), err
    assert fit_verdict(list(err.values())).startswith("anomaly: measured below")
    assert fit_verdict(list(_errors(SB + "allreduce.log", SB + "alltoall.log").values())) == "ok"


def test_two_node_tree_all_reduce_beats_the_ring_all_gather_per_nic() -> None:
    spec = fabric_for(A3)
    topo = fabric_topology(spec)
    p = FabricParams(nvlink_eff=1.0, nic_eff=1.0)
    node_nic = spec.gpus_per_node * spec.nic_gbit_s / 8  # GB/s per node
    ar = sweep(topo, "all_reduce", 16, [2**32], p)[0].busbw_gbps
    ag = sweep(topo, "all_gather", 16, [2**32], p)[0].busbw_gbps
    assert ar / node_nic > 1.7  # double binary tree: ~2x the per-node NIC rate
    assert ag / node_nic == pytest.approx(1.0, rel=0.02)  # rail rings: the per-node rate


def test_rail_rings_use_every_nic_once_per_direction() -> None:
    spec = fabric_for(A3)
    topo = fabric_topology(spec)
    plan = nccl_plan("all_gather", 16, 2**30, 8)
    (step,) = plan.steps
    cross = step.src // 8 != step.dst // 8
    assert (step.src[cross] % 8 == step.dst[cross] % 8).all()  # rail-matched crossings
    assert sorted(step.src[cross].tolist()) == list(range(16))  # each GPU's NIC once
    lo, hi = topo.links_of_kind(LINK_NIC)
    assert hi - lo == 2 * 16


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "alltoall"])
def test_pipelining_keeps_each_ranks_bytes(op: str) -> None:
    plan = nccl_plan(op, 32, 2**28, 8)
    np.testing.assert_allclose(
        pipelined(plan).bytes_sent_per_rank(), plan.bytes_sent_per_rank(), rtol=1e-12
    )


def test_sweep_table_is_nccl_tests_shaped_and_monotone() -> None:
    topo = fabric_topology(fabric_for(SB))
    rows = sweep(topo, "reduce_scatter", 8, 2 ** np.arange(20, 31, 2), FabricParams())
    busbw = [r.busbw_gbps for r in rows]
    assert busbw == sorted(busbw)
    for r in rows:
        assert r.algbw_gbps == pytest.approx(r.size_bytes / r.time_us / 1e3)
    text = format_table(rows)
    assert text.splitlines()[0].split() == ["size", "time", "algbw", "busbw"]
    assert len(text.splitlines()) == 2 + len(rows)


def test_bad_inputs_are_named() -> None:
    topo = fabric_topology(fabric_for(SB))
    with pytest.raises(ConfigError, match="op 'bcast'"):
        sweep(topo, "bcast", 8, [2**20])
    with pytest.raises(ConfigError, match="gpus = 9"):
        sweep(topo, "all_reduce", 9, [2**20])
    with pytest.raises(ConfigError, match="nic_eff"):
        sweep(topo, "all_reduce", 8, [2**20], FabricParams(nic_eff=1.5))
    with pytest.raises(DataError, match="all_reduce log"):
        fit_fabric(fabric_for(SB), parse_nccl_tests(DATA / (SB + "allgather.log")))
    with pytest.raises(DataError, match="ranks"):
        fit_fabric(fabric_for(A3), parse_nccl_tests(DATA / (SB + "allreduce.log")))
    with pytest.raises(DataError, match="no known hardware"):
        fabric_for("aws_p5_2node_h100_efa_all_reduce.txt")
    with pytest.raises(ValueError, match="nodes"):
        FabricSpec(name="x", gpu="A100", nodes=0, nvlink_gbyte_s=300, nic_gbit_s=200)
