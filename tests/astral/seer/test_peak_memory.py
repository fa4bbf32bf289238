"""Seer's memory against published peak memory of real runs (tests/data/published_memory).

What a published figure bounds (peak_memory.py):
- `max_reserved` (the PyTorch allocator's reserved peak, TorchTitan's logged "memory") is at
  least the live tensors at the peak, at most them times (1 + FRAGMENTATION_MAX), and leaves
  out the CUDA context and NCCL's buffers. Seer's comparable figure is its total less
  `memory.RESERVED_BYTES` (CONTEXT_OUTSIDE_ALLOCATOR), its own lump for context, NCCL,
  workspaces and fragmentation.
- `runs`: the configuration ran, so Seer must not find it out of memory; that is the error
  which makes `seer validate` pick full recompute or a slower layout for an UNVERIFIED row.
- `oom`: the publisher's run failed for memory, so Seer should find it short.

FRAGMENTATION_MAX = 0.25: the largest reserved/allocated ratio in XTuner's published training
log (InternLM/xtuner docs/en/get_started/installation.md: "max_memory: 7.06 GB
reserved_memory: 8.79 GB", 1.245; other steps 1.05-1.19).

Measured (this file's rows, Seer after stage_activations.py / mla_activations.py and
torchtitan_memory.py's fp32 loss and FSDP2 buffers): every `runs` row fits; no `max_reserved`
row outside TorchTitan's per-op SAC is over-estimated; Table 2 (8B, 32K tokens per rank) is
now explained (published/Seer 1.11-1.12, was 2.07-2.09), the others remain under-estimated
(published/Seer: 70B TP8 1.36-1.45, 405B PP8 1.21-2.10 -- FSDP2 under PyTorch's pipelining
accumulates the stage's unsharded gradients in fp32 across micro-batches, not modelled --,
Qwen3-30B DeepEP B200 1.32-1.71, DeepSeek-V3 GB300 1.42-1.58); the per-op SAC rows, with
TorchTitan's `_save_list` tensors, are at 1.02-1.12 (they were over-estimated 9-15% as
Megatron's core_attn recompute). The remaining gaps are strict xfails: they fail loudly once
modelled.
"""

import csv
import io
from pathlib import Path

import pytest

from starfabric.astral.seer import peak_memory
from starfabric.astral.seer.memory import RESERVED_BYTES, MemoryReport
from starfabric.astral.seer.peak_memory import PeakRow, read_peaks, seer_memory
from starfabric.errors import DataError

DATA = Path(__file__).parents[2] / "data"
CSV = DATA / "published_memory" / "peak_memory.csv"
RUNS = DATA / "published_runs"
GIB = 2**30
CONTEXT_OUTSIDE_ALLOCATOR = RESERVED_BYTES
FRAGMENTATION_MAX = 0.25
ROWS = read_peaks(CSV)
_CACHE: dict[str, MemoryReport] = {}


def _mem(r: PeakRow) -> MemoryReport:
    if r.memory_id not in _CACHE:
        _CACHE[r.memory_id] = seer_memory(r, RUNS)
    return _CACHE[r.memory_id]


def _tensors_gib(r: PeakRow) -> float:
    return (_mem(r).total - CONTEXT_OUTSIDE_ALLOCATOR) / GIB


RESERVED = [r for r in ROWS if r.kind == "max_reserved"]
OP_SAC = {r.memory_id for r in RESERVED if "per-op SAC" in r.notes}
"""Rows whose notes state TorchTitan's per-op selective AC (Seer prices it as core_attn)."""


def test_the_file_has_every_kind_and_all_sources() -> None:
    assert {r.kind for r in ROWS} == {"max_reserved", "runs", "oom"}
    assert len(RESERVED) >= 20 and sum(r.kind == "runs" for r in ROWS) >= 8
    assert {r.source_id for r in ROWS} >= {
        "TORCHTITAN_2412", "TORCHTITAN_DEEPEP_B200", "TORCHTITAN_DSV3_GB300", "MOEZOO_QWEN3",
        "MOEZOO_DSV3", "MCORE_DSV3_GB200",
    }  # fmt: skip


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "runs"], ids=lambda r: r.memory_id)
def test_configurations_that_ran_fit(row: PeakRow) -> None:
    m = _mem(row)
    assert not m.oom, f"{row.memory_id}: Seer {m.total / GIB:.1f} GiB of {m.capacity / GIB:.0f}"


@pytest.mark.parametrize(
    "row", [r for r in RESERVED if r.memory_id not in OP_SAC], ids=lambda r: r.memory_id
)
def test_no_reserved_peak_is_over_estimated(row: PeakRow) -> None:
    assert row.published_gib is not None
    assert _tensors_gib(row) <= row.published_gib


