"""Host launches of selective recompute's re-run modules (seer/recompute_host.py).

The counts are checked against a hand transcription of Megatron-Core core_v0.13.0's re-run code
paths; adding a re-run module never lowers a host-counted job's host seconds or step time;
full recompute and a stack whose launches are not counted do not move."""

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import make_job, predict, recompute_host, schedule
from starfabric.astral.seer.host_ops import (
    HOST_S_PER_LAUNCH_FWD,
    LAUNCHES,
    LayerLaunchSpec,
    host_seconds,
    layer_launches,
)
from starfabric.astral.seer.recompute_host import recompute_launches, rerun_units
from starfabric.astral.seer.schedule import PassCost, host_pass
from starfabric.astral.seer.te_mxfp8_host import PER_LINEAR

MLA_MOE = LayerLaunchSpec(True, mla=True, local_experts=8)
MLA_DENSE = LayerLaunchSpec(False, mla=True)
GQA_MOE = LayerLaunchSpec(True, local_experts=8)
GQA_DENSE = LayerLaunchSpec(False)


def test_mla_up_proj_is_the_transcribed_forward() -> None:
    # qkv_up_proj_and_rope_apply (multi_latent_attention.py 464-576): q_up and kv_up are
    # TELayerNormColumnParallelLinear (norm + GEMM each), the fused q RoPE works in place and
    # the fused kv RoPE writes contiguous key and value (no .contiguous() copy), and
    # CheckpointWithoutOutput restores the three discarded outputs with one copy each.
    norms, gemms, rope, restores = 2, 2, 2, 3
    assert recompute_launches(MLA_MOE, ["mla_up_proj"]) == norms + gemms + rope + restores == 9
    # Unfused RoPE: 13 launches per position part in place of the fused kernel (host_ops'
    # mla_rope_unfused, +24), the two cats building query and key, value's contiguous copy.
    unfused = replace(MLA_MOE, rope_fused=False)
    assert recompute_launches(unfused, ["mla_up_proj"]) == 9 + 24 + 2 + 1
    assert LAUNCHES["mla_rope_unfused"].fwd == 24
    # MXFP8: the two re-run TE linears' quantize / zero fills / swizzles, by TE stage.
    for stage, (fwd, _) in PER_LINEAR.items():
        assert (
            recompute_launches(replace(MLA_MOE, mxfp8_stage=stage), ["mla_up_proj"]) == 9 + 2 * fwd
        )
    assert recompute_launches(replace(MLA_MOE, mxfp8_stage="per_tensor"), ["mla_up_proj"]) == 19
    # No MLA, no up-projection to re-run.
    assert recompute_launches(GQA_MOE, ["mla_up_proj"]) == 0


def test_norms_only_where_they_are_their_own_module() -> None:
    # TE norm kernel + the restore copy per re-run norm. The standard attention's input norm is
    # fused into linear_qkv and a dense layer's pre-MLP norm into linear_fc1 (IdentityOp in
    # gpt_layer_specs): MLA's input norm and a MoE layer's pre-MLP norm are TENorm modules.
    assert recompute_launches(GQA_DENSE, ["layernorm"]) == 0
    assert recompute_launches(GQA_MOE, ["layernorm"]) == 2
    assert recompute_launches(MLA_DENSE, ["layernorm"]) == 2
    assert recompute_launches(MLA_MOE, ["layernorm"]) == 4
    assert rerun_units(MLA_MOE, ["layernorm"]) == ["input_norm", "pre_mlp_norm"]
    # A norm is no TE linear: MXFP8 adds nothing.
    assert recompute_launches(replace(MLA_MOE, mxfp8_stage="per_tensor"), ["layernorm"]) == 4


def test_moe_act_mlp_and_core_attention() -> None:
    # moe_act: the fused weighted SwiGLU (1) + restore copy (1); unfused: host_ops'
    # swiglu_unfused chain (+3); only a MoE layer's experts have it.
    assert recompute_launches(GQA_MOE, ["moe_act"]) == 2
    assert recompute_launches(replace(GQA_MOE, swiglu_fused=False), ["moe_act"]) == 2 + 3
    assert recompute_launches(GQA_DENSE, ["moe_act"]) == 0
    # mlp: a dense layer's MLP.forward (fc1 all-gather, norm, GEMM; SwiGLU; fc2 GEMM,
    # reduce-scatter) and its two TE linears under MXFP8; a MoE layer's MoELayer is not re-run.
    assert recompute_launches(GQA_DENSE, ["mlp"]) == 6
    assert recompute_launches(replace(GQA_DENSE, swiglu_fused=False), ["mlp"]) == 6 + 2
    assert recompute_launches(replace(GQA_DENSE, mxfp8_stage="multi_swizzle"), ["mlp"]) == 6 + 2 * 3
    assert recompute_launches(GQA_MOE, ["mlp"]) == 0
    # core_attn: TE DotProductAttention as host_ops reads it (kernel + 2 copies).
    assert recompute_launches(GQA_DENSE, ["core_attn"]) == 3
    assert recompute_launches(MLA_MOE, ["core_attn"]) == 3
    # moe (the whole MoE layer) waits for the dispatcher inside its re-run: left out.
    assert recompute_launches(GQA_MOE, ["moe"]) == 0
    assert recompute_launches(GQA_MOE, []) == 0


