"""Host (CPU) time of a Megatron-Core transformer layer, and where it is exposed.

Eager PyTorch issues every kernel from the host: Python, the dispatcher, autograd and the
launch call cost `HOST_S_PER_LAUNCH_*` per kernel (measured from a real Kineto trace over
the annotated regions of a pass by `host_regions`). The host normally runs ahead of the GPU,
so this time is hidden unless the host as a whole is slower than the GPU. Megatron-Core's
dropless MoE dispatchers stop that: every MoE layer's forward copies the token counts to the host and waits
(`MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize` -> `d2h_event.synchronize()` at
`before_ep_alltoall` when EP > 1; the flex/DeepEP path waits for the receive counts in
`fused_a2a.py`), NVIDIA/Megatron-LM core_v0.17.1 (266f1c9). After the wait the GPU queue is
(nearly) empty, so a segment between two waits lasts at least max(host time, GPU time)
(`segment_time`; the backward, which never waits); the forward's segment is timed module by
module in `host_segments`.

`LAUNCHES` counts the GPU launches (kernels, copies, NCCL calls) per module of one layer and
one micro-batch, forward and backward, read from the core_v0.17.1 code path (BF16, TE modules,
sequence parallelism, gradient-accumulation fusion, `moe_permute_fusion` on, router unfused):

| module | forward | backward | code (core_v0.17.1) |
|---|---|---|---|
| attention | 12 | 19 | TELayerNormColumnParallelLinear (SP all-gather, norm, GEMM), fused RoPE q/k, TE DotProductAttention (cuDNN kernel + 2 layout copies), TERowParallelLinear (GEMM, reduce-scatter), bias-dropout-add, pre-MLP norm; backward: 2 GEMMs per linear, their collectives, attention/RoPE/norm backward kernels |
| qk_norm | 4 | 4 | TE RMSNorm of q and k (Qwen3's QK-norm), each on a slice of the fused QKV output, which TE copies contiguous first (TransformerEngine v2.14.1 `ops/basic/rmsnorm.py` 182: `input_.contiguous()`); backward: norm + dgamma each |
| mla_attention | 22 | 35 | `MLASelfAttention` in place of `attention`: SP all-gather, q down GEMM, q norm, q up GEMM, kv down GEMM + its TP gather, kv norm, kv up GEMM, RoPE of q and k parts, 3 cats, v pad and un-pad for cuDNN, attention kernel, proj GEMM + reduce-scatter, bias-dropout-add, pre-MLP norm |
| dense_mlp | 6 | 10 | TE fc1 (all-gather, GEMM), SwiGLU, fc2 (GEMM, reduce-scatter), bias-dropout-add |
| router | 28 | 13 | `TopKRouter.forward`: gating linear (2 casts + GEMM), forced-balance `RandomSTE` (clone, normal_), `topk_routing_with_score_function` (topk, softmax, cast, 2 zeros_like, int, 2 scatter, bool), aux loss (`compute_routing_scores_for_aux_loss` 6, token count sum + TP/CP all-reduce, `switch_load_balancing_loss_func` 4, tracker 2) |
| dispatch_alltoall | 20 | 4 | `preprocess` (routing_map sum, long, split sum, tp_ep all-gather, slice copy, 3 sums), 4 D2H copies + stream wait + event record, fused `permute` with probs (3-kernel row-id map, permute), two `all_to_all` (tokens, probs); backward: 2 all-to-alls, fused unpermute of tokens and probs |
| sort_alltoall | 5 | 4 | fused `sort_chunks_by_idxs` of tokens + probs, and the un-sort before combine (local experts > 1 only) |
| combine_alltoall | 3 | 4 | `all_to_all` back, fused `unpermute` with probs, bias-dropout-add |
| dispatch_deepep | 12 | 4 | `MoEFlexTokenDispatcher`: multihot routing map (3), DeepEP layout + notify + dispatch (3), D2H counts + event (2), fused permute by experts (4) |
| combine_deepep | 4 | 4 | fused un-permute, DeepEP combine, bias-dropout-add |
| experts_fixed | 11 | 11 | `TEGroupedMLP.forward`: two TE GroupedLinear (output alloc, side-stream event record/wait), weighted SwiGLU with probs (3) |
| experts_per_local | 2 | 4 | one cuBLAS GEMM per local expert in fc1 and fc2 (`general_grouped_gemm`), dgrad + wgrad each in backward |
| shared_expert | 6 | 10 | as dense_mlp (fc1, activation, fc2 with their collectives): one `SharedExpertMLP` of width `moe_shared_expert_intermediate_size`, however many shared experts the model card counts |
| grad_adds_attention | 0 | 2 | `DistributedDataParallel._make_backward_post_hook` (`distributed_data_parallel.py` 432-446): `param.main_grad.add_(param.grad)` for every parameter whose gradient TE does not accumulate itself — the input norm's weight (TE LayerNormLinear returns `dgamma`, `layernorm_linear.py` 979) and the pre-MLP norm's |
| grad_adds_qk_norm | 0 | 2 | the same add for the q and k norms' weights |
| grad_adds_mla | 0 | 2 | the same add for MLA's q and kv down-projection norms |
| grad_adds_router | 0 | 1 | the same add for the router's weight (`RouterGatingLinearFunction`, not a TE module) |
| qkv_gather | 2 | 6 | `num_query_groups` < TP (`attention.py` 1407-1421, 1476-1486): all-gather of the fused QKV output over TP + the last-dim `torch.cat` (`mappings._gather_along_last_dim`); backward: split + cat + reduce-scatter (`_reduce_scatter_along_last_dim`), and the two slices' `slice_backward` (zeros + copy each) |
| rope_unfused | 22 | 12 | `apply_rope_fusion` off (`rope_utils._apply_rotary_pos_emb_bshd`): per q and k, cos, sin, their `* mscale` and casts (6), `t * cos`, `_rotate_half` (neg, cat), `* sin`, add, cat with the pass-through part: 12 launches in place of TE's fused kernel (+11 each); backward per tensor: `* sin`, neg, the chunk's cat, `* cos`, the two grads' add, the empty pass-through slice's `slice_backward` (zeros) and its add: 7 in place of 1 (+6 each; the full-width `t[..., :rot_dim]` is the tensor itself, PyTorch's `applySlice` short cut, no slice node) |
| mla_rope_unfused | 24 | 22 | the same for MLA's q and k position parts (`multi_latent_attention.py` 789-848), each also de-interleaved (`t[..., 0::2]`, `t[..., 1::2]`, cat: +1; backward two strided `slice_backward`, zeros + copy each, and their add: +5) |
| swiglu_unfused | 3 | 5 | `bias_activation_fusion` off in `TEGroupedMLP.bias_act_func` (`experts.py` 308-324): silu, `x_linear + glu_linear_offset`, mul, `* permuted_probs` (4) in place of `weighted_bias_swiglu_impl` (1); backward: the probs mul's two products and the sum to the probs' shape, the glu mul's two, `silu_backward`, the chunk's cat (7) in place of `weighted_swiglu_back` (2) |
| mlp_swiglu_unfused | 2 | 3 | the same in `MLP.forward` (`mlp.py` 310-321; dense MLP and shared expert): silu, add, mul (3) in place of `bias_swiglu_impl` (1); backward 4 in place of 1 |
| router_fused | 12 | 13 | `--moe-router-fusion` (TE PR 1883, 62acae0 `router.cpp`) in place of `router`: `topk_routing_with_score_function` (9), `compute_routing_scores_for_aux_loss` (6) and `switch_load_balancing_loss_func` (4) become one TE kernel each, 28 - 19 + 3 = 12; backward left at the unfused router's 13, an upper bound: each fused function has one backward kernel, replacing at least one, but the table gives no per-function split of the unfused 13 to subtract from (the backward never waits for the GPU, so it only counts where the host as a whole is the bound) |

The router row is Mixtral/Qwen routing (softmax, plain top-k, `aux_loss`); a model with sigmoid
scores, an expert bias, group-limited top-k or `seq_aux_loss` (DeepSeek-V3) adds the modules
`router_launches` counts (core_v0.14.0; DeepSeek-V3 49 / 27 unfused, 15 / 14 fused). Under MXFP8
with a stated TE stage, `te_mxfp8_host` adds the experts' and the other linears' quantize,
zero-fill and swizzle launches (`mxfp8_expert_*`, `mxfp8_layer_*`, `mxfp8_attn_linear_*` per
attention linear, `mxfp8_mlp_linear_*` per dense-MLP / shared-expert linear).

The counts are a reading of the code, not a trace: a Kineto trace of one Megatron-Core MoE
layer would replace them. The last ten rows are conditional (`router_fused` replaces `router`
under `--moe-router-fusion`): the parameter-gradient adds on every
layer, the QKV gather where the model has fewer KV heads than TP ranks, the unfused RoPE and SwiGLU
where the run leaves Megatron-Core's `apply_rope_fusion` / `bias_activation_fusion` off (a
Megatron-Bridge recipe run, `bridge_recipe`; Megatron-LM's launcher turns both on).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from starfabric.astral.seer import router_launches, te_mxfp8_host

HOST_S_PER_LAUNCH_FWD = 47.5e-6
"""Host seconds per kernel launch in an eager forward pass: the launch-weighted mean over the
`## forward ##` regions of HolisticTraceAnalysis `tests/data/trace_diff/control/control.json.gz`
(rank 3 of an 8-rank A100 job, PyTorch profiler on; `host_regions.region_per_launch`): region
wall time minus blocking calls, over the 2,532 kernels launched in it. A pass's host time is
the sum of its launch intervals, so the mean, not the median of the GPU-starved intervals
(31 us, `host_trace.host_per_launch`, Seer's figure before), is what a pass pays. Checked on
DeepSeek's public H800 training trace (DeepSeek-V3 MoE layers): 47.0 us (`host_regions`
docstring). Includes Python, dispatcher, allocator, launch call and the profiler's own
overhead. Used for every host (assumption: no per-CPU scaling; the A100 and H800 hosts agree)."""
HOST_S_PER_LAUNCH_BWD = 37.2e-6
"""Host seconds per kernel launch in the autograd engine's backward: the launch-weighted mean
over the same trace's `## backward ##` regions (5,562 launches, nearly all on the autograd
thread; `host_regions.region_per_launch`). DeepSeek's H800 trace: 43.4 us (assumption: one
figure for every host, as forward)."""
HOST_SYNC_FRAMEWORKS = ("megatron-core", "megatron-bridge", "nemo")
"""Framework cells whose MoE layers run Megatron-Core's dispatchers (sync once per layer
forward since core_r0.8's dropless all-to-all dispatcher) and whose layers `LAUNCHES` counts."""


