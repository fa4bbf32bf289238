"""DeepEP dispatch dtype per framework (seer/ep_dispatch_dtype.py): an FP8 run's forward expert
dispatch carries FP8 only where the framework quantizes before `buffer.dispatch` — DeepSeek's
own DualPipe stack (DeepSeek-V3 report section 3.3.3) — and BF16 with Megatron-Core's DeepEP
and HybridEP backends (fused_a2a.py / token_dispatcher.py, 0d389f5 through d98e8a6) and with
TorchTitan's DeepEP (5d4bdd0, b5bcd76) and DistMoE (dist_moe docs/mxfp8_execution.md
@191b73f) paths."""

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.deepep_kernels import deepep_intranode_time
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.ep_dispatch_dtype import (
    FRAMEWORK_DISPATCH_DTYPE,
    default_dispatch_dtype,
    dispatch_dtype,
)
from starfabric.astral.seer.expert_comm import DEEPEP_FP8_BYTES_PER_ELEM
from starfabric.astral.seer.fabric import Group
from starfabric.astral.seer.ops import OpTable
from starfabric.astral.seer.parallel import ExecutionSpec
from starfabric.astral.seer.validate import canonical_row, excluded_reason, read_rows, row_setup
from starfabric.errors import StarfabricError

DATA = Path(__file__).parents[2] / "data" / "published_runs"
QWEN = load_model("qwen3-235b-a22b")
EX: dict[str, Any] = {
    "global_batch": 1024, "micro_batch": 1, "seq_len": 4096, "precision": "fp8",
    "fp8_recipe": "mxfp8", "tp": 1, "pp": 2, "ep": 32, "etp": 1, "recompute": "selective",
    "moe_dispatcher": "deepep",
}  # fmt: skip


def test_the_per_framework_reading() -> None:
    """Read from code: only DeepSeek's own stack quantizes before the dispatch."""
    assert FRAMEWORK_DISPATCH_DTYPE == {
        "megatron-core deepep": "bf16",  # fused_a2a.py buffer.dispatch(x) with BF16 x
        "megatron-core hybridep": "bf16",  # asserts not fp8_dispatch
        "torchtitan deepep": "bf16",  # no FP8 argument; use_fp8_dispatch left False
        "torchtitan distmoe": "bf16",  # "Training quantizes after peer gather"
        "deepseek dualpipe": "fp8",  # "quantize the activation ... then apply dispatch"
    }
    assert default_dispatch_dtype(dualpipe=True) == "fp8"
    assert default_dispatch_dtype(dualpipe=False) == "bf16"


def test_bytes_per_token_bf16_vs_fp8() -> None:
    """DeepSeek-V3's 7,168-wide token: 14,336 B in BF16; FP8 with one fp32 scale per 128
    values (section 3.3.2's 1x128 activation tiles) is 7,168 + 56 x 4 = 7,392 B."""
    hidden = 7168
    assert hidden * DEEPEP_FP8_BYTES_PER_ELEM == 7168 + hidden // 128 * 4 == 7392
    # The DeepEP kernel time scales with those bytes (same rate and latency).
    grp = Group(size=8, per_node=8)
    nbytes, rate, frac = 4096 * 8 * hidden * 2.0, 300e9, 0.6
    lat = deepep_intranode_time(1e-30, grp, rate, frac, False)  # launch + step latency
    bf16 = deepep_intranode_time(nbytes, grp, rate, frac, False) - lat
    fp8 = deepep_intranode_time(nbytes, grp, rate, frac, True) - lat
    assert fp8 / bf16 == pytest.approx(7392 / 14336, rel=1e-6)


