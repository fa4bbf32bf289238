"""E6 — x10 CPS surge: on the full background table, new connections arrive at the base CPS,
then at 10x for `surge_s`, then at the base CPS again. Measured per phase: drops, the share
of packets forwarded in software, and the offload latency of connections (first packet to
first packet forwarded by hardware; p50/p99)."""

from __future__ import annotations

from typing import Any

import numpy as np

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Context, Run
from starfabric.fornax.experiments.output import Result, bar_panels, by_controller
from starfabric.fornax.manager import Final

COLUMNS = [("controller", "controller"), ("phase", "phase"), ("cps", "CPS"),
           ("offered", "offered"), ("drops", "drops"), ("sw_share", "SW-forwarded share"),
           ("offload_p50_ms", "offload p50 ms"), ("offload_p99_ms", "offload p99 ms"),
           ("never_offloaded", "never offloaded")]  # fmt: skip
#: Surge multiplier (the paper's experiment: x10).
SURGE = 10.0


def phase(r: Run, spec: Any, cps: float, duration_s: float, seed: int) -> dict[str, Any]:
    conns: list[np.ndarray] = []
    times: list[np.ndarray] = []
    finals: list[np.ndarray] = []
    for wb in traffic.new_connections(spec, cps, r.now_ns / 1e9, duration_s, seed=seed):
        r.advance(wb.t_start_ns)
        if len(wb.packets):
            fate = r.cp.process(wb.packets)
            conns.append(wb.conn)
            times.append(wb.packets.time_ns)
            finals.append(fate.final)
        r.advance(wb.t_end_ns)
    conn = np.concatenate(conns) if conns else np.zeros(0, np.int64)
    t = np.concatenate(times) if times else np.zeros(0, np.int64)
    f = np.concatenate(finals) if finals else np.zeros(0, np.uint8)
    fwd = (f == Final.HW_FORWARDED) | (f == Final.SW_FORWARDED)
    uc, inv = np.unique(conn, return_inverse=True)
    first = np.full(len(uc), np.iinfo(np.int64).max)
    np.minimum.at(first, inv, t)
    hw = f == Final.HW_FORWARDED
    first_hw = np.full(len(uc), np.iinfo(np.int64).max)
    np.minimum.at(first_hw, inv[hw], t[hw])
    got = first_hw < np.iinfo(np.int64).max
    npk = np.bincount(inv, minlength=len(uc))
    lat = (first_hw[got] - first[got]) / 1e6
    return {
        "cps": cps, "offered": len(f), "drops": int((~fwd).sum()),
        "sw_share": float((f == Final.SW_FORWARDED).mean()) if len(f) else 0.0,
        "offload_p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
        "offload_p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
        "never_offloaded": int(((~got) & (npk > 1)).sum()),
    }  # fmt: skip


def run(ctx: Context) -> Result:
    sc = ctx.scale
    spec = traffic.vpc_spec(sc.table)
    base, hi = sc.surge_base_cps, sc.surge_base_cps * SURGE
    pre = min(1.0, sc.surge_s)
    res = Result("E6", f"x{SURGE:g} CPS surge for {sc.surge_s:g} s on {sc.table:,} sessions",
                 COLUMNS)  # fmt: skip
    for c in ctx.runnable(sc.table, res.notes, "fornax", "baseline"):
        with ctx.task(f"E6 {c.name}", sc.table + 3) as adv, ctx.controller(c, sc.table, spec) as r:
            r.fill(sc.table, on_batch=adv)
            for k, (name, cps, dur) in enumerate(
                (("before", base, pre), ("surge", hi, sc.surge_s), ("after", base, pre))
            ):
                res.rows.append({"controller": c.name, "phase": name,
                                 **phase(r, spec, cps, dur, seed=20 + k)})  # fmt: skip
                adv(1)
    res.summary = {"table_sessions": sc.table, "base_cps": base, "surge_cps": hi}
    for name, rows in by_controller(res.rows).items():
        res.summary[name] = {"drops": sum(r["drops"] for r in rows),
                               "surge_drops": rows[1]["drops"],
                               "surge_offload_p99_ms": rows[1]["offload_p99_ms"]}  # fmt: skip
    return res


def plot(res: Result) -> Any:
    """Per phase, each contender's software-forwarded share, offload p99 and drops."""
    return bar_panels(
        res,
        [("sw_share", "share of packets forwarded in software"),
         ("offload_p99_ms", "offload latency p99 (ms)"), ("drops", "dropped packets")],
        group="phase",
    )  # fmt: skip
