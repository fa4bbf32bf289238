"""Checks shared by the MLPerf Training transcription tests (tests/astral/seer/test_mlperf_*_runs.py).

Each outside-truth file transcribes MLPerf Training result folders by the rule its .md states:
one row per result folder, the step time the median of per-log figures the notes list, the
token rate that time's arithmetic, a layout that multiplies out to the GPU count and to the
logged global batch, a config file whose name (NODESxGPUSxMINIBSxtpTppPcpC[epE], the NVIDIA
reference implementations' naming) agrees with the cells, and Seer reading every row. The
checks here are those invariants; what differs per benchmark (round, log phrasing, shape,
precision) stays in each test file. Seer's error values are never asserted (outside ground
truth, nothing fitted to it).
"""

from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest

from starfabric.astral.seer.validate import read_rows, validate_all

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"

Row = dict[str, str]

LOG_FIGURE = r"result_\w+\.txt (\d+\.\d+)"
"""A per-log step time as the notes list it: the log's file name, then its figure."""

CONFIG = r"config [\w/.+-]+/config_\w+\.sh"
"""The config file a citation names (directory, then config_<name>.sh)."""


@dataclass(frozen=True)
class Transcription:
    """One outside-truth CSV and its rows, read once per test module."""

    csv: Path
    rows: list[Row]

    @property
    def ids(self) -> list[str]:
        return [r["row_id"] for r in self.rows]


def load(name: str) -> Transcription:
    """`tests/data/published_runs/<name>.csv` read by Seer's own reader."""
    path = DATA / f"{name}.csv"
    return Transcription(path, read_rows(path))


def ints(row: Row, *keys: str) -> tuple[int, ...]:
    """The named cells as integers (a blank or non-integer cell fails the test)."""
    return tuple(int(row[k]) for k in keys)


def step_time_s(row: Row) -> float:
    """The row's step time: the logged one, else the derived one."""
    return float(row["iter_time_s"] or row["derived_iter_time_s"])


def assert_header_is_development_set_2s(path: Path) -> None:
    """The file uses development_runs_2.csv's columns, so validate reads it unchanged."""
    with (DATA / "development_runs_2.csv").open(newline="") as fh:
        want = next(csv.reader(fh))
    with path.open(newline="") as fh:
        assert next(csv.reader(fh)) == want


def assert_one_row_per_result_folder(rows: list[Row], benchmark: str) -> None:
    """Rule 1: row ids are unique and no `.../results/<folder>/<benchmark>/` is cited twice."""
    ids = [r["row_id"] for r in rows]
    assert len(set(ids)) == len(ids)
    folders = [re.search(rf"\S+/results/\S+/{benchmark}/", r["citation"]) for r in rows]
    assert all(folders)
    assert len({f.group(0) for f in folders if f}) == len(rows)


def assert_cites_logs_and_config(row: Row, benchmark: str, config: str = CONFIG) -> None:
    """The citation names the folder's result logs and a config file; the row is verified
    from the primary source."""
    cite = row["citation"]
    assert re.search(rf"/results/[^/ ]+/{benchmark}/result_\*\.txt", cite)
    assert re.search(config, cite)
    assert row["verification"].startswith("VERIFIED_PRIMARY")


def listed_logs(row: Row, figure: str = LOG_FIGURE) -> list[float]:
    """The per-log step times the notes list (`figure` captures one)."""
    return [float(x) for x in re.findall(figure, row["notes"])]


def assert_median_of_listed_logs(row: Row, listed: list[float], *, abs_tol: float) -> None:
    """The row's step time is the median of the listed per-log figures (to the decimals it is
    written to, `abs_tol`) and is the row's primary value."""
    assert step_time_s(row) == pytest.approx(statistics.median(listed), abs=abs_tol)
    assert float(row["value_primary"]) == step_time_s(row)


def assert_logged_not_derived(row: Row, note: str) -> None:
    """The step time is read from the logs (iter_time_s), not derived, and the derivation note
    names the logged quantity `note`."""
    assert row["iter_time_s"] and not row["derived_iter_time_s"]
    assert note in row["derivation_note"]


def assert_token_rate(row: Row, seq_len: int) -> None:
    """tokens_per_batch = GBS x sequence; the per-GPU rate is that over the step time and the
    GPU count (written from the unrounded median: relative 1e-4)."""
    gbs, seq, gpus = ints(row, "global_batch_seqs", "seq_len", "num_gpus")
    assert seq == seq_len
    assert int(row["tokens_per_batch"]) == gbs * seq
    tps = gbs * seq / step_time_s(row) / gpus
    assert float(row["derived_tokens_per_sec_per_gpu"]) == pytest.approx(tps, rel=1e-4)


def assert_layout_multiplies_out(row: Row) -> int:
    """TP x PP x CP x DP = GPUs and GBS = micro-batch x logged accumulation x DP; returns the
    accumulation the notes log (`gradient_accumulation_steps N`)."""
    tp, pp, cp, dp, gpus, mb, gbs = ints(
        row, "tp", "pp", "cp", "dp", "num_gpus", "micro_batch", "global_batch_seqs"
    )
    assert tp * pp * cp * dp == gpus
    ga = re.search(r"gradient_accumulation_steps (\d+)", row["notes"])
    assert ga is not None
    assert mb * int(ga.group(1)) * dp == gbs
    return int(ga.group(1))


@dataclass(frozen=True)
class ConfigName:
    """The layout a config file's name states: NODESxGPUSxMINIBSxtpTppPcpC[epE]."""

    nodes: int
    per_node: int
    minibs: int
    tp: int
    pp: int
    cp: int
    ep: int | None


def config_name(row: Row, prefix: str = r"\w+?", with_ep: bool = False) -> ConfigName | None:
    """The cited config file name's layout (`prefix`: the system part of the name before the
    layout); None when the name states none."""
    ep = r"ep(\d+)" if with_ep else ""
    m = re.search(rf"config_{prefix}_(\d+)x(\d+)x(\d+)xtp(\d+)pp(\d+)cp(\d+){ep}", row["citation"])
    if m is None:
        return None
    g = [int(x) for x in m.groups()]
    return ConfigName(*g[:6], ep=g[6] if with_ep else None)


def assert_config_name_agrees(row: Row, name: ConfigName, minibs: int) -> None:
    """The name's NODES x GPUS is the GPU count, GPUS the per-node count, MINIBS `minibs` and
    its TP/PP/CP (and EP where the name has it) the row's."""
    tp, pp, cp, ep, gpus, gpn = ints(row, "tp", "pp", "cp", "ep", "num_gpus", "gpus_per_node")
    assert (name.nodes * name.per_node, name.per_node, name.minibs, name.tp, name.pp, name.cp) == (
        gpus,
        gpn,
        minibs,
        tp,
        pp,
        cp,
    )
    assert name.ep is None or name.ep == ep


def assert_seer_reads_every_row(data: Transcription) -> None:
    """validate reads every row (none fails) and returns each id once."""
    results, failed = validate_all(data.csv)
    assert failed == []
    assert sorted(r.row_id for r in results) == sorted(data.ids)
