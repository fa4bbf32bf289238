"""Findings from ingested real telemetry: stragglers, port errors, Xids, weak optics.

The synthesized-job localizer needs the topology; ingested files from a real host usually come
without it, so this reads each table on its own and says what a person should look at.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from starfabric.astral.monitor.localize import (
    RX_POWER_LOW_DBM,
    TX_POWER_LOW_DBM,
    Cause,
    Diagnosis,
)
from starfabric.astral.monitor.store import TelemetryStore

MINIBATCH_SPIKE = 1.3
"""Assumption: a worker whose peer-normalized batch time, over its own baseline, has a 5-step
rolling median above 1.3 is straggling then."""
ROLL_STEPS = 5
"""Assumption: rolling window (steps) for straggler detection in per-worker time series."""
KINETO_WAIT_RATIO = 1.2
"""Assumption: a rank whose NCCL kernels take 1.2x less than its peers' arrived last (straggler)."""
IB_ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_remote_physical_errors",
)
"""IB PMA error counters (IBTA PortCounters) that mean a sick link when non-zero."""
NODE_DEVIATION_MAX = 0.5
"""Assumption: a node benchmark metric 50% off its baseline (either way) is defective."""
GPU_HOT_C = 85.0
"""Assumption: a GPU reading 85 C or more in node-monitor samples is running hot."""
CONFIDENCE = {"high": 0.9, "medium": 0.7, "low": 0.4}
"""Confidence a finding's severity maps to when it is reported as a cause by `diagnose_ingested`."""


@dataclass(frozen=True)
class Finding:
    """One thing found in ingested data: layer, component, what, and how strongly."""

    layer: str
    component: str
    what: str
    severity: str


def minibatch_stragglers(st: TelemetryStore) -> list[Finding]:
    """Workers that become stragglers in a per-worker iteration time series (app_iteration)."""
    a = st.query("SELECT iter, rank, iter_ms FROM app_iteration ORDER BY rank, iter")
    if a["rank"].size == 0:
        return []
    ranks = np.unique(a["rank"])
    iters = np.unique(a["iter"])
    m = np.full((ranks.size, iters.size), np.nan)
    m[np.searchsorted(ranks, a["rank"]), np.searchsorted(iters, a["iter"])] = a["iter_ms"]
    if iters.size < ROLL_STEPS or ranks.size < 3:
        return []
    norm = m / np.nanmedian(m, axis=0, keepdims=True)
    spike = norm / np.nanmedian(norm, axis=1, keepdims=True)
    roll = np.nanmedian(sliding_window_view(spike, ROLL_STEPS, axis=1), axis=2)
    out = []
    for i, r in enumerate(ranks.tolist()):
        hot = np.flatnonzero(roll[i] > MINIBATCH_SPIKE)
        if hot.size:
            lo, hi = int(iters[hot[0]]), int(iters[min(hot[-1] + ROLL_STEPS - 1, iters.size - 1)])
            out.append(
                Finding(
                    "application",
                    f"rank:{r}",
                    f"straggler in steps {lo}-{hi}: batch time up to {roll[i].max():.2f}x its own "
                    "baseline relative to peers",
                    "high" if roll[i].max() > 1.6 else "medium",
                )
            )
    return out


def kineto_stragglers(st: TelemetryStore) -> list[Finding]:
    """From per-rank NCCL kernel times: the rank that waits least arrived last (straggler)."""
    k = st.query(
        "SELECT rank, count(*) AS n, sum(dur_us) AS nccl_us FROM app_collective GROUP BY rank ORDER BY rank"
    )
    out = []
    if k["rank"].size >= 2:
        med = float(np.median(k["nccl_us"]))
        i = int(np.argmin(k["nccl_us"]))
        if k["nccl_us"][i] * KINETO_WAIT_RATIO < med:
            out.append(
                Finding(
                    "application",
                    f"rank:{int(k['rank'][i])}",
                    f"NCCL kernels total {k['nccl_us'][i] / 1e3:.2f} ms vs median {med / 1e3:.2f} ms: "
                    "its peers wait for it (straggler)",
                    "medium",
                )
            )
    return out


def ib_port_findings(st: TelemetryStore) -> list[Finding]:
    """Ports not ACTIVE/LinkUp and non-zero IB error counters."""
    out = []
    p = st.query("SELECT device, port, state, phys_state, rate_gbps FROM phys_ib_port")
    for d, n, s, ps in zip(p["device"], p["port"], p["state"], p["phys_state"], strict=True):
        if "ACTIVE" not in str(s) or "LinkUp" not in str(ps):
            out.append(
                Finding("physical", f"{d}/{n}", f"port state {s!r}, phys_state {ps!r}", "high")
            )
    names = ", ".join(f"'{c}'" for c in IB_ERROR_COUNTERS)
    c = st.query(
        f"SELECT device, port, counter, value FROM phys_ib_counter WHERE counter IN ({names}) AND value > 0 "
        "ORDER BY device, port, counter"
    )
    for d, n, ctr, v in zip(c["device"], c["port"], c["counter"], c["value"], strict=True):
        out.append(
            Finding(
                "physical",
                f"{d}/{n}",
                f"{ctr} = {int(v)}",
                "high" if ctr == "link_downed" else "medium",
            )
        )
    return out


def xid_findings(st: TelemetryStore) -> list[Finding]:
    """Xid events grouped by GPU PCI address and code."""
    x = st.query(
        "SELECT pci, xid, count(*) AS n, min(message) AS msg FROM phys_xid GROUP BY pci, xid ORDER BY pci, xid"
    )
    critical = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}
    return [
        Finding(
            "physical",
            f"pci:{p}",
            f"Xid {x_} x{n}: {m[:80]}",
            "high" if x_ in critical else "medium",
        )
        for p, x_, n, m in zip(x["pci"], x["xid"], x["n"], x["msg"], strict=True)
    ]


