"""seer/fused_grouped_mlp.py: TE's CuTe-DSL fused grouped MLP as a row states it, and the
passes Seer stops timing under it (the SwiGLU pass and three MXFP8 casts)."""

import csv
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.seer import fused_grouped_mlp as fgm
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for, mem_time
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.ops import GEMM, backward_of, layer_ops
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout
from starfabric.astral.seer.validate import row_setup, validate_row
from starfabric.errors import ConfigError

RUNS = Path(__file__).parents[2] / "data" / "published_runs"


@pytest.mark.parametrize(
    "cells",
    [
        ("--moe-grouped-gemm with the fused grouped MLP (USE_TE_OPS=True, "
         "NVTE_CUTEDSL_FUSED_GROUPED_MLP=1)",),
        ("use_transformer_engine_op_fuser=True", "NVTE_CUTEDSL_FUSED_GROUPED_MLP=true"),
        # TE's is_supported: int(NVTE_CUTEDSL_FUSED_GROUPED_MLP) > 0, so any positive value
        ("USE_TE_OPS=1 NVTE_CUTEDSL_FUSED_GROUPED_MLP=2",),
        ("USE_TE_OPS=True and NVTE_CUTEDSL_FUSED_GROUPED_MLP=1.",),  # the sentence ends
    ],
)  # fmt: skip
def test_the_switch_with_the_op_fuser_states_it(cells: tuple[str, ...]) -> None:
    assert fgm.stated(*cells)


@pytest.mark.parametrize(
    "cells",
    [
        ("NVTE_CUTEDSL_FUSED_GROUPED_MLP=1",),  # no op fuser: the triple is never built
        ("USE_TE_OPS=True, NVTE_CUTEDSL_FUSED_GROUPED_MLP=0",),
        ("USE_TE_OPS=True, NVTE_CUTEDSL_FUSED_GROUPED_MLP=0.5",),  # int() refuses it
        ("USE_TE_OPS=True; no NVTE_CUTEDSL_FUSED_GROUPED_MLP=1",),
        ("USE_TE_OPS=False, NVTE_CUTEDSL_FUSED_GROUPED_MLP=1",),
        (None, ""),
        # the reference of a comparison is what the run did not use (statements.compared_at)
        ("USE_TE_OPS=True; 3% slower than with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1",),
        ("USE_TE_OPS=True, compared with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1",),
        ("NVTE_CUTEDSL_FUSED_GROUPED_MLP=1", "unfused baseline, instead of USE_TE_OPS=True"),
    ],
)
def test_without_both_settings_nothing_is_stated(cells: tuple[str | None, ...]) -> None:
    assert not fgm.stated(*cells)


def _tables(fused: bool):  # type: ignore[no-untyped-def]
    model = load_model("deepseek-v3")
    ex = ExecutionSpec(
        global_batch=64, seq_len=4096, precision="fp8", fp8_recipe="mxfp8", ep=8,
        moe_fused_grouped_mlp=fused,
    )  # fmt: skip
    lay = resolve_layout(model, ex, SystemSpec(gpu="GB300", gpus=64))
    ctx = make_context(ex, lay, efficiency_for(lay.gpu), model=model)
    fwd = layer_ops(model, ex, lay, moe=True)
    return ctx, fwd, backward_of(fwd)


def test_the_swiglu_pass_is_gone_forward_and_backward() -> None:
    _, fwd, bwd = _tables(True)
    _, fwd0, bwd0 = _tables(False)
    assert "moe.expert_act" in fwd0.name and "moe.expert_act.bwd" in bwd0.name
    assert "moe.expert_act" not in fwd.name and "moe.expert_act.bwd" not in bwd.name
    assert len(fwd.name) == len(fwd0.name) - 1


