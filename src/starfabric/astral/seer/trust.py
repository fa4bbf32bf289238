"""How far to trust one prediction: Seer's signed error on measured runs of the same classes.

Seer has been compared with several hundred measured runs. Grouped by mechanism class
(`classes.classes_of`: arch, context parallelism, expert parallelism, GPU generation, scale) and
by whether the run was one Seer was developed against or an outside run it never was, their
errors give the empirical range a user should expect on a job of the same classes. The table of
ranges is bundled (`published_runs/trust_by_class.csv`, written by `scripts/seer_trust_table.py`);
`trust_for` reads a prediction's classes and returns their ranges and one headline range.

Signed error as in `seer validate`: (predicted − measured) / measured; negative = Seer too fast.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from starfabric.astral.seer.classes import (
    DIMENSIONS,
    _Result,
    class_order,
    classes_of,
    errors_by_class,
)
from starfabric.astral.seer.predict import Prediction
from starfabric.errors import DataError
from starfabric.outputs import atomic_path

SET_GROUPS = ("development", "outside")
"""Where a measured set stands: `development` sets are those Seer's mechanisms were checked
against while it was built (the bundled table and development_runs*.csv), so their errors are
in-sample; `outside` sets were gathered afterwards only to test Seer (issue 32, session 21;
scripts/seer_outside_truth.py) and nothing is fitted to them."""
POOLED = "all"
"""The group of a class's runs from every set: what the headline reads (see `trust_for_classes`)."""
GROUPS = (POOLED, *SET_GROUPS)
"""Groups of the table, in print order: pooled first, then each kind of set apart so a reader sees
where they differ (an in-sample range alone would understate the miss on a new job)."""
LOW_QUANTILE = 0.10
"""Assumption: a range's low end is the 10th percentile of the signed error; with HIGH_QUANTILE
the middle 80% of runs, so one odd run of a class does not set it (min and max kept alongside)."""
HIGH_QUANTILE = 0.90
"""Assumption: a range's high end is the 90th percentile of the signed error (see LOW_QUANTILE)."""
MIN_HEADLINE_ROWS = 10
"""Assumption: fewest runs a class needs before its range can set the headline. From 10 runs on,
the interpolated 10th percentile lies at least 0.9 of the way from the most extreme run to the
next, so no single run sets it; at 5 runs the extreme run still weighs 60%. Smaller classes are
still printed, with their n."""
COLUMNS = (
    "dimension", "class", "group", "rows", "median_error", "p10_error", "p90_error",
    "min_error", "max_error", "mean_abs_error", "sets",
)  # fmt: skip
"""Columns of the bundled table, in order (errors are signed fractions, 4 decimals)."""
ERROR_COLUMNS = ("median_error", "p10_error", "p90_error", "min_error", "max_error")
TABLE_NAME = "trust_by_class.csv"


@dataclass(frozen=True)
class MeasuredSet:
    """One CSV of measured runs as `seer validate` compared it."""

    name: str
    """The CSV's file name (sets are named by file so a reader can open it)."""
    group: str
    """One of SET_GROUPS."""
    results: Sequence[_Result]


@dataclass(frozen=True)
class ClassRange:
    """Seer's signed error on the runs of one class in one group."""

    dimension: str
    cls: str
    group: str
    rows: int
    median: float
    p10: float
    p90: float
    min: float
    max: float
    mean_abs: float
    sets: tuple[tuple[str, int], ...]
    """(set name, runs it gave this class), by name."""

    def cells(self) -> dict[str, str]:
        """The table row as written (fixed formatting, so regeneration is byte-stable)."""
        errs = (self.median, self.p10, self.p90, self.min, self.max)
        return {
            "dimension": self.dimension, "class": self.cls, "group": self.group,
            "rows": str(self.rows),
            **{k: fmt(v) for k, v in zip(ERROR_COLUMNS, errs, strict=True)},
            "mean_abs_error": fmt(self.mean_abs),
            "sets": ";".join(f"{name}:{n}" for name, n in self.sets),
        }  # fmt: skip


def fmt(x: float) -> str:
    """A fraction with 4 decimals; -0.0000 written as 0.0000."""
    s = f"{x:.4f}"
    return "0.0000" if s == "-0.0000" else s


