"""Shared machinery of the experiments: the control planes compared (Fornax's Manager and the
software-centric baselines, all on the same emulated engine), filling a table, replaying
traffic on the simulated clock with ticks, and progress.

Controllers are built one after another and dropped before the next one is built (the
machine is shared): an experiment asks `ctx.contenders` for factories, never for instances.
"""

from __future__ import annotations

import gc
import os
import pickle
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from starfabric.fornax.engine import EngineConfig
from starfabric.fornax.engine.layout import BYTES_PER_ENTRY
from starfabric.fornax.experiments import traffic
from starfabric.fornax.experiments.scales import Scale
from starfabric.fornax.manager import Fate, Final, Ledger
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.replay import Replay
from starfabric.fornax.vpc import CompiledPolicy, VpcSpec, compile_policy
from starfabric.fornax.workload import WorkloadBatch

#: Engine slots per session given to every contender: the same NIC table for all, sized so a
#: per-direction design (two entries per connection) fits at 80% fill (assumption).
SLOTS_PER_SESSION = 2.5
#: Simulated seconds between ticks (scrub, events, aging threads, revalidators); assumption,
#: as the scenario runner's default.
TICK_S = 0.01
#: Simulated connection rate of a table fill (assumption: below the setup budget of every
#: contender so a fill itself drops nothing).
FILL_CPS = 1.0e6
#: Share of the machine's available memory (MemAvailable when a contender is built) a
#: contender's estimated resident set may take; above it the contender is left out of that
#: table size with a note (assumption: room for temporaries and the rest of the process).
MEMORY_HEADROOM = 0.85

T = TypeVar("T")


class ControlPlane(Protocol):
    """What an experiment needs of a controller (Manager satisfies it, so do the baselines)."""

    ledger: Ledger
    metrics: Any

    def process(self, batch: PacketBatch) -> Fate: ...
    def apply_policy(self, spec: VpcSpec) -> Any: ...
    def tick(self, now_ns: int) -> None: ...
    @property
    def software_bytes(self) -> int: ...
    def sessions(self) -> int: ...
    def summary(self) -> dict[str, Any]: ...


Builder = Callable[[EngineConfig, CompiledPolicy, "float | None"], ControlPlane]
"""(engine config, policy, software idle timeout or None for the controller's default)."""


@dataclass(frozen=True)
class Contender:
    """A named control plane and how to build it on a given engine config and policy.

    role: "fornax" (the Manager), "baseline" (software-centric presets), "reference" (the
    baseline family's Fornax preset, E9's yardstick) or "ablation"."""

    name: str
    build: Builder
    role: str = "baseline"
    mirror: bool = False
    """Keeps a per-flow software mirror (memory grows with the table: see Scale)."""


