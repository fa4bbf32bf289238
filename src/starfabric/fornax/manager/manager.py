"""The light-weight software manager: it reacts to punted packets and hardware events and keeps
almost nothing per session (only SNAT bitmaps, nat.py); everything else is read back from the
engine through the interface (query/dump/events), as a driver would.

Packet path (`process`): the engine forwards the batch; its punted packets (MISS, STALE, FAULT)
go through the software datapath (softpath.py) in batch order, in rounds — a packet with no
software session makes its key's first packet a *first packet*, decided by policy in batch,
and a session carrying both directions' actions, scopes and cookie is created in the software
table; the key's packets are then forwarded by software as the engine would have (TCP
tracking continues). A packet that finds a STALE engine session has that session read back
(query), decided again under the current policy and moved into the software table. At the
end of the batch every session created or re-decided is pushed to hardware — ONE insert (or,
for a re-decided session with unchanged scopes, one modify) per connection, carrying the TCP
state software reached — within the setup budget (a token bucket shared by inserts and
modifies). What hardware refuses (table full, insert failed, budget spent) stays in software
and keeps forwarding there; `tick` promotes such sessions later.

Policy (`apply_policy`): recompile with stable ids, bump each affected ENI/VPC scope once in
the engine and in the software table (O(1) each). Stale sessions are never forwarded with
their old actions (engine and softpath both refuse them), so no packet is forwarded under a
policy older than the latest bump. A session the new policy refuses becomes a drop session
(`install_drop_sessions`) or is forgotten: the packet that found it is dropped and the next
one is a first packet again.

Composition: engine calls go through `driver` (driver.py: counted ops, budget, versions);
the software datapath is a SessionEngine too (`soft`, softengine.py), and sessions move
between the two through the contract (`paths`, moves.py: push, promotion, stale read-back,
failover, rebuild); the SoftPath's own API serves only its packet path (`process` with its
rate limit, first packets, in-place re-decision); the push queue is an `Outbox` of explicit
session locations (location.py); hardware events
are dispatched through the `handlers` table ({EventType: handler}, events.py); fault
tolerance and the software-centric baselines are `Part`s handed in (parts.py), never
subclasses overriding these steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError
from starfabric.fornax.engine.interface import (
    EventType,
    FlowKeys,
    Outcome,
    Scope,
    SessionEngine,
    Status,
)
from starfabric.fornax.keys import CanonicalKeys, canonicalize, key_hash, quoted_tuple
from starfabric.fornax.manager import _kernels, cookie
from starfabric.fornax.manager.accounting import DropReason, Fate, Final, Ledger
from starfabric.fornax.manager.config import ManagerConfig, TokenBucket
from starfabric.fornax.manager.decide import (
    Decision,
    decide,
    original_from_entries,
    original_from_sessions,
    packets_of,
)
from starfabric.fornax.manager.driver import EngineDriver
from starfabric.fornax.manager.events import default_handlers, handle_events
from starfabric.fornax.manager.location import Location, Move, Outbox
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.manager.moves import Datapaths
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.manager.parts import Handler, Part
from starfabric.fornax.manager.recover import recover_nat
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.softengine import SoftEngine
from starfabric.fornax.softpath import (
    SoftOutcome,
    SoftPath,
    SoftPathConfig,
    SoftStatus,
    related_mask,
)
from starfabric.fornax.vpc import CompiledPolicy, VpcSpec, recompile

_PUNT = (int(Outcome.MISS), int(Outcome.STALE), int(Outcome.FAULT))
#: Promote software sessions only while the engine is below this fill (assumption: leave
#: headroom so promotion does not turn into a storm of TABLE_FULL events).
PROMOTE_MAX_FILL = 0.95


def _group(ck: CanonicalKeys) -> npt.NDArray[np.int64]:
    """Group id of each row by canonical key (equal keys, equal ids), numbered in order of
    first appearance (a numba hash grouping confirmed on the full key)."""
    out = np.empty(len(ck), np.int64)
    if not len(ck):
        return out
    _kernels.group_ids(ck.words(), ck.proto, key_hash(ck), out)
    return out


def _lookup_keys(pb: PacketBatch) -> FlowKeys:
    """The key each packet was looked up by: its own tuple; an ICMP error's, the tuple it
    quotes, inverted (nf_conntrack_inet_error; conntrack.icmp_error_quotes), so a stale
    session an error is RELATED to is read back and decided again like any other."""
    keys = FlowKeys.from_batch(pb)
    rel = related_mask(pb)
    if not rel.any():
        return keys
    names = ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")
    cols = {
        f: np.where(rel, q, getattr(keys, f)) for f, q in zip(names, quoted_tuple(pb), strict=True)
    }
    return FlowKeys.from_columns(**cols)


def _first_of_groups(gid: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index of the first row of each group, in row order."""
    _, first = np.unique(gid, return_index=True)
    return np.sort(first)


