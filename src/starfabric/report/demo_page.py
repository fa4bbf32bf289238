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
    "OVS-like calibration": "the OVS-like model's calibration (whose machine)",
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
    "designs": "designs compared",
    "trace": "Perfetto timeline",
    "published_runs": "published Megatron-LM runs (as `seer validate`)",
    "published_mean_error_pct": "mean |error| of iteration time on those runs (%)",
    "published_max_error_pct": "largest |error| of iteration time on those runs (%)",
}

#: Seer's iteration breakdown (schedule.COMPONENTS) in words: compute, the communication
#: each parallel group leaves exposed, the pipeline bubble, recompute and the rest.
SEER_PARTS: dict[str, str] = {
    "compute": "compute (forward and backward)",
    "recompute": "recompute (activation recomputation)",
    "tp": "exposed communication: tensor parallel (TP)",
    "cp": "exposed communication: context parallel (CP)",
    "ep": "exposed communication: expert parallel (EP all-to-all)",
    "pp": "exposed communication: pipeline parallel (PP send/receive)",
    "dp": "exposed communication: data parallel (gradient reduce, parameter gather)",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
    "overhead": "host overhead per iteration",
    "host": "host launch time the GPU waits for (Megatron-Core MoE dispatcher syncs)",
}
#: Seer's memory report per GPU (predict.Prediction.summary()["memory_gib"]) in words.
MEMORY_PARTS: dict[str, str] = {
    "weights": "weights",
    "grads": "gradients",
    "optimizer": "optimizer state",
    "activations": "activations",
    "reserved": "reserved (CUDA context, allocator)",
    "total": "total",
    "capacity": "HBM capacity",
}
WORKLOADS = {"dp-allreduce": "DP all-reduce", "alltoall": "all-to-all"}
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
        if not value:
            rows.append([prefix, "none"])
        elif all(isinstance(v, int | float | str) for v in value) and len(value) <= 8:
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


RACES = (("dp-allreduce", False), ("alltoall", False), ("alltoall", True))
"""The comparisons the headline states: both workloads with per-switch ECMP, and the
all-to-all under polarized hashing (where the designs differ most)."""
TIE = 0.005
"""Designs within 0.5% of the fastest time are reported as tied for fastest."""


def race(rows: list[dict[str, Any]], workload: str, polarized: bool) -> str:
    """'DP all-reduce, ECMP: astral and rail-only fastest (50.52 ms); dual-plane 75.90 ms,
    ...' from the comparison rows, or '' when none ran."""
    times = sorted(
        (float(r["time_ms"]), str(r["design"]))
        for r in rows
        if r.get("feasible", True) and r["workload"] == workload
        and bool(r["polarized"]) == polarized
    )  # fmt: skip
    if not times:
        return ""
    best = times[0][0]
    won = [d for t, d in times if t <= best * (1 + TIE)]
    rest = ", ".join(f"{d} {t:.2f} ms" for t, d in times if d not in won)
    hashing = "polarized ECMP" if polarized else "ECMP"
    return (f"{WORKLOADS.get(workload, workload)}, {hashing}: {' and '.join(won)} "
            f"{'tie for ' if len(won) > 1 else ''}fastest ({best:.2f} ms)"
            + (f", then {rest}" if rest else ""))  # fmt: skip


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
            f"OVS-like manager's; zero-drop connection rate {_fmt_ratio(z)}× its rate"
            + (f" (OVS-like model: {cal})" if (cal := base.get("OVS-like calibration")) else ""),
        ))  # fmt: skip
    net = _load(out, "astral_network.json")
    if isinstance(net, dict) and net.get("compare"):
        designs = sorted({str(r["design"]) for r in net["compare"]})
        parts = [race(net["compare"], w, p) for w, p in RACES]
        rows.append((
            Q_ASTRAL,
            "; ".join(x for x in parts if x) + f" (designs compared: {', '.join(designs)})",
        ))  # fmt: skip
    else:
        rows.append((Q_ASTRAL, missing.format("astral_network.json")))
    seer = _load(out, "seer_prediction.json")
    val = _load(out, "seer_validation.json")
    if isinstance(val, dict) and val.get("rows"):
        n, miss = len(val["rows"]), len(val.get("not_predicted") or [])
        acc = (f"on {n} published Megatron-LM runs ({n} of {n + miss} predicted) the iteration "
               f"time is off by {val['mean_abs_error']:.1%} on average, {val['max_abs_error']:.1%} "
               "at most")  # fmt: skip
    else:
        acc = "accuracy not measured in this run (seer_validation.json is missing)"
    if isinstance(seer, dict) and "iteration_s" in seer:
        acc += (f"; this job: {seer['iteration_s']:.2f} s per iteration, "
                f"MFU {seer.get('mfu', 0):.1%}")  # fmt: skip
    rows.append((Q_SEER, acc))
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
    ("seer_validation.json", "Seer on the published runs, every row"),
    ("monitor.json", "the monitor's diagnosis"),
)


