"""E3 — highest zero-drop CPS on a full table: each contender holds the scale's background
table, then new connections are offered at rising CPS levels (`probe_s` simulated seconds
each, tails included); the highest level at which every offered packet is forwarded is the
contender's zero-drop CPS. The climb stops at the first level with a drop."""

from __future__ import annotations

from typing import Any

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Context, dropped, ratio
from starfabric.fornax.experiments.output import Result

COLUMNS = [("controller", "controller"), ("cps", "CPS"), ("offered", "offered"),
           ("drops", "drops"), ("zero_drop", "zero drop")]  # fmt: skip


def run(ctx: Context) -> Result:
    sc = ctx.scale
    spec = traffic.vpc_spec(sc.table)
    res = Result("E3", f"highest zero-drop CPS on a {sc.table:,}-session table", COLUMNS)
    best: dict[str, float] = {}
    for c in ctx.runnable(sc.table, res.notes, "fornax", "baseline"):
        with (
            ctx.task(f"E3 {c.name}", sc.table + len(sc.e3_cps)) as adv,
            ctx.controller(c, sc.table, spec) as r,
        ):
            r.fill(sc.table, on_batch=adv)
            best[c.name] = 0.0
            for k, cps in enumerate(sc.e3_cps):
                off0, d0 = r.cp.ledger.offered, dropped(r.cp.ledger)
                r.replay(traffic.new_connections(spec, cps, r.now_ns / 1e9, sc.probe_s,
                                                 seed=10 + k))  # fmt: skip
                offered = r.cp.ledger.offered - off0
                drops = dropped(r.cp.ledger) - d0
                res.rows.append({"controller": c.name, "cps": cps, "offered": offered,
                                 "drops": drops, "zero_drop": drops == 0})  # fmt: skip
                adv(1)
                if drops:
                    break
                best[c.name] = cps
    fx = next((c.name for c in ctx.by_role("fornax")), "")
    top = sc.e3_cps[-1]
    res.summary = {
        "table_sessions": sc.table,
        "zero_drop_cps": best,
        "grid_top_cps": top,
        "ratio_vs": {k: ratio(best.get(fx, 0.0), v) for k, v in best.items() if k != fx},
    }
    if best.get(fx) == top:
        res.notes.append(f"{fx} reached the top of the CPS grid ({top:,.0f}): its ratio is a "
                         "lower bound")  # fmt: skip
    return res


def plot(res: Result) -> Any:
    import matplotlib.pyplot as plt

    from starfabric.fornax.experiments.output import by_controller, style

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (name, rows) in enumerate(by_controller(res.rows).items()):
        ax.plot(
            [r["cps"] for r in rows],
            [max(r["drops"], 0.5) for r in rows],
            **style(i),
            label=f"{name} (zero-drop {res.summary['zero_drop_cps'].get(name, 0):,.0f})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered CPS")
    ax.set_ylabel("dropped packets (0 drawn at 0.5)")
    ax.set_title(f"{res.name}: {res.title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig
