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
    from matplotlib.ticker import NullFormatter

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (name, rows) in enumerate(by_controller(r.rows).items()):
        pts = [(row[x], row[y]) for row in rows if row.get(y) is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, [max(v, 1e-12) for v in ys] if logy else ys, label=name, **style(i))
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # 3x10^4 4x10^4 ... overprint each other
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{r.name}: {r.title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


#: Bar hatches per contender, in the order of STYLES: bars of equal height (Fornax and
#: DOCA-like often are) still show which contender each one is, also in grey print.
HATCHES: tuple[str, ...] = ("", "//", "..", "xx", "\\\\")


def bar_style(i: int) -> dict[str, Any]:
    """Matplotlib keywords of the i-th contender's bars (its line colour, a hatch)."""
    return {"color": f"C{i}", "hatch": HATCHES[i % len(HATCHES)], "edgecolor": "black",
            "linewidth": 0.6}  # fmt: skip


#: Bars whose positive values span more than this factor get a log axis: at 16M sessions the
#: OVS-like manager's restart costs 150x Fornax's, and a linear axis shows Fornax's as nothing.
LOG_SPAN = 30.0


def contender_bars(ax: Any, rows: list[dict[str, Any]], y: str, ylabel: str, *,
                   group: str | None = None) -> None:  # fmt: skip
    """Bars of `y`, one per contender (side by side within each value of `group`, when
    given), each labelled with its value; a zero bar is drawn as the contender's marker on
    the axis, so no contender disappears, values spanning more than LOG_SPAN get a log axis,
    and a panel of zeros says so."""
    import numpy as np

    by = by_controller(rows)
    cats = list(dict.fromkeys(str(r[group]) for r in rows)) if group else [""]
    n = max(1, len(by))
    w = 0.8 / n if group else 0.6
    series = []
    for i, (name, rs) in enumerate(by.items()):
        got = {str(r[group]) if group else "": r.get(y) for r in rs}
        vals = np.array([np.nan if (v := got.get(c)) is None else float(v) for c in cats])
        pos = np.arange(len(cats)) + (i - (n - 1) / 2) * w if group else np.array([float(i)])
        series.append((i, name, vals, pos))
    every = np.concatenate([v for _, _, v, _ in series]) if series else np.zeros(0)
    every = every[every == every]
    positive = every[every > 0]
    top = float(every.max()) if len(every) else 0.0
    logy = len(positive) > 1 and positive.max() > LOG_SPAN * positive.min()
    floor = float(positive.min()) / 3 if logy else 0.0
    for i, name, vals, pos in series:
        bars = ax.bar(pos, np.nan_to_num(vals), w, label=name, **bar_style(i))
        ax.bar_label(bars, labels=[_cell(v) if v == v else "n/a" for v in vals], fontsize=7,
                     padding=2)  # fmt: skip
        zero = vals == 0
        if zero.any():
            ax.plot(pos[zero], np.full(int(zero.sum()), floor), linestyle="none", color=f"C{i}",
                    clip_on=False,
                    **{k: v for k, v in style(i).items() if k.startswith("marker")})  # fmt: skip
    if group:
        ax.set_xticks(np.arange(len(cats)), cats)
    else:
        ax.set_xticks(np.arange(len(by)), list(by), rotation=15, ha="right")
    if logy:
        ax.set_yscale("log")
        ax.set_ylim(floor, top * 4)
        ylabel += " (log)"
    else:
        ax.set_ylim(0, top * 1.18 if top > 0 else 1.0)
    if top == 0 and rows:
        ax.text(0.5, 0.5, "0 for every contender", transform=ax.transAxes, ha="center",
                va="center", fontsize=10)  # fmt: skip
        ax.set_yticks([0])
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)


def bar_panels(r: Result, panels: list[tuple[str, str]], *, group: str | None = None) -> Any:
    """One `contender_bars` panel per (column, label), side by side, one legend below."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    for ax, (key, lab) in zip(axes[0], panels, strict=True):
        contender_bars(ax, r.rows, key, lab, group=group)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False)
    fig.suptitle(f"{r.name}: {r.title}")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def bar_plot(r: Result, y: str, ylabel: str) -> Any:
    """One bar per contender of `y` (a single `contender_bars` panel)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    contender_bars(ax, r.rows, y, ylabel)
    ax.set_title(f"{r.name}: {r.title}")
    return fig


__all__ = ["Result", "bar_panels", "bar_plot", "bar_style", "by_controller", "contender_bars",
           "line_plot", "print_result", "write_json", "write_png"]  # fmt: skip
