"""Manager metrics: CPU time by activity (thread CPU clock, engine emulation excluded),
engine operations, events, software bytes; exported as JSON and Prometheus text."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from starfabric._jit import compile_cpu_s

ACTIVITIES = ("miss", "events", "policy", "patrol", "recovery", "aging", "promote")
OPS = ("insert", "delete", "modify", "query", "dump", "dump_entries", "bump_version", "poll")
"""Control-channel operations; `datapath` (process/scrub calls, n=0) is timed, not counted."""


class Metrics:
    """Counters the manager keeps about itself (never per session)."""

    def __init__(self) -> None:
        self.cpu_s = dict.fromkeys(ACTIVITIES, 0.0)
        self.engine_cpu_s = 0.0  # time inside engine calls (emulated hardware), not management
        self.softpath_cpu_s = 0.0  # time forwarding punted packets in software (a datapath)
        self.ops = dict.fromkeys((*OPS, "datapath"), 0)
        self.events: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self._stack: list[str] = []

    @contextmanager
    def activity(self, name: str) -> Iterator[None]:
        """Charge the thread CPU time of the block (minus engine calls) to `name`.

        Nested activities charge only the outer one; engine calls and software forwarding
        (datapaths, not management) are subtracted, and so is numba compilation (a one-time
        cost of the first run on a machine, not management work)."""
        if self._stack:
            yield
            return
        self._stack.append(name)
        t0, hw0, sw0 = time.thread_time(), self.engine_cpu_s, self.softpath_cpu_s
        c0 = compile_cpu_s()
        try:
            yield
        finally:
            self._stack.pop()
            datapath = (self.engine_cpu_s - hw0) + (self.softpath_cpu_s - sw0)
            jit = compile_cpu_s() - c0
            self.cpu_s[name] += (time.thread_time() - t0) - datapath - jit

    @contextmanager
    def engine_call(self, op: str, n: int = 1) -> Iterator[None]:
        t0, c0 = time.thread_time(), compile_cpu_s()
        try:
            yield
        finally:
            self.engine_cpu_s += (time.thread_time() - t0) - (compile_cpu_s() - c0)
            self.ops[op] += n

    @property
    def control_ops(self) -> int:
        """Entry operations issued (dumps counted per entry read back; polls not counted)."""
        return sum(v for k, v in self.ops.items() if k not in ("datapath", "dump", "poll"))

    @contextmanager
    def softpath_call(self) -> Iterator[None]:
        t0, c0 = time.thread_time(), compile_cpu_s()
        try:
            yield
        finally:
            self.softpath_cpu_s += (time.thread_time() - t0) - (compile_cpu_s() - c0)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def event(self, name: str, n: int = 1) -> None:
        self.events[name] = self.events.get(name, 0) + n

    @property
    def mgmt_cpu_s(self) -> float:
        return float(sum(self.cpu_s.values()))

    def as_dict(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mgmt_cpu_s": self.mgmt_cpu_s,
            "cpu_s_by_activity": dict(self.cpu_s),
            "engine_emulation_cpu_s": self.engine_cpu_s,
            "software_forwarding_cpu_s": self.softpath_cpu_s,
            "engine_ops": dict(self.ops),
            "events": dict(self.events),
            "counts": dict(self.counts),
        }
        out.update(extra or {})
        return out

    def prometheus(self, gauges: dict[str, float] | None = None) -> bytes:
        """Prometheus text exposition (prometheus-client) of everything above plus gauges."""
        reg = CollectorRegistry()
        cpu = Counter("fornax_manager_cpu_seconds", "Management CPU by activity", ["activity"],
                      registry=reg)  # fmt: skip
        for k, v in self.cpu_s.items():
            cpu.labels(k).inc(max(v, 0.0))
        ops = Counter("fornax_manager_engine_ops", "Engine operations issued", ["op"],
                      registry=reg)  # fmt: skip
        for k, n in self.ops.items():
            ops.labels(k).inc(n)
        ev = Counter("fornax_manager_events", "Hardware events handled", ["type"], registry=reg)
        for k, n in self.events.items():
            ev.labels(k).inc(n)
        ct = Counter("fornax_manager_actions", "Manager actions", ["what"], registry=reg)
        for k, n in self.counts.items():
            ct.labels(k).inc(n)
        for name, value in (gauges or {}).items():
            Gauge(f"fornax_manager_{name}", name.replace("_", " "), registry=reg).set(value)
        return generate_latest(reg)


__all__ = ["ACTIVITIES", "OPS", "Metrics"]
