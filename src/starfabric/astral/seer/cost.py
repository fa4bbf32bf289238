"""Time of every operator in an OpTable: roofline compute, HBM-bound kernels, collectives.

Compute kernels are timed with the shape-aware efficiency model; collectives with the job's
`CommModel` (formulas, or the collectives models on a built topology: `simcomm.comm_model`).
With TP communication overlap (Megatron `--tp-comm-overlap`) a TP collective hides behind the
adjacent GEMM and only the excess (plus a fixed fraction) is exposed; CP ring traffic hides
behind attention.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer import nvfp4
from starfabric.astral.seer.async_grad_input import ASYNC_GRAD_INPUT
from starfabric.astral.seer.comm import CommModel, Phase, layout_groups
from starfabric.astral.seer.cp_comm import ring_exposed
from starfabric.astral.seer.cudnn_release import not_applied as cudnn_not_applied
from starfabric.astral.seer.cudnn_release import rate_multiplier as cudnn_rate
from starfabric.astral.seer.efficiency import Efficiency, flash_time, gemm_time, mem_time
from starfabric.astral.seer.ep_dispatch_dtype import dispatch_dtype
from starfabric.astral.seer.ep_overlap import pair_exposed_fraction, runs_megatron_overlap
from starfabric.astral.seer.ep_overlap_hidden import realized_exposed_fraction
from starfabric.astral.seer.flash_generation import kernel_rates
from starfabric.astral.seer.fp8_amax_reduction import is_amax_reduction
from starfabric.astral.seer.fp8_attention import Fp8AttentionCurve
from starfabric.astral.seer.fp8_attention import curve as fp8_attention_curve
from starfabric.astral.seer.fp8_recipe import cast_factor, gemm_rate, native_mx
from starfabric.astral.seer.fsdp_cp_window import ring_shares_fsdp_link, ring_window
from starfabric.astral.seer.fsdp_side_window import side_groups, side_window_s, split_exposure
from starfabric.astral.seer.fused_grouped_mlp import FUSED_CASTLESS_GEMMS
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.nccl_a2a_ctas import nccl_alltoall_ctas
from starfabric.astral.seer.ops import BMM, COMM, FLASH, GEMM, MEM, OpTable, moe_imbalance
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, SystemSpec, cp_split
from starfabric.astral.seer.scatter_unpermute import ATOMIC_OPS, atomic_rates
from starfabric.astral.seer.simcomm import comm_model
from starfabric.astral.seer.torch_grouped_mm import EXPERT_GEMMS, expert_gemm_ratio

TP_OVERLAP_RESIDUAL = 0.15
"""With TP comm overlap, this fraction of each TP collective stays exposed (pipeline fill of the
chunked overlap, SMs taken from the GEMM) — assumption."""
FP8_CAST_BYTES = 3.0
"""HBM bytes per element to quantize a GEMM's 16-bit input to FP8 (read 2, write 1); the amax
reduction rides along (Transformer Engine's cast kernels). The delayed-scaling reference: a
stated recipe scales it (`fp8_recipe.cast_factor`)."""
DP_OVERLAP_RESIDUAL = 0.20
"""Data-parallel collectives overlapped with compute (ZeRO-3/FSDP prefetched gathers, bucketed
gradient reduce-scatters under the backward) still cost this fraction of their hidden time:
NCCL kernels take SMs and HBM bandwidth from the GEMMs they run beside — assumption, one value
for both, calibrated on NARAYANAN21_T2 (ZeRO-3 at 384/640 GPUs, where compute and
communication are of similar size) and consistent with the Megatron-Core rows (MLM24)."""
LOGITS_GEMMS = ("head.logits", "head.logits.dgrad", "head.logits.wgrad")
"""The output layer's (LM head) GEMMs, forward and backward (a multi-token-prediction module's
head included: `_named` strips its "mtp<i>." prefix)."""
ROUTER_GEMMS = ("moe.router", "moe.router.dgrad", "moe.router.wgrad")
"""The MoE router's gating GEMMs, forward and backward."""
BF16_GEMMS = (*LOGITS_GEMMS, *ROUTER_GEMMS)
"""GEMMs an FP8 (Transformer Engine) run still executes in BF16; the output layer's leave the
list when the run states Megatron-Core's `fp8_output_proj` (`CostContext.fp8_logits`)."""
FA2_ON_HOPPER = 0.62
"""FlashAttention-2's rate relative to cuDNN's fused attention on Hopper (FlashAttention-3
paper, Shah et al. 2024, H100 BF16 head dim 128 at 16k: forward causal 335 vs 539 TFLOP/s,
backward 322 vs 516: 0.62 both); FA2 has no Hopper-specific path (no WGMMA/TMA). Checked in
training: cudnn-frontend's Llama-3.2-1B benchmark (commit 7606332, H200 at 1500 MHz, cuDNN 9.9
vs PyTorch 2.7's FA2, head dim 64) gives 0.65 from its equal-token pairs
(seer/attention_in_training.py) — against cuDNN 9.9; against the cuDNN 9.1 curve this constant
multiplies (9.9 runs 1.065x faster by cudnn_release) that is 0.69, 11% above 0.62: not a
confirmation, left as the FA3 paper's (docs/astral.md). On Ampere FA2 is the reference kernel
(ratio 1)."""
FA2_ON_BLACKWELL = 0.55
"""FlashAttention-2's rate relative to cuDNN's fused attention on Blackwell: the same
benchmark's B200 run gives 0.55 (summed attention time of its three equal-token pairs, cuDNN
9.9.0 vs PyTorch 2.7's FA2, BF16 causal, head dim 64; 0.54/0.57/0.59 pair by pair) where its
H200 run gives 0.65. FA2's warp-level mma.sync path does not use Blackwell's tcgen05 tensor
cores, so it gains less from the new SM than cuDNN does (FA2 on B200 runs at 1.04x its H200
rate there, cuDNN at 1.23x). Taken for every Blackwell GPU (a catalog MXFP8 peak), B300/GB300
included (assumption: no FA2 measurement on Blackwell Ultra)."""
FUSED_ATTENTION_IN_TRAINING = 0.95
"""cuDNN's fused attention inside a training step runs at this fraction of its isolated-benchmark
curve (the FlashAttention-3 paper's cuDNN curves; efficiency.yaml's Hopper and Blackwell
fractions carry it): measured, not fitted — cudnn-frontend's single-GPU Llama-3.2-1B training
loop (H200 locked at 1,500 MHz, cuDNN 9.9) runs it at 0.953 of the curve at its release
(`attention_in_training.implied_in_training_factor`), and DeepSeek's multi-GPU DualPipe trace
(deepseek-ai/profile-data, H800, DeepEP kernels beside it) shows no slowdown either
(docs/astral.md). Replaced the calibrated global 0.65 (session 19)."""
FA2_PATH_IN_TRAINING = 0.65
"""Calibrated, not measured (an assumption): in-training fraction of the isolated curve for
FlashAttention-2 and older kernels on Hopper and Blackwell (PyTorch SDPA's flash backend: TorchTitan's rows): the global factor calibrated
before session 19 (grid 0.5..1.0 of least mean |error| over the visible rows and both
development sets), kept for the kernels no measurement covers in a multi-GPU step. NOT
explained: the single-GPU cudnn-frontend loop runs FA2 at 0.647 of cuDNN in training (0.62 x
this factor / FUSED_ATTENTION_IN_TRAINING = 0.42 here) — what it absorbs in TorchTitan's runs
is open (docs/astral.md)."""
POWER_CLOCK_EXPONENT = 1.0 / 3.0
"""Sustained clock under a power cap below TDP scales as (cap / TDP)^(1/3): dynamic power is
C V^2 f and voltage tracks frequency over the DVFS range, so P ~ f^3 (CMOS scaling; applied
to compute-bound kernels only, HBM runs on its own clock)."""
EP_COMM_SMS = 20
"""SMs the expert dispatch/combine kernels occupy while they overlap compute: DeepSeek-V3
(section 3.2.2) dedicates 20 of the H800's 132 SMs to them and that saturates IB and NVLink
(DeepEP's `Buffer.num_sms` defaults to the same 20, its README example sets 24); the overlapped
compute runs on the rest. With the DeepEP dispatcher the run's own DeepEP budget replaces it
(`CostContext.ep_comm_sms`)."""
FUSED_EXPERT_GEMMS = ("moe.expert_fc1", "moe.expert_fc2")
"""The routed-expert GEMMs (forward, dgrad, wgrad) a fused dispatch-compute-combine kernel
runs; its all-to-all overlaps these and nothing else of the layer."""
LOGITS_FP32_RATE = "fp32"
"""Catalog rate an FP32 output layer runs at: PyTorch computes FP32 matmuls in full FP32 on
Ampere and later unless TF32 is enabled, and `torch.backends.cuda.matmul.allow_tf32` defaults to
False since PyTorch 1.12 (PyTorch docs, "TensorFloat-32 (TF32) on Ampere (and later) devices");
A100: 19.5 dense TFLOP/s instead of 312 for BF16. The GEMM reaches the same fraction of that
peak as a 16-bit GEMM of its shape (assumption)."""
CP_OVERLAP_RESIDUAL = 0.10
"""Fraction of the ring-attention KV exchange that costs time even when hidden: the P2P
kernels take SMs and HBM bandwidth from the block attention beside them (assumption, as
DP_OVERLAP_RESIDUAL's reasoning)."""


