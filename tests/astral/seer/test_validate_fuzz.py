"""No published-runs row can crash `seer validate --csv` (issue 32's held-out readiness).

A held-out CSV is transcribed by someone else; one cell the reader cannot take must cost that
row (a one-line StarfabricError naming the column, exit 2 or "not predicted"), never the run
(a traceback). These tests take real rows of the bundled CSVs — dense, MoE, MLA, CP and long
context, A100, Blackwell, DeepSpeed, TorchTitan, FSDP, UNVERIFIED degrees — rewrite one or two
cells with generated text (placeholders, numbers with units, ranges and overflow, unicode,
another cell's text, 100 kB pastes) and pass the row through the CLI's per-row path
(`excluded_reason`, then `validate_row`). STARFABRIC_FUZZ_EXAMPLES raises the example count
for a longer local search.
"""

from __future__ import annotations

import csv
import math
import os
import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from starfabric.astral.seer.validate import (
    excluded_reason,
    read_rows,
    validate_row,
)
from starfabric.cli import app
from starfabric.errors import DataError, StarfabricError

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"
MESSAGE_CHARS = 2_000
"""Longest one-line refusal a row may print (its row id aside): a 100 kB cell is not echoed."""
EXAMPLES = int(os.environ.get("STARFABRIC_FUZZ_EXAMPLES", "200"))

BASES = (
    ("development_runs.csv", "N21-T2-01"),  # dense GPT, A100, Megatron PTD-P, vpp UNVERIFIED
    ("development_runs.csv", "DSV3-01"),  # MoE with MLA (bundled HF config)
    ("development_runs.csv", "L3-T4-3"),  # Llama 3 long context with CP
    ("development_runs.csv", "N21-T2-07"),  # DeepSpeed ZeRO-3
    ("development_runs.csv", "L3-T4-1"),  # FSDP
    ("development_runs.csv", "OPT-01"),  # UNVERIFIED parallel degrees
    ("development_runs_2.csv", "TT24-T2-01"),  # TorchTitan
    ("development_runs_2.csv", "MPF-T3-01"),  # MoE
    ("development_runs_2.csv", "TTDEEPEP-01"),  # Blackwell, DeepEP
    ("development_runs_2.csv", "GLM130B-01"),  # DeepSpeed pipeline
    ("reader_phrasings.csv", "PREC-B00"),  # Blackwell MoE, FP8 recipe words
    ("reader_phrasings.csv", "SEQ-1M-3"),  # 1M-token context
    ("reader_phrasings.csv", "UNV-1"),  # UNVERIFIED hints
    ("a100_era_runs.csv", "NEOX20B-01"),  # GPT-NeoX, DeepSpeed
    ("long_context_cp_baselines.csv", "USP24-L2-64K-T4R2"),  # Ulysses/ring CP
    ("mlperf_dsv3_runs.csv", "MLP60-NV-GB300-0256"),  # GB300 NVL72 MoE
    ("mlperf_gptoss_runs.csv", "MLP60-NV-GB300-0512"),  # GPT-OSS, sliding window
    ("mlperf_llama31_8b_runs.csv", "MLP51-DEL-B200-0008a"),  # one B200 host
    ("moe_ep_cross_host_runs.csv", "XTMB-01"),  # EP across hosts
    ("smp_p4d_runs.csv", "AWSFSDP-P4D-01"),  # EFA, p4d
    ("smp_p4d_runs.csv", "AWSTT-P5-01"),  # TorchTitan on p5
)
"""Base rows: each a different kind of run, so each reader is reached with real neighbours."""


@cache
def _rows(name: str) -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in read_rows(DATA / name)}


@cache
def _bases() -> list[dict[str, str]]:
    return [_rows(f)[rid] for f, rid in BASES]


@cache
def _columns() -> list[str]:
    with (DATA / "development_runs_2.csv").open(newline="", encoding="utf-8") as fh:
        return next(csv.reader(fh))


@cache
def _pool() -> list[str]:
    """Every distinct cell of the base rows' files: another row's text in this row's cell."""
    cells = {v for f, _ in BASES for r in _rows(f).values() for v in r.values() if v}
    return sorted(cells)


