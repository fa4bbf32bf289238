"""The demo's report page: a headline box that answers the four questions, run metadata, each
step's figures under human labels with units, the plots, and links to the JSON and Perfetto
files beside the page.

Reads only the demo's own outputs (the step summaries and the JSON files they wrote), so the
page says what the run measured and nothing else.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from starfabric import __version__
from starfabric.report.html import HtmlReport

#: Human labels (with units) for the keys the demo's steps report; a key not listed here is
#: turned into words by `label` (underscores to spaces, a unit suffix to "(unit)").
LABELS: dict[str, str] = {
    "storage_ratio (Fornax / OVS-like)": "software memory, Fornax ÷ OVS-like",
    "cpu_ratio (Fornax / OVS-like)": "management CPU, Fornax ÷ OVS-like",
    "zero_drop_cps_ratio (Fornax / OVS-like)": "zero-drop connections/s, Fornax ÷ OVS-like",
    "mgmt_cpu_s": "management CPU, excluding JIT compilation (s)",
    "software_bytes_per_peak_session": "software memory per peak session (B)",
    "peak_sessions": "peak live sessions",
    "hw_forwarded": "packets forwarded in hardware",
    "sw_forwarded": "packets forwarded in software",
    "policy_drop": "packets dropped by policy",
    "named_drop": "packets lost (named reason)",
    "iteration_s": "iteration time (s)",
    "top1_correct": "top-ranked cause is the injected fault",
    "localize_s": "localization time (s)",
    "wall_s": "wall time of this step (s)",
    "gpus": "GPUs",
    "sweep_points": "all-reduce sweep points",
}
_UNITS = {"_s": "s", "_ms": "ms", "_us": "µs", "_bytes": "B", "_gbps": "GB/s", "_gib": "GiB",
          "_w": "W", "_pct": "%"}  # fmt: skip


def label(key: str) -> str:
    """A report label for a summary key: the table above, else words with the unit."""
    if key in LABELS:
        return LABELS[key]
    for suffix, unit in _UNITS.items():
        if key.endswith(suffix):
            return f"{key[: -len(suffix)].replace('_', ' ')} ({unit})"
    return key.replace("_", " ")


def _cells(prefix: str, value: Any, rows: list[list[Any]], depth: int = 0) -> None:
    """Rows of (label, value): nested mappings become labelled sub-rows, lists of records a
    count (their detail is in the JSON files), never a Python dict or list in a cell."""
    if isinstance(value, dict):
        if depth >= 2:
            rows.append([prefix, f"{len(value)} fields (see the JSON files)"])
            return
        for k, v in value.items():
            _cells(f"{prefix} › {label(str(k))}" if prefix else label(str(k)), v, rows, depth + 1)
    elif isinstance(value, list | tuple):
        if all(isinstance(v, int | float | str) for v in value) and len(value) <= 8:
            rows.append([prefix, ", ".join(str(v) for v in value)])
        else:
            rows.append([prefix, f"{len(value)} records (see the JSON files)"])
    elif isinstance(value, bool):
        rows.append([prefix, "yes" if value else "no"])
    elif value is None:
        rows.append([prefix, "not measured in this run"])
    else:
        rows.append([prefix, value])


def _load(out: Path, name: str) -> Any:
    try:
        return json.loads((out / name).read_text())
    except (OSError, ValueError):
        return None


def _fmt_ratio(v: Any) -> str:
    return "(not measured)" if not isinstance(v, int | float) else f"{v:.3g}"


def _names(v: Any) -> str:
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v) or "none"
    return str(v)


Q_FORNAX = "Does Fornax beat the software-centric managers?"
Q_ASTRAL = "Does Astral's design win?"
Q_SEER = "How accurate is Seer?"
Q_MONITOR = "Did the monitor find the faults?"


def headline(out: Path, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(question, answer) pairs from what the run measured."""
    rows: list[tuple[str, str]] = []
    missing = "not measured in this run ({} is missing)"
    base = summary.get("fornax vs baselines", {})
    if not base:
        rows.append((Q_FORNAX, missing.format("the 'fornax vs baselines' step")))
    else:
        s = base.get("storage_ratio (Fornax / OVS-like)")
        c = base.get("cpu_ratio (Fornax / OVS-like)")
        z = base.get("zero_drop_cps_ratio (Fornax / OVS-like)")
        rows.append((
            Q_FORNAX,
            f"software memory {_fmt_ratio(s)}× and management CPU {_fmt_ratio(c)}× of the "
            f"OVS-like manager's; zero-drop connection rate {_fmt_ratio(z)}× its rate",
        ))  # fmt: skip
    net = _load(out, "astral_network.json")
    if isinstance(net, dict) and net.get("compare"):
        best: dict[str, tuple[float, str]] = {}
        for r in net["compare"]:
            if r.get("feasible") and not r.get("polarized"):
                w = str(r["workload"])
                if w not in best or r["time_ms"] < best[w][0]:
                    best[w] = (float(r["time_ms"]), str(r["design"]))
        designs = sorted({str(r["design"]) for r in net["compare"]})
        wins = "; ".join(f"{w}: {d} fastest ({t:.2f} ms)" for w, (t, d) in sorted(best.items()))
        rows.append((
            Q_ASTRAL,
            f"{wins} (designs compared: {', '.join(designs)}; ECMP hashing)",
        ))  # fmt: skip
    else:
        rows.append((Q_ASTRAL, missing.format("astral_network.json")))
    seer = _load(out, "seer_prediction.json")
    if isinstance(seer, dict) and "iteration_s" in seer:
        rows.append((
            Q_SEER,
            f"this job: {seer['iteration_s']:.2f} s per iteration, MFU {seer.get('mfu', 0):.1%}; "
            "accuracy against 19 published Megatron-LM runs is measured by "
            "`starfabric astral seer validate` (not part of the demo)",
        ))  # fmt: skip
    else:
        rows.append((Q_SEER, missing.format("seer_prediction.json")))
    mon = summary.get("astral monitor", {})
    if mon:
        found = "found" if mon.get("top1_correct") else "did NOT rank first"
        rows.append((
            Q_MONITOR,
            f"injected {_names(mon.get('injected'))}, reported {_names(mon.get('reported'))}: "
            "the injected "
            f"fault {found} (localized in {mon.get('localize_s', 0):.2f} s)",
        ))  # fmt: skip
    else:
        rows.append((Q_MONITOR, missing.format("the 'astral monitor' step")))
    return rows


