import dataclasses
from pathlib import Path

import pytest

from starfabric.astral.seer import load_job, make_job, predict
from starfabric.astral.seer.comm import FormulaComm, collective_time, place_group
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.simcomm import (
    GroupShape,
    SimulatedComm,
    cluster_spec,
    comm_model,
    megatron_shapes,
)
from starfabric.errors import ConfigError, InfeasibleError, InvariantError

EXAMPLES = Path(__file__).parents[3] / "examples" / "jobs"
FT = {"topology": "fat-tree", "gpus_per_host": 8, "gpu": "H100", "gpus": 4096,
      "nic": "CX7-400G", "port_speed": "400G"}  # fmt: skip
FT_RAIL = dict(FT, layout="rail")
FT_200G = dict(FT_RAIL, gpus=8192, nic="CX7-2x200G", port_speed="200G")
DP_JOB = {"global_batch": 256, "seq_len": 4096, "tp": 1, "pp": 1, "overlap_grad_reduce": False}


def _net(spec: dict) -> SimulatedComm:
    return SimulatedComm(cluster_spec(spec, 256), "flow")


def _dp(topo: dict | None) -> float:
    job = make_job("llama-3.1-8b", DP_JOB, {"gpu": "H100", "gpus": 256, "topology": topo})
    return predict(job).breakdown["dp"]