PLACEHOLDERS = ("", " ", "\t", "UNVERIFIED", "UNVERIFIED()", "n/a", "N/A", "—", "-", "–", "?",
                "none", "yes", "no", "TBD", "see notes", "EXCLUDED")  # fmt: skip
NUMBERS = ("4,096", "8K", "1M", "2-4", "2–4", "~512", "1e6", "0", "-8", "nan", "inf", "-inf",
           "1e400", "0.5", "1/2", "1/0", "0/0", "2^10", "2^99", "99^99", "8x", "x8", "8 x 0",
           "0 nodes x 8 GPUs", "128 nodes x 0 GPUs", "3,072 (8 x 12 x 32)", "4.5", "1,1,1",
           "9" * 400, "1" + "0" * 30, "18446744073709551617", "00", "+8", "8+", "4 096",
           "1_000", "0x10", "10%", "-0", "1e-300", "MBS/GBS 0/0", "MBS/GBS 1/1e400")  # fmt: skip
UNITS = ("", " ", "K", "M", "B", " tokens", " GPUs", " nodes", " s", " ms", " TFLOP/s",
         " PFLOP/s", " tokens/s", "x", " (paper)", " GB/s", " Gb/s", " %")  # fmt: skip
UNICODE = "—–−×µ０１２３４５６７８９½²ⅷ٣𝟖\u200b\u00a0\ufefféİı∞≈~"


def _text() -> st.SearchStrategy[str]:
    """Generated cell text: each strategy the brief of issue 32's held-out check names."""
    number = st.one_of(
        st.sampled_from(NUMBERS),
        st.integers(-(10**30), 10**30).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
    )
    with_unit = st.tuples(st.sampled_from(("", "~", "≈", "UNVERIFIED ")), number,
                          st.sampled_from(UNITS)).map("".join)  # fmt: skip
    unicode = st.text(alphabet=UNICODE + "0123456789.,-/ KMxX()", max_size=16)
    pasted = st.tuples(st.sampled_from(("9", "1,", "x ", "(", "UNVERIFIED ", "tp=8; ", "8 x ",
                                        "2^", "4K ", "a")),
                       st.integers(1_000, 25_000)).map(lambda t: (t[0] * t[1])[:100_000])  # fmt: skip
    swapped = st.sampled_from(_pool())
    mixed = st.tuples(st.one_of(with_unit, swapped), st.sampled_from((" ", "; ", " (", "")),
                      st.one_of(with_unit, swapped)).map("".join)  # fmt: skip
    return st.one_of(
        st.sampled_from(PLACEHOLDERS), with_unit, unicode, st.text(max_size=12), swapped, mixed,
        pasted,
    )  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    """A base row with one or two cells rewritten; the rewritten cells."""
    base = draw(st.sampled_from(_bases()))
    cols = draw(st.lists(st.sampled_from(_columns()), min_size=1, max_size=2, unique=True))
    new = {c: draw(_text()) for c in cols}
    return {**base, **new}, new


def check_row(row: dict[str, str], changed: dict[str, str], spread: bool = False) -> None:
    """The CLI's per-row path: a finite result, or a one-line StarfabricError."""
    try:
        if excluded_reason(row) is not None:
            return
        res = validate_row(row, alternatives=spread)
    except StarfabricError as exc:
        msg = exc.one_line()
        assert "\n" not in msg and "\r" not in msg, msg
        # A pasted cell is quoted cut short (cells.quoted); only the row id is named whole.
        limit = MESSAGE_CHARS + len(row.get("row_id") or "")
        assert len(msg) < limit, f"{changed}: message of {len(msg)} characters"
        return
    for name in ("published_iter_s", "predicted_iter_s", "published_tflops", "predicted_tflops"):
        val = getattr(res, name)
        assert math.isfinite(val) and val > 0, f"{changed}: {name} = {val}"
    assert math.isfinite(res.error), f"{changed}: error {res.error}"


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(mutated())
def test_a_rewritten_cell_never_crashes_the_row(
    case: tuple[dict[str, str], dict[str, str]],
) -> None:
    row, changed = case
    check_row(row, changed)


