"""Fused attention inside a multi-GPU training step, measured from DeepSeek's profiler trace.

DeepSeek's deepseek-ai/profile-data (commit 4496024) publishes a PyTorch-profiler trace of rank 0
of its DeepSeek-V3 training setup (DualPipe, EP 64, TP 1, 4K sequences, H800), one forward and
one backward chunk of 4 MoE layers each, with DeepEP's all-to-all kernels running on 20 SMs
beside the compute. Its FlashAttention-3 kernels (DeepSeek's fork: MLA, query/key head dim 192,
value head dim 128, causal, 128 heads, one 4,096-token sequence) are transcribed with their
shapes and neighbours in tests/data/attention/deepseek_profile_attention.csv
(scripts/deepseek_profile_attention.py, seer/flash_trace.py).

Here each kernel's FLOPs are counted as Seer's op table counts them (`ops._attention`: forward
2 * tokens * keys * heads * (d_qk + d_v) with keys = seq/2 causal, no diagonal term; backward
`ops.FLASH_BWD_FLOPS_FACTOR` x the forward; the pre/post-processing kernels add time, no FLOPs)
and set beside Seer's ISOLATED Hopper curve: efficiency.yaml's fused-attention fractions (the
FlashAttention-3 paper's cuDNN curve at head dim 128, x FUSED_ATTENTION_IN_TRAINING) divided by
that factor, at the rate `seer predict` gives cuDNN with no stated release (`cost.attention_rates`:
Seer has no FlashAttention-3 kernel; its default kernel is cuDNN's 9.1 curve), at the catalog's
dense BF16 peak (H800 = H100 SXM, 989.4 TFLOP/s; the trace and README state no clock). The curve
does not depend on head dim.

The implied in-training factor is the factor on the isolated curve that makes Seer's time
(`efficiency.flash_time`: main loop / (peak * fraction) + one kernel overhead per call) equal the
measured one, over a set of kernels: FUSED_ATTENTION_IN_TRAINING x Seer's in-training main-loop
seconds / (measured seconds - Seer's overheads). "With pre/post" adds the backward's pre- and
post-processing kernels to the measured backward (the FA3 paper times the whole backward call).

Every kernel here runs beside DeepEP kernels (comm_overlap_fraction ~ 1). An attention block
(registers per thread x threads) and a DeepEP block do not fit one SM's register file together,
so during the overlap the attention kernel has the GPU's SMs less the DeepEP blocks.
`free_gpu_seconds` scales the measured time to the whole GPU — the accounting Seer itself uses,
which prices compute at the whole GPU and charges the SMs the all-to-all holds to the all-to-all
(`cost._ep_exposed_fraction`).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.cost import FUSED_ATTENTION_IN_TRAINING, attention_rates
from starfabric.astral.seer.efficiency import efficiency_for, flash_time
from starfabric.astral.seer.flash_trace import KINDS
from starfabric.astral.seer.ops import FLASH_BWD_FLOPS_FACTOR
from starfabric.errors import ConfigError

TRACE_GPU = "H800"
"""The GPU of the trace (deviceProperties: "NVIDIA H800", 132 SMs, compute capability 9.0): the
H100's SXM silicon with fewer NVLinks; the catalog gives it the H100 SXM's dense BF16 peak."""

REGISTERS_PER_SM = 65536
"""32-bit registers per SM on Hopper (the trace's deviceProperties regsPerMultiprocessor; NVIDIA
H100 whitepaper): two blocks share an SM only if their registers fit together."""

BACKWARD_KINDS = ("bwd", "bwd_pre", "bwd_post")


@dataclass(frozen=True)
class ProfileKernel:
    """One row of deepseek_profile_attention.csv (the columns Seer uses)."""

    trace: str
    mode: str
    call: int
    kind: str
    duration_us: float
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    regs_per_thread: int
    tile_m: int
    tile_n: int
    seq: int
    heads: int
    batch: int
    d_qk: int
    d_v: int
    causal: bool
    comm_overlap_fraction: float
    comm_blocks_max: int
    comm_regs_per_block_min: int

    @property
    def tile(self) -> int:
        """The tile the grid's x dimension runs over (key blocks for the backward)."""
        return self.tile_n if self.kind == "bwd" else self.tile_m


def _dims(cell: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in cell.split("x"))
    return a, b, c


def _flag(cell: str) -> bool:
    if cell not in ("true", "false"):
        raise ValueError(f"{cell!r} is not true/false")
    return cell == "true"


def read_profile(path: Path) -> list[ProfileKernel]:
    """The CSV's rows (`#` lines are provenance); a malformed cell is a ConfigError."""
    rows: list[ProfileKernel] = []
    with path.open() as fh:
        lines = (ln for ln in fh if not ln.startswith("#"))
        for n, r in enumerate(csv.DictReader(lines), start=2):
            try:
                k = ProfileKernel(
                    trace=r["trace"], mode=r["mode"], call=int(r["call"]), kind=r["kind"],
                    duration_us=float(r["duration_us"]), grid=_dims(r["grid"]),
                    block=_dims(r["block"]), regs_per_thread=int(r["regs_per_thread"]),
                    tile_m=int(r["tile_m"]), tile_n=int(r["tile_n"]), seq=int(r["seq"]),
                    heads=int(r["heads"]), batch=int(r["batch"]), d_qk=int(r["d_qk"]),
                    d_v=int(r["d_v"]), causal=_flag(r["causal"]),
                    comm_overlap_fraction=float(r["comm_overlap_fraction"]),
                    comm_blocks_max=int(r["comm_blocks_max"]),
                    comm_regs_per_block_min=int(r["comm_regs_per_block_min"]),
                )  # fmt: skip
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ConfigError(
                    f"{path}: data row {n}: {exc}",
                    fix="regenerate with scripts/deepseek_profile_attention.py",
                ) from None
            if k.kind not in KINDS or k.duration_us <= 0 or k.seq <= 0 or k.heads <= 0:
                raise ConfigError(
                    f"{path}: data row {n}: kind {k.kind!r}, duration_us {k.duration_us}",
                    fix=f"kind one of {', '.join(KINDS)}; positive duration, seq, heads",
                )
            rows.append(k)
    return rows


