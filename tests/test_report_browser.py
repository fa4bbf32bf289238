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


def _plot_step(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Stand-in for the 66 s 'astral network' step: a real matplotlib PNG under its file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    sizes = [2**k for k in range(20, 31, 2)]
    ax.plot(sizes, [s / 2**30 for s in sizes], marker="o")
    ax.set_xscale("log", base=2)
    fig.savefig(out / "astral_compare.png", dpi=80)
    plt.close(fig)
    return {"seed": seed, "sizes": sizes}


def test_demo_report_renders_every_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    from starfabric.fornax.experiments import demo as fornax_exp_demo
    from starfabric.fornax.experiments import get_scale

    # the baselines step at ci scale, E1 only (its plot is what the page must render)
    monkeypatch.setattr(fornax_exp_demo, "DEMO_EXPERIMENTS", "E1")
    monkeypatch.setattr(fornax_exp_demo, "DEMO_SCALE", get_scale("ci"))
    real = dict(demo._steps())
    fast = [(n, real[n]) for n in ("fornax engine", "fornax manager", "fornax vs baselines",
                                   "fornax chaos", "astral seer")]  # fmt: skip
    steps = [*fast, ("astral network", _plot_step), ("astral monitor", real["astral monitor"])]
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
    if os.environ.get("STARFABRIC_REPORT_SCREENSHOT"):  # docs/report.png is made this way
        Path(os.environ["STARFABRIC_REPORT_SCREENSHOT"]).write_bytes(png)

    # the headline box answers the four questions; run metadata and file links are there
    head = json.loads(browser.evaluate(
        "JSON.stringify(Array.from(document.querySelectorAll('#headline dt')).map(d => d.textContent))"
    ))  # fmt: skip
    assert len(head) == 4 and all(q.endswith("?") for q in head), head
    assert "starfabric version" in browser.evaluate("document.body.innerText")
    assert browser.evaluate("document.querySelectorAll('.meta a[href$=\".json\"]').length") > 0
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
    # the page uses the window's width, not a 1100 px column
    assert browser.evaluate("document.body.getBoundingClientRect().width") > 1200

    assert plots, "report.html has no <img class='plot'>"
    broken = [p["alt"] for p in plots if not (p["complete"] and p["w"] > 0 and p["h"] > 0)]
    assert broken == [], f"plots that did not render: {broken}"
    assert browser.errors() == []
    headings = browser.evaluate(
        "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)"
    )
    assert headings == [name for name, _ in steps]


def test_checker_sees_a_broken_plot_and_a_console_error(tmp_path: Path, browser: Browser) -> None:
    """The checks above can fail: a corrupt PNG and a script error are both reported."""
    rep = HtmlReport("broken")
    rep.image(b"\x89PNG\r\n\x1a\n not really a png", "corrupt")
    rep.parts.append("<script>console.error('boom'); undefinedFunction();</script>")
    page = rep.write(tmp_path / "broken.html")

    browser.open(page)
    plots = json.loads(browser.evaluate(_PLOTS_JS))
    assert [p["w"] for p in plots] == [0]
    errors = browser.errors()
    assert any("boom" in e for e in errors), errors
    assert any(e.startswith("exception") for e in errors), errors
