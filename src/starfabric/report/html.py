"""One self-contained HTML page: sections of text, tables and PNG plots embedded as data URIs.

No external scripts, fonts or stylesheets, so the page opens offline and in a sandboxed browser.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5rem 2vw;color:#1b1f24;line-height:1.45}
.headline{border:2px solid #0969da;background:#ddf4ff;border-radius:6px;padding:.6rem 1.2rem;margin:1rem 0}
.headline dt{font-weight:600;margin-top:.4rem}.headline dd{margin:0 0 .2rem 0}
.meta{display:inline-block;vertical-align:top;margin-right:3rem}h3{font-size:1.05rem;margin:.8rem 0 .2rem}
h1{font-size:1.7rem;border-bottom:2px solid #d0d7de;padding-bottom:.3rem}h2{font-size:1.3rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:.8rem 0;font-size:.9rem}th,td{border:1px solid #d0d7de;padding:.25rem .6rem;text-align:right}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}img{max-width:100%;border:1px solid #eee;margin:.6rem .6rem .6rem 0;vertical-align:top}
.note{color:#57606a;font-size:.9rem}code{background:#f6f8fa;padding:0 .25rem}
"""


def figure_png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


@dataclass
class HtmlReport:
    """Build a report section by section, then `write` it."""

    title: str
    parts: list[str] = field(default_factory=list)

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def paragraph(self, text: str, note: bool = False) -> None:
        cls = ' class="note"' if note else ""
        self.parts.append(f"<p{cls}>{html.escape(text)}</p>")

    def table(self, header: list[str], rows: list[list[Any]]) -> None:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>"
            for row in rows
        )
        self.parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")

    def box(self, title: str, items: list[tuple[str, str]]) -> None:
        """The headline box: questions and their answers."""
        body = "".join(f"<dt>{html.escape(q)}</dt><dd>{html.escape(a)}</dd>" for q, a in items)
        self.parts.append(
            f'<div id="headline" class="headline"><h3>{html.escape(title)}</h3>'
            f"<dl>{body}</dl></div>"
        )

    def facts(self, title: str, rows: list[list[Any]]) -> None:
        """A small titled two-column table (run metadata), outside the step sections."""
        body = "".join(
            f"<tr><td>{html.escape(_fmt(k))}</td><td>{html.escape(_fmt(v))}</td></tr>"
            for k, v in rows
        )
        self.parts.append(
            f'<div class="meta"><h3>{html.escape(title)}</h3><table><tbody>{body}</tbody>'
            "</table></div>"
        )

    def links(self, title: str, files: list[tuple[str, str]]) -> None:
        """Links to files beside the page (relative, so the folder can move)."""
        items = "".join(
            f'<li><a href="{html.escape(f)}">{html.escape(f)}</a>: {html.escape(what)}</li>'
            for f, what in files
        )
        self.parts.append(f'<div class="meta"><h3>{html.escape(title)}</h3><ul>{items}</ul></div>')

    def image(self, png: bytes, alt: str) -> None:
        data = base64.b64encode(png).decode("ascii")
        self.parts.append(
            f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
        )

    def render(self) -> str:
        body = "\n".join(self.parts)
        return (
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(self.title)}</title>'
            f"<style>{_CSS}</style></head><body><h1>{html.escape(self.title)}</h1>\n{body}\n</body></html>\n"
        )

    def write(self, path: str | Path) -> Path:
        from starfabric.outputs import write_text

        return write_text(path, self.render())


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != v:
            return "–"
        if abs(v) >= 1e5 or (0 < abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)
