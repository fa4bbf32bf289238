"""Ask Seer's memory model about the MoE configurations Megatron-Bridge's performance scripts ship.

For every row of the shipped-configuration CSV (default: Megatron-Bridge v0.5.0's MoE
performance configurations, tests/data/shipped_configs/megatron_bridge_moe_perf.csv; its .md
gives provenance), print (a) whether the stated recompute fits (Seer's peak per GPU vs HBM) and
(b) the recompute Seer chooses when the row leaves it UNVERIFIED, with the step-time change
from (a) to (b) (`seer/shipped_configs.py`). A summary counts the configurations Seer finds
short and those where it chooses full recompute. `--json F` writes every row's answers.

    python scripts/seer_shipped_configs.py [--csv F] [--json F] [--without-notes [--shipped-defaults]]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from starfabric.astral.seer.shipped_configs import OPEN_RECOMPUTE, ShippedCheck, answer, check
from starfabric.astral.seer.validate import read_rows
from starfabric.errors import StarfabricError

DEFAULT_CSV = (
    Path(__file__).resolve().parent.parent
    / "tests/data/shipped_configs/megatron_bridge_moe_perf.csv"
)


def _record(c: ShippedCheck, row: dict[str, str]) -> dict[str, object]:
    return {
        "row_id": c.row_id,
        "config": row.get("mb_config", ""),
        "gpus": int(row["num_gpus"]),
        "stated_recompute": c.stated_recompute,
        "stated_fits": c.stated.fits,
        "stated_peak_gib": round(c.stated.peak_gib, 2),
        "capacity_gib": round(c.stated.capacity_gib, 2),
        "stated_step_s": c.stated.step_s,
        "open_recompute": c.open.recompute,
        "open_fits": c.open.fits,
        "open_peak_gib": round(c.open.peak_gib, 2),
        "open_step_s": c.open.step_s,
        "open_vs_stated": c.open_vs_stated,
    }


def _without_notes(c: ShippedCheck, row: dict[str, str], shipped: bool) -> ShippedCheck:
    bare = {**row, "notes": "", "framework": row.get("framework", "").split(",")[0],
            "recompute": OPEN_RECOMPUTE}  # fmt: skip
    return ShippedCheck(c.row_id, c.stated_recompute, c.stated, answer(bare, shipped))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", default=str(DEFAULT_CSV), help="shipped-configuration CSV")
    ap.add_argument("--json", help="write every row's answers here")
    ap.add_argument("--without-notes", action="store_true",
                    help="(b) on the row without its notes and dispatcher cell")  # fmt: skip
    ap.add_argument("--shipped-defaults", action="store_true",
                    help="with --without-notes: take the unstated settings from the matching "
                         "configuration, as seer validate does (seer/shipped_defaults.py)")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        rows = read_rows(args.csv)  # a header without rows is refused there
        checks = [(check(r), r) for r in rows]
        if args.without_notes:
            checks = [(_without_notes(c, r, args.shipped_defaults), r) for c, r in checks]
    except StarfabricError as exc:
        print(exc.one_line(), file=sys.stderr)
        return 2
    recs = [_record(c, r) for c, r in checks]
    print(f"{'configuration':40s} {'stated recompute':34s} {'fits':>4s} {'peak/HBM GiB':>14s}"
          f"  {'Seer, recompute open':36s} {'fits':>4s} {'step vs stated':>14s}")  # fmt: skip
    for r in recs:
        print(
            f"{r['row_id']!s:40s} {str(r['stated_recompute'])[:34]:34s} "
            f"{'yes' if r['stated_fits'] else 'NO':>4s} "
            f"{r['stated_peak_gib']:6.1f}/{r['capacity_gib']:<6.0f}  "
            f"{str(r['open_recompute'])[:36]:36s} {'yes' if r['open_fits'] else 'NO':>4s} "
            f"{r['open_vs_stated']:+13.1%}"
        )
    short = [r["row_id"] for r in recs if not r["stated_fits"]]
    full = [r["row_id"] for r in recs if r["open_recompute"] == "full"]
    deltas = [float(r["open_vs_stated"]) for r in recs]  # type: ignore[arg-type]
    summary = {
        "rows": len(recs),
        "stated_short": short,
        "open_full_recompute": full,
        "open_short": [r["row_id"] for r in recs if not r["open_fits"]],
        "open_vs_stated_min": min(deltas),
        "open_vs_stated_max": max(deltas),
    }
    print(
        f"\n{len(recs)} configurations: {len(short)} found short with the stated recompute; "
        f"{len(full)} with full recompute chosen when open; step time open vs stated "
        f"{summary['open_vs_stated_min']:+.1%} .. {summary['open_vs_stated_max']:+.1%}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "rows": recs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
