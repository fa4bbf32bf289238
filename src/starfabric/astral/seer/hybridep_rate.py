"""HybridEP's measured NVLink rate on Blackwell (HybridEP's measured rate).

Megatron-Core's flex dispatcher with the HybridEP backend (`hybridep_sms`) runs NVIDIA's
Hybrid-EP kernels (TMA copies, warp-level pipeline), not DeepEP V1's. Their rate is measured:
DeepEP's `docs/README_Hybrid-EP.md` @5fbafce (hybrid_ep branch) gives HybridEP's algorithm
bandwidth on GB200 at 8/16/24/32/36 ranks x 16/32 SMs (4,096 tokens per rank, hidden 7,168,
top-8, 8 local experts, random uniform router). Its benchmark (tests/test_hybrid_ep.py
@5eb0722) divides the bytes a rank receives — one BF16 copy per (token, receiving rank), times
(1 + 4/128) / 2 for FP8 — by the time: the same per-rank deduplicated bytes and FP8 factor
`deepep_kernels.deepep_intranode_time` prices, so the table's rates replace DeepEP's NVLink rate
for an EP group inside one NVLink-5 domain. The Torch-API columns (the call as Megatron-Core
makes it) are used; the B200 point (8 ranks, 16 SMs: 409.71 / 535.94 / 530.86 GB/s) lies within
3% of GB200's, so the table serves every NVLink-5 GPU. Between measured points the rate is
interpolated linearly in ranks and SMs; outside the measured range the edge value holds.
Data: tests/data/hybridep/gb200_hybridep_bandwidth.csv; check: tests/astral/seer/test_hybridep_rate.py.

Not covered: an EP group spanning NVLink domains (HybridEP's RDMA path; the table's H100 rows
are IB rates at 4-16 SMs) keeps the DeepEP V1 internode model.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

HYBRIDEP_RANKS = (8, 16, 24, 32, 36)
"""EP sizes of the GB200 table (README_Hybrid-EP.md @5fbafce)."""
HYBRIDEP_SMS = (16, 32)
"""SM budgets of the GB200 table."""

# GB200, Torch API, GB/s: [ranks][sms] for dispatch FP8, dispatch BF16, combine.
_GB200_TORCH_API_GBPS = {
    "dispatch_fp8": ((421.67, 455.35), (397.33, 444.67), (281.73, 403.20), (236.33, 392.70),
                     (215.36, 361.13)),
    "dispatch_bf16": ((550.10, 545.71), (472.84, 523.48), (441.89, 507.32), (485.50, 484.22),
                      (469.96, 479.02)),
    "combine": ((538.44, 568.94), (474.48, 521.55), (444.40, 483.76), (423.19, 464.54),
                (418.27, 447.89)),
}  # fmt: skip
"""HybridEP's algorithm bandwidth on GB200 through the Torch API (DeepEP docs/README_Hybrid-EP.md
@5fbafce, GB200 table, Torch API columns), rows = `HYBRIDEP_RANKS`, columns = `HYBRIDEP_SMS`."""

Op = Literal["dispatch_fp8", "dispatch_bf16", "combine"]


def hybridep_bytes_per_s(op: Op, ranks: int, sms: int) -> float:
    """HybridEP's measured algorithm bandwidth (bytes/s) of `op` at an EP size of `ranks` on one
    NVLink-5 domain with `sms` SMs: the GB200 Torch-API table, linear in ranks then SMs between
    its points, the edge value outside them."""
    grid = np.asarray(_GB200_TORCH_API_GBPS[op], dtype=np.float64)
    per_sms = [float(np.interp(ranks, HYBRIDEP_RANKS, grid[:, j])) for j in range(grid.shape[1])]
    return float(np.interp(sms, HYBRIDEP_SMS, per_sms)) * 1e9


def hybridep_rates(ranks: int, sms: int) -> tuple[float, float, float]:
    """(dispatch BF16, dispatch FP8, combine) bytes/s of HybridEP at `ranks` and `sms`."""
    return (
        hybridep_bytes_per_s("dispatch_bf16", ranks, sms),
        hybridep_bytes_per_s("dispatch_fp8", ranks, sms),
        hybridep_bytes_per_s("combine", ranks, sms),
    )


__all__ = ["HYBRIDEP_RANKS", "HYBRIDEP_SMS", "hybridep_bytes_per_s", "hybridep_rates"]
