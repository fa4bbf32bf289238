"""MLPerf Training GPT-3 175B, rounds v3.0, v4.0 (session 21i) and v4.1 (session 22d)
(tests/data/published_runs/mlperf_gpt3_runs.csv): the transcription's invariants — each row's step time is the median of the per-log
figures its notes list, the token rate is that time's arithmetic, the layout multiplies out to the
GPU count and to the logged global batch, every row cites its own logs — and Seer reads every row.
Seer's error values are not asserted here (outside ground truth, nothing fitted to it)."""

import csv
import re
import statistics
from pathlib import Path

import pytest

from starfabric.astral.seer.validate import read_rows, validate_all

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"
CSV = DATA / "mlperf_gpt3_runs.csv"
ROWS = read_rows(CSV)
IDS = [r["row_id"] for r in ROWS]


def _step_s(row: dict[str, str]) -> float:
    return float(row["iter_time_s"] or row["derived_iter_time_s"])


def test_header_is_development_set_2s() -> None:
    with (DATA / "development_runs_2.csv").open(newline="") as fh:
        want = next(csv.reader(fh))
    with CSV.open(newline="") as fh:
        assert next(csv.reader(fh)) == want


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
    cite = row["citation"]
    assert re.search(r"/results/[^/ ]+/gpt3/result_\*\.txt", cite)
    assert re.search(r"config [\w/.]+/config_\w+\.sh", cite)
    assert row["verification"].startswith("VERIFIED_PRIMARY")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_median_of_the_listed_logs(row: dict[str, str]) -> None:
    """The notes list each log's steady-state step time; the row's figure is their median."""
    listed = [float(x) for x in re.findall(r"result_[\w-]+\.txt (\d+\.\d+)", row["notes"])]
    assert len(listed) >= 3
    assert _step_s(row) == pytest.approx(statistics.median(listed), abs=5e-5)
    assert float(row["value_primary"]) == _step_s(row)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_per_step_logs_fill_iter_time_and_block_derivations_are_marked(
    row: dict[str, str],
) -> None:
    """v3.0 and v4.1 logs print train_step_timing (iter_time_s); v4.0 figures are derived from
    block markers and sit in derived_iter_time_s with a DERIVED note."""
    if "v3.0" in row["citation"] or "v4.1" in row["citation"]:
        assert row["iter_time_s"] and not row["derived_iter_time_s"]
        assert "train_step_timing" in row["derivation_note"]
    else:
        assert row["derived_iter_time_s"] and not row["iter_time_s"]
        assert row["derivation_note"].startswith("DERIVED")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tokens_per_second_is_gbs_times_seq_over_step_time(row: dict[str, str]) -> None:
    gbs, seq, gpus = (int(row[k]) for k in ("global_batch_seqs", "seq_len", "num_gpus"))
    assert seq == 2048
    assert int(row["tokens_per_batch"]) == gbs * seq
    tps = gbs * seq / _step_s(row) / gpus
    # the step time is written to 4 decimals, the rate from the unrounded median
    assert float(row["derived_tokens_per_sec_per_gpu"]) == pytest.approx(tps, rel=1e-4)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out_to_gpus_and_logged_batch(row: dict[str, str]) -> None:
    """TP x PP x DP = GPUs (CP = EP = 1); GBS = micro-batch x logged accumulation x DP; the
    interleave divides the 96 layers evenly over PP x VPP chunks."""
    tp, pp, vpp, dp, cp, ep, gpus, mb, gbs, layers = (
        int(row[k])
        for k in ("tp", "pp", "vpp", "dp", "cp", "ep", "num_gpus", "micro_batch",
                  "global_batch_seqs", "layers")
    )  # fmt: skip
    assert cp == ep == 1
    assert tp * pp * dp == gpus == 8 * int(gpus / 8)
    ga = re.search(r"gradient_accumulation_steps (\d+)", row["notes"])
    assert ga is not None
    assert mb * int(ga.group(1)) * dp == gbs
    assert layers % (pp * vpp) == 0


def test_seer_reads_every_row() -> None:
    results, failed = validate_all(CSV)
    assert failed == []
    assert sorted(r.row_id for r in results) == sorted(IDS)