def _seer_tables(rep: HtmlReport, seer: dict[str, Any]) -> None:
    """The prediction's layout and rates, its breakdown and its memory, in words."""
    lay = seer.get("layout") or {}
    shape = " · ".join(f"{k.upper()} {lay[k]}" for k in ("tp", "pp", "vpp", "dp", "cp", "ep")
                       if k in lay)  # fmt: skip
    it = float(seer["iteration_s"])
    rep.table(["Seer prediction", "value"], [
        ["model", seer.get("model", "?")],
        ["GPUs", f"{seer.get('gpus', '?')} × {seer.get('gpu', '?')}"],
        ["parallel layout", shape or "?"],
        ["micro-batches per iteration", lay.get("micro_batches", "?")],
        ["iteration time (s)", it],
        ["tokens per second", seer.get("tokens_per_s", float("nan"))],
        ["model FLOPs utilization (MFU, %)", 100 * float(seer.get("mfu", float("nan")))],
        ["out of memory", "yes" if seer.get("oom") else "no"],
    ])  # fmt: skip
    rep.table(
        ["Seer breakdown (busiest pipeline stage)", "seconds", "share of the iteration"],
        [[SEER_PARTS.get(k, label(k)), v, f"{v / it:.1%}"] for k, v in seer["breakdown_s"].items()],
    )
    mem = seer.get("memory_gib") or {}
    cap = mem.get("capacity")
    parts = [(k, v) for k, v in mem.items() if k in MEMORY_PARTS and isinstance(v, int | float)]
    if parts:
        rep.table(
            [f"memory per GPU (pipeline stage {mem.get('stage', '?')}, the fullest)", "GiB",
             "share of HBM"],
            [[MEMORY_PARTS[k], v, f"{v / cap:.1%}" if cap else "–"] for k, v in parts],
        )  # fmt: skip


def _design_table(rep: HtmlReport, net: dict[str, Any]) -> None:
    """The design comparison: one row per design, time per workload and hashing."""
    rows = net.get("compare") or []
    designs = list(dict.fromkeys(str(r["design"]) for r in rows))
    cols = [(w, p) for w in WORKLOADS for p in (False, True)]
    head = ["design (same GPU count, 1 GiB per collective)"] + [
        f"{WORKLOADS[w]}, {'polarized ECMP' if p else 'ECMP'} (ms)" for w, p in cols
    ]
    body = []
    for d in designs:
        line: list[Any] = [d]
        for w, p in cols:
            r = next((r for r in rows if r["design"] == d and r["workload"] == w
                      and bool(r["polarized"]) == p), None)  # fmt: skip
            if r is None:
                line.append("not run")
            elif not r.get("feasible", True):
                line.append("infeasible: " + str(r.get("reason", ""))[:60])
            else:
                line.append(float(r["time_ms"]))
        body.append(line)
    if body:
        rep.table(head, body)


def demo_report(out: Path, summary: dict[str, Any], *, seed: int) -> HtmlReport:
    """The whole page."""
    rep = HtmlReport("starfabric demo")
    rep.box("Headline", headline(out, summary))
    rep.facts("Run", metadata(seed, summary))
    present = [(f, what) for f, what in LINKS if (out / f).is_file()]
    rep.links("Files beside this page", present)
    seer = _load(out, "seer_prediction.json")
    net = _load(out, "astral_network.json")
    for name, result in summary.items():
        rep.heading(name)
        rows: list[list[Any]] = []
        _cells("", result, rows)
        rep.table(["figure", "value"], rows)
        if name == "astral seer" and isinstance(seer, dict) and seer.get("breakdown_s"):
            _seer_tables(rep, seer)
        if name == "astral network" and isinstance(net, dict):
            _design_table(rep, net)
        for png in PLOTS.get(name, ()):
            p = out / png
            if p.is_file() and p.stat().st_size > 0:
                rep.image(p.read_bytes(), f"{name}: {png}")
    return rep
