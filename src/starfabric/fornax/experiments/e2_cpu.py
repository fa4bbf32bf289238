"""E2 — management CPU vs table size at a fixed CPS and revalidation period: each contender
holds N background sessions while new connections arrive at the scale's CPS for
`measure_s` simulated seconds; management CPU (thread CPU, engine emulation and software
forwarding excluded) is charged over that window only."""

from __future__ import annotations

from typing import Any

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Context, common_ratio, cpu_now, dropped, ratio
from starfabric.fornax.experiments.output import Result, line_plot

COLUMNS = [("sessions", "sessions"), ("controller", "controller"), ("cpu_s", "mgmt CPU s"),
           ("cpu_per_sim_s", "CPU s / sim s"), ("drops", "drops"),
           ("fornax_ratio", "Fornax / this")]  # fmt: skip


def run(ctx: Context) -> Result:
    sc = ctx.scale
    res = Result("E2", f"management CPU vs table size at {sc.cps:,.0f} CPS", COLUMNS)
    for n in sc.sizes:
        spec = traffic.vpc_spec(n)
        fornax_cpu = 0.0
        for c in ctx.runnable(n, res.notes, "fornax", "baseline"):
            with ctx.task(f"E2 {c.name} {n:,}", n) as adv, ctx.controller(c, n, spec) as r:
                r.fill(n, on_batch=adv)
                cpu0, drop0 = cpu_now(r), dropped(r.cp.ledger)
                r.replay(traffic.new_connections(spec, sc.cps, r.now_ns / 1e9, sc.measure_s))
                cpu = cpu_now(r) - cpu0
                drops = dropped(r.cp.ledger) - drop0
            if c.role == "fornax":
                fornax_cpu = cpu
            res.rows.append({"sessions": n, "controller": c.name, "cpu_s": cpu,
                             "cpu_per_sim_s": cpu / sc.measure_s, "drops": drops,
                             "fornax_ratio": ratio(fornax_cpu, cpu)})  # fmt: skip
    res.summary = {"cps": sc.cps, "measure_s": sc.measure_s,
                   **common_ratio(res.rows, "cpu_s", ctx)}  # fmt: skip
    return res


def plot(res: Result) -> Any:
    return line_plot(res, "sessions", "cpu_s", "live sessions", "management CPU s (window)")
