"""Chaos runs: traffic, policy changes and injected hardware/software faults together on a
simulated clock, through the engine and the ResilientManager, with a per-fault report.

Fault classes (YAML `faults:`):
  bit_flips        flips per entry-hour over occupied (or all) slots, `bits` per event (1 is
                   corrected by ECC, 2+ is detected uncorrectable); drawn as arrays per tick
  stalls           a port's pipeline stops at `at` for `duration` (a reset before the end
                   does not help); detected by the engine watchdog
  ring_overflows   the manager's event poller is stuck from `at` for `duration`, so the
                   bounded ring overflows and events are lost (the patrol covers them)
  crashes          the manager process dies at `at` and restarts (Manager.recover)
  engine_failures  the whole pipeline stops (every port) from `at` for `duration`

Misforwarded and lost packets are measured against an oracle: a fault-free Fornax (plain
Manager, same engine configuration, a software table large enough to never refuse) fed the
same packets minus those the chaos run lost before any session state saw them (named drops),
so the two see the same connections. Tests also check against the plain per-packet
conntrack reference (tests/fornax/manager/reference.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, field_validator, model_validator

from starfabric.config import Spec, load_spec
from starfabric.fornax.engine import (
    EVENT_DTYPE,
    EngineConfig,
    EventType,
    FastEngine,
    ProcessResult,
    ScrubResult,
    SessionEngine,
)
from starfabric.fornax.engine.ecc import ecc_encode
from starfabric.fornax.engine.layout import N_DATA_WORDS, N_WORDS, W_ECC
from starfabric.fornax.engine.proxy import EngineProxy
from starfabric.fornax.keys import canonicalize, key_hash
from starfabric.fornax.manager.accounting import Ledger
from starfabric.fornax.manager.config import ManagerConfig
from starfabric.fornax.manager.failover import ResilientManager
from starfabric.fornax.manager.health import HealthConfig
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.ranges import IngressPort, Seed
from starfabric.fornax.replay import Replay
from starfabric.fornax.run.chaos_report import (
    Trace,
    attribute,
    close_scopes,
    oracle_check,
    per_fault,
    summary_rows,
)
from starfabric.fornax.softpath import SoftPathConfig
from starfabric.fornax.vpc import compile_policy, load_vpc_spec
from starfabric.fornax.workload import (
    SyntheticWorkload,
    WorkloadBatch,
    parse_workload,
    workload_batches,
)
from starfabric.units import parse_duration

RECORD_BITS = N_WORDS * 64
_HIDDEN_EVENTS = (int(EventType.ECC_CORRECTED), int(EventType.ECC_UNCORRECTABLE),
                  int(EventType.PIPELINE_HANG))  # fmt: skip
_FAULT_EVENTS = (*_HIDDEN_EVENTS, int(EventType.RING_OVERFLOW))


def _dur(v: Any) -> Any:
    return parse_duration(v, "duration") if isinstance(v, str) else v


class BitFlips(Spec):
    """Random bit flips in session records over a time window."""

    rate_per_entry_hour: float = Field(gt=0, description="flip events per entry per hour")
    bits: int = Field(1, ge=1, le=8, description="bits flipped per event (1: correctable)")
    start: float = Field(0.0, ge=0, description="seconds")
    end: float | None = Field(None, gt=0, description="seconds (default: end of the run)")
    target: str = Field("occupied", pattern="^(occupied|any)$", description="slots drawn from")
    silent: bool = Field(
        False,
        description="also rewrite the check word so ECC cannot see it (only the patrol can)",
    )

    _d = field_validator("start", "end", mode="before")(_dur)


class Window(Spec):
    """A fault that starts at `at` and lasts `duration`."""

    at: float = Field(ge=0)
    duration: float = Field(gt=0)

    _d = field_validator("at", "duration", mode="before")(_dur)


class PortStall(Window):
    port: IngressPort


class Crash(Spec):
    at: float = Field(ge=0)

    _d = field_validator("at", mode="before")(_dur)


class Faults(Spec):
    """Every fault of a chaos run."""

    bit_flips: tuple[BitFlips, ...] = ()
    stalls: tuple[PortStall, ...] = ()
    ring_overflows: tuple[Window, ...] = ()
    crashes: tuple[Crash, ...] = ()
    engine_failures: tuple[Window, ...] = ()


class ChaosSpec(Spec):
    """What `starfabric fornax chaos` runs; relative paths are relative to the file."""

    vpc: str
    workload: SyntheticWorkload
    #: default engine of a chaos run (assumption: a small table, so a run is seconds)
    engine: EngineConfig = EngineConfig(capacity=65536, ring_capacity=4096, n_ports=8)
    manager: ManagerConfig = ManagerConfig()
    softpath: SoftPathConfig = SoftPathConfig()
    health: HealthConfig = HealthConfig()
    tick: float = Field(0.002, gt=0, description="seconds between manager ticks (assumption)")
    seed: Seed = Field(0, description="seed of the fault draws")
    faults: Faults = Faults()

    _t = field_validator("tick", mode="before")(_dur)

    @model_validator(mode="after")
    def _faults_in_run(self) -> ChaosSpec:
        """A fault must start while traffic runs and name an existing port."""
        end = self.workload.duration
        f = self.faults
        starts = [("bit_flips", b.start) for b in f.bit_flips]
        starts += [(k, w.at) for k in ("stalls", "ring_overflows", "engine_failures", "crashes")
                   for w in getattr(f, k)]  # fmt: skip
        for s in f.stalls:
            if s.port >= self.engine.n_ports:
                raise ValueError(
                    f"faults.stalls: port {s.port} does not exist (engine.n_ports {self.engine.n_ports})"
                )
        for kind, at in starts:
            if at >= end:
                raise ValueError(
                    f"faults.{kind}: a fault at {at:g} s starts after the run ends "
                    f"(workload.duration {end:g} s)"
                )
        for b in f.bit_flips:
            if b.end is not None and b.end <= b.start:
                raise ValueError(
                    f"faults.bit_flips: end {b.end:g} s is not after start {b.start:g} s"
                )
        return self

    @field_validator("workload", mode="before")
    @classmethod
    def _workload(cls, v: Any) -> Any:
        return parse_workload(v, source="workload") if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _ports(self) -> ChaosSpec:
        for s in self.faults.stalls:
            if s.port >= self.engine.n_ports:
                raise ValueError(
                    f"faults.stalls: port {s.port} >= engine.n_ports {self.engine.n_ports}"
                )
        return self


def load_chaos(path: str | Path) -> tuple[ChaosSpec, Path]:
    """Read a chaos file; returns it with its directory (the base of relative paths)."""
    return load_spec(ChaosSpec, path), Path(path).resolve().parent


class ChaosEngine(EngineProxy):
    """A SessionEngine with hardware faults that software cannot simply reset away: a port
    (or the whole pipeline) stays stalled while its fault lasts, and a stuck event poller
    sees nothing while the ring fills. Everything else is the wrapped engine."""

    def __init__(self, inner: SessionEngine, *, hide_faults: bool = False) -> None:
        super().__init__(inner)
        self.faulty_ports = np.zeros(inner.config.n_ports, bool)
        self.poll_paused = False
        self.hide_faults = hide_faults
        self.now = 0
        # (slot, event type, ns) of every fault event software learned of: ECC, hang and
        # overflow records when polled; with hide_faults (a NIC without such events, as
        # under OVS TC offload) ECC/hang records are withheld and logged at the time the
        # hardware read that found them, which software caused (a packet or a dump)
        self.log: list[np.ndarray] = []

    def process(self, batch: PacketBatch) -> ProcessResult:
        if len(batch):
            self.now = max(self.now, int(batch.time_ns[-1]))
        return self.inner.process(batch)

    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        if self.poll_paused:
            return np.zeros(0, EVENT_DTYPE)
        ev = self.inner.poll_events(max_n)
        t = ev["type"]
        fault = np.isin(t, _FAULT_EVENTS)
        if fault.any():
            e = ev[fault]
            when = np.full(len(e), self.now, np.int64)
            hidden = np.isin(e["type"], _HIDDEN_EVENTS) & self.hide_faults
            when[hidden] = e["time_ns"][hidden]
            self.log.append(np.stack([e["slot"], e["type"].astype(np.int64), when], 1))
            if self.hide_faults:
                ev = ev[~np.isin(t, _HIDDEN_EVENTS)]
        return ev

    def scrub(self, now_ns: int, n_slots: int | None = None) -> ScrubResult:
        self.now = max(self.now, int(now_ns))
        return self.inner.scrub(now_ns, n_slots)

    def fault_log(self) -> np.ndarray:
        """Rows (slot, event type, ns) of fault events (see `log`)."""
        return np.concatenate(self.log) if self.log else np.zeros((0, 3), np.int64)

    def unstall_port(self, port: int) -> None:
        """A reset: it works only once the port's fault is over."""
        if not self.faulty_ports[port]:
            self.inner.unstall_port(port)


