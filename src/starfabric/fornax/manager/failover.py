"""ResilientManager: the Fornax manager with its fault tolerance — ECC rebuild, hang failover,
the rate-bounded patrol, and failover of a session, port, VPC or the whole engine to software
forwarding with failback (health.py decides which).

What moves where:
- Table scopes (session, VPC, engine after many faults): the scope's sessions are moved from
  hardware to the software table and *pinned* there (never promoted, new sessions of the scope
  stay in software too); the engine pipeline still looks packets up, misses, and punts them.
- A hung port (PIPELINE_HANG event, or PORT_HUNG outcomes for a watchdog timeout after a
  restart lost the event): its packets no longer enter the engine; they go straight to the
  software datapath, which takes over each session it needs from hardware (query, decide
  under the current policy, delete from hardware), keeping TCP state and SNAT cookie. Packets
  of a key that also arrive on healthy ports in the batch go the same way, so a connection's
  packets stay in order. After `port_reset_s` the port is reset (unstall) and probed with one
  packet; a probe that misses (the pipeline answered) fails the port back, else it is reset
  again after `probe_backoff_s`.
- The whole engine (enough ports and VPCs failed at once): every packet goes to software.
Software forwarding has the engine's semantics and finite capacity (softpath.py); what it
cannot carry is a named drop, never silent.

Composition: all of this is one `Resilience` part (parts.py) handed to the Manager — a front
(divert), a screen (ECC rebuild, quarantine), a hold (pinning), event handlers for ECC,
overflow and hang events, and the periodic patrol, port and health work after each tick.
`ResilientManager` is the Manager built with that part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import (
    EVENT_DTYPE,
    EventType,
    FlowKeys,
    Outcome,
    Reason,
    SessionEngine,
    Status,
)
from starfabric.fornax.keys import CanonicalKeys, canonicalize, key_hash
from starfabric.fornax.manager.accounting import DropReason, Fate, Final
from starfabric.fornax.manager.config import ManagerConfig
from starfabric.fornax.manager.decide import original_from_entries, policy_fields, swapped
from starfabric.fornax.manager.events import patrol_step
from starfabric.fornax.manager.health import FaultKind, Health, HealthConfig, ScopeKind
from starfabric.fornax.manager.location import Held, Location, Move
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.manager.moves import held_by
from starfabric.fornax.manager.parts import Handler, Part
from starfabric.fornax.manager.rebuild import event_keys, match_suspects, rebuild_lost
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.vpc import CompiledPolicy

#: Probe packet: a key no tenant uses (VNI 2**24-1, IANA experimental protocol 253), so the
#: engine answers MISS when the port's pipeline works.
PROBE_VNI = (1 << 24) - 1
PROBE_PROTO = 253


def member(sorted_arr: npt.NDArray[np.uint64], x: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    """x in sorted_arr, element-wise (binary search: O(n log m), no sort of x)."""
    if not len(sorted_arr) or not len(x):
        return np.zeros(len(x), bool)
    pos = np.minimum(np.searchsorted(sorted_arr, x), len(sorted_arr) - 1)
    return np.asarray(sorted_arr[pos] == x)


class Resilience(Part):
    """Fault detection, rebuild and failover, composed into a Manager (module docstring)."""

    def __init__(self, m: Manager, health: HealthConfig | None = None) -> None:
        self.m = m
        cfg = m.engine.config
        self.health = Health(health or HealthConfig(), cfg.n_ports, cfg.vpc_scopes)
        self.suspects = np.zeros(0, EVENT_DTYPE)  # KEY_SUSPECT losses not yet matched
        self.held = Held()  # keys PINNED by a failed port or QUARANTINED (location.py)
        self._pinned = np.zeros(0, np.uint64)  # held keys and failed-over sessions
        self._hung_since = np.full(cfg.n_ports, -1, np.int64)
        self._reset_at = np.full(cfg.n_ports, -1, np.int64)
        self._fault_keys: dict[int, tuple[int, ...]] = {}  # key hash -> FlowKeys row (rare)
        self._ecc_seen = int(m.engine.counters().get("ecc_uncorrectable", 0))
        self._ecc_base = self._ecc_seen  # uncorrectable errors before this manager
        self._ecc_events = 0  # ECC_UNCORRECTABLE events this manager received
        self._deficit_since = -1  # when the counter first ran ahead of the events
        self._last_patrol_ns: int | None = None
        self._patrol_credit = 0.0
        self.timeline: list[dict[str, Any]] = []  # failovers/failbacks (few)
        self.ecc_log: list[npt.NDArray[np.int64]] = []  # rows (slot, type, handled ns)
        self.patrol_cycles: list[tuple[int, int]] = []  # (start ns, end ns) of full cycles
        self._cycle_start = 0
        self.last_diverted = np.zeros(0, bool)  # which packets of the last batch went around
        self.overflows: list[int] = []  # times a RING_OVERFLOW record was read
        self.diverted = 0
        self.probes = 0

    # ---- pinning (hold / promotable) ---------------------------------------------------
    @property
    def quarantined(self) -> npt.NDArray[np.uint64]:
        """Sorted hashes of the quarantined keys (never forwarded on a guess)."""
        return self.held.hashes(Location.QUARANTINED)

    @property
    def port_pins(self) -> dict[int, npt.NDArray[np.uint64]]:
        """Hashes of the keys each failed port pins to software."""
        h = self.held
        return {int(p): h.hash[h.port == p] for p in np.unique(h.port[h.port >= 0])}

    def _repin(self) -> None:
        self._pinned = np.unique(np.concatenate([self.health.session_failed, self.held.hash]))

    def pinned(self, recs: np.ndarray) -> npt.NDArray[np.bool_]:
        """Which sessions (ENTRY_DTYPE records) must stay in software (their scope is
        failed over)."""
        if self.health.engine_failed:
            return np.ones(len(recs), bool)
        vpc = recs["vpc_scope"].astype(np.int64)
        out = self.health.vpc_failed[np.minimum(vpc, len(self.health.vpc_failed) - 1)].copy()
        if len(self._pinned) and len(recs):
            out |= member(self._pinned, key_hash(canonicalize(original_from_entries(recs))))
        return out

    def hold(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
        """Which software slots stay in software; None (none) while nothing is failed over,
        without reading their records (this runs on every flush)."""
        h = self.health
        if not (h.engine_failed or h.vpc_failed.any() or len(self._pinned)):
            return None
        return self.pinned(self.m.soft.records(slots))

    def promotable(self, live: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.int64]:
        """None while the engine is failed over; otherwise the first k not pinned to software
        (looked up chunk by chunk, never the whole software table)."""
        if self.health.engine_failed:
            return live[:0]
        if self.health.vpc_failed.any() or len(self._pinned):  # skip pinned, chunk by chunk
            soft = self.m.soft
            picked: list[npt.NDArray[np.int64]] = []
            got = 0
            for start in range(0, len(live), 4 * k):
                chunk = live[start : start + 4 * k]
                chunk = chunk[~self.pinned(soft.records(chunk))]
                picked.append(chunk)
                got += len(chunk)
                if got >= k:
                    break
            live = np.concatenate(picked) if picked else live[:0]
        return live[:k]

    # ---- packet path (front / screen) --------------------------------------------------
    def _divert_mask(self, batch: PacketBatch) -> npt.NDArray[np.bool_]:
        if self.health.engine_failed:
            return np.ones(len(batch), bool)
        if not self.health.port_failed.any() or not len(batch):
            return np.zeros(len(batch), bool)
        div = self.health.port_failed[batch.port]
        if div.any() and not div.all():  # a key's packets all go one way: they stay in order
            h = key_hash(canonicalize(batch))
            div |= member(np.unique(h[div]), h)
        return np.asarray(div)

    def front(self, batch: PacketBatch, inner: Callable[[PacketBatch], Fate]) -> Fate:
        """Hardware for healthy scopes, software for failed-over ports or engine."""
        m = self.m
        n = len(batch)
        if n:
            m.now_ns = max(m.now_ns, int(batch.time_ns[-1]))
        div = self._divert_mask(batch)
        self.last_diverted = div
        if not div.any():
            fate = inner(batch)
        else:
            keep, dv = np.flatnonzero(~div), np.flatnonzero(div)
            f1 = inner(batch.take(keep))
            f2 = self._software(batch.take(dv))
            fate = Fate.merge(n, ((keep, f1), (dv, f2)))
        self._watch_hung(batch, fate)
        return fate

    def _software(self, pb: PacketBatch) -> Fate:
        """Forward diverted packets in software, taking their sessions over from hardware."""
        m = self.m
        n = len(pb)
        ck = canonicalize(pb)
        h = key_hash(ck)
        if not self.health.engine_failed:  # pin the keys of failed ports to software
            new = ~member(self._pinned, h)
            if new.any():
                for p in np.unique(pb.port[new]):
                    if self.health.port_failed[p]:
                        self.held.pin_port(h[new & (pb.port == p)], int(p))
                self._repin()
        eng = np.full(n, int(Outcome.MISS), np.uint8)
        eng[~held_by(m.soft, FlowKeys.from_batch(pb))] = Outcome.STALE  # in hardware? take it over
        with m.metrics.activity("miss"):
            f, a, r, v, ts = m.punt(pb, eng, ck)
        fate = Fate(f, a, r, engine=eng, tcp_state=ts, verdict=v)
        m.ledger.add(fate)
        self.diverted += n
        m.metrics.count("diverted_packets", n)
        return fate

    def screen(
        self, pb: PacketBatch, ck: CanonicalKeys, eng: npt.NDArray[np.uint8]
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_] | None]:
        """ECC losses are rebuilt before punted packets are decided (so a lost session's next
        packet is never decided as a new connection); quarantined keys are dropped as lost."""
        self._ecc_sync(bool((eng == Outcome.FAULT).any()))
        if len(self.suspects):
            ev, keys = match_suspects(self, ck, FlowKeys.from_batch(pb))
            if len(ev):
                rebuild_lost(self, ev, keys)
        if self.unknown_losses:
            self._guard(pb, ck, eng)
        # a FAULT packet's own session may still be in hardware (the faulty entry can be
        # another key with the same tag): read it back as for a stale one
        eng = np.where(eng == Outcome.FAULT, np.uint8(Outcome.STALE), eng).astype(np.uint8)
        q = np.zeros(len(pb), bool)
        if self.held.count(Location.QUARANTINED):
            q = self.held.touch(key_hash(ck), pb.time_ns)
        return eng, q

    def unquarantine(self, ck: CanonicalKeys) -> None:
        """Lift the quarantine of keys whose session was rebuilt after all (late event)."""
        if self.held.count(Location.QUARANTINED) and len(ck):
            rows = self.held.find(key_hash(ck))
            self.held.lift(np.unique(rows[rows >= 0]), Move.REBUILD)
            self._repin()

    def quarantine(self, ck: CanonicalKeys) -> int:
        """Never forward these keys on a guess: their packets are lost until they go idle."""
        new = self.held.quarantine(key_hash(ck), self.m.now_ns)
        self._repin()
        return new

    def _watch_hung(self, batch: PacketBatch, fate: Fate) -> None:
        """A port whose packets keep getting PORT_HUNG for a watchdog timeout is hung, even
        if its PIPELINE_HANG event was lost (ring overflow, manager restart)."""
        hung = (fate.final == Final.NAMED_DROP) & (fate.reason == DropReason.PORT_HUNG)
        if not len(batch):
            return
        ports_ok = np.setdiff1d(np.unique(batch.port[~hung]), np.unique(batch.port[hung]))
        self._hung_since[ports_ok] = -1
        if not hung.any():
            return
        limit = round(self.m.engine.config.watchdog_timeout_s * 1e9)
        for p in np.unique(batch.port[hung]):
            t = int(batch.time_ns[hung][batch.port[hung] == p].min())
            if self._hung_since[p] < 0:
                self._hung_since[p] = t
            elif self.m.now_ns - self._hung_since[p] >= limit:
                self._port_failover(int(p), "port_hung_outcomes")

    # ---- events ------------------------------------------------------------------------
    def _ecc_counter(self) -> int:
        return int(self.m.engine.counters().get("ecc_uncorrectable", 0))

    def _ecc_sync(self, force: bool) -> None:
        """Handle events now when the engine found an uncorrectable entry since last time;
        track whether the engine's counter is ahead of the events received (lost victims)."""
        c = self._ecc_counter()
        if force or c != self._ecc_seen:
            self.m.poll_events()
            self._ecc_seen = c
        self._update_deficit(c)

    def _update_deficit(self, c: int) -> None:
        """Whether the engine's uncorrectable counter `c` is ahead of the events received."""
        if c - self._ecc_base > self._ecc_events:
            if self._deficit_since < 0:
                self._deficit_since = self.m.now_ns
            elif self.m.now_ns - self._deficit_since > round(
                self.health.config.suspect_keep_s * 1e9
            ):  # forgiven: such sessions would have aged by now
                self._ecc_base = c - self._ecc_events
                self._deficit_since = -1
        else:
            self._deficit_since = -1

    @property
    def unknown_losses(self) -> bool:
        """Uncorrectable errors whose events software has not received (stuck or overflowed
        ring): some sessions may be gone without software knowing which."""
        return self._deficit_since >= 0

    def _guard(self, pb: PacketBatch, ck: CanonicalKeys, eng: npt.NDArray[np.uint8]) -> None:
        """While sessions may be lost unseen, a TCP segment that is not a SYN and has no
        session anywhere may be such a session's: it is decided as a new connection only
        when both orientations forward alike, otherwise its key is quarantined (never
        forwarded on a guess; conntrack with tcp_loose=0 also refuses such pickups)."""
        m = self.m
        punted = (eng == Outcome.MISS) | (eng == Outcome.FAULT)
        cand = punted & (pb.proto == 6) & ((pb.tcp_flags & 0x02) == 0)
        if not cand.any():
            return
        idx = np.flatnonzero(cand)
        idx = idx[~held_by(m.soft, FlowKeys.from_batch(pb.take(idx)))]
        fault = eng[idx] == Outcome.FAULT
        if fault.any():  # a FAULT packet's own session may still be in hardware
            st, _ = m.driver.query(FlowKeys.from_batch(pb.take(idx[fault])))
            gone = np.ones(len(idx), bool)
            gone[np.flatnonzero(fault)[st == Status.OK]] = False
            idx = idx[gone]
        if not len(idx):
            return
        keys = FlowKeys.from_batch(pb.take(idx))
        o = policy_fields(m.policy, keys, m.now_ns, m.drop)
        r = policy_fields(m.policy, swapped(keys), m.now_ns, m.drop)
        same = (o[0] == r[1]) & (o[1] == r[0]) & (o[2] == r[2]) & (o[3] == r[3])
        if (~same).any():
            m.metrics.count("guard_quarantined", int((~same).sum()))
            self.quarantine(ck.take(idx[~same]))

    def handlers(self) -> Mapping[EventType, Handler]:
        return {
            EventType.ECC_CORRECTED: self._on_corrected,
            EventType.ECC_UNCORRECTABLE: self._on_uncorrectable,
            EventType.RING_OVERFLOW: lambda ev: self.overflows.append(self.m.now_ns),
            EventType.PIPELINE_HANG: self._on_hang,
        }

    def _log_ecc(self, e: np.ndarray, typ: EventType) -> None:
        now = self.m.now_ns
        self.ecc_log.append(
            np.stack([e["slot"], np.full(len(e), int(typ)), np.full(len(e), now)], 1)
        )

    def _on_corrected(self, corr: np.ndarray) -> None:
        self._log_ecc(corr, EventType.ECC_CORRECTED)
        self._record(corr, FaultKind.ECC_CORRECTED)

    def _on_uncorrectable(self, unc: np.ndarray) -> None:
        """Rebuild lost sessions (rebuild.py); a damaged key waits for a packet as a suspect."""
        m = self.m
        self._log_ecc(unc, EventType.ECC_UNCORRECTABLE)
        self._ecc_events += len(unc)
        self._ecc_seen = self._ecc_counter()
        suspect = unc["reason"] == Reason.KEY_SUSPECT
        s = unc[suspect].copy()
        s["time_ns"] = m.now_ns
        self.suspects = np.concatenate([self.suspects, s])
        m.metrics.count("ecc_key_suspect", int(suspect.sum()))
        good = unc[~suspect]
        if len(good):
            self._record(good, FaultKind.ECC_UNCORRECTABLE)
            rebuild_lost(self, good)
            if not m.punting:
                m.flush()
        if suspect.any():
            self.health.record(m.now_ns, FaultKind.ECC_UNCORRECTABLE, n=int(suspect.sum()))

    def _on_hang(self, ev: np.ndarray) -> None:
        for p in np.unique(ev["port"]):
            if int(p) < len(self.health.port_failed):
                self._port_failover(int(p), "watchdog")

    def after_poll(self) -> None:
        keep = self.m.now_ns - round(self.health.config.suspect_keep_s * 1e9)
        self.suspects = self.suspects[self.suspects["time_ns"] >= keep]

    def _record(self, ev: np.ndarray, kind: FaultKind) -> None:
        """Log table faults per session and VPC; remember the keys of faulted sessions."""
        k = original_from_entries(ev)
        h = key_hash(event_keys(ev))
        vpc = np.where(ev["vpc_scope"] < len(self.health.vpc_failed), ev["vpc_scope"], -1)
        self.health.record(self.m.now_ns, kind, key=h, vpc=vpc.astype(np.int64), n=len(ev))
        for j in range(len(ev)):  # faults are rare: a row per fault, not per session
            self._fault_keys[int(h[j])] = tuple(int(getattr(k, f)[j]) for f in
                                                k.__dataclass_fields__)  # fmt: skip

    # ---- ports ---------------------------------------------------------------------
    def _port_failover(self, p: int, how: str) -> None:
        if self.health.port_failed[p]:
            return
        now = self.m.now_ns
        self.health.port_failed[p] = True
        self.health.record(now, FaultKind.PORT_HANG, port=p)
        self._reset_at[p] = now + round(self.health.config.port_reset_s * 1e9)
        self._hung_since[p] = -1
        self.timeline.append({"scope": "port", "id": p, "failover_ns": now, "how": how})
        self.m.metrics.count("port_failovers")

    def _ports(self) -> None:
        """Reset due ports, probe them, fail back the ones that answer."""
        m = self.m
        due = np.flatnonzero(self.health.port_failed & (self._reset_at >= 0)
                             & (self._reset_at <= m.now_ns))  # fmt: skip
        for p in due:
            m.engine.unstall_port(int(p))  # the reset
            m.metrics.count("port_resets")
            if not self._probe(int(p)):
                self._reset_at[p] = m.now_ns + round(self.health.config.probe_backoff_s * 1e9)
                m.metrics.count("probe_failed")
                continue
            self.health.port_failed[p] = False
            self._reset_at[p] = -1
            self.held.failback_port(int(p))
            self._repin()
            self.timeline.append({"scope": "port", "id": int(p), "failback_ns": m.now_ns})
            m.metrics.count("port_failbacks")

    # ---- table scopes --------------------------------------------------------------
    def _probe(self, p: int) -> bool:
        """One probe packet through port p: True when the pipeline answered."""
        m = self.m
        probe = PacketBatch.from_columns(time_ns=[m.now_ns], port=[p], vni=[PROBE_VNI],
                                         proto=[PROBE_PROTO])  # fmt: skip
        res = m.driver.call("datapath", m.engine.process, probe, n=0)
        self.probes += 1
        return int(res.outcome[0]) != Outcome.PORT_HUNG

    def _apply(self) -> None:
        m = self.m
        for ch in self.health.evaluate(m.now_ns):
            if ch.kind == ScopeKind.ENGINE and not ch.failover:
                # verify every port before traffic returns to the pipeline
                for p in range(m.engine.config.n_ports):
                    if not self.health.port_failed[p] and not self._probe(p):
                        self._port_failover(p, "probe")
            name = ch.kind.name.lower()
            rec: dict[str, Any] = {"scope": name, "id": ch.scope_id if ch.kind != ScopeKind.SESSION
                                   else ch.key_hash}  # fmt: skip
            rec["failover_ns" if ch.failover else "failback_ns"] = m.now_ns
            self.timeline.append(rec)
            m.metrics.count(f"{name}_{'failovers' if ch.failover else 'failbacks'}")
            if ch.failover and ch.kind == ScopeKind.VPC:
                self._migrate_vpc(ch.scope_id)
            if ch.failover and ch.kind == ScopeKind.SESSION:
                row = self._fault_keys.get(ch.key_hash)
                if row is not None:
                    self._migrate(FlowKeys.from_columns(
                        **{f: [v] for f, v in zip(FlowKeys.__dataclass_fields__, row, strict=True)}
                    ))  # fmt: skip
        self._repin()

    def _migrate_vpc(self, vpc: int) -> None:
        m = self.m
        cap = m.engine.config.capacity
        cursor = 0
        while cursor < cap:
            recs, cursor = m.driver.dump(cursor, m.config.patrol_chunk, vpc_scope=vpc)
            if len(recs):
                self._migrate(original_from_entries(recs))

    def _migrate(self, keys: FlowKeys) -> int:
        """Move sessions from hardware to software, decided under the current policy."""
        m = self.m
        st, rec = m.driver.query(keys)
        ok = st == Status.OK
        if not ok.any():
            return 0
        rec = rec[ok]
        orig = original_from_entries(rec)
        d = m.decide(orig, rec["aux"])
        keep = d.session
        took, _ = m.paths.to_software(orig.take(keep), d, keep, m.now_ns, track=rec["track"][keep])
        moved = np.zeros(len(rec), bool)
        moved[np.flatnonzero(keep)[took]] = True
        gone = ~keep
        m.release(d.aux[gone])
        out = moved | gone  # software full: the session stays in hardware (reported)
        m.driver.delete(orig.take(out))
        m.metrics.count("migrated_to_software", int(moved.sum()))
        m.metrics.count("migrate_softpath_full", int((keep & ~moved).sum()))
        return int(moved.sum())

    # ---- time ----------------------------------------------------------------------
    def after_tick(self, now_ns: int) -> None:
        """After the manager's tick: the patrol's share of the period, port resets/probes,
        and the health evaluation (failover/failback)."""
        self._update_deficit(self._ecc_counter())
        self.m.flush()
        self._patrol(now_ns)
        self._ports()
        self._apply()
        idle = now_ns - round(self.health.config.suspect_keep_s * 1e9)
        h = self.held
        gone = np.flatnonzero((h.at == Location.QUARANTINED) & (h.seen_ns < idle))
        if len(gone):
            h.lift(gone, Move.END)
            self._repin()

    def _patrol(self, now_ns: int) -> None:
        if self._last_patrol_ns is None:
            self._last_patrol_ns = now_ns
            self._cycle_start = now_ns
            return
        dt = max(0, now_ns - self._last_patrol_ns) * 1e-9
        self._last_patrol_ns = now_ns
        self._patrol_credit += dt * self.health.config.patrol_rate
        n = int(self._patrol_credit)
        if n <= 0:
            return
        self._patrol_credit -= n
        r = patrol_step(self.m, n, chunk=self.health.config.patrol_chunk)
        for kind, count in (("key_inconsistent", FaultKind.KEY_INCONSISTENT),
                            ("policy_drift", FaultKind.POLICY_DRIFT)):  # fmt: skip
            if r[kind]:
                self.health.record(now_ns, count, n=r[kind])
        if r["wrapped"]:
            self.patrol_cycles.append((self._cycle_start, now_ns))
            self._cycle_start = now_ns

    def summary(self, out: dict[str, Any]) -> None:
        out["health"] = self.health.as_dict()
        out["diverted_packets"] = self.diverted
        out["probe_packets"] = self.probes
        out["quarantined_keys"] = len(self.quarantined)