@dataclass(frozen=True)
class CostContext:
    """Everything an operator's time depends on besides its own shape."""

    peak_flops: float
    gemm_peak_flops: float
    gemm_fraction: float
    hbm_bytes_per_s: float
    eff: Efficiency
    comm: CommModel
    """Times every collective (one model per job, chosen by `simcomm.comm_model`)."""
    tp_comm_overlap: bool
    tp_async_backward: bool = False
    """The column-parallel linears' backward grad-input collective runs beside their weight-
    gradient GEMM (`ExecutionSpec.tp_async_backward`, async_grad_input.ASYNC_GRAD_INPUT); the
    hidden part costs DP_OVERLAP_RESIDUAL of itself (assumption: an async NCCL collective beside
    a GEMM slows it as DP's bucketed reductions do)."""
    fp8: bool = False
    fp8_cast_bytes: float = FP8_CAST_BYTES
    """HBM bytes per element of an FP8 GEMM's operand cast: FP8_CAST_BYTES times the stated
    recipe's quantization bytes over delayed scaling's (`fp8_recipe.cast_factor`)."""
    ep_comm_overlap: bool = False
    cp: int = 1
    """Ranks of the CP ring (steps per attention; `cp_comm.cp_levels`): cp for TE's p2p,
    cp / a2a ranks for a2a+p2p, 1 without a ring."""
    fsdp_regather: bool = False
    """Per-parameter ZeRO-3 (DeepSpeed 2021) gathers again when full recompute re-runs a
    layer's forward; flat-buffer FSDP does not (`schedule.full_recompute_cost`)."""
    flash_rate: float = 1.0
    """Fused-attention kernel rate relative to the GPU's calibrated one (cost.fa2_rate; a
    kernel older than FlashAttention-2: `flash_generation.kernel_rates`), forward pass."""
    flash_rate_bwd: float = 1.0
    """The same for the backward pass (the Triton FlashAttention trails FA2 more there)."""
    fused_grouped_mlp: bool = False
    """TE's CuTe-DSL fused grouped MLP (`ExecutionSpec.moe_fused_grouped_mlp`): the GEMMs in
    fused_grouped_mlp.FUSED_CASTLESS_GEMMS pay no cast."""
    fp8_attention: Fp8AttentionCurve | None = None
    """FP8 attention (`ExecutionSpec.fp8_attention`): cuDNN's FP8 fused attention's rate over
    its BF16 one by keys per call, forward and backward (seer/fp8_attention.py; MXFP8 by the
    model's attention shape, seer/mxfp8_attention.py, so `make_context` needs the model there:
    without one the non-MLA curve); None: BF16."""
    logits_flops: float = 0.0
    """Peak FLOP/s of the output-layer GEMMs when they run in FP32 (`LOGITS_FP32_RATE`); 0:
    they run at the job's precision like every other GEMM."""
    fp8_logits: bool = False
    """The output-layer GEMMs of an FP8 run run under its FP8 recipe, cast included
    (`ExecutionSpec.logits_precision` "fp8": Megatron-Core's `fp8_output_proj`, "run the LM-head
    output projection with TE ColumnParallelLinear under MXFP8", transformer_config.py) instead
    of in BF16 (`BF16_GEMMS`)."""
    dualpipe: bool = False
    """DualPipe: the expert all-to-all of a forward chunk hides behind the paired backward
    chunk's compute and vice versa (`pair_ep_overlap`), not within one pass."""
    moe_fused_dispatch: bool = False
    """Dispatch/combine fused with the expert GEMMs (`ExecutionSpec.moe_fused_dispatch`)."""
    ep_fp8_dispatch: bool = True
    """Whether an FP8 run's expert dispatch moves FP8 rows: only where its framework quantizes
    before the dispatch — DeepSeek's DualPipe stack, or a stated `ep_dispatch_dtype: fp8`; BF16
    with Megatron-Core's DeepEP and HybridEP backends and TorchTitan (`ep_dispatch_dtype`)."""
    ep_comm_sms: int = EP_COMM_SMS
    """SMs the expert all-to-all kernels occupy while they overlap compute: DeepEP's budget
    (`ExecutionSpec.deepep_num_sms`, `deepep_sm_budget`) with the DeepEP dispatcher, NCCL's
    blocks (`nccl_a2a_ctas`) with the alltoall dispatcher across nodes, else EP_COMM_SMS."""
    megatron_ep_overlap: bool = False
    """Megatron-Core's combined 1F1B EP overlap runs (`ep_overlap`): a forward and a backward
    layer of two micro-batches hide each other's all-to-all (`schedule.piece_cost`)."""
    ep_delay_wgrad: bool = False
    """`--delay-wgrad-compute` with that overlap (`ep_overlap.pair_step`)."""
    fsdp_side_groups: tuple[str, ...] = ()
    """Intra-host groups whose exposed collectives Megatron-FSDP's cross-host transfers
    overlap (`fsdp_side_window`); empty for other FSDP/ZeRO implementations."""
    ring_fsdp_shared_link: bool = False
    """The CP ring's exchanges and the ZeRO-3/FSDP collectives ride the same link
    (`fsdp_cp_window`): the ring's link time is not FSDP's."""
    expert_gemm_ratio: float = 1.0
    """Factor on the routed-expert GEMMs' peak fraction: PyTorch's BF16 `torch._grouped_mm`
    on Blackwell against a dense GEMM of the same shape (`torch_grouped_mm`); 1 elsewhere."""
    index_add_rate: float = 0.0
    """Elements/s of the MoE permute's backward as PyTorch's BF16 atomic `index_add_`
    (`scatter_unpermute`); 0: priced as streaming memory traffic."""
    scatter_add_rate: float = 0.0
    """The same for the unpermute's forward BF16 atomic `scatter_add_`."""
    scatter_rows_factor: float = 1.0
    """Rows those kernels add on the busiest rank over the operator's own rows (the DeepEP
    path permutes what the rank received: `ops.moe_imbalance`)."""