@dataclass(frozen=True)
class Launches:
    """GPU launches of one module for one micro-batch: forward, backward."""

    fwd: int
    bwd: int


LAUNCHES: dict[str, Launches] = {
    "attention": Launches(12, 19),
    "qk_norm": Launches(4, 4),
    "mla_attention": Launches(22, 35),
    "dense_mlp": Launches(6, 10),
    "router": Launches(28, 13),
    "dispatch_alltoall": Launches(20, 4),
    "sort_alltoall": Launches(5, 4),
    "combine_alltoall": Launches(3, 4),
    "dispatch_deepep": Launches(12, 4),
    "combine_deepep": Launches(4, 4),
    "experts_fixed": Launches(11, 11),
    "experts_per_local": Launches(2, 4),
    "shared_expert": Launches(6, 10),
    "grad_adds_attention": Launches(0, 2),
    "grad_adds_qk_norm": Launches(0, 2),
    "grad_adds_mla": Launches(0, 2),
    "grad_adds_router": Launches(0, 1),
    "qkv_gather": Launches(2, 6),
    "rope_unfused": Launches(22, 12),
    "mla_rope_unfused": Launches(24, 22),
    "swiglu_unfused": Launches(3, 5),
    "mlp_swiglu_unfused": Launches(2, 3),
    "router_fused": Launches(12, 13),
    **{f"mxfp8_expert_{s}": Launches(*te_mxfp8_host.PER_LOCAL_EXPERT[s])
       for s in te_mxfp8_host.STAGES},
    **{f"mxfp8_layer_{s}": Launches(*te_mxfp8_host.PER_GROUPED_LAYER_PAIR[s])
       for s in te_mxfp8_host.STAGES},
    **{f"mxfp8_attn_linear_{s}": Launches(*te_mxfp8_host.PER_LINEAR[s])
       for s in te_mxfp8_host.STAGES},
    **{f"mxfp8_mlp_linear_{s}": Launches(*te_mxfp8_host.PER_LINEAR[s])
       for s in te_mxfp8_host.STAGES},
    **{k: Launches(*v) for k, v in router_launches.UNFUSED.items()},
    **{k: Launches(*v) for k, v in router_launches.FUSED.items()},
}  # fmt: skip
"""Megatron-Core core_v0.17.1 launches per module (table in the module docstring; assumption:
counted by reading the code path, not from a trace of it). `router_fused` = (12, 13): the fused
router's forward, and the unfused router's backward kept as an upper bound (the table splits
no backward per function; `router_launches.FUSED` adds DeepSeek-V3's routing on top of it)."""
CUDA_GRAPH_MODULES = (
    "attention", "qk_norm", "mla_attention", "router", "router_fused", "qkv_gather",
    "rope_unfused", "mla_rope_unfused",
    *router_launches.UNFUSED, *router_launches.FUSED,
    *(f"mxfp8_attn_linear_{s}" for s in te_mxfp8_host.STAGES),
)  # fmt: skip
"""Modules Megatron-Core captures in CUDA graphs (`--cuda-graph-scope attn moe_router`): a row
that states CUDA graphs pays one graph launch instead of their kernels' host time."""

