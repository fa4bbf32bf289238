"""Agreement of every Fornax datapath with the Linux kernel's nf_conntrack on a recording.

Replays tests/data/conntrack/kernel_recording.json (scripts/record_conntrack.py) through the
Manager on FastEngine and on ReferenceEngine and through the software path alone, and prints
per datapath the agreement on state, timer (re-arm decision and armed timeout), re-arm and
verdict, in percent of packets, and the share of conversations agreeing on every packet;
last, the lowest packet agreement of all (target 100).

    python benchmarks/fornax_conformance.py [--recording PATH] [--json PATH] [--datapath D]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console

from starfabric.fornax.conformance import DATAPATHS, METRICS, load_recording, replay

RECORDING = Path(__file__).parents[1] / "tests" / "data" / "conntrack" / "kernel_recording.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recording", type=Path, default=RECORDING)
    ap.add_argument("--json", type=Path, default=None, help="write figures here")
    ap.add_argument("--datapath", choices=DATAPATHS, action="append", help="default: all")
    args = ap.parse_args()
    console = Console()
    doc = load_recording(args.recording)
    out: dict[str, object] = {"kernel": doc["kernel"], "conversations": len(doc["conversations"])}
    lowest = 100.0
    for dp in args.datapath or DATAPATHS:
        t0 = time.perf_counter()
        r = replay(doc, dp)
        pct = r.percent()
        out[dp] = {"packets": r.packets,
                   "seconds": round(time.perf_counter() - t0, 1), **pct,
                   "first_mismatches": r.mismatches[:5]}  # fmt: skip
        lowest = min(lowest, *(pct[m] for m in METRICS))
        console.print(f"{dp:>10}: {r.packets} packets, " + ", ".join(
            f"{k} {v}%" for k, v in pct.items()))  # fmt: skip
    out["lowest_agreement_pct"] = lowest
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    console.print(f"{'lowest_agreement_pct':>20}: {lowest}")


if __name__ == "__main__":
    main()