def forward_flops(k: ProfileKernel) -> float:
    """The forward FLOPs of `k`'s attention call, counted as `ops._attention` counts them."""
    keys = k.seq / 2.0 if k.causal else float(k.seq)
    return 2.0 * k.batch * k.seq * keys * k.heads * (k.d_qk + k.d_v)


def kernel_flops(k: ProfileKernel) -> float:
    """FLOPs Seer counts for the kernel: the forward's; FLASH_BWD_FLOPS_FACTOR x for the backward
    main kernel; none for pre/post-processing (its time belongs to the backward call)."""
    if k.kind == "fwd":
        return forward_flops(k)
    return FLASH_BWD_FLOPS_FACTOR * forward_flops(k) if k.kind == "bwd" else 0.0


def peak_flops(gpu: str = TRACE_GPU) -> float:
    """The catalog's dense BF16 peak, FLOP/s (clock not stated by the trace)."""
    return get_gpu(gpu).tflops("bf16") * 1e12


def seer_seconds(k: ProfileKernel, gpu: str = TRACE_GPU) -> tuple[float, float]:
    """(main-loop seconds at Seer's in-training curve, Seer's per-call overhead) for `k`'s FLOPs:
    `flash_time` at `cost.attention_rates` for cuDNN with no stated release; (0, 0) for the
    pre/post-processing kernels, which Seer's backward call covers."""
    if k.kind not in ("fwd", "bwd"):
        return 0.0, 0.0
    g = get_gpu(gpu)
    eff = efficiency_for(g)
    rate_f, rate_b = attention_rates(g, "cudnn", None)
    bwd = k.kind == "bwd"
    keys = k.seq / 2.0 if k.causal else float(k.seq)
    f = np.array(kernel_flops(k))
    t = float(flash_time(f, np.array(keys), peak_flops(gpu) * (rate_b if bwd else rate_f), eff,
                         backward=bwd))  # fmt: skip
    return t - eff.kernel_overhead_s, eff.kernel_overhead_s


def isolated_rate(k: ProfileKernel, gpu: str = TRACE_GPU) -> float:
    """Seer's isolated-curve rate (TFLOP/s) for `k`'s shape: its in-training curve divided by
    FUSED_ATTENTION_IN_TRAINING (its main loop that fraction as long), with one kernel overhead."""
    loop, over = seer_seconds(k, gpu)
    return kernel_flops(k) / (loop * FUSED_ATTENTION_IN_TRAINING + over) / 1e12


def comm_sm_share(k: ProfileKernel, sms: int | None = None) -> float:
    """Share of the GPU's SMs the communication kernels beside `k` hold from it: their blocks
    over the SMs when an attention block and one of theirs overflow one SM's register file
    together (one block per SM each), else 0."""
    n = sms if sms is not None else efficiency_for(get_gpu(TRACE_GPU)).sms
    attn_regs = k.regs_per_thread * int(np.prod(k.block))
    if k.comm_blocks_max <= 0 or attn_regs + k.comm_regs_per_block_min <= REGISTERS_PER_SM:
        return 0.0
    return min(1.0, k.comm_blocks_max / n)


def free_gpu_seconds(k: ProfileKernel) -> float:
    """`k`'s measured seconds scaled to the whole GPU: during its overlap with communication
    kernels it ran on (1 - comm_sm_share) of the SMs.
    Assumption: the kernel's rate is proportional to the SMs it has (4,096 blocks in waves)."""
    t = k.duration_us * 1e-6
    return t * (1.0 - k.comm_overlap_fraction * comm_sm_share(k))


def implied_factor(
    rows: Iterable[ProfileKernel], kinds: Iterable[str], free_gpu: bool = False,
    gpu: str = TRACE_GPU,
) -> float:  # fmt: skip
    """The in-training factor on Seer's isolated curve that reproduces the measured time of the
    training rows of `kinds` (summed: weighted by time, i.e. by FLOPs at equal rates);
    `free_gpu`: measured times scaled to the whole GPU (`free_gpu_seconds`)."""
    ks = set(kinds)
    sel = [k for k in rows if k.kind in ks and k.mode == "training"]
    if not any(k.kind in ("fwd", "bwd") for k in sel):
        raise ConfigError(f"no training fwd/bwd kernels among kinds {sorted(ks)}",
                          fix="give the rows of deepseek_profile_attention.csv")  # fmt: skip
    loop = over = meas = 0.0
    for k in sel:
        lp, ov = seer_seconds(k, gpu)
        loop, over = loop + lp, over + ov
        meas += free_gpu_seconds(k) if free_gpu else k.duration_us * 1e-6
    return FUSED_ATTENTION_IN_TRAINING * loop / (meas - over)


def measured_rate(
    rows: Iterable[ProfileKernel], kinds: Iterable[str], free_gpu: bool = False
) -> float:
    """Summed FLOPs over summed measured seconds of the training rows of `kinds`, TFLOP/s."""
    ks = set(kinds)
    sel = [k for k in rows if k.kind in ks and k.mode == "training"]
    t = sum(free_gpu_seconds(k) if free_gpu else k.duration_us * 1e-6 for k in sel)
    if t <= 0:
        raise ConfigError(f"no training kernels among kinds {sorted(ks)}", fix="give the rows")
    return sum(kernel_flops(k) for k in sel) / t / 1e12
