"""Execution and system specs, and the check that a parallel layout is possible at all.

`ExecutionSpec` holds Megatron-style settings (batch, precision, TP+SP, PP with virtual stages,
DP with distributed optimizer / ZeRO, CP, EP with expert-TP, recompute, overlaps); `SystemSpec`
names the GPU and the cluster shape. `resolve_layout` validates the combination against the
model and returns a `Layout` of plain integers; an impossible combination raises one line that
says why and what to change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from starfabric.astral.hardware import GPUSpec, get_gpu
from starfabric.astral.seer import (
    async_grad_input,
    cpu_optimizer_offload,
    cudnn_release,
    fp8_attention,
    fused_grouped_mlp,
    nvfp4,
    te_cp_step,
)
from starfabric.astral.seer.cp_comm import a2a_heads_error, cp_levels, host_a2a_size
from starfabric.astral.seer.fp8_attention import DpaRecipe
from starfabric.astral.seer.fp8_recipe import Recipe, check_supported, native_mx
from starfabric.astral.seer.model import ModelSpec, bundled_models
from starfabric.astral.seer.nvfp4 import Fp4Recipe
from starfabric.config import Spec
from starfabric.errors import ConfigError, InfeasibleError
from starfabric.units import parse_bandwidth

MAX_GLOBAL_BATCH = 1 << 24
"""Assumption: the most sequences per iteration, 16,777,216 — some 8,000x the largest published
batches (Llama 3.1 405B: 16M tokens = 2,048 sequences of 8K); a larger count is a typo, and the
layout search and the schedule would walk absurd micro-batch counts."""

MAX_SEQ_LEN = 1 << 24
"""Assumption: the longest sequence per sample, 16,777,216 tokens — 16x the longest in Seer's
published rows (long-context tables reach 2^20 = 1,048,576); a longer one is a typo ("2^99"),
and the layout search would run for minutes on it (2^40 took over 40 s on one row) instead of
refusing it."""


def _release_text(v: object, field: str, example: str, parse: Callable[[str], object]) -> object:
    """A release given as text, checked by its parser. YAML reads an unquoted 1.10 as the number
    1.1, so a number is refused rather than guessed."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        short = example.rstrip("0")
        raise ValueError(
            f"{v!r} is a number (YAML reads an unquoted {example} as {short}): quote it, "
            f"e.g. {field}: '{example}'"
        )
    if isinstance(v, str):
        try:
            parse(v)
        except ValueError as e:
            raise ValueError(str(e)) from None
    return v