MXFP8_ATTN_LINEARS = {True: 5, False: 2}
"""TE linears of one attention block (MLA: `linear_q_down_proj`, `linear_q_up_proj`,
`linear_kv_down_proj`, `linear_kv_up_proj`, `linear_proj`; otherwise `linear_qkv`,
`linear_proj`: Megatron-Core `multi_latent_attention.py` / `attention.py`), each paying
`te_mxfp8_host.PER_LINEAR` under MXFP8 (assumption: MLA with a q LoRA rank, as DeepSeek-V3; an
MLA model without one, such as DeepSeek-V2-Lite, has four — no such row states MXFP8)."""


@dataclass(frozen=True)
class LayerLaunchSpec:
    """What decides one layer's launch table (`layer_modules`, `layer_launches`,
    `host_segments.launches_by_module`): its MoE shape and the run's options that add, drop or
    fuse modules, keyword-only so no caller depends on their order. `router_fused`:
    `--moe-router-fusion`; `mxfp8_stage`: TE's MXFP8 path (`te_mxfp8_host`), None for BF16;
    `router_extra`: the routing's own modules (`router_launches.router_modules`)."""

    moe: bool
    _: KW_ONLY
    dispatcher: str = "alltoall"
    local_experts: int = 1
    shared_experts: int = 0
    cuda_graphs: bool = False
    mla: bool = False
    qk_norm: bool = False
    rope_fused: bool = True
    swiglu_fused: bool = True
    qkv_gather: bool = False
    router_fused: bool = False
    mxfp8_stage: str | None = None
    router_extra: tuple[str, ...] = ()


