"""TE's MXFP8 expert path and Megatron-Core's fused router in Seer's launch table, against the
TransformerEngine code they were counted from (te_mxfp8_host docstring: c30e961^, 96ee717,
c0d2f1a; router: PR 1883, 62acae0) and NVIDIA's DeepSeek-V3 GB200 write-up (Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization @1d9edcf)."""

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import host_ops, host_segments
from starfabric.astral.seer.fp8_recipe import is_mxfp8, row_recipe
from starfabric.astral.seer.te_mxfp8_host import (
    PER_GROUPED_LAYER_PAIR,
    PER_LINEAR,
    PER_LOCAL_EXPERT,
    STAGES,
    mxfp8_stage,
)
from starfabric.astral.seer.validate import read_rows, row_setup
from starfabric.errors import StarfabricError

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"

GEMMS_PER_EXPERT = 2  # fc1, fc2 (TEGroupedMLP: two GroupedLinear)
SWIZZLES_FWD = 2  # te_general_grouped_gemm: A and B operand per GEMM (gemm.cpp 400-401)
SWIZZLES_BWD = 4  # dgrad GEMM (2 operands) + wgrad GEMM (2 operands)
QUANTIZE = 1  # one quantize kernel per tensor (transpose.cpp fused_multi_quantize loop)
ZERO_FILLS = 2  # MXFP8Quantizer::create_tensor: rowwise and columnwise scale_inv at::zeros


def test_per_tensor_path_counts_read_from_the_code() -> None:
    fwd = GEMMS_PER_EXPERT * (QUANTIZE + ZERO_FILLS + SWIZZLES_FWD)
    bwd = GEMMS_PER_EXPERT * (QUANTIZE + ZERO_FILLS + SWIZZLES_BWD)
    assert PER_LOCAL_EXPERT["per_tensor"] == (fwd, bwd) == (10, 14)
    assert PER_GROUPED_LAYER_PAIR["per_tensor"] == (0, 0)


def test_bulk_allocation_zeroes_once_per_grouped_quantize() -> None:
    # bulk_allocate_mxfp8_tensors (96ee717 cast.cpp 459/502): one at::zeros per direction
    per_expert = (
        GEMMS_PER_EXPERT * (QUANTIZE + SWIZZLES_FWD),
        GEMMS_PER_EXPERT * (QUANTIZE + SWIZZLES_BWD),
    )
    assert PER_LOCAL_EXPERT["bulk_alloc"] == per_expert == (6, 10)
    # fc1 and fc2 inputs forward, their output gradients backward, 2 fills each
    assert PER_GROUPED_LAYER_PAIR["bulk_alloc"] == (2 * ZERO_FILLS, 2 * ZERO_FILLS)


def test_multi_tensor_swizzle_is_per_operand_list() -> None:
    assert PER_LOCAL_EXPERT["multi_swizzle"] == (GEMMS_PER_EXPERT * QUANTIZE,) * 2
    assert PER_GROUPED_LAYER_PAIR["multi_swizzle"] == (
        GEMMS_PER_EXPERT * SWIZZLES_FWD,
        GEMMS_PER_EXPERT * SWIZZLES_BWD,
    )


@settings(max_examples=40, deadline=None)
@given(local=st.integers(1, 64), dispatcher=st.sampled_from(["alltoall", "deepep"]))
def test_each_fix_removes_launches(local: int, dispatcher: str) -> None:
    """Every later TE stage launches fewer kernels per layer once a layer has 2+ local experts
    (the PRs' purpose: 'reduce CPU overhead'); the BF16 count is below all of them."""
    spec = host_ops.LayerLaunchSpec(
        True, dispatcher=dispatcher, local_experts=local, shared_experts=1, mla=True
    )
    tot = [host_ops.layer_launches(replace(spec, mxfp8_stage=s)) for s in STAGES]
    bf16 = host_ops.layer_launches(spec)
    for a, b in itertools.pairwise(tot):
        if local >= 2:
            assert a.fwd + a.bwd > b.fwd + b.bwd
    assert all(t.fwd > bf16.fwd and t.bwd > bf16.bwd for t in tot)


# DeepSeek-V3 at EP 32: 8 local experts, MLA, one shared expert, BF16
DSV3_EP32 = host_ops.LayerLaunchSpec(
    True, dispatcher="alltoall", local_experts=8, shared_experts=1, mla=True
)


