"""Megatron-Core's router launches by routing configuration (router_launches) and the MXFP8
launches of the non-expert TE linears (te_mxfp8_host.PER_LINEAR), against the code they were
counted from (Megatron-LM core_v0.14.0 `moe_utils.py` / `router.py`; TransformerEngine PR 1883
62acae0; `quantizer.cpp` / `gemm.cpp` at c30e961^ and c0d2f1a) and NVIDIA's DeepSeek-V3 GB200
write-up's kernel counts (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization @1d9edcf,
sections 2.1.4 and 2.2.1)."""

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from starfabric.astral.seer import host_ops, host_segments, megatron_cli, router_launches
from starfabric.astral.seer.model import ModelSpec, load_model
from starfabric.astral.seer.parallel import ExecutionSpec
from starfabric.astral.seer.predict import make_job, predict
from starfabric.astral.seer.te_mxfp8_host import PER_LINEAR, STAGES
from starfabric.astral.seer.validate import read_rows, row_setup

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
DSV3 = ("sigmoid", 8, 4, True, "seq_aux_loss")

# Megatron-LM core_v0.14.0 moe_utils.py, forward launches (16-bit logits):
SOFTMAX_TOPK = 3  # torch.topk, softmax(dtype=fp32), .type_as
SIGMOID_TOPK = 7  # .float(), sigmoid, .type_as, topk, sum, + 1e-20, div
SOFTMAX_AUX_SCORES = 1  # softmax(dtype=fp32)
SIGMOID_AUX_SCORES = 4  # sigmoid, sum, + 1e-20, div
BIAS_ROUTING = 2  # scores + expert_bias, torch.gather
BIAS_UPDATE = 2  # local_tokens_per_expert += routing_map.sum(dim=0)
GROUP_LIMITED_TOPK = 10  # group_limited_topk's kernels
PLAIN_TOPK = 1
SEQ_AUX_DIV = 1  # _apply_seq_aux_loss: / bsz

# The write-up: "the total number of kernels in the router part from 72 to 31" (2.1.4) and "the
# number of kernels in the router and preprocess parts to 17" with DeepEP (2.2.1).
WRITE_UP_UNFUSED, WRITE_UP_FUSED, WRITE_UP_DEEPEP = 72, 31, 17


def _router(fused: bool, *cfg: object) -> host_ops.Launches:
    base = host_ops.LAUNCHES["router_fused" if fused else "router"]
    mods = router_launches.router_modules(fused, *cfg)  # type: ignore[arg-type]
    return host_ops.Launches(
        base.fwd + sum(host_ops.LAUNCHES[m].fwd for m in mods),
        base.bwd + sum(host_ops.LAUNCHES[m].bwd for m in mods),
    )


def test_table_routing_keeps_the_table_count() -> None:
    for fused in (False, True):
        assert router_launches.router_modules(fused, "softmax", 0, 0, False, "aux_loss") == ()
    assert _router(False, "softmax", 0, 0, False, "aux_loss") == host_ops.Launches(28, 13)
    assert _router(True, "softmax", 0, 0, False, "aux_loss") == host_ops.Launches(12, 13)


def test_deepseek_v3_forward_count_from_the_code() -> None:
    unfused = _router(False, *DSV3)
    assert unfused.fwd == (
        28 + (SIGMOID_TOPK - SOFTMAX_TOPK) + (SIGMOID_AUX_SCORES - SOFTMAX_AUX_SCORES)
        + BIAS_ROUTING + BIAS_UPDATE + (GROUP_LIMITED_TOPK - PLAIN_TOPK) + SEQ_AUX_DIV
    )  # fmt: skip
    assert (unfused.fwd, unfused.bwd) == (49, 27)
    # TE PR 1883: the score function, bias and group selection are inside one kernel; the bias
    # update and the batch-size division stay in Python
    fused = _router(True, *DSV3)
    assert fused.fwd == 12 + BIAS_UPDATE + SEQ_AUX_DIV == 15
    assert fused.bwd == 14


def test_counts_against_the_write_up() -> None:
    unfused, fused = _router(False, *DSV3), _router(True, *DSV3)
    # forward + backward is the reading that fits 72 / 31 (within 10%); forward alone cannot
    assert abs((unfused.fwd + unfused.bwd) / WRITE_UP_UNFUSED - 1) < 0.10
    assert abs((fused.fwd + fused.bwd) / WRITE_UP_FUSED - 1) < 0.10
    assert unfused.fwd < 0.75 * WRITE_UP_UNFUSED
    # with DeepEP: the fused router's forward and 2 (layout, notify) to 5 (+ multihot map) of
    # the flex dispatcher's launches before the host waits bracket the write-up's 17
    pre = host_segments.PRE_WAIT_LAUNCHES["dispatch_deepep"]
    assert fused.fwd + 2 <= WRITE_UP_DEEPEP <= fused.fwd + pre
    # the table's routing could not reach 72 in either reading
    table = host_ops.LAUNCHES["router"]
    assert table.fwd + table.bwd < 0.6 * WRITE_UP_UNFUSED