def _ep_comm_sms(ex: ExecutionSpec, lay: Layout) -> int:
    """SMs the expert all-to-all occupies beside the compute it overlaps: the run's DeepEP
    budget with DeepEP; NCCL's blocks (`nccl_a2a_ctas`) for the alltoall dispatcher across
    nodes; else EP_COMM_SMS (a fused dispatch-compute-combine backend is another kernel)."""
    if ex.moe_fused_dispatch:
        return EP_COMM_SMS
    if ex.moe_dispatcher == "deepep":
        return ex.deepep_num_sms
    ep = layout_groups(ex, lay)["ep"]
    if ep.nodes > 1:
        return nccl_alltoall_ctas(ep.nodes, ep.per_node)
    return EP_COMM_SMS


def is_hopper(gpu: GPUSpec) -> bool:
    """Hopper: FP8 tensor cores without Blackwell's MX block scales (fp8_recipe.native_mx), the
    GPUs cudnn_release's multiplier is measured on."""
    return gpu.dense_tflops.get("fp8", 0.0) > 0 and not native_mx(gpu)


def fa2_rate(gpu: GPUSpec) -> float:
    """FlashAttention-2's fused-attention rate relative to cuDNN's on `gpu`: FA2_ON_BLACKWELL
    on Blackwell (an MXFP8 peak in the catalog), FA2_ON_HOPPER on Hopper (an FP8 peak), 1
    before (FA2 is the reference kernel)."""
    if native_mx(gpu):
        return FA2_ON_BLACKWELL
    return FA2_ON_HOPPER if is_hopper(gpu) else 1.0


