"""An experiment's result (rows per contender and size, a summary), its rich table, its JSON
and its PNG plot."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from starfabric.report.html import figure_png


@dataclass
class Result:
    """Rows (one per contender and setting) with the columns to show, and a summary."""

    name: str
    title: str
    columns: list[tuple[str, str]]
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "rows": self.rows,
                "summary": self.summary, "notes": self.notes}  # fmt: skip


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e4 or abs(v) < 1e-3:
            return f"{v:.3g}"
        return f"{v:,.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def print_result(console: Console, r: Result) -> None:
    """The rows as a rich table, then the summary as one line per key."""
    table = Table(title=f"{r.name}: {r.title}", title_justify="left")
    for _, head in r.columns:
        table.add_column(head, justify="left" if head in ("controller", "feature") else "right")
    for row in r.rows:
        table.add_row(*(_cell(row.get(k)) for k, _ in r.columns))
    console.print(table)
    for k, v in r.summary.items():
        if not isinstance(v, dict | list):
            console.print(f"  {k}: {_cell(v)}")
    for n in r.notes:
        console.print(f"  note: {n}")


def write_png(r: Result, plot: Callable[[Result], Any], path: Path) -> Path:
    """The experiment's figure as a PNG file."""
    import matplotlib

    matplotlib.use("Agg")
    from starfabric.outputs import write_bytes

    return write_bytes(path, figure_png(plot(r)))


def write_json(data: dict[str, Any], path: Path) -> Path:
    """Write atomically (a temporary file renamed over `path`): an interrupted run leaves the
    previous complete document, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=float))
    tmp.replace(path)
    return path


def by_controller(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by their `controller`, in first-seen order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(str(row["controller"]), []).append(row)
    return out


#: (marker, line style, marker size) per contender, in order: lines that coincide (Fornax and
#: DOCA-like often do) stay visible as distinct hollow markers and dash patterns.
STYLES: tuple[tuple[str, Any, float], ...] = (
    ("o", "-", 9.0), ("s", "--", 7.0), ("^", ":", 6.0), ("D", "-.", 5.0), ("v", (0, (5, 1)), 5.0),
)  # fmt: skip


def style(i: int) -> dict[str, Any]:
    """Matplotlib keywords of the i-th contender's line."""
    marker, ls, size = STYLES[i % len(STYLES)]
    return {"marker": marker, "linestyle": ls, "markersize": size, "markerfacecolor": "none",
            "markeredgewidth": 1.6, "linewidth": 1.6}  # fmt: skip


def line_plot(r: Result, x: str, y: str, xlabel: str, ylabel: str, *, logy: bool = True) -> Any:
    """One line per controller of `y` against `x` (log-log by default)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (name, rows) in enumerate(by_controller(r.rows).items()):
        pts = [(row[x], row[y]) for row in rows if row.get(y) is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, [max(v, 1e-12) for v in ys] if logy else ys, label=name, **style(i))
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{r.name}: {r.title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def bar_plot(
    r: Result, y: str, ylabel: str, *, label: str = "controller", logy: bool = False
) -> Any:
    """One bar per row (labelled by `label`) of `y`."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    names = [str(row[label]) for row in r.rows]
    vals = [float(row.get(y) or 0.0) for row in r.rows]
    ax.bar(range(len(vals)), [max(v, 1e-12) for v in vals] if logy else vals)
    ax.set_xticks(range(len(vals)), names, rotation=20, ha="right")
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{r.name}: {r.title}")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


__all__ = ["Result", "bar_plot", "by_controller", "line_plot", "print_result", "write_json",
           "write_png"]  # fmt: skip