def quantile(errors: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default and
    `statistics.quantiles(method="inclusive")`); one value is its own every quantile."""
    if not errors:
        raise ValueError("quantile of no errors")
    return float(np.quantile(errors, q))


def class_range(
    dimension: str, cls: str, group: str, errors: Mapping[str, Sequence[float]]
) -> ClassRange:
    """The range of one class in one group from {set name: signed errors of its runs}."""
    errs = [e for name in sorted(errors) for e in errors[name]]
    return ClassRange(
        dimension=dimension, cls=cls, group=group, rows=len(errs),
        median=statistics.median(errs), p10=quantile(errs, LOW_QUANTILE),
        p90=quantile(errs, HIGH_QUANTILE), min=min(errs), max=max(errs),
        mean_abs=sum(abs(e) for e in errs) / len(errs),
        sets=tuple((name, len(errors[name])) for name in sorted(errors) if errors[name]),
    )  # fmt: skip


def class_ranges(sets: Iterable[MeasuredSet]) -> list[ClassRange]:
    """Every (dimension, class, group) range over the sets, pooled and per kind of set, in
    print order: dimensions as `classes.DIMENSIONS`, classes as `seer validate` prints them,
    then GROUPS."""
    pooled: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for s in sets:
        if s.group not in SET_GROUPS:
            raise ValueError(f"set {s.name}: group {s.group!r} is not one of {SET_GROUPS}")
        for dim, by in errors_by_class(s.results).items():
            for cls, errs in by.items():
                for group in (POOLED, s.group):
                    pooled.setdefault((dim, cls, group), {})[s.name] = list(errs)
    keys = sorted(
        pooled,
        key=lambda k: (DIMENSIONS.index(k[0]), class_order(k[1]), GROUPS.index(k[2])),
    )
    return [class_range(d, c, g, pooled[(d, c, g)]) for d, c, g in keys]


def write_rows(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, str]]) -> None:
    """Write CSV rows atomically (`outputs.atomic_path`), Unix line ends."""
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def write_table(ranges: Sequence[ClassRange], path: Path) -> None:
    """Write the table of class ranges atomically."""
    write_rows(path, COLUMNS, (r.cells() for r in ranges))


def bundled_table() -> Path:
    """The table shipped with Seer."""
    with resources.as_file(
        resources.files("starfabric.astral.seer") / "published_runs" / TABLE_NAME
    ) as p:
        return Path(p)


def _parse_sets(cell: str, where: str) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    for part in filter(None, cell.split(";")):
        name, sep, n = part.rpartition(":")
        if not sep or not name or not n.isdigit():
            raise DataError(f"{where} sets = {part!r} is not NAME:ROWS",
                            fix="regenerate with scripts/seer_trust_table.py")  # fmt: skip
        out.append((name, int(n)))
    return tuple(out)


def read_table(path: Path | None = None) -> list[ClassRange]:
    """The ranges of a table written by `write_table` (default: the bundled one); a missing
    file, a missing column, a cell that is not a number or errors that are not an ordered range
    above -100% (min <= p10 <= median <= p90 <= max) is a DataError naming it."""
    p = path or bundled_table()
    fix = "regenerate it with `python scripts/seer_trust_table.py`"
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            lacking = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if lacking:
                raise DataError(f"{p}: missing columns {lacking}", fix=fix)
            raw = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{p}: cannot be read ({exc})", fix=fix) from None
    out: list[ClassRange] = []
    for i, row in enumerate(raw, start=2):
        where = f"{p} line {i}"
        try:
            errs = [float(row[k]) for k in ERROR_COLUMNS]
            rows, mean_abs = int(row["rows"]), float(row["mean_abs_error"])
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where}: not a number ({exc})", fix=fix) from None
        if row["group"] not in GROUPS or row["dimension"] not in DIMENSIONS or rows < 1:
            raise DataError(f"{where}: dimension {row['dimension']!r}, group {row['group']!r}, "
                            f"rows {rows} is not a class range", fix=fix)  # fmt: skip
        median, p10, p90, lo, hi = errs
        if not (all(math.isfinite(e) and e > -1.0 for e in errs) and lo <= p10 <= median
                <= p90 <= hi and math.isfinite(mean_abs) and mean_abs >= 0):  # fmt: skip
            # A run's signed error lies above -100% (a measured time is positive and finite);
            # a cell that parses but is not one (NaN, inf, -1.5) would break the time range.
            raise DataError(f"{where}: errors {[row[k] for k in ERROR_COLUMNS]} are not an "
                            "ordered range of signed errors above -100%", fix=fix)  # fmt: skip
        out.append(ClassRange(row["dimension"], row["class"], row["group"], rows, median, p10,
                              p90, lo, hi, mean_abs, _parse_sets(row["sets"] or "", where)))  # fmt: skip
    return out


def measured_range(predicted_s: float, low: float, high: float) -> tuple[float, float]:
    """The measured times an error range [low, high] implies for a predicted time:
    measured = predicted / (1 + error), so the high error gives the short end."""
    if low > high or low <= -1.0:
        raise ValueError(f"error range [{low}, {high}] is not an ordered range above -100%")
    return predicted_s / (1.0 + high), predicted_s / (1.0 + low)


@dataclass(frozen=True)
class Trust:
    """The ranges of one prediction's classes and the headline range they give."""

    classes: dict[str, str]
    ranges: list[ClassRange]
    """The table's rows for the prediction's classes, in table order."""
    low: ClassRange | None
    """The pooled range with the lowest 10th percentile among those with MIN_HEADLINE_ROWS runs
    or more (None when no class of the job has that many)."""
    high: ClassRange | None
    """The pooled range with the highest 90th percentile among those with MIN_HEADLINE_ROWS runs
    or more."""

    def summary(self, predicted_s: float) -> dict[str, object]:
        """JSON-ready: the headline (errors, implied measured seconds, the ranges that set each
        end) and each class range."""
        head: dict[str, object] | None = None
        if self.low is not None and self.high is not None:
            short, long = measured_range(predicted_s, self.low.p10, self.high.p90)
            head = {
                "low_error": self.low.p10, "high_error": self.high.p90,
                "measured_s": [short, long],
                "low_from": _name(self.low), "high_from": _name(self.high),
            }  # fmt: skip
        return {
            "headline": head,
            "min_headline_rows": MIN_HEADLINE_ROWS,
            "classes": self.classes,
            "ranges": [
                {
                    **_name(r),
                    "rows": r.rows,
                    "median_error": r.median,
                    "p10_error": r.p10,
                    "p90_error": r.p90,
                    "sets": dict(r.sets),
                }
                for r in self.ranges
            ],
        }