def cudnn_release_note(gpu: GPUSpec, ex: ExecutionSpec) -> str | None:
    """Why `ex.cudnn_release` leaves the attention rate as it is on `gpu` (one line,
    cudnn_release.not_applied; unfused attention has no fused kernel), else None."""
    if ex.cudnn_release and ex.attention != "flash":
        return (
            f"cuDNN {ex.cudnn_release} release not applied: attention is unfused (no cuDNN kernel)"
        )
    return cudnn_not_applied(ex.cudnn_release, ex.flash_kernel, is_hopper(gpu), gpu.name)


def attention_rates(gpu: GPUSpec, kernel: str, cudnn_release: str | None) -> tuple[float, float]:
    """(forward, backward) fused-attention rate of `kernel` relative to `gpu`'s in-training cuDNN
    curve: fa2_rate for every kernel but cuDNN's (on Hopper/Blackwell times FA2_PATH_IN_TRAINING
    / FUSED_ATTENTION_IN_TRAINING), times flash_generation's ratio for a kernel older than FA2;
    cuDNN's own at `cudnn_release` on Hopper (cudnn_release.rate_multiplier;
    Hopper: FP8 tensor cores without Blackwell's MX block scales, fp8_recipe.native_mx). The one
    place predict, search, validate and attention_in_training take it from."""
    base = 1.0
    if kernel != "cudnn":
        base = fa2_rate(gpu)
        if native_mx(gpu) or is_hopper(gpu):  # the curve is cuDNN's in training (efficiency.yaml)
            base *= FA2_PATH_IN_TRAINING / FUSED_ATTENTION_IN_TRAINING
    gen_fwd, gen_bwd = kernel_rates(kernel)
    rel_fwd, rel_bwd = cudnn_rate(cudnn_release, kernel, is_hopper(gpu))
    return base * gen_fwd * rel_fwd, base * gen_bwd * rel_bwd


