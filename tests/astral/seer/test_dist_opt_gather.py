"""Megatron-LM's distributed-optimizer parameter all-gather in the grad buffer's dtype
(seer/dist_opt_gather.py), checked against the code it transcribes: before NVIDIA/Megatron-LM
57bfa7ca (2022-09-30) `gather_model_params` all-gathers the DDP grad buffer, which is FP32 under
BF16 (`arguments.py` forces accumulate_allreduce_grads_in_fp32 for bf16), so the gather moves
4 bytes per parameter instead of the 2 of a BF16 parameter gather."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.comm import formula_comm
from starfabric.astral.seer.dist_opt_gather import (
    PARAM_BYTES,
    PARAM_DTYPE_GATHER_MONTH,
    gather_bytes_per_param,
    row_gather_dtype,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.schedule import grad_bytes, stage_params


def test_bytes_per_parameter_follow_the_dtypes() -> None:
    # BF16 run: the grad buffer is FP32 (4 B); the parameters are BF16 (2 B).
    assert gather_bytes_per_param("grad", 4.0) == 4.0
    assert gather_bytes_per_param("param", 4.0) == PARAM_BYTES == 2.0
    # An FP16 run without FP32 accumulation has a 16-bit grad buffer: nothing changes.
    assert gather_bytes_per_param("grad", 2.0) == 2.0


STARCODER_ZERO_CELL = (
    "distributed optimizer (--use-distributed-optimizer in the launch script); parameters "
    "all-gathered in the fp32 grad buffer's dtype (the fork's megatron/optimizer/"
    "distrib_optimizer.py gather_model_params @c988cf25, before upstream 57bfa7ca)"
)


@pytest.mark.parametrize(
    ("framework", "zero_cell", "want"),
    [
        ("Megatron-LM (BigCode fork, 2023)", STARCODER_ZERO_CELL, "grad"),
        ("Megatron-LM", "distributed optimizer; all-gather in grad dtype", "grad"),
        ("Megatron-LM", "distributed optimizer; param all-gather not in fp32", None),
        # dated plain Megatron-LM with its distributed optimizer: the release decides
        ("Megatron-LM 2022-06", "distributed optimizer", "grad"),
        ("Megatron-LM 2022-09 (--use-distributed-optimizer)", "", "grad"),
        ("Megatron-LM 2022-10", "distributed optimizer", None),
        ("Megatron-LM 2023-05", "distributed optimizer", None),
        ("Megatron-LM 2022-06", "ZeRO-1", None),  # no distributed optimizer named
        ("Megatron-LM 2022-06", "no distributed optimizer", None),
        ("Megatron-Core 2022-06", "distributed optimizer", None),
        ("NeMo (Megatron-LM 2022-06)", "distributed optimizer", None),
        ("Megatron-LM", "distributed optimizer", None),  # undated: today's gather
        ("DeepSpeed ZeRO-1 (2022-06)", "ZeRO-1", None),
        # the gather's own dtype stated, not an FP32 mention elsewhere in the clause
        ("Megatron-LM", "distributed optimizer; all-gather of parameters in fp32", "grad"),
        ("Megatron-LM", "distributed optimizer; all-gather overlapped, grads in fp32", None),
        ("Megatron-LM", "distributed optimizer (all-gather of bf16 params; fp32 main grads)", None),
        ("Megatron-LM", "all-gather of bf16 params with fp32 master weights", None),
    ],
)
def test_reader(framework: str, zero_cell: str, want: str | None) -> None:
    got = row_gather_dtype(framework, zero_cell, "")
    assert (got[0] if got else None) == want


def test_the_release_boundary_is_the_commit_month() -> None:
    """The month before PARAM_DTYPE_GATHER_MONTH reads the grad-buffer gather, that month not
    (57bfa7ca merged 2022-09-30)."""
    y, m = PARAM_DTYPE_GATHER_MONTH
    before = f"{y}-{m - 1:02d}" if m > 1 else f"{y - 1}-12"
    assert row_gather_dtype(f"Megatron-LM {before}", "distributed optimizer", "")
    assert row_gather_dtype(f"Megatron-LM {y}-{m:02d}", "distributed optimizer", "") is None


def _job(dtype: str) -> dict[str, object]:
    # 32 A100 on 4 nodes, TP 8 inside a node, DP 4 across nodes over p4d's 50 Gb/s per GPU;
    # Megatron-LM's distributed optimizer without overlapped gather (plain Megatron-LM 2022).
    return {
        "global_batch": 64, "seq_len": 2048, "tp": 8, "pp": 1, "micro_batch": 1,
        "precision": "bf16", "zero": 1, "overlap_grad_reduce": False,
        "overlap_param_gather": False, "param_gather_dtype": dtype,
    }  # fmt: skip


SYSTEM = {"gpu": "A100", "gpus": 32, "gpus_per_node": 8, "nic_bandwidth": "50Gbps"}


def test_iteration_grows_by_the_second_half_of_the_gather() -> None:
    """Differential: the grad-dtype gather costs exactly one all-gather of the rank's
    parameters at 4 B instead of 2 B on the DP group; nothing else in the step moves."""
    model = load_model("llama-3.1-8b")
    p = {d: predict(make_job("llama-3.1-8b", _job(d), SYSTEM)) for d in ("param", "grad")}
    ex, lay = p["param"].job.execution, p["param"].layout
    comm = formula_comm(ex, lay, efficiency_for(lay.gpu, {}))
    dense = stage_params(model, lay)[0].dense
    assert grad_bytes(ex) == 4.0
    want = comm.time("all_gather", dense * 4.0, "dp") - comm.time("all_gather", dense * 2.0, "dp")
    assert want > 0
    got = p["grad"].iteration_s - p["param"].iteration_s
    assert got == pytest.approx(want, rel=1e-6)
    for k in ("compute", "recompute", "tp", "pp", "bubble"):
        assert p["grad"].breakdown[k] == pytest.approx(p["param"].breakdown[k])


@settings(max_examples=15, deadline=None)
@given(dp_nodes=st.sampled_from([2, 4, 8]), tp=st.sampled_from([2, 4, 8]))
def test_grad_gather_never_faster(dp_nodes: int, tp: int) -> None:
    """Property: moving more bytes never makes the step faster, for any layout."""
    job = {**_job("param"), "tp": tp, "global_batch": 8 * dp_nodes * 8 // tp}
    sys_ = {**SYSTEM, "gpus": 8 * dp_nodes}
    t = {
        d: predict(make_job("llama-3.1-8b", {**job, "param_gather_dtype": d}, sys_)).iteration_s
        for d in ("param", "grad")
    }
    assert t["grad"] > t["param"]
