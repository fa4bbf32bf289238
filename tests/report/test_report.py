import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from starfabric.errors import InvariantError
from starfabric.report import ChromeTrace, HtmlReport, figure_png


def test_trace_tracks_and_units(tmp_path: Path) -> None:
    tr = ChromeTrace()
    tr.slice("stage 0", "compute", "fwd", 0.001, 0.002, args={"flops": 1.0})
    tr.slice("stage 0", "comm", "all_reduce", 0.002, 0.0005)
    tr.slice("stage 1", "compute", "fwd", 0.003, 0.002)
    data = json.loads(tr.write(tmp_path / "t.json").read_text())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert [e["ts"] for e in xs] == [1000.0, 2000.0, 3000.0]
    assert xs[0]["dur"] == pytest.approx(2000.0)
    assert len({(e["pid"], e["tid"]) for e in xs}) == 3
    names = {
        e["args"]["name"]
        for e in data["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert names == {"compute", "comm"}


def test_trace_refuses_negative_duration() -> None:
    with pytest.raises(InvariantError):
        ChromeTrace().slice("p", "t", "bad", 0.0, -1.0)


def test_html_is_self_contained(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    rep = HtmlReport("demo <report>")
    rep.heading("numbers")
    rep.table(["what", "value"], [["ratio", 0.04567], ["count", 1234567]])
    rep.image(figure_png(fig), "a line")
    text = rep.write(tmp_path / "r.html").read_text()
    assert "demo &lt;report&gt;" in text
    assert "data:image/png;base64," in text and "1,234,567" in text
    assert "<script" not in text and "http" not in text
