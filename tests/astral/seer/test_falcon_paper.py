"""Falcon-180B as its sources state it, and how Seer reads a data-parallel cell's overlap words
(seer/overlap_words.py).

The Falcon series paper (arXiv 2311.16867) could not be read beyond its abstract here (docs/
astral.md, "Falcon-180B as its own paper states it"), so FALCON180B-01's cells are unchanged and
no row was added. What a transcription of a training setup writes in the `zero_or_fsdp` cell —
"ZeRO-1 with the gradient reduce-scatter overlapped with the backward pass", "gradient
all-reduce not overlapped", Megatron's `--overlap-grad-reduce` — is now read per DP collective;
before, only the framework cell's overlap words counted."""

from pathlib import Path

import pytest

from starfabric.astral.seer.overlap_words import OverlapKind, read_overlap
from starfabric.astral.seer.validate import read_rows, row_job_options, validate_row
from starfabric.errors import DataError

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"


def _dp(cell: str) -> tuple[bool | None, bool | None]:
    """(gradient reduction, parameter all-gather) overlap as the cell states it."""
    said = read_overlap(cell)
    return said.on(OverlapKind.DP_GRAD_REDUCE), said.on(OverlapKind.DP_PARAM_GATHER)


def _row(row_id: str) -> dict[str, str]:
    return next(r for r in read_rows(DEV2) if r["row_id"] == row_id)


@pytest.mark.parametrize(
    ("cell", "grad", "param"),
    [
        ("ZeRO-1 with the gradient reduce-scatter overlapped with the backward pass", True, None),
        ("ZeRO-1; gradient all-reduce not overlapped", False, None),
        ("ZeRO-1, no overlap", False, False),
        ("ZeRO-1 without communication overlap", False, False),
        ("--overlap-grad-reduce off", False, None),
        ("distributed optimizer (ZeRO-1) implied by --overlap-param-gather", None, True),
        (
            "distributed optimizer (ZeRO-1; --use-distributed-optimizer --overlap-grad-reduce "
            "--overlap-param-gather in the reproduce guide)",
            True,
            True,
        ),
        (
            "gradient reduce-scatter overlapped with backward; parameter all-gather not overlapped",
            True,
            False,
        ),
        # another kind of traffic named in the clause: not a DP statement
        ("ZeRO-1 (EP a2a not overlapped)", None, None),
        ("ZeRO-1; TP communication overlap on", None, None),
        # ... also when the kind follows the mention, or is part of the flag's own name
        ("ZeRO-1 (overlap of the TP communication)", None, None),
        ("ZeRO-1; overlap_moe_expert_parallel_comm on", None, None),
        ("ZeRO-1; --overlap-moe-expert-parallel-comm", None, None),
        # DP named beside another kind: a DP statement
        ("ZeRO-1 with overlap of DP and EP communication", True, True),
        # a flag's value switches it off
        ("ZeRO-1; overlap_grad_reduce=False", False, None),
        ("ZeRO-1; overlap_param_gather: true", None, True),
        # stated once on and once off: on (statements' convention)
        ("grad reduce overlapped (the 2022 run: grad reduce not overlapped)", True, None),
        # no overlap words: nothing stated
        ("ZeRO (stage not stated) on top of 3D parallelism", None, None),
        ("ZeRO optimizer sharding; gradients reduced after the backward pass", None, None),
        ("UNVERIFIED", None, None),
        ("", None, None),
    ],
)
def test_dp_cell_reading(cell: str, grad: bool | None, param: bool | None) -> None:
    assert _dp(cell) == (grad, param)


@pytest.mark.parametrize(
    ("framework", "want"),
    [
        ("Megatron-Core r0.8.0 (DP/TP/PP comm overlap on)", True),
        ("Megatron-LM (2023) with --overlap-grad-reduce", True),
        ("Megatron-Core, EP all-to-all not overlapped", False),
        ("Megatron-LM, no overlap", False),
        ("Megatron-LM (2023)", False),
        ("Megatron-Core 0.13 (EP a2a overlap)", False),
        (
            "Megatron-Bridge 0.5.0, MoE dispatcher alltoall, overlap_moe_expert_parallel_comm on",
            False,
        ),
    ],
)
def test_framework_cell_reading(framework: str, want: bool) -> None:
    # validate's framework-cell reader (plain Megatron-LM's opt-in DP overlap) calls this
    assert (True in _dp(framework)) is want


def test_falcon_row_reads_as_before() -> None:
    # The card's "ZeRO" says nothing about overlap: the framework default (overlap on) stays.
    row = _row("FALCON180B-01")
    assert _dp(row["zero_or_fsdp"]) == (None, None)
    _, ex, _ = row_job_options(row)
    assert ex["overlap_grad_reduce"] is True and ex["overlap_param_gather"] is True


def test_falcon_cell_stating_no_overlap_is_priced() -> None:
    # A transcription stating the reduction was not overlapped turns only that collective off,
    # and the exposed DP time of the same row grows.
    row = _row("FALCON180B-01")
    stated = {**row, "zero_or_fsdp": "ZeRO-1; gradient reduce-scatter not overlapped"}
    _, ex, _ = row_job_options(stated)
    assert ex["overlap_grad_reduce"] is False and ex["overlap_param_gather"] is True
    base, off = validate_row(row), validate_row(stated)
    assert off.predicted_iter_s > base.predicted_iter_s
    assert off.prediction.breakdown["dp"] > base.prediction.breakdown["dp"]


def test_plain_megatron_dp_cell_flag_is_read() -> None:
    # Plain Megatron-LM ships DP overlap opt-in; the flag written in the DP cell counts.
    row = _row("STARCODER-01")
    _, ex, _ = row_job_options(row)
    assert ex["overlap_grad_reduce"] is False and ex["overlap_param_gather"] is False
    flagged = {**row, "zero_or_fsdp": row["zero_or_fsdp"] + "; --overlap-grad-reduce"}
    _, ex2, _ = row_job_options(flagged)
    assert ex2["overlap_grad_reduce"] is True and ex2["overlap_param_gather"] is False


def test_framework_no_overlap_against_a_dp_cell_stating_overlap_is_a_row_error() -> None:
    row = {**_row("FALCON180B-01"), "framework": "Megatron-LM fork, no overlap"}
    row["zero_or_fsdp"] = "ZeRO-1; gradient reduce-scatter overlapped with the backward"
    with pytest.raises(DataError, match=r"row FALCON180B-01: framework = .* states no overlap"):
        row_job_options(row)
    # naming the kind in the framework cell ("EP a2a: no overlap") is no conflict
    _, ex, _ = row_job_options({**row, "framework": "Megatron-Core, EP a2a: no overlap"})
    assert ex["overlap_grad_reduce"] is True