class Manager:
    """Light-weight Fornax session manager over any SessionEngine (see the module docstring)."""

    def __init__(
        self,
        engine: SessionEngine,
        policy: CompiledPolicy,
        config: ManagerConfig | None = None,
        *,
        softpath: SoftPath | None = None,
        softpath_config: SoftPathConfig | None = None,
        parts: Sequence[Part] = (),
    ) -> None:
        self.engine = engine
        self.config = config or ManagerConfig()
        self._check_scopes(policy)
        if engine.config.drop_action < len(policy.actions):
            raise ConfigError(
                f"engine drop_action = {engine.config.drop_action} is an action handle of the "
                f"policy ({len(policy.actions)} actions)",
                fix="keep the engine's default drop_action 0xFFFFFFFF",
            )
        self.policy = policy
        self.softpath = softpath or SoftPath(engine.config, softpath_config)
        self.nat = NatPools(policy, self.config.nat_port_min, self.config.nat_port_max)
        self.budget = TokenBucket(self.config.setup_rate, self.config.setup_burst)
        self.metrics = Metrics()
        self.driver = EngineDriver(engine, self.metrics, self.budget)
        self.soft = SoftEngine(self.softpath)  # the software datapath behind the contract
        self.paths = Datapaths(self.driver, self.soft)  # moves between the two (moves.py)
        self.ledger = Ledger()
        self.drop = int(engine.config.drop_action)
        self.now_ns = 0
        self.connections = 0
        self.peak_sessions = 0
        self.outbox = Outbox()
        self.redecided = np.zeros(0, np.uint64)  # key hashes re-decided since the last poll
        self.patrol_cursor = 0
        self.punting = False  # inside the punt path (a flush waits for its end)
        self.handlers: dict[EventType, Handler] = default_handlers(self)
        self.update_policy: Callable[[VpcSpec], dict[str, int]] = self.bump_policy
        self.parts: list[Part] = []
        for p in parts:
            self.add_part(p)

    def add_part(self, part: Part) -> None:
        """Compose a part in: its event handlers take their place in the table."""
        self.parts.append(part)
        self.handlers.update(part.handlers())

    def _check_scopes(self, policy: CompiledPolicy) -> None:
        cfg = self.engine.config
        if len(policy.eni_names) > cfg.eni_scopes or len(policy.vpc_names) > cfg.vpc_scopes:
            raise ConfigError(
                f"policy has {len(policy.eni_names)} ENIs / {len(policy.vpc_names)} VPC scopes, "
                f"engine holds eni_scopes={cfg.eni_scopes}, vpc_scopes={cfg.vpc_scopes}",
                fix="raise the engine's eni_scopes/vpc_scopes",
            )

    def decide(self, keys: FlowKeys, old_aux: npt.NDArray[np.uint64] | None = None) -> Decision:
        """Decide ORIGINAL keys under the current policy (old cookies kept where they hold)."""
        return decide(self.policy, packets_of(keys, self.now_ns), self.nat,
                      drop_action=self.drop, drop_sessions=self.config.install_drop_sessions,
                      old_aux=old_aux)  # fmt: skip

    # ---- the packet path --------------------------------------------------------------
    def process(self, batch: PacketBatch) -> Fate:
        """Forward one batch through hardware and, for punted packets, software (through
        the parts' fronts: divert, time cuts)."""
        inner: Callable[[PacketBatch], Fate] = self.datapath
        for p in reversed(self.parts):
            inner = (lambda part, nxt: lambda b: part.front(b, nxt))(p, inner)
        return inner(batch)

    def datapath(self, batch: PacketBatch) -> Fate:
        """The engine's pass over one batch; punted packets go through `punt`."""
        n = len(batch)
        if n:
            self.now_ns = max(self.now_ns, int(batch.time_ns[-1]))
        self.budget.refill(self.now_ns)
        res = self.driver.call("datapath", self.engine.process, batch, n=0)
        final = np.empty(n, np.uint8)
        action = np.zeros(n, np.uint32)
        reason = np.zeros(n, np.uint8)
        o = res.outcome
        verdict = res.verdict.copy()
        tcp_state = res.tcp_state.copy()
        hw = o == Outcome.HIT
        final[hw] = Final.HW_FORWARDED
        action[hw] = res.action[hw]
        final[o == Outcome.DROP_HW] = Final.POLICY_DROP
        hung = o == Outcome.PORT_HUNG
        final[hung] = Final.NAMED_DROP
        reason[hung] = DropReason.PORT_HUNG
        punt = np.flatnonzero(np.isin(o, _PUNT))
        if len(punt):
            with self.metrics.activity("miss"):
                f, a, r, v, ts = self.punt(batch.take(punt), o[punt])
            final[punt], action[punt], reason[punt] = f, a, r
            verdict[punt], tcp_state[punt] = v, ts
        fate = Fate(final, action, reason, engine=o.copy(), tcp_state=tcp_state, verdict=verdict)
        self.ledger.add(fate)
        return fate

    def punt(
        self, pb: PacketBatch, eng: npt.NDArray[np.uint8], ck: CanonicalKeys | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Punted packets: the parts' screens first (rebuilds, quarantine), then software;
        `ck`: their canonical keys when the caller has them (canonicalized once)."""
        ck = canonicalize(pb) if ck is None else ck
        self.punting = True
        try:
            lost: npt.NDArray[np.bool_] | None = None
            for p in self.parts:
                eng, q = p.screen(pb, ck, eng)
                if q is not None:
                    lost = q if lost is None else lost | q
            if lost is None:
                return self._software(pb, ck, eng)
            n = len(pb)
            final = np.zeros(n, np.uint8)
            action = np.zeros(n, np.uint32)
            reason = np.zeros(n, np.uint8)
            verdict = np.full(n, 255, np.uint8)
            tcp_state = np.zeros(n, np.uint8)
            final[lost] = Final.NAMED_DROP
            reason[lost] = DropReason.SESSION_LOST
            rest = np.flatnonzero(~lost)
            if len(rest):
                f, a, r, v, ts = self._software(pb.take(rest), ck.take(rest), eng[rest])
                final[rest], action[rest], reason[rest] = f, a, r
                verdict[rest], tcp_state[rest] = v, ts
            return final, action, reason, verdict, tcp_state
        finally:
            self.punting = False

    def _software(
        self, pb: PacketBatch, ck: CanonicalKeys, eng: npt.NDArray[np.uint8]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        n = len(pb)
        verdict = np.full(n, 255, np.uint8)
        tcp_state = np.zeros(n, np.uint8)
        final = np.full(n, 255, np.uint8)
        action = np.zeros(n, np.uint32)
        reason = np.zeros(n, np.uint8)
        pending = np.ones(n, bool)
        gid = _group(ck)
        stale = eng == Outcome.STALE
        if stale.any():
            dropped = self._import_stale(pb, ck, gid, stale)
            final[dropped] = Final.POLICY_DROP
            pending[dropped] = False
        self.metrics.count("punted_packets", n)
        for _ in range(n + 1):
            idx = np.flatnonzero(pending)
            if not len(idx):
                break
            with self.metrics.softpath_call():
                r = self.softpath.process(pb.take(idx), ck.take(idx))
            so = r.outcome
            verdict[idx], tcp_state[idx] = r.verdict, r.tcp_state
            if len(r.reopened_aux):  # software sessions a reopening SYN ended
                self.metrics.count("tcp_reopen", len(r.reopened_aux))
                self.release(r.reopened_aux)
            if len(r.ended_aux):  # sessions the tracker ended (RST-only reply, invalid new)
                self.metrics.count("tracker_ended", len(r.ended_aux))
                self.release(r.ended_aux)
            if len(r.ended_slots):  # their pushes go; a stale hardware original is deleted
                was_mod = self.outbox.end(r.ended_slots)
                if len(was_mod):
                    self.driver.delete(self.paths.keys(was_mod))
            done = np.isin(so, (SoftOutcome.HIT, SoftOutcome.DROP, SoftOutcome.OVERLOAD))
            fwd = so == SoftOutcome.HIT
            final[idx[fwd]] = Final.SW_FORWARDED
            action[idx[fwd]] = r.action[fwd]
            final[idx[so == SoftOutcome.DROP]] = Final.POLICY_DROP
            ov = idx[so == SoftOutcome.OVERLOAD]
            final[ov] = Final.NAMED_DROP
            reason[ov] = DropReason.SOFTPATH_OVERLOAD
            pending[idx[done]] = False
            st = so == SoftOutcome.STALE
            if st.any():
                drop_first = self._redecide_soft(idx[st], r.slot[st], gid[idx[st]])
                final[drop_first] = Final.POLICY_DROP
                pending[drop_first] = False
            miss = so == SoftOutcome.MISS
            if miss.any():
                f_idx, f_final, f_reason = self._first_packets(pb, ck, gid, idx[miss])
                final[f_idx] = f_final
                reason[f_idx] = f_reason
                pending[f_idx] = False
        self.flush()
        return final, action, reason, verdict, tcp_state

    def _first_packets(
        self,
        pb: PacketBatch,
        ck: CanonicalKeys,
        gid: npt.NDArray[np.int64],
        miss: npt.NDArray[np.int64],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Decide the first missing packet of each key and create software sessions; returns
        the packets resolved without a session (index, final, reason)."""
        g = gid[miss]
        first = miss[_first_of_groups(g)]
        d = decide(self.policy, pb.take(first), self.nat, drop_action=self.drop,
                   drop_sessions=self.config.install_drop_sessions)  # fmt: skip
        mk = first[d.session]
        fk = ck.take(mk)
        status, slot = self.softpath.insert(
            fk, orig_dir=fk.direction, action_orig=d.action_orig[d.session],
            action_reply=d.action_reply[d.session], eni_scope=d.eni_scope[d.session],
            vpc_scope=d.vpc_scope[d.session], now_ns=self.now_ns, aux=d.aux[d.session],
            first=True,
        )  # fmt: skip
        ok = status == SoftStatus.OK
        self.outbox.add(slot[ok], Location.GONE, Move.CREATE)
        self.connections += int(ok.sum())
        self.metrics.count("sessions_created", int(ok.sum()))
        full_aux = d.aux[d.session][~ok]
        self.release(full_aux)
        # keys resolved without a session: denied (no drop session), NAT exhausted, SW full
        no_sess = np.zeros(len(first), bool)
        no_sess[~d.session] = True
        why = np.zeros(len(first), np.uint8)
        why[d.nat_exhausted] = DropReason.NAT_EXHAUSTED
        full_pos = np.flatnonzero(d.session)[~ok]
        no_sess[full_pos] = True
        why[full_pos] = DropReason.SOFTPATH_FULL
        self.metrics.count("denied_first_packets", int((~d.allowed).sum()))
        if not no_sess.any():
            return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8)
        # Packets of such a key that go the first packet's way share its fate; a packet the
        # other way is a new first packet (decided in the next round), and so are its followers.
        firsts_g = gid[first]
        dead = np.full(int(gid.max()) + 1, -1, np.int64)
        dead[firsts_g[no_sess]] = np.flatnonzero(no_sess)
        k = dead[g]
        rows = np.flatnonzero(k >= 0)
        kk = k[rows]
        same = ck.direction[miss[rows]] == ck.direction[first[kk]]
        cut = np.full(len(first), np.iinfo(np.int64).max)
        np.minimum.at(cut, kk[~same], miss[rows[~same]])
        sel = miss[rows] < cut[kk]
        out_idx = miss[rows[sel]]
        w = why[kk[sel]]
        fin = np.where(w == 0, Final.POLICY_DROP, Final.NAMED_DROP).astype(np.uint8)
        return out_idx, fin, w.astype(np.uint8)

    def _import_stale(
        self, pb: PacketBatch, ck: CanonicalKeys, gid: npt.NDArray[np.int64],
        stale: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.int64]:  # fmt: skip
        """Read stale engine sessions back, decide them again and move them into the software
        table (pushed back by `flush`); returns packets dropped because the session is now
        refused and forgotten."""
        idx = np.flatnonzero(stale)
        first = idx[_first_of_groups(gid[idx])]
        st, rec = self.driver.query(_lookup_keys(pb.take(first)))
        ok = st == Status.OK
        first, rec = first[ok], rec[ok]
        if not len(first):
            return np.zeros(0, np.int64)
        orig = original_from_entries(rec)
        d = self.decide(orig, rec["aux"])
        self.metrics.count("redecided", len(first))
        ock = canonicalize(orig)
        self.redecided = np.concatenate([self.redecided, key_hash(ock)])
        gone = ~d.session
        if gone.any():
            self.driver.delete(orig.take(gone))
            self.release(d.aux[gone])
            self.metrics.count("sessions_refused_after_change", int(gone.sum()))
        keep = d.session
        same = keep & (d.eni_scope == rec["eni_scope"]) & (d.vpc_scope == rec["vpc_scope"])
        moved = keep & ~same
        if moved.any():  # scopes changed: the entry must be re-created, not modified
            self.driver.delete(orig.take(moved))
        okk, slot = self.paths.to_software(orig.take(keep), d, keep, self.now_ns,
                                           track=rec["track"][keep])  # fmt: skip
        same_k = same[keep]
        self.outbox.add(slot[okk & same_k], Location.HARDWARE, Move.REDECIDE)
        self.outbox.add(slot[okk & ~same_k], Location.HARDWARE, Move.RECREATE)
        if (~okk).any():  # software full: the stale entry stays in hardware, punted again
            self.release(d.aux[keep][~okk])
        return first[gone]

    def _redecide_soft(
        self,
        rows: npt.NDArray[np.int64],
        slots: npt.NDArray[np.int64],
        gids: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:
        """Stale software sessions: decide again in place (no engine op); returns the packets
        dropped because their session is now refused and forgotten."""
        _, fi = np.unique(gids, return_index=True)
        rows, slots = rows[fi], slots[fi]
        recs = self.softpath.sessions(slots)
        d = self.decide(original_from_sessions(recs), recs["aux"])
        self.metrics.count("redecided", len(slots))
        gone = ~d.session
        self.release(d.aux[gone])
        self.softpath.delete(slots[gone])
        keep = d.session
        self.softpath.update(slots[keep], action_orig=d.action_orig[keep],
                             action_reply=d.action_reply[keep], aux=d.aux[keep],
                             eni_scope=d.eni_scope[keep], vpc_scope=d.vpc_scope[keep])  # fmt: skip
        return rows[gone]

    def release(self, aux: npt.NDArray[np.uint64]) -> int:
        """Free the SNAT allocations held by these cookies; returns how many were freed."""
        held = cookie.has_nat(aux)
        if not held.any():
            return 0
        freed = self.nat.release(cookie.nat_ip(aux[held]), cookie.nat_port(aux[held]))
        self.metrics.count("nat_released", freed)
        return freed

    def rebuilt(self, slots: npt.NDArray[np.int64]) -> None:
        """Sessions rebuilt into software slots (ECC loss): pushed with the next flush."""
        self.outbox.add(slots, Location.HARDWARE, Move.REBUILD)

    # ---- software -> hardware ---------------------------------------------------------
    def flush(self) -> None:
        """Push the sessions created or re-decided in this batch to hardware (budgeted)."""
        for p in self.parts:  # a held session re-decided in software leaves hardware
            mod = self.outbox.pending(Location.PENDING_MODIFY)
            pin = p.hold(mod)
            if pin is not None and pin.any():
                self.driver.delete(self.paths.keys(mod[pin]))
                self.outbox.pin(pin, Location.PENDING_MODIFY)
        mod, new = self.outbox.take()
        # sessions the tracker ended within the batch (RST-only reply, invalid first packet,
        # reopen) are gone from the software table: nothing to push
        live = self.soft.live(mod), self.soft.live(new)
        mod, new = mod[live[0]], new[live[1]]
        if len(mod):
            grant = self.budget.take(len(mod))
            st = self.paths.refresh_hardware(mod[:grant])
            done = mod[:grant][st == Status.OK]
            self.metrics.count("modified", len(done))
            lost = mod[:grant][st != Status.OK]  # entry vanished meanwhile: insert instead
            late = mod[grant:]  # no budget: the session moves to software
            if len(late):
                self.driver.delete(self.paths.keys(late))
                self.metrics.count("moved_to_software", len(late))
            new = np.concatenate([new, lost])
        if len(new):
            self.push(new)

    def push(self, slots: npt.NDArray[np.int64]) -> int:
        """Insert software sessions into hardware, as far as the parts let them (held
        ones stay; a flow limit) and the budget grants; returns how many hardware took."""
        if len(slots):
            for p in self.parts:
                pin = p.hold(slots)
                if pin is not None:
                    slots = slots[~pin]
        rooms = [r for p in self.parts if (r := p.room(len(slots))) is not None]
        if rooms:
            slots = slots[: min(rooms)]
            if not len(slots):
                return 0
        grant = self.budget.take(len(slots))
        self.metrics.count("budget_deferred", len(slots) - grant)
        if not grant:
            return 0
        slots = slots[:grant]
        st = self.paths.to_hardware(slots)
        ok = st == Status.OK
        self.metrics.count("inserted", int(ok.sum()))
        for s in (Status.TABLE_FULL, Status.INSERT_FAILED, Status.EXISTS, Status.BAD_SCOPE):
            k = int((st == s).sum())
            if k:
                self.metrics.count(f"insert_{s.name.lower()}", k)
        return int(ok.sum())

    # ---- policy ----------------------------------------------------------------------
    def apply_policy(self, spec: VpcSpec) -> dict[str, int]:
        """Apply a new policy with the manager's policy-update strategy (`update_policy`:
        O(1) version bumps by default; the rescan baselines re-evaluate flows)."""
        return self.update_policy(spec)

    def set_policy(self, spec: VpcSpec) -> tuple[CompiledPolicy, Any]:
        """Recompile with stable ids; the new policy takes over (returns it and the
        affected scopes)."""
        new, affected = recompile(self.policy, spec)
        self._check_scopes(new)
        return new, affected

    def bump_policy(self, spec: VpcSpec) -> dict[str, int]:
        """Recompile with stable ids and bump exactly the affected scopes (O(1) each)."""
        with self.metrics.activity("policy"):
            new, affected = self.set_policy(spec)
            for scope, ids in ((Scope.ENI, affected.eni), (Scope.VPC, affected.vpc)):
                for s in ids:
                    self.driver.call("bump_version", self.engine.bump_version, scope, int(s))
                    self.soft.bump_version(scope, int(s))
            self.policy = new
            self.nat.set_policy(new)
            self.metrics.count("policy_changes")
        return {"eni_scopes": len(affected.eni), "vpc_scopes": len(affected.vpc)}

    # ---- time --------------------------------------------------------------------------
    def tick(self, now_ns: int, scrub_slots: int | None = None) -> None:
        """One tick of the simulated clock: the parts' early steps, hardware scrub, software
        aging, events, promotion, then the parts' periodic work."""
        for p in self.parts:
            p.before_tick(now_ns)
        self.now_ns = max(self.now_ns, now_ns)
        self.budget.refill(self.now_ns)
        self.driver.call("datapath", self.engine.scrub, self.now_ns, scrub_slots, n=0)
        with self.metrics.activity("aging"):
            self.soft.scrub(self.now_ns)  # software ages as hardware does: AGED/CLOSED events
            ev = self.soft.poll_events()  # its aging; a refused insert's TABLE_FULL is not
            ev = ev[np.isin(ev["type"], (EventType.AGED, EventType.CLOSED))]
            self.release(ev["aux"])
            closed = int((ev["type"] == EventType.CLOSED).sum())
            self.metrics.count("softpath_aged", len(ev) - closed)
            self.metrics.count("softpath_closed", closed)
        self.poll_events()
        with self.metrics.activity("promote"):
            self._promote()
        self.peak_sessions = max(self.peak_sessions, self.sessions())
        for p in self.parts:
            p.after_tick(now_ns)

    def poll_events(self) -> int:
        """Poll and handle one ring's worth of events (events.handle_events)."""
        return handle_events(self)

    def _promote(self) -> None:
        """Move software-resident sessions back to hardware while it has room and budget."""
        cap = self.engine.config.capacity
        room = int(cap * PROMOTE_MAX_FILL) - self.engine.occupancy()
        k = min(self.config.promote_per_tick, room, self.soft.occupancy())
        if k <= 0:
            return
        # only sessions decided under the current policy: a stale one is re-decided on its
        # next packet first (promoting it would hand hardware an old decision as current)
        live = self.soft.current_slots()
        for p in self.parts:
            live = p.promotable(live, k)
        self.metrics.count("promoted", self.push(live[:k]))

    # ---- state ---------------------------------------------------------------------
    @property
    def software_bytes(self) -> int:
        """Bytes of the manager's own per-session state: the SNAT bitmaps (nat.py), plus
        what its parts keep (a flow mirror: Part.state_bytes)."""
        return int(self.nat.nbytes + sum(p.state_bytes() for p in self.parts))

    def hardware_sessions(self) -> int:
        """Live connections in hardware: its entries, unless a part counts them its own way
        (two entries per connection: Part.hardware_sessions)."""
        for p in self.parts:
            if (n := p.hardware_sessions()) is not None:
                return n
        return int(self.engine.occupancy())

    def sessions(self) -> int:
        """Live sessions: in hardware plus software-resident."""
        return self.hardware_sessions() + self.soft.occupancy()

    def summary(self) -> dict[str, Any]:
        """Metrics, accounting and state as plain data (for JSON)."""
        ops = self.metrics.control_ops
        sessions = self.sessions()
        out = self.metrics.as_dict(
            {
                "packets": self.ledger.as_dict(),
                "connections": self.connections,
                "sessions": {
                    "hardware": self.hardware_sessions(),
                    "software": self.soft.occupancy(),
                },
                "nat_allocated": self.nat.allocated(),
                "software_bytes": self.software_bytes,
                "software_bytes_per_session": self.software_bytes / max(sessions, 1),
                "peak_sessions": max(self.peak_sessions, sessions),
                "software_bytes_per_peak_session": self.software_bytes
                / max(self.peak_sessions, sessions, 1),
                "softpath_table_bytes": self.softpath.nbytes_table,
                "softpath_cpu_s": self.softpath.cpu_s,
                "engine_ops_per_connection": ops / max(self.connections, 1),
            }
        )
        for p in self.parts:
            p.summary(out)
        return out

    def prometheus(self) -> bytes:
        """Prometheus text of the metrics plus gauges of state."""
        return self.metrics.prometheus(
            {
                "sessions_hardware": float(self.engine.occupancy()),
                "sessions_software": float(self.soft.occupancy()),
                "software_bytes": float(self.software_bytes),
                "nat_allocated": float(self.nat.allocated()),
                "packets_offered": float(self.ledger.offered),
            }
        )

    @classmethod
    def recover(
        cls, engine: SessionEngine, policy: CompiledPolicy, config: ManagerConfig | None = None,
        *, between_chunks: Callable[[], None] | None = None, **kw: Any,
    ) -> Self:  # fmt: skip
        """A new manager whose state is rebuilt from the engine (and the surviving software
        datapath) by chunked dumps, while traffic keeps flowing between chunks; `kw` goes to
        the constructor (`softpath`: the surviving software datapath; ResilientManager's
        `health`; SoftwareCentric's `baseline`); each part then re-learns its own state
        (Part.recover: a flow mirror from one more dump). Failover state is re-learned (hung
        ports from PORT_HUNG outcomes, table faults from new events)."""
        m = cls(engine, policy, config=config, **kw)
        with m.metrics.activity("recovery"):
            recover_nat(m, between_chunks)
            for p in m.parts:
                p.recover(between_chunks)
        return m


__all__ = ["Manager"]
