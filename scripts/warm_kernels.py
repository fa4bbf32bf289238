"""Compile Fornax's large numba kernels once into NUMBA_CACHE_DIR, so that parallel test workers
(or a later CLI run) load them instead of each compiling them.

A cold cache costs about a minute per large kernel (the packet pipeline `k_process`, the
tracker `ct_packet` the reference engine calls, the software path, the VPC policy evaluator),
and pytest-xdist workers that reach them at the same time each pay it. `make pytest` starts this
in the background before the tests: the suite's first files do not need these kernels, so the
workers find them cached. Replays one conversation of each kind from the committed kernel
recording through the software path, the manager on the fast engine and on the reference
engine (fornax.conformance.replay): every entry point those runs call is compiled, with the
argument types the tests and the CLI use.

    python scripts/warm_kernels.py          # prints the seconds it took
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from starfabric.fornax.conformance import DATAPATHS, load_recording, replay

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
RECORDING = DATA / "conntrack" / "kernel_recording.json"


def warm_set(doc: dict[str, Any]) -> set[str]:
    """Conversations to replay: the first of each protocol, and the first that carries an ICMP
    error (its RELATED lookup runs the software path's quoted-tuple kernel)."""
    names: dict[str, str] = {}
    for conv in doc["conversations"]:
        kind = "error" if any(p.get("error") for p in conv["packets"]) else str(conv["proto"])
        names.setdefault(kind, conv["name"])
    return set(names.values())


def main() -> None:
    t0 = time.perf_counter()
    doc = load_recording(RECORDING)
    names = warm_set(doc)
    for datapath in DATAPATHS:
        replay(doc, datapath, names)
    print(f"warm_kernels: {len(names)} conversations x {len(DATAPATHS)} datapaths compiled or "
          f"loaded in {time.perf_counter() - t0:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
