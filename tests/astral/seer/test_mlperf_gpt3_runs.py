"""MLPerf Training GPT-3 175B, rounds v3.0, v4.0 (session 21i) and v4.1 (session 22d)
(tests/data/published_runs/mlperf_gpt3_runs.csv): the transcription's invariants — each row's step time is the median of the per-log
figures its notes list, the token rate is that time's arithmetic, the layout multiplies out to the
GPU count and to the logged global batch, every row cites its own logs — and Seer reads every row.
Seer's error values are not asserted here (outside ground truth, nothing fitted to it). The
checks shared with the other MLPerf files are in mlperf_transcription.py."""

import re

import pytest

from astral.seer import mlperf_transcription as mt

DATA = mt.load("mlperf_gpt3_runs")
ROWS = DATA.rows
IDS = DATA.ids


def test_header_is_development_set_2s() -> None:
    mt.assert_header_is_development_set_2s(DATA.csv)


def test_rounds_are_v30_v40_and_v41_only() -> None:
    """v3.1 is held out: no row may come from it."""
    assert len(ROWS) == 14
    for row in ROWS:
        assert "v3.1" not in row["citation"] and "v3_1" not in row["citation"]
        assert re.search(r"training_results_v(3\.0|4\.0|4\.1) @[0-9a-f]{12} ", row["citation"])
    rounds = [re.search(r"training_results_(v\d\.\d)", r["citation"]) for r in ROWS]
    counts = {v: [m.group(1) for m in rounds if m].count(v) for v in ("v3.0", "v4.0", "v4.1")}
    assert counts == {"v3.0": 5, "v4.0": 4, "v4.1": 5}


def test_one_row_per_result_folder_and_no_resubmitted_runs() -> None:
    """Rule 1: one row per (round, result folder); v4.1's eos-dfw_n1452 folder holds v4.0's
    MLP40-NV-1452 runs re-submitted, so it is not a second row."""
    keys = [
        re.search(r"training_results_(v\d\.\d) @\w+ (\S+/results/[^/ ]+)/gpt3/", r["citation"])
        for r in ROWS
    ]
    assert all(keys)
    assert len({k.groups() for k in keys if k}) == len(ROWS)
    assert ("v4.1", "NVIDIA/results/eos-dfw_n1452_ngc24.04_nemo") not in {
        k.groups() for k in keys if k
    }


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_cites_its_logs_and_config(row: dict[str, str]) -> None:
    mt.assert_cites_logs_and_config(row, "gpt3", config=r"config [\w/.]+/config_\w+\.sh")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_median_of_the_listed_logs(row: dict[str, str]) -> None:
    """The notes list each log's steady-state step time; the row's figure is their median."""
    listed = mt.listed_logs(row, r"result_[\w-]+\.txt (\d+\.\d+)")
    assert len(listed) >= 3
    mt.assert_median_of_listed_logs(row, listed, abs_tol=5e-5)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_per_step_logs_fill_iter_time_and_block_derivations_are_marked(
    row: dict[str, str],
) -> None:
    """v3.0 and v4.1 logs print train_step_timing (iter_time_s); v4.0 figures are derived from
    block markers and sit in derived_iter_time_s with a DERIVED note."""
    if "v3.0" in row["citation"] or "v4.1" in row["citation"]:
        mt.assert_logged_not_derived(row, "train_step_timing")
    else:
        assert row["derived_iter_time_s"] and not row["iter_time_s"]
        assert row["derivation_note"].startswith("DERIVED")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tokens_per_second_is_gbs_times_seq_over_step_time(row: dict[str, str]) -> None:
    # the step time is written to 4 decimals, the rate from the unrounded median
    mt.assert_token_rate(row, seq_len=2048)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out_to_gpus_and_logged_batch(row: dict[str, str]) -> None:
    """TP x PP x DP = GPUs (CP = EP = 1); GBS = micro-batch x logged accumulation x DP; the
    interleave divides the 96 layers evenly over PP x VPP chunks."""
    pp, vpp, cp, ep, gpus, layers = mt.ints(row, "pp", "vpp", "cp", "ep", "num_gpus", "layers")
    assert cp == ep == 1
    assert gpus == 8 * int(gpus / 8)
    mt.assert_layout_multiplies_out(row)
    assert layers % (pp * vpp) == 0


def test_seer_reads_every_row() -> None:
    mt.assert_seer_reads_every_row(DATA)
