"""Megatron-Core's EP all-to-all overlap as its combined 1F1B schedules it (`ep_overlap`,
NVIDIA/Megatron-LM core_v0.14.0-core_v0.17.0: model_chunk_schedule_plan.py,
combined_1f1b.py, schedules.py)."""

import numpy as np
import pytest

from starfabric.astral.seer import ep_overlap
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.predict import make_job, predict
from starfabric.astral.seer.schedule import schedule_order
from starfabric.astral.seer.validate import _framework

# PR NVIDIA/Megatron-LM#6311's benchmark: DeepSeek-V3 shape at 14 layers, MTP 1, 64 H100,
# TP1 PP4 EP16, layout "Ett|(tt|)*6mL" (VPP 2), alltoall dispatcher, seq 2048, MBS 1, GBS 256.
PR6311 = {
    "global_batch": 256, "seq_len": 2048, "micro_batch": 1, "precision": "bf16", "tp": 1,
    "pp": 4, "vpp": 2, "cp": 1, "ep": 16, "zero": 1, "moe_dispatcher": "alltoall",
    "moe_load_balance": "forced", "pipeline_layers": [2, 2, 2, 2, 2, 2, 2, 0],
}  # fmt: skip
SYSTEM = {"gpu": "H100-SXM", "gpus": 64, "gpus_per_node": 8}


def _proxy() -> object:
    return load_model("deepseek-v3").model_copy(
        update={"layers": 14, "moe_dense_layers": 1, "mtp_layers": 1}
    )


def test_without_transfers_the_step_is_the_compute_in_stream_order() -> None:
    fwd, bwd = [1.0, 0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.5, 1.0, 0.0, 3.0]
    step, beside, shared = ep_overlap.pair_step(fwd, bwd, delay_wgrad=False)
    assert step == pytest.approx(8.5)
    assert beside == shared == 0.0


def test_without_compute_the_transfers_run_one_after_another_on_their_stream() -> None:
    fwd, bwd = [0.0, 1.0, 0.0, 2.0, 0.0], [0.0, 0.5, 0.0, 0.0, 1.5, 0.0]
    step, _, _ = ep_overlap.pair_step(fwd, bwd, delay_wgrad=False)
    assert step == pytest.approx(5.0)


def test_each_transfer_hides_behind_its_named_partner_only() -> None:
    # combine_bwd (2) is longer than attn_fwd (1): the mlp backward waits for it, so 1 s of
    # it is exposed although the step has plenty of compute elsewhere.
    fwd, bwd = [1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 2.0, 1.0, 1.0, 0.0, 4.0]
    step, _, _ = ep_overlap.pair_step(fwd, bwd, delay_wgrad=False)
    assert step == pytest.approx(2.0 + 1.0 + 1.0 + 1.0 + 4.0)


def test_the_combine_nodes_own_compute_gains_nothing_beside_other_compute() -> None:
    # unpermute (0.5) on the communication stream beside the attention backward (3)
    fwd, bwd = [1.0, 0.0, 1.0, 0.0, 0.5], [0.0, 0.0, 1.0, 0.0, 0.0, 3.0]
    step, beside, shared = ep_overlap.pair_step(fwd, bwd, delay_wgrad=False)
    assert step == pytest.approx(6.0) and shared == pytest.approx(0.5) and beside == 0.0


def test_delayed_wgrad_lets_the_dispatch_backward_start_after_the_dgrad() -> None:
    fwd, bwd = [1.0, 2.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 3.0, 2.0, 1.0]
    plain, _, _ = ep_overlap.pair_step(fwd, bwd, delay_wgrad=False)
    delayed, _, _ = ep_overlap.pair_step(fwd, bwd, delay_wgrad=True)
    assert delayed < plain


@pytest.mark.parametrize(("p", "v", "m"), [(4, 2, 8), (8, 4, 16), (2, 3, 6)])
def test_warm_up_and_cool_down_passes_have_no_partner(p: int, v: int, m: int) -> None:
    is_fwd, _, _ = schedule_order(p, v, m, extra_warm=1)
    solo = ep_overlap.solo_ops(is_fwd, p)
    for s in range(p):
        # schedules.py get_pp_rank_microbatches: (p - s - 1) * 2 + (v - 1) * p, plus one
        # with the EP overlap on
        warm = min((p - s - 1) * 2 + (v - 1) * p + 1, m * v)
        assert solo[s, :warm].all() and (is_fwd[s, :warm] == 1).all()
        assert solo[s, -warm:].all() and (is_fwd[s, -warm:] == 0).all()
        assert solo[s].sum() == 2 * warm


def test_without_pipelining_only_the_first_forward_and_last_backward_run_alone() -> None:
    is_fwd, _, _ = schedule_order(1, 1, 5)
    solo = ep_overlap.solo_ops(is_fwd, 1)
    assert solo[0].tolist() == [1] + [0] * 8 + [1]


