"""What 2021-22 Megatron-LM / NeMo (Apex) code overlapped (seer/legacy_overlap.py): the stack and
date readers, NeMo's asynchronous DP all-reduce without a pipeline, and the 2022 rows that read
both it and the grad-input collective (whose rule and pricing test_async_grad_input.py tests)."""

from pathlib import Path

import pytest

from astral.seer.outside_rows import DATA, N21_CITATION, NEMO_FW, row_by_id
from starfabric.astral.seer import async_grad_input as agi
from starfabric.astral.seer import legacy_overlap as lo
from starfabric.astral.seer.validate import row_setup, validate_row

SRC = Path(lo.__file__).resolve().parent / "published_runs"


@pytest.mark.parametrize(
    ("framework", "want"),
    [
        ("Megatron-LM (2021)", "megatron-lm"),
        ("Megatron-LM PTD-P", "megatron-lm"),
        (NEMO_FW, "nemo"),
        ("GPT-NeoX (Megatron-LM layers on the DeepSpeed pipeline engine) (2022)", None),
        ("DeepSpeed PipeDream-Flush + Megatron TP (2022)", None),
        ("Megatron-LM core_r0.8.0", None),
        ("Megatron-Core 0.9", None),
        ("metaseq", None),
    ],
)
def test_the_stacks_whose_code_was_read(framework: str, want: str | None) -> None:
    assert lo.stack(framework) == want


def test_software_month_prefers_the_cell_then_the_paper_then_the_year() -> None:
    assert lo.software_month("Megatron-LM (2021)", N21_CITATION) == (2021, 4)
    assert lo.software_month("Megatron-LM (2022)", None) == (2022, 1)
    assert lo.software_month("Megatron-LM 2022-06", N21_CITATION) == (2022, 6)
    assert lo.software_month(NEMO_FW, None) == (2022, 7)  # NeMo 1.10.0's tag
    # a paper from another year than the cell's: the cell's year (its January)
    assert lo.software_month("Megatron-LM (2022)", N21_CITATION) == (2022, 1)
    assert lo.software_month("Megatron-LM", None) is None


BF16_O2 = "BF16 (Megatron O2: BF16 parameters and activations, FP32 master weights)"


@pytest.mark.parametrize(
    ("framework", "precision", "pp", "sp", "want"),
    [
        (NEMO_FW, BF16_O2, 1, False, True),
        (NEMO_FW, BF16_O2, 8, False, False),  # PP: after the pipeline
        (NEMO_FW, BF16_O2, None, False, False),  # PP unstated: not assumed
        (NEMO_FW, BF16_O2, 1, True, False),  # SP (v1.11.0 turns it off)
        (NEMO_FW, "BF16 mixed", 1, False, False),  # O1: allreduce_gradients after
        ("NeMo 1.9.0 (2022)", BF16_O2, 1, False, False),  # v1.9.0: still after
        ("NeMo 1.11.0 (2022)", BF16_O2 + ", gradient_accumulation_fusion: true", 1, False, False),
        ("NeMo 1.11.0 (2022)", BF16_O2, 1, False, True),
        ("NeMo Megatron 22.05 (NeMo 1.9.0) (2022)", BF16_O2, 1, False, True),  # changelog
        ("NeMo Megatron 22.04 (2022)", BF16_O2, 1, False, False),
        ("Megatron-LM (2022)", BF16_O2, 1, False, False),  # local DDP: after the backward
    ],
)
def test_async_dp_grad_reduce_where_nemo_code_has_it(
    framework: str, precision: str, pp: int | None, sp: bool, want: bool
) -> None:
    assert lo.async_dp_grad_reduce(framework, precision, pp, sp) is want


def test_rows_read_as_their_code_did() -> None:
    a100 = DATA / "a100_scale_runs.csv"
    five = row_setup(row_by_id(a100, "NEMO2206-5B-01")).execution
    assert five["tp_async_backward"] is True and five["overlap_grad_reduce"] is True
    big = row_setup(row_by_id(a100, "NEMO2206-175B-016")).execution
    assert big["tp_async_backward"] is True and big["overlap_grad_reduce"] is False
    # GPT-NeoX-20B: its mpu's blocking all-reduce, and DeeperSpeed's ZeRO-1 ignores the
    # stated overlap_comm under the pipeline engine (reduced after the last backward).
    neox = row_setup(row_by_id(DATA / "a100_era_runs.csv", "NEOX20B-01")).execution
    assert neox["tp_async_backward"] is False and neox["overlap_grad_reduce"] is False
    # Narayanan et al. (2021-04) predate the async all-reduce (2021-09).
    n21 = row_setup(row_by_id(SRC / "megatron_weak_scaling.csv", "N21-T1-04")).execution
    assert n21["tp_async_backward"] is False and n21["overlap_grad_reduce"] is False
    glm = row_setup(row_by_id(DATA / "development_runs_2.csv", "GLM130B-01")).execution
    assert glm["tp_async_backward"] is False


@pytest.mark.parametrize("row_id", ["NEMO2206-5B-20", "NEMO2206-175B-016"])
def test_a_2022_nemo_row_gets_faster_by_at_most_its_exposed_tp_and_dp(
    row_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = row_by_id(DATA / "a100_scale_runs.csv", row_id)
    new = validate_row(row)
    monkeypatch.setattr(agi, "async_tp_backward", lambda *_, **__: False)
    monkeypatch.setattr(lo, "async_dp_grad_reduce", lambda *_: False)
    old = validate_row(row)
    saved = old.predicted_iter_s - new.predicted_iter_s
    assert saved > 0
    assert saved <= old.prediction.breakdown["tp"] + old.prediction.breakdown["dp"]
