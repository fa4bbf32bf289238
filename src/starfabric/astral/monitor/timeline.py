"""Chrome-trace timeline of a diagnosis: the suspect ranks' iterations next to a few healthy
ones (compute, TP, DP phases), and the suspect QPs' millisecond throughput as counters."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from starfabric.astral.monitor.localize import Diagnosis
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.report import ChromeTrace

REFERENCE_RANKS = 2
"""Healthy ranks drawn next to the suspects for comparison."""


def _suspect_ranks(d: Diagnosis, gpus_per_host: int) -> list[int]:
    ranks: list[int] = []
    for c in d.reported():
        kind, ident = c.component.split(":")
        if kind in ("gpu", "nic"):
            ranks.append(int(ident))
        elif kind == "host":
            ranks.append(int(ident) * gpus_per_host)
        for e in c.evidence:
            ranks += [int(x) for x in re.findall(r"rank (\d+)", e)]
    return list(dict.fromkeys(ranks))[:8]


def write_timeline(store: TelemetryStore, d: Diagnosis, path: str | Path) -> Path:
    """Write the suspects' and reference ranks' phases (and QP throughput) as Chrome-trace JSON."""
    job = store.meta("job")
    suspects = _suspect_ranks(d, int(job["gpus_per_host"]))
    n = int(job["gpus"])
    refs = [r for r in (0, n // 2, n - 1) if r not in suspects][:REFERENCE_RANKS]
    tr = ChromeTrace()
    for group, ranks in (("suspect", suspects), ("reference", refs)):
        if not ranks:
            continue
        marks = ",".join(str(int(r)) for r in ranks)
        a = store.query(
            f"SELECT iter, rank, start_ms, compute_ms, tp_ms, dp_ms FROM app_iteration WHERE rank IN ({marks}) "
            "ORDER BY rank, iter"
        )
        for it, r, s, c, t, p in zip(
            a["iter"],
            a["rank"],
            a["start_ms"],
            a["compute_ms"],
            a["tp_ms"],
            a["dp_ms"],
            strict=True,
        ):
            proc, thread = f"{group} ranks", f"rank {int(r)}"
            t0 = float(s) / 1e3
            for name, dur in (("compute", c), ("tp collectives", t), ("dp all-reduce", p)):
                if np.isfinite(dur):
                    tr.slice(
                        proc, thread, name, t0, float(dur) / 1e3, cat=group, args={"iter": int(it)}
                    )
                    t0 += float(dur) / 1e3
        q = store.query(
            f"SELECT m.qp, m.t_ms, m.gbps, q.rank FROM transport_qp_ms m JOIN (SELECT DISTINCT qp, rank FROM "
            f"transport_qp) q USING (qp) WHERE q.rank IN ({marks}) ORDER BY m.qp, m.t_ms"
        )
        for qp, t_ms, g, r in zip(q["qp"], q["t_ms"], q["gbps"], q["rank"], strict=True):
            tr.counter(
                f"{group} QPs",
                f"rank {int(r)} qp {int(qp)} Gb/s",
                float(t_ms) / 1e3,
                {"gbps": float(g)},
            )
    return tr.write(path)
