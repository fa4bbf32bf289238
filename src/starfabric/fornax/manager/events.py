"""Hardware events and the patrol: what the manager does when the engine tells it something.

- AGED / CLOSED: the session is gone; its SNAT allocation (in the event's aux) is released.
  A CLOSED of reason TCP_REOPEN too: the reopening SYN was punted and decided as a new
  connection with its own allocation.
- VERSION_MISMATCH: the session is decided again and modified (budgeted); a session the punt
  path already re-decided in the same batch is skipped, one not granted budget stays stale
  and is re-decided on its next packet (stale sessions are never forwarded).
- TABLE_FULL / INSERT_FAILED: counted; the session is already forwarding in software.
- ECC_UNCORRECTABLE: the entry is gone; with a consistent key its allocation is released
  (a manager with `on_fault_events`, failover.ResilientManager, rebuilds the session instead
  and keeps the allocation; it also takes ECC_CORRECTED and PIPELINE_HANG there).
- RING_OVERFLOW: events were lost, so a patrol pass runs (a bounded dump-based scan that
  frees SNAT ports whose AGED/CLOSED events were lost).

`patrol_step` is the periodic, rate-bounded part of the patrol: each call inspects the next
entries from the patrol cursor and checks integrity (the engine checks every entry's ECC as
it is read: errors become events; the key must find its own entry again) and that the
entry's actions are what the CURRENT policy gives it (entries whose version snapshot is
current; stale ones are re-decided on their next packet anyway), repairing drift by modify.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from starfabric.fornax.engine import EventType, FlowKeys, Reason, Scope, Status
from starfabric.fornax.keys import key_hash
from starfabric.fornax.manager import cookie
from starfabric.fornax.manager.decide import (
    decide,
    hw_actions,
    original_from_entries,
    packets_of,
)
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.vpc import evaluate

if TYPE_CHECKING:
    from starfabric.fornax.manager.manager import Manager


def handle_events(m: Manager) -> int:
    """Poll and handle one ring's worth of events; returns how many were read."""
    with m.metrics.activity("events"):
        ev = m._call("poll", m.engine.poll_events, m.config.event_poll_max)
        if not len(ev):
            return 0
        counts = np.bincount(ev["type"], minlength=len(EventType) + 1)
        for t in EventType:
            if counts[t]:
                m.metrics.event(t.name.lower(), int(counts[t]))
        t = ev["type"]
        reopen = (t == EventType.CLOSED) & (ev["reason"] == Reason.TCP_REOPEN)
        m.metrics.count("tcp_reopen", int(reopen.sum()))
        gone = (t == EventType.AGED) | (t == EventType.CLOSED)
        on_fault = getattr(m, "on_fault_events", None)
        if on_fault is None:
            gone |= (t == EventType.ECC_UNCORRECTABLE) & (ev["reason"] == Reason.KEY_CONSISTENT)
        m._release(ev["aux"][gone])
        if on_fault is not None:
            on_fault(ev)
        mm = ev[t == EventType.VERSION_MISMATCH]
        if len(mm):
            _resync(m, mm)
        m._redecided = np.zeros(0, np.uint64)  # keys re-decided on the punt path since last poll
        overflow = bool((t == EventType.RING_OVERFLOW).any())
    if overflow:
        patrol(m)
    return len(ev)


