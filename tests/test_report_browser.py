"""The demo's report.html opened in real headless Chromium: every plot decodes, no console error.

Chromium (Debian's `chromium` package) is driven over the Chrome DevTools protocol on a pipe
(`--remote-debugging-pipe`: NUL-terminated JSON on fds 3 and 4), so nothing beyond the standard
library and the apt package is needed. Without /usr/bin/chromium the tests skip and say how to
install it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import starfabric.demo as demo
from starfabric.report import HtmlReport

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason="headless Chromium not installed: apt-get install -y chromium chromium-driver",
)

#: Flags for a sandboxed machine with no network (see /work/.library/env/machines/python.md).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)

#: Seconds to wait for the browser to answer one command or load one page.
TIMEOUT_S = 60.0

_PLOTS_JS = """JSON.stringify(Array.from(document.querySelectorAll('img.plot')).map(
  i => ({alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight})))"""

#: The first three matplotlib colours: contender i of a Fornax plot draws in colour Ci.
CONTENDER_RGB = ((31, 119, 180), (255, 127, 14), (44, 160, 44))
#: Pixels of its own colour a contender must paint in a plot: about 3x what its legend entry
#: alone paints at the report's 110 dpi (80-135 px), so a line hidden under another fails.
MIN_VISIBLE_PX = 300
#: Strongly coloured pixels (max - min channel > 60) a plot must have: an empty plot has its
#: axes, ticks and title in black and grey only.
MIN_COLOURED_PX = 300

#: Per plot, as the browser decoded it: strongly coloured pixels and pixels within 40 per
#: channel of each contender colour (drawn onto a canvas; data: URIs do not taint it).
_PIXELS_JS = """JSON.stringify(Array.from(document.querySelectorAll('img.plot')).map(img => {
  if (!img.complete || img.naturalWidth === 0) return {alt: img.alt, coloured: 0, near: [0, 0, 0]};
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  const ref = REF; const near = ref.map(() => 0); let coloured = 0;
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], gr = d[i + 1], b = d[i + 2];
    if (Math.max(r, gr, b) - Math.min(r, gr, b) > 60) coloured++;
    ref.forEach((q, k) => {
      if (Math.abs(r - q[0]) <= 40 && Math.abs(gr - q[1]) <= 40 && Math.abs(b - q[2]) <= 40) near[k]++;
    });
  }
  return {alt: img.alt, coloured: coloured, near: near};
}))""".replace("REF", json.dumps(CONTENDER_RGB))


class Browser:
    """A headless Chromium and one page, spoken to over the DevTools pipe."""

    def __init__(self, user_data_dir: Path) -> None:
        to_child, self._w = os.pipe()
        self._r, from_child = os.pipe()
        # Move the child's ends above fd 10 so dup2 onto 3 and 4 cannot clobber them.
        hi_r = fcntl.fcntl(to_child, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_child, fcntl.F_DUPFD, 10)
        os.close(to_child)
        os.close(from_child)

        def wire() -> None:
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
            preexec_fn=wire,
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(hi_r)
        os.close(hi_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
            self.session = attached["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                self.call(f"{domain}.enable", session=True)
        except BaseException:
            self.close()
            raise

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer over the DevTools pipe")
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium closed the DevTools pipe (exit {self.proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> Any:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """Wait for the page's next `method` event (or return one already received)."""
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            ev = self._read_message(deadline)
            self.events.append(ev)
            if ev.get("method") == method:
                return ev

    def open(self, page: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": page.resolve().as_uri()}, session=True)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        res = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        return res["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors seen since `open`."""
        out = []
        for ev in self.events:
            method, p = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value")) for a in p.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                out.append("exception: " + str(p.get("exceptionDetails", {}).get("text")))
            elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + str(p["entry"].get("text")))
        return out

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._r)
        os.close(self._w)


@pytest.fixture
def browser(tmp_path: Path) -> Any:
    b = Browser(tmp_path / "chromium-profile")
    yield b
    b.close()


DATA = Path(__file__).resolve().parent / "data"


def _network_step(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Stand-in for the minutes-long 'astral network' step: the recorded four-design
    comparison at 16,384 GPUs (tests/data/astral_compare_16k.json, `sim compare` on
    examples/cluster-small.yaml) through the step's real chart and JSON."""
    from starfabric import outputs
    from starfabric.astral.collectives.compare import CompareRow, plot_compare

    rows = json.loads((DATA / "astral_compare_16k.json").read_text())
    outputs.save_figure(plot_compare([CompareRow(**r) for r in rows]), out / "astral_compare.png",
                        dpi=110, bbox_inches="tight")  # fmt: skip
    outputs.write_json(out / "astral_network.json", {"gpus": 16384, "compare": rows})
    return {"gpus": 16384, "designs": len({r["design"] for r in rows})}


def _baselines_step(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """The real baselines step at ci scale with E1 only (seconds), then E2 and E3 drawn by
    their real plot functions from a recorded --scale ci run (minutes to run)."""
    from starfabric.fornax.experiments import EXPERIMENTS
    from starfabric.fornax.experiments.demo import baselines_demo
    from starfabric.fornax.experiments.output import Result, write_png

    summary = baselines_demo(out, seed, console)
    doc = json.loads((DATA / "fornax_experiments_ci.json").read_text())
    for name in ("E2", "E3"):
        d = doc["experiments"][name]
        res = Result(d["name"], d["title"], [], d["rows"], d["summary"], d["notes"])
        write_png(res, EXPERIMENTS[name].plot, out / f"fornax_{name}.png")
    return summary


def test_demo_report_renders_every_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    from starfabric.fornax.experiments import demo as fornax_exp_demo
    from starfabric.fornax.experiments import get_scale

    # the baselines step at ci scale, E1 only (E2, E3 plots from a recorded run)
    monkeypatch.setattr(fornax_exp_demo, "DEMO_EXPERIMENTS", "E1")
    monkeypatch.setattr(fornax_exp_demo, "DEMO_SCALE", get_scale("ci"))
    real = dict(demo._steps())
    steps = [(n, real[n]) for n in ("fornax engine", "fornax manager")]
    steps += [("fornax vs baselines", _baselines_step), ("fornax chaos", real["fornax chaos"]),
              ("astral network", _network_step), ("astral seer", real["astral seer"]),
              ("astral monitor", real["astral monitor"])]  # fmt: skip
    monkeypatch.setattr(demo, "_steps", lambda: steps)
    out = tmp_path / "demo"
    demo.run_demo(out, seed=1, console=Console(quiet=True))
    page = out / "report.html"

    browser.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1400, "height": 2000, "deviceScaleFactor": 1, "mobile": False},
        session=True,
    )
    browser.open(page)
    plots = json.loads(browser.evaluate(_PLOTS_JS))
    shot = browser.call(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False}, session=True
    )
    png = base64.b64decode(shot["data"])
    (tmp_path / "report.png").write_bytes(png)
    if os.environ.get("STARFABRIC_REPORT_SCREENSHOT"):  # docs/img/demo-report.png is made so
        Path(os.environ["STARFABRIC_REPORT_SCREENSHOT"]).write_bytes(png)

    # the headline box answers the four questions; run metadata and file links are there
    head = json.loads(browser.evaluate(
        "JSON.stringify(Array.from(document.querySelectorAll('#headline dt')).map(d => d.textContent))"
    ))  # fmt: skip
    assert len(head) == 4 and all(q.endswith("?") for q in head), head
    text = browser.evaluate("document.body.innerText")
    assert "starfabric version" in text
    assert browser.evaluate("document.querySelectorAll('.meta a[href$=\".json\"]').length") > 0
    # Perfetto timelines are linked
    assert "chaos_trace.json" in text and "seer_timeline.json" in text
    # no raw key names, no Python containers in any cell
    cells = json.loads(browser.evaluate(
        "JSON.stringify(Array.from(document.querySelectorAll('td')).map(c => c.textContent))"
    ))  # fmt: skip
    files = re.compile(r".+\.(json|png|duckdb|html)")  # a file name is a value, not a key
    raw = [
        c
        for c in cells
        if re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+(\.[a-z_]+)*", c) and not files.fullmatch(c)
    ]
    assert raw == [], f"raw key names: {raw[:5]}"
    assert [c for c in cells if c.startswith(("{", "[")) or "': " in c] == [], "a container"
    # all four designs in the comparison; Seer's breakdown and memory in words
    for design in ("astral", "fat-tree", "rail-only", "dual-plane"):
        assert design in cells, design
    for words in ("compute (forward and backward)", "pipeline bubble",
                  "exposed communication: tensor parallel (TP)",
                  "recompute (activation recomputation)", "activations"):  # fmt: skip
        assert words in cells, words
    # the page uses the window's width, not a 1100 px column
    assert browser.evaluate("document.body.getBoundingClientRect().width") > 1200

    assert plots, "report.html has no <img class='plot'>"
    broken = [p["alt"] for p in plots if not (p["complete"] and p["w"] > 0 and p["h"] > 0)]
    assert broken == [], f"plots that did not render: {broken}"
    # no empty plot; in E1-E3 every contender shows (not only in the legend)
    pixels = {p["alt"]: p for p in json.loads(browser.evaluate(_PIXELS_JS))}
    empty = [a for a, p in pixels.items() if p["coloured"] < MIN_COLOURED_PX]
    assert empty == [], f"empty plots: {empty}"
    fornax = [a for a in pixels if re.search(r"fornax_E[123]\.png", a)]
    assert len(fornax) == 3, list(pixels)
    hidden = {a: pixels[a]["near"] for a in fornax if min(pixels[a]["near"]) < MIN_VISIBLE_PX}
    assert hidden == {}, f"a contender hidden (pixels per contender colour): {hidden}"
    assert browser.errors() == []
    headings = browser.evaluate(
        "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)"
    )
    assert headings == [name for name, _ in steps]


