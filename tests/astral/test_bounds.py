"""Physical bounds of ingested measurements (astral/bounds.py, issue 29): every real sample in
tests/data is inside them, a value beyond them is refused with file, row, value and bound, and
the bandwidth ceiling follows the hardware catalog instead of a constant."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral import bounds, hardware
from starfabric.astral.hardware import GPUSpec
from starfabric.astral.kineto import read_kineto
from starfabric.astral.monitor import TelemetryStore, ingest_path
from starfabric.astral.nccltests import parse_nccl_tests
from starfabric.errors import DataError

DATA = Path(__file__).resolve().parents[1] / "data"
NCCL = sorted(p for p in (DATA / "nccl_tests").iterdir() if p.suffix != ".md")
TELEMETRY = sorted(p for p in (DATA / "telemetry").iterdir() if p.suffix != ".md")
KINETO = sorted((DATA / "kineto").glob("*.json.gz"))


def test_the_bandwidth_ceiling_is_the_catalogs_fastest_link_both_ways() -> None:
    fastest = max(g.nvlink_gbps for g in hardware.list_gpus())
    assert bounds.max_link_gbytes_per_s() == fastest  # NVLink 5: 900 GB/s per direction
    assert bounds.bandwidth().hi == bounds.LINK_DIRECTIONS * fastest


def test_a_faster_link_in_the_catalog_raises_the_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    b200 = hardware.get_gpu("B200")
    fast = b200.model_copy(update={"name": "X-future", "aliases": (), "nvlink_gbps": 3600.0})
    assert isinstance(fast, GPUSpec)
    monkeypatch.setattr(hardware.GPUS, "_items", {**hardware.GPUS._items, "X-future": fast})
    assert bounds.bandwidth().hi == 7200.0


@pytest.mark.parametrize("path", NCCL, ids=lambda p: p.name)
def test_every_real_nccl_log_is_inside_the_bounds(path: Path) -> None:
    run = parse_nccl_tests(path)  # refuses anything out of bounds
    bw = np.concatenate([run.algbw_gbps, run.busbw_gbps, run.busbw_gbps_inplace])
    assert np.nanmax(bw) < bounds.bandwidth().hi
    assert run.time_us.max() < bounds.duration("us", 1e6).hi


@pytest.mark.parametrize("path", [*NCCL, *KINETO, *TELEMETRY], ids=lambda p: p.name)
def test_every_real_sample_still_ingests(path: Path, tmp_path: Path) -> None:
    with TelemetryStore(tmp_path / "t.duckdb") as st_:
        kind, rows = ingest_path(st_, path)  # the format detected, as `monitor ingest` does
    assert (kind == "nccl-tests") == (path in NCCL)
    no_nccl = path.name == "hta_trace_compare_base_tiny.json.gz"  # no NCCL kernels (SOURCES.md)
    assert (rows == 0) if no_nccl else (rows > 0)


_ROW = 42  # a row of the superbench all_reduce log: 33554432 B, 374.3 us, 89.65 / 156.89 GB/s


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    column=st.sampled_from((4, 5, 6)),  # time, algbw, busbw (out-of-place)
    value=st.floats(min_value=2.0, max_value=1e308).map(lambda x: x * 2e13),
)
def test_a_cell_beyond_its_bound_is_refused_with_its_line(column: int, value: float) -> None:
    """Times above a year (3.16e13 us) and bandwidths above 1,800 GB/s, anywhere up to 1e308."""
    src = DATA / "nccl_tests" / "superbench_1node_8xa100_40gb_nccl_allreduce.log"
    lines = src.read_text().splitlines()
    cells = lines[_ROW - 1].split()
    cells[column] = repr(min(value, 1e308))
    lines[_ROW - 1] = "   ".join(cells)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / src.name
        f.write_text("\n".join(lines) + "\n")
        with pytest.raises(DataError) as e:
            parse_nccl_tests(f)
    msg = str(e.value)
    assert f"line {_ROW}" in msg and "is above" in msg and "fix:" in msg, msg


def test_the_bound_message_names_value_bound_and_its_constant() -> None:
    with pytest.raises(DataError) as e:
        bounds.duration("us", 1e6).check(1e308, "f.txt: line 3", "time", "repair the row")
    assert str(e.value) == (
        "f.txt: line 3: time 1e+308 us is above 3.156e+13 us (a year, bounds.MAX_DURATION_S) "
        "(fix: repair the row)"
    )
    with pytest.raises(DataError, match="is below 0 us"):
        bounds.duration("us", 1e6).check(-1.0, "f", "dur", "fix")
    assert bounds.duration("us", 1e6).check(0.0, "f", "dur", "fix") == 0.0


def _nccl_trace(tmp_path: Path, **args: object) -> Path:
    doc = json.loads(gzip.decompress((DATA / "kineto" / "hta_sampled_rank-0.json.gz").read_bytes()))
    ev = next(e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ncclKernel"))
    ev["args"].update(args)
    f = tmp_path / "trace.json"
    f.write_text(json.dumps(doc))
    return f


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"In msg nelems": 1e308}, "args['In msg nelems'] 1e+308 elements is above"),
        ({"In msg nelems": "abc"}, "'abc' is not a number"),
        ({"In msg nelems": 2.5}, "not a whole number"),
        ({"Group size": 2**40}, "args['Group size'] 1.09951e+12 ranks is above"),
        ({"Group size": -7}, "is below 1 ranks"),
    ],
)
def test_kineto_kernel_arguments_are_bounded(tmp_path: Path, args: dict, words: str) -> None:  # type: ignore[type-arg]
    f = _nccl_trace(tmp_path, **args)
    with TelemetryStore(tmp_path / "t.duckdb") as st_, pytest.raises(DataError) as e:
        ingest_path(st_, f, "kineto")
    assert words in str(e.value) and "traceEvents[" in str(e.value), str(e.value)


def test_kineto_in_bounds_arguments_are_stored(tmp_path: Path) -> None:
    f = _nccl_trace(tmp_path, **{"In msg nelems": 1048576, "Group size": 128})
    with TelemetryStore(tmp_path / "t.duckdb") as st_:
        assert ingest_path(st_, f, "kineto")[1] == 10


def test_a_400_digit_integer_time_is_refused(tmp_path: Path) -> None:
    doc = json.loads(
        gzip.decompress((DATA / "kineto" / "hta_trace_compare_base_tiny.json.gz").read_bytes())
    )
    doc["traceEvents"][11]["dur"] = 10**400
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="not a finite number"):
        read_kineto(f)


@pytest.mark.parametrize(
    ("value", "words"),
    [("1e308", "iter_time_s 1e+308 s is above"), ("-3", "is below 0 s"),
     ("abc", "'abc' is not a number"), ("0", "is zero")],
)  # fmt: skip
def test_a_published_run_beyond_the_bounds_is_flagged_with_its_row(
    value: str, words: str, tmp_path: Path
) -> None:
    """`seer validate --csv`: the row is not predicted (named, with the reason); the others are."""
    import csv

    from starfabric.astral.seer.validate import validate_all

    src = DATA / "published_runs" / "megatron_weak_scaling.csv"
    with src.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[1]["iter_time_s"] = value
    f = tmp_path / "runs.csv"
    with f.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows[:3])
    done, failed = validate_all(f)
    assert [r.row_id for r in done] == [rows[0]["row_id"], rows[2]["row_id"]]
    ((row_id, why),) = failed
    assert row_id == rows[1]["row_id"] and words in why and f"row {row_id}" in why, why