def assign_ports(batch: PacketBatch, n_ports: int) -> PacketBatch:
    """Ingress port of each packet from its sender (an ENI's VF or the uplink), so the two
    directions of a connection usually arrive on different ports (assumption)."""
    if n_ports <= 1 or not len(batch):
        return batch
    h = (batch.src_lo ^ (batch.src_hi >> np.uint64(7)) ^ batch.vni.astype(np.uint64)) * np.uint64(
        0x9E3779B97F4A7C15
    )
    port = ((h >> np.uint64(40)) % np.uint64(n_ports)).astype(np.uint16)
    cols = batch.columns()
    cols["port"] = port
    return PacketBatch(**cols)


def silent_bits(bit: int) -> list[int]:
    """Flips that change data bit `bit` and leave a valid SEC-DED codeword (the code is
    linear, so the check-word change depends only on the bit)."""
    words = [0] * N_DATA_WORDS
    words[bit // 64] = 1 << (bit % 64)
    diff = ecc_encode(words)
    return [bit] + [W_ECC * 64 + j for j in range(64) if diff >> j & 1]


class Injector:
    """Applies the faults of a spec to a ChaosEngine as simulated time advances; every fault
    drawn is logged as rows of arrays."""

    def __init__(self, spec: ChaosSpec, engine: ChaosEngine, self_heal: bool = False) -> None:
        self.spec = spec
        self.self_heal = self_heal
        self.engine = engine
        self.rng = np.random.default_rng(spec.seed)
        self.last_ns = 0
        # flips: time, slot, bits, key hash of the victim (0: empty slot), silent
        self.flip_t = np.zeros(0, np.int64)
        self.flip_slot = np.zeros(0, np.int64)
        self.flip_bits = np.zeros(0, np.int64)
        self.flip_key = np.zeros(0, np.uint64)
        self.flip_silent = np.zeros(0, bool)
        self.lost0: dict[int, int] = {}
        self.lost: dict[int, int] = {}

    def _windows(self, now: int) -> None:
        f = self.spec.faults
        e = self.engine
        faulty = np.zeros(e.config.n_ports, bool)
        for s in f.stalls:
            if s.at * 1e9 <= now < (s.at + s.duration) * 1e9:
                faulty[s.port] = True
        for w in f.engine_failures:
            if w.at * 1e9 <= now < (w.at + w.duration) * 1e9:
                faulty[:] = True
        for p in np.flatnonzero(faulty & ~e.faulty_ports):
            e.inner.stall_port(int(p))
        if self.self_heal:  # a controller that never resets ports: the NIC recovers alone
            for p in np.flatnonzero(e.faulty_ports & ~faulty):
                e.inner.unstall_port(int(p))
        e.faulty_ports = faulty
        lost = int(e.inner.counters().get("events_lost", 0))
        for i, w in enumerate(f.ring_overflows):
            active = w.at * 1e9 <= now < (w.at + w.duration) * 1e9
            if active and i not in self.lost0:
                self.lost0[i] = lost
            if not active and i in self.lost0 and i not in self.lost:
                self.lost[i] = lost - self.lost0[i]  # events the ring dropped meanwhile
        e.poll_paused = any(w.at * 1e9 <= now < (w.at + w.duration) * 1e9
                            for w in f.ring_overflows)  # fmt: skip

    def step(self, now: int) -> None:
        """Faults due up to `now` (a process of the replay clock: every tick)."""
        self._windows(now)
        dt_h = max(0, now - self.last_ns) / 3.6e12
        self.last_ns = now
        for bf in self.spec.faults.bit_flips:
            end = bf.end * 1e9 if bf.end is not None else float("inf")
            if not bf.start * 1e9 <= now < end:
                continue
            self._flips(bf, now, dt_h)

    def _flips(self, bf: BitFlips, now: int, dt_h: float) -> None:
        inner = self.engine.inner
        cap = inner.config.capacity
        n_targets = inner.occupancy() if bf.target == "occupied" else cap
        n = int(self.rng.poisson(bf.rate_per_entry_hour * n_targets * dt_h))
        if n <= 0 or n_targets <= 0:
            return
        recs, _ = inner.dump(0, cap) if bf.target == "occupied" else (None, 0)
        if recs is not None and not len(recs):
            return
        if recs is not None:
            pick = self.rng.integers(0, len(recs), n)
            slots = recs["slot"][pick]
            from starfabric.fornax.manager.decide import original_from_entries

            victims = recs[pick].copy()
            victims["vni"] &= np.uint32(0xFFFFFF)  # per-direction entries mark bit 31
            keys = key_hash(canonicalize(original_from_entries(victims)))
        else:
            slots = self.rng.integers(0, cap, n)
            keys = np.zeros(n, np.uint64)
        bits = np.argsort(self.rng.random((n, RECORD_BITS)), axis=1)[:, : bf.bits]
        if bf.silent:  # data bits only, each with its check-word image
            bits = self.rng.integers(0, N_DATA_WORDS * 64, (n, 1))
        for s, row in zip(slots, bits, strict=True):
            flips = silent_bits(int(row[0])) if bf.silent else [int(b) for b in row]
            inner.flip_bits(int(s), flips)
        self.flip_t = np.concatenate([self.flip_t, np.full(n, now, np.int64)])
        self.flip_slot = np.concatenate([self.flip_slot, slots.astype(np.int64)])
        self.flip_bits = np.concatenate([self.flip_bits, np.full(n, bf.bits, np.int64)])
        self.flip_key = np.concatenate([self.flip_key, keys])
        self.flip_silent = np.concatenate([self.flip_silent, np.full(n, bf.silent)])


def _resolve(base: Path, p: str) -> str:
    q = Path(p)
    return str(q if q.is_absolute() else base / q)


def resilient(engine: SessionEngine, policy: Any, spec: ChaosSpec) -> ResilientManager:
    """The Fornax controller of a chaos run (the default `build`)."""
    return ResilientManager(engine, policy, spec.manager, softpath_config=spec.softpath,
                            health=spec.health)  # fmt: skip


def run_chaos(
    spec: ChaosSpec,
    base: Path,
    *,
    build: Callable[[SessionEngine, Any, ChaosSpec], Any] = resilient,
    fault_events: bool = True,
    vpc: Any = None,
    changes: list[tuple[float, Any]] | None = None,
    progress: Callable[[float], None] | None = None,
    oracle: bool = True,
    on_batch: Callable[[PacketBatch, Any], None] | None = None,
    on_policy: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run traffic + policy changes + faults; returns the per-fault report (see the module
    docstring). `build(engine, policy, spec)` makes the controller (default: Fornax's
    ResilientManager); `fault_events=False` models a NIC that reports no ECC or hang events
    and whose ports recover by themselves when a fault ends (a software-centric baseline);
    a crash restarts only a ResilientManager. `on_batch(packets, fate)` and
    `on_policy(vpc_spec)` let a test check every packet against its own reference. `vpc` (a
    VpcSpec) and `changes` ((seconds, VpcSpec) pairs) replace the spec's files."""
    wall0 = time.perf_counter()
    vspec = vpc if vpc is not None else load_vpc_spec(_resolve(base, spec.vpc))
    wl = spec.workload
    files = [c.model_copy(update={"vpc": _resolve(base, c.vpc)}) for c in wl.policy_changes]
    wl = wl.model_copy(update={"policy_changes": tuple(files)})
    pairs = [(c.at, load_vpc_spec(c.vpc)) for c in files] if changes is None else changes
    pending = sorted(((round(at * 1e9), v) for at, v in pairs), key=lambda x: x[0])
    eng = ChaosEngine(FastEngine(spec.engine), hide_faults=not fault_events)
    m = build(eng, compile_policy(vspec), spec)
    inj = Injector(spec, eng, self_heal=not fault_events)
    tick_ns = round(spec.tick * 1e9)
    managers: list[Any] = []
    ledgers: list[Ledger] = []
    crashes: list[dict[str, Any]] = []
    trace = Trace()
    packets: list[PacketBatch] = []
    change_log: list[tuple[int, Any]] = []
    duration_ns = round(wl.duration * 1e9)
    n_ports = spec.engine.n_ports

    def crash(t: int) -> None:
        """A manager crash (an event on the tick grid): the manager restarts from the
        engine (crashes due at one tick restart it once)."""
        nonlocal m
        if isinstance(m, ResilientManager) and not (crashes and crashes[-1]["at_ns"] == t):
            close_scopes(m, t)
            managers.append(m)
            ledgers.append(m.ledger)
            w0 = time.perf_counter()
            m = ResilientManager.recover(eng, m.policy, spec.manager, softpath=m.softpath,
                                         health=spec.health)  # fmt: skip
            m.now_ns = t
            crashes.append({"at_ns": t, "recover_wall_s": time.perf_counter() - w0})

    notify = True  # a change after the last packet is applied without notice

    def change(at: int, new: Any) -> None:
        m.apply_policy(new)
        change_log.append((at, new))
        if notify and on_policy is not None:
            on_policy(new)

    clock = Replay(tick_ns, lambda t: m.tick(t), next_tick_ns=tick_ns)
    clock.each_tick(inj.step)  # faults drawn per tick, before the manager's tick
    for c in spec.faults.crashes:
        clock.at_tick(round(c.at * 1e9), crash)
    for at, new in pending:
        clock.at(at, partial(change, at, new))

    def window(wb: WorkloadBatch) -> None:
        pb = assign_ports(wb.packets, n_ports)
        fate = m.process(pb)
        div = getattr(m, "last_diverted", None)
        trace.add(pb, fate.final, fate.action, fate.reason,
                  div if div is not None and len(div) == len(pb) else np.zeros(len(pb), bool))  # fmt: skip
        packets.append(pb)
        if on_batch is not None:
            on_batch(pb, fate)
        if progress is not None:
            progress(min(1.0, wb.t_end_ns / duration_ns))

    clock.replay(workload_batches(vspec, wl), window)
    notify = False
    clock.drain()
    clock.tick_until(duration_ns + 10 * tick_ns)
    managers.append(m)
    ledgers.append(m.ledger)
    total = Ledger()
    for lg in ledgers:
        total.offered += lg.offered
        total.final += lg.final
        total.reasons += lg.reasons
    total.check()
    report = per_fault(spec, inj, managers, trace, crashes, tick_ns)
    if not isinstance(m, ResilientManager) and spec.faults.crashes:
        report["notes"] = ["manager crashes are injected for Fornax's ResilientManager only"]
    if oracle:
        report["oracle"] = oracle_check(spec, vspec, packets, change_log, trace)
        attribute(report, trace)
    for r in report["faults"]:
        r.pop("_key", None)
        r.pop("_ports", None)
    report["packets"] = total.as_dict()
    report["manager"] = m.summary()
    report["wall_s"] = time.perf_counter() - wall0
    return report


__all__ = [
    "BitFlips",
    "ChaosEngine",
    "ChaosSpec",
    "Crash",
    "Faults",
    "Injector",
    "PortStall",
    "Window",
    "assign_ports",
    "load_chaos",
    "resilient",
    "run_chaos",
    "silent_bits",
    "summary_rows",
]