def make_context(
    ex: ExecutionSpec,
    lay: Layout,
    eff: Efficiency,
    system: SystemSpec | None = None,
    model: ModelSpec | None = None,
) -> CostContext:
    """Peaks, efficiencies and the communication model for one job (`system` with a
    `topology`: collectives simulated there, the expert all-to-all of `model` included)."""
    gpu = lay.gpu
    clock = 1.0
    if system is not None and system.power_limit_w is not None:
        clock = min(1.0, system.power_limit_w / gpu.tdp_w) ** POWER_CLOCK_EXPONENT
    peak = gpu.tflops("bf16" if ex.precision != "fp16" else "fp16") * 1e12 * clock
    cast_bytes = FP8_CAST_BYTES
    if ex.precision == "fp8" and ex.fp4_recipe is not None:
        # NVFP4 GEMMs (seer/nvfp4.py): the measured NVFP4/FP8 kernel rate, expressed as a
        # share of the FP4 peak, and the recipe's quantization bytes.
        fp4_peak = nvfp4.gemm_peak_tflops(gpu)
        gemm_peak = fp4_peak * 1e12 * clock
        gemm_frac = (
            eff.fp8_gemm_peak_fraction * nvfp4.rate_over_fp8(gpu) * gpu.tflops("fp8") / fp4_peak
        )
        cast_bytes = FP8_CAST_BYTES * nvfp4.cast_factor(gpu)
    elif ex.precision == "fp8":
        # The calibrated fraction is the tensor-scaled kernel's; block/MX scales run slower
        # kernels and every recipe its own quantization (fp8_recipe, relative to delayed).
        gemm_peak = gpu.tflops("fp8") * 1e12 * clock
        gemm_frac = eff.fp8_gemm_peak_fraction * gemm_rate(ex.fp8_recipe, gpu)
        cast_bytes = FP8_CAST_BYTES * cast_factor(ex.fp8_recipe, gpu)
    else:
        gemm_peak, gemm_frac = peak, eff.gemm_peak_fraction
    # FA2 and older kernels at fa2_rate (x flash_generation's ratio); cuDNN's at its release.
    flash_fwd, flash_bwd = attention_rates(gpu, ex.flash_kernel, ex.cudnn_release)
    # TorchTitan's DeepEP unpermute: BF16 atomic scatters at their measured rate (Blackwell).
    index_add, scatter_add = atomic_rates(gpu, ex.moe_atomic_unpermute)
    return CostContext(
        peak_flops=peak,
        gemm_peak_flops=gemm_peak,
        gemm_fraction=gemm_frac,
        hbm_bytes_per_s=gpu.hbm_gbps * 1e9,
        eff=eff,
        comm=comm_model(ex, lay, eff, system, model),
        tp_comm_overlap=ex.tp_comm_overlap,
        # a deferred wgrad GEMM (--delay-wgrad-compute) leaves nothing between launch and wait
        tp_async_backward=ex.tp_async_backward and not ex.ep_delay_wgrad,
        fp8=ex.precision == "fp8",
        fp8_cast_bytes=cast_bytes,
        ep_comm_overlap=ex.ep_comm_overlap,
        dualpipe=ex.pipeline_schedule == "dualpipe",
        moe_fused_dispatch=ex.moe_fused_dispatch,
        ep_fp8_dispatch=dispatch_dtype(ex) == "fp8",
        # A fused dispatch-compute-combine backend is another kernel than DeepEP's (as comm.py).
        ep_comm_sms=_ep_comm_sms(ex, lay),
        # Megatron's combined 1F1B pairs separate dispatch/combine kernels; a fused
        # dispatch-compute-combine kernel (TorchTitan DistMoE) keeps its own rule (op_costs).
        megatron_ep_overlap=(
            ex.ep_comm_overlap
            and ex.pipeline_schedule != "dualpipe"
            and not ex.moe_fused_dispatch
            and runs_megatron_overlap(lay.pp, lay.vpp)
        ),
        ep_delay_wgrad=ex.ep_delay_wgrad,
        fsdp_side_groups=side_groups(ex, lay),
        ring_fsdp_shared_link=ring_shares_fsdp_link(ex, lay),
        expert_gemm_ratio=expert_gemm_ratio(gpu, ex.moe_torch_grouped_mm, ex.precision == "fp8"),
        index_add_rate=index_add,
        scatter_add_rate=scatter_add,
        scatter_rows_factor=moe_imbalance(ex),
        cp=cp_split(ex, lay)[1],
        flash_rate=flash_fwd,
        flash_rate_bwd=flash_bwd,
        fused_grouped_mlp=ex.moe_fused_grouped_mlp,
        fp8_attention=(
            fp8_attention_curve(gpu, ex.fp8_attention, model is not None and model.is_mla)
            if ex.fp8_attention is not None
            else None
        ),
        fsdp_regather=ex.fsdp_collectives == "parameter",
        logits_flops=(
            gpu.tflops(LOGITS_FP32_RATE) * 1e12 * clock if ex.logits_precision == "fp32" else 0.0
        ),
        fp8_logits=ex.logits_precision == "fp8",
    )


@dataclass(frozen=True)
class OpCosts:
    """Per-operator seconds: `time` is the raw duration, `exposed` what lands on the critical
    path (collectives hidden by overlap count less)."""

    time: np.ndarray[Any, np.dtype[np.float64]]
    exposed: np.ndarray[Any, np.dtype[np.float64]]
    kind: np.ndarray[Any, np.dtype[np.int64]]


_MTP_PREFIX = re.compile(r"^mtp\d+\.")


def _named(t: OpTable, test: Callable[[str], bool]) -> np.ndarray:
    """Mask of `t`'s operators whose name passes `test`, also inside a multi-token-prediction
    module (`ops.mtp_ops` names its block "mtp<i>.")."""
    return np.fromiter((test(_MTP_PREFIX.sub("", n)) for n in t.name), bool, len(t))


def _gemms_named(t: OpTable, kind: np.ndarray, prefix: str | tuple[str, ...]) -> np.ndarray:
    """Mask of `t`'s GEMMs whose operator name starts with `prefix` (one or several)."""
    return (kind == GEMM) & _named(t, lambda n: n.startswith(prefix))