def engine_config(sessions: int, **overrides: Any) -> EngineConfig:
    """The engine every contender gets for a table of `sessions` (see SLOTS_PER_SESSION)."""
    cap = max(1024, -(-int(sessions * SLOTS_PER_SESSION) // 8) * 8)
    return EngineConfig(capacity=cap, **overrides)


def forwarded(ledger: Ledger) -> int:
    return int(ledger.final[Final.HW_FORWARDED] + ledger.final[Final.SW_FORWARDED])


def dropped(ledger: Ledger) -> int:
    """Packets not forwarded (policy drops included: the experiments' traffic is allowed)."""
    return int(ledger.offered) - forwarded(ledger)


class Run:
    """One contender under test: the controller and its clock (fornax/replay.py: a tick
    every TICK_S of simulated time)."""

    def __init__(self, name: str, cp: ControlPlane, now_ns: int = 0) -> None:
        self.name = name
        self.cp = cp
        self.now_ns = now_ns
        self.clock = Replay(int(TICK_S * 1e9), self._tick, next_tick_ns=0)

    def _tick(self, t_ns: int) -> None:
        self.cp.tick(t_ns)
        self.now_ns = t_ns

    @property
    def next_tick_ns(self) -> int:
        return int(self.clock.next_tick_ns or 0)

    @next_tick_ns.setter
    def next_tick_ns(self, t_ns: int) -> None:
        self.clock.next_tick_ns = t_ns

    @property
    def ticks(self) -> int:
        return self.clock.ticks

    def advance(self, until_ns: int) -> None:
        """Run every tick due up to `until_ns`."""
        self.clock.tick_until(until_ns)

    def offer(self, batch: PacketBatch) -> Fate:
        if len(batch):
            self.advance(int(batch.time_ns[0]))
            self.now_ns = max(self.now_ns, int(batch.time_ns[-1]))
        return self.cp.process(batch)

    def replay(self, batches: Iterable[WorkloadBatch]) -> int:
        """Offer workload windows; returns the end of the last window (ns)."""
        end = self.now_ns

        def window(wb: WorkloadBatch) -> None:
            nonlocal end
            if len(wb.packets):
                self.cp.process(wb.packets)
            end = wb.t_end_ns

        self.clock.replay(batches, window)
        self.advance(end)
        return end

    def fill(
        self,
        n: int,
        *,
        tcp_share: float = 0.0,
        handshake: bool = False,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        """Set up background sessions 0..n-1 (no ticks while filling: a fill is not part of
        any measurement); `handshake` completes TCP sessions (SYN-ACK, ACK)."""
        t0 = self.now_ns
        for b in traffic.background_fill_batches(n, t0, FILL_CPS, tcp_share=tcp_share):
            self.cp.process(b)
            if on_batch is not None:
                on_batch(len(b))
        self.now_ns = t0 + int(n * 1e9 / FILL_CPS) + 1
        if handshake and tcp_share > 0:
            for start in range(0, n, traffic.BATCH):
                ids = np.arange(start, min(n, start + traffic.BATCH), dtype=np.int64)
                ids = ids[(ids % 1000) < int(round(tcp_share * 1000))]
                self.cp.process(
                    traffic.keepalive(ids, self.now_ns, self.now_ns + 1000, tcp_share=1.0)
                )
                self.cp.process(traffic.ack_packets(ids, self.now_ns + 2000))
                if on_batch is not None:
                    on_batch(0)
            self.now_ns += 3000
        self.next_tick_ns = self.now_ns + int(TICK_S * 1e9)


@dataclass
class Context:
    """What an experiment runs with: its scale, the contenders, progress reporting."""

    scale: Scale
    contenders: list[Contender]
    progress: Any = None  # rich.progress.Progress or None
    log: list[str] = field(default_factory=list)
    ovs_calibration: Any = None  # baselines.OvsCalibration the OVS-like contenders run with

    def by_role(self, *roles: str) -> list[Contender]:
        return [c for c in self.contenders if c.role in roles]

    def runnable(self, n: int, notes: list[str], *roles: str) -> list[Contender]:
        """Contenders of `roles` that fit at `n` sessions: under the scale's mirror cap (when
        it sets one) and, by estimate, in the memory this machine has available; a note in
        `notes` names each one left out and why."""
        cap = self.scale.mirror_max_sessions
        avail = available_bytes()
        out = []
        for c in self.by_role(*roles):
            msg = None
            if c.mirror and cap is not None and n > cap:
                msg = (f"{c.name} not run at {n:,} sessions: the scale caps contenders with a "
                       f"per-flow mirror at mirror_max_sessions = {cap:,}")  # fmt: skip
            elif avail is not None and (need := resident_estimate(c, n)) > MEMORY_HEADROOM * avail:
                msg = (f"{c.name} not run at {n:,} sessions: it needs about "
                       f"{need / 2**30:.1f} GiB and this machine has "
                       f"{avail / 2**30:.1f} GiB available (MEMORY_HEADROOM "
                       f"{MEMORY_HEADROOM:g})")  # fmt: skip
            if msg is not None:
                if msg not in notes:
                    notes.append(msg)
                continue
            out.append(c)
        return out

    @contextmanager
    def task(self, description: str, total: float) -> Iterator[Callable[[float], None]]:
        """A progress bar (when one is shown); yields `advance(amount)`."""
        if self.progress is None:
            yield lambda _x: None
            return
        tid = self.progress.add_task(description, total=total)
        try:
            yield lambda x: self.progress.advance(tid, x)
        finally:
            self.progress.remove_task(tid)

    @contextmanager
    def controller(
        self,
        c: Contender,
        sessions: int,
        spec: VpcSpec,
        *,
        idle_timeout_s: float | None = None,
        **engine: Any,
    ) -> Iterator[Run]:
        """Build `c` for a table of `sessions` (engine timeouts in `engine`, a software idle
        timeout for controllers that age in software); freed (and collected) on exit, so the
        next contender never shares the machine's memory with it."""
        cfg = engine_config(sessions, **engine)
        run = Run(c.name, c.build(cfg, compile_policy(spec), idle_timeout_s))
        try:
            yield run
        finally:
            del run
            gc.collect()


def resident_estimate(c: Contender, sessions: int) -> int:
    """Bytes a contender holds in memory at `sessions` live sessions: the engine table and,
    with a mirror, two flows per session of in-memory ukey rows plus their hash index (the
    ukeys' netlink buffers spill to a file-backed map, see baselines.mirror)."""
    from starfabric.fornax.baselines.mirror import FlowMirror

    est = engine_config(sessions).capacity * BYTES_PER_ENTRY
    if c.mirror:
        est += FlowMirror.resident_bytes(2 * sessions)
    return int(est)


def _proc_bytes(path: str, field: str) -> int | None:
    """A "Field:   N kB" line of a /proc file, in bytes (None where there is none)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where there is no such file)."""
    return _proc_bytes("/proc/meminfo", "MemAvailable")


def _anon_rss_bytes() -> int | None:
    return _proc_bytes("/proc/self/status", "RssAnon")


def can_branch() -> bool:
    """Whether `branch` may run a copy-on-write child now: the platform forks, and the child
    could rewrite every anonymous page of this process within the memory available."""
    if not hasattr(os, "fork"):
        return False
    rss, avail = _anon_rss_bytes(), available_bytes()
    return rss is not None and avail is not None and rss <= MEMORY_HEADROOM * avail


def branch(fn: Callable[[], T]) -> T | None:
    """fn() run in a forked child on a copy-on-write image of this process (a filled table
    is measured several times without filling it again); its picklable result, or None when
    the child died without one (killed, e.g. out of memory). An exception in fn is raised
    here again."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        code = 0
        try:
            os.close(rfd)
            try:
                data = pickle.dumps(("ok", fn()))
            except BaseException as e:
                data = pickle.dumps(("error", f"{type(e).__name__}: {e}",
                                     traceback.format_exc()))  # fmt: skip
            with os.fdopen(wfd, "wb") as w:
                w.write(data)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as rd:
        data = rd.read()
    os.waitpid(pid, 0)
    if not data:
        return None
    msg = pickle.loads(data)
    if msg[0] == "error":
        raise RuntimeError(f"{msg[1]} (in a branched run)\n{msg[2]}")
    out: T = msg[1]
    return out


def ratio(a: float, b: float) -> float | None:
    """a / b, or None when b is 0 (JSON null)."""
    return float(a) / float(b) if b else None


def common_ratio(rows: list[dict[str, Any]], key: str, ctx: Context) -> dict[str, Any]:
    """Fornax / each other contender of `key`, at the largest table size both ran at."""
    fx = next((c.name for c in ctx.by_role("fornax")), "")
    at: dict[str, int] = {}
    vals: dict[str, float] = {}
    mine = {r["sessions"]: float(r[key]) for r in rows if r["controller"] == fx}
    for r in rows:
        name, n = str(r["controller"]), int(r["sessions"])
        if name != fx and n in mine and n >= at.get(name, -1):
            at[name], vals[name] = n, float(r[key])
    return {
        "largest_sessions": max(mine) if mine else 0,
        f"{key}_fornax": mine,
        "compared_at_sessions": at,
        f"{key}_at_compared": vals,
        "ratio_vs": {k: ratio(mine[at[k]], v) for k, v in vals.items()},
    }


def cpu_now(run: Run) -> float:
    return float(run.cp.metrics.mgmt_cpu_s)


def wall() -> float:
    return time.perf_counter()


__all__ = [
    "FILL_CPS",
    "MEMORY_HEADROOM",
    "SLOTS_PER_SESSION",
    "TICK_S",
    "Builder",
    "Contender",
    "Context",
    "ControlPlane",
    "Run",
    "available_bytes",
    "branch",
    "can_branch",
    "common_ratio",
    "cpu_now",
    "dropped",
    "engine_config",
    "forwarded",
    "ratio",
    "resident_estimate",
    "wall",
]
