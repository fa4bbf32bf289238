"""PyTorch's `torch._grouped_mm` in BF16 on Blackwell, at its measured rate.

**What runs.** TorchTitan's MoE computes the routed experts with `torch._grouped_mm`
(pytorch/torchtitan @5d4bdd0 `torchtitan/models/moe/moe.py`: `MoEArgs.use_grouped_mm = True`,
`_run_experts_grouped_mm`: three grouped GEMMs per pass, `w1` and `w3` separately, then `w2`,
all cast to bfloat16; the for-loop over experts is kept only "for comparison"). The DeepEP
path of the same tree (`ExpertParallelDeepEP` in `torchtitan/distributed/expert_parallel.py`)
hands DeepEP's received, permuted tokens to the same `GroupedExperts`. On sm_90/sm_100 with
BF16 operands PyTorch runs its CUTLASS grouped kernel (`_grouped_mm_cuda`: "fast path, no d2h
sync needed", `bf16bf16_grouped_mm`; SM100 support in pytorch/pytorch#156203), not cuBLAS.

**Its measured rate.** torchao's MoE-training README (pytorch/ao @ff163084e, 2025-10-14,
"update benchmarks using more reliable b200 gpu") times `torch._grouped_mm` forward + backward
in BF16 on one B200 (`benchmarks/prototype/moe_training/benchmark_scaled_grouped_mm_dq.py
--compile`, torch 2.10.0a0, total M = 128,000 rows in G = 1..8 jagged groups): Llama4 shapes
(N 8,192, K 5,120) 37.7-43.1 ms, DeepSeek-V3 shapes (N 2,048, K 7,168) 13.1-15.8 ms
(tests/data/gemm/torchao_grouped_mm_b200.csv). Each timing is the forward GEMM, its dgrad and
wgrad plus the benchmark's own MSE loss forward and backward and the gradient accumulation into
A.grad and B.grad (`benchmarks/utils.py`: `do_bench` without `grad_to_none`), priced here at
Seer's HBM rate (`benchmark_overhead_bytes`). Fitted through Seer's GEMM shape model
(`efficiency.gemm_time`), these eight timings saturate at 0.405 of the BF16 peak (mean |log
error| 4.7%), where OpenXLA's measured dense B200 GEMM table saturates at 0.72 (the fit behind
Blackwell's `gemm_peak_fraction`, efficiency.yaml). So the grouped kernel reaches
`GROUPED_MM_BF16_SM100_RATIO` = 0.405 / 0.72 of a dense GEMM of the same shape, and Seer's
in-training fraction for those GEMMs is the dense one times that ratio — the same derivation as
Blackwell's dense fraction from Hopper's. tests/astral/seer/test_torch_grouped_mm.py re-fits both
tables and checks the constant.

**Where it applies** (`ExecutionSpec.moe_torch_grouped_mm`, read from a framework cell naming
TorchTitan without its fused DistMoE backend): the routed-expert GEMMs of a 16-bit run on a
Blackwell GPU (an `mxfp8` peak in the catalog). Not on Hopper: no measured `_grouped_mm` rate on
sm_90 was read, so there Seer keeps the dense fraction. Not for FP8/MXFP8 experts (torchao's
scaled grouped GEMMs are other kernels with their own rates, `fp8_recipe`).
"""

from __future__ import annotations

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer.fp8_recipe import native_mx
from starfabric.astral.seer.torchtitan_pp import is_torchtitan

GROUPED_MM_ISOLATED_FRACTION = 0.405
"""Saturation fraction of the BF16 peak that Seer's shape model needs to reproduce torchao's
eight B200 `torch._grouped_mm` forward + backward timings (pytorch/ao @ff163084e README;
fitted on a 0.005 grid, mean |log error| 4.7%)."""
DENSE_ISOLATED_FRACTION = 0.72
"""The same fit of OpenXLA's measured dense B200 BF16 GEMM table (efficiency.yaml, B200
`gemm_peak_fraction` comment; tests/astral/seer/test_blackwell_gemm.py)."""
GROUPED_MM_BF16_SM100_RATIO = GROUPED_MM_ISOLATED_FRACTION / DENSE_ISOLATED_FRACTION
"""What PyTorch's CUTLASS BF16 grouped GEMM reaches on Blackwell relative to a dense GEMM of
the same shape (0.5625): both measured in isolation on B200, so the in-training derating of the
dense fraction carries over unchanged (assumption)."""
EXPERT_GEMMS = ("moe.expert_fc1", "moe.expert_fc2")
"""Names of the routed-expert GEMMs (forward, dgrad and wgrad) in Seer's operator table."""


def runs_torch_grouped_mm(framework: str | None, fused_dispatch: bool) -> bool:
    """Whether a row's routed experts run as `torch._grouped_mm`: a TorchTitan framework cell
    without the fused DistMoE backend (which runs its own CuTe kernels)."""
    return is_torchtitan(framework) and not fused_dispatch


def expert_gemm_ratio(gpu: GPUSpec, grouped_mm: bool, fp8: bool) -> float:
    """Factor on the GEMM peak fraction of the routed-expert GEMMs: GROUPED_MM_BF16_SM100_RATIO
    for 16-bit `torch._grouped_mm` on Blackwell, else 1."""
    if grouped_mm and not fp8 and native_mx(gpu):
        return GROUPED_MM_BF16_SM100_RATIO
    return 1.0


def benchmark_overhead_bytes(total_m: float, n: float, k: float, groups: float) -> float:
    """HBM bytes torchao's forward + backward benchmark moves besides the three GEMMs: the MSE
    loss reads the output and the labels (2 M·N), its backward reads both again and writes the
    output's gradient (3 M·N); autograd accumulates A's and B's gradients into the existing
    .grad (read both, write one: 3 M·K and 3 G·N·K); 2 bytes per BF16 element."""
    return 2.0 * (5.0 * total_m * n + 3.0 * total_m * k + 3.0 * groups * n * k)


__all__ = [
    "DENSE_ISOLATED_FRACTION",
    "EXPERT_GEMMS",
    "GROUPED_MM_BF16_SM100_RATIO",
    "GROUPED_MM_ISOLATED_FRACTION",
    "benchmark_overhead_bytes",
    "expert_gemm_ratio",
    "runs_torch_grouped_mm",
]