class ResilientManager(Manager):
    """The Manager composed with the `Resilience` part (see the module docstring); its
    fault state is `self.faults`, also reachable under the names below."""

    def __init__(
        self, engine: SessionEngine, policy: CompiledPolicy, config: ManagerConfig | None = None,
        *, health: HealthConfig | None = None, **kw: Any,
    ) -> None:  # fmt: skip
        """As Manager (softpath, softpath_config in `kw`), plus the health configuration."""
        super().__init__(engine, policy, config, **kw)
        self.faults = Resilience(self, health)
        self.add_part(self.faults)

    #: the fault state, reachable by the names callers know (it lives in `faults`)
    FAULT_STATE = frozenset(("health", "suspects", "quarantined", "port_pins", "timeline",
                             "ecc_log", "patrol_cycles", "overflows", "last_diverted",
                             "diverted", "probes", "unknown_losses"))  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        if name in ResilientManager.FAULT_STATE and "faults" in self.__dict__:
            return getattr(self.faults, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def quarantine(self, ck: CanonicalKeys) -> int:
        return self.faults.quarantine(ck)

    def unquarantine(self, ck: CanonicalKeys) -> None:
        self.faults.unquarantine(ck)

    def pinned(self, recs: np.ndarray) -> npt.NDArray[np.bool_]:
        return self.faults.pinned(recs)


__all__ = ["PROBE_PROTO", "PROBE_VNI", "Resilience", "ResilientManager", "member"]
