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
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator

from starfabric.config import Spec, load_spec
from starfabric.fornax.engine import (
    EVENT_DTYPE,
    EngineConfig,
    EventType,
    FastEngine,
    FlowKeys,
    ProcessResult,
    Scope,
    ScrubResult,
    SessionEngine,
)
from starfabric.fornax.engine.ecc import ecc_encode
from starfabric.fornax.engine.layout import N_DATA_WORDS, N_WORDS, W_ECC
from starfabric.fornax.keys import canonicalize, key_hash
from starfabric.fornax.manager.accounting import DropReason, Final, Ledger
from starfabric.fornax.manager.config import ManagerConfig
from starfabric.fornax.manager.failover import ResilientManager
from starfabric.fornax.manager.health import HealthConfig
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.softpath import SoftPathConfig
from starfabric.fornax.vpc import compile_policy, load_vpc_spec
from starfabric.fornax.workload import SyntheticWorkload, parse_workload, workload_batches
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
    port: int = Field(ge=0)


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
    engine: EngineConfig = EngineConfig(capacity=65536, ring_capacity=4096, n_ports=8)
    manager: ManagerConfig = ManagerConfig()
    softpath: SoftPathConfig = SoftPathConfig()
    health: HealthConfig = HealthConfig()
    tick: float = Field(0.002, gt=0, description="seconds between manager ticks (assumption)")
    seed: int = Field(0, ge=0, description="seed of the fault draws")
    faults: Faults = Faults()

    _t = field_validator("tick", mode="before")(_dur)

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


class ChaosEngine(SessionEngine):
    """A SessionEngine with hardware faults that software cannot simply reset away: a port
    (or the whole pipeline) stays stalled while its fault lasts, and a stuck event poller
    sees nothing while the ring fills. Everything else is the wrapped engine."""

    def __init__(self, inner: SessionEngine, *, hide_faults: bool = False) -> None:
        self.inner = inner
        self.config = inner.config
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

    def insert(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        return self.inner.insert(keys, **kw)

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        return self.inner.delete(keys)

    def modify(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        return self.inner.modify(keys, **kw)

    def query(self, keys: FlowKeys) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        return self.inner.query(keys)

    def dump(self, cursor: int = 0, max_entries: int = 65536, **kw: Any) -> tuple[np.ndarray, int]:
        return self.inner.dump(cursor, max_entries, **kw)

    def bump_version(self, scope: Scope, scope_id: int) -> int:
        return self.inner.bump_version(scope, scope_id)

    def scope_version(self, scope: Scope, scope_id: int) -> int:
        return self.inner.scope_version(scope, scope_id)

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

    def counters(self) -> dict[str, int]:
        return self.inner.counters()

    def occupancy(self) -> int:
        return self.inner.occupancy()

    def slot_of(self, keys: FlowKeys) -> npt.NDArray[np.int64]:
        return self.inner.slot_of(keys)

    def flip_bits(self, slot: int, bits: npt.ArrayLike) -> None:
        self.inner.flip_bits(slot, bits)

    def stall_port(self, port: int) -> None:
        self.inner.stall_port(port)

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
        self.crash_due = sorted(round(c.at * 1e9) for c in spec.faults.crashes)

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

    def step(self, now: int) -> bool:
        """Faults due up to `now`; returns True when the manager crashes now."""
        self._windows(now)
        dt_h = max(0, now - self.last_ns) / 3.6e12
        self.last_ns = now
        for bf in self.spec.faults.bit_flips:
            end = bf.end * 1e9 if bf.end is not None else float("inf")
            if not bf.start * 1e9 <= now < end:
                continue
            self._flips(bf, now, dt_h)
        crash = False
        while self.crash_due and self.crash_due[0] <= now:
            self.crash_due.pop(0)
            crash = True
        return crash

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
            from starfabric.fornax.manager.manager import keys_of_flow

            victims = recs[pick].copy()
            victims["vni"] &= np.uint32(0xFFFFFF)  # per-direction entries mark bit 31
            keys = key_hash(keys_of_flow(original_from_entries(victims)))
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


class _Trace:
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
    next_tick = tick_ns
    managers: list[Any] = []
    ledgers: list[Ledger] = []
    crashes: list[dict[str, Any]] = []
    trace = _Trace()
    packets: list[PacketBatch] = []
    change_log: list[tuple[int, Any]] = []
    duration_ns = round(wl.duration * 1e9)
    n_ports = spec.engine.n_ports

    def tick_until(t: int) -> None:
        nonlocal next_tick, m
        while next_tick <= t:
            if inj.step(next_tick) and isinstance(m, ResilientManager):
                _close_scopes(m, next_tick)
                managers.append(m)
                ledgers.append(m.ledger)
                w0 = time.perf_counter()
                m = ResilientManager.recover(eng, m.policy, spec.manager, softpath=m.softpath,
                                             health=spec.health)  # fmt: skip
                m.now_ns = next_tick
                crashes.append({"at_ns": next_tick, "recover_wall_s": time.perf_counter() - w0})
            m.tick(next_tick)
            next_tick += tick_ns

    for wb in workload_batches(vspec, wl):
        tick_until(wb.t_start_ns)
        while pending and pending[0][0] <= wb.t_start_ns:
            at, new = pending.pop(0)
            m.apply_policy(new)
            change_log.append((at, new))
            if on_policy is not None:
                on_policy(new)
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
    for at, new in pending:
        m.apply_policy(new)
        change_log.append((at, new))
    tick_until(duration_ns + 10 * tick_ns)
    managers.append(m)
    ledgers.append(m.ledger)
    total = Ledger()
    for lg in ledgers:
        total.offered += lg.offered
        total.final += lg.final
        total.reasons += lg.reasons
    total.check()
    report = _report(spec, inj, managers, trace, crashes, tick_ns)
    if not isinstance(m, ResilientManager) and spec.faults.crashes:
        report["notes"] = ["manager crashes are injected for Fornax's ResilientManager only"]
    if oracle:
        report["oracle"] = _oracle(spec, vspec, packets, change_log, trace)
        _attribute(report, trace)
    for r in report["faults"]:
        r.pop("_key", None)
        r.pop("_ports", None)
    report["packets"] = total.as_dict()
    report["manager"] = m.summary()
    report["wall_s"] = time.perf_counter() - wall0
    return report


def _close_scopes(m: ResilientManager, now: int) -> None:
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


def _report(spec: ChaosSpec, inj: Injector, managers: list[Any], trace: _Trace,
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
            ports = [w.port] if isinstance(w, PortStall) else list(range(cfg.n_ports))
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


def _oracle(spec: ChaosSpec, vspec: Any, packets: list[PacketBatch],
            changes: list[tuple[int, Any]], trace: _Trace) -> dict[str, Any]:  # fmt: skip
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
    next_tick = tick_ns
    pos = 0
    todo = list(changes)
    for pb in packets:
        n = len(pb)
        keep = np.flatnonzero(~named[pos : pos + n])
        t_start = int(pb.time_ns[0]) if n else 0
        while next_tick <= t_start:
            ref.tick(next_tick)
            next_tick += tick_ns
        while todo and todo[0][0] <= t_start:
            ref.apply_policy(todo.pop(0)[1])
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


def _attribute(report: dict[str, Any], trace: _Trace) -> None:
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