class ExecutionSpec(Spec):
    """How the job is run: batch, precision, parallelism, memory savings and overlaps."""

    global_batch: int = Field(gt=0, le=MAX_GLOBAL_BATCH, description="sequences per iteration")
    micro_batch: int = Field(default=1, gt=0, description="sequences per micro-batch")
    seq_len: int = Field(gt=0, le=MAX_SEQ_LEN)
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    tp: int = Field(default=1, gt=0)
    sp: bool = Field(default=True, description="sequence parallelism (used only when tp > 1)")
    pp: int = Field(default=1, gt=0)
    vpp: int = Field(default=1, gt=0, description="virtual stages per PP rank (interleaved 1F1B)")
    pipeline_layers: tuple[int, ...] | None = Field(
        default=None,
        description="explicit layers per PP stage (vpp = 1) or per virtual stage in "
        "schedule order (pp*vpp entries): uneven pipelines",
    )
    dp: int | None = Field(default=None, gt=0, description="default: gpus / (tp * pp * cp)")
    cp: int = Field(default=1, gt=0)
    cp_algorithm: Literal["ring", "ulysses", "all_gather", "hierarchical"] = Field(
        default="ring",
        description="how the cp ranks split attention: ring (Megatron-Core/TorchTitan context "
        "parallelism, TransformerEngine cp_comm_type p2p: KV blocks passed around a ring, "
        "hidden behind the block attention), ulysses (DeepSpeed-Ulysses/XTuner sequence "
        "parallelism, TE a2a: all-to-alls of Q, K, V and the output on the heads; "
        "seer/ulysses.py), all_gather (TE all_gather: K and V all-gathered, exposed) or "
        "hierarchical (TE a2a+p2p: a2a over cp_a2a_size adjacent ranks, ring over the rest; "
        "seer/cp_comm.py)",
    )
    cp_a2a_size: int | None = Field(
        default=None,
        gt=0,
        description="hierarchical CP only: ranks of the all-to-all level (Megatron "
        "--hierarchical-context-parallel-sizes A B: A); must divide cp. Default: the CP ranks "
        "that share a host (the largest divisor A of cp with tp x A <= gpus_per_node; "
        "cp_comm.host_a2a_size), as validate reads a row that states a2a+p2p without sizes",
    )
    ulysses_repeat_kv: bool = Field(
        default=False,
        description="Ulysses: K and V are repeated to the query head count before the "
        "all-to-all (XTuner) rather than sent at their own count (DeepSpeed)",
    )
    ep: int = Field(default=1, gt=0)
    etp: int | None = Field(default=None, gt=0, description="expert TP; default 1 with ep > 1")
    zero: Literal[0, 1, 2, 3] = Field(
        default=1,
        description="0 plain DP all-reduce, 1 distributed optimizer, 2 +grads, 3 +params "
        "(with pp > 1 parameters are gathered once per step and kept across micro-batches, "
        "as Llama 3 ran FSDP with pipelines)",
    )
    recompute: Literal["none", "selective", "full"] = "none"
    recompute_modules: tuple[
        Literal["core_attn", "layernorm", "mla_up_proj", "moe_act", "moe", "mlp"], ...
    ] = Field(
        default=("core_attn",),
        description="what selective recompute re-runs (Megatron-Core --recompute-modules): "
        "core attention, norms, MLA up-projections, MoE activation, the whole MoE layer, the "
        "whole dense MLP",
    )
    recompute_method: Literal["uniform", "block"] | None = Field(
        default=None,
        description="with recompute full, Megatron-Core --recompute-method: uniform "
        "checkpoints groups of recompute_num_layers consecutive layers (every layer re-run, "
        "one input kept per group), block fully recomputes the first recompute_num_layers "
        "layers of each (virtual) pipeline chunk and runs the rest without recompute "
        "(seer/partial_recompute.py); None: every layer checkpointed on its own",
    )
    recompute_num_layers: int | None = Field(
        default=None,
        ge=0,
        description="Megatron-Core --recompute-num-layers N for recompute_method, counted per "
        "(virtual) pipeline chunk; at most the layers of a chunk",
    )
    fp8_16bit_copies: bool = Field(
        default=True,
        description="under FP8, the attention output and the MoE router input stay saved in "
        "16-bit beside the FP8 casts the GEMMs save (Transformer Engine / Megatron-Core; "
        "seer/fp8_activations.py); False: one low-precision copy shared by both "
        "(DeepSeek's own framework, DeepSeek-V3 section 3.3.2)",
    )
    fp8_recipe: Recipe | None = Field(
        default=None,
        description="under FP8, the scaling recipe (Megatron-Core --fp8-recipe: delayed, "
        "tensorwise = TE current scaling, blockwise = 1x128/128x128 block scales, mxfp8; or "
        "torchao_tensorwise, torchao's dynamic scaling under torch.compile): sets the FP8 GEMM "
        "rate and the cast cost relative to delayed scaling (seer/fp8_recipe.py); None: FP8 "
        "without a stated recipe, timed as delayed scaling",
    )
    fp4_recipe: Fp4Recipe | None = Field(
        default=None,
        description="under FP8, the transformer layers' GEMMs run in FP4 (Megatron-Core "
        "--fp4-format e2m1 --fp4-recipe nvfp4, TE NVFP4BlockScaling): timed at the GPU's dense "
        "NVFP4 peak with the recipe's quantization bytes (seer/nvfp4.py); Blackwell only",
    )
    fp8_attention: DpaRecipe | None = Field(
        default=None,
        description="under FP8, the fused attention runs cuDNN's FP8 kernels forward and "
        "backward (Transformer Engine fp8_dpa; Megatron-Core/NeMo fp8_dot_product_attention; "
        "MLPerf FP8_DPA=1) with this scaling recipe for its Q/K/V, O and dO casts: delayed "
        "(DelayedScaling), tensorwise (Float8CurrentScaling) or mxfp8 (MXFP8BlockScaling, "
        "cuDNN's MXFP8 kernel, Blackwell only). Timed at the measured FP8/BF16 rate of the GPU "
        "generation (MXFP8: and attention shape) plus the casts' bytes (seer/fp8_attention.py, "
        "seer/mxfp8_attention.py); needs "
        "attention: flash with flash_kernel: cudnn; None: BF16 attention",
    )
    optimizer_offload_fraction: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Megatron-Core --optimizer-cpu-offload with --optimizer-offload-fraction: "
        "this share of the rank's optimizer shard is updated by torch's CPU AdamW in host "
        "memory (seer/cpu_optimizer_offload.py); 0: off",
    )
    overlap_cpu_optimizer: bool = Field(
        default=True,
        description="--overlap-cpu-optimizer-d2h-h2d: gradient copies, CPU Adam and parameter "
        "copies pipelined per parameter (else one after the other)",
    )
    cpu_optimizer_threads: int | None = Field(
        default=None,
        gt=0,
        description="CPU threads the offloaded optimizer uses per GPU (OMP_NUM_THREADS); "
        "None: the host's cores per GPU (hardware catalog host_cores)",
    )
    optimizer_moments: Literal["fp32", "bf16"] = Field(
        default="fp32",
        description="storage of Adam's two moments: fp32 (Megatron default, 12 bytes of "
        "optimizer state per parameter) or bf16 (Megatron-Core precision-aware optimizer, "
        "--exp-avg-dtype/--exp-avg-sq-dtype bf16: 8 bytes; seer/optimizer_state.py)",
    )
    fsdp_collectives: Literal["layer", "parameter"] = Field(
        default="layer",
        description="ZeRO-3/FSDP gathers: one flat buffer per layer (FSDP, Megatron) or one "
        "collective per parameter tensor (DeepSpeed ZeRO-3 before v0.6.0: seer/deepspeed_flat_gather.py)",
    )
    megatron_fsdp: bool = Field(
        default=False,
        description="ZeRO-3 is Megatron-Core's own FSDP (--use-megatron-fsdp / "
        "--use-custom-fsdp): its gathers and reduce-scatters also progress while the layer "
        "waits on intra-host collectives (seer/fsdp_side_window.py)",
    )
    attention: Literal["flash", "unfused"] = "flash"
    flash_kernel: Literal["cudnn", "fa2", "fa1", "xformers", "triton"] = Field(
        default="cudnn",
        description="fused-attention implementation: cudnn (Transformer Engine's fused "
        "attention, Megatron-Core/NeMo) or fa2 (FlashAttention-2, PyTorch SDPA's flash "
        "backend: TorchTitan, HF); FA2 reaches FA2_ON_HOPPER of cuDNN on Hopper, "
        "FA2_ON_BLACKWELL on Blackwell (cost.fa2_rate); "
        "fa1 / xformers / triton: the kernels before FlashAttention-2 (2022 to mid-2023), at "
        "FA2's rate divided by flash_generation.PRE_FA2_SPEEDUP",
    )
    cudnn_release: str | None = Field(
        default=None,
        pattern=r"^\d+\.\d+(\.\d+)*$",
        description="the run's cuDNN release (MAJOR.MINOR[.PATCH], e.g. 9.4 or 9.19.1): on "
        "Hopper, cuDNN's fused attention runs at that release's measured rate over 9.1's "
        "(seer/cudnn_release.py); None: unknown, Seer's curve (cuDNN 9.1) as is",
    )
    te_cp_merge: bool = Field(
        default=True,
        description="a cuDNN-attention CP ring is TransformerEngine's p2p ring (Megatron-Core, "
        "NeMo), whose per-step merges are priced (seer/te_cp_step.py); False: another "
        "framework's ring (PyTorch's, Meta's), whose merges are not counted (assumption: a "
        "job file's cuDNN ring is TE's unless it says otherwise)",
    )
    te_release: str | None = Field(
        default=None,
        pattern=r"^\d+\.\d+(\.\d+)*$",
        description="the run's TransformerEngine release (MAJOR.MINOR, e.g. 1.11): the merge "
        "work around each step of TE's p2p CP ring is counted as that release's source does "
        "(seer/te_cp_step.py); None: the newest structure read (v2.8)",
    )
    logits_precision: Literal["auto", "fp32", "fp8"] = Field(
        default="auto",
        description="output-layer (LM head) GEMMs: auto = the run's precision, except that an "
        "FP8 run keeps them in BF16 (cost.BF16_GEMMS); fp32 = computed in FP32 before the "
        "softmax (BloombergGPT Training Chronicles C.2), at the GPU's FP32 rate "
        "(cost.LOGITS_FP32_RATE); fp8 = under the run's FP8 recipe (Megatron-Core "
        "`fp8_output_proj`: the LM head as a TE linear under MXFP8; needs precision fp8)",
    )
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    tp_comm_overlap: bool = False
    tp_async_backward: bool = Field(
        default=True,
        description="the column-parallel linears' backward grad-input all-reduce (with SP: "
        "reduce-scatter) runs asynchronously beside their weight-gradient GEMM, as Megatron-Core's "
        "and TransformerEngine's linears do by default (Megatron-LM from 2021-09, Apex/NeMo from "
        "2021-10; seer/async_grad_input.py); False: a stack that blocks on it, the default "
        "when a TorchTitan or DeepSpeed setting is given (async_grad_input."
        "NOT_READ_STACK_SETTINGS). The other TP "
        "collectives stay exposed; tp_comm_overlap, which hides every TP collective, supersedes "
        "it, and ep_delay_wgrad (a deferred wgrad GEMM) turns it off",
    )
    ep_comm_overlap: bool = Field(
        default=False,
        description="expert all-to-all hidden behind another micro-batch's compute "
        "(DeepSeek DualPipe, Megatron 1F1B A2A overlap)",
    )
    ep_delay_wgrad: bool = Field(
        default=False,
        description="Megatron --delay-wgrad-compute with the EP overlap: the expert wgrad runs "
        "after the dispatch's backward is issued, so that all-to-all waits for the dgrad only "
        "(ep_overlap.pair_step)",
    )
    moe_fused_dispatch: bool = Field(
        default=False,
        description="expert dispatch and combine fused with the grouped expert GEMMs of the "
        "same micro-batch in one kernel (TorchTitan DistMoE: 'Routed-experts backend fusing "
        "dispatch, expert compute, and combine'): the all-to-all hides behind those GEMMs",
    )
    moe_fused_grouped_mlp: bool = Field(
        default=False,
        description="Transformer Engine's CuTe-DSL fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED"
        "_MLP=1 with TE's op fuser; MXFP8 on Blackwell): SwiGLU and the MXFP8 quantizations of "
        "fc2's input and fc1's grad output run in the expert GEMMs' epilogues, so those passes "
        "are not timed (seer/fused_grouped_mlp.py); needs fp8_recipe mxfp8, a Blackwell GPU and "
        "SwiGLU MoE experts",
    )
    moe_torch_grouped_mm: bool = Field(
        default=False,
        description="the routed experts run as PyTorch's torch._grouped_mm (TorchTitan's "
        "GroupedExperts without DistMoE): in 16 bit on Blackwell its CUTLASS kernel runs at "
        "its measured rate relative to a dense GEMM (seer/torch_grouped_mm.py)",
    )
    moe_atomic_unpermute: bool = Field(
        default=False,
        description="the MoE permute's backward (index_add_) and the unpermute (scatter_add_) "
        "run as PyTorch's BF16 atomic scatters (TorchTitan's DeepEP path): on Blackwell at "
        "their measured B200 rate, elsewhere at the streaming price (seer/scatter_unpermute.py)",
    )
    eager_elementwise: bool = Field(
        default=False,
        description="the layer's norms, RoPE and SwiGLU run as unfused eager PyTorch kernels "
        "(TorchTitan's 2024-12 Llama without torch.compile; seer/torchtitan_eager.py): their "
        "extra HBM traffic is timed",
    )
    torchtitan_op_sac: bool = Field(
        default=False,
        description="selective recompute is TorchTitan's per-op SAC (its _save_list: every "
        "other aten.mm output, SDPA outputs, reduce-scatter outputs): a dense layer keeps those "
        "tensors (seer/torchtitan_memory.py) and re-runs every other mm and the elementwise "
        "kernels, not SDPA (seer/torchtitan_op_sac.py)",
    )
    torchtitan_memory: bool = Field(
        default=False,
        description="the run is TorchTitan's: its loss keeps three fp32 tensors per logit at "
        "the backward and FSDP2 holds unsharded bf16 blocks and fp32 reduce-scatter buffers "
        "in flight (seer/torchtitan_memory.py)",
    )
    moe_dispatcher: Literal["alltoall", "deepep"] = Field(
        default="alltoall",
        description="expert token dispatcher: alltoall (NCCL, every token-expert copy crosses "
        "hosts) or deepep (one copy per remote node, fanned out over NVLink; Megatron-Core "
        "flex dispatcher, DeepSeek-V3 section 3.2.2)",
    )
    moe_flex_backend: Literal["deepep", "hybridep"] = Field(
        default="deepep",
        description="backend of the deepep (flex) dispatcher: DeepEP V1's kernels, or NVIDIA's "
        "HybridEP (Megatron-Core --moe-flex-dispatcher-backend hybridep), priced inside one "
        "NVLink-5 domain at its measured rate (seer/hybridep_rate.py)",
    )
    ep_dispatch_dtype: Literal["bf16", "fp8"] | None = Field(
        default=None,
        description="dtype of an FP8 run's forward expert dispatch (DeepEP): unset, the "
        "framework's own — fp8 under pipeline_schedule dualpipe (DeepSeek's stack, DeepSeek-V3 "
        "section 3.3.3), bf16 otherwise (Megatron-Core's DeepEP and HybridEP backends and "
        "TorchTitan hand DeepEP the BF16 hidden states; seer/ep_dispatch_dtype.py)",
    )
    deepep_num_sms: int = Field(
        default=20,
        ge=1,
        le=256,
        description="SMs DeepEP's normal kernels run on (DeepEP's Buffer default 20; a run that "
        "sets another budget, e.g. TorchTitan's 2025-11 DeepEP branch on B200 at 128: "
        "seer/deepep_sm_budget.py)",
    )
    host_launches: bool = Field(
        default=False,
        description="count the host's kernel launches of Megatron-Core's layers (host_ops): "
        "a MoE layer with EP > 1 whose token counts live on the GPU (dropless, or dropping "
        "without padding) waits for the GPU every forward, so its passes last max(host, GPU); "
        "the whole iteration is floored by the host's total (`seer predict` of a Megatron "
        "launch command: on)",
    )
    cuda_graphs: bool = Field(
        default=False,
        description="attention and router captured in CUDA graphs (their launches cost one "
        "graph launch; Megatron-Core --cuda-graph-impl transformer_engine --cuda-graph-scope "
        "attn moe_router)",
    )
    rope_fusion: bool = Field(
        default=True,
        description="RoPE applied by TE's fused kernel (Megatron-Core apply_rope_fusion; "
        "Megatron-LM's launcher default, --no-rope-fusion turns it off); False: the unfused "
        "PyTorch path, whose launches host_ops counts (a Megatron-Bridge recipe run, "
        "seer/bridge_recipe.py); nothing for a model with learned absolute positions",
    )
    swiglu_fusion: bool = Field(
        default=True,
        description="SwiGLU (and the experts' probability weighting) in one fused kernel "
        "(Megatron-Core bias_activation_fusion; Megatron-LM's launcher default, "
        "--no-bias-swiglu-fusion turns it off); False: the unfused path, counted by host_ops "
        "(a SwiGLU model only, as Megatron-LM reads the flag only with --swiglu)",
    )
    moe_router_fusion: bool = Field(
        default=False,
        description="Megatron-Core --moe-router-fusion: TE's fused top-k/score, aux-loss score "
        "and aux-loss kernels (TE PR 1883) in place of the unfused router ops; host_ops counts "
        "the router's forward launches 12 in place of 28 (backward kept at 13). No effect, and "
        "accepted, on a dense model (Megatron-LM accepts the flag there: only TopKRouter reads "
        "it) or without host_launches (as cuda_graphs, rope_fusion, swiglu_fusion and "
        "te_mxfp8_stage, it only changes the counted launches)",
    )
    te_mxfp8_stage: Literal["per_tensor", "bulk_alloc", "multi_swizzle"] | None = Field(
        default=None,
        description="Transformer Engine's MXFP8 grouped-linear path the row states (release "
        "or PRs; seer/te_mxfp8_host.py): the quantize, zero-fill and swizzle launches per "
        "local expert and per non-expert TE linear that host_ops adds; None: not stated, the "
        "BF16 launch count. Needs precision fp8 without a tensor-scaled fp8_recipe, on a GPU with "
        "MX tensor cores (Blackwell)",
    )
    moe_load_balance: Literal["dropless", "forced"] = Field(
        default="dropless",
        description="dropless: tokens go where the router sends them, the busiest expert "
        "rank sets the pace (ops.MOE_IMBALANCE); forced: Megatron-Core "
        "--moe-router-force-load-balancing, an even split (benchmarking runs)",
    )
    moe_round_robin_routing: bool = Field(
        default=False,
        description="forced balance as TorchTitan's debug router does it: token i takes the "
        "k consecutive experts k*i .. k*i+k-1 (mod E), so DeepEP sends it to the ranks and "
        "nodes that window spans, not to those of random top-k (seer/round_robin_routing.py)",
    )
    moe_capacity_factor: float | None = Field(
        default=None,
        gt=0,
        description="token dropping at this expert capacity (Megatron-Core "
        "--moe-expert-capacity-factor): no expert or rank takes more than this times the "
        "mean tokens; None: dropless",
    )
    moe_pad_to_capacity: bool = Field(
        default=False,
        description="with moe_capacity_factor: every expert's input padded to its capacity "
        "(Megatron-Core --moe-pad-expert-input-to-capacity), so token counts are static and "
        "the layer does not wait for the GPU; False (Megatron's default): tokens dropped but "
        "not padded, the counts are copied to the host and waited for (host_ops.host_synced)",
    )
    moe_unpermute_keeps_output: bool = Field(
        default=False,
        description="the MoE unpermutation multiplies the returned expert output by the router "
        "probabilities and autograd keeps it (k 16-bit token copies per token) for their "
        "gradient: Megatron-Core before core_v0.13 (seer/mcore_release.py); False: the "
        "probabilities are applied inside the expert (core_v0.13 on)",
    )
    moe_probs_all_to_all: bool = Field(
        default=False,
        description="the alltoall token dispatcher sends the permuted router probabilities to "
        "the experts in an all-to-all of their own after the tokens' (and their gradient back "
        "in the backward): Megatron-Core core_v0.13 on (seer/moe_probs_a2a.py); False: earlier "
        "releases and other stacks apply the probabilities at the source rank",
    )
    pipeline_schedule: Literal["1f1b", "dualpipe"] = Field(
        default="1f1b",
        description="1f1b: Megatron's (interleaved when vpp > 1); dualpipe: DeepSeek-V3's "
        "bidirectional schedule (section 3.2.1): forward/backward chunk pairs overlap their "
        "all-to-all with each other's compute, bubble (pp/2 - 1)(F&B + B - 3W), two copies "
        "of the parameters",
    )
    offload_activations: bool = Field(
        default=False,
        description="saved activations to the GPU's second memory tier (Grace over C2C) and "
        "back, prefetched (seer/offload.py)",
    )
    offload_weights: bool = Field(
        default=False,
        description="weights, gradients and optimizer states kept in the second memory tier, "
        "streamed per layer (seer/offload.py)",
    )
    offload_modules: tuple[Literal["expert_fc1", "moe_act"], ...] = Field(
        default=(),
        description="Megatron-Core fine-grained activation offloading (--fine-grained-activation-"
        "offloading --offload-modules): the MoE modules whose input each layer copies to host "
        "memory in the forward and back for the backward (seer/fine_grained_offload.py)",
    )
    overlap_p2p: bool = Field(
        default=True, description="PP send/recv overlapped with compute (else blocking)"
    )
    grad_reduce_fp32: bool | None = Field(
        default=None, description="reduce gradients in fp32 (default: yes for bf16/fp8)"
    )
    deepspeed_bf16_pipe: bool = Field(
        default=False,
        description="a BF16 run on DeepSpeed >= 0.6.2: with PP > 1 its pipeline engine "
        "all-reduces the whole FP32 gradient buffer after the flush (_bf16_reduce_grads) "
        "although BF16_Optimizer shards the optimizer (seer/deepspeed_bf16_pipe.py)",
    )
    param_gather_dtype: Literal["param", "grad"] = Field(
        default="param",
        description="dtype of the parameter all-gather after the optimizer step (ZeRO-1/2, "
        "and ZeRO-3 under PP; nothing at ZeRO 0 or in FSDP's in-layer gathers): param = the "
        "16-bit parameters; grad = the grad buffer's (FP32 under BF16), as Megatron-LM's "
        "distributed optimizer before 57bfa7ca (2022-09-30) gathers (seer/dist_opt_gather.py)",
    )
    zero_shard_ranks: int | None = Field(
        default=None,
        gt=0,
        description="hybrid sharding: ZeRO shards over groups of this many DP ranks and "
        "replicates across the DP / N groups (InternEvo zero1=N, DeepSpeed MiCS, HSDP); "
        "gradients are reduce-scattered inside the group and each shard all-reduced across "
        "the replicas (see zero_shard); None: ZeRO shards over the whole DP group",
    )

    @field_validator("te_release", mode="before")
    @classmethod
    def _te_release_text(cls, v: object) -> object:
        return _release_text(v, "te_release", "1.10", te_cp_step.parse_release)

    @field_validator("cudnn_release", mode="before")
    @classmethod
    def _cudnn_release_text(cls, v: object) -> object:
        return _release_text(v, "cudnn_release", "9.10", cudnn_release.parse_release)

    @model_validator(mode="after")
    def _recipe_needs_fp8(self) -> ExecutionSpec:
        if self.fp4_recipe is not None and (self.precision != "fp8" or self.fp8_recipe):
            raise ValueError(
                f"fp4_recipe = {self.fp4_recipe!r} with precision {self.precision!r} and "
                f"fp8_recipe {self.fp8_recipe!r}: FP4 GEMMs take precision fp8 without an FP8 "
                "recipe (Megatron rejects --fp8-format with --fp4-format); drop one of them"
            )
        if self.fp8_attention is not None and (
            self.precision != "fp8" or self.attention != "flash" or self.flash_kernel != "cudnn"
        ):
            raise ValueError(
                f"fp8_attention = {self.fp8_attention!r} with precision {self.precision!r}, "
                f"attention {self.attention!r}, flash_kernel {self.flash_kernel!r}: FP8 "
                "attention is Transformer Engine's cuDNN fused attention under an FP8 recipe; "
                "give precision: fp8, attention: flash, flash_kernel: cudnn, or drop fp8_attention"
            )
        if self.moe_fused_grouped_mlp and self.fp8_recipe != "mxfp8":
            raise ValueError(
                f"moe_fused_grouped_mlp with fp8_recipe {self.fp8_recipe!r}: TE fuses the grouped "
                "MLP under the MXFP8 recipe only; give precision: fp8, fp8_recipe: mxfp8, or drop "
                "moe_fused_grouped_mlp"
            )
        if self.fp8_recipe is not None and self.precision != "fp8":
            raise ValueError(
                f"fp8_recipe = {self.fp8_recipe!r} with precision {self.precision!r}: a recipe "
                "scales FP8 GEMMs only; give precision: fp8 or drop fp8_recipe"
            )
        if self.te_mxfp8_stage is not None and (
            self.precision != "fp8"
            or self.fp8_recipe in ("delayed", "tensorwise", "torchao_tensorwise")
        ):
            raise ValueError(
                f"te_mxfp8_stage = {self.te_mxfp8_stage!r} with precision {self.precision!r} and "
                f"fp8_recipe {self.fp8_recipe!r}: TE's MXFP8 expert launches run under an MXFP8 "
                "(or Blackwell blockwise) recipe only; give precision: fp8 with fp8_recipe mxfp8, "
                "or drop te_mxfp8_stage"
            )
        return self

    @model_validator(mode="after")
    def _fp8_dispatch_needs_fp8(self) -> ExecutionSpec:
        if self.ep_dispatch_dtype == "fp8" and self.precision != "fp8":
            raise ValueError(
                f"ep_dispatch_dtype = 'fp8' with precision {self.precision!r}: an FP8 dispatch "
                "feeds FP8 expert GEMMs (DeepSeek-V3 section 3.3.3); give precision: fp8 or "
                "drop ep_dispatch_dtype"
            )
        if self.ep_dispatch_dtype == "fp8" and self.moe_flex_backend == "hybridep":
            raise ValueError(
                "ep_dispatch_dtype = 'fp8' with moe_flex_backend 'hybridep': Megatron-Core's "
                "HybridEP backend dispatches BF16 only (fused_a2a.py asserts not fp8_dispatch); "
                "drop ep_dispatch_dtype or use moe_flex_backend: deepep"
            )
        return self

    @model_validator(mode="after")
    def _async_grad_input_of_the_stack(self) -> ExecutionSpec:
        # unstated: off on a TorchTitan / DeepSpeed stack, as a row of it reads (validate)
        if "tp_async_backward" not in self.model_fields_set:
            self.__dict__["tp_async_backward"] = async_grad_input.job_default(self.__dict__)
        return self

    @model_validator(mode="after")
    def _moe_stack_fields_apply(self) -> ExecutionSpec:
        if self.moe_flex_backend == "hybridep" and self.moe_dispatcher != "deepep":
            raise ValueError(
                f"moe_flex_backend = 'hybridep' with moe_dispatcher {self.moe_dispatcher!r}: "
                "HybridEP is a backend of the flex (deepep) dispatcher; set moe_dispatcher: "
                "deepep or drop moe_flex_backend"
            )
        if self.moe_atomic_unpermute and self.moe_fused_dispatch:
            raise ValueError(
                "moe_atomic_unpermute = True with moe_fused_dispatch: a fused dispatch-compute-"
                "combine backend has no permute / unpermute kernels of its own; drop one of them"
            )
        if self.moe_atomic_unpermute and (
            self.moe_dispatcher != "deepep" or self.moe_flex_backend != "deepep"
        ):
            raise ValueError(
                f"moe_atomic_unpermute = True with moe_dispatcher {self.moe_dispatcher!r} and "
                f"moe_flex_backend {self.moe_flex_backend!r}: the atomic scatters are TorchTitan's "
                "DeepEP permute / unpermute (seer/scatter_unpermute.py); set moe_dispatcher: "
                "deepep (flex backend deepep) or drop moe_atomic_unpermute"
            )
        if self.moe_round_robin_routing and self.moe_load_balance != "forced":
            raise ValueError(
                f"moe_round_robin_routing = True with moe_load_balance "
                f"{self.moe_load_balance!r}: the round-robin routing is TorchTitan's forced "
                "balance; set moe_load_balance: forced or drop moe_round_robin_routing"
            )
        return self

    @model_validator(mode="after")
    def _recompute_method_needs_full(self) -> ExecutionSpec:
        m, n = self.recompute_method, self.recompute_num_layers
        if m is not None and self.recompute != "full":
            raise ValueError(
                f"recompute_method = {m!r} with recompute = {self.recompute!r}: a method "
                "divides full recompute (Megatron --recompute-granularity full); give recompute: "
                "full or drop recompute_method"
            )
        if (m is None) != (n is None):
            raise ValueError(
                f"recompute_method = {m!r} and recompute_num_layers = {n!r}: Megatron needs "
                "both (--recompute-method with --recompute-num-layers); give both or neither"
            )
        if m == "uniform" and n == 0:
            raise ValueError(
                "recompute_num_layers = 0 with recompute_method 'uniform': a group needs at "
                "least one layer; give recompute_num_layers >= 1"
            )
        if m == "block" and self.offload_modules:
            # block's plain layers would offload their experts' inputs and its checkpointed ones
            # keep none; Seer prices the offload on fully recomputed layers as nothing to move.
            raise ValueError(
                f"offload_modules = {list(self.offload_modules)} with recompute_method 'block' "
                "is not modelled (only the layers past the first recompute_num_layers would "
                "offload); drop one of them"
            )
        return self

    @model_validator(mode="after")
    def _one_activation_offload(self) -> ExecutionSpec:
        # Megatron-Core: "fine_grained_activation_offloading cannot be enabled with
        # cpu_offloading" (transformer_config.py); offload_activations is the layer-level one.
        if self.offload_modules and self.offload_activations:
            raise ValueError(
                f"offload_modules = {list(self.offload_modules)} with offload_activations: "
                "Megatron-Core refuses fine-grained activation offloading beside layer-level "
                "offloading; drop one of them"
            )
        return self

    @model_validator(mode="after")
    def _release_fields_apply(self) -> ExecutionSpec:
        # te_release sets how TE's p2p ring merges are counted (te_cp_step): only on a ring
        # Seer prices as TE's (cuDNN attention, te_cp_merge); elsewhere it would be ignored.
        if self.te_release is not None and not self.te_cp_merge:
            raise ValueError(
                f"te_release = {self.te_release!r} with te_cp_merge = False: the release sets "
                "the merge work of TransformerEngine's CP ring, which te_cp_merge: false says "
                "the run does not use; drop one of them"
            )
        if self.te_release is not None and self.flash_kernel != "cudnn":
            raise ValueError(
                f"te_release = {self.te_release!r} with flash_kernel {self.flash_kernel!r}: "
                "Seer prices TransformerEngine's CP ring merges on its cuDNN attention ring "
                "only (seer/te_cp_step.py); give flash_kernel: cudnn or drop te_release"
            )
        if self.deepspeed_bf16_pipe and self.precision != "bf16":
            raise ValueError(
                f"deepspeed_bf16_pipe = True with precision {self.precision!r}: DeepSpeed's "
                "FP32 gradient all-reduce is its BF16 pipeline path (_bf16_reduce_grads); give "
                "precision: bf16 or drop deepspeed_bf16_pipe"
            )
        return self

    @model_validator(mode="after")
    def _fp8_logits_need_fp8(self) -> ExecutionSpec:
        # Megatron-Core's fp8_output_proj runs the LM head under the FP8 (MXFP8) recipe of an
        # FP8 run; without FP8 there is no recipe to run it under.
        if self.logits_precision == "fp8" and self.precision != "fp8":
            raise ValueError(
                f"logits_precision = 'fp8' with precision {self.precision!r}: an FP8 output "
                "layer (Megatron-Core fp8_output_proj) runs under the run's FP8 recipe; give "
                "precision: fp8 or logits_precision: auto"
            )
        if self.logits_precision == "fp8" and self.fp4_recipe is not None:
            raise ValueError(
                f"logits_precision = 'fp8' with fp4_recipe {self.fp4_recipe!r}: Megatron-Core "
                "runs fp8_output_proj under an MXFP8 recipe only; drop fp4_recipe or give "
                "logits_precision: auto"
            )
        return self

    @model_validator(mode="after")
    def _a2a_size_is_hierarchical(self) -> ExecutionSpec:
        if self.cp_a2a_size is not None and self.cp_algorithm != "hierarchical":
            raise ValueError(
                f"cp_a2a_size = {self.cp_a2a_size} applies to hierarchical CP only, not "
                f"cp_algorithm = {self.cp_algorithm!r}: give cp_algorithm: hierarchical (TE "
                "a2a+p2p) or drop cp_a2a_size"
            )
        return self