def _resync(m: Manager, mm: np.ndarray) -> None:
    """Re-decide sessions whose mismatch the punt path has not handled yet."""
    from starfabric.fornax.manager.manager import keys_of_flow

    keys = original_from_entries(mm)
    todo = ~np.isin(key_hash(keys_of_flow(keys)), m._redecided)
    if not todo.any():
        return
    keys = keys.take(todo)
    st, rec = m._call("query", m.engine.query, keys, n=len(keys))
    ok = st == Status.OK
    cur_e = m._versions(Scope.ENI, rec["eni_scope"][ok])
    cur_v = m._versions(Scope.VPC, rec["vpc_scope"][ok])
    stale = np.zeros(len(rec), bool)
    stale[ok] = (rec["eni_version"][ok] != cur_e) | (rec["vpc_version"][ok] != cur_v)
    rec, keys = rec[stale], keys.take(stale)
    grant = m.budget.take(len(rec))
    rec, keys = rec[:grant], keys.take(np.arange(grant))
    if not grant:
        return
    orig = original_from_entries(rec)
    d = decide(m.policy, packets_of(orig, m.now_ns), m.nat, drop_action=m.drop,
               drop_sessions=m.config.install_drop_sessions, old_aux=rec["aux"])  # fmt: skip
    m.metrics.count("redecided", grant)
    same = d.session & (d.eni_scope == rec["eni_scope"]) & (d.vpc_scope == rec["vpc_scope"])
    if same.any():
        m._call(
            "modify", m.engine.modify, orig.take(same), n=int(same.sum()),
            action_orig=d.action_orig[same], action_reply=d.action_reply[same],
            eni_version=m._versions(Scope.ENI, d.eni_scope[same]),
            vpc_version=m._versions(Scope.VPC, d.vpc_scope[same]), aux=d.aux[same],
        )  # fmt: skip
        m.metrics.count("modified", int(same.sum()))
    other = ~same
    if other.any():
        m._call("delete", m.engine.delete, orig.take(other), n=int(other.sum()))
        m._release(d.aux[other & ~d.session])
    moved = other & d.session
    if moved.any():
        m._call(
            "insert", m.engine.insert, orig.take(moved), n=int(moved.sum()),
            action_orig=d.action_orig[moved], action_reply=d.action_reply[moved],
            eni_scope=d.eni_scope[moved], vpc_scope=d.vpc_scope[moved],
            eni_version=m._versions(Scope.ENI, d.eni_scope[moved]),
            vpc_version=m._versions(Scope.VPC, d.vpc_scope[moved]),
            now_ns=rec["last_seen_ns"][moved], track=rec["track"][moved],
            aux=d.aux[moved],
        )  # fmt: skip


def patrol(m: Manager) -> dict[str, int]:
    """One bounded dump-based scan (patrol_max_entries, in patrol_chunk chunks, continuing
    from the last cursor). A pass that covers the whole table in one call, with no entry
    displaced meanwhile (dumps may then miss an entry), rebuilds the SNAT bitmaps from what
    hardware and software hold, freeing ports whose AGED/CLOSED events were lost."""
    with m.metrics.activity("patrol"):
        m.metrics.count("patrol_passes")
        cap = m.engine.config.capacity
        start = m._patrol_cursor
        disp0 = m.engine.counters().get("displacements", 0)
        seen = NatPools(m.policy, m.config.nat_port_min, m.config.nat_port_max)
        seen.set_policy(m.policy)
        cursor, read = start, 0
        while read < m.config.patrol_max_entries:
            recs, cursor = m._call("dump", m.engine.dump, cursor, m.config.patrol_chunk)
            m.metrics.ops["dump_entries"] += len(recs)
            read += len(recs)
            _mark(seen, m.nat, recs["aux"])
            if cursor >= cap:
                break
        m._patrol_cursor = 0 if cursor >= cap else cursor
        freed = 0
        clean = m.engine.counters().get("displacements", 0) == disp0
        if start == 0 and cursor >= cap and clean:
            _mark(seen, m.nat, m.softpath.sessions()["aux"])
            freed = m.nat.allocated() - seen.allocated()
            m.nat.bitmap[:] = seen.bitmap[: len(m.nat.bitmap)]
            m.nat.used[:] = seen.used[: len(m.nat.used)]
            m.metrics.count("patrol_nat_freed", freed)
        m.metrics.count("patrol_entries", read)
        return {"entries": read, "nat_freed": freed}


def patrol_step(m: Manager, n_entries: int, chunk: int = 4096) -> dict[str, int]:
    """Inspect up to n_entries hardware sessions from the patrol cursor (see the module
    docstring); returns what was read, found and repaired, and whether the cursor wrapped."""
    out = {"entries": 0, "key_inconsistent": 0, "policy_drift": 0, "repaired": 0, "wrapped": 0}
    cap = m.engine.config.capacity
    with m.metrics.activity("patrol"):
        while out["entries"] < n_entries:
            want = min(chunk, n_entries - out["entries"])
            recs, cursor = m._call("dump", m.engine.dump, m._patrol_cursor, want)
            m.metrics.ops["dump_entries"] += len(recs)
            out["entries"] += len(recs)
            m._patrol_cursor = 0 if cursor >= cap else cursor
            if cursor >= cap:
                out["wrapped"] = 1
            if len(recs):
                _inspect(m, recs, out)
            if cursor >= cap or not len(recs):
                break
        m.metrics.count("patrol_entries", out["entries"])
        m.metrics.count("patrol_key_inconsistent", out["key_inconsistent"])
        m.metrics.count("patrol_policy_drift", out["policy_drift"])
        m.metrics.count("patrol_repaired", out["repaired"])
    return out