def layer_modules(spec: LayerLaunchSpec) -> list[tuple[str, int]]:
    """(module, how many) of one transformer layer, `LAUNCHES`' keys, before CUDA graphs
    (`layer_launches` drops the graphed ones)."""
    mods: list[tuple[str, int]] = [("mla_attention" if spec.mla else "attention", 1)]
    if spec.mxfp8_stage is not None:
        # MLA: q down, q up, kv down, kv up, output projection; else fused QKV + projection.
        mods.append((f"mxfp8_attn_linear_{spec.mxfp8_stage}", MXFP8_ATTN_LINEARS[spec.mla]))
    mods.append(("grad_adds_mla" if spec.mla else "grad_adds_attention", 1))
    if spec.qk_norm and not spec.mla:
        mods += [("qk_norm", 1), ("grad_adds_qk_norm", 1)]
    if spec.qkv_gather and not spec.mla:
        mods.append(("qkv_gather", 1))
    if not spec.rope_fused:
        mods.append(("mla_rope_unfused" if spec.mla else "rope_unfused", 1))
    if not spec.moe:
        mods.append(("dense_mlp", 1))
        if spec.mxfp8_stage is not None:
            mods.append((f"mxfp8_mlp_linear_{spec.mxfp8_stage}", 2))  # fc1, fc2
        if not spec.swiglu_fused:
            mods.append(("mlp_swiglu_unfused", 1))
        return mods
    mods += [("router_fused" if spec.router_fused else "router", 1), ("grad_adds_router", 1)]
    mods += [(m, 1) for m in spec.router_extra]
    if spec.dispatcher == "deepep":
        mods += [("dispatch_deepep", 1), ("combine_deepep", 1)]
    else:
        mods += [("dispatch_alltoall", 1), ("combine_alltoall", 1)]
        if spec.local_experts > 1:
            mods.append(("sort_alltoall", 1))
    mods += [("experts_fixed", 1), ("experts_per_local", spec.local_experts)]
    if spec.mxfp8_stage is not None:
        mods += [
            (f"mxfp8_expert_{spec.mxfp8_stage}", spec.local_experts),
            (f"mxfp8_layer_{spec.mxfp8_stage}", 1),
        ]
    if not spec.swiglu_fused:
        mods.append(("swiglu_unfused", 1))
    # Megatron-Core builds one `SharedExpertMLP` per MoE layer, sized
    # `moe_shared_expert_intermediate_size` (shared_experts.py, core_v0.17.1): a model card's
    # count of shared experts only sets that width, not the number of modules launched.
    mods.append(("shared_expert", min(spec.shared_experts, 1)))
    if spec.shared_experts and spec.mxfp8_stage is not None:
        mods.append((f"mxfp8_mlp_linear_{spec.mxfp8_stage}", 2))  # the shared expert's fc1, fc2
    if spec.shared_experts and not spec.swiglu_fused:
        mods.append(("mlp_swiglu_unfused", 1))
    return mods