MAX_GPUS = 1 << 24
"""The most GPUs a job may span: the topology builders' ceiling (topology/builders.py MAX_GPUS,
32x Astral's 524,288-GPU cluster); the layout search enumerates divisors of the count."""


class SystemSpec(Spec):
    """The machine: GPU type, how many, GPUs per node and per-GPU network bandwidth."""

    gpu: str = "H100"
    gpus: int = Field(gt=0, le=MAX_GPUS)
    gpus_per_node: int = Field(default=8, gt=0, le=MAX_GPUS)
    nic_bandwidth: str | float = Field(
        default="400G", description="scale-out bandwidth per GPU (one rail), e.g. '400G'"
    )

    @field_validator("nic_bandwidth")
    @classmethod
    def _nic_positive(cls, v: str | float) -> str | float:
        try:
            bps = parse_bandwidth(v, "nic_bandwidth")
        except ConfigError as e:
            raise ValueError(e.message) from None
        if bps <= 0:
            raise ValueError(
                f"{v!r} is no bandwidth: a NIC of 0 bit/s moves nothing; give e.g. '400G'"
            )
        return v

    efficiency: dict[str, Any] = Field(default_factory=dict, description="efficiency overrides")
    hbm_gib: float | None = Field(
        default=None, gt=0, description="memory per GPU when the SKU differs (A100 40GB)"
    )
    topology: str | dict[str, Any] | None = Field(
        default=None,
        description="cluster (ClusterSpec file or mapping): TP/CP/DP/PP collectives and the "
        "expert all-to-all of the placed ranks are then simulated on it (routing + network "
        "backend) instead of the bus-bandwidth formulas",
    )
    power_limit_w: float | None = Field(
        default=None,
        gt=0,
        description="GPU power cap when below the catalog TDP (e.g. 500 W H100 in Grand "
        "Teton): compute-bound kernels slow by (cap / TDP)^(1/3) (cost.POWER_CLOCK_EXPONENT)",
    )
    network_backend: Literal["analytical", "flow"] = Field(
        default="flow",
        description="flow: max-min fair sharing of NICs and links; analytical: each flow alone "
        "at its bottleneck (congestion-blind)",
    )


