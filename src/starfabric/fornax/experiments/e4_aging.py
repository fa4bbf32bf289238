"""E4 — aging accuracy and table occupancy: with every idle timeout set to T, half the
background sessions stay active (a packet every T/3) and half go idle. Active sessions aged
while active show up as their packets missing hardware; idle sessions kept too long show up
as occupancy above the active half after T (residency beyond the timeout).

The table is small enough that it fills in T/4 of simulated time, so no session is idle
longer than T/3 before its first keep-alive (assumption of the setup, not of a contender)."""

from __future__ import annotations

from typing import Any

import numpy as np

from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import FILL_CPS, Context, Run
from starfabric.fornax.experiments.output import Result, by_controller, style
from starfabric.fornax.manager import Final

COLUMNS = [("timeout_s", "timeout s"), ("controller", "controller"),
           ("active_aged_share", "active packets missed HW"),
           ("idle_overstay_s", "idle overstay s"), ("idle_left_at_2t", "idle left at 2T"),
           ("mean_occupancy", "mean occupancy")]  # fmt: skip
#: Keep-alive rounds per timeout T (each round T/3 long): the run covers 3T.
ROUNDS = 9


def timeouts(t: float) -> dict[str, float]:
    """Engine timeout classes all set to `t` (UDP/TCP/ICMP/other)."""
    names = ("tcp_syn_sent_s", "tcp_syn_recv_s", "tcp_established_s", "tcp_fin_wait_s",
             "tcp_close_wait_s", "tcp_last_ack_s", "tcp_time_wait_s", "tcp_close_s",
             "tcp_syn_sent2_s", "tcp_none_s", "udp_unreplied_s", "udp_assured_s", "icmp_s",
             "generic_s")  # fmt: skip
    return dict.fromkeys(names, t)


def _measure(r: Run, n: int, t: float) -> dict[str, float]:
    active = np.arange(0, n, 2, dtype=np.int64)
    n_act, n_idle = len(active), n - len(active)
    t_s = r.now_ns
    rnd = int(t / 3 * 1e9)
    sent = missed = 0
    excess_area = 0.0
    occ: list[int] = []
    left_2t = 0.0
    for k in range(ROUNDS):
        t0 = t_s + k * rnd
        ka = traffic.keepalive(active, t0, t0 + rnd)
        for s in range(0, len(ka), traffic.BATCH):
            fate = r.offer(ka.take(np.arange(s, min(len(ka), s + traffic.BATCH))))
            sent += len(fate)
            missed += int((fate.final != Final.HW_FORWARDED).sum())
        r.advance(t0 + rnd)
        live = int(r.cp.sessions())
        occ.append(live)
        elapsed = (k + 1) * rnd / 1e9
        if elapsed > t:
            excess_area += max(live - n_act, 0) * rnd / 1e9
        if k + 1 == 6:  # end of round 6 = 2T
            left_2t = max(live - n_act, 0) / max(n_idle, 1)
    return {"active_aged_share": missed / max(sent, 1),
            "idle_overstay_s": excess_area / max(n_idle, 1),
            "idle_left_at_2t": left_2t, "mean_occupancy": float(np.mean(occ))}  # fmt: skip


def run(ctx: Context) -> Result:
    sc = ctx.scale
    n = min(sc.table, int(min(sc.e4_timeouts) * FILL_CPS / 4))
    n -= n % 2
    spec = traffic.vpc_spec(n)
    res = Result("E4", f"aging accuracy and occupancy ({n:,} sessions, half active)", COLUMNS)
    for t in sc.e4_timeouts:
        for c in ctx.runnable(n, res.notes, "fornax", "baseline"):
            with (
                ctx.task(f"E4 {c.name} T={t:g}s", n) as adv,
                ctx.controller(c, n, spec, idle_timeout_s=t, **timeouts(t)) as r,
            ):
                r.fill(n, on_batch=adv)
                m = _measure(r, n, t)
            res.rows.append({"timeout_s": t, "controller": c.name, **m})
    res.summary = {"sessions": n, "active": n // 2, "rounds_per_t": ROUNDS}
    for name, rows in by_controller(res.rows).items():
        res.summary[name] = {
            "active_aged_share_max": max(r["active_aged_share"] for r in rows),
            "idle_overstay_s_max": max(r["idle_overstay_s"] for r in rows),
        }
    return res


def plot(res: Result) -> Any:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8))
    panels = (("active_aged_share", "active packets that missed hardware"),
              ("idle_overstay_s", "idle residency beyond T (s)"))  # fmt: skip
    for ax, (key, label) in zip(axes, panels, strict=True):
        for i, (name, rows) in enumerate(by_controller(res.rows).items()):
            ax.plot([r["timeout_s"] for r in rows], [r[key] for r in rows], label=name,
                    **style(i))  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("idle timeout T (s)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"{res.name}: {res.title}")
    return fig
