"""The chaos run's report: per-packet trace, one row per fault (detection against its bound,
scope, failover/failback from the controller's timeline), the fault-free oracle that marks
packets misforwarded or lost, and the per-class summary the CLI prints."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from starfabric.fornax.engine import EventType, FastEngine
from starfabric.fornax.keys import canonicalize, key_hash
from starfabric.fornax.manager.accounting import DropReason, Final
from starfabric.fornax.manager.failover import ResilientManager
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.replay import Replay
from starfabric.fornax.run.chaos_spec import ChaosSpec
from starfabric.fornax.run.inject import Injector
from starfabric.fornax.vpc import compile_policy
from starfabric.report import ChromeTrace


class Trace:
    """Per-packet arrays of a run (time, port, key hash, fate), appended per batch."""

    def __init__(self) -> None:
        self.parts: list[dict[str, np.ndarray]] = []

    def add(self, pb: PacketBatch, final: np.ndarray, action: np.ndarray, reason: np.ndarray,
            diverted: np.ndarray) -> None:  # fmt: skip
        self.parts.append({
            "t": pb.time_ns, "port": pb.port.astype(np.int64), "key": key_hash(canonicalize(pb)),
            "final": final, "action": action, "reason": reason, "div": diverted,
        })  # fmt: skip

    def col(self, name: str) -> np.ndarray:
        if not self.parts:
            return np.zeros(0)
        return np.concatenate([p[name] for p in self.parts])


def close_scopes(m: ResilientManager, now: int) -> None:
    """A crashed manager's failovers end with it (its successor re-learns them)."""
    h = m.health
    open_ = [("port", int(p)) for p in np.flatnonzero(h.port_failed)]
    open_ += [("vpc", int(v)) for v in np.flatnonzero(h.vpc_failed)]
    open_ += [("engine", 0)] if h.engine_failed else []
    for scope, sid in open_:
        m.timeline.append({"scope": scope, "id": sid, "failback_ns": now, "how": "restart"})


def _first_back(fb: list[dict[str, Any]], ports: list[int], eng_fo: list[int]) -> int:
    """When traffic of all `ports` is back in hardware: each port's first failback, and the
    engine's first, whichever comes last."""
    times = []
    for p in ports:
        t = [r["failback_ns"] for r in fb if r["scope"] == "port" and r["id"] == p]
        if t:
            times.append(min(t))
    eng = [r["failback_ns"] for r in fb if r["scope"] == "engine"]
    if eng and (not times or any(t <= min(times) for t in eng_fo)):
        times.append(min(eng))
    return max(times) if times else min(eng)


def _isolated_at(timeline: list[dict[str, Any]], ports: list[int], t0: int) -> bool:
    """Whether every one of `ports` (or the whole engine) was failed over at time t0."""

    def failed(scope: str, sid: int) -> bool:
        last = None
        for r in timeline:
            if r.get("scope") == scope and r.get("id") == sid:
                t = r.get("failover_ns", r.get("failback_ns", 0))
                if t <= t0:
                    last = "failover_ns" in r
        return bool(last)

    return failed("engine", 0) or all(failed("port", p) for p in ports)


class _ByKey:
    """Packet times grouped by key (sorted once) for first-packet-after queries."""

    def __init__(self, t: np.ndarray, key: np.ndarray) -> None:
        order = np.lexsort((t, key))
        self.k, self.t = key[order], t[order]

    def first_after(self, k: int, t0: int) -> int:
        """Time of the first packet of key k at or after t0 (-1: none)."""
        lo = int(np.searchsorted(self.k, np.uint64(k), "left"))
        hi = int(np.searchsorted(self.k, np.uint64(k), "right"))
        j = lo + int(np.searchsorted(self.t[lo:hi], t0, "left"))
        return int(self.t[j]) if j < hi else -1