@dataclass(frozen=True)
class Layout:
    """A validated parallel layout: group sizes, micro-batch count and layers per chunk."""

    gpus: int
    gpus_per_node: int
    tp: int
    pp: int
    vpp: int
    dp: int
    cp: int
    ep: int
    etp: int
    edp: int
    sp: bool
    micro_batches: int
    stage_layers: tuple[tuple[int, ...], ...]
    """stage_layers[s][c]: layers of virtual chunk c on PP stage s."""
    chunk_first_layer: tuple[tuple[int, ...], ...]
    """chunk_first_layer[s][c]: global index of that chunk's first layer."""
    nic_bytes_per_s: float
    gpu: GPUSpec


def chunk_moe_layers(model: ModelSpec, lay: Layout, s: int, c: int) -> int:
    """MoE layers in virtual chunk c of PP stage s (the model's first `moe_dense_layers` are
    dense)."""
    if not model.is_moe:
        return 0
    first, nl = lay.chunk_first_layer[s][c], lay.stage_layers[s][c]
    return max(0, first + nl - max(first, model.moe_dense_layers))


def zero_shard(ex: ExecutionSpec, lay: Layout) -> int:
    """DP ranks one ZeRO shard group spans: `ex.zero_shard_ranks` when ZeRO is on, the
    layout has no CP and the count divides the DP degree (whole replicas), else the whole
    DP group. Hybrid sharding (Rajbhandari-style ZeRO inside a node or a partition group,
    replicated across them: InternEvo's zero1=N, DeepSpeed MiCS, Zhang et al. VLDB 2022
    section 3) keeps parameter gathers inside the group and moves the gradient sum across
    groups into an all-reduce of each shard (schedule.build_timeline)."""
    k = ex.zero_shard_ranks
    if k is None or ex.zero < 1 or lay.cp > 1 or k >= lay.dp or lay.dp % k:
        return lay.dp
    return k