def test_checker_sees_a_broken_plot_and_a_console_error(tmp_path: Path, browser: Browser) -> None:
    """The checks above can fail: a corrupt PNG, an empty plot, a contender hidden under
    another drawn alike, and a script error are all reported."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from starfabric.report.html import figure_png

    empty, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.bar(range(3), [0, 0, 0])
    ax.set_title("E6: all-zero bars")
    alike, ax = plt.subplots(figsize=(6.4, 4.0))
    for name in ("fornax", "ovs_like", "doca_like"):  # fornax under doca_like, same style
        ys = [9.0, 9.5, 10.0] if name == "ovs_like" else [4.0, 4.2, 4.5]
        ax.plot([1, 2, 3], ys, marker="o", linewidth=2, label=name)
    ax.legend()
    rep = HtmlReport("broken")
    rep.image(b"\x89PNG\r\n\x1a\n not really a png", "corrupt")
    rep.image(figure_png(empty), "empty")
    rep.image(figure_png(alike), "alike")
    rep.parts.append("<script>console.error('boom'); undefinedFunction();</script>")
    page = rep.write(tmp_path / "broken.html")

    browser.open(page)
    plots = json.loads(browser.evaluate(_PLOTS_JS))
    assert plots[0]["w"] == 0
    pixels = {p["alt"]: p for p in json.loads(browser.evaluate(_PIXELS_JS))}
    assert pixels["empty"]["coloured"] < MIN_COLOURED_PX
    near = pixels["alike"]["near"]
    assert near[0] < MIN_VISIBLE_PX <= min(near[1:]), near
    errors = browser.errors()
    assert any("boom" in e for e in errors), errors
    assert any(e.startswith("exception") for e in errors), errors
