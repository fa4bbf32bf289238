"""TorchTitan's SDPA wrapper order (seer/torchtitan_sdpa.py), read from torchtitan's history:
3b85aa31f (2025-05-14) cuDNN first on Blackwell, 6a3a9da95 (2025-10-09) cuDNN first everywhere."""

import csv
from pathlib import Path

import pytest

from starfabric.astral.seer.torchtitan_sdpa import (
    CUDNN_FIRST_EVERYWHERE,
    CUDNN_FIRST_ON_BLACKWELL,
    prefers_cudnn,
)
from starfabric.astral.seer.validate import row_setup

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"


@pytest.mark.parametrize(
    ("framework", "blackwell", "want"),
    [
        ("TorchTitan (PyTorch nightly 2024-12, FSDP2)", False, False),
        ("TorchTitan (PyTorch nightly 2024-12, FSDP2)", True, False),
        ("TorchTitan (2025-05; torch.compile)", True, True),
        ("TorchTitan (2025-06; FSDP2, torch.compile)", False, False),
        ("TorchTitan (2025-06; FSDP2, torch.compile)", True, True),
        ("TorchTitan (2025-10; PyTorch 2.9.0)", False, True),
        ("TorchTitan (no month stated)", True, False),
        ("Megatron-Core 2025-11 (TE cuDNN)", True, False),
        (None, True, False),
    ],
)
def test_order_by_month_and_gpu(framework: str | None, blackwell: bool, want: bool) -> None:
    assert prefers_cudnn(framework, blackwell) is want


def test_the_months_are_the_commits() -> None:
    assert CUDNN_FIRST_ON_BLACKWELL == (2025, 5)
    assert CUDNN_FIRST_EVERYWHERE == (2025, 10)


def _rows() -> dict[str, dict[str, str]]:
    with DEV2.open() as f:
        return {r["row_id"]: r for r in csv.DictReader(f)}


@pytest.mark.parametrize(
    ("row_id", "kernel"),
    [("TTDEEPEP-01", "cudnn"), ("TTDEEPEP-06", "cudnn"), ("TTH200-01", "fa2"),
     ("TT24-T13-01", "fa2"), ("TT24-T2-03", "fa2")],
)  # fmt: skip
def test_rows_run_the_kernel_their_torchtitan_put_first(row_id: str, kernel: str) -> None:
    """B200 rows of 2025-10 run cuDNN; H200 rows of 2025-06 and the 2024-12 H100 rows FA2."""
    st = row_setup(_rows()[row_id])
    assert st.execution["flash_kernel"] == kernel