def policy_fields(m: Manager, keys: FlowKeys) -> tuple[np.ndarray, ...]:
    """(action_orig, action_reply, eni_scope, vpc_scope) the current policy gives these
    ORIGINAL keys, as hardware handles, without allocating anything (no SNAT port)."""
    r = evaluate(m.policy, packets_of(keys, m.now_ns))
    fwd = np.where(r.reason == 0, r.fwd_action, np.uint32(m.drop)).astype(np.uint32)
    return (
        hw_actions(m.policy, fwd, m.drop),
        hw_actions(m.policy, r.rev_action, m.drop),
        r.eni_scope.astype(np.uint32),
        r.vpc_scope.astype(np.uint32),
    )


def _inspect(m: Manager, recs: np.ndarray, out: dict[str, int]) -> None:
    """Key consistency and policy agreement of dumped entries; drift repaired by modify."""
    keys = original_from_entries(recs)
    st, q = m._call("query", m.engine.query, keys, n=len(recs))
    lost = (st == Status.OK) & (q["slot"] != recs["slot"])  # moved meanwhile: not a fault
    bad = (st == Status.NOT_FOUND) & ~lost
    out["key_inconsistent"] += int(bad.sum())
    cur_e = m._versions(Scope.ENI, recs["eni_scope"])
    cur_v = m._versions(Scope.VPC, recs["vpc_scope"])
    fresh = (st == Status.OK) & (recs["eni_version"] == cur_e) & (recs["vpc_version"] == cur_v)
    if not fresh.any():
        return
    r = recs[fresh]
    k = keys.take(fresh)
    a_o, a_r, eni, vpc = policy_fields(m, k)
    drift = (a_o != r["action_orig"]) | (a_r != r["action_reply"])
    drift |= (eni != r["eni_scope"]) | (vpc != r["vpc_scope"])
    if not drift.any():
        return
    out["policy_drift"] += int(drift.sum())
    r, k = r[drift], k.take(drift)
    d = decide(m.policy, packets_of(k, m.now_ns), m.nat, drop_action=m.drop,
               drop_sessions=m.config.install_drop_sessions, old_aux=r["aux"])  # fmt: skip
    same = d.session & (d.eni_scope == r["eni_scope"]) & (d.vpc_scope == r["vpc_scope"])
    if same.any():
        st2 = m._call(
            "modify", m.engine.modify, k.take(same), n=int(same.sum()),
            action_orig=d.action_orig[same], action_reply=d.action_reply[same],
            eni_version=m._versions(Scope.ENI, d.eni_scope[same]),
            vpc_version=m._versions(Scope.VPC, d.vpc_scope[same]), aux=d.aux[same],
        )  # fmt: skip
        out["repaired"] += int((st2 == Status.OK).sum())
    other = ~same  # refused now (removed), or its scopes moved (re-created)
    if other.any():
        m._call("delete", m.engine.delete, k.take(other), n=int(other.sum()))
        m._release(d.aux[other & ~d.session])
        out["repaired"] += int(other.sum())
    moved = other & d.session
    if moved.any():
        m._call(
            "insert", m.engine.insert, k.take(moved), n=int(moved.sum()),
            action_orig=d.action_orig[moved], action_reply=d.action_reply[moved],
            eni_scope=d.eni_scope[moved], vpc_scope=d.vpc_scope[moved],
            eni_version=m._versions(Scope.ENI, d.eni_scope[moved]),
            vpc_version=m._versions(Scope.VPC, d.vpc_scope[moved]),
            now_ns=r["last_seen_ns"][moved], track=r["track"][moved], aux=d.aux[moved],
        )  # fmt: skip


def _mark(into: NatPools, like: NatPools, aux: np.ndarray) -> None:
    """Mark the allocations of cookies in `into`, whose IP numbering follows `like`'s."""
    held = cookie.has_nat(aux)
    if not held.any():
        return
    if len(into.used) < len(like.used):
        grow = len(like.used) - len(into.used)
        into.bitmap = np.vstack([into.bitmap, np.zeros((grow, into.bitmap.shape[1]), np.uint64)])
        into.used = np.concatenate([into.used, np.zeros(grow, np.int64)])
        into.ip_cursor = np.concatenate([into.ip_cursor, np.zeros(grow, np.int64)])
    into.mark(cookie.nat_ip(aux[held]), cookie.nat_port(aux[held]))


__all__ = ["handle_events", "patrol", "patrol_step", "policy_fields"]