def ddm_findings(st: TelemetryStore) -> list[Finding]:
    """Optical modules with low Tx or Rx power."""
    d = st.query(
        "SELECT device, tx_power_dbm AS tx, rx_power_dbm AS rx, temperature_c AS t FROM phys_ddm"
    )
    out = []
    for dev, tx, rx, t in zip(d["device"], d["tx"], d["rx"], d["t"], strict=True):
        if rx < RX_POWER_LOW_DBM or tx < TX_POWER_LOW_DBM:
            out.append(
                Finding(
                    "physical",
                    str(dev),
                    f"optical Tx {tx:.1f} dBm, Rx {rx:.1f} dBm, {t:.0f} C",
                    "high",
                )
            )
    return out


def node_check_findings(st: TelemetryStore) -> list[Finding]:
    """Defective nodes from node benchmark results (SuperBench data diagnosis).

    A metric family whose benchmark failed (non-zero return code, every value missing) fails
    the node; a device whose metric is NODE_DEVIATION_MAX off its baseline is defective. The
    source's own rule verdicts are quoted next to what these checks find.
    """
    q = st.query(
        "SELECT node, category, metric, device, baseline, value, deviation, rule FROM phys_node_check "
        "ORDER BY node, metric, device"
    )
    out: list[Finding] = []
    nodes = sorted(set(q["node"].tolist()))
    for node in nodes:
        sel = q["node"] == node
        metric, dev, val = q["metric"][sel], q["device"][sel], q["value"][sel]
        d, rule, cat = q["deviation"][sel], q["rule"][sel], q["category"][sel]
        fam = np.array([m.split("/")[0] for m in metric.tolist()])
        for f in sorted(set(fam.tolist())):
            rc = (fam == f) & np.char.endswith(metric.astype(str), "return_code")
            missing = (fam == f) & (rule == "missing")
            if (rc & (np.nan_to_num(val) > 0)).any() or missing.any():
                n_miss = int(missing.sum())
                cats = sorted({str(c) for c in cat[fam == f].tolist() if c})
                out.append(
                    Finding(
                        "physical",
                        f"node:{node}",
                        f"{f} benchmark failed: return code {int(np.nanmax(val[rc])) if rc.any() else '?'}, "
                        f"{n_miss} metrics missing"
                        + (f" (source: {', '.join(cats)})" if cats else ""),
                        "high",
                    )
                )
                continue
            bad = (fam == f) & (np.abs(np.nan_to_num(d)) > NODE_DEVIATION_MAX)
            for i in np.flatnonzero(bad).tolist():
                g = int(dev[i])
                comp = f"node:{node}/gpu{g}" if g >= 0 else f"node:{node}"
                src = (
                    f"; source: {cat[i]} ({metric[i]} {val[i]:g} vs baseline {q['baseline'][sel][i]:g}, "
                    f"rule {rule[i]})"
                    if cat[i]
                    else "; the source's rules did not flag it"
                )
                out.append(
                    Finding(
                        "physical",
                        comp,
                        f"{metric[i]} {d[i] * 100:+.0f}% off its baseline{src}",
                        "high" if abs(d[i]) > 2 * NODE_DEVIATION_MAX else "medium",
                    )
                )
    return out


def node_sample_findings(st: TelemetryStore) -> list[Finding]:
    """Node-monitor samples: uncorrectable ECC, growing correctable ECC, hot GPUs."""
    q = st.query(
        "SELECT metric, device, min(value) AS lo, max(value) AS hi FROM phys_node_sample "
        "WHERE metric IN ('gpu_uncorrected_ecc', 'gpu_corrected_ecc', 'gpu_temperature') "
        "GROUP BY metric, device ORDER BY metric, device"
    )
    out = []
    for m, d, lo, hi in zip(q["metric"], q["device"], q["lo"], q["hi"], strict=True):
        if m == "gpu_uncorrected_ecc" and hi > 0:
            out.append(
                Finding("physical", f"gpu{d}", f"{int(hi)} uncorrectable ECC errors", "high")
            )
        elif m == "gpu_corrected_ecc" and hi > lo:
            out.append(
                Finding(
                    "physical",
                    f"gpu{d}",
                    f"correctable ECC errors rose {int(lo)} -> {int(hi)} over the samples",
                    "low",
                )
            )
        elif m == "gpu_temperature" and hi >= GPU_HOT_C:
            out.append(Finding("physical", f"gpu{d}", f"temperature up to {hi:.0f} C", "medium"))
    return out


def ingested_findings(st: TelemetryStore) -> list[Finding]:
    """All findings over whatever real telemetry the store holds."""
    return [
        *minibatch_stragglers(st),
        *kineto_stragglers(st),
        *ib_port_findings(st),
        *xid_findings(st),
        *ddm_findings(st),
        *node_check_findings(st),
        *node_sample_findings(st),
    ]


def diagnose_ingested(st: TelemetryStore) -> Diagnosis:
    """`diagnose` for real telemetry without a cluster description: each finding is a cause
    (component as the source names it), confidence from its severity, best first."""
    t0 = time.perf_counter()
    found = ingested_findings(st)
    causes = [
        Cause(
            f.component,
            f.component,
            "straggler" if "straggler" in f.what else "anomaly",
            CONFIDENCE[f.severity],
            [f"{f.layer}: {f.what}"],
        )
        for f in found
    ]
    causes.sort(key=lambda c: -c.confidence)
    anomalies = [f"{f.layer}: {f.component} {f.what}" for f in found]
    return Diagnosis(anomalies, causes, {}, [], time.perf_counter() - t0, {"ingested": True})