def per_fault(spec: ChaosSpec, inj: Injector, managers: list[Any], trace: Trace,
            crashes: list[dict[str, Any]], tick_ns: int) -> dict[str, Any]:  # fmt: skip
    """One row per fault: detection, scope, failover/failback, bound."""
    rows: list[dict[str, Any]] = []
    log = inj.engine.fault_log()
    ecc_types = (int(EventType.ECC_CORRECTED), int(EventType.ECC_UNCORRECTABLE))
    log = log[np.isin(log[:, 1], ecc_types)]
    timeline = [r for mm in managers for r in getattr(mm, "timeline", [])]
    cycles = [c for mm in managers for c in getattr(mm, "patrol_cycles", [])]
    period = max((b - a for a, b in cycles), default=0)
    t, key, port, div = trace.col("t"), trace.col("key"), trace.col("port"), trace.col("div")
    by_key = _ByKey(t, key)
    cfg = spec.engine
    scrub_cover = -(-cfg.capacity // cfg.scrub_slots_per_tick) * tick_ns
    batch_ns = round(spec.workload.batch * 1e9)
    for i in range(len(inj.flip_t)):  # one row per drawn flip (faults are few)
        t0, slot = int(inj.flip_t[i]), int(inj.flip_slot[i])
        hit = log[(log[:, 0] == slot) & (log[:, 2] >= t0)]
        det = int(hit[:, 2].min()) if len(hit) else -1
        first = by_key.first_after(int(inj.flip_key[i]), t0) if inj.flip_key[i] else -1
        silent = bool(inj.flip_silent[i])
        if silent:
            bound = period + 2 * tick_ns
            cls = "silent_corruption"
        else:
            cand = [t0 + scrub_cover] + ([first] if first >= 0 else [])
            bound = min(cand) - t0 + tick_ns + batch_ns
            cls = "ecc_single" if inj.flip_bits[i] == 1 else "ecc_multi"
        for w in spec.faults.ring_overflows:  # events wait while the poller is stuck
            a, b = round(w.at * 1e9), round((w.at + w.duration) * 1e9)
            if a <= t0 + bound and b >= t0:
                bound = max(bound, b - t0 + tick_ns + batch_ns)
        rows.append({
            "fault": cls, "at_s": t0 / 1e9, "slot": slot, "bits": int(inj.flip_bits[i]),
            "occupied": bool(inj.flip_key[i]), "scope": "session",
            "first_hit_s": (first - t0) / 1e9 if first >= 0 else None,
            "detect_s": (det - t0) / 1e9 if det >= 0 else None, "bound_s": bound / 1e9,
            "failover_s": 0.0 if det >= 0 else None, "_key": int(inj.flip_key[i]),
        })  # fmt: skip
    f = spec.faults
    watchdog = round(cfg.watchdog_timeout_s * 1e9)
    for kind, wins in (("port_stall", f.stalls), ("engine_failure", f.engine_failures)):
        for w in wins:
            t0, t1 = round(w.at * 1e9), round((w.at + w.duration) * 1e9)
            ports = [w.port] if hasattr(w, "port") else list(range(cfg.n_ports))
            # the first packet that reached the stalled pipeline (not diverted around it)
            on = np.isin(port, ports) & (t >= t0) & ~div.astype(bool)
            first = int(t[on].min()) if on.any() else -1
            fo = [r for r in timeline if r.get("scope") in ("port", "engine")
                  and "failover_ns" in r and r["failover_ns"] >= t0
                  and (r["scope"] == "engine" or r["id"] in ports)]  # fmt: skip
            fb = [r for r in timeline if "failback_ns" in r and r["failback_ns"] >= t1
                  and r.get("scope") in ("port", "engine")
                  and (r["scope"] == "engine" or r["id"] in ports)]  # fmt: skip
            det = min((r["failover_ns"] for r in fo), default=-1)
            if _isolated_at(timeline, ports, t0):  # already carried by software: no harm
                det, first = t0, t0
            eng_fo = [r["failover_ns"] for r in fo if r["scope"] == "engine"]
            until = t1 + (det - t0 if det >= 0 else 0)
            scope = "engine" if any(r["scope"] == "engine" and r["failover_ns"] <= until
                                    for r in fo) else "port"  # fmt: skip
            rows.append({
                "fault": kind, "at_s": w.at, "duration_s": w.duration, "scope": scope,
                "first_hit_s": (first - t0) / 1e9 if first >= 0 else None,
                "detect_s": (det - t0) / 1e9 if det >= 0 else None,
                "bound_s": ((first - t0) + watchdog + tick_ns + batch_ns) / 1e9
                if first >= 0 else None,
                "failover_s": (det - t0) / 1e9 if det >= 0 else None,
                "failback_s": (_first_back(fb, ports, eng_fo) - t1) / 1e9 if fb else None,
                "_ports": ports,
            })  # fmt: skip
    flog = inj.engine.fault_log()
    overflows = [int(o) for o in flog[flog[:, 1] == int(EventType.RING_OVERFLOW), 2]]
    for i, w in enumerate(f.ring_overflows):
        t0, t1 = round(w.at * 1e9), round((w.at + w.duration) * 1e9)
        seen = [o for o in overflows if o >= t0]
        rows.append({
            "fault": "ring_overflow", "at_s": w.at, "duration_s": w.duration, "scope": "engine",
            "events_lost": inj.lost.get(i, 0),
            "detect_s": (min(seen) - t0) / 1e9 if seen else None,
            "bound_s": (t1 - t0 + 2 * tick_ns) / 1e9, "failover_s": None,
        })  # fmt: skip
    for c in crashes:
        rows.append({
            "fault": "manager_crash", "at_s": c["at_ns"] / 1e9, "scope": "manager",
            "detect_s": 0.0, "bound_s": tick_ns / 1e9, "failover_s": None,
            "recover_wall_s": c["recover_wall_s"],
        })  # fmt: skip
    lost_windows = [(round(w.at * 1e9), round((w.at + w.duration) * 1e9))
                    for i, w in enumerate(f.ring_overflows) if inj.lost.get(i, 0)]  # fmt: skip
    for r in rows:
        r["detected"] = r["detect_s"] is not None
        t0 = round(r["at_s"] * 1e9)
        # its event may have been one the stuck poller lost (the patrol cannot see a gone entry)
        r["event_lost"] = not r["detected"] and any(
            t0 <= b and t0 + round(r["bound_s"] * 1e9) >= a for a, b in lost_windows
        )
        r["within_bound"] = r["detected"] and (
            r["bound_s"] is None or r["detect_s"] <= r["bound_s"]
        )
    return {
        "faults": rows, "timeline": timeline, "patrol_period_s": period / 1e9,
        "crashes": len(crashes),
    }  # fmt: skip


def oracle_check(spec: ChaosSpec, vspec: Any, packets: list[PacketBatch],
            changes: list[tuple[int, Any]], trace: Trace) -> dict[str, Any]:  # fmt: skip
    """Run the fault-free oracle over the packets the chaos run did not lose; mark every
    chaos packet misforwarded or lost against it."""
    final, action = trace.col("final"), trace.col("action")
    named = final == Final.NAMED_DROP
    big = spec.softpath.model_copy(update={"capacity": max(spec.softpath.capacity, 1 << 20),
                                           "max_pps": 1e12})  # fmt: skip
    ref = Manager(FastEngine(spec.engine.model_copy(update={"ring_capacity": 1 << 20})),
                  compile_policy(vspec), spec.manager, softpath_config=big)  # fmt: skip
    o_final = np.full(len(final), 255, np.uint8)
    o_action = np.zeros(len(final), np.uint32)
    tick_ns = round(spec.tick * 1e9)
    clock = Replay(tick_ns, ref.tick, next_tick_ns=tick_ns)
    for at, new in changes:
        clock.at(at, partial(ref.apply_policy, new))
    pos = 0
    for pb in packets:
        n = len(pb)
        keep = np.flatnonzero(~named[pos : pos + n])
        clock.advance(int(pb.time_ns[0]) if n else 0)
        if len(keep):
            fate = ref.process(pb.take(keep))
            o_final[pos + keep] = fate.final
            o_action[pos + keep] = fate.action
        pos += n
    fwd = np.isin(final, (Final.HW_FORWARDED, Final.SW_FORWARDED))
    o_fwd = np.isin(o_final, (Final.HW_FORWARDED, Final.SW_FORWARDED))
    mis = fwd & (~o_fwd | (action != o_action))
    lost = ~fwd & (o_fwd | named)
    trace.parts = [{"mis": mis, "lost": lost, **{k: trace.col(k) for k in
                    ("t", "port", "key", "final", "reason", "div")}}]  # fmt: skip
    return {"misforwarded": int(mis.sum()), "lost": int(lost.sum()),
            "oracle_forwarded": int(o_fwd.sum()), "forwarded": int(fwd.sum())}  # fmt: skip


def attribute(report: dict[str, Any], trace: Trace) -> None:
    """Lost and misforwarded packets per fault: within the fault's window and scope."""
    t, mis, lost = trace.col("t"), trace.col("mis"), trace.col("lost")
    key, reason, port = trace.col("key"), trace.col("reason"), trace.col("port")
    for r in report["faults"]:
        t0 = round(r["at_s"] * 1e9)
        end = t0 + round(((r.get("duration_s") or 0) + (r.get("failback_s") or 0)) * 1e9)
        end = max(end, t0 + round((r["detect_s"] or 0) * 1e9))
        win = (t >= t0) & (t <= end)
        if r["fault"] in ("port_stall", "engine_failure"):
            on = np.isin(port, r["_ports"])
            sel = win & on & ((reason == DropReason.PORT_HUNG) | mis)
        elif "_key" in r:  # a table fault: its session's packets from then on
            sel = (t >= t0) & (key == np.uint64(r["_key"])) & r["occupied"]
        else:
            sel = win & (lost | mis)
        r["lost"] = int((sel & lost).sum())
        r["misforwarded"] = int((sel & mis).sum())
    for r in report["faults"]:
        r.pop("_key", None)
        r.pop("_ports", None)


def summary_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per fault class: count, detected, within bound, worst detect, failover, failback,
    lost, misforwarded (what the CLI prints)."""
    out: list[dict[str, Any]] = []
    rows = report["faults"]
    for cls in dict.fromkeys(r["fault"] for r in rows):
        rs = [r for r in rows if r["fault"] == cls]
        det = [r["detect_s"] for r in rs if r["detect_s"] is not None]
        fo = [r["failover_s"] for r in rs if r.get("failover_s") is not None]
        fb = [r["failback_s"] for r in rs if r.get("failback_s") is not None]
        out.append({
            "fault": cls, "count": len(rs), "detected": len(det),
            "within_bound": sum(bool(r["within_bound"]) for r in rs),
            "detect_s_max": max(det, default=None), "failover_s_max": max(fo, default=None),
            "failback_s_max": max(fb, default=None),
            "lost": sum(r.get("lost", 0) for r in rs),
            "misforwarded": sum(r.get("misforwarded", 0) for r in rs),
            "scopes": sorted({r["scope"] for r in rs}),
        })  # fmt: skip
    return out


def chrome_trace(report: dict[str, Any]) -> ChromeTrace:
    """The run as a Perfetto timeline: each fault from injection to detection (and to its
    end for windowed faults), each failed-over scope from failover to failback."""
    tr = ChromeTrace()
    for r in report["faults"]:
        det = r.get("detect_s")
        span = max(r.get("duration_s") or 0.0, det or 0.0)
        args = {k: r.get(k) for k in ("scope", "detect_s", "lost", "misforwarded")}
        tr.slice("faults", r["fault"], r["fault"], r["at_s"], span, "fault", args)
    open_: dict[tuple[str, int], int] = {}
    end = max((r.get("failback_ns", r.get("failover_ns", 0)) for r in report["timeline"]),
              default=0)  # fmt: skip
    for r in sorted(report["timeline"], key=lambda x: x.get("failover_ns", x.get("failback_ns"))):
        key = (str(r["scope"]), int(r["id"]))
        if "failover_ns" in r:
            open_.setdefault(key, int(r["failover_ns"]))
        elif key in open_:
            t0 = open_.pop(key)
            tr.slice("failover", f"{key[0]} {key[1]}", "software", t0 / 1e9,
                     (int(r["failback_ns"]) - t0) / 1e9, "failover")  # fmt: skip
    for (scope, sid), t0 in open_.items():  # still failed over at the end
        tr.slice("failover", f"{scope} {sid}", "software", t0 / 1e9, max(0, end - t0) / 1e9,
                 "failover")  # fmt: skip
    return tr


__all__ = [
    "Trace",
    "attribute",
    "chrome_trace",
    "close_scopes",
    "oracle_check",
    "per_fault",
    "summary_rows",
]