def metadata(seed: int, summary: dict[str, Any]) -> list[list[Any]]:
    """Rows describing the run: version, seed, date, machine, time."""
    total = sum(float(v.get("wall_s", 0.0)) for v in summary.values() if isinstance(v, dict))
    return [
        ["starfabric version", __version__],
        ["seed", seed],
        ["finished (UTC)", time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())],
        ["machine", f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"],
        ["Python", sys.version.split()[0]],
        ["wall time of all steps (s)", round(total, 1)],
    ]


PLOTS = {
    "fornax vs baselines": ("fornax_E1.png", "fornax_E2.png", "fornax_E3.png"),
    "fornax chaos": ("chaos_timeline.png",),
    "astral network": ("astral_compare.png",),
}
"""The plots each step writes, shown under its section."""

LINKS = (
    ("summary.json", "every step's figures"),
    ("fornax_run.json", "the Fornax manager run"),
    ("fornax_experiments.json", "Fornax vs the baselines, every row"),
    ("chaos.json", "the chaos run"),
    ("chaos_trace.json", "chaos timeline (open in ui.perfetto.dev)"),
    ("astral_network.json", "the design comparison and all-reduce sweep"),
    ("seer_prediction.json", "Seer's prediction"),
    ("seer_timeline.json", "Seer's iteration timeline (open in ui.perfetto.dev)"),
    ("monitor.json", "the monitor's diagnosis"),
)


def demo_report(out: Path, summary: dict[str, Any], *, seed: int) -> HtmlReport:
    """The whole page."""
    rep = HtmlReport("starfabric demo")
    rep.box("Headline", headline(out, summary))
    rep.facts("Run", metadata(seed, summary))
    present = [(f, what) for f, what in LINKS if (out / f).is_file()]
    rep.links("Files beside this page", present)
    seer = _load(out, "seer_prediction.json")
    for name, result in summary.items():
        rep.heading(name)
        rows: list[list[Any]] = []
        _cells("", result, rows)
        rep.table(["figure", "value"], rows)
        if name == "astral seer" and isinstance(seer, dict) and seer.get("breakdown_s"):
            it = float(seer["iteration_s"])
            rep.table(
                ["Seer breakdown", "seconds", "share of the iteration"],
                [[label(k), v, f"{v / it:.1%}"] for k, v in seer["breakdown_s"].items()],
            )
            mem = seer.get("memory_gib") or {}
            if mem:
                rep.table(
                    ["memory per GPU", "GiB"],
                    [[label(k), v] for k, v in mem.items() if isinstance(v, int | float)],
                )
        for png in PLOTS.get(name, ()):
            p = out / png
            if p.is_file() and p.stat().st_size > 0:
                rep.image(p.read_bytes(), f"{name}: {png}")
    return rep