def layer_launches(spec: LayerLaunchSpec) -> Launches:
    """Launches of one transformer layer (attention + dense MLP or MoE block); under CUDA
    graphs, one graph launch in place of the `CUDA_GRAPH_MODULES`' kernels."""
    mods = layer_modules(spec)
    f = b = 0
    for name, n in mods:
        if spec.cuda_graphs and name in CUDA_GRAPH_MODULES:
            n = 0
        f += n * LAUNCHES[name].fwd
        b += n * LAUNCHES[name].bwd
    if spec.cuda_graphs:
        f += 1
        b += 1
    return Launches(f, b)


def host_seconds(n: Launches) -> tuple[float, float]:
    """(forward, backward) host seconds of `n` launches."""
    return n.fwd * HOST_S_PER_LAUNCH_FWD, n.bwd * HOST_S_PER_LAUNCH_BWD


def segment_time(host_s: float, gpu_s: float) -> float:
    """A segment that starts from an empty GPU queue (after a host wait) ends when both the host
    has issued it and the GPU has run it."""
    return max(host_s, gpu_s)


def host_synced(framework_host_model: bool, moe: bool, ep: int, dynamic: bool) -> bool:
    """Whether a layer's forward waits for the GPU: a Megatron-Core MoE layer with EP > 1 whose
    token counts are only known on the GPU (`dynamic`): dropless, or dropping tokens without
    padding to capacity (`MoEAlltoAllTokenDispatcher.preprocess` syncs unless `drop_and_pad`,
    core_v0.17.1)."""
    return framework_host_model and moe and ep > 1 and dynamic


__all__ = [
    "CUDA_GRAPH_MODULES",
    "HOST_SYNC_FRAMEWORKS",
    "HOST_S_PER_LAUNCH_BWD",
    "HOST_S_PER_LAUNCH_FWD",
    "LAUNCHES",
    "Launches",
    "LayerLaunchSpec",
    "host_seconds",
    "host_synced",
    "layer_launches",
    "layer_modules",
    "segment_time",
]
