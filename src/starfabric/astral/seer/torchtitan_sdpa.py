"""Which SDPA backend TorchTitan's own attention wrapper puts first, by TorchTitan's month.

TorchTitan does not leave the choice to PyTorch's default order (`validate.sdpa_runs_cudnn`): its
`ScaledDotProductAttention` wraps `F.scaled_dot_product_attention` in
`sdpa_kernel(backends, set_priority=True)` (pytorch/torchtitan, read at these commits):

- before 3b85aa31f (2025-05-14) it set no order: PyTorch's, FlashAttention-2 first;
- 3b85aa31f "Use cudnn backend on B200" (#1196, torchtitan/models/attention.py): cuDNN first when
  `has_cuda_capability(10, 0)` (Blackwell), FlashAttention-2 first on Hopper;
- 6a3a9da95 "Refactor attention ..." (#1776, 2025-10-09): `sdpa_backends = [CUDNN_ATTENTION,
  FLASH_ATTENTION, EFFICIENT_ATTENTION]` on every GPU (still so at 5d4bdd0, 2025-11-24).

A row's TorchTitan month is the YYYY-MM its framework cell states (the code it ran); a row that
states none keeps PyTorch's default order.
"""

from __future__ import annotations

from starfabric.astral.seer.releases import YearMonth
from starfabric.astral.seer.torchtitan_pp import is_torchtitan, release_month

CUDNN_FIRST_ON_BLACKWELL: YearMonth = (2025, 5)
"""TorchTitan month from which its wrapper puts cuDNN first on sm100+ (3b85aa31f, 2025-05-14)."""
CUDNN_FIRST_EVERYWHERE: YearMonth = (2025, 10)
"""TorchTitan month from which it puts cuDNN first on every GPU (6a3a9da95, 2025-10-09)."""


def prefers_cudnn(framework: str | None, blackwell: bool) -> bool:
    """Whether TorchTitan's wrapper ran cuDNN's fused attention first for this row: its stated
    month at or after CUDNN_FIRST_EVERYWHERE, or at or after CUDNN_FIRST_ON_BLACKWELL on a
    Blackwell GPU. False for a cell that names no TorchTitan or no month."""
    if not is_torchtitan(framework):
        return False
    month = release_month(framework)
    if month is None:
        return False
    if month >= CUDNN_FIRST_EVERYWHERE:
        return True
    return blackwell and month >= CUDNN_FIRST_ON_BLACKWELL
