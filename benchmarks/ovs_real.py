"""Measure a real Open vSwitch (ovs-vswitchd, userspace datapath) and hold the OVS-like
baseline model to it, at the same table sizes and connection rates.

Needs root and Debian's openvswitch-switch (README, "Real Open vSwitch"; nothing is installed
here). Each mode starts a private ovs-vswitchd (fornax/baselines/ovs_real/instance.py) with a
conntrack security-group pipeline (pipeline.py), opens N connections from pre-built frames on
raw sockets in two namespaces (TCP handshake + data both ways, UDP request/reply; 3:1), keeps
them alive, and reads per N: datapath flows and ukeys (upcall/show), the dynamic flow limit,
the dump duration, conntrack entries, ovs-vswitchd's RSS growth per connection and per flow,
revalidator / handler / main-thread CPU per second (per-thread CPU time from
/proc/PID/task/*/schedstat, so other work on the shared cores does not inflate it); and the
setup rate at which new connections start to be dropped (--sweep).

Modes: `exact` (`upcall/disable-megaflows`: every datapath flow exact-match, the premise of
the OVS-like model, which keeps one flow per connection direction) and `megaflow` (OVS's
default wildcarded megaflows; the model does not model megaflows, see baselines/config.py
NOT_MODELLED). The model runs the same N (fill, then keep-alives every KEEPALIVE_PERIOD_S on
the simulated clock, at the private OVS's max-idle) with `ovs_like()` (calibrated: ovs_cost,
config.OVS_*) and, unless --quick, `ovs_like(calibrated=False)`; `--model closed` uses
ovs_cost's closed form instead of the simulation (seconds instead of minutes at 200k). Every
exact level is also checked against the closed form fitted on this run's OTHER held levels
(held_out: the check a run on another machine needs). --quick: N = 10k, 50k, 100k, exact only.

    python benchmarks/ovs_real.py [--quick] [--json PATH] [--mode exact|megaflow|both]
                                  [--levels N,N,...] [--[no-]uncalibrated] [--no-sweep]
                                  [--model sim|closed] [--cps CPS] [--calibrate FILE]

--calibrate FILE writes the constants this run fits (exact mode, least squares over every level
that held, at least two) with this machine (host, CPU, CPUs, kernel) and the OVS release to
FILE, which `starfabric fornax experiment --ovs-calibration FILE` uses instead of the built-in
calibration (fornax/baselines/ovs_calibration.py); fewer than two held levels write nothing
and exit 2.

Prints, last, per N of each mode: whether the level held (and why not: conntrack share, the
dynamic flow limit under the table, flows that idled out, frames OVS's port sockets dropped),
real bytes per connection, revalidator CPU per second and dump time, the model's, and the
ratios model/real; then the held-out check.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from starfabric.errors import StarfabricError
from starfabric.fornax.baselines import (
    OVS_DP_FLOWS_PER_MODEL_FLOW,
    SoftwareCentric,
    ovs_cost,
    ovs_like,
)
from starfabric.fornax.baselines.config import SoftwareCentricConfig
from starfabric.fornax.baselines.ovs_calibration import calibration_document, from_fit
from starfabric.fornax.baselines.ovs_real import scenario
from starfabric.fornax.baselines.ovs_real.instance import leftovers, unavailable_reason
from starfabric.fornax.engine import FastEngine
from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Run, engine_config
from starfabric.fornax.experiments.output import write_json
from starfabric.fornax.vpc import compile_policy
from starfabric.outputs import check_file

FULL = (10_000, 50_000, 100_000, 200_000)
QUICK = (10_000, 50_000, 100_000)
#: Connection rates per mode: below the onset of drops measured on the shared 2-core VM
#: (the exact mode upcalls every new packet: ~10 datapath flows per TCP setup; at 2,000 CPS
#: a quarter of the setup packets were lost with the cores busy).
CPS = {"exact": 1_000.0, "megaflow": 10_000.0}
SWEEP = {"exact": (1_000.0, 2_000.0, 4_000.0, 8_000.0, 16_000.0),
         "megaflow": (5_000.0, 10_000.0, 20_000.0, 40_000.0, 80_000.0)}  # fmt: skip
TCP_SHARE = 0.75
#: Simulated seconds of keep-alives before and during the model's measured window: one
#: keep-alive period each (the model has no setup transients to wait out; its CPU per second
#: is steady from the first period on).
MODEL_SETTLE_S = scenario.KEEPALIVE_PERIOD_S
MODEL_WINDOW_S = scenario.KEEPALIVE_PERIOD_S
#: Share of a level's connections conntrack must hold for the level to count as held (the
#: driver's packets are lost at OVS's receive queues when the shared cores are busy).
HELD_SHARE = 0.97
#: Datapath flows an exact-match OVS holds per kept-alive connection: per direction one before
#: and one after the ct() recirculation (2 model flows x OVS_DP_FLOWS_PER_MODEL_FLOW).
DP_FLOWS_PER_CONNECTION = 2 * OVS_DP_FLOWS_PER_MODEL_FLOW


def model_config(make: Any, real_flow_limit: int) -> SoftwareCentricConfig:
    """The preset with the private OVS's settings that differ from OVS's defaults mirrored:
    max-idle (scenario.MAX_IDLE_S) and flow-limit (RunConfig.flow_limit datapath flows, the
    dynamic limit's ceiling and, as `upcall/set-flow-limit` sets it, its start), both in model
    flows (OVS_DP_FLOWS_PER_MODEL_FLOW datapath flows each). The revalidator threads' count
    is in the calibration (the dump time per flow was measured with them)."""
    conf: SoftwareCentricConfig = make()
    upd: dict[str, Any] = {"idle_timeout_s": scenario.MAX_IDLE_S}
    if conf.flow_limit is not None:
        lim = real_flow_limit // OVS_DP_FLOWS_PER_MODEL_FLOW
        upd["flow_limit"] = conf.flow_limit.model_copy(update={"start": lim, "maximum": lim})
    return conf.model_copy(update=upd)


def model_level(make: Any, n: int, settle_s: float, window_s: float,
                real_flow_limit: int) -> dict[str, Any]:  # fmt: skip
    """The OVS-like model at n connections: fill (75% TCP with handshake), keep-alives every
    KEEPALIVE_PERIOD_S over settle_s, then the measured window_s (simulated seconds)."""
    spec = traffic.vpc_spec(n)
    cfg = engine_config(n)
    conf = model_config(make, real_flow_limit)
    run = Run("ovs_like", SoftwareCentric(FastEngine(cfg), compile_policy(spec), conf))
    cp: SoftwareCentric = run.cp  # type: ignore[assignment]
    run.fill(n, tcp_share=TCP_SHARE, handshake=True)
    ids = np.arange(n, dtype=np.int64)
    period = scenario.KEEPALIVE_PERIOD_S

    def keepalive(seconds: float) -> None:
        # every connection once per period, offered in WINDOW_S windows so ticks interleave
        t_end = run.now_ns + int(seconds * 1e9)
        w_ns = int(traffic.WINDOW_S * 1e9)
        per = max(1, round(period / traffic.WINDOW_S))
        while run.now_ns < t_end:
            t0 = run.now_ns
            for w in range(per):
                a, b = n * w // per, n * (w + 1) // per
                tw = t0 + w * w_ns
                if b > a:
                    run.offer(traffic.keepalive(ids[a:b], tw, tw + w_ns, tcp_share=TCP_SHARE))
                run.advance(tw + w_ns)

    keepalive(settle_s)
    cpu0, passes0, t0 = cp.metrics.cpu_s["revalidate"], cp.passes, run.now_ns
    h0 = len(cp.flow_limit.history) if cp.flow_limit else 0
    keepalive(window_s)
    window_s = (run.now_ns - t0) / 1e9  # whole keep-alive periods: at least window_s
    cpu = (cp.metrics.cpu_s["revalidate"] - cpu0) / window_s
    flows = cp.flows()
    fl = cp.flow_limit
    lims = [h[2] for h in fl.history[h0:]] if fl else []
    out = {"connections": cp.sessions(), "flows": flows,
           "dp_flows": flows * OVS_DP_FLOWS_PER_MODEL_FLOW,
           "flow_limit_min_dp": min(lims) * OVS_DP_FLOWS_PER_MODEL_FLOW if lims else None,
           "bytes_per_connection": cp.software_bytes / max(n, 1),
           "measured_mirror_bytes_per_connection": (cp.mirror.live_nbytes if cp.mirror else 0) / max(n, 1),
           "revalidator_cpu_per_s": cpu, "passes_per_s": (cp.passes - passes0) / window_s,
           "dump_ms": fl.dump_duration_ms(flows) if fl else None,
           "flow_limit": fl.limit if fl else None,
           "closed_form": closed_form(cp.baseline, n, flows)}  # fmt: skip
    return out


def closed_form(conf: SoftwareCentricConfig, n: int, flows: int) -> dict[str, Any]:
    """ovs_cost's closed form for n connections held as `flows` model flows: host bytes per
    connection (None where the preset keeps no host-bytes model), revalidator CPU, the pass
    interval and the dump time (no flow-limit dynamics)."""
    hb = ovs_cost.host_bytes(conf, flows)
    return {"bytes_per_connection": None if hb is None else hb / max(n, 1),
            "revalidator_cpu_per_s": ovs_cost.revalidator_cpu_per_s(conf, flows),
            "pass_interval_s": ovs_cost.pass_interval_s(conf, flows),
            "dump_ms": ovs_cost.dump_s(conf, flows) * 1e3}  # fmt: skip


def closed_form_level(make: Any, n: int, real_flow_limit: int) -> dict[str, Any]:
    """The model at n connections from ovs_cost's closed form alone (2 model flows per
    connection, no simulation: --model closed; the flow limit is taken as never shrinking, so
    a dump past FlowLimitConfig.shrink_dump_s is flagged in `flow_limit_shrinks`)."""
    conf = model_config(make, real_flow_limit)
    flows = 2 * n
    cf = closed_form(conf, n, flows)
    fl = conf.flow_limit
    lim = None if fl is None else fl.start * OVS_DP_FLOWS_PER_MODEL_FLOW
    return {"connections": n, "flows": flows, "dp_flows": flows * OVS_DP_FLOWS_PER_MODEL_FLOW,
            "flow_limit_min_dp": lim, "flow_limit": None if fl is None else fl.start,
            "flow_limit_shrinks": fl is not None and cf["dump_ms"] > fl.shrink_dump_s * 1e3,
            "bytes_per_connection": cf["bytes_per_connection"],
            "revalidator_cpu_per_s": cf["revalidator_cpu_per_s"],
            "passes_per_s": 1 / cf["pass_interval_s"],
            "dump_ms": round(cf["dump_ms"]), "closed_form": True}  # fmt: skip


def verdict(lv: scenario.Level, cfg: scenario.RunConfig) -> tuple[bool, list[str]]:
    """Whether the level held, and why not: conntrack has >= HELD_SHARE of its connections,
    OVS's dynamic flow limit never fell to the table (a slow dump shrinks it; OVS evicts once
    flows exceed it) and, with exact-match flows, the datapath holds >= HELD_SHARE of
    DP_FLOWS_PER_CONNECTION per connection held (keep-alives refreshed them; flows that idled
    out would make the level's CPU a smaller table's)."""
    why = []
    ka = lv.keepalive_delivered / max(lv.keepalive_sent, 1)
    if lv.connections_held < HELD_SHARE * lv.connections:
        why.append(f"conntrack holds {lv.connections_held / max(lv.connections, 1):.1%} of the "
                   f"connections (setup packets lost: {lv.setup_delivered / max(lv.setup_sent, 1):.1%} "
                   "delivered)")  # fmt: skip
    if lv.flow_limit <= lv.flows_max:
        why.append(f"the dynamic flow limit fell to {lv.flow_limit:,} <= the table's "
                   f"{lv.flows_max:,} flows (dumps of {lv.dump_ms_median:.0f} ms median, "
                   f"{lv.dump_ms_max} ms max: > 1.3 s shrinks it, > 2 s divides it)")  # fmt: skip
    if not cfg.megaflows and lv.flows < HELD_SHARE * DP_FLOWS_PER_CONNECTION * lv.connections_held:
        why.append(f"the datapath holds {lv.flows_per_connection:.2f} flows per connection of "
                   f"{DP_FLOWS_PER_CONNECTION} (flows idled out; keep-alives delivered {ka:.1%})")  # fmt: skip
    if why and lv.socket_drops > 0:
        why.append(f"OVS's port sockets dropped {lv.socket_drops:,} of "
                   f"{lv.socket_frames + lv.socket_drops:,} frames (receive buffer full: the main "
                   "thread that polls them fell behind)")  # fmt: skip
    return not why, why


def suggested_calibration(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The OVS-like preset's calibration this run would give (config.py documents it): the
    least-squares fit of ovs_cost over every exact-mode level that held (at least two)."""
    ok = [r["real"] for r in rows if r["held"]]
    if len(ok) < 2:
        return None
    return asdict(ovs_cost.fit([_figures(lv) for lv in ok], OVS_DP_FLOWS_PER_MODEL_FLOW))