@settings(max_examples=60, deadline=None)
@given(
    st.booleans(), st.sampled_from(["softmax", "sigmoid"]), st.integers(0, 16),
    st.integers(0, 8), st.booleans(), st.sampled_from(["aux_loss", "seq_aux_loss"]),
)  # fmt: skip
def test_router_extras_are_additive_and_captured_by_graphs(
    fused: bool, score: str, groups: int, gtopk: int, bias: bool, aux: str
) -> None:
    extra = router_launches.router_modules(fused, score, groups, gtopk, bias, aux)
    spec = host_ops.LayerLaunchSpec(
        True, dispatcher="alltoall", local_experts=8, shared_experts=1, mla=True,
        router_fused=fused,
    )  # fmt: skip
    with_extra = replace(spec, router_extra=extra)
    base = host_ops.layer_launches(spec)
    got = host_ops.layer_launches(with_extra)
    assert got.fwd - base.fwd == sum(host_ops.LAUNCHES[m].fwd for m in extra) >= 0
    assert got.bwd - base.bwd == sum(host_ops.LAUNCHES[m].bwd for m in extra) >= 0
    graphed = replace(spec, cuda_graphs=True)
    assert host_ops.layer_launches(replace(graphed, router_extra=extra)) == host_ops.layer_launches(
        graphed
    )
    segs = host_segments.launches_by_module(with_extra)
    assert sum(segs.values()) == got.fwd
    assert segs["router"] - host_segments.launches_by_module(spec)["router"] == got.fwd - base.fwd


def test_model_configs_state_the_routing() -> None:
    v3 = load_model("deepseek-v3")
    assert (v3.moe_router_score, v3.moe_router_groups, v3.moe_router_group_topk,
            v3.moe_router_expert_bias, v3.moe_router_aux_loss) == DSV3  # fmt: skip
    for name in ("mixtral-8x7b-v0.1", "qwen3-235b-a22b"):
        m = load_model(name)
        assert router_launches.router_modules(
            False, m.moe_router_score, m.moe_router_groups, m.moe_router_group_topk,
            m.moe_router_expert_bias, m.moe_router_aux_loss,
        ) == ()  # fmt: skip


def test_megatron_flags_state_the_routing() -> None:
    cmd = (
        "pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
        "--seq-length 4096 --global-batch-size 8 --bf16 --num-experts 64 --moe-router-topk 8 "
        "--moe-router-score-function sigmoid --moe-router-num-groups 8 --moe-router-group-topk 4 "
        "--moe-router-enable-expert-bias --moe-router-load-balancing-type seq_aux_loss"
    )
    m = megatron_cli.parse_megatron_command(cmd)["model"]
    assert (m["moe_router_score"], m["moe_router_groups"], m["moe_router_group_topk"],
            m["moe_router_expert_bias"], m["moe_router_aux_loss"]) == DSV3  # fmt: skip


def test_row_cells_and_recipes() -> None:
    read = router_launches.row_routing
    assert read(["sigmoid-gated shared expert"], None) == {}
    assert read(["no expert bias"], None) == {}
    assert read(["--moe-router-num-groups 8 --moe-router-group-topk 4"], None) == {
        "moe_router_groups": 8, "moe_router_group_topk": 4,
    }  # fmt: skip
    assert read(["--moe-router-num-groups 8"], None) == {}  # Megatron needs group_topk too
    assert read([], "deepseek_v3") == router_launches.DEEPSEEK_V3_ROUTING
    assert read([], "qwen3_30b_a3b") == {}


def test_rows_read_their_routing() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    for rid in ("MCGB-L00", "MCGB-L12", "AWSDSV3-MB1"):
        m = row_setup(rows[rid]).model
        assert (m.moe_router_score, m.moe_router_groups, m.moe_router_group_topk,
                m.moe_router_expert_bias, m.moe_router_aux_loss) == DSV3, rid  # fmt: skip
    m = row_setup(rows["MPF-T3-03"]).model  # Qwen2-57B-A14B: a sigmoid-gated shared expert
    assert (m.moe_router_score, m.moe_router_groups, m.moe_router_expert_bias) == (
        "softmax", 0, False,
    )  # fmt: skip


# TransformerEngine per non-expert linear: quantize 1 + scale_inv at::zeros 2 (until PR 2019) +
# the GEMM's two operand swizzles forward; backward the gradient's quantize (+2 fills) and the
# dgrad and wgrad GEMMs' swizzles (4)
def test_non_expert_linears_from_the_te_code() -> None:
    for s in STAGES:
        fills = 0 if s == "multi_swizzle" else 2
        assert PER_LINEAR[s] == (1 + fills + 2, 1 + fills + 4)


