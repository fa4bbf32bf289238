"""Hardware events and the patrol: what the manager does when the engine tells it something.

- AGED / CLOSED: the session is gone; its SNAT allocation (in the event's aux) is released.
  A CLOSED of reason TCP_REOPEN too: the reopening SYN was punted and decided as a new
  connection with its own allocation.
- VERSION_MISMATCH: the session is decided again and modified (budgeted); a session the punt
  path already re-decided in the same batch is skipped, one not granted budget stays stale
  and is re-decided on its next packet (stale sessions are never forwarded).
- TABLE_FULL / INSERT_FAILED: counted; the session is already forwarding in software.
- ECC_UNCORRECTABLE: the entry is gone; with a consistent key its allocation is released
  (failover.Resilience puts its own handlers in the table: it rebuilds the session instead
  and keeps the allocation; it also takes ECC_CORRECTED, RING_OVERFLOW and PIPELINE_HANG).
- RING_OVERFLOW: events were lost, so a patrol pass runs (a bounded dump-based scan that
  frees SNAT ports whose AGED/CLOSED events were lost).

Handlers live in the manager's {EventType: handler} table (`default_handlers`; parts add
theirs) and are run in `ORDER`, one call per type present in the poll.

`patrol_step` is the periodic, rate-bounded part of the patrol: each call inspects the next
entries from the patrol cursor and checks integrity (the engine checks every entry's ECC as
it is read: errors become events; the key must find its own entry again) and that the
entry's actions are what the CURRENT policy gives it (entries whose version snapshot is
current; stale ones are re-decided on their next packet anyway), repairing drift by modify.
"""

from __future__ import annotations

import numpy as np

from starfabric.fornax.engine.interface import EventType, FlowKeys, Reason, Scope, Status
from starfabric.fornax.keys import canonicalize, key_hash
from starfabric.fornax.manager.decide import Decision, original_from_entries, policy_fields
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.manager.parts import Handler
from starfabric.fornax.manager.protocols import ManagerState

#: The order handlers run in within one poll: releases first, then faults, then re-decisions.
ORDER = (
    EventType.AGED,
    EventType.CLOSED,
    EventType.ECC_CORRECTED,
    EventType.ECC_UNCORRECTABLE,
    EventType.RING_OVERFLOW,
    EventType.PIPELINE_HANG,
    EventType.VERSION_MISMATCH,
    EventType.TABLE_FULL,
    EventType.INSERT_FAILED,
)


def default_handlers(m: ManagerState) -> dict[EventType, Handler]:
    """The plain manager's table: releases and re-decisions (TABLE_FULL / INSERT_FAILED are
    only counted: the session already forwards in software)."""

    def release(ev: np.ndarray) -> None:
        m.release(ev["aux"])

    def lost(ev: np.ndarray) -> None:
        m.release(ev["aux"][ev["reason"] == Reason.KEY_CONSISTENT])

    return {
        EventType.AGED: release,
        EventType.CLOSED: release,
        EventType.ECC_UNCORRECTABLE: lost,
        EventType.VERSION_MISMATCH: lambda ev: resync(m, ev),
    }


def handle_events(m: ManagerState) -> int:
    """Poll and handle one ring's worth of events; returns how many were read."""
    with m.metrics.activity("events"):
        ev = m.driver.call("poll", m.engine.poll_events, m.config.event_poll_max)
        if not len(ev):
            return 0
        counts = np.bincount(ev["type"], minlength=len(EventType) + 1)
        for t in EventType:
            if counts[t]:
                m.metrics.event(t.name.lower(), int(counts[t]))
        t = ev["type"]
        reopen = (t == EventType.CLOSED) & (ev["reason"] == Reason.TCP_REOPEN)
        m.metrics.count("tcp_reopen", int(reopen.sum()))
        for typ in ORDER:
            h = m.handlers.get(typ)
            if h is not None and counts[typ]:
                h(ev[t == typ])
        for p in m.parts:
            p.after_poll()
        m.redecided = np.zeros(0, np.uint64)  # keys re-decided on the punt path since last poll
        overflow = bool(counts[EventType.RING_OVERFLOW])
    if overflow:
        patrol(m)
    return len(ev)


def resync(m: ManagerState, mm: np.ndarray) -> None:
    """VERSION_MISMATCH: re-decide sessions whose mismatch the punt path has not handled."""
    keys = original_from_entries(mm)
    todo = ~np.isin(key_hash(canonicalize(keys)), m.redecided)
    if not todo.any():
        return
    keys = keys.take(todo)
    st, rec = m.driver.query(keys)
    ok = st == Status.OK
    cur_e = m.driver.versions(Scope.ENI, rec["eni_scope"][ok])
    cur_v = m.driver.versions(Scope.VPC, rec["vpc_scope"][ok])
    stale = np.zeros(len(rec), bool)
    stale[ok] = (rec["eni_version"][ok] != cur_e) | (rec["vpc_version"][ok] != cur_v)
    rec, keys = rec[stale], keys.take(stale)
    grant = m.budget.take(len(rec))
    rec, keys = rec[:grant], keys.take(np.arange(grant))
    if not grant:
        return
    orig = original_from_entries(rec)
    d = m.decide(orig, rec["aux"])
    m.metrics.count("redecided", grant)
    repair(m, orig, rec, d)


