"""long_context_cp_baselines.csv (issue 32, session 21): Megatron context-parallel baselines
measured in papers, kept apart from the development sets as outside ground truth.

Checked here: the transcription's own invariants (every figure against the others the same row
states, every row's provenance and FLOP convention) and that Seer reads every row — never its
error values (the file is not a calibration set). Also the reader fix the rows needed: a stated
Ulysses degree decides over a bare mention of Ulysses (`ulysses.stated_ulysses_degree`; USP,
arXiv 2405.07719: the sequence-parallel group is ulysses-degree x ring-degree, so
"ulysses-degree 1" is ring attention only).
"""

import csv
from pathlib import Path

import pytest

from starfabric.astral.seer.cells import flop_convention, number
from starfabric.astral.seer.ulysses import names_ulysses, stated_ulysses_degree
from starfabric.astral.seer.validate import read_rows, validate_all, validate_row
from starfabric.errors import ConfigError, DataError

DATA = Path(__file__).parents[2] / "data" / "published_runs"
CSV = DATA / "long_context_cp_baselines.csv"
DEV2 = DATA / "development_runs_2.csv"
ROWS = read_rows(CSV)
A800_BF16_PEAK = 312.0  # TFLOP/s dense BF16 (A800 = A100 SXM chip), the paper's MFU basis
MFU_DIGITS = 0.005  # the paper prints MFU to two decimals


def _f(row: dict[str, str], key: str) -> float:
    v = number(row[key])
    assert v is not None, (row["row_id"], key, row[key])
    return v


def test_same_columns_as_development_set_2() -> None:
    with CSV.open() as a, DEV2.open() as b:
        assert next(csv.reader(a)) == next(csv.reader(b))


def test_row_ids_unique_and_every_row_has_provenance() -> None:
    ids = [r["row_id"] for r in ROWS]
    assert len(ids) == len(set(ids)) == 17
    for r in ROWS:
        assert r["citation"].strip() and "arXiv:" in r["citation"], r["row_id"]
        assert r["verification"].startswith(("VERIFIED_PRIMARY", "VERIFIED_SECONDARY"))
        assert r["unverified_fields"].strip(), r["row_id"]
        assert r["tflops_flop_convention"].strip(), r["row_id"]


def test_convention_reads_as_the_causal_megatron_count() -> None:
    # The paper: MFU of the causal lower triangle; the reader must not take the full count.
    for r in ROWS:
        assert flop_convention(r["tflops_flop_convention"]) == "megatron_causal", r["row_id"]


@pytest.mark.parametrize("row", ROWS, ids=[r["row_id"] for r in ROWS])
def test_tflops_and_mfu_agree(row: dict[str, str]) -> None:
    # Two published figures of one run: TFLOP/s / 312 is the printed MFU within its rounding.
    assert _f(row, "tflops_per_gpu") == _f(row, "value_primary")
    mfu = _f(row, "tflops_per_gpu") / A800_BF16_PEAK
    assert abs(mfu - _f(row, "mfu_pct") / 100) <= MFU_DIGITS + 1e-9


@pytest.mark.parametrize("row", ROWS, ids=[r["row_id"] for r in ROWS])
def test_layout_and_batch_arithmetic(row: dict[str, str]) -> None:
    gpus = _f(row, "num_gpus")
    tp, cp, pp, dp = (_f(row, k) for k in ("tp", "cp", "pp", "dp"))
    assert tp * cp * pp * dp == gpus
    seqs, mb, seq = _f(row, "global_batch_seqs"), _f(row, "micro_batch"), _f(row, "seq_len")
    assert seqs == dp * mb  # no gradient accumulation (the paper states it)
    assert _f(row, "tokens_per_batch") == seqs * seq
    assert seq % (2 * cp * tp) == 0  # load-balanced ring chunks split over TP (Megatron's check)


@pytest.mark.parametrize("row", ROWS, ids=[r["row_id"] for r in ROWS])
def test_stated_times_multiply_out(row: dict[str, str]) -> None:
    # Where a row states a rate and a step time, rate x GPUs x time = tokens per step.
    rate = number(row["tokens_per_sec_per_gpu"] or row["derived_tokens_per_sec_per_gpu"])
    step = number(row["iter_time_s"] or row["derived_iter_time_s"])
    if rate is None or step is None:
        assert number(row["tflops_per_gpu"]) is not None  # then TFLOP/s is the figure
        return
    tokens = rate * _f(row, "num_gpus") * step
    assert tokens == pytest.approx(_f(row, "tokens_per_batch"), rel=1e-3)


def test_seer_reads_every_row() -> None:
    done, failed = validate_all(CSV)
    assert failed == []
    assert len(done) == len(ROWS)
    by_id = {r.row_id: r for r in done}
    for row in ROWS:
        res = by_id[row["row_id"]]
        assert res.convention == "megatron_causal"
        # ring attention, not Ulysses: the ring degree is the CP degree Seer splits over
        assert res.prediction.layout.cp == int(row["cp"])
        assert res.prediction.layout.gpu.name.startswith("A100")  # the A800's chip (see .md)


@pytest.mark.parametrize(
    ("text", "degree"),
    [
        ("Megatron-LM with USP hybrid Ulysses/ring attention; ulysses-degree 1", 1),
        ("USP ulysses_degree=4, ring_degree=2", 4),
        ("Ulysses degree: 8", 8),
        ("ulysses size 2", 2),
        ("ulysses-sp-size 16", 16),
        ("ulysses_sp_size=4", 4),
        ("Ulysses degree of 4", 4),
        ("--ulysses-degree=2 --ring-degree=4", 2),
        ("ring-degree 8", None),  # the ring degree is not the Ulysses one
        ("8-way Ulysses", None),  # a bare mention with a count: not a stated degree
        ("XTuner 0.1.x (Ulysses-style sequence parallel)", None),
        ("no (the cp column holds the Ulysses degree)", None),
    ],
)
def test_stated_ulysses_degree(text: str, degree: int | None) -> None:
    assert stated_ulysses_degree(text) == degree


def test_a_stated_degree_decides_over_a_bare_mention() -> None:
    assert not names_ulysses("USP hybrid Ulysses/ring attention", "", "8", "ulysses-degree 1")
    assert names_ulysses("USP hybrid Ulysses/ring attention", "", "8", "ulysses-degree 2")
    # unchanged where no degree is stated (XTuner's cells, a negated mention)
    assert names_ulysses(
        "XTuner 0.1.x (Ulysses-style)", "no (the cp column holds the Ulysses degree)"
    )
    assert not names_ulysses("ring attention, not Ulysses")
    assert not names_ulysses("Megatron-Core 0.9", "yes", "4")
    # a stated degree of 1 in any cell (notes included) overrides a bare mention elsewhere
    assert not names_ulysses("DeepSpeed-Ulysses", "", "4", "ulysses_degree=1")


def test_conflicting_ulysses_degrees_are_a_one_line_row_error() -> None:
    with pytest.raises(ConfigError, match="Ulysses degree stated as 1 and 4"):
        stated_ulysses_degree("ulysses-degree 1", "", "ulysses_degree=4")
    assert stated_ulysses_degree("ulysses-degree 2", "Ulysses degree: 2") == 2  # same: fine
    row = {**ROWS[0], "notes": ROWS[0]["notes"] + "; ulysses-degree 2"}
    with pytest.raises(DataError, match=rf"row {ROWS[0]['row_id']}: Ulysses degree stated as"):
        validate_row(row)
