"""The software datapath behind the engine contract: `SoftEngine` implements SessionEngine
(engine/interface.py) over a SoftPath, as Open vSwitch's dpif-netdev implements dpif_class
beside the kernel's dpif-netlink, so software and hardware are two datapaths of one
contract: entry operations by key with per-entry status, the packet path with the engine's
outcomes, O(1) scope versions, dumps, aging (`scrub`) reported as AGED/CLOSED events, the
engine's events (VERSION_MISMATCH once per stale session until modify, CLOSED when the
tracker ends one, TABLE_FULL) and its counters, so that the same calls give the same records,
events and counters as hardware (tests/fornax/test_contract_conformance.py).
What hardware has and software does not: ECC-protected records and ports (the fault hooks
refuse, as malformed calls). What software has and hardware does not: a packet-rate budget
(`admit`, the SoftPath's token bucket; the contract's `process` runs every packet)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import interface as I
from starfabric.fornax.keys import canonicalize
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.softpath import SoftOutcome, SoftPath, SoftStatus

_OUTCOME = np.array([I.Outcome.HIT, I.Outcome.MISS, I.Outcome.STALE, I.Outcome.DROP_HW, I.Outcome.MISS],
                    np.uint8)  # fmt: skip
_STATUS_OF = np.zeros(max(SoftStatus) + 1, np.uint8)  # SoftStatus -> I.Status
_STATUS_OF[[SoftStatus.OK, SoftStatus.EXISTS, SoftStatus.FULL]] = (I.Status.OK, I.Status.EXISTS,
                                                                  I.Status.TABLE_FULL)  # fmt: skip
#: insert arguments given per key (the rest are scalars or None)
_PER_ROW = frozenset(("action_orig", "action_reply", "eni_scope", "vpc_scope", "eni_version",
                      "vpc_version", "now_ns", "tcp_state", "aux", "track"))  # fmt: skip
_S16 = np.uint64(16)
#: Flag bits of the tracker row's meta word an entry record reports as they are (ORIG_B is
#: the orig_dir column's).
_FLAGS_KEPT = np.uint64(0xFF & ~CT.FLAG_ORIG_B)
#: An entry record's track[0]: the tracker's meta bits and the TCP state (records.py).
_TRACK_WORD0 = np.uint64(CT.TRACK_META_MASK | 0xFF00)
#: The engine's "VERSION_MISMATCH reported" flag, kept where the engine keeps it: the meta
#: word's flags byte (of the tracker row here); modify and re-decisions clear it.
_MISMATCH = np.uint64(CT.FLAG_MISMATCH_REPORTED << 16)
#: Verdicts with which the tracker ends a session in the batch (SoftResult.ended_slots).
_ENDING = (CT.V_REOPEN, CT.V_KILL, CT.V_INVALID_NEW, CT.V_UNTRACKED)
_CLOSE_REASON = {CT.V_REOPEN: I.Reason.TCP_REOPEN, CT.V_KILL: I.Reason.CT_KILLED}
_OUTCOME_COUNTER = np.array([I.Counter[o.name] for o in I.Outcome], np.int64)
_INSERT_COUNTER = {I.Status.OK: I.Counter.INSERT_OK, I.Status.EXISTS: I.Counter.INSERT_EXISTS,
                   I.Status.TABLE_FULL: I.Counter.INSERT_TABLE_FULL,
                   I.Status.BAD_SCOPE: I.Counter.INSERT_BAD_SCOPE}  # fmt: skip
_VERDICT_REASON = {CT.V_INVALID: I.Reason.TCP_INVALID, CT.V_IGNORE: I.Reason.TCP_IGNORED,
                   CT.V_KILL: I.Reason.CT_KILLED, CT.V_INVALID_NEW: I.Reason.CT_INVALID_NEW,
                   CT.V_REOPEN: I.Reason.TCP_REOPEN,
                   CT.V_UNTRACKED: I.Reason.CT_UNTRACKED}  # fmt: skip


class SoftEngine(I.SessionEngine):
    """A SoftPath seen through the engine contract (see the module docstring). Its
    `config.capacity` is the software table's slot count (dump cursors run over it)."""

    def __init__(self, sp: SoftPath) -> None:
        self.sp = sp
        self.config = sp.engine_config.model_copy(update={"capacity": len(sp.used)})
        self._events: list[np.ndarray] = []
        self._latest = 0
        self._ctr = np.zeros(I.N_COUNTERS, np.int64)  # the engine's counters (I.Counter)

    def _count(self, c: I.Counter, n: int | np.integer) -> None:
        self._ctr[c] += int(n)

    def _ops(self, ok: npt.NDArray[np.bool_], c_ok: I.Counter, c_nf: I.Counter) -> None:
        """Count an entry operation's OK and NOT_FOUND keys."""
        n_ok = int(np.count_nonzero(ok))
        self._count(c_ok, n_ok)
        self._count(c_nf, len(ok) - n_ok)

    # ---- helpers -----------------------------------------------------------------------
    def _slots(self, keys: I.FlowKeys) -> npt.NDArray[np.int64]:
        return self.sp.lookup(canonicalize(keys))

    def _entries(self, slots: npt.NDArray[np.int64], now_ns: int) -> np.ndarray:
        """I.ENTRY_DTYPE records (ORIGINAL orientation) of software slots, from the software
        path's columns (SoftPath.session_columns) turned to the ORIGINAL side."""
        sp = self.sp
        s = np.asarray(slots, np.int64)
        c = sp.session_columns(s)
        out = np.zeros(len(s), I.ENTRY_DTYPE)
        for f in ("slot", "vni", "proto", "tcp_state", "eni_scope", "vpc_scope", "action_orig",
                  "action_reply", "last_seen_ns", "pkts_orig", "pkts_reply", "aux",
                  "expires_ns"):  # fmt: skip
            out[f] = c[f]
        od = c["orig_dir"]
        # the tracker row's meta word is laid out as the engine's (proto | state << 8 | flags
        # << 16): its flags byte holds SEEN_REPLY and ASSURED; ORIG_B is the orig_dir column
        meta = c["track"][:, 0]
        out["flags"] = ((meta >> _S16) & _FLAGS_KEPT) | od.astype(np.uint64)
        out["track"] = c["track"]
        out["track"][:, 0] = meta & _TRACK_WORD0  # as the engine reports it (no proto)
        sw = od == 1
        out["src_hi"] = np.where(sw, c["b_hi"], c["a_hi"])
        out["src_lo"] = np.where(sw, c["b_lo"], c["a_lo"])
        out["dst_hi"] = np.where(sw, c["a_hi"], c["b_hi"])
        out["dst_lo"] = np.where(sw, c["a_lo"], c["b_lo"])
        out["sport"] = np.where(sw, c["b_port"], c["a_port"])
        out["dport"] = np.where(sw, c["a_port"], c["b_port"])
        out["bytes_orig"] = sp.nbytes[s, od]
        out["bytes_reply"] = sp.nbytes[s, 1 - od]
        ver = sp.ver[s]
        out["eni_version"] = ver[:, 0]
        out["vpc_version"] = ver[:, 1]
        out["stale"] = sp.stale(s)
        out["remaining_ns"] = np.maximum(out["expires_ns"] - now_ns, 0)
        return out

    def records(self, slots: npt.NDArray[np.int64]) -> np.ndarray:
        """I.ENTRY_DTYPE records of sessions by software slot (the handles `insert_slots`
        returned and `process` reports), as `query` would read them by key."""
        return self._entries(slots, self._latest)

    def move_columns(self, slots: npt.NDArray[np.int64]) -> dict[str, np.ndarray]:
        """What sessions by software slot carry into another engine, as columns
        (SoftPath.move_columns: canonical key and orig_dir, actions, scopes, last_seen_ns,
        track, aux), with no record built: the move path (manager/moves.py)."""
        return self.sp.move_columns(np.asarray(slots, np.int64))

    def delete_slots(self, slots: npt.NDArray[np.int64]) -> None:
        """Delete sessions by software slot (the handles `insert_slots` returned), as
        `delete` does by key: a move's last step, once the other engine took them."""
        slots = np.asarray(slots, np.int64)
        self.sp.delete(slots)
        self._count(I.Counter.DELETE_OK, len(slots))

    def current_slots(self) -> npt.NDArray[np.int64]:
        """Slots of the sessions decided under the current versions of both scopes (the
        ones the manager may promote: a stale one is re-decided on its next packet first)."""
        return self.sp.current_slots()

    def live(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether each software slot still holds its session (one the tracker ended in a
        batch does not)."""
        return self.sp.live(slots)

    def _event(
        self, typ: npt.ArrayLike, recs: np.ndarray, *, time_ns: npt.ArrayLike,
        reason: npt.ArrayLike = 0, port: npt.ArrayLike = 0,
    ) -> np.ndarray:  # fmt: skip
        """EVENT_DTYPE records of type(s) `typ` for ENTRY_DTYPE records `recs` (not raised)."""
        ev = np.zeros(len(recs), I.EVENT_DTYPE)
        ev["type"] = typ
        ev["time_ns"] = time_ns
        ev["reason"] = reason
        ev["port"] = port
        for f in ("slot", "vni", "proto", "tcp_state", "flags", "src_hi", "src_lo", "dst_hi",
                  "dst_lo", "sport", "dport", "eni_scope", "vpc_scope", "eni_version",
                  "vpc_version", "action_orig", "action_reply", "pkts_orig", "pkts_reply",
                  "bytes_orig", "bytes_reply", "aux"):  # fmt: skip
            ev[f] = recs[f]
        return ev

    def _raise(self, ev: np.ndarray) -> None:
        """Queue events (software's queue is unbounded: none is lost)."""
        if len(ev):
            self._events.append(ev)
            self._count(I.Counter.EVENTS_RAISED, len(ev))

    # ---- packet path -------------------------------------------------------------------
    def process(self, batch: PacketBatch) -> I.ProcessResult:
        ck = canonicalize(batch)
        n = len(batch)
        if n:
            self._latest = max(self._latest, int(batch.time_ns.max()))
        sp = self.sp
        r = sp.process(batch, ck, limit=False)
        outcome = _OUTCOME[r.outcome]
        v = r.verdict
        reason = np.zeros(n, np.uint8)
        reason[r.outcome == SoftOutcome.MISS] = I.Reason.NO_ENTRY
        for verdict, why in _VERDICT_REASON.items():
            reason[v == verdict] = why
        # the drop action decides before the tracker's verdict (a drop by invalid_policy is
        # TCP_INVALID), as in the engine
        by_action = (r.outcome == SoftOutcome.DROP) & (r.action == sp.drop_action)
        reason[by_action] = I.Reason.DROP_ACTION
        state = r.tcp_state.copy()
        slot = r.slot.copy()  # with the slots of the sessions ended here, for what they were
        ended = np.flatnonzero(np.isin(v, _ENDING))
        slot[ended] = r.ended_slots
        state[v == CT.V_REOPEN] = 0  # the reopening SYN is a MISS: no entry
        st = np.flatnonzero(r.outcome == SoftOutcome.STALE)
        if len(st):
            eni_old, _ = sp.old_scopes(r.slot[st])
            reason[st] = np.where(eni_old, I.Reason.ENI_VERSION, I.Reason.VPC_VERSION)
            state[st] = (sp.trk[r.slot[st], 0] >> np.uint64(8)) & np.uint64(0xFF)
        has = (slot >= 0) & (v != CT.V_REOPEN)
        reply = np.full(n, 255, np.uint8)
        reply[has] = (r.direction[has] != sp.orig_dir[slot[has]]).astype(np.uint8)
        self._process_events(batch, r.slot, st, ended, r.ended_slots, v, reason)
        self._count_packets(batch, outcome, v, len(ended))
        return I.ProcessResult(outcome, reason, r.direction, reply, r.action, r.slot, state, v)

    def _process_events(
        self, batch: PacketBatch, slot: npt.NDArray[np.int64], stale: npt.NDArray[np.int64],
        ended: npt.NDArray[np.int64], ended_slots: npt.NDArray[np.int64],
        verdict: npt.NDArray[np.uint8], reason: npt.NDArray[np.uint8],
    ) -> None:  # fmt: skip
        """The batch's events in packet order, each at its packet's time and port: one
        VERSION_MISMATCH per stale session not yet reported (packets `stale`), a CLOSED for
        each session the tracker ended (packets `ended`, sessions `ended_slots`)."""
        sp = self.sp
        _, first = np.unique(slot[stale], return_index=True)
        cand = stale[np.sort(first)]  # each stale session's first packet
        new = (sp.trk[slot[cand], 0] & _MISMATCH) == 0
        mis = cand[new]
        sp.trk[slot[mis], 0] |= _MISMATCH
        self._count(I.Counter.MISMATCH_EVENTS, len(mis))
        if not len(mis) and not len(ended):
            return
        close_reason = np.zeros(len(ended), np.uint8)
        for v, why in _CLOSE_REASON.items():
            close_reason[verdict[ended] == v] = why
        ev = np.concatenate([
            self._event(I.EventType.VERSION_MISMATCH, self._entries(slot[mis], self._latest),
                        time_ns=batch.time_ns[mis], reason=reason[mis], port=batch.port[mis]),
            self._event(I.EventType.CLOSED, self._entries(ended_slots, self._latest),
                        time_ns=batch.time_ns[ended], reason=close_reason,
                        port=batch.port[ended]),
        ])  # fmt: skip
        self._raise(ev[np.argsort(np.concatenate([mis, ended]), kind="stable")])

    def _count_packets(
        self, batch: PacketBatch, outcome: npt.NDArray[np.uint8],
        verdict: npt.NDArray[np.uint8], n_closed: int,
    ) -> None:  # fmt: skip
        """The engine's per-packet counters of one batch."""
        c = self._ctr
        c[I.Counter.PACKETS] += len(batch)
        np.add.at(c, _OUTCOME_COUNTER[outcome], 1)
        c[I.Counter.BYTES_FORWARDED] += int(batch.length[outcome == I.Outcome.HIT].sum())
        for v, name in ((CT.V_INVALID, I.Counter.TCP_INVALID),
                        (CT.V_IGNORE, I.Counter.TCP_IGNORED),
                        (CT.V_REOPEN, I.Counter.TCP_REOPEN)):  # fmt: skip
            c[name] += int(np.count_nonzero(verdict == v))
        c[I.Counter.CLOSED] += n_closed

    def admit(self, batch: PacketBatch) -> int:
        """The rate limit: how many packets of the batch the software budget admits now."""
        return self.sp._admit(batch)

    # ---- entry operations --------------------------------------------------------------
    def insert(self, keys: I.FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        """As I.SessionEngine.insert (same keyword arguments): sessions by key, in order (a
        later key sees an earlier one's effect: the table's insert kernel runs in order)."""
        now = I.broadcast_arg(kw["now_ns"], len(keys), np.int64, "now_ns")
        if len(now) and (now != now[0]).any():  # one deadline base per call: key by key
            out = np.empty(len(keys), np.uint8)
            for i in range(len(keys)):
                one = {k: v if k not in _PER_ROW or np.ndim(v) == 0 else np.asarray(v)[i : i + 1]
                       for k, v in kw.items()}  # fmt: skip
                out[i : i + 1] = self.insert(keys.take([i]), **one)
            return out
        return self._insert(keys, kw, int(now[0]) if len(now) else 0)[0]

    def insert_slots(
        self, keys: I.FlowKeys, **kw: Any
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """As `insert` at one `now_ns` (an int), also returning each session's software slot
        (-1 where refused): the handle the manager's push queue keeps (location.Outbox)."""
        return self._insert(keys, kw, int(kw["now_ns"]))

    def _insert(self, keys: I.FlowKeys, kw: dict[str, Any], now_ns: int
                ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:  # fmt: skip
        n = len(keys)
        sp = self.sp

        def arg(name: str, dt: type[np.generic], default: Any = None) -> np.ndarray:
            return I.broadcast_arg(kw.get(name, default), n, dt, name)

        eni, vpc = arg("eni_scope", np.uint32), arg("vpc_scope", np.uint32)
        status = np.full(n, int(I.Status.BAD_SCOPE), np.uint8)
        slots = np.full(n, -1, np.int64)
        self._latest = max(self._latest, now_ns)
        good = np.flatnonzero((eni < len(sp.eni_cur)) & (vpc < len(sp.vpc_cur)))
        if not len(good):
            self._count(I.Counter.INSERT_BAD_SCOPE, n)
            return status, slots
        ck = canonicalize(keys.take(good))
        track = kw.get("track")
        trk = None if track is None else np.asarray(track, np.uint64).reshape(n, -1)[good]
        st, slot = sp.insert(
            ck, orig_dir=ck.direction, eni_scope=eni[good], vpc_scope=vpc[good],
            action_orig=arg("action_orig", np.uint32)[good],
            action_reply=arg("action_reply", np.uint32)[good], now_ns=now_ns,
            tcp_state=arg("tcp_state", np.uint8, 0)[good], aux=arg("aux", np.uint64, 0)[good],
            track=trk,
        )  # fmt: skip
        status[good] = _STATUS_OF[st]
        ok = st == SoftStatus.OK
        s = slot[ok]
        sp.ver[s, 0] = arg("eni_version", np.uint32)[good][ok]
        sp.ver[s, 1] = arg("vpc_version", np.uint32)[good][ok]
        slots[good[ok]] = s
        for code, counter in _INSERT_COUNTER.items():
            self._count(counter, np.count_nonzero(status == code))
        full = np.flatnonzero(st == SoftStatus.FULL)
        if len(full):  # the entries refused, as the engine reports them (no slot)
            rec = self._would_be(keys.take(good[full]), ck.direction[full], kw, n, good[full],
                                 None if trk is None else trk[full], now_ns)  # fmt: skip
            self._raise(self._event(I.EventType.TABLE_FULL, rec, time_ns=now_ns))
        return status, slots

    def _would_be(
        self, keys: I.FlowKeys, orig_dir: npt.NDArray[np.uint8], kw: dict[str, Any], n: int,
        rows: npt.NDArray[np.int64], track: np.ndarray | None, now_ns: int,
    ) -> np.ndarray:  # fmt: skip
        """ENTRY_DTYPE records of the entries an insert of n keys would have made for its
        keys `rows` (`keys`, canonical direction `orig_dir`): what TABLE_FULL carries."""

        def arg(name: str, dt: type[np.generic], default: Any = None) -> np.ndarray:
            return I.broadcast_arg(kw.get(name, default), n, dt, name)[rows]

        rec = np.zeros(len(keys), I.ENTRY_DTYPE)
        for f in ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport"):
            rec[f] = getattr(keys, f)
        trk = (track if track is not None else
               self.sp.installed_rows(keys.proto, arg("tcp_state", np.uint8, 0), now_ns))  # fmt: skip
        rec["tcp_state"] = (trk[:, 0] >> np.uint64(8)) & np.uint64(0xFF)
        rec["flags"] = ((trk[:, 0] & _TRACK_WORD0) >> _S16) & np.uint64(0xFF) | orig_dir.astype(
            np.uint64
        )
        rec["slot"] = -1
        for f in ("eni_scope", "vpc_scope", "eni_version", "vpc_version", "action_orig",
                  "action_reply"):  # fmt: skip
            rec[f] = arg(f, np.uint32)
        rec["aux"] = arg("aux", np.uint64, 0)
        return rec

    def delete(self, keys: I.FlowKeys) -> npt.NDArray[np.uint8]:
        """As I.SessionEngine.delete: in order, so a key repeated is NOT_FOUND the second time."""
        s = self._slots(keys)
        found = s >= 0
        _, first = np.unique(s, return_index=True)
        once = np.zeros(len(s), bool)
        once[first] = True
        ok = found & once
        self.sp.delete(s[ok])
        self._ops(ok, I.Counter.DELETE_OK, I.Counter.DELETE_NOT_FOUND)
        return np.where(ok, I.Status.OK, I.Status.NOT_FOUND).astype(np.uint8)

    def modify(self, keys: I.FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        """As I.SessionEngine.modify (same keyword arguments; None or absent = unchanged)."""
        action_orig, action_reply = kw.get("action_orig"), kw.get("action_reply")
        eni_version, vpc_version = kw.get("eni_version"), kw.get("vpc_version")
        aux, tcp_state, track = kw.get("aux"), kw.get("tcp_state"), kw.get("track")
        timeout_ns = kw.get("timeout_ns")
        sp = self.sp
        n = len(keys)
        s = self._slots(keys)
        ok = s >= 0
        so = s[ok]
        od = sp.orig_dir[so].astype(np.int64)

        def col(v: Any, dt: type[np.generic], name: str) -> np.ndarray:
            return I.broadcast_arg(v, n, dt, name)[ok]

        if action_orig is not None:
            sp.act[so, od] = col(action_orig, np.uint32, "action_orig")
        if action_reply is not None:
            sp.act[so, 1 - od] = col(action_reply, np.uint32, "action_reply")
        if eni_version is not None:
            sp.ver[so, 0] = col(eni_version, np.uint32, "eni_version")
        if vpc_version is not None:
            sp.ver[so, 1] = col(vpc_version, np.uint32, "vpc_version")
        if aux is not None:
            sp.aux[so] = col(aux, np.uint64, "aux")
        if track is not None:  # the whole tracker state, its TCP state included
            rows = np.asarray(track, np.uint64).reshape(n, -1)[ok]
            keep = sp.trk[so, 0] & ~_TRACK_WORD0  # the protocol and the engine's own flags
            sp.trk[so] = rows
            sp.trk[so, 0] = keep | (rows[:, 0] & _TRACK_WORD0)
        if tcp_state is not None:
            st = col(tcp_state, np.uint8, "tcp_state").astype(np.uint64)
            sp.trk[so, 0] = (sp.trk[so, 0] & ~np.uint64(0xFF00)) | (st << np.uint64(8))
        if timeout_ns is not None:
            exp = self._latest + col(timeout_ns, np.int64, "timeout_ns")
            sp.trk[so, 1 + CT.T_EXPIRES] = exp.view(np.uint64)
        sp.trk[so, 0] &= ~_MISMATCH  # a stale session is reported again after a modify
        self._ops(ok, I.Counter.MODIFY_OK, I.Counter.MODIFY_NOT_FOUND)
        return np.where(ok, I.Status.OK, I.Status.NOT_FOUND).astype(np.uint8)

    def query(
        self, keys: I.FlowKeys, now_ns: int | None = None
    ) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        s = self._slots(keys)
        ok = s >= 0
        rec = np.zeros(len(keys), I.ENTRY_DTYPE)
        rec[ok] = self._entries(s[ok], self._latest if now_ns is None else now_ns)
        self._ops(ok, I.Counter.QUERY_OK, I.Counter.QUERY_NOT_FOUND)
        return np.where(ok, I.Status.OK, I.Status.NOT_FOUND).astype(np.uint8), rec

    def dump(self, cursor: int = 0, max_entries: int = 65536, **flt: Any) -> tuple[np.ndarray, int]:
        """As I.SessionEngine.dump (same filters), over the software table's slots."""
        sp = self.sp
        size = len(sp.used)
        live = np.flatnonzero(sp.used[cursor:] == 1) + cursor
        rec = self._entries(live, self._latest)
        sel = np.ones(len(rec), bool)
        for name in ("eni_scope", "vpc_scope"):
            if flt.get(name) is not None:
                sel &= rec[name] == flt[name]
        for name in ("eni_version", "vpc_version"):
            if flt.get(f"{name}_below") is not None:
                sel &= rec[name] < flt[f"{name}_below"]
        if flt.get("tcp_state") is not None:  # the state an entry holds, whatever its protocol
            sel &= rec["tcp_state"] == flt["tcp_state"]
        if flt.get("stale_only"):
            sel &= rec["stale"]
        pos = np.flatnonzero(sel)
        nxt = size if len(pos) <= max_entries else int(rec["slot"][pos[max_entries]])
        pos = pos[:max_entries]
        self._count(I.Counter.DUMP_ENTRIES, len(pos))
        return rec[pos], nxt

    def bump_version(self, scope: I.Scope, scope_id: int) -> int:
        self.sp.bump_version(scope, scope_id)
        self._count(I.Counter.VERSION_BUMPS, 1)
        return self.scope_version(scope, scope_id)

    def scope_version(self, scope: I.Scope, scope_id: int) -> int:
        cur = self.sp.eni_cur if scope == I.Scope.ENI else self.sp.vpc_cur
        return int(cur[scope_id])

    # ---- events, aging, counters ------------------------------------------------------
    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        ev = np.concatenate(self._events) if self._events else np.zeros(0, I.EVENT_DTYPE)
        self._events = [ev[max_n:]] if len(ev) > max_n else []
        return ev[:max_n]

    def scrub(self, now_ns: int, n_slots: int | None = None) -> I.ScrubResult:
        """Expire every session whose deadline has passed (software walks its whole table):
        AGED, or CLOSED in TIME_WAIT/CLOSE."""
        t0 = time.thread_time()
        self._latest = max(self._latest, now_ns)
        sp = self.sp
        due, closed = sp.due(now_ns)
        if len(due):  # one walk of the table: the records, then the deletes (as SoftPath.expire)
            rec = self._entries(due, now_ns)
            typ = np.where(closed, I.EventType.CLOSED, I.EventType.AGED)
            self._raise(self._event(typ, rec, time_ns=now_ns))  # in slot order
            sp.delete(due)
        self._count(I.Counter.CLOSED, np.count_nonzero(closed))
        self._count(I.Counter.AGED, len(due) - np.count_nonzero(closed))
        self._count(I.Counter.SCRUB_VISITED, len(sp.used))
        sp.cpu_s += time.thread_time() - t0
        return I.ScrubResult(visited=len(sp.used), expired=len(due), cursor=0)

    def counters(self) -> dict[str, int]:
        """The engine's counters (I.Counter names in lower case); those of hardware parts
        software has none of (ECC, ports, ring loss, displacements) stay 0."""
        return {c.name.lower(): int(self._ctr[c]) for c in I.Counter}

    def occupancy(self) -> int:
        return self.sp.occupancy()

    # ---- fault hooks: hardware only -----------------------------------------------------
    def slot_of(self, keys: I.FlowKeys) -> npt.NDArray[np.int64]:
        return self._slots(keys)

    def flip_bits(self, slot: int, bits: npt.ArrayLike) -> None:
        raise ConfigError("flip_bits: the software path has no ECC-protected records",
                          fix="inject bit flips into a hardware engine (FastEngine)")  # fmt: skip

    def stall_port(self, port: int) -> None:
        raise ConfigError("stall_port: the software path has no ports",
                          fix="stall a port of a hardware engine (FastEngine)")  # fmt: skip

    def unstall_port(self, port: int) -> None:
        self.stall_port(port)


__all__ = ["SoftEngine"]