def _name(r: ClassRange) -> dict[str, object]:
    return {"dimension": r.dimension, "class": r.cls, "group": r.group, "rows": r.rows}


def trust_for_classes(classes: Mapping[str, str], table: Sequence[ClassRange]) -> Trust:
    """The ranges of these classes and the headline: the lowest 10th and the highest 90th
    percentile among the pooled ranges (development and outside runs together) of its classes
    that have at least MIN_HEADLINE_ROWS runs. A job belongs to one class of every dimension at
    once and each range is one view of runs like it; the envelope keeps a bias any one of them
    shows. Chosen on outside ground truth: `scripts/seer_trust_table.py` holds each outside file
    out in turn and counts how many of its runs the rule's range holds; this rule comes closest
    to the nominal 80% (docs/astral.md compares it with the alternatives)."""
    mine = [r for r in table if classes.get(r.dimension) == r.cls]
    enough = [r for r in mine if r.group == POOLED and r.rows >= MIN_HEADLINE_ROWS]
    low = min(enough, key=lambda r: r.p10, default=None)
    high = max(enough, key=lambda r: r.p90, default=None)
    return Trust(dict(classes), mine, low, high)


def trust_for(pred: Prediction, table: Sequence[ClassRange] | None = None) -> Trust:
    """How far Seer has been off on measured runs of this prediction's classes (default table:
    the bundled one)."""
    return trust_for_classes(classes_of(pred), read_table() if table is None else table)


def pct(x: float) -> str:
    """A signed error as a whole percentage with a true minus sign ("0%" when it rounds to 0)."""
    whole = round(100 * x)
    return "0%" if whole == 0 else f"{whole:+d}%".replace("-", "−")


def seconds(x: float) -> str:
    """Seconds to three significant digits, trailing zeros kept (25.0, 7.62, 123)."""
    digits = max(0, 2 - math.floor(math.log10(x))) if x > 0 else 0
    return f"{x:.{digits}f}"


def _label(r: ClassRange) -> str:
    return f"{r.dimension.replace('_', ' ')} {r.cls}"


def lines(t: Trust, predicted_s: float) -> list[str]:
    """The "Runs like this one" block `seer predict` prints: headline, then one line per class
    with its pooled n, median and 10th–90th percentile and each kind of set's n and median."""
    out = ["Runs like this one (Seer's error on measured runs of the same classes; − = too fast):"]
    if t.low is None or t.high is None:
        out.append(f"  no class of this job has {MIN_HEADLINE_ROWS} measured runs: no range")
    else:
        short, long = measured_range(predicted_s, t.low.p10, t.high.p90)
        out.append(
            f"  {pct(t.low.p10)} … {pct(t.high.p90)} ({100 * LOW_QUANTILE:.0f}th–"
            f"{100 * HIGH_QUANTILE:.0f}th pct) → measured ≈ "
            f"{seconds(short)}–{seconds(long)} s (low end: {_label(t.low)}; "
            f"high end: {_label(t.high)})"
        )
    for dim in DIMENSIONS:
        if dim not in t.classes:
            continue
        mine = {r.group: r for r in t.ranges if r.dimension == dim}
        head = f"  {dim.replace('_', ' ')} = {t.classes[dim]}: "
        if POOLED not in mine:
            out.append(head + "no measured runs")
            continue
        a = mine[POOLED]
        split = ", ".join(f"{g} {mine[g].rows} median {pct(mine[g].median)}"
                          for g in SET_GROUPS if g in mine)  # fmt: skip
        line = f"{head}n={a.rows} median {pct(a.median)} [{pct(a.p10)}, {pct(a.p90)}]"
        out.append(f"{line} ({split})" if split else line)
    return out


__all__ = [
    "GROUPS",
    "HIGH_QUANTILE",
    "LOW_QUANTILE",
    "MIN_HEADLINE_ROWS",
    "POOLED",
    "SET_GROUPS",
    "ClassRange",
    "MeasuredSet",
    "Trust",
    "bundled_table",
    "class_range",
    "class_ranges",
    "lines",
    "measured_range",
    "pct",
    "quantile",
    "read_table",
    "seconds",
    "trust_for",
    "trust_for_classes",
    "write_rows",
    "write_table",
]