def _figures(lv: dict[str, Any]) -> ovs_cost.LevelFigures:
    return ovs_cost.LevelFigures(lv["connections_held"], lv["flows"], lv["rss_growth_bytes"],
                                 lv["cpu_per_s"].get("revalidator", 0.0), lv["dump_ms_median"])  # fmt: skip


def held_out(rows: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Per level: the closed-form model (ovs_cost) with the constants fitted on this run's
    OTHER held levels (at least two; the level itself never takes part), and model/real, so a
    run on another machine checks the model on levels its fit did not see (None: fewer than
    two other held levels). Model flows: two per connection of the level; the dynamic flow
    limit shrinks where the dump would exceed FlowLimitConfig.shrink_dump_s."""
    out: list[dict[str, Any] | None] = []
    base = ovs_like()
    fl = base.flow_limit
    assert fl is not None
    for i, r in enumerate(rows):
        others = [_figures(o["real"]) for j, o in enumerate(rows) if j != i and o["held"]]
        if len(others) < 2:
            out.append(None)
            continue
        cal = ovs_cost.fit(others, OVS_DP_FLOWS_PER_MODEL_FLOW)
        conf = base.model_copy(update={
            "host_base_bytes": cal.host_base_bytes, "host_bytes_per_flow": cal.host_bytes_per_flow,
            "revalidate_ns_per_flow": cal.revalidate_ns_per_flow,
            "flow_limit": fl.model_copy(update={"dump_ns_per_flow": cal.dump_ns_per_flow})})  # fmt: skip
        lv = r["real"]
        cf = closed_form(conf, lv["connections"], 2 * lv["connections"])
        bpc, cpu, dump_ms = cf["bytes_per_connection"], cf["revalidator_cpu_per_s"], cf["dump_ms"]
        out.append({"fit_levels": list(cal.levels), "bytes_per_connection": bpc,
                    "revalidator_cpu_per_s": cpu, "dump_ms": dump_ms,
                    "flow_limit_shrinks": dump_ms > fl.shrink_dump_s * 1e3,
                    "ratio": {"bytes_per_connection": ratio(bpc, lv["bytes_per_connection"]),
                              "revalidator_cpu_per_s": ratio(cpu, lv["cpu_per_s"].get("revalidator")),
                              "dump_ms": ratio(dump_ms, lv["dump_ms_median"])}})  # fmt: skip
    return out


def _f(v: Any, spec: str) -> str:
    """`v` formatted by `spec`, or "n/a" where the figure is missing (None)."""
    return "n/a" if v is None else format(v, spec)


#: Largest level the benchmark opens (assumption: ovs-vswitchd held 3.3 GB of RSS at 200k
#: exact-match connections, so 1M needs ~16 GB) and the longest window / highest rate accepted.
MAX_LEVEL, MAX_WINDOW_S, MAX_CPS = 1_000_000, 3600.0, 1e6


def options_error(args: argparse.Namespace) -> str | None:
    """What is wrong with --levels, --window or --cps, in one line (None: nothing)."""
    if args.levels is not None:
        parts = [x.strip() for x in args.levels.split(",")]
        if not all(x.isdigit() and 1 <= int(x) <= MAX_LEVEL for x in parts):
            return (f"--levels {args.levels!r}: need whole numbers in 1..{MAX_LEVEL:,} "
                    "(fix: e.g. --levels 10000,50000)")  # fmt: skip
    for opt, v, hi in (("--window", args.window, MAX_WINDOW_S), ("--cps", args.cps, MAX_CPS)):
        if v is not None and not (0 < v <= hi):  # NaN fails too
            return f"--{opt.lstrip('-')} {v}: need a number in (0, {hi:g}] (fix: e.g. {opt} 5)"
    return None


def write_calibration(out: dict[str, Any], path: Path, console: Console) -> str | None:
    """Write the exact mode's fitted calibration, stamped with this machine, to `path`
    (atomically); None, and nothing written, when fewer than two levels held."""
    exact = out["modes"]["exact"]
    fit = exact["suggested_calibration"]
    if fit is None:
        held = sum(r["held"] for r in exact["rows"])
        console.print(f"error: --calibrate {path}: {held} level(s) held, the fit needs two "
                      "(fix: lower --cps or the levels; each level's reason is above)")  # fmt: skip
        return None
    fit["levels"] = tuple(fit["levels"])
    try:
        cal = from_fit(ovs_cost.Calibration(**fit), exact["version"])
    except StarfabricError as e:
        console.print(f"error: --calibrate {path}: nothing written: {e.one_line()}", markup=False)
        return None
    write_json(calibration_document(cal), path)
    console.print(f"wrote {path}: {cal.describe()}; use it with "
                  f"`starfabric fornax experiment ... --ovs-calibration {path}`")  # fmt: skip
    return str(path)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help=f"N in {QUICK} (a few minutes)")
    ap.add_argument("--json", type=Path, help="write every figure here (atomically)")
    ap.add_argument(
        "--mode",
        choices=("exact", "megaflow", "both"),
        default=None,
        help="datapath flows (default: exact with --quick, both otherwise)",
    )
    ap.add_argument(
        "--uncalibrated",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run ovs_like(calibrated=False) (default: not with --quick)",
    )
    ap.add_argument("--levels", help="comma list of N (overrides --quick)")
    ap.add_argument("--window", type=float, default=5.0, help="measured window, s")
    ap.add_argument("--no-sweep", action="store_true", help="skip the setup-rate sweep")
    ap.add_argument("--model", choices=("sim", "closed"), default="sim",
                    help="the model: simulated (default) or ovs_cost's closed form (seconds)")  # fmt: skip
    ap.add_argument("--cps", type=float, help=f"connections/s while opening (default {CPS})")
    ap.add_argument("--calibrate", type=Path, metavar="FILE",
                    help="write the fitted OVS-like calibration (this machine's) to FILE")  # fmt: skip
    args = ap.parse_args()
    console = Console(width=max(Console().width, 190))
    for opt, path in (("--json", args.json), ("--calibrate", args.calibrate)):
        try:  # the CLI's own check (a probe file in the nearest existing folder)
            if path is not None:
                check_file(path, opt)
        except StarfabricError as e:
            console.print(f"error: {e.one_line()}", markup=False)
            sys.exit(2)
    bad = options_error(args)
    if bad is not None:
        console.print(f"error: {bad}", markup=False)
        sys.exit(2)
    mode_arg = args.mode or ("exact" if args.quick or args.calibrate else "both")
    if args.calibrate is not None and mode_arg == "megaflow":
        console.print("error: --calibrate fits the exact mode (fix: --mode exact or both)")
        sys.exit(2)
    reason = unavailable_reason()
    if reason is not None:
        console.print(f"error: a private Open vSwitch cannot run here: {reason}")
        sys.exit(2)
    levels = (
        tuple(int(x) for x in args.levels.split(","))
        if args.levels
        else QUICK
        if args.quick
        else FULL
    )
    modes = ("exact", "megaflow") if mode_arg == "both" else (mode_arg,)
    uncal = not args.quick if args.uncalibrated is None else args.uncalibrated
    t_start = time.time()
    out: dict[str, Any] = {"levels": list(levels), "quick": args.quick, "window_s": args.window,
                           "cpu_note": "per-thread CPU time (/proc/PID/task/*/schedstat) per wall "
                           "second of the window; the 2 cores were shared with other work",
                           "modes": {}}  # fmt: skip
    models: dict[str, Any] = {"calibrated": ovs_like}
    if uncal:
        models["uncalibrated"] = lambda: ovs_like(calibrated=False)
    out["model_configs"] = {
        k: model_config(m, scenario.FLOW_LIMIT).model_dump() for k, m in models.items()
    }
    cache: dict[int, dict[str, Any]] = {}  # the model does not depend on the mode
    for mode in modes:
        cfg = scenario.RunConfig(levels=levels, cps=args.cps or CPS[mode], megaflows=mode == "megaflow",
                                 window_s=args.window,
                                 sweep=() if args.no_sweep else SWEEP[mode])  # fmt: skip
        console.print(
            f"[bold]{mode}[/]: real OVS, N = {', '.join(f'{n:,}' for n in levels)} at {cfg.cps:,.0f} CPS"
        )
        real = scenario.run(cfg, lambda m: console.print(f"  {m}"))
        rows = []
        for lv in real.levels:
            if lv.connections not in cache:
                console.print(f"  model at {lv.connections:,}")
                cache[lv.connections] = {
                    k: model_level(m, lv.connections, MODEL_SETTLE_S, MODEL_WINDOW_S,
                                   cfg.flow_limit)
                    if args.model == "sim"
                    else closed_form_level(m, lv.connections, cfg.flow_limit)
                    for k, m in models.items()
                }  # fmt: skip
                gc.collect()  # each model run's engine and mirror are gone before the next
            mod = cache[lv.connections]
            c = mod["calibrated"]
            ok, why = verdict(lv, cfg)
            rows.append({"real": {**lv.__dict__, "connections_held": lv.connections_held},
                         "held": ok, "why_not_held": why, "model": mod,
                         "ratio": {"bytes_per_connection": ratio(c["bytes_per_connection"], lv.bytes_per_connection),
                                   "revalidator_cpu_per_s": ratio(c["revalidator_cpu_per_s"], lv.cpu_per_s.get("revalidator")),
                                   "dump_ms": ratio(c["dump_ms"], lv.dump_ms_median),
                                   "dp_flows": ratio(c["dp_flows"], lv.flows)}})  # fmt: skip
        if mode == "exact":
            for r, h in zip(rows, held_out(rows), strict=True):
                r["held_out_model"] = h
        out["modes"][mode] = {"version": real.version, "base_rss_bytes": real.base_rss_bytes,
                              "rows": rows, "sweep": real.sweep,
                              "suggested_calibration": suggested_calibration(rows) if mode == "exact" else None,
                              "drop_onset_cps": real.drop_onset_cps}  # fmt: skip
    out["wall_s"] = time.time() - t_start
    out["leftovers"] = leftovers()
    if args.calibrate is not None:  # written before anything is printed: the run is kept
        out["calibration_file"] = write_calibration(out, args.calibrate, console)
    if args.json is not None:
        write_json(out, args.json)
    for mode, res in out["modes"].items():
        t = Table(title=f"{res['version']}, {mode} datapath flows (real) vs OVS-like model")
        for col in ("N", "conntrack", "dp flows", "flows/conn", "keep-alives delivered",
                    "real B/conn", "model B/conn", "uncal. B/conn", "real reval CPU/s (windows)",
                    "model", "uncal.", "main CPU/s", "dump ms real", "model", "flow limit real",
                    "model", "load"):  # fmt: skip
            t.add_column(col, justify="right")
        for r in res["rows"]:
            lv, m = r["real"], r["model"]["calibrated"]
            u = r["model"].get("uncalibrated", {"bytes_per_connection": float("nan"),
                                                "revalidator_cpu_per_s": float("nan")})  # fmt: skip
            wins = "/".join(f"{w:.3f}" for w in lv["revalidator_cpu_windows"])
            ka = lv["keepalive_delivered"] / max(lv["keepalive_sent"], 1)
            t.add_row(f"{lv['connections']:,}{'' if r['held'] else ' (not held)'}",
                      _f(lv['conntrack'], ","), _f(lv['flows'], ","),
                      _f(lv['flows_per_connection'], ".2f"), _f(ka, ".1%"),
                      _f(lv['bytes_per_connection'], ",.0f"),
                      _f(m['bytes_per_connection'], ",.0f"), _f(u['bytes_per_connection'], ",.0f"),
                      f"{_f(lv['cpu_per_s'].get('revalidator', 0), '.4f')} ({wins})",
                      _f(m['revalidator_cpu_per_s'], ".4f"), _f(u['revalidator_cpu_per_s'], ".4f"),
                      _f(lv['cpu_per_s'].get('main', 0), ".3f"), _f(lv['dump_ms_median'], ".0f"),
                      _f(m['dump_ms'], ""), _f(lv['flow_limit'], ","), _f(m['flow_limit'], ","),
                      _f(lv['load_avg'], ".1f"))  # fmt: skip
        console.print(t)
        if res["sweep"]:
            s = ", ".join(f"{x['cps']:,.0f}: {x['delivered'] / max(x['expected'], 1):.1%} delivered, "
                          f"+{x['conntrack_added']:,}/{x['connections']:,} ct" for x in res["sweep"])  # fmt: skip
            onset = res["drop_onset_cps"]
            console.print(
                f"{mode} setup-rate sweep on the full table: {s}; drops begin at "
                f"{'none up to the top rate' if onset is None else f'{onset:,.0f} CPS'}"
            )
    console.print(f"leftovers after the runs: {out['leftovers']}; wall {out['wall_s']:.0f} s")
    if "exact" in out["modes"]:
        cal = out["model_configs"]["calibrated"]
        console.print(
            f"calibration this run suggests (exact mode, fit over its held levels): "
            f"{out['modes']['exact']['suggested_calibration']}; in use: "
            f"{cal['host_base_bytes']:,.0f} B + {cal['host_bytes_per_flow']:,.0f} B/flow, "
            f"{cal['revalidate_ns_per_flow']:,.0f} ns/flow/pass, "
            f"{cal['flow_limit']['dump_ns_per_flow']:,.0f} ns/flow dump"
        )
    f = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    for mode in sorted(out["modes"], key=lambda m: m == "exact"):  # exact (the calibrated one) last
        res = out["modes"][mode]
        console.print(f"[bold]real OVS vs the calibrated model, {mode} datapath flows[/] "
                      "(per N; model/real last):")  # fmt: skip
        for r in res["rows"]:
            lv, m, q = r["real"], r["model"]["calibrated"], r["ratio"]
            state = "held" if r["held"] else "NOT HELD: " + "; ".join(r["why_not_held"])
            console.print(
                f"  N={lv['connections']:,} {state}\n"
                f"    real:  {lv['bytes_per_connection']:,.0f} B/conn, revalidator CPU "
                f"{lv['cpu_per_s'].get('revalidator', 0):.3f} s/s, dump {lv['dump_ms_median']:.0f} ms, "
                f"{lv['flows']:,} dp flows, lowest flow limit {lv['flow_limit']:,}\n"
                f"    model: {m['bytes_per_connection']:,.0f} B/conn, revalidator CPU "
                f"{m['revalidator_cpu_per_s']:.3f} s/s, dump {m['dump_ms']} ms, "
                f"{m['dp_flows']:,} dp flows, lowest flow limit {m['flow_limit_min_dp'] or 0:,}\n"
                f"    model/real: bytes/conn {f(q['bytes_per_connection'])}, revalidator CPU "
                f"{f(q['revalidator_cpu_per_s'])}, dump {f(q['dump_ms'])}, dp flows {f(q['dp_flows'])}"
            )  # fmt: skip
            if (h := r.get("held_out_model")) is not None:
                hq = h["ratio"]
                console.print(
                    f"    held-out check (fit on this run's N={', '.join(f'{x:,}' for x in h['fit_levels'])}): "
                    f"{h['bytes_per_connection']:,.0f} B/conn, {h['revalidator_cpu_per_s']:.3f} s/s, "
                    f"dump {h['dump_ms']:.0f} ms{' (flow limit shrinks)' if h['flow_limit_shrinks'] else ''}; "
                    f"model/real: bytes/conn {f(hq['bytes_per_connection'])}, revalidator CPU "
                    f"{f(hq['revalidator_cpu_per_s'])}, dump {f(hq['dump_ms'])}"
                )  # fmt: skip
    if args.calibrate is not None and out.get("calibration_file") is None:
        sys.exit(2)  # asked for a calibration and none could be fitted: said above


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the instance has already removed what it created
        print("interrupted: the private OVS, its namespaces and folder were removed")
        sys.exit(130)
