"""Invariants shared by the outside-truth transcription tests (tests/astral/seer/test_*_runs.py,
test_moe_cross_host_baselines.py): what every row of a published-runs file must state, and a
layout that multiplies out to its GPU count and batch, and the row lookup and framework / citation
cells the era-overlap tests (test_legacy_overlap.py, test_async_grad_input.py) share. Per-source
checks stay in each file."""

from __future__ import annotations

import csv
from pathlib import Path

Row = dict[str, str]
DEV2 = Path(__file__).resolve().parents[2] / "data" / "published_runs" / "development_runs_2.csv"
"""The development set whose 55-column layout every outside file copies."""
DATA = DEV2.parent
"""tests/data/published_runs."""

NEMO_FW = (
    "NeMo Megatron 22.06 (NeMo 1.10.0 with Apex Megatron layers, PyTorch Lightning 1.6.5, "
    "PyTorch 1.12.0a0) (2022)"
)
"""The framework cell of the NeMo Megatron 22.06 rows (a100_scale_runs.csv)."""
N21_CITATION = "arXiv:2104.04473 (Narayanan et al., SC'21) Table 1"
"""A citation dated by its arXiv identifier (2021-04)."""


def row_by_id(path: Path, row_id: str) -> Row:
    """The row `row_id` of a published-runs CSV, as `seer validate --csv` reads it."""
    from starfabric.astral.seer.validate import read_rows

    return next(r for r in read_rows(path) if r["row_id"] == row_id)


def header(path: Path) -> list[str]:
    """The column names of a CSV file, in order."""
    with path.open(newline="") as fh:
        return next(csv.reader(fh))


def check_header_is_development_set_2s(path: Path) -> None:
    """The file has development_runs_2.csv's columns, in its order."""
    assert header(path) == header(DEV2), path.name


def check_figures_and_provenance(rows: list[Row], notes: str) -> None:
    """Every row is verified, names its metric with unit and value, names the FLOP convention
    of any TFLOP/s figure, and its source is described in the file's notes (.md)."""
    for r in rows:
        assert r["verification"].startswith("VERIFIED_"), r["row_id"]
        assert r["metric_primary"] and r["unit_primary"] and r["value_primary"], r["row_id"]
        assert r["tflops_per_gpu"] == "" or r["tflops_flop_convention"], r["row_id"]
        assert r["source_id"] in notes, r["source_id"]


def check_layout_and_batch(rows: list[Row]) -> None:
    """TP x PP x DP x CP is the GPU count, the batch in sequences times the sequence length is the
    tokens per batch, and the run spans more than one host."""
    for r in rows:
        n, tp, pp, dp = (int(r[k]) for k in ("num_gpus", "tp", "pp", "dp"))
        assert tp * pp * dp * int(r["cp"]) == n, r["row_id"]
        assert int(r["global_batch_seqs"]) * int(r["seq_len"]) == int(r["tokens_per_batch"])
        assert n % int(r["gpus_per_node"]) == 0 and n // int(r["gpus_per_node"]) > 1, r["row_id"]
