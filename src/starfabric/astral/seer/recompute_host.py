"""Host launches of selective recompute's re-run modules (Megatron-Core `--recompute-modules`).

Selective recompute re-runs a module's forward inside the backward: a gradient hook
(`CheckpointWithoutOutput._recompute`) or a checkpoint function's backward
(`CheckpointFunction.backward`) calls the module's forward code again, so the host issues its
kernels a second time, on the autograd thread, before the backward that needs them. The GPU
side is priced where `ops.py` marks the re-run operators `selective`; this module counts their
launches, read from NVIDIA/Megatron-LM at core_v0.13.0 (the code the DeepSeek-V3 GB200 ladder
names, "Megatron-Core 0.13+"), unchanged in the lines below at core_v0.15.0 and core_v0.17.1
unless said. One re-run unit, forward launches (and TE linears it re-runs):

| unit | launches | TE linears | code (core_v0.13.0) |
|---|---|---|---|
| `core_attn` | 3 | 0 | `attention.py` 181-217 `_checkpointed_attention_forward`: `tensor_parallel.checkpoint` of `core_attention` (TE DotProductAttention), re-run in `CheckpointFunction.backward` (`tensor_parallel/random.py` 404-477: no copy of its own); its kernels as `host_ops.LAUNCHES["attention"]` reads them: the cuDNN kernel and 2 layout copies (MLA: the kernel and the v pad / un-pad, `mla_attention`) |
| `mla_up_proj` | 9 | 2 | `multi_latent_attention.py` 89-92 (`recompute_up_proj`), 464-576 `qkv_up_proj_and_rope_apply` under `CheckpointWithoutOutput` (578-585): `linear_q_up_proj` and `linear_kv_up_proj`, each a `TELayerNormColumnParallelLinear` when `qk_layernorm` (`gpt_layer_specs.py` 121-132, 150-151; `q_layernorm` / `kv_layernorm` are `IdentityOp`): norm + GEMM, 4; fused RoPE (`apply_rope_fusion`): `fused_apply_mla_rope_for_q` rotates q in place (`fusions/fused_mla_yarn_rope_apply.py` 234) and `fused_apply_mla_rope_for_kv` writes new contiguous key and value (587-588, 591): 2 kernels, the three `.contiguous()` (574-576) copy nothing; the restore of the three discarded outputs, `output.untyped_storage().copy_(...)` per output (`tensor_parallel/random.py` 584): 3 |
| `mla_up_proj_rope_unfused` | 27 | 0 | added to `mla_up_proj` when RoPE is unfused (517-576): `apply_rotary_pos_emb` of q's and k's position parts, each 13 launches in place of the fused kernel (`host_ops.LAUNCHES["mla_rope_unfused"]`, +24), the two `torch.cat` building query and key (563, 571) and `value.contiguous()` of the split's non-contiguous slice (575): +3 |
| `input_norm` | 2 | 0 | `transformer_layer.py` 398-406, 491-496, 514-519: the input norm under `CheckpointWithoutOutput`: its TE norm kernel and the output's restore copy; only where the norm is its own module: MLA's `input_layernorm=backend.layer_norm()` (`gpt_layer_specs.py` 138); the standard attention fuses it into `linear_qkv` (`IdentityOp`, nothing re-run) |
| `pre_mlp_norm` | 2 | 0 | `transformer_layer.py` 405-406, 571-577, 621-625: the same for the pre-MLP norm, its own module only in MoE layers (`pre_mlp_layernorm=backend.layer_norm() if num_experts else IdentityOp`, `gpt_layer_specs.py` 155, 181; the decoder block's dense layers are built with `num_experts=None`, 405-406, and fuse it into `linear_fc1`) |
| `moe_act` | 2 | 0 | `moe/experts.py` 708-711, 816-822: `TEGroupedMLP`'s `bias_act_func` under `CheckpointWithoutOutput`: the fused `weighted_bias_swiglu_impl` (one `jit_fuser` kernel, `fusions/fused_bias_swiglu.py` 44-48, as `host_ops` counts it) and the restore copy |
| `moe_act_unfused` | 3 | 0 | added to `moe_act` when `bias_activation_fusion` is off: the unfused chain, `host_ops.LAUNCHES["swiglu_unfused"]` (+3) |
| `mlp` | 6 | 2 | `transformer_layer.py` 407-410, 588-603: a dense layer's whole `MLP.forward` (`mlp.py` 123-190) under `tensor_parallel.checkpoint` (`te_checkpoint` under FP8): `linear_fc1` (`TELayerNormColumnParallelLinear`: SP all-gather, norm, GEMM), `bias_swiglu_impl` (1), `linear_fc2` (GEMM, reduce-scatter); a MoE layer's `mlp` is a `MoELayer`, not re-run (409) |
| `mlp_swiglu_unfused` | 2 | 0 | added to `mlp` when `bias_activation_fusion` is off (`host_ops.LAUNCHES["mlp_swiglu_unfused"]`) |

MLA is read with `--qk-layernorm` (DeepSeek-V3's launch scripts; without it the up
projections are plain `TEColumnParallelLinear`s and the q / kv norms `IdentityOp`), as
`host_ops.LAUNCHES["mla_attention"]` counts its q and kv norms. The collectives are counted as
`host_ops.LAUNCHES` counts them (its reading assumes sequence parallelism: the MLP's all-gather
and reduce-scatter are there at TP 1 too). Under MXFP8 with a stated TE stage each re-run TE
linear adds the forward's quantize / zero-fill / swizzle launches,
`te_mxfp8_host.PER_LINEAR[stage][0]` (the weights are FP8 already, `--fp8-param-gather`;
`CheckpointWithoutOutput(fp8=...)` re-enters `fp8_autocast`, which for MXFP8 block scaling
reduces no amax: no launch counted).

Under CUDA graphs (`host_ops.CUDA_GRAPH_MODULES`, `--cuda-graph-scope attn moe_router`) a unit
that sits inside a graphed module (`core_attn`, `mla_up_proj`, `input_norm` in the attention;
`pre_mlp_norm`, which `host_ops.LAUNCHES` counts with the attention) is replayed by the
backward graph, which `host_ops.layer_launches` already counts as one launch: it adds none.

`moe` (`--recompute-modules moe`, `moe/moe_layer.py` 115-117, 256-266: `tensor_parallel.
checkpoint` of the whole MoE layer) is left out (0): its re-run contains the dispatcher's
token-count copy and host wait (`host_ops` docstring), so it is not launches added to a backward
that never waits but a waiting segment, as full recompute's re-run forward is
(`schedule.with_host` prices that one with `host_segments`' flow shop); pricing it needs that
flow shop inside the backward, not a count. Its GPU re-run is priced (`ops.py`).

The re-run is forward code (module calls, autograd recording under `enable_grad`), priced at
`host_ops.HOST_S_PER_LAUNCH_FWD` as full recompute's re-run forward is (`schedule.piece_host_s`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from starfabric.astral.seer import te_mxfp8_host
from starfabric.astral.seer.host_ops import CUDA_GRAPH_MODULES, LAUNCHES, LayerLaunchSpec


@dataclass(frozen=True)
class Rerun:
    """One re-run unit: its forward launches, the TE linears among them (each paying
    `te_mxfp8_host.PER_LINEAR` under MXFP8), and the `host_ops.LAUNCHES` module it runs
    inside (graphed with it under CUDA graphs)."""

    launches: int
    linears: int
    owner: str


_RESTORE_COPY = 1
"""`CheckpointWithoutOutput._recompute`'s `untyped_storage().copy_` of one discarded output
(Megatron-Core core_v0.13.0 `tensor_parallel/random.py` 584)."""

RERUN: dict[str, Rerun] = {
    "core_attn": Rerun(3, 0, "attention"),
    "mla_core_attn": Rerun(3, 0, "mla_attention"),
    "mla_up_proj": Rerun(2 * 2 + 2 + 3 * _RESTORE_COPY, 2, "mla_attention"),
    "mla_up_proj_rope_unfused": Rerun(LAUNCHES["mla_rope_unfused"].fwd + 3, 0, "mla_attention"),
    "input_norm": Rerun(1 + _RESTORE_COPY, 0, "mla_attention"),
    "pre_mlp_norm": Rerun(1 + _RESTORE_COPY, 0, "attention"),
    "moe_act": Rerun(1 + _RESTORE_COPY, 0, "experts_fixed"),
    "moe_act_unfused": Rerun(LAUNCHES["swiglu_unfused"].fwd, 0, "experts_fixed"),
    "mlp": Rerun(6, 2, "dense_mlp"),
    "mlp_swiglu_unfused": Rerun(LAUNCHES["mlp_swiglu_unfused"].fwd, 0, "dense_mlp"),
}
"""Re-run units of selective recompute (module docstring's table; Megatron-Core core_v0.13.0)."""


def rerun_units(spec: LayerLaunchSpec, modules: Iterable[str]) -> list[str]:
    """The `RERUN` units one layer re-runs for `--recompute-modules modules`: what Megatron-Core
    checkpoints in that layer (MLA or not, dense or MoE, fused or unfused RoPE and SwiGLU);
    `moe` adds none (module docstring)."""
    mods = set(modules)
    units: list[str] = []
    if "core_attn" in mods:
        units.append("mla_core_attn" if spec.mla else "core_attn")
    if "mla_up_proj" in mods and spec.mla:
        units.append("mla_up_proj")
        if not spec.rope_fused:
            units.append("mla_up_proj_rope_unfused")
    if "layernorm" in mods:
        if spec.mla:
            units.append("input_norm")
        if spec.moe:
            units.append("pre_mlp_norm")
    if "moe_act" in mods and spec.moe:
        units.append("moe_act")
        if not spec.swiglu_fused:
            units.append("moe_act_unfused")
    if "mlp" in mods and not spec.moe:
        units.append("mlp")
        if not spec.swiglu_fused:
            units.append("mlp_swiglu_unfused")
    return units


def recompute_launches(spec: LayerLaunchSpec, modules: Iterable[str]) -> int:
    """Forward launches selective recompute re-issues in one layer's backward, per micro-batch:
    the `rerun_units`' kernels, plus `te_mxfp8_host.PER_LINEAR[stage][0]` per re-run TE linear
    under MXFP8; a unit inside a CUDA-graphed module adds none (the backward graph, one launch
    in `host_ops.layer_launches`, replays it)."""
    n = 0
    for name in rerun_units(spec, modules):
        unit = RERUN[name]
        if spec.cuda_graphs and unit.owner in CUDA_GRAPH_MODULES:
            continue
        n += unit.launches
        if spec.mxfp8_stage is not None:
            n += unit.linears * te_mxfp8_host.PER_LINEAR[spec.mxfp8_stage][0]
    return n


__all__ = ["RERUN", "Rerun", "recompute_launches", "rerun_units"]
