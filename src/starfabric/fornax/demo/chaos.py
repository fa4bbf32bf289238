"""Demo-scale chaos run: examples/chaos-mixed.yaml (every fault class under traffic and a policy
change), its per-fault table, a timeline plot (forwarding by path over time with the faults and
failed-over scopes) and the Perfetto trace beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.table import Table

from starfabric import outputs
from starfabric.errors import ConfigError
from starfabric.fornax.demo.manager import EXAMPLES
from starfabric.fornax.manager.accounting import Fate, Final
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.run.chaos import run_chaos
from starfabric.fornax.run.chaos_report import chrome_trace, summary_rows
from starfabric.fornax.run.chaos_spec import load_chaos

#: Width of the timeline plot's bins (display choice).
BIN_S = 0.01


class _Series:
    """Packets per (time bin, final outcome), accumulated batch by batch (vectorized)."""

    def __init__(self) -> None:
        self.counts = np.zeros((0, len(Final)), np.int64)

    @property
    def n_bins(self) -> int:
        return int(self.counts.shape[0])

    def add(self, pb: PacketBatch, fate: Fate) -> None:
        if not len(pb):
            return
        b = (pb.time_ns // round(BIN_S * 1e9)).astype(np.int64)
        need = int(b.max()) + 1
        if need > self.n_bins:
            grow = np.zeros((need - self.n_bins, len(Final)), np.int64)
            self.counts = np.vstack([self.counts, grow])
        np.add.at(self.counts, (b, fate.final.astype(np.int64)), 1)


def _plot(series: _Series, report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(series.n_bins) * BIN_S
    c = series.counts / BIN_S / 1e3  # kpkt/s
    fig, (ax, gantt) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True,
                                    gridspec_kw={"height_ratios": [2, 1]})  # fmt: skip
    lines: list[tuple[str, npt.NDArray[np.float64]]] = [
        ("hardware forwarded", c[:, Final.HW_FORWARDED]),
        ("software forwarded", c[:, Final.SW_FORWARDED]),
        ("lost (named drop)", c[:, Final.NAMED_DROP]),
        ("dropped by policy", c[:, Final.POLICY_DROP]),
    ]
    ax.stackplot(t, *[v for _, v in lines], labels=[n for n, _ in lines],
                 colors=["#4c72b0", "#dd8452", "#c44e52", "#cccccc"])  # fmt: skip
    ax.set_ylabel("packets (k/s)")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Fornax under injected faults (examples/chaos-mixed.yaml)")
    rows: dict[str, int] = {}
    for r in report["faults"]:
        y = rows.setdefault(r["fault"], len(rows))
        det = r.get("detect_s")
        span = max(r.get("duration_s") or 0.0, det or 0.0, 0.004)
        gantt.broken_barh([(r["at_s"], span)], (y - 0.35, 0.7),
                          color="#c44e52" if det is None else "#55a868")  # fmt: skip
    opened: dict[tuple[str, int], float] = {}
    kinds: dict[str, int] = {}
    end = float(t[-1]) if len(t) else 0.0

    def bar(scope: str, t0: float, t1: float) -> None:
        y = kinds.setdefault(scope, len(rows) + len(kinds))
        gantt.broken_barh([(t0, max(t1 - t0, 0.004))], (y - 0.35, 0.7), color="#dd8452")

    for e in sorted(report["timeline"], key=lambda x: x.get("failover_ns", x.get("failback_ns"))):
        key = (str(e["scope"]), int(e["id"]))
        if "failover_ns" in e:
            opened.setdefault(key, e["failover_ns"] / 1e9)
        elif key in opened:
            bar(key[0], opened.pop(key), e["failback_ns"] / 1e9)
    for (scope, _), t0 in opened.items():
        bar(scope, t0, end)
    ticks = {**rows, **{f"{k} in software": y for k, y in kinds.items()}}
    gantt.set_yticks(list(ticks.values()), list(ticks.keys()), fontsize=8)
    gantt.set_xlabel("simulated time (s); green: fault detected, orange: scope in software")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    outputs.save_figure(fig, path, dpi=110)
    plt.close(fig)


def chaos_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Run examples/chaos-mixed.yaml; write out/chaos.json, out/chaos_trace.json and
    out/chaos_timeline.png; return the per-class summary."""
    path = EXAMPLES / "chaos-mixed.yaml"
    if not path.is_file():
        raise ConfigError(f"chaos demo: {path} not found",
                          fix="run the demo from a starfabric checkout")  # fmt: skip
    spec, base = load_chaos(path)
    spec = spec.model_copy(update={"seed": seed + 2})
    series = _Series()
    report = run_chaos(spec, base, on_batch=series.add)
    rows = summary_rows(report)
    table = Table(title="Fornax chaos (examples/chaos-mixed.yaml)", title_justify="left")
    for col in ("fault", "count", "detected", "in bound", "lost", "misforwarded"):
        table.add_column(col, justify="left" if col == "fault" else "right")
    for r in rows:
        table.add_row(r["fault"], str(r["count"]), str(r["detected"]), str(r["within_bound"]),
                      str(r["lost"]), str(r["misforwarded"]))  # fmt: skip
    console.print(table)
    out.mkdir(parents=True, exist_ok=True)
    outputs.write_json(out / "chaos.json", report, sort_keys=True, default=int)
    chrome_trace(report).write(out / "chaos_trace.json")
    _plot(series, report, out / "chaos_timeline.png")
    p, o = report["packets"], report["oracle"]
    return {
        "packets": p["offered"],
        "hw_forwarded": p["hw_forwarded"],
        "sw_forwarded": p["sw_forwarded"],
        "lost": p["named_drop"],
        "misforwarded_vs_oracle": o["misforwarded"],
        "faults": {r["fault"]: f"{r['detected']}/{r['count']} detected" for r in rows},
    }


__all__ = ["chaos_demo"]
