"""E1 — software storage vs table size: each contender sets up N sessions and reports the
bytes of per-session state its software keeps (Fornax: SNAT bitmaps only; OVS-like: a
udpif_key mirror per datapath flow)."""

from __future__ import annotations

from typing import Any

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Context, common_ratio, ratio
from starfabric.fornax.experiments.output import Result, line_plot

COLUMNS = [("sessions", "sessions"), ("controller", "controller"), ("live", "live"),
           ("software_bytes", "software bytes"), ("bytes_per_session", "B/session"),
           ("fornax_ratio", "Fornax / this")]  # fmt: skip


def run(ctx: Context) -> Result:
    res = Result("E1", "software storage vs table size", COLUMNS)
    for n in ctx.scale.sizes:
        spec = traffic.vpc_spec(n)
        fornax_bytes = 0.0
        for c in ctx.runnable(n, res.notes, "fornax", "baseline"):
            with ctx.task(f"E1 {c.name} {n:,}", n) as adv, ctx.controller(c, n, spec) as r:
                r.fill(n, on_batch=adv)
                sw, live = int(r.cp.software_bytes), int(r.cp.sessions())
            if c.role == "fornax":
                fornax_bytes = sw
            res.rows.append({"sessions": n, "controller": c.name, "live": live,
                             "software_bytes": sw, "bytes_per_session": sw / max(live, 1),
                             "fornax_ratio": ratio(fornax_bytes, sw)})  # fmt: skip
    res.summary = common_ratio(res.rows, "software_bytes", ctx)
    return res


def plot(res: Result) -> Any:
    return line_plot(res, "sessions", "software_bytes", "live sessions", "software bytes")