def test_no_stage_keeps_the_bf16_table() -> None:
    # DeepSeek-V3 at EP 32: the table's count
    got = host_ops.layer_launches(DSV3_EP32)
    assert (got.fwd, got.bwd) == (111, 116)
    segs = host_segments.launches_by_module(DSV3_EP32)
    assert sum(segs.values()) == 111


def test_segments_put_the_mxfp8_launches_with_the_experts() -> None:
    base = host_segments.launches_by_module(DSV3_EP32)
    for s in STAGES:
        got = host_segments.launches_by_module(replace(DSV3_EP32, mxfp8_stage=s))
        extra = PER_LOCAL_EXPERT[s][0] * 8 + PER_GROUPED_LAYER_PAIR[s][0]
        assert got["experts"] - base["experts"] == extra
        # the non-expert linears' quantize/swizzle launches (PER_LINEAR): MLA's five in the
        # attention segment, the shared expert's two in its own
        assert got["attention"] - base["attention"] == 5 * PER_LINEAR[s][0]
        assert got["shared_expert"] - base["shared_expert"] == 2 * PER_LINEAR[s][0]
        rest = ("experts", "attention", "shared_expert")
        assert {k: v for k, v in got.items() if k not in rest} == {
            k: v for k, v in base.items() if k not in rest
        }


def test_fused_router_count_and_the_write_up_17() -> None:
    # TopKRouter: topk_routing_with_score_function 9, compute_routing_scores_for_aux_loss 6,
    # switch_load_balancing_loss_func 4 -> one TE kernel each (router.cpp, 62acae0)
    assert host_ops.LAUNCHES["router_fused"].fwd == host_ops.LAUNCHES["router"].fwd - 19 + 3
    # write-up 2.2.1: with DeepEP "the number of kernels in the router and preprocess parts"
    # is 17: the fused router plus DeepEP's launches before the host waits
    pre = host_segments.PRE_WAIT_LAUNCHES["dispatch_deepep"]
    assert host_ops.LAUNCHES["router_fused"].fwd + pre == 17
    assert "router_fused" in host_ops.CUDA_GRAPH_MODULES


@pytest.mark.parametrize(
    ("precision", "text", "stage"),
    [
        ("MXFP8 (--fp8-recipe mxfp8)", "Transformer Engine 2.3+", "per_tensor"),
        ("MXFP8", "TE v2.6", "bulk_alloc"),
        ("MXFP8", "Transformer Engine 2.9-based", "multi_swizzle"),
        (
            "MXFP8",
            "Transformer Engine 2.3+; fused MXFP8 allocation (TE PRs 1793/1934)",
            "bulk_alloc",
        ),
        ("MXFP8", "TE PR 2019 multi-tensor swizzle", "multi_swizzle"),
        ("MXFP8", "Megatron-Core 0.15 (after PR 2019)", None),  # not a TE PR
        ("MXFP8", "Megatron-Core, alltoall", None),  # nothing stated: BF16 table
        ("FP8 (delayed scaling)", "Transformer Engine 2.3", None),  # not MXFP8
        ("BF16", "TE v2.9", None),
    ],
)
def test_stage_read_from_the_cells(precision: str, text: str, stage: str | None) -> None:
    assert mxfp8_stage(precision, [text]) == stage


def test_ladder_rows_read_their_stage() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2) if r["source_id"] == "MCORE_DSV3_GB200"}
    want = {
        "MCGB-L00": ("per_tensor", False),
        "MCGB-L01": ("bulk_alloc", False),
        "MCGB-L02": ("bulk_alloc", True),
        "MCGB-L03": ("bulk_alloc", True),
        "MCGB-L04": ("bulk_alloc", True),
        "MCGB-L12": ("multi_swizzle", True),
    }
    for rid, (stage, fused) in want.items():
        ex = row_setup(rows[rid]).execution
        assert ex["te_mxfp8_stage"] == stage, rid
        assert ex["moe_router_fusion"] is fused, rid


def test_other_rows_state_nothing() -> None:
    """No other row of development set 2 is read as an MXFP8 TE path, and only the Model Zoo
    Blackwell rows (whose model config sets `--moe-router-fusion`) as a fused router."""
    for r in read_rows(DEV2):
        if r["source_id"] == "MCORE_DSV3_GB200":
            continue
        try:
            ex = row_setup(r).execution
        except StarfabricError:  # rows the reader refuses are not this test's
            continue
        assert ex.get("te_mxfp8_stage") is None, r["row_id"]
        assert bool(ex.get("moe_router_fusion")) is r["row_id"].startswith("MZQ3-GB"), r["row_id"]


