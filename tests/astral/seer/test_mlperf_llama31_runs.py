"""MLPerf Training Llama 3.1 405B, rounds v5.0 and v5.1 (session 21j) and v6.0 (sessions 22d and
22h, read from a fork of the results repository) (tests/data/published_runs/mlperf_llama31_runs.csv): the
transcription's invariants — each row's step time is
the median of the per-log figures its notes list, the token rate is that time's arithmetic, the
layout multiplies out to the GPU count and to the logged global batch, every row cites its own
logs and config, the shape is 405B's — and Seer reads every row. Seer's error values are not
asserted here (outside ground truth, nothing fitted to it). The checks shared with the other
MLPerf files are in mlperf_transcription.py."""

import dataclasses
import re

import pytest

from astral.seer import mlperf_transcription as mt

DATA = mt.load("mlperf_llama31_runs")
ROWS = DATA.rows
IDS = DATA.ids


def test_header_is_development_set_2s() -> None:
    mt.assert_header_is_development_set_2s(DATA.csv)


def test_rounds_are_v50_v51_and_v60_and_rows_unique() -> None:
    assert len(ROWS) == 22
    for row in ROWS:
        assert re.search(
            r"(mlcommons/training_results_v5\.[01]|Richardyu114/training_results_v6\.0) @[0-9a-f]{12} ",
            row["citation"],
        )
    # one row per result folder (rule 1), no folder twice
    mt.assert_one_row_per_result_folder(ROWS, "llama31_405b")


def test_v60_rows_come_from_the_fork_and_say_so() -> None:
    """v6.0 is read from the fork Richardyu114/training_results_v6.0 (no mlcommons copy was
    read); each such row names the fork in its notes and its verification."""
    v60 = [r for r in ROWS if "training_results_v6.0" in r["citation"]]
    assert [r["row_id"] for r in v60] == [
        "MLP60-NV-GB300-0512",
        "MLP60-NV-GB300-2048",
        "MLP60-CW-GB300-4096",
        "MLP60-AZ-GB200-8192",
    ]
    for row in v60:
        assert row["source_id"] == "MLPERF_TRAIN_v60_LLAMA31"
        assert "fork" in row["notes"] and "fork" in row["verification"]
        assert "github.com/mlcommons/training_results_v6.0" not in row["citation"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_cites_its_logs_and_config(row: dict[str, str]) -> None:
    mt.assert_cites_logs_and_config(row, "llama31_405b")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_median_of_the_listed_logs(row: dict[str, str]) -> None:
    """The notes list each log's median train_step_time; the row's figure is their median."""
    listed = mt.listed_logs(row)
    assert len(listed) >= 3
    mt.assert_logged_not_derived(row, "train_step_time")
    mt.assert_median_of_listed_logs(row, listed, abs_tol=5e-5)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tokens_per_second_is_gbs_times_seq_over_step_time(row: dict[str, str]) -> None:
    mt.assert_token_rate(row, seq_len=8192)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out_to_gpus_and_logged_batch(row: dict[str, str]) -> None:
    """TP x PP x CP x DP = GPUs (EP = 1); GBS = micro-batch x logged accumulation x DP; the
    config file's name NODESxGPUSxMINIBSxtpTppPcpC agrees with the cells — with NODES and MINIBS
    taken from the launcher overrides where the citation names them (Azure's launch path sources
    one base config and overrides exactly those two; the .md, v6.0 session 22h)."""
    assert mt.ints(row, "ep") == (1,)
    ga = mt.assert_layout_multiplies_out(row)
    name = mt.config_name(row)
    assert name is not None
    overrides = re.search(r"overrides DGXNNODES=(\d+) MINIBS=(\d+)", row["citation"])
    if overrides is not None:
        nodes, minibs = (int(x) for x in overrides.groups())
        name = dataclasses.replace(name, nodes=nodes, minibs=minibs)
    mt.assert_config_name_agrees(row, name, minibs=ga)


def test_launcher_overrides_are_azures_alone_and_match_its_log() -> None:
    """Only the Azure row replaces its config name's node count and MINIBS, and the overridden
    node count is the one its log's submission_platform states (2048 nodes x 4 = 8,192 GPUs)."""
    overridden = [r for r in ROWS if "overrides DGXNNODES=" in r["citation"]]
    assert [r["row_id"] for r in overridden] == ["MLP60-AZ-GB200-8192"]
    (row,) = overridden
    assert "launch_405b.py" in row["citation"]
    assert "submission_platform '2048x" in row["notes"]
    assert int(row["num_gpus"]) == 2048 * int(row["gpus_per_node"])


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_shape_is_llama31_405b(row: dict[str, str]) -> None:
    shape = tuple(
        int(row[k]) for k in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab")
    )
    assert shape == (126, 16384, 53248, 128, 8, 128256)
    assert "hidden" in row["unverified_fields"]  # not in the repository (rule 5 of the .md)


def test_precision_matches_the_config_name() -> None:
    """An `_fp4` config is an NVFP4 row; every other row is FP8."""
    for row in ROWS:
        fp4 = "_fp4.sh" in row["citation"]
        assert row["precision"].startswith("NVFP4") == fp4
        assert fp4 or row["precision"].startswith("FP8")


def test_seer_reads_every_row() -> None:
    mt.assert_seer_reads_every_row(DATA)