def op_costs(
    t: OpTable, ctx: CostContext, backward: bool = False, fsdp_window_s: float = 0.0
) -> OpCosts:
    """Time every operator of `t`. `fsdp_window_s`: compute outside `t` that runs in the same
    window as its ZeRO-3/FSDP collectives (full recompute's re-run forward, `recompute_window`)."""
    a = t.arrays()
    kind = a["kind"]
    time = np.zeros(len(t))
    eff = ctx.eff
    g = kind == GEMM
    if ctx.fp8:
        # Transformer Engine runs FP8 only inside the transformer layers' TE linears; the
        # output layer (logits) and the MoE router stay in BF16 (Megatron-Core/NeMo, DeepSeek-V3
        # section 3.3.1), so they take the 16-bit path below.
        # Megatron-Core's fp8_output_proj moves the LM head onto the FP8 path (fp8_logits).
        bf16 = ROUTER_GEMMS if ctx.fp8_logits else BF16_GEMMS
        bf = g & np.fromiter((n.endswith(bf16) for n in t.name), bool, len(t))
        g = g & ~bf
        if bf.any():
            time[bf] = gemm_time(
                a["m"][bf], a["n"][bf], a["k"][bf], a["batch"][bf], ctx.peak_flops,
                ctx.hbm_bytes_per_s, eff, peak_fraction=eff.gemm_peak_fraction,
            )  # fmt: skip
    if g.any():
        time[g] = gemm_time(
            a["m"][g], a["n"][g], a["k"][g], a["batch"][g], ctx.gemm_peak_flops,
            ctx.hbm_bytes_per_s, eff, peak_fraction=ctx.gemm_fraction,
        )  # fmt: skip
        if ctx.fp8:
            # FP8 GEMMs first quantize their 16-bit activation operand (read 2 B, write 1 B
            # under delayed scaling; the stated recipe's bytes otherwise) unless a fused grouped
            # MLP's epilogue wrote it (fused_grouped_mlp.py).
            cast = g
            if ctx.fused_grouped_mlp:
                cast = g & ~_named(t, FUSED_CASTLESS_GEMMS.__contains__)
            time[cast] += mem_time(
                ctx.fp8_cast_bytes * a["m"][cast] * a["k"][cast] * a["batch"][cast],
                ctx.hbm_bytes_per_s, eff,
            )  # fmt: skip
    if ctx.expert_gemm_ratio != 1.0:
        # TorchTitan's routed experts as torch._grouped_mm (torch_grouped_mm): the CUTLASS
        # grouped kernel's measured fraction of a dense GEMM's rate.
        xg = _gemms_named(t, kind, EXPERT_GEMMS)
        if xg.any():
            frac = ctx.gemm_fraction * ctx.expert_gemm_ratio
            time[xg] = gemm_time(
                a["m"][xg], a["n"][xg], a["k"][xg], a["batch"][xg], ctx.gemm_peak_flops,
                ctx.hbm_bytes_per_s, eff, peak_fraction=frac,
            )  # fmt: skip
    if ctx.logits_flops > 0:
        # An FP32 output layer (ExecutionSpec.logits_precision): its GEMMs at the FP32 rate.
        lg = _gemms_named(t, kind, "head.logits")
        if lg.any():
            time[lg] = gemm_time(
                a["m"][lg], a["n"][lg], a["k"][lg], a["batch"][lg], ctx.logits_flops,
                ctx.hbm_bytes_per_s, eff, peak_fraction=eff.gemm_peak_fraction,
            )  # fmt: skip
    b = kind == BMM
    if b.any():
        time[b] = gemm_time(
            a["m"][b], a["n"][b], a["k"][b], a["batch"][b], ctx.peak_flops,
            ctx.hbm_bytes_per_s, eff, peak_fraction=eff.bmm_peak_fraction,
        )  # fmt: skip
    f = kind == FLASH
    rate = ctx.flash_rate_bwd if backward else ctx.flash_rate
    flash_flops = a["flops"][f]
    if ctx.fp8_attention is not None:
        # cuDNN's FP8 kernels: their measured rate over BF16 at each call's keys per query
        # (fp8_attention.py); the per-call overhead stays.
        flash_flops = flash_flops / ctx.fp8_attention.rate(a["k"][f], backward)
    time[f] = flash_time(flash_flops, a["k"][f], ctx.peak_flops * rate, eff, backward)
    m = kind == MEM
    time[m] = mem_time(a["nbytes"][m], ctx.hbm_bytes_per_s, eff)
    atomic_rate = ctx.index_add_rate if backward else ctx.scatter_add_rate
    if atomic_rate > 0:
        # TorchTitan's DeepEP permute backward / unpermute forward (scatter_unpermute): ATen's
        # BF16 atomic index_add_ / scatter_add_, timed per element added at the measured rate.
        at = (kind == MEM) & _named(t, ATOMIC_OPS.__contains__)
        time[at] = a["m"][at] * ctx.scatter_rows_factor * a["n"][at] / atomic_rate
    exposed = time.copy()
    partners = _async_partners(t) if backward and ctx.tp_async_backward else {}
    for i in np.flatnonzero(kind == COMM):
        name, coll, grp = t.name[i], t.coll[i], t.group[i]
        phase: Phase | None = None
        fp8 = False
        if grp == "ep" and coll == "all_to_all":
            # A backward pass moves gradients the opposite way: dispatch's backward travels
            # like a combine, in 16 bit.
            bwd = name.endswith(".bwd")
            phase = "dispatch" if ("dispatch" in name) != bwd else "combine"
            fp8 = ctx.fp8 and ctx.ep_fp8_dispatch and "dispatch" in name and not bwd
        dur = ctx.comm.time(coll, float(a["nbytes"][i]), grp, phase=phase, fp8=fp8)  # type: ignore[arg-type]
        time[i] = dur
        exposed[i] = dur
        if t.group[i] == "tp" and ctx.tp_comm_overlap and not is_amax_reduction(name):
            # (the amax reduction sits between the amax kernel and the cast: no GEMM hides it)
            partner = _adjacent_gemm(kind, int(i))
            hide = time[partner] if partner >= 0 else 0.0
            exposed[i] = max(0.0, dur - hide) + TP_OVERLAP_RESIDUAL * dur
        elif int(i) in partners:
            # Megatron / Apex / TE column-parallel linear (async_grad_input): the grad-input
            # all-reduce / reduce-scatter is launched async_op=True before the weight-gradient
            # GEMM; the NCCL kernels beside it cost DP_OVERLAP_RESIDUAL of the hidden time.
            hide = float(time[partners[int(i)]])
            exposed[i] = max(0.0, dur - hide) + DP_OVERLAP_RESIDUAL * min(dur, hide)
        elif t.group[i] in ("cp", "cp_p2p") and ctx.cp > 1 and coll == "p2p":
            # TransformerEngine's ring (AttnFuncWithCPAndKVP2P, cp_comm.py): while step j's
            # block attention runs, the KV block for step j+1 is in flight (backward: the
            # KV and dKV blocks of step j); the load-balanced split gives every step the
            # same work (1/ring of the rank's attention), so each exchange is exposed by
            # what it exceeds one step's attention.
            step_attn = _attn_time(t, time) / ctx.cp
            exposed[i] = ring_exposed(dur, step_attn, ctx.cp, backward)
            exposed[i] += CP_OVERLAP_RESIDUAL * dur
    grp_names = np.asarray(t.group)
    ep = (kind == COMM) & ((grp_names == "ep") | (grp_names == "etp"))
    # Megatron's EP overlap pairs a forward with a backward layer (`pair_megatron_overlap`,
    # called per piece), DualPipe its chunks (`pair_ep_overlap`): a pass alone hides nothing.
    if ctx.moe_fused_dispatch and ep.any():
        # Fused dispatch-compute-combine (TorchTitan DistMoE): tokens stream from the
        # dispatch into the grouped expert GEMMs and out to the combine inside one kernel,
        # so the pass's all-to-all hides behind the same pass's expert GEMMs (not the whole
        # layer); the excess stays exposed and the GEMMs run on the SMs the transfers leave.
        experts = _gemms_named(t, kind, FUSED_EXPERT_GEMMS)
        total = float(time[ep].sum())
        frac = _ep_exposed_fraction(total, float(time[experts].sum()), ctx)
        exposed[ep] = time[ep] * frac
    _fsdp_exposed(grp_names, np.asarray(t.coll), time, exposed, kind, ctx, fsdp_window_s)
    return OpCosts(time=time, exposed=exposed, kind=kind)