@settings(max_examples=max(5, EXAMPLES // 6), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(mutated())
def test_a_rewritten_cell_never_crashes_the_spread(
    case: tuple[dict[str, str], dict[str, str]],
) -> None:
    """`seer validate --spread` keeps every feasible alternative: the same rows, the same rule."""
    row, changed = case
    check_row(row, changed, spread=True)


# Crashes the search found, one test each (cell, value, what happened before the fix).


def _base() -> dict[str, str]:
    return dict(_rows("development_runs.csv")["N21-T2-01"])


@pytest.mark.parametrize("col", ["tp", "ep", "dp", "num_gpus", "layers"])
def test_a_number_past_float_range_is_refused_naming_its_column(col: str) -> None:
    """'9' x 400 read as inf: OverflowError in int(round(inf)) (validate._int, row_forms
    gpu_count, shipped_defaults) before; now one line naming the column."""
    with pytest.raises(DataError, match=rf"column '{col}' = '9+'\.\.\. \(400 characters\) holds a "
                       "number too large"):  # fmt: skip
        validate_row({**_base(), col: "9" * 400})


def test_a_count_above_two_to_the_53_is_refused() -> None:
    """A count a double cannot hold exactly is refused by name, not read rounded."""
    with pytest.raises(DataError, match=r"column 'tp' = '10+' is above 9007199254740992"):
        validate_row({**_base(), "tp": "1" + "0" * 30})


def test_a_rate_in_the_gpu_count_s_parentheses_is_refused_in_one_line() -> None:
    """num_gpus '... (6.4 Tb/s, 800 Gb/s per GPU)': int('6.4') raised ValueError in gpu_count's
    parenthesised-product check before; a decimal is no factor of a count, so the cell is read
    by gpu_count's rule (every other number accounted for) and refused by name."""
    with pytest.raises(DataError, match=r"column 'num_gpus' = .* holds '6\.4', which the count 8"):
        validate_row({**_base(), "num_gpus": "8 GPUs (6.4 Tb/s, 800 Gb/s per GPU)"})


def test_a_batch_cell_of_thousands_of_digits_is_refused() -> None:
    """micro_batch '1,1,1,...' (8,929 digits once the commas go): ValueError from Python's
    4,300-digit int limit in row_forms._batch_statements before; now one line."""
    with pytest.raises(DataError, match=r"column 'micro_batch' = .* holds a number of 5000 digits"):
        validate_row({**_base(), "micro_batch": "1," * 5000})


@pytest.mark.parametrize(
    ("col", "value", "words"),
    [("hidden", "1000000000000", "model.MAX_PARAMS"), ("vocab", "1000000000000",
      "model.MAX_PARAMS"), ("layers", "1M", "model.MAX_LAYERS")],
)  # fmt: skip
def test_an_absurd_model_size_is_refused_before_the_schedule(
    col: str, value: str, words: str
) -> None:
    """hidden or vocab 10^12: MemoryError (or the process killed) laying out gradient buckets
    in schedule.build_timeline before; layers '1M': minutes of schedule. Now one line."""
    with pytest.raises(StarfabricError, match=re.escape(words)):
        validate_row({**_base(), col: value})


def test_a_pasted_cell_is_quoted_short() -> None:
    """A 100 kB paste in a number cell was echoed whole in the refusal."""
    with pytest.raises(DataError) as exc:
        validate_row({**_base(), "layers": "x " * 50_000})
    assert "... (99999 characters) is not a number" in exc.value.one_line()
    assert len(exc.value.one_line()) < MESSAGE_CHARS


# The file itself: what spreadsheets and hand edits do to a CSV.


def _write(path: Path, header: list[str], rows: list[list[str]], **kw: str) -> Path:
    with path.open("w", newline="", encoding=kw.get("encoding", "utf-8")) as fh:
        w = csv.writer(fh, lineterminator=kw.get("end", "\n"))
        w.writerow(header)
        w.writerows(rows)
    return path


def _header_and_row() -> tuple[list[str], list[str]]:
    row = _base()
    return list(row), list(row.values())


@pytest.mark.parametrize(("encoding", "end"), [("utf-8-sig", "\n"), ("utf-8", "\r\n")])
def test_a_bom_or_crlf_file_reads_as_the_plain_one(tmp_path: Path, encoding: str, end: str) -> None:
    """A spreadsheet's byte-order mark was read into the first column's name ('\\ufeffrow_id':
    'missing columns') before; CRLF line ends were read already."""
    head, row = _header_and_row()
    path = _write(tmp_path / "r.csv", head, [row], encoding=encoding, end=end)
    assert read_rows(path) == [_base()]


def test_a_column_named_twice_is_refused(tmp_path: Path) -> None:
    """csv.DictReader kept the last of two 'tp' columns silently before."""
    head, row = _header_and_row()
    path = _write(tmp_path / "r.csv", [*head, "tp"], [[*row, "2"]])
    with pytest.raises(DataError, match=r"columns \['tp'\] appear more than once"):
        read_rows(path)


def test_blank_trailing_columns_of_a_spreadsheet_read_as_the_plain_file(tmp_path: Path) -> None:
    """A spreadsheet's export with empty columns past the data ('...,,') has the blank name
    twice: no column is named twice, so the file reads (it did before the duplicate check)."""
    head, row = _header_and_row()
    path = _write(tmp_path / "r.csv", [*head, "", ""], [[*row, "", ""]])
    assert read_rows(path) == [_base()]


def test_a_value_under_a_blank_column_name_is_refused(tmp_path: Path) -> None:
    """No reader takes a cell whose column has no name: refused, not dropped."""
    head, row = _header_and_row()
    path = _write(tmp_path / "r.csv", [*head, ""], [[*row, "TP 8"]])
    with pytest.raises(DataError, match=r"line 2: row 'N21-T2-01' has 'TP 8' under a column"):
        read_rows(path)


def test_a_row_of_more_cells_than_the_header_is_refused(tmp_path: Path) -> None:
    """An unquoted comma shifted the cells; the extra ones were dropped silently before (and
    their None key crashed the per-row readers)."""
    head, row = _header_and_row()
    path = _write(tmp_path / "r.csv", head, [[*row, "x", "y"]])
    with pytest.raises(DataError, match=r"line 2: row 'N21-T2-01' has \d+ cells, the header \d+"):
        read_rows(path)


def test_a_short_row_has_its_missing_cells_empty(tmp_path: Path) -> None:
    """Trailing cells left out read as empty text, not None."""
    head, row = _header_and_row()
    path = _write(tmp_path / "r.csv", head, [row[:-3]])
    got = read_rows(path)[0]
    assert got[head[-1]] == "" and got[head[0]] == row[0]


def test_the_cli_refuses_rows_not_the_run(tmp_path: Path) -> None:
    """End to end: a CSV of rewritten rows prints a table and one line per refused row."""
    head, row = _header_and_row()
    i = {c: n for n, c in enumerate(head)}
    bad = []
    for n, (col, value) in enumerate([("tp", "9" * 400), ("num_gpus", "8 (6.4 Tb/s)"),
                                      ("hidden", "10^12"), ("layers", "1M"),
                                      ("micro_batch", "1," * 3000), ("gpu", "—")]):  # fmt: skip
        cells_ = list(row)
        cells_[i["row_id"]], cells_[i[col]] = f"BAD-{n}", value
        bad.append(cells_)
    path = _write(tmp_path / "r.csv", head, [row, *bad])
    res = CliRunner().invoke(app, ["astral", "seer", "validate", "--csv", str(path)])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code == 1, res.output  # rows not predicted: exit 1, the run completes
    assert "predicted 1 of 7 rows" in res.output
    assert all(f"BAD-{n}: not predicted" in res.output for n in range(6)), res.output


def test_the_cli_refuses_a_bad_file_in_one_line(tmp_path: Path) -> None:
    head, row = _header_and_row()
    path = _write(tmp_path / "r.csv", head, [[*row, "x"]])
    res = CliRunner().invoke(app, ["astral", "seer", "validate", "--csv", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