@pytest.mark.parametrize(
    ("text", "stage"),
    [
        # a negated or reverted PR is not the run's
        ("not TE PR 2019", None),
        ("without TE PRs 1793/1934", None),
        ("TE PR 2019 reverted", None),
        ("Transformer Engine 2.3+; TE PR 2019 (reverted)", "per_tensor"),
        # a release named only as the comparison is not the run's
        ("Transformer Engine 2.3, compared with TE 2.9", "per_tensor"),
        ("TE 2.3 (vs. TE 2.9 in the later states)", "per_tensor"),
        ("TE 2.6 rather than TE 2.9", "bulk_alloc"),
        ("not TE 2.9", None),
        # a reverted fix caps a newer release below its stage
        ("TE 2.9 with TE PR 2019 reverted", "bulk_alloc"),
        ("TE 2.9, TE PRs 1793/1934 reverted", "per_tensor"),
        # "reverted to X" states X, the release the run went back to
        ("reverted to TE 2.6 (2.9 regressed)", "bulk_alloc"),
        ("reverted back to Transformer Engine 2.3", "per_tensor"),
        # an affirmed mention still wins over a comparison elsewhere
        ("TE 2.9 (compared with TE 2.3)", "multi_swizzle"),
    ],
)
def test_negated_or_compared_releases_are_not_the_runs(text: str, stage: str | None) -> None:
    assert mxfp8_stage("MXFP8", [text]) == stage


@pytest.mark.parametrize(
    ("text", "stage"),
    [
        ("TransformerEngine v2.6", "bulk_alloc"),
        ("transformer_engine 2.9", "multi_swizzle"),
        ("Transformer Engine release 2.9", "multi_swizzle"),
        ("Transformer Engine version 2.5", "per_tensor"),
        ("TransformerEngine PR 2019", "multi_swizzle"),
        ("transformer_engine PRs 1793/1934", "bulk_alloc"),
    ],
)
def test_release_spellings(text: str, stage: str) -> None:
    assert mxfp8_stage("MXFP8", [text]) == stage


MXFP8_SPELLINGS = [
    "MXFP8",
    "MX-FP8",
    "fp8_mx",
    "bf16_with_mxfp8_mixed",
    "FP8 (MXFP8BlockScaling)",
    "FP8 tensorwise, not MXFP8",
    "BF16 (MXFP8 disabled)",
    "FP8 (delayed scaling)",
    "NVFP4 (MXFP8 fallback layers)",
    "FP8",
    "BF16",
]


@pytest.mark.parametrize("precision", MXFP8_SPELLINGS)
def test_mxfp8_read_as_the_fp8_recipe_reader_reads_it(precision: str) -> None:
    """One reading of "is this MXFP8" (fp8_recipe.is_mxfp8, also what sets the row's FP8
    recipe): a cell read as the MXFP8 recipe gets TE's stage, any other keeps the BF16 count."""
    mx = row_recipe(precision) == "mxfp8"
    assert is_mxfp8(precision) is mx
    assert (mxfp8_stage(precision, ["TE 2.9"]) is not None) is mx
    if precision in ("MX-FP8", "fp8_mx", "bf16_with_mxfp8_mixed"):  # Megatron-Bridge's names
        assert mxfp8_stage(precision, ["TE 2.9"]) == "multi_swizzle"


def test_mxfp8_flag_in_another_cell() -> None:
    # "FP8" with Megatron-Core's --fp8-recipe mxfp8 in the framework cell: the recipe reader
    # times the row as MXFP8, so the launch reader counts TE's MXFP8 path too
    assert mxfp8_stage("FP8", ["Megatron-Core, --fp8-recipe mxfp8, TE 2.6"]) == "bulk_alloc"
    assert mxfp8_stage("FP8", ["Megatron-Core, not --fp8-recipe mxfp8, TE 2.6"]) is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("reverted to the alltoall dispatcher", True),
        ("DeepEP off, reverting back to alltoall", True),
        ("reverted alltoall dispatcher change", False),
        ("alltoall reverted", False),
    ],
)
def test_reverted_to_states_what_the_run_went_back_to(text: str, said: bool) -> None:
    """statements.NEGATION_BEFORE's 'revert(ed)' (added for 'reverted TE PR 2019') read
    'reverted to X' as X negated, in every reader that uses `stated`."""
    import re

    from starfabric.astral.seer.statements import stated

    assert stated(re.compile(r"alltoall", re.I), text) is said
