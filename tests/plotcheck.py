"""What "every contender is visible" means, checked on rendered pixels: in every panel of a
figure, each labelled series (a line or a set of bars) paints at least MIN_PIXELS pixels of
its own colour outside the legends; a panel with no labelled series is an empty plot."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.colors import to_rgb

MIN_PIXELS = 25
"""Pixels of a series' colour a panel must show (a hollow marker alone paints ~60 at 100 dpi)."""
TOL = 40
"""Largest per-channel difference (0-255) for a pixel to count as the series' colour."""


def series(ax: Any) -> list[tuple[str, tuple[float, float, float]]]:
    """(label, colour) of every labelled line and bar set in the panel."""
    out = [(str(ln.get_label()), to_rgb(ln.get_color())) for ln in ax.lines
           if not str(ln.get_label()).startswith("_")]  # fmt: skip
    for c in ax.containers:
        label = str(c.get_label() or "_")
        if not label.startswith("_") and len(c.patches):
            out.append((label, to_rgb(c.patches[0].get_facecolor())))
    return out


def invisible(fig: Any, dpi: int = 100) -> list[str]:
    """'panel: series (N px)' for each series too faint to see, 'panel: empty' for a panel
    that draws none; [] when every series of every panel shows."""
    fig.set_dpi(dpi)
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(np.int16)
    h = img.shape[0]
    hidden = np.zeros(img.shape[:2], bool)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for lg in [*legends, *fig.legends]:
        b = lg.get_window_extent()
        hidden[max(0, int(h - b.y1)) : int(h - b.y0) + 1, max(0, int(b.x0)) : int(b.x1) + 1] = True
    problems = []
    for k, ax in enumerate(fig.axes):
        name = ax.get_title() or ax.get_ylabel() or f"panel {k}"
        found = series(ax)
        if not found:
            problems.append(f"{name}: empty")
            continue
        b = ax.get_window_extent()
        rows = slice(max(0, int(h - b.y1) - 8), int(h - b.y0) + 8)  # markers sit on the axes
        cols = slice(max(0, int(b.x0) - 8), int(b.x1) + 8)
        sub, free = img[rows, cols], ~hidden[rows, cols]
        for label, rgb in found:
            ref = np.array([round(255 * v) for v in rgb], np.int16)
            n = int(((np.abs(sub - ref).max(axis=-1) <= TOL) & free).sum())
            if n < MIN_PIXELS:
                problems.append(f"{name}: {label} ({n} px)")
    return problems
