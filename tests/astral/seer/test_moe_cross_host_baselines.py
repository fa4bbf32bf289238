"""Transcription invariants of tests/data/published_runs/moe_cross_host_baselines.csv (outside
Megatron-LM MoE baselines on Hopper at multi-host scale, session 21e) and that Seer reads every
row. The rows' errors are reported in docs/astral.md, not asserted: the file is an outside check,
nothing is fitted to it."""

import re

import pytest

from astral.seer.outside_rows import (
    DATA,
    check_figures_and_provenance,
    check_header_is_development_set_2s,
    check_layout_and_batch,
)
from starfabric.astral.seer.validate import read_rows, validate_all

CSV = DATA / "moe_cross_host_baselines.csv"
NOTES = DATA / "moe_cross_host_baselines.md"

TABLE3_MEGATRON = {  # arXiv 2505.11432 Table 3, Megatron-LM rows: GPUs -> (s, tokens/s, days/1T)
    240: (39.94, 151.1e3, 76.61),
    480: (19.56, 301.1e3, 38.38),
    720: (13.70, 430.5e3, 26.88),
    960: (10.82, 550.2e3, 21.23),
    1440: (7.90, 746.6e3, 15.50),
}
CONSISTENT = 0.005
"""Iteration time x throughput must give the tokens per step within 0.5% unless the row's notes
name the disagreement ("source inconsistency +x.x%", the file's rule 5)."""
INCONSISTENCY = re.compile(r"source inconsistency ([+-]\d+\.\d)%")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return read_rows(CSV)


def _step_s(r: dict[str, str]) -> float:
    return float(r["iter_time_s"] or r["derived_iter_time_s"])


def test_header_is_development_set_2s() -> None:
    check_header_is_development_set_2s(CSV)


def test_every_row_has_a_citation_a_verification_and_a_metric(rows) -> None:
    assert rows
    for r in rows:
        assert re.search(r"arXiv:\d{4}\.\d{5}", r["citation"]), r["row_id"]
        assert r["iter_time_s"] or (r["derived_iter_time_s"] and r["derivation_note"])
    check_figures_and_provenance(rows, NOTES.read_text())


def test_layout_and_batch_arithmetic(rows) -> None:
    check_layout_and_batch(rows)


def test_tokens_per_second_times_gpus_times_step_is_tokens_per_step(rows) -> None:
    for r in rows:
        tokens = float(r["tokens_per_sec_per_gpu"]) * int(r["num_gpus"]) * _step_s(r)
        gap = tokens / int(r["tokens_per_batch"]) - 1.0
        stated = INCONSISTENCY.search(r["notes"])
        if abs(gap) <= CONSISTENT:
            continue
        assert stated, f"{r['row_id']}: {gap:+.2%} and no 'source inconsistency' in notes"
        assert float(stated.group(1)) == pytest.approx(100 * gap, abs=0.05), r["row_id"]


def test_a_derived_step_names_the_printed_one_it_replaces(rows) -> None:
    # rule 5: the printed iteration time that the other columns contradict stays in the notes,
    # and the stated inconsistency is the printed time against the compared (derived) one
    for r in (r for r in rows if not r["iter_time_s"]):
        printed = float(re.search(r"printed iteration time (\d+\.\d+) s", r["notes"]).group(1))
        stated = float(INCONSISTENCY.search(r["notes"]).group(1))
        derived = float(r["derived_iter_time_s"])
        assert stated == pytest.approx(100 * (printed / derived - 1.0), abs=0.05)


def test_compared_step_agrees_with_the_printed_days_per_trillion_tokens(rows) -> None:
    # the days-per-1T column is a third printed number: the compared step must match it
    for r in rows:
        days = float(re.search(r"(\d+\.\d+) days per 1T tokens", r["notes"]).group(1))
        assert 1e12 * _step_s(r) / int(r["tokens_per_batch"]) / 86400 == pytest.approx(
            days, rel=0.003
        ), r["row_id"]


def test_megascale_moe_rows_transcribe_table_3(rows) -> None:
    got = {int(r["num_gpus"]): r for r in rows if r["source_id"] == "MEGASCALEMOE25_T3"}
    assert sorted(got) == sorted(TABLE3_MEGATRON)
    for n, (step, tps, days) in TABLE3_MEGATRON.items():
        r = got[n]
        assert float(r["tokens_per_sec_per_gpu"]) * n == pytest.approx(tps, rel=1e-4)
        assert f"iteration {step:.2f} s" in r["notes"]
        assert f"{days:.2f} days" in r["notes"]
        assert (r["tp"], r["pp"], r["dp"]) == ("8", "15", str(n // 120))
        assert (r["layers"], r["hidden"], r["moe_experts"], r["moe_topk"]) == (
            "60",
            "4096",
            "32",
            "3",
        )
        assert r["global_batch_seqs"] == "720" and r["seq_len"] == "8192"


def test_seer_reads_every_row(rows) -> None:
    results, not_predicted = validate_all(CSV)
    assert not not_predicted
    assert {res.row_id for res in results} == {r["row_id"] for r in rows}
