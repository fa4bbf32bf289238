"""A row that states sequence parallelism ran tensor parallelism (Korthikanti et al. 2022,
section 4.2.2: SP splits the sequence over the tensor-parallel group), so an unverified TP
degree is chosen among TP >= 2."""

from __future__ import annotations

from pathlib import Path

from starfabric.astral.seer.validate import read_rows, row_setup

DEV1 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs.csv"


def _row() -> dict[str, str]:
    row = {r["row_id"]: r for r in read_rows(DEV1)}["N21-T2-04"]
    return dict(row, tp="UNVERIFIED (model parallelism used; degree not stated)")


def test_stated_sp_rules_out_tp1() -> None:
    setup = row_setup(dict(_row(), sp="yes (sequence parallelism per Korthikanti et al.)"))
    tps = {c["tp"] for c, _ in setup.options}
    assert tps and min(tps) >= 2


def test_without_sp_tp1_stays_a_candidate() -> None:
    setup = row_setup(dict(_row(), sp="no"))
    assert 1 in {c["tp"] for c, _ in setup.options}