def _fsdp_exposed(
    grp_names: np.ndarray[Any, Any],
    colls: np.ndarray[Any, Any],
    time: np.ndarray[Any, Any],
    exposed: np.ndarray[Any, Any],
    kind: np.ndarray[Any, Any],
    ctx: CostContext,
    fsdp_window_s: float,
) -> None:
    """Set `exposed` of the ZeRO-3/FSDP collectives in place from the other operators' (the
    CP ring's exchanges share the window, `fsdp_cp_window`)."""
    fsdp = (kind == COMM) & ((grp_names == "fsdp_dp") | (grp_names == "fsdp_edp"))
    if fsdp.any():
        # ZeRO-3 gathers/reductions are prefetched on their own stream: together they hide
        # behind the layer's compute; only the excess stays on the critical path.
        # Megatron-FSDP's also run while the layer waits on intra-host collectives
        # (`fsdp_side_window`: their exposed time, computed above, is free link time).
        total = float(time[fsdp].sum())
        compute = float(time[kind != COMM].sum()) + fsdp_window_s
        side = side_window_s(grp_names, kind == COMM, exposed, ctx.fsdp_side_groups)
        # The ring's exchanges run in the same window (`fsdp_cp_window`): on the same link
        # their time is not FSDP's; on another, the compute stream's stall on them is.
        compute, stall = ring_window(
            compute, grp_names, colls, kind == COMM, time, exposed,
            ctx.ring_fsdp_shared_link, ctx.fsdp_side_groups,
        )  # fmt: skip
        side += stall
        excess = split_exposure(total, compute, side, DP_OVERLAP_RESIDUAL)
        exposed[fsdp] = time[fsdp] * (excess / total if total > 0 else 0.0)