def test_plain_1f1b_with_pipelining_has_no_combined_schedule() -> None:
    assert not ep_overlap.runs_megatron_overlap(pp=4, vpp=1)
    assert ep_overlap.runs_megatron_overlap(pp=4, vpp=2)
    assert ep_overlap.runs_megatron_overlap(pp=1, vpp=1)
    ex = {**PR6311, "vpp": 1, "pipeline_layers": [4, 4, 3, 3]}
    off = predict(make_job(_proxy(), ex, SYSTEM)).iteration_s
    on = predict(make_job(_proxy(), {**ex, "ep_comm_overlap": True}, SYSTEM)).iteration_s
    assert on == pytest.approx(off)


def test_overlap_hides_part_of_the_all_to_all_and_the_replay_keeps_its_own() -> None:
    """PR #6311/#6429 (full recompute on the overlap path, a later dev branch): the recompute's
    segment replay runs alone, its all-to-all exposed; overlap still gains (+7.7-7.8% there)."""
    ex = {**PR6311, "recompute": "full"}
    off = predict(make_job(_proxy(), ex, SYSTEM))
    on = predict(make_job(_proxy(), {**ex, "ep_comm_overlap": True}, SYSTEM))
    assert on.breakdown["recompute"] == pytest.approx(off.breakdown["recompute"])
    assert 0 < on.breakdown["ep"] < off.breakdown["ep"]
    assert on.iteration_s < off.iteration_s


@pytest.mark.parametrize(
    ("framework", "on"),
    [
        ("Megatron-Core (2025; DeepEP; A2A_OVERLAP=0)", False),
        ("Megatron-Core (2025; DeepEP; A2A_OVERLAP=1)", True),
        ("Megatron-Core moe_dev (2025; DeepEP; EP a2a overlap with 1F1B)", True),
    ],
)
def test_the_model_zoo_switch_is_read_as_stated(framework: str, on: bool) -> None:
    assert _framework({"framework": framework})["ep_comm_overlap"] is on


def test_delay_wgrad_is_read_only_with_the_overlap_and_not_when_stated_off() -> None:
    fw = "Megatron-Core (EP a2a overlap)"
    assert _framework({"framework": fw, "notes": "--delay-wgrad-compute"})["ep_delay_wgrad"]
    assert not _framework({"framework": fw, "notes": "delay_wgrad off"})["ep_delay_wgrad"]
    assert not _framework({"framework": "Megatron-Core", "notes": "--delay-wgrad-compute"})[
        "ep_delay_wgrad"
    ]
    _ = np


def _megatron_pair_ep_exposed(ex: dict[str, object], costs_ex: dict[str, object]) -> float:
    """EP all-to-all seconds one forward+backward MoE pair leaves exposed under the overlap:
    operator times from `costs_ex`, the SM share of the communication kernels from `ex`."""
    from starfabric.astral.seer import cost, ops
    from starfabric.astral.seer.efficiency import efficiency_for
    from starfabric.astral.seer.parallel import resolve_layout

    def ctx_of(e: dict[str, object]) -> tuple[object, object, cost.CostContext]:
        job = make_job(_proxy(), e, SYSTEM)
        lay = resolve_layout(job.model, job.execution, job.system)
        ctx = cost.make_context(job.execution, lay, efficiency_for(lay.gpu), job.system, job.model)
        return job, lay, ctx

    job, lay, base = ctx_of(costs_ex)
    _, _, ctx = ctx_of(ex)
    ft = ops.layer_ops(job.model, job.execution, lay, True)
    bt = ops.backward_of(ft)
    fc, bc = cost.op_costs(ft, base), cost.op_costs(bt, base, backward=True)
    fo, bo = cost.pair_megatron_overlap(ft, fc, bt, bc, ctx)
    return sum(float(c.exposed[np.asarray(t.group) == "ep"].sum()) for t, c in ((ft, fo), (bt, bo)))


def test_overlap_charges_the_deepep_sm_budget_the_run_sets() -> None:
    """With DeepEP the communication kernels beside the overlapped compute are DeepEP's, on
    `deepep_num_sms` SMs (deepep_sm_budget), not the fixed cost.EP_COMM_SMS; NCCL's
    all-to-all dispatcher is not DeepEP and keeps EP_COMM_SMS whatever the budget says."""
    deepep = {**PR6311, "ep_comm_overlap": True, "moe_dispatcher": "deepep"}
    default = _megatron_pair_ep_exposed(deepep, deepep)
    wide = _megatron_pair_ep_exposed({**deepep, "deepep_num_sms": 48}, deepep)
    assert wide > default > 0
    nccl = {**PR6311, "ep_comm_overlap": True}
    assert _megatron_pair_ep_exposed({**nccl, "deepep_num_sms": 48}, nccl) == pytest.approx(
        _megatron_pair_ep_exposed(nccl, nccl)
    )
