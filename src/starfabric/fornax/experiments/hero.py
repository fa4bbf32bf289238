"""The SONiC-DASH "hero test" shape as a named workload: 6-packet connections (half TCP with
handshake and FIN exchange, half UDP), every timeout 5 s, at the CPS that keeps
`hero_sessions` live (CPS = sessions / 5 s; DASH: 15M TCP + 15M UDP at 3M CPS, 100 s), with
zero drops required. Scaled by --scale (paper: 16M sessions at ~3.4M CPS for 6 s)."""

from __future__ import annotations

from typing import Any

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.e4_aging import timeouts
from starfabric.fornax.experiments.harness import Context, dropped, forwarded
from starfabric.fornax.experiments.output import Result, bar_panels

#: SONiC-DASH hero test aging (5 s) [fact, reference/fornax.md].
HERO_AGING_S = 5.0
HERO_BATCH_S = traffic.WINDOW_S
COLUMNS = [("controller", "controller"), ("cps", "CPS"), ("offered", "offered"),
           ("drops", "drops"), ("zero_drop", "zero drop"), ("peak_sessions", "peak sessions"),
           ("cpu_s", "mgmt CPU s")]  # fmt: skip


def run(ctx: Context) -> Result:
    sc = ctx.scale
    n = sc.hero_sessions
    cps = n / HERO_AGING_S
    spec = traffic.vpc_spec(n)
    res = Result("hero", f"SONiC-DASH hero shape: {n:,} live sessions at {cps:,.0f} CPS, "
                 f"{HERO_AGING_S:g} s aging", COLUMNS)  # fmt: skip
    for c in ctx.runnable(n, res.notes, "fornax", "baseline"):
        steps = int(sc.hero_s / HERO_BATCH_S) + 1
        with (
            ctx.task(f"hero {c.name}", steps) as adv,
            ctx.controller(c, n, spec, idle_timeout_s=HERO_AGING_S, **timeouts(HERO_AGING_S)) as r,
        ):
            peak = 0
            for wb in traffic.new_connections(
                spec, cps, 0.001, sc.hero_s, six_packets=True, batch_s=HERO_BATCH_S
            ):
                r.advance(wb.t_start_ns)
                if len(wb.packets):
                    r.cp.process(wb.packets)
                r.advance(wb.t_end_ns)
                if wb.t_start_ns % 100_000_000 < int(HERO_BATCH_S * 1e9):
                    peak = max(peak, int(r.cp.sessions()))
                adv(1)
            led = r.cp.ledger
            res.rows.append({"controller": c.name, "cps": cps, "offered": int(led.offered),
                             "drops": dropped(led), "zero_drop": dropped(led) == 0,
                             "forwarded": forwarded(led), "peak_sessions": peak,
                             "cpu_s": float(r.cp.metrics.mgmt_cpu_s)})  # fmt: skip
    res.summary = {"sessions": n, "cps": cps, "simulated_s": sc.hero_s,
                   "zero_drop": {row["controller"]: row["zero_drop"] for row in res.rows}}  # fmt: skip
    return res


def plot(res: Result) -> Any:
    """Each contender's drops (zero required), peak live sessions and management CPU."""
    fig = bar_panels(
        res,
        [("drops", "dropped packets (zero required)"), ("peak_sessions", "peak live sessions"),
         ("cpu_s", "management CPU (s)")],
    )  # fmt: skip
    target = res.summary.get("sessions")
    if isinstance(target, int | float):
        ax = fig.axes[1]
        line = ax.axhline(target, color="black", linestyle="--", linewidth=1.0)
        ax.legend([line], [f"target {target:,.0f}"], loc="lower center", fontsize=8)
    return fig
