"""Regenerate Seer's bundled error ranges by mechanism class (`seer/trust.py`) from every measured set.

Validates the bundled table, both development sets and every outside file of
`scripts/seer_outside_truth.py` exactly as `seer validate --csv F` does, then writes
`published_runs/trust_by_class.csv` (signed error per class and group: n, median, 10th/90th
percentile, min, max, mean |error|, the sets that fed it) and `published_runs/trust_sets.csv`
(per set: its group, CSV rows, rows compared, rows EXCLUDED and rows Seer could not read).
Both are written atomically; rerun after any change that moves predictions:

    python scripts/seer_trust_table.py            # rewrite both tables
    python scripts/seer_trust_table.py --check    # exit 1 naming the first stale cell
    python scripts/seer_trust_table.py --json out.json
    python scripts/seer_trust_table.py --markdown # also print the tables of docs/astral.md
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import itertools
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress

from starfabric.astral.seer.classes import DIMENSIONS, classes_of
from starfabric.astral.seer.trust import (
    COLUMNS,
    GROUPS,
    HIGH_QUANTILE,
    LOW_QUANTILE,
    MIN_HEADLINE_ROWS,
    POOLED,
    TABLE_NAME,
    ClassRange,
    MeasuredSet,
    class_ranges,
    pct,
    quantile,
    trust_for_classes,
    write_rows,
    write_table,
)
from starfabric.astral.seer.validate import EXCLUDED_PREFIX, bundled_csv, read_rows, validate_all
from starfabric.errors import ConfigError
from starfabric.outputs import check_dir, check_file, write_bytes

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "published_runs"
OUT = ROOT / "src" / "starfabric" / "astral" / "seer" / "published_runs"
"""Where the tables are written: the repository's copy that ships with Seer."""
DEVELOPMENT_FILES = ("megatron_weak_scaling.csv", "development_runs.csv", "development_runs_2.csv")
"""The sets Seer's mechanisms were developed against: the bundled table `seer validate` checks by
default (the same file as tests/data/published_runs/megatron_weak_scaling.csv) and the two
development sets."""
SET_COLUMNS = ("set", "group", "csv_rows", "compared", "excluded", "not_read")
"""Columns of trust_sets.csv; excluded and not_read list row ids joined by ';'."""


