"""TorchTitan's default pipeline micro-batching by release (torchtitan_pp), checked against
what its source did at each commit, and the Table 5 rows of its 2024-12 H100 benchmark read
with it."""

from pathlib import Path

import pytest

from starfabric.astral.seer import torchtitan_pp as tp
from starfabric.astral.seer.validate import read_rows, row_setup

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"


def test_before_90567fc_a_step_is_cut_into_pp_degree_micro_batches() -> None:
    # torchtitan 9dec370 (2024-12-26): n_microbatches = pipeline_parallel_degree
    assert tp.default_microbatches((2024, 12), pp=8, stages_per_rank=2, local_batch=32) == 8
    assert tp.default_micro_batch("TorchTitan (PyTorch nightly 2024-12)", 8, 1, 32) == 4
    assert tp.default_micro_batch("TorchTitan (PyTorch nightly 2024-12)", 8, 2, 8) == 1


def test_from_90567fc_to_5e2033c_the_count_is_the_total_number_of_stages() -> None:
    assert tp.default_microbatches((2025, 2), pp=8, stages_per_rank=2, local_batch=32) == 16
    assert tp.default_micro_batch("torchtitan 2025-03", 4, 2, 32) == 4


def test_from_5e2033c_micro_batches_hold_one_sequence() -> None:
    assert tp.default_micro_batch("TorchTitan (2025-10; PyTorch 2.9.0)", 8, 2, 32) == 1
    assert tp.default_micro_batch("TorchTitan", 8, 1, 16) == 1  # no date: the current rule


def test_not_torchtitan_no_pp_or_indivisible_batch_has_no_default() -> None:
    assert tp.default_micro_batch("Megatron-LM (2024-12)", 8, 1, 32) is None
    assert tp.default_micro_batch("TorchTitan (2024-12)", 1, 1, 32) is None
    assert tp.default_micro_batch("TorchTitan (2024-12)", 8, 1, 12) is None  # TorchTitan refuses
    assert tp.release_month("TorchTitan (2025-26)") is None  # a span, not a month


@pytest.mark.parametrize(
    ("row_id", "micro_batch", "vpp"),
    [("TT24-T5-01", 4, 1), ("TT24-T5-02", 4, 2), ("TT24-T6-01", 1, 1), ("TT24-T6-04", 1, 1)],
)
def test_torchtitan_2412_pp_rows_run_its_default_micro_batching(
    row_id: str, micro_batch: int, vpp: int
) -> None:
    row = next(r for r in read_rows(DEV2) if r["row_id"] == row_id)
    st = row_setup(row)
    for _, opts in st.options:
        assert opts["micro_batch"] == [micro_batch]
        assert opts["vpp"] == [vpp]
    assert "torchtitan_pp" in st.read["micro_batch"]