def uneven_pipeline_layers(layers: int, pp: int) -> tuple[int, ...]:
    """Per-stage layers when pp does not divide the layer count: every stage gets
    ceil(layers/pp) and the missing layers are taken one each from the first and last stage
    (which also hold the embedding and the logits), then from the ends inwards (Llama 3 405B:
    126 layers on 16 stages = 7, 8 x 14, 7; on 128 virtual stages the first holds only the
    embedding and the last only the loss)."""
    if pp < 1 or layers < pp - 2 or layers < 1:
        raise InfeasibleError(
            f"cannot split {layers} layers over pp = {pp} stages", fix="use pp <= layers + 2"
        )
    base = -(-layers // pp)
    out = [base] * pp
    order: list[int] = []
    lo, hi = 0, pp - 1
    while lo <= hi:
        order.append(lo)
        if hi != lo:
            order.append(hi)
        lo, hi = lo + 1, hi - 1
    for s in order[: base * pp - layers]:  # fewer than pp layers are missing
        out[s] -= 1
    return tuple(out)


MOE_ONLY_FIELDS = (
    "moe_flex_backend", "moe_round_robin_routing", "moe_torch_grouped_mm", "ep_dispatch_dtype",
    "moe_atomic_unpermute",
)  # fmt: skip
"""ExecutionSpec fields that configure routed experts: a dense model cannot apply them."""


def check_dense_stack(ex: ExecutionSpec) -> None:
    """Refuse, on a dense model, an MoE-only field (MOE_ONLY_FIELDS) set away from its default:
    it would be silently ignored."""
    for field in MOE_ONLY_FIELDS:
        value = getattr(ex, field)
        if value != ExecutionSpec.model_fields[field].default:
            raise ConfigError(
                f"execution.{field} = {value!r} on a dense model (no routed experts to apply "
                "it to)",
                fix=f"drop {field} or use an MoE model",
            )


def _fail(msg: str, fix: str) -> InfeasibleError:
    return InfeasibleError(msg, fix=fix)


def cp_a2a_ranks(ex: ExecutionSpec, tp: int, gpus_per_node: int) -> int:
    """Hierarchical CP's all-to-all level: `ex.cp_a2a_size`, or when unset the CP ranks that
    share a host (`cp_comm.host_a2a_size`)."""
    if ex.cp_a2a_size is not None:
        return ex.cp_a2a_size
    return host_a2a_size(ex.cp, tp, gpus_per_node)


def cp_split(ex: ExecutionSpec, lay: Layout) -> tuple[int, int]:
    """(all-to-all ranks, ring ranks) of the job's CP group (`cp_comm.cp_levels`)."""
    return cp_levels(ex.cp_algorithm, lay.cp, cp_a2a_ranks(ex, lay.tp, lay.gpus_per_node))


def check_cp_comm(model: ModelSpec, ex: ExecutionSpec, gpus_per_node: int) -> None:
    """TransformerEngine's checks on the CP implementation (cp_comm.py): a hierarchical CP's
    all-to-all level divides cp, and an all-to-all over heads divides the heads (and, unless
    K/V are repeated first, the K/V heads) of a TP rank."""
    if ex.cp <= 1:
        return
    a2a_size = cp_a2a_ranks(ex, ex.tp, gpus_per_node)
    if ex.cp_algorithm == "hierarchical" and ex.cp % a2a_size:
        raise _fail(
            f"hierarchical CP: cp_a2a_size = {a2a_size} does not divide cp = {ex.cp}",
            "give cp_a2a_size (the first of --hierarchical-context-parallel-sizes) a divisor of cp",
        )
    a2a, _ = cp_levels(ex.cp_algorithm, ex.cp, a2a_size)
    heads = model.heads / ex.tp
    kv = max(1.0, model.kv_heads / ex.tp)
    why = a2a_heads_error(heads, kv, a2a, ex.ulysses_repeat_kv)
    if why:
        raise _fail(f"cp = {ex.cp} ({ex.cp_algorithm}): {why}",
                    "use the p2p ring (cp_algorithm: ring) or a smaller cp or tp")  # fmt: skip


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _use(
    key: str,
    candidates: list[int],
    model: ModelSpec,
    ex: ExecutionSpec,
    system: SystemSpec,
    suggest: bool,
) -> str:
    """The fix for a bad `key`: only the candidate values with which the whole layout then
    resolves (each is tried), or, when none does, where to find layouts that work."""
    if not suggest:
        return f"change {key}"
    ok: list[int] = []
    for v in candidates:
        try:
            resolve_layout(model, ex.model_copy(update={key: v}), system, suggest=False)
        except InfeasibleError:
            continue
        ok.append(v)
    if ok:
        return f"use {key} in {ok}"
    name = model.name if model.name in bundled_models() else "CONFIG.json"
    return (
        f"no {key} works with the rest of this layout; `starfabric astral seer search "
        f"{name} --gpus {system.gpus} --global-batch {ex.global_batch} --seq-len "
        f"{ex.seq_len} --gpu {system.gpu} --precision {ex.precision}` lists the layouts that do"
    )


def resolve_layout(
    model: ModelSpec, ex: ExecutionSpec, system: SystemSpec, *, suggest: bool = True
) -> Layout:
    """Check that `ex` can run `model` on `system`; return the resolved layout or say why not.

    With `suggest`, a fix that names values lists only values that were tried and resolve."""
    gpu = get_gpu(system.gpu)
    if system.hbm_gib is not None:
        # a smaller SKU of the chip (A100 40GB) also has its own HBM bandwidth (catalog)
        bw = gpu.hbm_variants.get(float(system.hbm_gib), gpu.hbm_gbps)
        gpu = gpu.model_copy(update={"hbm_gib": system.hbm_gib, "hbm_gbps": bw})
    if ex.precision == "fp8":
        gpu.tflops("fp8")
        check_supported(ex.fp8_recipe, gpu)
        nvfp4.check_supported(ex.fp4_recipe, gpu)
        if ex.fp8_attention is not None:
            fp8_attention.check_supported(gpu, ex.fp8_attention)
        why = fused_grouped_mlp.unfused(model, gpu) if ex.moe_fused_grouped_mlp else None
        if why is not None:
            raise ConfigError(f"moe_fused_grouped_mlp on {why[0]}", fix=why[1])
        if ex.te_mxfp8_stage is not None and not native_mx(gpu):
            raise ConfigError(
                f"te_mxfp8_stage {ex.te_mxfp8_stage!r} on {gpu.name}: TE's MXFP8 expert path "
                "needs Blackwell tensor cores (SM100+)",
                fix="drop te_mxfp8_stage on this GPU, or use a Blackwell GPU",
            )
    if (ex.offload_activations or ex.offload_weights) and not gpu.offload_gib:
        raise _fail(
            f"GPU {gpu.name} has no second memory tier to offload to (hardware catalog: no "
            "offload_gib)",
            "set offload_activations/offload_weights false, or use GH200, GB200 or GB300",
        )
    if ex.offload_modules and not (gpu.offload_gbps or gpu.host_link_gbps):
        raise _fail(
            f"GPU {gpu.name} has no host link to offload the experts' inputs over (hardware "
            "catalog: no offload_gbps or host_link_gbps)",
            "drop offload_modules, or add the GPU's host link to the catalog",
        )
    if ex.optimizer_offload_fraction > 0:
        if not cpu_optimizer_offload.available(gpu):
            raise _fail(
                f"GPU {gpu.name} has no host side in the hardware catalog (host_link_gbps, "
                "host_cores, host_mem_gbps) to offload the optimizer to",
                "set optimizer_offload_fraction 0, or add the host figures to the catalog",
            )
        if ex.offload_weights:
            raise _fail(
                "optimizer_offload_fraction with offload_weights: the weights offload already "
                "keeps the optimizer states in the second memory tier",
                "use one of the two",
            )
        if ex.optimizer_moments != "fp32":
            raise _fail(
                "optimizer_offload_fraction with BF16 moments: Megatron-Core's "
                "HybridDeviceOptimizer builds its CPU and GPU Adams without the moment dtypes "
                "(optimizer/__init__.py @d98e8a64), so both keep fp32 moments",
                "set optimizer_moments fp32 with the offload",
            )
    mp = ex.tp * ex.pp * ex.cp
    tp_candidates = [d for d in _divisors(model.heads) if d <= 64]
    if system.gpus % mp:
        raise _fail(
            f"tp*pp*cp = {ex.tp}*{ex.pp}*{ex.cp} = {mp} does not divide gpus = {system.gpus}",
            _use("tp", tp_candidates, model, ex, system, suggest)
            + f" (or pick pp, cp so that tp*pp*cp divides {system.gpus})",
        )
    dp = ex.dp if ex.dp is not None else system.gpus // mp
    if dp * mp != system.gpus:
        raise _fail(
            f"tp*pp*cp*dp = {mp * dp} but gpus = {system.gpus}",
            "drop 'dp' (it is derived) or make the product equal the GPU count",
        )
    if model.heads % ex.tp:
        raise _fail(
            f"tp = {ex.tp} does not divide heads = {model.heads}",
            _use("tp", tp_candidates, model, ex, system, suggest),
        )
    kv_ok = model.kv_heads % ex.tp == 0 or ex.tp % model.kv_heads == 0
    if not model.is_mla and not kv_ok:
        # Whole query groups are split over TP ranks; with fewer groups than ranks each
        # group's K/V is replicated on tp / kv_heads ranks (MQA/GQA with TP > groups, as
        # StarCoder's MQA on TP4 and Qwen3 with 4 groups on TP8 ran).
        raise _fail(
            f"tp = {ex.tp} and kv_heads = {model.kv_heads}: neither divides the other "
            "(Megatron splits whole query groups over TP ranks, or replicates them)",
            _use("tp", tp_candidates, model, ex, system, suggest),
        )
    if ex.vpp > 1 and ex.pp == 1:
        raise _fail("vpp > 1 needs pp > 1 (virtual stages interleave a pipeline)", "set vpp: 1")
    chunks = ex.pp * ex.vpp
    if ex.pipeline_layers is not None:
        pl = list(ex.pipeline_layers)
        if len(pl) not in (ex.pp, chunks) or (ex.vpp > 1 and len(pl) != chunks):
            raise _fail(
                f"pipeline_layers has {len(pl)} entries; it needs pp = {ex.pp} (vpp = 1) or "
                f"pp*vpp = {chunks} (one per virtual stage, in schedule order)",
                "list one layer count per (virtual) pipeline stage",
            )
        if sum(pl) != model.layers:
            raise _fail(
                f"pipeline_layers {pl} must have pp = {ex.pp} entries "
                f"summing to layers = {model.layers}",
                "list one positive layer count per stage",
            )
        if min(pl[1:-1] or [1]) < 1 or (len(pl) == 1 and pl[0] < 1):
            raise _fail(
                "every pipeline stage needs at least one layer (only the first and last "
                "(virtual) stage, which hold the embedding and the loss, may have none)",
                "fix pipeline_layers",
            )
        # Virtual stage vs = c * pp + s holds pl[vs] layers (Megatron's interleaved order).
        stage_layers: tuple[tuple[int, ...], ...] = tuple(
            tuple(pl[c * ex.pp + s] for c in range(ex.vpp)) for s in range(ex.pp)
        )
        starts = [0]
        for n in pl:
            starts.append(starts[-1] + n)
        first: list[tuple[int, ...]] = [
            tuple(starts[c * ex.pp + s] for c in range(ex.vpp)) for s in range(ex.pp)
        ]
    else:
        if model.layers % chunks:
            hint = (
                f"e.g. pipeline_layers: {list(uneven_pipeline_layers(model.layers, chunks))}"
                if model.layers >= chunks
                else "pick pp*vpp dividing the layer count"
            )
            raise _fail(
                f"layers = {model.layers} not divisible by pp*vpp = {chunks}",
                f"give pipeline_layers per (virtual) stage ({hint})",
            )
        per = model.layers // chunks
        stage_layers = tuple(tuple(per for _ in range(ex.vpp)) for _ in range(ex.pp))
        first = [tuple((c * ex.pp + s) * per for c in range(ex.vpp)) for s in range(ex.pp)]
    most = max(max(c) for c in stage_layers)
    if ex.recompute_num_layers is not None and ex.recompute_num_layers > most:
        raise _fail(
            f"recompute_num_layers = {ex.recompute_num_layers} but a (virtual) pipeline chunk "
            f"holds at most {most} layers (layers = {model.layers}, pp*vpp = {chunks}; "
            "Megatron counts it per chunk)",
            f"give recompute_num_layers <= {most}",
        )
    seqs_per_step = ex.micro_batch * dp
    if ex.global_batch % seqs_per_step:
        raise _fail(
            f"global_batch = {ex.global_batch} not divisible by micro_batch*dp = "
            f"{ex.micro_batch}*{dp} = {seqs_per_step}",
            "make global_batch a multiple of micro_batch*dp",
        )
    m = ex.global_batch // seqs_per_step
    if ex.vpp > 1 and m % ex.pp:
        raise _fail(
            f"interleaved 1F1B needs micro-batches ({m}) to be a multiple of pp = {ex.pp}",
            "change global_batch, micro_batch or pp, or set vpp: 1",
        )
    if ex.pipeline_schedule == "dualpipe" and (ex.pp < 2 or ex.pp % 2 or ex.vpp > 1 or m % 2):
        raise _fail(
            f"dualpipe needs an even pp >= 2 (pp = {ex.pp}), vpp = 1 (vpp = {ex.vpp}) and an "
            f"even number of micro-batches ({m}) (DeepSeek-V3 section 3.2.1)",
            "change pp, vpp or the batch, or set pipeline_schedule: 1f1b",
        )
    if ex.cp > 1 and ex.seq_len % (2 * ex.cp):
        raise _fail(
            f"seq_len = {ex.seq_len} not divisible by 2*cp = {2 * ex.cp} (load-balanced causal CP)",
            _use("cp", _divisors(min(system.gpus, 64)), model, ex, system, suggest),
        )
    check_cp_comm(model, ex, system.gpus_per_node)
    if ex.seq_len % ex.tp and ex.sp and ex.tp > 1:
        raise _fail(
            f"sequence parallelism splits seq_len = {ex.seq_len} over tp = {ex.tp} unevenly",
            "set sp: false or " + _use("tp", tp_candidates, model, ex, system, suggest),
        )
    etp = ex.etp if ex.etp is not None else (1 if ex.ep > 1 else ex.tp)
    if not model.is_moe:
        if ex.ep > 1:
            raise _fail(f"ep = {ex.ep} on a dense model (no experts to distribute)", "set ep: 1")
        check_dense_stack(ex)
        edp = dp
    else:
        if model.moe_experts % ex.ep:
            raise _fail(
                f"ep = {ex.ep} does not divide moe_experts = {model.moe_experts}",
                _use(
                    "ep",
                    [d for d in _divisors(model.moe_experts) if d <= 256],
                    model,
                    ex,
                    system,
                    suggest,
                ),
            )
        inner = ex.tp * ex.cp * dp
        if inner % (ex.ep * etp):
            raise _fail(
                f"ep*etp = {ex.ep}*{etp} must divide tp*cp*dp = {inner} "
                "(experts are laid out over the same GPUs as attention)",
                "lower ep or etp, or raise dp",
            )
        edp = inner // (ex.ep * etp)
    return Layout(
        gpus=system.gpus,
        gpus_per_node=system.gpus_per_node,
        tp=ex.tp,
        pp=ex.pp,
        vpp=ex.vpp,
        dp=dp,
        cp=ex.cp,
        ep=ex.ep,
        etp=etp,
        edp=edp,
        sp=ex.sp and ex.tp > 1,
        micro_batches=m,
        stage_layers=stage_layers,
        chunk_first_layer=tuple(first),
        nic_bytes_per_s=parse_bandwidth(system.nic_bandwidth, "system.nic_bandwidth") / 8.0,
        gpu=gpu,
    )


def check_system(system: SystemSpec) -> None:
    """Reject a system whose GPU count is not whole nodes (placement assumes full nodes)."""
    if system.gpus > system.gpus_per_node and system.gpus % system.gpus_per_node:
        raise ConfigError(
            f"system.gpus = {system.gpus} is not a multiple of gpus_per_node = "
            f"{system.gpus_per_node}",
            fix="use whole nodes",
        )
