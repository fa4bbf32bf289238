"""E8 — manager restart recovery: with the background table installed and traffic flowing, the
manager restarts. A new manager is built over the same engine and software datapath and
rebuilds its state by chunked dumps while the engine keeps forwarding; the packets offered
during recovery go to the engine alone (no manager runs), so any packet it punts is lost.
Measured: recovery CPU and wall time, entries read back, packets lost, and whether the
rebuilt state matches (SNAT ports held; with a per-flow mirror also one udpif_key per
hardware entry).

The baselines recover with SoftwareCentric.recover: the same SNAT rebuild and, for the
OVS-like one, one more full dump from which the udpif_key mirror is rebuilt (as OVS's
revalidators after a restart), with traffic offered between the chunks of both dumps."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from starfabric.fornax.engine import Outcome
from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.harness import Context, Run
from starfabric.fornax.experiments.output import Result, bar_plot
from starfabric.fornax.manager import Manager

COLUMNS = [("controller", "controller"), ("entries", "entries read"),
           ("recovery_cpu_s", "recovery CPU s"), ("recovery_wall_s", "recovery wall s"),
           ("offered_during", "pkts during"), ("lost", "pkts lost"),
           ("state_ok", "state rebuilt")]  # fmt: skip
#: Keep-alive packets offered between two dump chunks (assumption: traffic keeps flowing).
PACKETS_PER_CHUNK = 2048
#: The recovery dump reads the table in this many chunks at least (assumption), so traffic
#: runs between chunks at every scale.
MIN_CHUNKS = 16


class _Traffic:
    """Keep-alive packets of random background sessions offered to the engine alone (between
    dump chunks, while no manager runs); counts what it punts (lost)."""

    def __init__(self, r: Run, engine: Any, n: int) -> None:
        self.r, self.engine, self.n = r, engine, n
        self.rng = np.random.default_rng(8)
        self.offered = self.lost = 0

    def __call__(self) -> None:
        ids = np.unique(self.rng.integers(0, self.n, PACKETS_PER_CHUNK))
        t = self.r.now_ns
        self.r.now_ns += 100_000
        pk = traffic.keepalive(ids, t, t + 100_000)
        out = self.engine.process(pk)
        self.offered += len(pk)
        self.lost += int((out.outcome != Outcome.HIT).sum())


def _restart(old: Any, between: Any) -> Any:
    """A new controller of old's kind over old's engine and software datapath, rebuilt by
    dumps (a baseline's mirror too)."""
    cap = old.engine.config.capacity
    cfg = old.config.model_copy(update={"recover_chunk": max(1024, -(-cap // MIN_CHUNKS))})
    if type(old) is Manager:
        return Manager.recover(old.engine, old.policy, cfg, softpath=old.softpath,
                               between_chunks=between)  # fmt: skip
    return type(old).recover(old.hw, old.policy, cfg, softpath=old.softpath,
                             between_chunks=between, baseline=old.baseline)  # fmt: skip


def _state_ok(old_mirror: int | None, new: Any, held: int) -> bool:
    """SNAT ports held as before and, with a mirror, one live ukey per hardware entry."""
    ok = int(new.nat.allocated()) == held
    mirror = getattr(new, "mirror", None)
    if mirror is not None:
        ok = ok and mirror.count == old_mirror == new.flows()
    return bool(ok)


def run(ctx: Context) -> Result:
    sc = ctx.scale
    n = sc.table
    spec = traffic.vpc_spec(n)
    res = Result("E8", f"manager restart with {n:,} sessions and traffic flowing", COLUMNS)
    for c in ctx.runnable(n, res.notes, "fornax", "baseline"):
        with ctx.task(f"E8 {c.name}", n) as adv, ctx.controller(c, n, spec) as r:
            r.fill(n, on_batch=adv)
            r.advance(r.now_ns + 1)
            cp: Any = r.cp  # a Manager (or a subclass): its engine and SNAT pools
            held = int(cp.nat.allocated())
            mirror = getattr(cp, "mirror", None)
            ukeys = int(mirror.count) if mirror is not None else None
            if mirror is not None:  # the old process is gone, and its memory with it
                mirror.free()
            between = _Traffic(r, cp.engine, n)
            t0 = time.perf_counter()
            new = _restart(cp, between)
            wall = time.perf_counter() - t0
            res.rows.append({
                "controller": c.name,
                "entries": int(new.metrics.ops.get("dump_entries", 0)),
                "recovery_cpu_s": float(new.metrics.cpu_s["recovery"]),
                "recovery_wall_s": wall, "offered_during": between.offered,
                "lost": between.lost, "state_ok": _state_ok(ukeys, new, held),
            })  # fmt: skip
            del new
    res.summary = {"sessions": n,
                   "lost": {row["controller"]: row["lost"] for row in res.rows}}  # fmt: skip
    return res


def plot(res: Result) -> Any:
    return bar_plot(res, "recovery_cpu_s", "recovery CPU s")