def test_mxfp8_linears_per_layer() -> None:
    for s, mla, moe in itertools.product(STAGES, (True, False), (True, False)):
        spec = host_ops.LayerLaunchSpec(
            moe, dispatcher="alltoall", local_experts=8, shared_experts=1, mla=mla
        )
        base = host_ops.layer_launches(spec)
        got = host_ops.layer_launches(replace(spec, mxfp8_stage=s))
        experts = (
            8 * host_ops.LAUNCHES[f"mxfp8_expert_{s}"].fwd
            + host_ops.LAUNCHES[f"mxfp8_layer_{s}"].fwd
            if moe
            else 0
        )
        linears = (5 if mla else 2) + 2  # attention + (shared expert or dense MLP) fc1/fc2
        assert got.fwd - base.fwd == experts + linears * PER_LINEAR[s][0]
        # CUDA graphs (attn scope) capture the attention linears' launches, not the MLP's
        g0 = host_ops.layer_launches(replace(spec, cuda_graphs=True))
        g = host_ops.layer_launches(replace(spec, cuda_graphs=True, mxfp8_stage=s))
        assert g.fwd - g0.fwd == experts + 2 * PER_LINEAR[s][0]


def test_launch_table_documents_every_module() -> None:
    """Every hand-counted module of `host_ops.LAUNCHES` (not the ones te_mxfp8_host and
    router_launches generate, documented there) has its row, with its counts, in host_ops'
    docstring table; the fused router's row says its backward is the unfused one's."""
    doc = host_ops.__doc__ or ""
    generated = (*router_launches.UNFUSED, *router_launches.FUSED)
    for name, n in host_ops.LAUNCHES.items():
        if name.startswith("mxfp8_") or name in generated:
            continue
        assert f"| {name} | {n.fwd} | {n.bwd} |" in doc, name
    fused = next(line for line in doc.splitlines() if line.startswith("| router_fused |"))
    assert "backward" in fused and str(host_ops.LAUNCHES["router"].bwd) in fused


def _iteration_s(model: str, **ex: object) -> float:
    base = {"tp": 2, "pp": 1, "global_batch": 64, "micro_batch": 1, "seq_len": 4096,
            "precision": "bf16", "host_launches": True}  # fmt: skip
    return predict(make_job(model, {**base, **ex}, {"gpu": "H100", "gpus": 16})).iteration_s


def test_router_fusion_is_a_no_op_where_there_is_no_counted_router() -> None:
    """`moe_router_fusion` on a dense model, or without `host_launches`, changes nothing and
    is accepted, as Megatron-LM accepts `--moe-router-fusion` on a dense model (the flag only
    reaches `TopKRouter`) and as the other launch-table flags (cuda_graphs, rope/swiglu fusion,
    te_mxfp8_stage) are read only with host_launches; the field's description says so."""
    dense = _iteration_s("llama-3.1-8b")
    assert _iteration_s("llama-3.1-8b", moe_router_fusion=True) == dense
    moe = {"ep": 8, "host_launches": False}
    assert _iteration_s("mixtral-8x7b-v0.1", moe_router_fusion=True, **moe) == _iteration_s(
        "mixtral-8x7b-v0.1", **moe
    )
    # with the host counted, the fused router shortens a host-bound MoE layer (short sequences)
    host = {"ep": 8, "tp": 1, "seq_len": 1024}
    assert _iteration_s("mixtral-8x7b-v0.1", moe_router_fusion=True, **host) < _iteration_s(
        "mixtral-8x7b-v0.1", **host
    )
    desc = ExecutionSpec.model_fields["moe_router_fusion"].description or ""
    assert "dense model" in desc and "host_launches" in desc


_MOE16 = dict(name="m", layers=4, hidden=1024, ffn_hidden=4096, heads=8, kv_heads=8,
              head_dim=128, vocab=32000, moe_experts=16, moe_topk=2, moe_ffn_hidden=1024)  # fmt: skip


@pytest.mark.parametrize(
    ("groups", "gtopk", "msg"),
    [
        (
            0,
            2,
            "needs moe_router_groups",
        ),  # Megatron-Core: "moe_router_num_groups must be specified"
        (3, 2, "does not divide moe_experts"),  # num_moe_experts % num_groups == 0
        (4, 8, "exceeds moe_router_groups"),  # group_topk <= num_groups
    ],
)
def test_group_limited_routing_megatron_core_refuses_is_refused(
    groups: int, gtopk: int, msg: str
) -> None:
    """Megatron-Core core_v0.14.0 TransformerConfig.__post_init__ rejects these; Seer took
    them and charged group-limited launches (or silently dropped a group top-k)."""
    with pytest.raises(ValidationError, match=msg):
        ModelSpec(**_MOE16, moe_router_groups=groups, moe_router_group_topk=gtopk)


@pytest.mark.parametrize(("groups", "gtopk"), [(4, 0), (8, 4), (16, 16), (0, 0)])
def test_group_limited_routing_megatron_core_accepts_is_accepted(groups: int, gtopk: int) -> None:
    m = ModelSpec(**_MOE16, moe_router_groups=groups, moe_router_group_topk=gtopk)
    assert (m.moe_router_groups, m.moe_router_group_topk) == (groups, gtopk)
