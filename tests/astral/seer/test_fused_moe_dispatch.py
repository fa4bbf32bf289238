"""Fused dispatch-compute-combine (TorchTitan DistMoE, `ExecutionSpec.moe_fused_dispatch`):
the expert all-to-all of a pass hides behind that pass's routed-expert GEMMs only, the excess
stays exposed and the GEMMs lose the SMs the transfers take (cost.EP_COMM_SMS)."""

from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.seer import cost, ops
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import make_job, predict
from starfabric.astral.seer.validate import read_rows, row_setup

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
EXECUTION = {
    "global_batch": 256, "seq_len": 4096, "micro_batch": 1, "precision": "bf16",
    "tp": 1, "pp": 1, "cp": 1, "ep": 64, "zero": 3, "recompute": "none",
}  # fmt: skip
SYSTEM = {"gpu": "GB300", "gpus": 64, "gpus_per_node": 4}


def _costs(fused: bool, backward: bool) -> tuple[ops.OpTable, cost.OpCosts, cost.CostContext]:
    job = make_job("deepseek-v3", {**EXECUTION, "moe_fused_dispatch": fused}, SYSTEM)
    lay = resolve_layout(job.model, job.execution, job.system)
    ctx = cost.make_context(job.execution, lay, efficiency_for(lay.gpu), job.system, job.model)
    t = ops.layer_ops(job.model, job.execution, lay, True)
    if backward:
        t = ops.backward_of(t)
    return t, cost.op_costs(t, ctx, backward=backward), ctx


PERMUTES = ("moe.permute", "moe.unpermute", "moe.sort", "moe.unsort")
"""Kernels the fused backend does not run (ops._moe_mlp: DistMoE takes unpermuted tokens;
the local sort of NCCL's dispatcher, expert_sort, goes with them)."""


@pytest.mark.parametrize("backward", [False, True])
def test_all_to_all_hides_behind_the_expert_gemms_of_the_same_pass(backward: bool) -> None:
    t, plain, _ = _costs(False, backward)
    tf, fused, ctx = _costs(True, backward)
    names = np.asarray(t.name)
    ep = np.asarray(t.group) == "ep"
    experts = np.array([n.startswith(cost.FUSED_EXPERT_GEMMS) for n in names])
    comm, gemm = float(plain.time[ep].sum()), float(plain.time[experts].sum())
    assert float(plain.exposed[ep].sum()) == pytest.approx(comm)  # not fused: all exposed
    hidden = min(comm, gemm)
    sm = cost.EP_COMM_SMS / ctx.eff.sms
    expected = max(0.0, comm - gemm) + hidden * sm / (1 - sm)
    ep_f = np.asarray(tf.group) == "ep"
    assert float(fused.exposed[ep_f].sum()) == pytest.approx(expected, rel=1e-9)
    assert float(fused.exposed[ep_f].sum()) < comm
    # Nothing else moves; the permutes are gone (no other operator is).
    kept = {n: float(fused.exposed[i]) for i, n in enumerate(tf.name) if not ep_f[i]}
    for i, n in enumerate(t.name):
        if ep[i]:
            continue
        if n.startswith(PERMUTES):
            assert n not in kept
        else:
            assert kept.pop(n) == pytest.approx(float(plain.exposed[i]))
    assert not kept


def test_fused_dispatch_shortens_the_iteration_by_at_most_the_all_to_all() -> None:
    plain = predict(make_job("deepseek-v3", EXECUTION, SYSTEM))
    fused = predict(make_job("deepseek-v3", {**EXECUTION, "moe_fused_dispatch": True}, SYSTEM))
    saved = plain.iteration_s - fused.iteration_s
    # At most the expert all-to-all plus the permute kernels the fused backend does not run.
    perm = 0.0
    for backward in (False, True):
        t, c, _ = _costs(False, backward)
        perm += sum(float(c.time[i]) for i, n in enumerate(t.name) if n.startswith(PERMUTES))
    moe_layers = plain.job.model.layers - plain.job.model.moe_dense_layers
    perm *= moe_layers * plain.layout.micro_batches
    assert 0 < saved <= plain.breakdown["ep"] + perm + 1e-9


def test_only_a_framework_naming_distmoe_runs_fused() -> None:
    rows = read_rows(DEV2)
    fused = {r["row_id"] for r in rows if row_setup(r).execution.get("moe_fused_dispatch")}
    assert fused == {"TTDSV3-01", "TTDSV3-02", "TTDSV3-03"}
