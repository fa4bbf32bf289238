"""Single-layer baseline: application-layer straggler detection only (what a job log shows).

It names the slowest ranks' GPUs as throttled and the rank NCCL timeouts point at as failed;
it cannot see links, NICs, optics or configuration. The benchmark compares the four-layer
localizer's F1 against it on the same scenarios.
"""

from __future__ import annotations

import time

import numpy as np

from starfabric.astral.monitor.faults import GPU_THROTTLE, GPU_XID
from starfabric.astral.monitor.localize import (
    ROBUST_Z,
    STRAGGLER_RATIO,
    WINDOW_ITERS,
    Cause,
    Diagnosis,
)
from starfabric.astral.monitor.store import TelemetryStore


def diagnose_app_only(store: TelemetryStore) -> Diagnosis:
    """Stragglers by iteration/compute time and NCCL-timeout peers, nothing below."""
    t0 = time.perf_counter()
    causes: list[Cause] = []
    err = store.query(
        "SELECT peer, count(*) AS k FROM app_nccl_error GROUP BY peer ORDER BY k DESC"
    )
    if err["peer"].size:
        g = int(err["peer"][0])
        causes.append(Cause(f"gpu:{g}", f"gpu{g}", GPU_XID, 0.9, ["application: NCCL timeouts"]))
    last = store.query("SELECT max(iter) AS m FROM app_iteration")["m"]
    if last.size and not np.isnan(float(last[0])):
        w0 = max(int(last[0]) - WINDOW_ITERS + 1, 0)
        a = store.query(
            "SELECT rank, median(compute_ms) AS c FROM app_iteration WHERE iter >= ? GROUP BY rank",
            [w0],
        )
        c = a["c"].astype(np.float64)
        med = float(np.median(c))
        mad = max(float(np.median(np.abs(c - med))) * 1.4826, 1e-9)
        for r in a["rank"][(c > STRAGGLER_RATIO * med) & ((c - med) / mad > ROBUST_Z)].tolist():
            causes.append(
                Cause(f"gpu:{r}", f"gpu{r}", GPU_THROTTLE, 0.8, ["application: straggler"])
            )
    return Diagnosis([], causes, {}, [], time.perf_counter() - t0)