def test_exactly_the_epilogue_casts_are_dropped() -> None:
    ctx, fwd, bwd = _tables(True)
    ctx0, _, _ = _tables(False)
    dropped = set()
    for table, backward in ((fwd, False), (bwd, True)):
        t1 = op_costs(table, ctx, backward=backward).time
        t0 = op_costs(table, ctx0, backward=backward).time
        a = table.arrays()
        for i, name in enumerate(table.name):
            if table.kind[i] != GEMM or name not in fgm.FUSED_CASTLESS_GEMMS:
                assert t1[i] == t0[i], name
                continue
            cast = ctx.fp8_cast_bytes * a["m"][i] * a["k"][i] * a["batch"][i]
            want = float(mem_time(np.array([cast]), ctx.hbm_bytes_per_s, ctx.eff)[0])
            assert t0[i] - t1[i] == pytest.approx(want, rel=1e-9), name
            assert want > 0
            dropped.add(name)
    assert dropped == set(fgm.FUSED_CASTLESS_GEMMS)
    # fc1's input and fc2's grad output are still quantized (separate group_quantize calls)
    names = list(fwd.name) + list(bwd.name)
    for kept in ("moe.expert_fc1", "moe.expert_fc1.wgrad", "moe.expert_fc2.dgrad"):
        assert kept in names


def test_it_needs_the_mxfp8_recipe() -> None:
    with pytest.raises(ValueError, match="moe_fused_grouped_mlp"):
        ExecutionSpec(global_batch=8, seq_len=1024, precision="fp8", moe_fused_grouped_mlp=True)
    with pytest.raises(ValueError, match="moe_fused_grouped_mlp"):
        ExecutionSpec(
            global_batch=8, seq_len=1024, precision="fp8", fp8_recipe="tensorwise",
            moe_fused_grouped_mlp=True,
        )  # fmt: skip


def _dsv3_rows() -> list[dict[str, str]]:
    with open(RUNS / "mlperf_dsv3_runs.csv") as f:
        return list(csv.DictReader(f))


def test_mlperf_dsv3_rows_read_it() -> None:
    for row in _dsv3_rows():
        assert row_setup(row).execution.get("moe_fused_grouped_mlp") is True, row["row_id"]


def test_a_bf16_row_stating_it_is_not_applied() -> None:
    row = dict(_dsv3_rows()[0])
    row["precision"] = "BF16"
    setup = row_setup(row)
    assert not setup.execution.get("moe_fused_grouped_mlp")
    assert "not applied" in str(setup.read.get("moe_fused_grouped_mlp"))


def test_a_row_with_it_is_faster_than_the_same_row_without() -> None:
    row = next(r for r in _dsv3_rows() if r["row_id"] == "MLP60-NV-GB300-0256")
    without = dict(row)
    without["framework"] = row["framework"].replace("NVTE_CUTEDSL_FUSED_GROUPED_MLP=1", "")
    assert not fgm.stated(without["framework"], without["notes"], without["precision"])
    fast, slow = validate_row(row).predicted_iter_s, validate_row(without).predicted_iter_s
    assert fast < slow * 0.99
    assert np.isfinite(fast)


@pytest.mark.parametrize(
    ("model", "why"),
    [
        (load_model("deepseek-v3").model_copy(update={"activation": "gelu"}), "SwiGLU"),
        (load_model("llama-3.1-8b"), "MoE"),
    ],
)
def test_a_job_that_te_would_not_fuse_is_refused(model, why: str) -> None:  # type: ignore[no-untyped-def]
    """TE fuses GroupedLinear -> ScaledSwiGLU -> GroupedLinear only: a job stating the fused
    grouped MLP on GELU experts or a dense model would have its casts dropped with no fusion
    (the row reader refuses it too: validate._fused_grouped_mlp), so it is a one-line error."""
    ex = ExecutionSpec(
        global_batch=64, seq_len=4096, precision="fp8", fp8_recipe="mxfp8",
        ep=8 if model.is_moe else 1, moe_fused_grouped_mlp=True,
    )  # fmt: skip
    with pytest.raises(ConfigError, match=f"moe_fused_grouped_mlp.*{why}"):
        resolve_layout(model, ex, SystemSpec(gpu="GB300", gpus=64))
