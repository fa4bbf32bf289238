"""E9 — ablations: the Fornax preset of the software-centric controller family and each
one-knob ablation (per-direction entries, no events, no versions, full mirror) run the same
trace — a table of N sessions, new connections at the scale's CPS and a policy update
touching half the sessions, 10% of them active afterwards (E5) — and each ablation must cost something: software bytes,
management CPU, control operations, drops or stale forwards."""

from __future__ import annotations

from typing import Any

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.e5_policy_storm import ACTIVE_SHARES, storm
from starfabric.fornax.experiments.harness import Context, cpu_now, dropped
from starfabric.fornax.experiments.output import Result

#: An ablation costs CPU or control operations only beyond this factor of the reference
#: (assumption: CPU measured on a shared machine is noisy).
COST_FACTOR = 1.25
COLUMNS = [("controller", "feature"), ("software_bytes", "software bytes"),
           ("cpu_s", "mgmt CPU s"), ("control_ops", "control ops"), ("drops", "drops"),
           ("stale_forwarded", "stale fwd"), ("costs", "costs")]  # fmt: skip


def _measure(ctx: Context, c: Any, n: int, spec: Any) -> dict[str, Any]:
    sc = ctx.scale
    with ctx.task(f"E9 {c.name}", n) as adv, ctx.controller(c, n, spec) as r:
        r.fill(n, on_batch=adv)
        cpu0, d0 = cpu_now(r), dropped(r.cp.ledger)
        ops0 = int(getattr(r.cp.metrics, "control_ops", 0))
        r.replay(traffic.new_connections(spec, sc.cps, r.now_ns / 1e9, sc.measure_s))
        new_drops = dropped(r.cp.ledger) - d0
        st = storm(
            r, n, 0.5, sc.measure_s, ACTIVE_SHARES[0]
        )  # its drops of refused sessions are policy
        return {"controller": c.name, "software_bytes": int(r.cp.software_bytes),
                "cpu_s": cpu_now(r) - cpu0,
                "control_ops": int(getattr(r.cp.metrics, "control_ops", 0)) - ops0,
                "drops": new_drops + st["collateral_drops"],
                "stale_forwarded": st["stale_forwarded"]}  # fmt: skip


def costs(row: dict[str, Any], ref: dict[str, Any]) -> list[str]:
    """What `row` pays more than `ref` (named metrics)."""
    out = []
    if row["software_bytes"] > ref["software_bytes"]:
        out.append("storage")
    if row["cpu_s"] > COST_FACTOR * ref["cpu_s"]:
        out.append("cpu")
    if row["control_ops"] > COST_FACTOR * ref["control_ops"]:
        out.append("control ops")
    if row["drops"] > ref["drops"]:
        out.append("drops")
    if row["stale_forwarded"] > ref["stale_forwarded"]:
        out.append("stale")
    return out


def run(ctx: Context) -> Result:
    n = ctx.scale.sizes[1]
    spec = traffic.vpc_spec(n)
    res = Result("E9", f"ablations on {n:,} sessions", COLUMNS)
    refs = ctx.by_role("reference")
    if not refs:
        res.notes.append("no reference preset of the baseline family: ablations not run")
        return res
    ref = _measure(ctx, refs[0], n, spec)
    ref["costs"] = "(reference)"
    res.rows.append(ref)
    for c in ctx.runnable(n, res.notes, "ablation"):
        row = _measure(ctx, c, n, spec)
        row["costs"] = ", ".join(costs(row, ref)) or "nothing"
        res.rows.append(row)
    res.summary = {"sessions": n, "reference": refs[0].name,
                   "costs": {r["controller"]: r["costs"] for r in res.rows[1:]}}  # fmt: skip
    return res


def plot(res: Result) -> Any:
    """Each ablation's metrics relative to the reference preset (1 = no cost)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    if not res.rows:
        return fig
    ref, rest = res.rows[0], res.rows[1:]
    keys = (("software_bytes", "software bytes"), ("cpu_s", "mgmt CPU"),
            ("control_ops", "control ops"))  # fmt: skip
    x = np.arange(len(rest))
    w = 0.8 / len(keys)
    for i, (k, label) in enumerate(keys):
        vals = [max(r[k], 1e-12) / max(ref[k], 1e-12) for r in rest]
        ax.bar(x + (i - 1) * w, vals, w, label=label)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, [str(r["controller"]) for r in rest])
    ax.set_ylabel(f"relative to {ref['controller']}")
    ax.set_title(f"{res.name}: {res.title}")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend()
    return fig