def _outside_files() -> tuple[str, ...]:
    """OUTSIDE_FILES of scripts/seer_outside_truth.py (one list of outside sets, not two)."""
    spec = importlib.util.spec_from_file_location(
        "seer_outside_truth", Path(__file__).with_name("seer_outside_truth.py")
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return tuple(mod.OUTSIDE_FILES)


def sets_to_read() -> list[tuple[str, str, Path]]:
    """(name, group, path) of every measured set, development first."""
    dev = [(n, "development", bundled_csv() if n == DEVELOPMENT_FILES[0] else DATA / n)
           for n in DEVELOPMENT_FILES]  # fmt: skip
    return dev + [(n, "outside", DATA / n) for n in _outside_files()]


@dataclass(frozen=True)
class SetRecord:
    """One set's coverage: what trust_sets.csv holds."""

    measured: MeasuredSet
    csv_rows: int
    excluded: tuple[str, ...]
    not_read: tuple[str, ...]

    def cells(self) -> dict[str, str]:
        return {
            "set": self.measured.name, "group": self.measured.group,
            "csv_rows": str(self.csv_rows), "compared": str(len(self.measured.results)),
            "excluded": ";".join(self.excluded), "not_read": ";".join(self.not_read),
        }  # fmt: skip


def validate_sets() -> list[SetRecord]:
    """Validate every set, with a progress bar over all rows."""
    todo = [(n, g, p, len(read_rows(p))) for n, g, p in sets_to_read()]
    out: list[SetRecord] = []
    with Progress(transient=True) as prog:
        task = prog.add_task("validating measured sets", total=sum(t[3] for t in todo))
        for name, group, path, n in todo:
            prog.update(task, description=f"validating {name}")
            results, failed = validate_all(path, progress=lambda: prog.advance(task))
            excl = tuple(rid for rid, why in failed if why.startswith(EXCLUDED_PREFIX))
            unread = tuple(rid for rid, why in failed if not why.startswith(EXCLUDED_PREFIX))
            out.append(SetRecord(MeasuredSet(name, group, results), n, excl, unread))
    return out


def table_path() -> Path:
    return OUT / TABLE_NAME


def sets_path() -> Path:
    return OUT / "trust_sets.csv"


def first_difference(
    path: Path, fresh: list[dict[str, str]], columns: tuple[str, ...]
) -> str | None:
    """The first cell of the committed table that differs from the fresh one, or None."""
    if not path.is_file():
        return f"{path} does not exist"
    with path.open(newline="", encoding="utf-8") as fh:
        old = list(csv.DictReader(fh))
    for i, (was, now) in enumerate(zip(old, fresh, strict=False), start=2):
        for col in columns:
            if was.get(col) != now[col]:
                key = "/".join(now[c] for c in columns[:3])
                return f"{path.name} line {i} ({key}) {col}: committed {was.get(col)!r}, now {now[col]!r}"
    if len(old) != len(fresh):
        return f"{path.name}: committed {len(old)} rows, now {len(fresh)}"
    return None


Rule = Callable[[dict[str, str], list[ClassRange], list[tuple[dict[str, str], float]]],
                tuple[float, float] | None]  # fmt: skip


def adopted(cls: dict[str, str], table: list[ClassRange], _rows: Any) -> tuple[float, float] | None:
    """`trust.trust_for_classes`: envelope of the pooled ranges of the job's classes."""
    t = trust_for_classes(cls, table)
    return (t.low.p10, t.high.p90) if t.low and t.high else None


def apart(cls: dict[str, str], table: list[ClassRange], _rows: Any) -> tuple[float, float] | None:
    """Envelope of the development and the outside ranges of the job's classes, kept apart."""
    ok = [r for r in table if cls.get(r.dimension) == r.cls and r.group != POOLED
          and r.rows >= MIN_HEADLINE_ROWS]  # fmt: skip
    return (min(r.p10 for r in ok), max(r.p90 for r in ok)) if ok else None


def most_specific(
    cls: dict[str, str], _table: Any, rows: list[tuple[dict[str, str], float]]
) -> tuple[float, float] | None:
    """10th-90th percentile of the runs sharing the most of the job's classes (the fewest runs
    among equally specific combinations) with at least MIN_HEADLINE_ROWS runs."""
    for k in range(len(DIMENSIONS), 0, -1):
        cells = [[e for c, e in rows if all(c[d] == cls[d] for d in dims)]
                 for dims in itertools.combinations(DIMENSIONS, k)]  # fmt: skip
        cells = [c for c in cells if len(c) >= MIN_HEADLINE_ROWS]
        if cells:
            best = min(cells, key=len)
            return quantile(best, LOW_QUANTILE), quantile(best, HIGH_QUANTILE)
    return None


RULES: dict[str, Rule] = {
    "pooled envelope (adopted)": adopted,
    "development / outside apart, envelope": apart,
    "most specific combination": most_specific,
}
"""Headline rules compared on held-out outside files (see `held_out`)."""


def held_out(records: list[SetRecord]) -> dict[str, dict[str, Any]]:
    """Each rule's coverage with every outside file held out in turn: the ranges are rebuilt
    from the other sets and the held-out file's runs are counted inside or outside the range of
    their own classes. A rule true to its 10th-90th percentiles holds about 80%."""
    classes = {id(r): classes_of(r.prediction) for rec in records for r in rec.measured.results}
    out: dict[str, dict[str, Any]] = {}
    for name, rule in RULES.items():
        held = runs = 0
        widths: list[float] = []
        per_file: dict[str, list[int]] = {}
        for test in (rec for rec in records if rec.measured.group == "outside"):
            per_file[test.measured.name] = [0, 0]
            train = [rec.measured for rec in records if rec is not test]
            table = class_ranges(train)
            rows = [(classes[id(r)], r.error) for m in train for r in m.results]
            for r in test.measured.results:
                rng = rule(classes[id(r)], table, rows)
                if rng is None:
                    continue
                inside = rng[0] <= r.error <= rng[1]
                runs, held = runs + 1, held + inside
                per_file[test.measured.name][0] += inside
                per_file[test.measured.name][1] += 1
                widths.append(rng[1] - rng[0])
        out[name] = {"runs": runs, "held": held, "coverage": held / runs if runs else 0.0,
                     "median_width": statistics.median(widths) if widths else 0.0,
                     "per_file": {f: {"held": h, "runs": n} for f, (h, n) in per_file.items()}}  # fmt: skip
    return out


def markdown(ranges: list[ClassRange], cover: dict[str, dict[str, Any]]) -> str:
    """The two tables of docs/astral.md's trust subsection, so the docs are regenerated, not
    retyped: held-out coverage per headline rule, and n, median [10th, 90th] per class."""
    out = ["| headline rule | held-out outside runs inside | median width |", "|---|---|---|"]
    for name, c in cover.items():
        out.append(f"| {name} | {c['held']} of {c['runs']} ({c['coverage']:.0%}) | "
                   f"{100 * c['median_width']:.0f} points |")  # fmt: skip
    out += ["", "| dimension | class | all runs | development | outside |", "|---|---|---|---|---|"]
    by: dict[tuple[str, str], dict[str, ClassRange]] = {}
    for r in ranges:
        by.setdefault((r.dimension, r.cls), {})[r.group] = r
    for (dim, cls), groups in by.items():
        cells = [
            f"{g.rows}, {pct(g.median)} [{pct(g.p10)}, {pct(g.p90)}]" if g else "—"
            for g in (groups.get(name) for name in GROUPS)
        ]
        out.append(f"| {dim.replace('_', ' ')} | {cls} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def unwritable(path: Path, what: str, folder: bool = False) -> str | None:
    """Why `what` cannot be written at `path` (or, with `folder`, into the folder `path`), as
    one line with the fix, or None. The folder must already exist (this script creates none);
    the rest is the project's output check (`outputs.check_file` / `check_dir`: not a folder
    where a file goes, a file creatable beside it for the atomic rename)."""
    where = path if folder else path.parent
    if not where.is_dir():
        return (
            f"{what} {path}: folder {where} does not exist (fix: give a path in an existing folder)"
        )
    try:
        (check_dir if folder else check_file)(path, what)
    except ConfigError as exc:
        return exc.one_line()
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate and exit 1 if the committed tables differ (write nothing)")  # fmt: skip
    ap.add_argument("--json", type=Path, help="also write both tables as JSON here")
    ap.add_argument("--markdown", action="store_true",
                    help="also print docs/astral.md's two tables (held-out check, ranges per class)")  # fmt: skip
    args = ap.parse_args(argv)
    # Every output is checked before the sets are validated (minutes), so a bad path costs none.
    outputs = [] if args.check else [(OUT, "the tables' folder")]
    if args.json is not None:
        outputs.append((args.json, "--json"))
    for path, what in outputs:
        why = unwritable(path, what, folder=path == OUT)
        if why is not None:
            print(f"error: {why}", file=sys.stderr)
            return 2
    records = validate_sets()
    ranges = class_ranges(r.measured for r in records)
    range_rows = [r.cells() for r in ranges]
    set_rows = [r.cells() for r in records]
    cover = held_out(records)
    for name, c in cover.items():
        print(f"held-out outside files, {name}: {c['held']:.0f} of {c['runs']:.0f} runs inside "
              f"({c['coverage']:.0%}), median range {100 * c['median_width']:.0f} points")  # fmt: skip
    if args.check:
        for path, rows, cols in ((table_path(), range_rows, COLUMNS),
                                 (sets_path(), set_rows, SET_COLUMNS)):  # fmt: skip
            diff = first_difference(path, rows, cols)
            if diff is not None:
                print(f"stale: {diff} (fix: python scripts/seer_trust_table.py)")
                return 1
        print(f"up to date: {len(range_rows)} class ranges from {len(set_rows)} sets")
    else:
        write_table(ranges, table_path())
        write_rows(sets_path(), SET_COLUMNS, set_rows)
        compared = sum(len(r.measured.results) for r in records)
        print(f"wrote {table_path().name} ({len(range_rows)} class ranges) and "
              f"{sets_path().name} ({len(set_rows)} sets, {compared} runs compared)")  # fmt: skip
    if args.markdown:
        print(markdown(ranges, cover))
    if args.json is not None:
        text = json.dumps({"sets": set_rows, "ranges": range_rows, "held_out": cover}, indent=2)
        write_bytes(args.json, (text + "\n").encode("utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