def refit_fsdp_side(
    t: OpTable, c: OpCosts, ctx: CostContext, fsdp_window_s: float = 0.0
) -> OpCosts:
    """`c` after an EP overlap changed its all-to-all exposure (`pair_megatron_overlap`,
    `pair_ep_overlap`): a Megatron-FSDP transfer's side window is the intra-host wait that
    is left, so its exposure is split again; unchanged without side groups."""
    if not ctx.fsdp_side_groups:
        return c
    exposed = c.exposed.copy()
    _fsdp_exposed(
        np.asarray(t.group), np.asarray(t.coll), c.time, exposed, c.kind, ctx, fsdp_window_s
    )
    return OpCosts(time=c.time, exposed=exposed, kind=c.kind)


def pair_ep_overlap(
    fwd: OpTable, fc: OpCosts, bwd: OpTable, bc: OpCosts, ctx: CostContext
) -> tuple[OpCosts, OpCosts]:
    """DualPipe's compute/communication overlap (DeepSeek-V3 section 3.2.1, Figure 4): a
    forward chunk and a backward chunk of two micro-batches run together, each one's
    dispatch/combine under the other's attention, MLP and expert GEMMs; only the all-to-all
    time beyond the pair's compute stays exposed, shared pro rata."""
    masks = [_ep_mask(t, c) for t, c in ((fwd, fc), (bwd, bc))]
    total = float(fc.time[masks[0]].sum() + bc.time[masks[1]].sum())
    compute = float(fc.time[fc.kind != COMM].sum() + bc.time[bc.kind != COMM].sum())
    frac = _ep_exposed_fraction(total, compute, ctx)
    return _ep_exposed(fc, masks[0], frac), _ep_exposed(bc, masks[1], frac)


def pair_megatron_overlap(
    fwd: OpTable, fc: OpCosts, bwd: OpTable, bc: OpCosts, ctx: CostContext
) -> tuple[OpCosts, OpCosts]:
    """Megatron-Core's combined 1F1B step (`ep_overlap`): a MoE layer's forward and another
    micro-batch's backward of it on two streams; the all-to-all time the step leaves on the
    critical path is shared pro rata by both passes' all-to-alls."""
    masks = [_ep_mask(t, c) for t, c in ((fwd, fc), (bwd, bc))]
    if not (masks[0].any() and masks[1].any()):
        return fc, bc
    sm = min(0.5, ctx.ep_comm_sms / ctx.eff.sms)
    frac = pair_exposed_fraction(
        fwd, fc.time, fc.exposed, fc.kind, bwd, bc.time, bc.exposed, bc.kind, COMM, sm,
        ctx.ep_delay_wgrad,
    )  # fmt: skip
    # the runs hide only part of what the stream replay hides (`ep_overlap_hidden`, PR #6311)
    frac = realized_exposed_fraction(frac)
    return _ep_exposed(fc, masks[0], frac), _ep_exposed(bc, masks[1], frac)


def _ep_exposed(c: OpCosts, mask: np.ndarray, frac: float) -> OpCosts:
    """`c` with the all-to-all operators under `mask` exposed for `frac` of their time."""
    exposed = c.exposed.copy()
    exposed[mask] = c.time[mask] * frac
    return OpCosts(time=c.time, exposed=exposed, kind=c.kind)


def _ep_exposed_fraction(total: float, compute: float, ctx: CostContext) -> float:
    """Share of the expert all-to-all time that lands on the critical path when it overlaps
    `compute` of another micro-batch: the excess over the compute, plus the compute slowed
    by the SMs the communication kernels occupy while they run (`CostContext.ep_comm_sms`;
    charged to the all-to-all so the breakdown shows it)."""
    if total <= 0:
        return 0.0
    hidden = min(total, compute)
    sm = min(0.5, ctx.ep_comm_sms / ctx.eff.sms)
    slowdown = hidden * sm / (1.0 - sm)
    return (max(0.0, total - compute) + slowdown) / total


def _ep_mask(t: OpTable, c: OpCosts) -> np.ndarray[Any, Any]:
    grp = np.asarray(t.group)
    return (c.kind == COMM) & ((grp == "ep") | (grp == "etp"))


def _async_partners(t: OpTable) -> dict[int, int]:
    """Index of each backward grad-input TP collective of a column-parallel linear in `t`
    (`async_grad_input.ASYNC_GRAD_INPUT`, also inside an MTP module) -> its weight-gradient GEMM."""
    index = {n: j for j, n in enumerate(t.name)}
    out: dict[int, int] = {}
    for i, name in enumerate(t.name):
        prefix = name[: len(name) - len(_MTP_PREFIX.sub("", name))]
        partner = ASYNC_GRAD_INPUT.get(name[len(prefix) :])
        if partner is not None and prefix + partner in index and t.group[i] == "tp":
            out[i] = index[prefix + partner]
    return out


def _adjacent_gemm(kind: np.ndarray[Any, Any], i: int) -> int:
    """Index of the GEMM next to collective `i` (the one it is fused with under overlap)."""
    for j in (i + 1, i - 1, i + 2, i - 2):
        if 0 <= j < len(kind) and kind[j] == GEMM:
            return j
    return -1


def _attn_time(t: OpTable, time: np.ndarray[Any, Any]) -> float:
    kind = np.asarray(t.kind)
    return float(time[(kind == FLASH) | (kind == BMM)].sum())
