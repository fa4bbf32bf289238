"""Print the error-per-mechanism-class table of docs/astral.md from `seer validate --json` files.

Each file is one set (e.g. development set 1 and 2); the table has one pair of columns per set,
rows in `seer validate`'s print order, so the documented table is regenerated, not retyped:

    starfabric astral seer validate --csv tests/data/published_runs/development_runs.csv --json d1.json
    starfabric astral seer validate --csv tests/data/published_runs/development_runs_2.csv --json d2.json
    python scripts/seer_class_table.py "dev 1=d1.json" "dev 2=d2.json"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from starfabric.astral.seer.classes import DIMENSIONS


def _cell(stats: dict[str, float] | None) -> tuple[str, str]:
    if stats is None:
        return "0", "—"
    mean, worst = 100 * stats["mean_abs_error"], 100 * stats["max_abs_error"]
    return str(int(stats["rows"])), f"{mean:.1f}% / {worst:.1f}%"


def table(sets: list[tuple[str, dict]]) -> str:
    """Markdown table: dimension, class, then rows and mean / max per set."""
    head = ["dimension", "class"]
    for name, _ in sets:
        head += [f"{name} rows", f"{name} mean / max"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for dim in DIMENSIONS:
        labels: list[str] = []
        for _, doc in sets:
            labels += [c for c in doc["per_class"].get(dim, {}) if c not in labels]
        for label in labels:
            row = [dim.replace("_", " "), label]
            for _, doc in sets:
                row += list(_cell(doc["per_class"].get(dim, {}).get(label)))
            lines.append("| " + " | ".join(row) + " |")
    totals = ["all", "all"]
    for _, doc in sets:
        n = len(doc["rows"])
        mean, worst = 100 * doc["mean_abs_error"], 100 * doc["max_abs_error"]
        totals += [str(n), f"{mean:.1f}% / {worst:.1f}%"]
    lines.append("| " + " | ".join(totals) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="+", help="NAME=FILE.json from `seer validate --json`")
    args = ap.parse_args(argv)
    sets: list[tuple[str, dict]] = []
    for spec in args.sets:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            print(
                f"error: {spec!r}: expected NAME=FILE.json (fix: e.g. 'dev 1=d1.json')",
                file=sys.stderr,
            )
            return 2
        try:
            doc = json.loads(Path(path).read_text())
            if not isinstance(doc, dict) or not {"per_class", "rows"} <= doc.keys():
                raise KeyError("per_class/rows")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(
                f"error: {path}: not a `seer validate --json` file ({exc}) (fix: rerun seer validate --json)",
                file=sys.stderr,
            )
            return 2
        sets.append((name, doc))
    print(table(sets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
