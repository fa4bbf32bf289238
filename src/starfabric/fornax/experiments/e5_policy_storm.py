"""E5 — policy-update storm: a security-group update stops allowing UDP out of a fraction of
the ENIs (so that fraction of the background sessions must now be refused), then an active
share of the sessions (all, or the 10% a large table typically has active) sends a packet
over `measure_s`. Measured: management CPU over the update and the window; the CPU spent
enforcing the update (Fornax's O(1) version bumps; the baselines' whole rescan, finished
after the window when it outlasts it), which is how long a one-core controller takes to
converge; the simulated time the rescan takes (baselines: flows in scope / the rescan rate,
rescan_flows_per_thread_s x rescan_threads; Fornax: 0); packets of refused sessions still
forwarded under the stale decision (hardware entries the rescan has not reached yet keep
their old actions; Fornax: 0, a version mismatch punts the packet) and the stale window
(last such packet after the update); collateral drops of untouched sessions."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Context, branch, can_branch, cpu_now
from starfabric.fornax.experiments.output import Result, by_controller, line_plot
from starfabric.fornax.manager import Final

#: Shares of the table that send a packet after the update (assumption: most sessions of a
#: large table are idle at any moment; 1.0 is the worst case for lazy re-evaluation).
ACTIVE_SHARES = (0.1, 1.0)
COLUMNS = [("fraction", "touched"), ("active", "active"), ("controller", "controller"),
           ("cpu_s", "mgmt CPU s"), ("enforce_cpu_s", "enforce CPU s"),
           ("converge_s", "converge s (sim)"), ("stale_forwarded", "stale fwd pkts"),
           ("stale_window_s", "stale window s"),
           ("collateral_drops", "collateral drops")]  # fmt: skip
_FWD = (Final.HW_FORWARDED, Final.SW_FORWARDED)


def storm(
    r: Any, n: int, fraction: float, measure_s: float, active: float = 1.0
) -> dict[str, float]:
    """Apply the update at the run's clock, then one packet of `active` of the sessions over
    measure_s."""
    k = max(1, round(fraction * traffic.N_ENIS))
    cpu0 = cpu_now(r)
    t_u = r.now_ns
    r.advance(t_u)
    e0 = _enforce_cpu(r)
    r.cp.apply_policy(traffic.vpc_spec(n, deny_udp_enis=k))
    ids = np.random.default_rng(5).permutation(n).astype(np.int64)[: max(1, int(active * n))]
    m = len(ids)
    ka = traffic.keepalive(ids, t_u + 1, t_u + int(measure_s * 1e9))
    touched = (ids % traffic.N_ENIS) < k
    stale = coll = 0
    last = t_u
    for s in range(0, m, traffic.BATCH):
        sl = np.arange(s, min(m, s + traffic.BATCH))
        fate = r.offer(ka.take(sl))
        fwd = np.isin(fate.final, _FWD)
        bad = fwd & touched[sl]
        stale += int(bad.sum())
        if bad.any():
            last = int(ka.time_ns[sl][bad].max())
        coll += int((~fwd & ~touched[sl]).sum())
    r.advance(t_u + int(measure_s * 1e9))
    cpu = cpu_now(r) - cpu0
    end = getattr(r.cp, "rescan_end_ns", None)  # baselines with policy=rescan
    if hasattr(r.cp, "finish_rescan"):  # a rescan outlasting the window: its whole CPU
        r.cp.finish_rescan()
    enforce = _enforce_cpu(r) - e0
    converge = (end - t_u) / 1e9 if end is not None else 0.0
    return {"cpu_s": cpu, "enforce_cpu_s": enforce, "converge_s": converge,
            "stale_forwarded": stale, "stale_window_s": (last - t_u) / 1e9,
            "collateral_drops": coll}  # fmt: skip


def _enforce_cpu(r: Any) -> float:
    """CPU charged to applying policy (Fornax: "policy"; baselines also "rescan")."""
    by = r.cp.metrics.cpu_s
    return float(by.get("policy", 0.0) + by.get("rescan", 0.0))


def run(ctx: Context) -> Result:
    sc = ctx.scale
    n = sc.table
    spec = traffic.vpc_spec(n)
    res = Result("E5", f"policy-update storm on {n:,} sessions", COLUMNS)
    combos = [(f, a) for f in sc.e5_fractions for a in ACTIVE_SHARES]
    order = {c.name: i for i, c in enumerate(ctx.contenders)}
    for c in ctx.runnable(n, res.notes, "fornax", "baseline"):
        got: dict[tuple[float, float], dict[str, float]] = {}
        # One fill, each storm in a copy-on-write child of it, where the machine allows;
        # a storm no child measured gets a table of its own (the same fill, again).
        with (
            ctx.task(f"E5 {c.name} fill", n) as adv,
            ctx.controller(c, n, spec) as r,
        ):
            r.fill(n, on_batch=adv)
            for f, a in combos:
                if not can_branch():
                    break
                m = branch(partial(storm, r, n, f, sc.measure_s, a))
                if m is not None:
                    got[(f, a)] = m
        for f, a in combos:
            if (f, a) in got:
                continue
            with (
                ctx.task(f"E5 {c.name} {f:.0%}/{a:.0%}", n) as adv,
                ctx.controller(c, n, spec) as r,
            ):
                r.fill(n, on_batch=adv)
                got[(f, a)] = storm(r, n, f, sc.measure_s, a)
        for (f, a), m in got.items():
            res.rows.append({"fraction": f, "active": a, "controller": c.name, **m})
    res.rows.sort(key=lambda row: (row["fraction"], row["active"], order[row["controller"]]))
    res.summary = {"sessions": n}
    for name, rows in by_controller(res.rows).items():
        res.summary[name] = {
            "stale_forwarded": sum(r["stale_forwarded"] for r in rows),
            "stale_window_s_max": max(r["stale_window_s"] for r in rows),
            "converge_s_max": max(r["converge_s"] for r in rows),
            "cpu_s": sum(r["cpu_s"] for r in rows),
            "enforce_cpu_s": sum(r["enforce_cpu_s"] for r in rows),
        }
    return res


def plot(res: Result) -> Any:
    sub = Result(res.name, res.title + " (10% active)", res.columns,
                 [r for r in res.rows if r["active"] == ACTIVE_SHARES[0]])  # fmt: skip
    return line_plot(sub, "fraction", "cpu_s", "fraction of sessions touched",
                     "management CPU s (update + window)")  # fmt: skip
