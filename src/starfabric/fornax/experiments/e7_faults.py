"""E7 — fault injection: bit flips (corrected and uncorrectable), a hung port, an event-ring
overflow, a manager crash and a whole-pipeline failure, injected one after another under
traffic with a policy change, through the chaos runner (fornax/run/chaos.py) with the
same seeded fault draws for each controller. Per fault class: detection latency (`detect_s`,
the worst of the class), blast radius (scope), packets lost and misforwarded (against a
fault-free Fornax oracle fed the same packets) and failover/failback time.

Fornax is the ResilientManager: ECC and watchdog events, rebuild, patrol, failover. The
OVS-like baseline (fornax/baselines preset, per-direction flows, revalidators) runs on a NIC
that reports no ECC or hang events (TC offload has no such channel): it learns of a corrupted
entry only by chance — when a packet of the flow is punted or its revalidator's dump reads
the entry — and its `detect_s` is that moment; a hung port is never detected (it has no
watchdog consumer) and recovers only when the fault ends (the NIC self-heals: an assumption
in its favour). Manager crashes are injected for Fornax only (E8 covers restarts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starfabric.fornax.engine import SessionEngine
from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Context
from starfabric.fornax.experiments.output import Result, bar_style, by_controller
from starfabric.fornax.run.chaos import resilient, run_chaos
from starfabric.fornax.run.chaos_report import summary_rows
from starfabric.fornax.run.chaos_spec import ChaosSpec

COLUMNS = [("fault", "fault"), ("controller", "controller"), ("count", "faults"),
           ("detected", "detected"), ("detect_s", "detect s (max)"), ("scope", "scope"),
           ("failover_s", "failover s"), ("failback_s", "failback s"), ("lost", "pkts lost"),
           ("misforwarded", "misforwarded")]  # fmt: skip
#: Flip rates far above real DRAM (assumption) so a short run draws a few dozen faults.
FLIPS_PER_ENTRY_HOUR = 20.0


def chaos_spec(duration_s: float, cps: float) -> ChaosSpec:
    """Faults spread over the run so their effects do not overlap (times are fractions of
    the duration); the policy change falls inside the ring-overflow window so events pile
    up and are lost."""
    d = duration_s
    return ChaosSpec.model_validate({
        "vpc": "-", "seed": 7,
        "workload": {"seed": 7, "duration": d, "cps": cps, "batch": 0.002, "east_west": 0.5,
                     "outbound": 0.4, "inbound": 0.1, "tcp_ports": [443, 80, 5432]},
        "engine": {"capacity": 1 << 16, "ring_capacity": 64, "n_ports": 8,
                   "watchdog_timeout_s": 0.01, "scrub_slots_per_tick": 8192,
                   "tcp_time_wait_s": 1.0, "tcp_close_s": 0.5, "udp_unreplied_s": 1.0,
                   "udp_assured_s": 2.0, "icmp_s": 1.0},
        "health": {"healthy_s": 0.2, "vpc_sessions": 12},
        "tick": 0.004,
        "faults": {
            "bit_flips": [{"rate_per_entry_hour": FLIPS_PER_ENTRY_HOUR, "bits": 1,
                           "start": 0.05 * d},
                          {"rate_per_entry_hour": FLIPS_PER_ENTRY_HOUR, "bits": 2,
                           "start": 0.05 * d}],
            "stalls": [{"port": 1, "at": 0.2 * d, "duration": 0.04 * d}],
            "ring_overflows": [{"at": 0.4 * d, "duration": 0.05 * d}],
            "crashes": [{"at": 0.6 * d}],
            "engine_failures": [{"at": 0.8 * d, "duration": 0.03 * d}],
        },
    })  # fmt: skip


def _ovs_like(constants: Any = None) -> Any:
    """The OVS-like contender's builder, with a calibration's constants (None: built-in)."""
    from starfabric.fornax.baselines import SoftwareCentric, ovs_like

    def build(engine: SessionEngine, policy: Any, spec: ChaosSpec) -> Any:
        return SoftwareCentric(engine, policy, ovs_like(constants=constants), spec.manager,
                               softpath_config=spec.softpath)  # fmt: skip

    return build


def run(ctx: Context) -> Result:
    ci = ctx.scale.name == "ci"
    duration, cps = (1.0, 1500.0) if ci else (4.0, 6000.0)
    spec = chaos_spec(duration, cps)
    n = int(cps * 2)
    vpc = traffic.vpc_spec(n)
    change = [(0.42 * duration, traffic.vpc_spec(n, deny_udp_enis=traffic.N_ENIS // 2))]
    res = Result("E7", "fault injection: detection, blast radius, loss", COLUMNS)
    cal = ctx.ovs_calibration
    contenders = [("fornax", resilient, True),
                  ("ovs_like", _ovs_like(None if cal is None else cal.constants), False)]  # fmt: skip
    for name, build, events in contenders:
        with ctx.task(f"E7 {name}", 1.0) as adv:
            done = [0.0]

            def step(f: float, adv: Any = adv, done: list[float] = done) -> None:
                adv(f - done[0])
                done[0] = f

            rep = run_chaos(spec, Path("."), build=build, fault_events=events, vpc=vpc,
                            changes=change, progress=step)  # fmt: skip
        res.notes.extend(rep.get("notes", []))
        for r in summary_rows(rep):
            res.rows.append({
                "fault": r["fault"], "controller": name, "count": r["count"],
                "detected": r["detected"], "detect_s": r["detect_s_max"],
                "scope": ",".join(r["scopes"]) if r["detected"] else None,
                "failover_s": r["failover_s_max"], "failback_s": r["failback_s_max"],
                "lost": r["lost"], "misforwarded": r["misforwarded"],
            })  # fmt: skip
        res.summary[f"{name}_misforwarded"] = rep["oracle"]["misforwarded"]
        res.summary[f"{name}_lost"] = rep["oracle"]["lost"]
    fx = {r["fault"]: r for r in res.rows if r["controller"] == "fornax"}
    ovs = {r["fault"]: r for r in res.rows if r["controller"] == "ovs_like"}
    res.summary["detect_s_ratio_ovs_over_fornax"] = {
        k: (ovs[k]["detect_s"] / fx[k]["detect_s"]) if ovs.get(k, {}).get("detect_s")
        and fx[k]["detect_s"] else None
        for k in fx if k in ovs
    }  # fmt: skip
    res.summary["fault_draw"] = (f"{FLIPS_PER_ENTRY_HOUR:g} flips per occupied entry-hour, "
                                 f"seed {spec.seed}: a table holding more entries (per-direction "
                                 "flows) is exposed to more flips")  # fmt: skip
    return res


def plot(res: Result) -> Any:
    """detect_s per fault class, one bar group per controller (log scale)."""
    import matplotlib.pyplot as plt
    import numpy as np

    groups = by_controller(res.rows)
    faults = list(dict.fromkeys(r["fault"] for r in res.rows))
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    w = 0.8 / max(1, len(groups))
    for i, (name, rows) in enumerate(groups.items()):
        d = {r["fault"]: r["detect_s"] for r in rows}
        vals = [max(float(d.get(f) or 0.0), 1e-6) for f in faults]
        ax.bar(np.arange(len(faults)) + i * w, vals, w, label=name, **bar_style(i))
    ax.set_xticks(np.arange(len(faults)) + w * (len(groups) - 1) / 2, faults, rotation=20,
                  ha="right")  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylabel("detection latency, s (1e-6: undetected or instant)")
    ax.set_title(f"{res.name}: {res.title}")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    return fig
