"""E1 and E2 of an experiments JSON with the real Open vSwitch points of a
benchmarks/ovs_real.py JSON on them (docs/fornax-experiments.md, "Real Open vSwitch").

E1: software bytes = real ovs-vswitchd RSS growth (over its zero-flow RSS) per connection x
connections held. Levels that did not hold (benchmarks/ovs_real.py `held`) are hollow markers.
E2: management CPU in the E2 window = real revalidator + handler + ct_clean thread CPU per
second x the window (measure_s). The main thread (it forwards the netdev ports' packets and runs
their upcalls) is left out, as the experiments leave the datapath out; the real runs hold their
connections with keep-alives and open none during the window, so this is the part of E2's CPU
that grows with the table.

    python scripts/plot_ovs_real.py EXPERIMENTS.json OVS_REAL.json --out docs/img/experiments
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from starfabric.fornax.experiments.output import by_controller

MARKERS = {"exact": "s", "megaflow": "^"}


def real_points(
    ovs: dict[str, Any], mode: str, measure_s: float, held: bool = True
) -> dict[str, list[tuple[float, float]]]:
    """E1 and E2 points of the levels that held (`held`), or of those that did not."""
    rows = [r for r in ovs["modes"].get(mode, {}).get("rows", []) if r["held"] == held]
    e1, e2 = [], []
    for r in rows:
        lv = r["real"]
        n = lv["connections_held"]
        e1.append((n, lv["bytes_per_connection"] * n))
        cpu = sum(lv["cpu_per_s"].get(k, 0.0) for k in ("revalidator", "handler", "ct_clean"))
        e2.append((n, cpu * measure_s))
    return {"E1": e1, "E2": e2}


def plot(exp: dict[str, Any], ovs: dict[str, Any], name: str, ykey: str, ylabel: str) -> Any:
    e = exp["experiments"][name]
    measure_s = float(exp["experiments"]["E2"]["summary"].get("measure_s", 2.0))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for ctl, rows in by_controller(e["rows"]).items():
        pts = [(row["sessions"], row[ykey]) for row in rows if row.get(ykey) is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, [max(v, 1e-12) for v in ys], marker="o", label=ctl)
    version = next(iter(ovs["modes"].values()))["version"].split()[-1]
    for mode in ("exact", "megaflow"):
        color = "black" if mode == "exact" else "grey"
        pts = real_points(ovs, mode, measure_s)[name]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, [max(v, 1e-12) for v in ys], marker=MARKERS[mode], linestyle="--",
                    color=color, label=f"real OVS {version}, {mode} flows")  # fmt: skip
        lost = real_points(ovs, mode, measure_s, held=False)[name]
        if lost:
            xs, ys = zip(*lost, strict=True)
            ax.plot(xs, [max(v, 1e-12) for v in ys], marker=MARKERS[mode], linestyle="none",
                    markerfacecolor="none", color=color,
                    label=f"real OVS {version}, {mode} flows, did not hold")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("live sessions (connections)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{name}: {e['title']} (+ real OVS)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("experiments", type=Path)
    ap.add_argument("ovs_real", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    exp = json.loads(args.experiments.read_text())
    ovs = json.loads(args.ovs_real.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    for name, ykey, ylabel in (("E1", "software_bytes", "software bytes"),
                               ("E2", "cpu_s", "management CPU s (window)")):  # fmt: skip
        fig = plot(exp, ovs, name, ykey, ylabel)
        path = args.out / f"{name}-real-ovs.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