def test_shapes_follow_megatron_placement() -> None:
    shapes = megatron_shapes(tp=2, cp=2, dp=4, pp=2, ep=4, etp=1, edp=4)
    assert shapes["tp"] == GroupShape(2, 1) and shapes["cp"] == GroupShape(2, 2)
    assert shapes["dp"] == GroupShape(4, 4) and shapes["dp_cp"] == GroupShape(8, 2)
    assert shapes["pp"] == GroupShape(2, 16) and shapes["edp"] == GroupShape(4, 4)
    # the formulas' groups sit the same way: members per node agree
    for name in ("tp", "cp", "dp", "pp"):
        sh = shapes[name]
        assert place_group(sh.size, sh.stride, 8).per_node == min(sh.size, max(1, 8 // sh.stride))


def test_p2p_across_nodes_runs_at_the_nic_rate() -> None:
    net = _net(FT_RAIL)
    t = net.placed("p2p", 64e6, GroupShape(4, 64))
    assert t == pytest.approx(64e6 * 8 / 400e9, rel=0.05)
    assert net.placed("p2p", 64e6, GroupShape(1, 64)) == 0.0


def test_ring_inside_a_node_agrees_with_the_formula() -> None:
    job = load_job(EXAMPLES / "llama31_70b_dense.yaml")
    lay = resolve_layout(job.model, job.execution, job.system)
    ctx = make_context(job.execution, lay, efficiency_for(lay.gpu, {}))
    assert isinstance(ctx.comm, FormulaComm)  # no topology: the formula
    formula = collective_time("all_gather", 256e6, place_group(8, 1, 8), ctx.comm.fabric)
    sim = _net(FT_RAIL).placed("all_gather", 256e6, GroupShape(8, 1))
    assert sim == pytest.approx(formula, rel=0.5)
    assert ctx.comm.time("all_gather", 256e6, "tp") == formula


def test_cache_per_op_size_and_shape() -> None:
    net = _net(FT_RAIL)
    a = net.placed("reduce_scatter", 1e9, GroupShape(32, 8))
    assert net.placed("reduce_scatter", 1e9, GroupShape(32, 8)) == a and len(net._cache) == 1
    net.placed("reduce_scatter", 2e9, GroupShape(32, 8))
    net.placed("all_reduce", 1e9, GroupShape(32, 8))
    assert len(net._cache) == 3


def test_with_and_without_topology_same_order_of_magnitude() -> None:
    job = load_job(EXAMPLES / "llama31_70b_dense.yaml")
    base = predict(job)
    topo = predict(dataclasses.replace(job, system=job.system.model_copy(update={"topology": FT})))
    assert 0.5 < topo.iteration_s / base.iteration_s < 2.0
    for g in ("tp", "dp", "pp"):
        assert 0.2 < topo.breakdown[g] / base.breakdown[g] < 5.0
    assert topo.breakdown["dp"] != base.breakdown["dp"]  # really timed on the topology


def test_dp_time_follows_the_network() -> None:
    rail, host, slow = _dp(FT_RAIL), _dp(FT), _dp(FT_200G)
    assert 0.3 < rail / _dp(None) < 3.0
    assert host > 1.3 * rail  # host layout: rings cross ToRs and collide under ECMP
    assert slow > 1.6 * rail  # 200G ports instead of 400G


def test_errors() -> None:
    net = _net(FT_RAIL)
    with pytest.raises(ConfigError, match="unknown collective 'gossip'"):
        net.placed("gossip", 1e6, GroupShape(4, 1))
    with pytest.raises(InfeasibleError, match="does not fit the 4096-GPU topology"):
        net.placed("all_gather", 1e6, GroupShape(8, 1024))


def test_context_parallel_ring_on_the_topology() -> None:
    ex = {"global_batch": 64, "seq_len": 32768, "tp": 4, "cp": 2, "pp": 2}
    base, topo = (
        predict(make_job("llama-3.1-70b", ex, {"gpu": "H100", "gpus": 256, "topology": t}))
        for t in (None, FT_RAIL)
    )
    for g in ("tp", "cp", "pp", "dp"):
        assert 0.2 < topo.breakdown[g] / base.breakdown[g] < 5.0, g


def test_comm_model_is_chosen_by_the_topology() -> None:
    job = load_job(EXAMPLES / "llama31_70b_dense.yaml")
    lay = resolve_layout(job.model, job.execution, job.system)
    eff = efficiency_for(lay.gpu, {})
    plain = job.system.model_copy(update={"topology": None})
    formula = comm_model(job.execution, lay, eff, plain, job.model)
    assert isinstance(formula, FormulaComm)
    with pytest.raises(InvariantError, match="no parallel group 'nope'"):
        formula.time("all_gather", 1e6, "nope")
    sim = comm_model(job.execution, lay, eff, plain.model_copy(update={"topology": FT_RAIL}))
    assert isinstance(sim, SimulatedComm) and sim.moe is None
    tp = sim.shapes["tp"]
    assert sim.time("all_gather", 1e8, "tp") == sim.placed("all_gather", 1e8, tp)
    # ZeRO-3 parameter groups have no placed shape: they take the formulas
    assert sim.time("all_gather", 1e8, "fsdp_dp") == formula.time("all_gather", 1e8, "fsdp_dp")
    moe = load_job(EXAMPLES / "deepseek_v3_moe.yaml")
    mlay = resolve_layout(moe.model, moe.execution, moe.system)
    msim = comm_model(moe.execution, mlay, eff, moe.system, moe.model)
    assert isinstance(msim, SimulatedComm) and msim.moe is not None
    assert msim.moe.topk == moe.model.moe_topk and msim.shapes["ep"].size == mlay.ep


def test_hierarchical_cp_levels_are_placed_on_the_cluster() -> None:
    """Hierarchical CP's all-to-all and ring groups (cp_a2a, cp_p2p) run on the simulated
    cluster as the flat CP group does, placed as comm.layout_groups places them, not on the
    fallback formulas."""
    assert megatron_shapes(2, 8, 2, 1, 1, 1, 2, cp_a2a=4)["cp_a2a"] == GroupShape(4, 2)
    assert megatron_shapes(2, 8, 2, 1, 1, 1, 2, cp_a2a=4)["cp_p2p"] == GroupShape(2, 8)
    ex = {"global_batch": 4, "seq_len": 65536, "tp": 2, "cp": 8, "micro_batch": 1,
          "cp_algorithm": "hierarchical", "cp_a2a_size": 4}  # fmt: skip
    job = make_job("llama-3.1-8b", ex, {"gpu": "H100", "gpus": 32, "topology": FT_RAIL})
    lay = resolve_layout(job.model, job.execution, job.system)
    comm = comm_model(job.execution, lay, efficiency_for(lay.gpu, {}), job.system, job.model)
    assert isinstance(comm, SimulatedComm)
    assert comm.shapes["cp_a2a"] == GroupShape(4, 2) and comm.shapes["cp_p2p"] == GroupShape(2, 8)
    t = comm.time("p2p", 64e6, "cp_p2p")
    assert t == comm.placed("ring_p2p", 64e6, GroupShape(2, 8))
