"""TE current scaling's per-tensor amax all-reduces over TP (seer/fp8_amax_reduction.py)."""

from typing import Any

import numpy as np
import pytest

from starfabric.astral.seer import load_model, make_job, predict, resolve_layout
from starfabric.astral.seer import ops as ops_mod
from starfabric.astral.seer.fp8_amax_reduction import (
    AMAX_BYTES,
    is_amax_reduction,
    reduces_amax_over_tp,
)
from starfabric.astral.seer.ops import COMM, backward_of, layer_ops
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec

BASE: dict[str, Any] = {
    "tp": 2,
    "dp": 4,
    "global_batch": 8,
    "seq_len": 4096,
    "precision": "fp8",
    "fp8_recipe": "tensorwise",
}


def _amax_rows(model_name: str, moe: bool = False, **over: Any) -> tuple[list[int], list[int]]:
    model = load_model(model_name)
    ex = ExecutionSpec(**{**BASE, **over})
    lay = resolve_layout(model, ex, SystemSpec(gpu="H100", gpus=8))
    fwd = layer_ops(model, ex, lay, moe=moe)
    bwd = backward_of(fwd)
    rows = []
    for t in (fwd, bwd):
        idx = [i for i, n in enumerate(t.name) if is_amax_reduction(n)]
        for i in idx:
            assert t.kind[i] == COMM and t.group[i] == "tp" and t.coll[i] == "all_reduce"
            assert t.nbytes[i] == AMAX_BYTES
        rows.append(idx)
    return rows[0], rows[1]


def test_dense_layer_reduces_qkv_and_fc1_inputs_forward_and_two_gradients_backward() -> None:
    fwd, bwd = _amax_rows("llama-3.1-8b")
    assert len(fwd) == 2 and len(bwd) == 2


def test_moe_layer_reduces_only_the_attention_input() -> None:
    fwd, bwd = _amax_rows("mixtral-8x7b-v0.1", moe=True, ep=1)
    assert len(fwd) == 1 and len(bwd) == 1


def test_moe_layer_shared_experts_reduce_their_fc1_input() -> None:
    """A MoE layer's shared experts are TE column-/row-parallel linears with SP (the SP
    all-gather Seer gives them), not GroupedLinear: their FC1 input and FC2 output gradient
    reduce their amax over TP as a dense MLP's do (the module docstring's 'one per
    column-parallel input'); the routed experts still have none."""
    model = load_model("mixtral-8x7b-v0.1").model_copy(update={"moe_shared_experts": 1})
    ex = ExecutionSpec(**{**BASE, "ep": 1})
    lay = resolve_layout(model, ex, SystemSpec(gpu="H100", gpus=8))
    fwd = layer_ops(model, ex, lay, moe=True)
    names = [n for n in fwd.name if is_amax_reduction(n)]
    assert len(names) == 2 and any(n.startswith("moe.shared") for n in names)
    assert sum(is_amax_reduction(n) for n in backward_of(fwd).name) == 2


@pytest.mark.parametrize(
    "over",
    [
        {"fp8_recipe": "delayed"},
        {"fp8_recipe": "torchao_tensorwise"},
        {"precision": "bf16", "fp8_recipe": None},
        {"sp": False},
        {"tp": 1, "dp": 8},
    ],
)
def test_no_reduction_without_current_scaling_tp_and_sp(over: dict[str, Any]) -> None:
    fwd, bwd = _amax_rows("llama-3.1-8b", **over)
    assert fwd == [] and bwd == []


def test_rule() -> None:
    ex = ExecutionSpec(**BASE)
    assert reduces_amax_over_tp(ex, 2, True)
    assert not reduces_amax_over_tp(ex, 2, False)
    assert not reduces_amax_over_tp(ex, 1, True)
    assert not reduces_amax_over_tp(ExecutionSpec(**{**BASE, "fp8_recipe": "delayed"}), 2, True)


def test_reduction_is_exposed_under_tp_comm_overlap_and_adds_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ex = {**BASE, "tp_comm_overlap": True, "overlap_grad_reduce": False}
    job = make_job("llama-3.1-8b", ex, {"gpu": "H100", "gpus": 8})
    with_amax = predict(job)
    pc = with_amax.timeline.pieces["dense"]
    added = 0.0
    for t, c in ((pc.fwd_table, pc.fwd_costs), (pc.bwd_table, pc.bwd_costs)):
        idx = [i for i, n in enumerate(t.name) if is_amax_reduction(n)]
        tp_ag = [i for i, n in enumerate(t.name) if n == "attn.tp_all_gather"]
        assert len(idx) == 2
        # Not hidden behind a GEMM, unlike the overlapped activation all-gather.
        np.testing.assert_allclose(c.exposed[idx], c.time[idx])
        assert c.time[idx].min() > 0.0
        for i in tp_ag:
            assert c.exposed[i] < c.time[i]
        added += float(c.exposed[idx].sum())
    monkeypatch.setattr(ops_mod, "layout_reduces_amax", lambda ex, lay: False)
    without = predict(job)
    model = load_model("llama-3.1-8b")
    micro_batches = BASE["global_batch"] / (BASE["dp"] * job.execution.micro_batch)
    expected = added * model.layers * micro_batches
    assert with_amax.iteration_s - without.iteration_s == pytest.approx(expected, rel=1e-6)
