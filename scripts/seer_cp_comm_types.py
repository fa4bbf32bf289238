"""What TransformerEngine's CP implementation would change on published CP rows (seer/cp_comm.py).

Every row with CP > 1 in a published-runs CSV is predicted as its cells state it and then as if
its notes stated each `--cp-comm-type` (p2p, all_gather, a2a, a2a+p2p with the CP ranks of a
host as the all-to-all level): iteration-time error and the exposed CP seconds of each. An
implementation TransformerEngine would refuse for the row (a2a over more ranks than the heads
of a TP rank divide) prints "-". Rows whose cells name Ulysses keep it (their framework's own
scheme) and are skipped.

    python scripts/seer_cp_comm_types.py --csv tests/data/published_runs/development_runs_2.csv
"""

from __future__ import annotations

import argparse
import sys

from starfabric.astral.seer.cp_comm import CP_COMM_TYPES
from starfabric.astral.seer.ulysses import names_ulysses
from starfabric.astral.seer.validate import bundled_csv, read_rows, validate_row
from starfabric.errors import StarfabricError


def _cp(row: dict[str, str]) -> int:
    try:
        return int(float((row.get("cp") or "1").split()[0]))
    except ValueError:
        return 1


def _with_type(row: dict[str, str], kind: str | None) -> dict[str, str]:
    if kind is None:
        return row
    return {**row, "notes": f"{row.get('notes') or ''}; --cp-comm-type {kind}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=None, help="published-runs CSV (default: the bundled one)")
    args = ap.parse_args(argv)
    rows = [r for r in read_rows(args.csv or bundled_csv()) if _cp(r) > 1]
    kinds: tuple[str | None, ...] = (None, *CP_COMM_TYPES)
    print("row            " + "".join(f"{k or 'as stated':>22s}" for k in kinds))
    for row in rows:
        if names_ulysses(row.get("framework"), row.get("sp"), row.get("cp"), row.get("notes")):
            continue
        cells = []
        for kind in kinds:
            try:
                res = validate_row(_with_type(row, kind))
            except StarfabricError:
                cells.append(f"{'-':>22s}")
                continue
            err = res.predicted_iter_s / res.published_iter_s - 1.0
            cp_s = res.prediction.breakdown.get("cp", 0.0)
            cells.append(f"{100 * err:+9.1f}% cp {cp_s:7.2f}s")
        print(f"{row['row_id']:15s}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