def test_cuda_graphs_replay_what_sits_in_a_graphed_module() -> None:
    graphed = replace(MLA_MOE, cuda_graphs=True, mxfp8_stage="bulk_alloc")
    # attention-side units (core_attn, mla_up_proj, norms) are in the backward graph, which
    # layer_launches counts as one launch; the experts' activation is not graphed.
    assert recompute_launches(graphed, ["core_attn", "mla_up_proj", "layernorm"]) == 0
    assert recompute_launches(graphed, ["moe_act"]) == 2
    assert recompute_launches(replace(MLA_DENSE, cuda_graphs=True), ["mlp"]) == 6


def test_host_pass_with_a_rerun_is_max_over_backward_and_rerun() -> None:
    bwd = PassCost(1.0, {"ep": 0.5}, 0.0)
    rerun = PassCost(0.4, {}, 0.0)
    # host below backward + re-run: nothing exposed, though it exceeds the backward alone
    assert host_pass(bwd, 1.7, rerun) == bwd
    assert host_pass(bwd, 1.7).comm["host"] == pytest.approx(0.2)
    out = host_pass(bwd, 2.5, rerun)
    assert out.total + rerun.total == pytest.approx(2.5)
    assert out.comm["host"] == pytest.approx(0.6)
    # an empty re-run: the pass alone
    assert host_pass(bwd, 2.0, PassCost(0.0, {}, 0.0)) == host_pass(bwd, 2.0)


MLA_MODEL = {  # a small DeepSeek-V3-shaped MLA MoE model (q LoRA, dense first layer)
    "name": "mla-moe-small", "layers": 8, "hidden": 2048, "heads": 16, "kv_heads": 16,
    "head_dim": 128, "ffn_hidden": 8192, "vocab": 102400, "activation": "swiglu",
    "moe_experts": 64, "moe_topk": 6, "moe_ffn_hidden": 1024, "moe_shared_experts": 1,
    "moe_dense_layers": 1, "q_lora_rank": 768, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}  # fmt: skip
MODULES = ("core_attn", "layernorm", "mla_up_proj", "moe_act", "moe", "mlp")


def _job(host: bool, recompute: str, modules: tuple[str, ...], **ex: Any) -> Any:
    base = {"global_batch": 64, "seq_len": 2048, "micro_batch": 1, "tp": 1, "pp": 2,
            "ep": 8, "etp": 1, "moe_dispatcher": "alltoall", "host_launches": host,
            "recompute": recompute, "recompute_modules": modules}  # fmt: skip
    return make_job(MLA_MODEL, {**base, **ex}, {"gpu": "H100", "gpus": 16, "gpus_per_node": 8})


def _host(job: Any, moe: bool) -> tuple[float, ...]:
    """`schedule.piece_host_s` of one of `job`'s layers, on the layout Seer resolves."""
    return schedule.piece_host_s(job.model, job.execution, predict(job).layout, moe)


def _spec(job: Any) -> LayerLaunchSpec:
    return schedule._launch_spec(job.model, job.execution, predict(job).layout, True)


def _host_s(job: Any) -> float:
    return sum(_host(job, True)) + sum(_host(job, False))


@settings(max_examples=12, deadline=None)
@given(st.sets(st.sampled_from(MODULES), max_size=4), st.sampled_from(MODULES))
def test_adding_a_module_never_lowers_host_time_or_step(base: set[str], extra: str) -> None:
    before = _job(True, "selective", tuple(sorted(base)))
    after = _job(True, "selective", tuple(sorted(base | {extra})))
    assert _host_s(after) >= _host_s(before)
    assert predict(after).iteration_s >= predict(before).iteration_s - 1e-12


def test_a_host_bound_selective_layer_pays_its_rerun() -> None:
    job = _job(True, "selective", ("mla_up_proj",))
    hf, hb = host_seconds(layer_launches(_spec(job)))
    assert _host(job, True) == (hf, hb, 9 * HOST_S_PER_LAUNCH_FWD)
    # This small layer is host-bound: the re-run's host time lengthens the step.
    none = predict(_job(True, "selective", ()))
    up = predict(job)
    assert up.iteration_s > none.iteration_s
    assert up.breakdown["host"] > none.breakdown["host"]


def test_full_recompute_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job(True, "full", ("mla_up_proj", "layernorm"))
    hf, hb = host_seconds(layer_launches(_spec(job)))
    # the re-run is the whole forward, whatever recompute_modules says
    assert _host(job, True) == (hf, hb, hf)
    base = predict(job).iteration_s
    monkeypatch.setattr(recompute_host, "recompute_launches", lambda *_: 10**6)
    assert predict(job).iteration_s == base
    assert predict(_job(True, "full", ())).iteration_s == base


def test_stack_without_host_launches_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job(False, "selective", ("mla_up_proj", "moe_act", "layernorm"))
    assert _host(job, True) == (0.0, 0.0, 0.0)
    base = predict(job)
    monkeypatch.setattr(recompute_host, "recompute_launches", lambda *_: 10**6)
    again = predict(job)
    assert again.iteration_s == base.iteration_s and again.breakdown.get("host", 0.0) == 0.0
