"""Hybrid ZeRO sharding (issue 32): ZeRO over a group of N DP ranks, replicated across the
DP / N groups (InternEvo zero1=N, DeepSpeed MiCS, HSDP) — parameters gathered inside the
group, each rank's gradient shard all-reduced across the replicas."""

import pytest

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.cells import zero_shard_ranks
from starfabric.astral.seer.comm import formula_comm, layout_groups
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.schedule import grad_bytes, stage_params

# A pure-DP 8B job on 128 A100 (16 nodes) with 4 x 100 Gb/s per 8-GPU node, as InternLM's.
EX = {"global_batch": 256, "seq_len": 2048, "tp": 1, "pp": 1, "cp": 1, "micro_batch": 2,
      "recompute": "none", "zero": 1, "overlap_grad_reduce": False,
      "overlap_param_gather": False}  # fmt: skip
SYS = {"gpu": "A100", "gpus": 128, "gpus_per_node": 8, "nic_bandwidth": "50G"}


@pytest.mark.parametrize(
    ("cell", "want"),
    [
        ("ZeRO-1 (zero1=8: optimizer states sharded within each 8-GPU node, replicated across nodes)", 8),
        ("ZeRO-3 (MiCS: sharded over 128 GPUs, 4 replicas)", 128),
        ("optimizer states sharded within a node", 8),
        ("distributed optimizer (ZeRO-1)", None),
        ("FSDP2 (ZeRO-3 full shard)", None),
        ("ZeRO-2 style DP (reduce-scatter/all-gather)", None),
        ("UNVERIFIED (zero1=8)", None),
    ],
)  # fmt: skip
def test_shard_group_is_read_only_where_the_cell_states_one(cell: str, want: int | None) -> None:
    assert zero_shard_ranks(cell, 8) == want


def _run(shard: int | None):  # type: ignore[no-untyped-def]
    return predict(make_job("llama-3.1-8b", {**EX, "zero_shard_ranks": shard}, SYS))


def test_hybrid_groups_are_placed_inside_and_across_nodes() -> None:
    p = _run(8)
    g = layout_groups(p.job.execution, p.layout)
    assert (g["dp_shard"].size, g["dp_shard"].nodes) == (8, 1)  # one node, NVLink
    assert (g["dp_replica"].size, g["dp_replica"].per_node) == (16, 1)  # one rank per node
    full = layout_groups(_run(None).job.execution, _run(None).layout)
    assert full["dp_shard"].size == 128 and full["dp_replica"].size == 1


def test_hybrid_gradient_sync_is_shard_reduce_scatter_plus_replica_all_reduce() -> None:
    """Without overlap the exposed DP time is exactly the two collectives plus the parameter
    all-gather inside the shard group (differential against the comm model itself)."""
    for shard in (None, 8):
        p = _run(shard)
        lay, ex = p.layout, p.job.execution
        comm = formula_comm(ex, lay, efficiency_for(lay.gpu, {}))
        params = stage_params(load_model("llama-3.1-8b"), lay)[0]
        g = params.dense * grad_bytes(ex)
        if shard is None:
            want = comm.time("reduce_scatter", g, "dp") + comm.time(
                "all_gather", 2.0 * params.dense, "dp"
            )
        else:
            want = (
                comm.time("reduce_scatter", g, "dp_shard")
                + comm.time("all_reduce", g / shard, "dp_replica")
                + comm.time("all_gather", 2.0 * params.dense, "dp_shard")
            )
        assert p.breakdown["dp"] == pytest.approx(want, rel=1e-6)


def test_hybrid_sharding_costs_network_time_and_memory() -> None:
    """Sharding inside a node sends every gradient shard across nodes as an all-reduce
    (2x the bytes of a reduce-scatter) and keeps 16x the optimizer state of sharding over all
    128 ranks; the parameter gathers stay on NVLink."""
    full, hybrid = _run(None), _run(8)
    assert hybrid.breakdown["dp"] > 1.3 * full.breakdown["dp"]
    assert hybrid.memory.optimizer == pytest.approx(16 * full.memory.optimizer, rel=1e-6)
    assert hybrid.breakdown["compute"] == pytest.approx(full.breakdown["compute"])


@pytest.mark.parametrize("shard", [128, 256, 48])
def test_a_shard_group_that_is_not_a_proper_divisor_of_dp_is_plain_zero(shard: int) -> None:
    """N >= DP, or N not dividing DP (no whole replicas): ZeRO over the whole DP group."""
    assert _run(shard).iteration_s == pytest.approx(_run(None).iteration_s, rel=1e-12)
