"""MLPerf Training Llama 3.1 8B, rounds v5.1 and v6.0 (tests/data/published_runs/
mlperf_llama31_8b_runs.csv, session 22c): the transcription's invariants — each row's step time
is the median of the per-log figures its notes list (all ten logs in v5.1, the three paged logs
in v6.0), the token rate is that time's arithmetic, the layout multiplies out to the GPU count and
to the logged global batch, every row cites its own logs and config, the shape is 8B's, every
row states its attention precision — and Seer reads every row. Seer's error values are not
asserted here (outside ground truth, nothing fitted to it). The checks shared with the other
MLPerf files are in mlperf_transcription.py."""

import re

import pytest

from astral.seer import mlperf_transcription as mt

DATA = mt.load("mlperf_llama31_8b_runs")
ROWS = DATA.rows
IDS = DATA.ids
LOGS_PER_ROUND = {"v5.1": 10, "v6.0": 3}
"""Logs per row: every v5.1 folder holds ten (all read); v6.0 reads result_0..2 (rule 3b)."""


def _round(row: dict[str, str]) -> str:
    m = re.search(r"training_results_(v\d\.\d) @[0-9a-f]{12} ", row["citation"])
    assert m is not None, row["row_id"]
    return m.group(1)


def test_header_is_development_set_2s() -> None:
    mt.assert_header_is_development_set_2s(DATA.csv)


def test_rounds_are_v51_and_v60_and_rows_unique() -> None:
    assert len(ROWS) == 35
    rounds = [_round(r) for r in ROWS]
    assert rounds.count("v5.1") == 31 and rounds.count("v6.0") == 4
    # one row per result folder (rule 1), no folder twice
    mt.assert_one_row_per_result_folder(ROWS, "llama31_8b")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_cites_its_logs_and_config(row: dict[str, str]) -> None:
    mt.assert_cites_logs_and_config(
        row, "llama31_8b", config=r"config [\w/.+-]+/config_[\w.+-]+\.sh"
    )
    # the rule-1 clause that named the config
    assert re.search(r"config named by rule 1[abc] \(", row["notes"])


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_median_of_the_listed_logs(row: dict[str, str]) -> None:
    """The notes list each log's median train_step_time; the row's figure is their median."""
    listed = mt.listed_logs(row)
    assert len(listed) == LOGS_PER_ROUND[_round(row)]
    mt.assert_logged_not_derived(row, "train_step_time")
    # the row is written to 5 decimals, as the per-log figures are
    mt.assert_median_of_listed_logs(row, listed, abs_tol=1e-5)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tokens_per_second_is_gbs_times_seq_over_step_time(row: dict[str, str]) -> None:
    mt.assert_token_rate(row, seq_len=8192)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out_to_gpus_and_logged_batch(row: dict[str, str]) -> None:
    """TP x PP x CP x DP = GPUs (EP = 1, no PP); GBS = micro-batch x accumulation x DP; a config
    name of the form NODESxGPUSxMINIBSxtpTppPcpC agrees with the cells (MINIBS = MBS x GA)."""
    pp, ep, mb = mt.ints(row, "pp", "ep", "micro_batch")
    assert ep == 1 and pp == 1 and not row["vpp"]
    ga = mt.assert_layout_multiplies_out(row)
    name = mt.config_name(row, prefix=r"[\w-]*?")
    if name is None:  # system-named files (Dell 1xXE9680L, Lenovo) carry no layout in the name
        assert re.search(r"rule 1b \(file named for the system\)", row["notes"])
        return
    mt.assert_config_name_agrees(row, name, minibs=mb * ga)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_shape_is_llama31_8b(row: dict[str, str]) -> None:
    shape = tuple(
        int(row[k]) for k in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab")
    )
    assert shape == (32, 4096, 14336, 32, 8, 128256)
    assert "hidden" in row["unverified_fields"]  # not in the repository (rule 5 of the .md)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_precision_and_attention_precision_are_stated(row: dict[str, str]) -> None:
    """Every row names its GEMM precision and its attention precision (rule 2); an `_fp4`
    config is an NVFP4 row, and every NVFP4 row here runs FP8 attention
    (config_common_fp8attn.sh with config_common_fp4.sh's Float8CurrentScaling DPA recipe)."""
    prec = row["precision"]
    nvfp4 = prec.startswith("NVFP4")
    assert nvfp4 or prec.startswith("FP8")
    assert ("attention in FP8 (FP8_DPA=True" in prec) != ("attention BF16" in prec)
    if "_fp4.sh" in row["citation"]:
        assert nvfp4
    if nvfp4:
        assert "attention in FP8" in prec


def test_seer_reads_every_row() -> None:
    mt.assert_seer_reads_every_row(DATA)
