"""HybridEP's measured NVLink rate on Blackwell, in training (HybridEP's measured rate).

Megatron-Core's flex dispatcher with the HybridEP backend (`hybridep_sms`) runs NVIDIA's
Hybrid-EP kernels (TMA copies, warp-level pipeline), not DeepEP V1's. Their rate is measured:
DeepEP's `docs/README_Hybrid-EP.md` @5fbafce (hybrid_ep branch; the table is unchanged since it
was first published in `Hybrid-EP_Intra-node_Implementation.md` @6ad6896, 2025-09-25) gives
HybridEP's algorithm bandwidth on GB200 at 8/16/24/32/36 ranks x 16/32 SMs (4,096 tokens per
rank, hidden 7,168, top-8, 8 local experts, random uniform router), two columns each: "Torch
API" and "Kernel Only". Data: tests/data/hybridep/gb200_hybridep_bandwidth.csv (+ .md).

**Which bytes.** The benchmark (`tests/test_mnnvlink_hybridep.py` @6ad6896, 184-189; the same in
`tests/test_hybrid_ep.py` @5eb0722) divides `dispatched_hidden.numel() * 2` — the tokens a rank
receives, one BF16 copy per (token, receiving rank), its own included — by the time: the per-rank
deduplicated bytes `deepep_kernels.deepep_intranode_time` prices, so a column's rate replaces
DeepEP's NVLink rate for an EP group inside one NVLink-5 domain.

**Which column: kernel only** (`IN_TRAINING_MEASURE`). The Torch-API time is CUDA events around
one `buffer.dispatch` / `buffer.combine` call (`tests/utils.py` `bench` @6ad6896, 99-124); at
that commit the call (`deep_ep/hybrid_ep_buffer.py` 143-228, `csrc/hybrid_ep.cu` 419-756) is:
routing-map scatters, an NCCL all-gather of the routing map and the metadata-preprocessing
kernel, a `.item()` that makes the host wait for the token count (192), the dispatch kernel,
then a device-to-device copy of the received tokens out of the communication buffer (439-441);
combine copies its input into the buffer (663-667) before the combine kernel. The kernel-only
time is the profiler's average of the `dispatch_kernel` / `combine_kernel` kernels alone
(`bench_kineto`). In training Megatron-Core calls `dispatch_with_permute` /
`combine_with_unpermute` (`fused_a2a.py` @fca1679, 375 and 402/419; DeepEP @3f601f7, the
commit the GB200 DeepSeek-V3 run used): there a permute kernel replaces the copy ("Use permute
kernel to avoid standalone D2D memory copy", `executor.cu` 131-132; unpermute into the buffer,
234) — traffic Seer prices as the layer's own permute / unpermute operators (`ops._moe_mlp`) —
and the host's wait for the counts (`hybrid_ep_buffer.py` 443, `executor.cu` 158) is the once-per-
forward wait Seer's host model already charges (`host_segments`, `host_ops`). Only the kernel
column brackets what Seer's dispatch operator stands for. What neither covers: the forward
dispatch's routing-map all-gather and preprocessing kernel (the backward reuses the handle); the
table bounds it small — the dispatch's Torch-API-minus-kernel time exceeds the combine's (both
include one copy of the same bytes) by -27 to +88 us, +17 us on average, against kernels of
418-794 us (`tests/astral/seer/test_hybridep_rate.py`); left out (nor does Seer time DeepEP's
layout and notify kernels).

**Which dtype: BF16** (`HYBRIDEP_FP8_DISPATCH`). Megatron-Core's HybridEP path never dispatches
FP8: `init_hybrid_ep_buffer` asserts `not fp8_dispatch` ("HybridEP dispatcher does not support
fp8 dispatch now") and `HybridEPDispatch.forward` sets `fp8_dispatch = False` (`fused_a2a.py`
310/347 @3df2009, the commit that added the backend; 310/347 @effebd81, the GB200 DeepSeek-V3
run's; 311/355 @fca1679, 2026-03-10; 327/402 @d98e8a6), and passes the BF16 hidden states with
`scaling_factor=None`; an MXFP8 run quantizes after the dispatch, in TE's grouped linear layers
(`pad_multiple` only aligns the permuted rows for it, `token_dispatcher.py` @fca1679 1040-1041).

The B200 point (8 ranks, 16 SMs: kernel 599.27 / 734.95 / 673.84 GB/s) lies within 4% of
GB200's, so the table serves every NVLink-5 GPU. Between measured points the rate is
interpolated linearly in ranks and SMs; outside the measured range the edge value holds
(`hybridep_bytes_per_s`: EP 64 takes the 36-rank rate).

Not covered: an EP group spanning NVLink domains (HybridEP's RDMA path; the table's H100 rows
are IB rates at 4-16 SMs) keeps the DeepEP V1 internode model, in BF16.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

HYBRIDEP_RANKS = (8, 16, 24, 32, 36)
"""EP sizes of the GB200 table (README_Hybrid-EP.md @5fbafce)."""
HYBRIDEP_SMS = (16, 32)
"""SM budgets of the GB200 table."""

Op = Literal["dispatch_fp8", "dispatch_bf16", "combine"]
Measure = Literal["torch_api", "kernel_only"]

# GB200, GB/s: [ranks][sms] per op, for each column of the table.
_GB200_GBPS: dict[Measure, dict[Op, tuple[tuple[float, float], ...]]] = {
    "torch_api": {
        "dispatch_fp8": ((421.67, 455.35), (397.33, 444.67), (281.73, 403.20), (236.33, 392.70),
                         (215.36, 361.13)),
        "dispatch_bf16": ((550.10, 545.71), (472.84, 523.48), (441.89, 507.32), (485.50, 484.22),
                          (469.96, 479.02)),
        "combine": ((538.44, 568.94), (474.48, 521.55), (444.40, 483.76), (423.19, 464.54),
                    (418.27, 447.89)),
    },
    "kernel_only": {
        "dispatch_fp8": ((620.98, 713.98), (577.17, 650.48), (360.12, 577.96), (286.93, 538.86),
                         (260.53, 489.27)),
        "dispatch_bf16": ((750.15, 764.03), (661.93, 706.95), (637.80, 665.97), (629.79, 642.23),
                          (612.85, 632.31)),
        "combine": ((684.27, 737.13), (600.75, 666.26), (565.53, 639.80), (547.25, 605.15),
                    (543.27, 596.99)),
    },
}  # fmt: skip
"""HybridEP's algorithm bandwidth on GB200 (DeepEP docs/README_Hybrid-EP.md @5fbafce, GB200
table), rows = `HYBRIDEP_RANKS`, columns = `HYBRIDEP_SMS`."""

IN_TRAINING_MEASURE: Measure = "kernel_only"
"""The column that prices HybridEP in a training step next to Seer's own operators: the kernel
alone (module docstring: the Torch-API time adds a buffer copy that training replaces by the
permute Seer prices separately, and the host wait Seer's host model charges)."""
HYBRIDEP_FP8_DISPATCH = False
"""Megatron-Core's HybridEP backend dispatches BF16 even in an FP8 run (`fused_a2a.py`: assert
`not fp8_dispatch`, `fp8_dispatch = False`; 3df2009 through d98e8a6)."""


def hybridep_bytes_per_s(op: Op, ranks: int, sms: int, measure: Measure = IN_TRAINING_MEASURE
                         ) -> float:  # fmt: skip
    """HybridEP's measured algorithm bandwidth (bytes/s) of `op` at an EP size of `ranks` on one
    NVLink-5 domain with `sms` SMs, in the table's `measure` column: linear in ranks then SMs
    between its points, the edge value outside them (assumption: a larger EP group, such as
    64 ranks of an NVL72 rack, runs at the 36-rank rate; no larger domain was measured)."""
    grid = np.asarray(_GB200_GBPS[measure][op], dtype=np.float64)
    per_sms = [float(np.interp(ranks, HYBRIDEP_RANKS, grid[:, j])) for j in range(grid.shape[1])]
    return float(np.interp(sms, HYBRIDEP_SMS, per_sms)) * 1e9


def hybridep_rates(ranks: int, sms: int) -> tuple[float, float]:
    """(dispatch, combine) bytes/s of HybridEP in training at `ranks` and `sms`: the kernel-only
    BF16 dispatch (`HYBRIDEP_FP8_DISPATCH`) and combine rates."""
    return (
        hybridep_bytes_per_s("dispatch_bf16", ranks, sms),
        hybridep_bytes_per_s("combine", ranks, sms),
    )


def dispatches_fp8(flex_backend: str) -> bool:
    """Whether an FP8 run's expert dispatch moves FP8 rows with this flex-dispatcher backend:
    not with HybridEP (`HYBRIDEP_FP8_DISPATCH`); DeepEP keeps Seer's FP8 convention."""
    return HYBRIDEP_FP8_DISPATCH if flex_backend == "hybridep" else True


__all__ = [
    "HYBRIDEP_FP8_DISPATCH",
    "HYBRIDEP_RANKS",
    "HYBRIDEP_SMS",
    "IN_TRAINING_MEASURE",
    "Measure",
    "Op",
    "dispatches_fp8",
    "hybridep_bytes_per_s",
    "hybridep_rates",
]