def test_torchtitan_per_op_sac_rows_are_not_over_estimated() -> None:
    """Their saved tensors are TorchTitan's `_save_list` (torchtitan_memory.op_sac_bytes_per_token)."""
    rows = [r for r in RESERVED if r.memory_id in OP_SAC]
    assert rows and all(r.published_gib and _tensors_gib(r) <= r.published_gib for r in rows)


@pytest.mark.xfail(
    strict=True,
    reason="TorchTitan 70B/405B/DeepEP/DSV3 rows still under (PP grad accumulation, MoE)",
)
def test_reserved_peaks_are_explained_up_to_fragmentation() -> None:
    assert all(
        r.published_gib and r.published_gib <= _tensors_gib(r) * (1 + FRAGMENTATION_MAX)
        for r in RESERVED
    )


@pytest.mark.xfail(
    strict=True, reason="the DeepEP under-estimate (local batch 16: Seer 129 of 178 GiB)"
)
def test_published_oom_is_found_short() -> None:
    assert all(_mem(r).oom for r in ROWS if r.kind == "oom")


def test_the_oom_row_is_read_with_its_own_local_batch() -> None:
    """The OOM row overrides the named run's micro-batch (16 instead of 10): Seer's memory
    grows with it, so the row is not silently the same run."""
    oom = next(r for r in ROWS if r.kind == "oom")
    same_run = next(r for r in RESERVED if r.row_id == oom.row_id)
    assert _mem(oom).activations > _mem(same_run).activations * 1.4


def test_bad_kind_is_a_data_error(tmp_path: Path) -> None:
    bad = tmp_path / "m.csv"
    bad.write_text(CSV.read_text().splitlines()[0] + "\nX-1,S,c,peak,1.0,,,,llama-3.1-8b\n")
    with pytest.raises(DataError, match="kind"):
        read_peaks(bad)


def _stated_row(**cells: str) -> str:
    cols = CSV.read_text().splitlines()[0].split(",")
    row = dict.fromkeys(cols, "") | {"memory_id": "X-1", "source_id": "S", "kind": "runs"}
    row |= {"model": "llama-3.1-8b", "gpu": "H100", "num_gpus": "8", "micro_batch": "1",
            "global_batch": "64", "seq_len": "8192"} | cells  # fmt: skip
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=cols)
    w.writeheader()
    w.writerow(row)
    return out.getvalue()


@pytest.mark.parametrize(
    ("cells", "match"),
    [
        ({"micro_batch": "two"}, "micro_batch = 'two'"),
        ({"tp": "2.5"}, "tp = '2.5'"),
        ({"pipeline_layers": "[16,x]"}, "pipeline_layers = 'x'"),
        ({"gpu": ""}, "no row_id and no gpu"),
        ({"ep_comm_overlap": "ture"}, "ep_comm_overlap = 'ture'"),
    ],
)
def test_a_bad_stated_configuration_is_a_data_error(
    tmp_path: Path, cells: dict[str, str], match: str
) -> None:
    """A row stating its own configuration is checked when read: a malformed or missing cell
    is a DataError naming the row and column, not a ValueError/KeyError in `seer_memory`."""
    bad = tmp_path / "m.csv"
    bad.write_text(_stated_row(**cells))
    with pytest.raises(DataError, match=match):
        read_peaks(bad)


def test_a_good_stated_configuration_reads(tmp_path: Path) -> None:
    good = tmp_path / "m.csv"
    good.write_text(_stated_row(tp="2"))
    (row,) = read_peaks(good)
    assert row.config["tp"] == "2" and not row.row_id


def test_a_stated_overlap_cell_reads_as_the_performance_rows_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ep_comm_overlap is read with cells.flag, as validate reads a yes/no cell: "enabled"
    is on (a private true/yes/on/1 list read it as off)."""
    seen: list[dict] = []
    real = peak_memory.make_job

    def spy(model, ex, system):  # type: ignore[no-untyped-def]
        seen.append(dict(ex))
        return real(model, ex, system)

    monkeypatch.setattr(peak_memory, "make_job", spy)
    f = tmp_path / "m.csv"
    for raw in ("enabled", "false"):
        f.write_text(_stated_row(model="mixtral-8x7b-v0.1", ep="8", ep_comm_overlap=raw))
        seer_memory(read_peaks(f)[0], DATA)
    assert [ex["ep_comm_overlap"] for ex in seen] == [True, False]


def test_a_named_row_refuses_cells_it_would_ignore(tmp_path: Path) -> None:
    """Beside a row_id only micro_batch and global_batch override the performance row; any
    other configuration cell (here tp) was silently ignored."""
    rows = list(csv.DictReader(CSV.open(newline="")))
    named = next(r for r in rows if r["row_id"]) | {"tp": "4"}
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerow(named)
    bad = tmp_path / "m.csv"
    bad.write_text(out.getvalue())
    with pytest.raises(DataError, match="tp given for the named performance row"):
        read_peaks(bad)