@pytest.mark.parametrize(
    ("update", "want"),
    [
        ({}, "bf16"),  # Megatron-Core / TorchTitan FP8 run on DeepEP
        ({"precision": "bf16", "fp8_recipe": None}, "bf16"),
        ({"moe_flex_backend": "hybridep"}, "bf16"),
        ({"moe_fused_dispatch": True}, "bf16"),  # TorchTitan DistMoE
        ({"pipeline_schedule": "dualpipe"}, "fp8"),  # DeepSeek's stack
        ({"pipeline_schedule": "dualpipe", "ep_dispatch_dtype": "bf16"}, "bf16"),
        ({"ep_dispatch_dtype": "fp8"}, "fp8"),  # stated
    ],
)
def test_the_job_states_the_dtype_or_takes_its_framework_default(
    update: dict[str, Any], want: str
) -> None:
    assert dispatch_dtype(ExecutionSpec(**{**EX, **update})) == want


@pytest.mark.parametrize(
    "update",
    [
        {"precision": "bf16", "fp8_recipe": None, "ep_dispatch_dtype": "fp8"},
        {"moe_flex_backend": "hybridep", "ep_dispatch_dtype": "fp8"},
    ],
)
def test_an_fp8_dispatch_nothing_can_send_is_refused(update: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="ep_dispatch_dtype"):
        ExecutionSpec(**{**EX, **update})


def _dispatch_s(**update: Any) -> float:
    """Seconds Seer's cost model gives one forward expert dispatch of 64 MiB (16-bit copies)
    on GB200 at EP 32 (one NVLink domain) with the DeepEP backend."""
    p = predict(make_job(QWEN, {**EX, **update}, {"gpu": "GB200", "gpus": 256,
                                                   "gpus_per_node": 4}))  # fmt: skip
    ctx = make_context(p.job.execution, p.layout, efficiency_for(p.layout.gpu, {}), None, QWEN)
    t = OpTable()
    t.comm("moe.ep_dispatch", "all_to_all", "ep", 64 * 2.0**20)
    return float(op_costs(t, ctx).time[0])


def test_megatron_core_fp8_runs_price_the_bf16_bytes() -> None:
    bf16_run = _dispatch_s(precision="bf16", fp8_recipe=None)
    assert _dispatch_s() == pytest.approx(bf16_run)  # MXFP8 Megatron-Core run: BF16 wire
    assert _dispatch_s(ep_dispatch_dtype="fp8") < bf16_run  # a framework that quantizes first


def _touched(path: Path) -> dict[str, str]:
    """Rows whose forward dispatch this mechanism prices: an FP8 MoE row that may run DeepEP
    V1's kernels (not HybridEP), with the dtype its framework sends."""
    out = {}
    for row in read_rows(path):
        if excluded_reason(row) is not None:
            continue
        try:
            st = row_setup(canonical_row(row))
        except StarfabricError:
            continue  # a row Seer cannot read (validate_all lists it as not predicted)
        ex = st.execution
        dispatchers = {d for _, cands in st.options for d in cands.get("moe_dispatcher", [])}
        if (
            st.model.is_moe
            and ex.get("precision") == "fp8"
            and "deepep" in dispatchers
            and ex.get("moe_flex_backend", "deepep") == "deepep"
        ):
            out[row["row_id"]] = default_dispatch_dtype(ex.get("pipeline_schedule") == "dualpipe")
    return out


def test_only_the_fp8_deepep_rows_are_touched() -> None:
    """Of the three row sets, the MXFP8 Megatron-Core DeepEP rows (MCGB-L03/L04) and the
    TorchTitan DistMoE rows (TTDSV3) now send BF16; DeepSeek's own run keeps FP8; the visible
    set has none (no AWS row runs DeepEP: their dispatcher is NCCL's alltoall)."""
    from starfabric.astral.seer.validate import bundled_csv

    assert _touched(bundled_csv()) == {}
    assert _touched(DATA / "development_runs.csv") == {"DSV3-01": "fp8"}
    assert _touched(DATA / "development_runs_2.csv") == {
        "MCGB-L03": "bf16", "MCGB-L04": "bf16",
        "TTDSV3-01": "bf16", "TTDSV3-02": "bf16", "TTDSV3-03": "bf16",
    }  # fmt: skip
