"""Fault injection of a chaos run: `ChaosEngine`, an engine whose ports and event poller
stay broken while a fault lasts, and the `Injector` that applies a ChaosSpec's faults to it
as simulated time advances and logs every fault it drew (what the report, chaos_report.py,
matches detections against)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from starfabric.fornax.engine import (
    EVENT_DTYPE,
    EventType,
    ProcessResult,
    ScrubResult,
    SessionEngine,
)
from starfabric.fornax.engine.ecc import ecc_encode
from starfabric.fornax.engine.layout import N_DATA_WORDS, N_WORDS, W_ECC
from starfabric.fornax.engine.proxy import EngineProxy
from starfabric.fornax.keys import canonicalize, key_hash
from starfabric.fornax.manager.decide import original_from_entries
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.run.chaos_spec import BitFlips, ChaosSpec

RECORD_BITS = N_WORDS * 64
_HIDDEN_EVENTS = (int(EventType.ECC_CORRECTED), int(EventType.ECC_UNCORRECTABLE),
                  int(EventType.PIPELINE_HANG))  # fmt: skip
_FAULT_EVENTS = (*_HIDDEN_EVENTS, int(EventType.RING_OVERFLOW))


@runtime_checkable
class HoldsEvents(Protocol):
    """An engine whose event ring is a buffer it drains itself (LinuxEngine: the ctnetlink
    event socket, read on every call): `hold_events(True)` stops draining it."""

    def hold_events(self, held: bool) -> None: ...


class ChaosEngine(EngineProxy):
    """A SessionEngine with hardware faults that software cannot simply reset away: a port
    (or the whole pipeline) stays stalled while its fault lasts, and a stuck event poller
    sees nothing while the ring fills. Everything else is the wrapped engine."""

    def __init__(self, inner: SessionEngine, *, hide_faults: bool = False) -> None:
        super().__init__(inner)
        self.faulty_ports = np.zeros(inner.config.n_ports, bool)
        self._paused = False
        self.hide_faults = hide_faults
        self.now = 0
        # (slot, event type, ns) of every fault event software learned of: ECC, hang and
        # overflow records when polled; with hide_faults (a NIC without such events, as
        # under OVS TC offload) ECC/hang records are withheld and logged at the time the
        # hardware read that found them, which software caused (a packet or a dump)
        self.log: list[np.ndarray] = []

    @property
    def poll_paused(self) -> bool:
        """The event poller is stuck. An engine whose ring is a kernel socket buffer
        (HoldsEvents: the Linux datapath) stops reading it too, so the kernel's own buffer
        overflows; an emulated ring fills while poll_events returns nothing."""
        return self._paused

    @poll_paused.setter
    def poll_paused(self, paused: bool) -> None:
        if paused != self._paused and isinstance(self.inner, HoldsEvents):
            self.inner.hold_events(paused)
        self._paused = paused

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
        self.released: set[int] = set()

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
        # a ring that is a kernel socket buffer (HoldsEvents) tells of its loss only on the
        # first read after the poller is back: counted one step after the window
        settle = isinstance(e.inner, HoldsEvents)
        for i, w in enumerate(f.ring_overflows):
            active = w.at * 1e9 <= now < (w.at + w.duration) * 1e9
            if active and i not in self.lost0:
                self.lost0[i] = lost
            if not active and i in self.lost0 and i not in self.lost:
                if settle and i not in self.released:
                    self.released.add(i)
                    continue
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


__all__ = ["RECORD_BITS", "ChaosEngine", "HoldsEvents", "Injector", "silent_bits"]