def repair(
    m: ManagerState, keys: FlowKeys, rec: np.ndarray, d: Decision, *, count: bool = True
) -> int:
    """Bring hardware entries `rec` (ORIGINAL keys `keys`) to decision `d`: modify where the
    scopes are unchanged, delete where policy now refuses the session, delete + insert where
    the scopes moved; returns how many were fixed (modifies that succeeded, plus the rest)."""
    same = d.session & (d.eni_scope == rec["eni_scope"]) & (d.vpc_scope == rec["vpc_scope"])
    fixed = 0
    if same.any():
        st = m.driver.modify_decided(keys, d, same)
        fixed += int((st == Status.OK).sum())
        if count:
            m.metrics.count("modified", int(same.sum()))
    other = ~same
    if other.any():
        m.driver.delete(keys.take(other))
        m.release(d.aux[other & ~d.session])
        fixed += int(other.sum())
    moved = other & d.session
    if moved.any():
        m.driver.insert_decided(keys, d, moved, rec)
    return fixed


def patrol(m: ManagerState) -> dict[str, int]:
    """One bounded dump-based scan (patrol_max_entries, in patrol_chunk chunks, continuing
    from the last cursor). A pass that covers the whole table in one call, with no entry
    displaced meanwhile (dumps may then miss an entry), rebuilds the SNAT bitmaps from what
    hardware and software hold, freeing ports whose AGED/CLOSED events were lost."""
    with m.metrics.activity("patrol"):
        m.metrics.count("patrol_passes")
        cap = m.engine.config.capacity
        start = m.patrol_cursor
        disp0 = m.engine.counters().get("displacements", 0)
        seen = NatPools(m.policy, m.config.nat_port_min, m.config.nat_port_max)
        seen.set_policy(m.policy)
        cursor, read = start, 0
        while read < m.config.patrol_max_entries:
            recs, cursor = m.driver.dump(cursor, m.config.patrol_chunk)
            read += len(recs)
            seen.mark_cookies(recs["aux"], m.nat)
            if cursor >= cap:
                break
        m.patrol_cursor = 0 if cursor >= cap else cursor
        freed = 0
        clean = m.engine.counters().get("displacements", 0) == disp0
        if start == 0 and cursor >= cap and clean:
            seen.mark_cookies(m.soft.dump(0, m.soft.config.capacity)[0]["aux"], m.nat)
            freed = m.nat.allocated() - seen.allocated()
            m.nat.bitmap[:] = seen.bitmap[: len(m.nat.bitmap)]
            m.nat.used[:] = seen.used[: len(m.nat.used)]
            m.metrics.count("patrol_nat_freed", freed)
        m.metrics.count("patrol_entries", read)
        return {"entries": read, "nat_freed": freed}


def patrol_step(m: ManagerState, n_entries: int, chunk: int = 4096) -> dict[str, int]:
    """Inspect up to n_entries hardware sessions from the patrol cursor (see the module
    docstring); returns what was read, found and repaired, and whether the cursor wrapped."""
    out = {"entries": 0, "key_inconsistent": 0, "policy_drift": 0, "repaired": 0, "wrapped": 0}
    cap = m.engine.config.capacity
    with m.metrics.activity("patrol"):
        while out["entries"] < n_entries:
            want = min(chunk, n_entries - out["entries"])
            recs, cursor = m.driver.dump(m.patrol_cursor, want)
            out["entries"] += len(recs)
            m.patrol_cursor = 0 if cursor >= cap else cursor
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


def _inspect(m: ManagerState, recs: np.ndarray, out: dict[str, int]) -> None:
    """Key consistency and policy agreement of dumped entries; drift repaired by modify."""
    keys = original_from_entries(recs)
    st, q = m.driver.query(keys)
    lost = (st == Status.OK) & (q["slot"] != recs["slot"])  # moved meanwhile: not a fault
    bad = (st == Status.NOT_FOUND) & ~lost
    out["key_inconsistent"] += int(bad.sum())
    cur_e = m.driver.versions(Scope.ENI, recs["eni_scope"])
    cur_v = m.driver.versions(Scope.VPC, recs["vpc_scope"])
    fresh = (st == Status.OK) & (recs["eni_version"] == cur_e) & (recs["vpc_version"] == cur_v)
    if not fresh.any():
        return
    r = recs[fresh]
    k = keys.take(fresh)
    a_o, a_r, eni, vpc = policy_fields(m.policy, k, m.now_ns, m.drop)
    drift = (a_o != r["action_orig"]) | (a_r != r["action_reply"])
    drift |= (eni != r["eni_scope"]) | (vpc != r["vpc_scope"])
    if not drift.any():
        return
    out["policy_drift"] += int(drift.sum())
    r, k = r[drift], k.take(drift)
    out["repaired"] += repair(m, k, r, m.decide(k, r["aux"]), count=False)


__all__ = [
    "ORDER",
    "default_handlers",
    "handle_events",
    "patrol",
    "patrol_step",
    "repair",
    "resync",
]
