"""CPU software forwarding: the datapath for punted packets and sessions hardware could not
take (table full, setup budget spent), with the engine's semantics and its own costs.

Same semantics as the engine (engine/interface.py): sessions keyed canonically (keys.py), one
bidirectional entry with per-direction actions, nf_conntrack tracking through the engine's own
tracker (engine/conntrack.py: the same compiled code, on tracker rows of the same layout, so
a session moves between software and hardware with its whole window state), ENI/VPC version
snapshots (a stale session is not forwarded, it is reported STALE), and aging by the deadline
the tracker armed. A session's first packet creates its tracker entry; one the kernel would
not create (INVALID_NEW: a lone FIN or RST, bad flags, a pickup with tcp_loose=0, an ICMP
reply without request; UNTRACKED: ICMPv6 ND/MLD) ends the session again. An ICMP error quoting a session's tuple is
RELATED to it (conntrack.icmp_error_quotes, as the engine): forwarded with the session's
action, the session left as it is. Unlike the engine
it has a finite packet rate as well as a finite table: packets beyond `max_pps` of simulated
time are dropped as OVERLOAD and sessions beyond `capacity` are refused as FULL — named
outcomes, never silent. Its CPU time is measured (time.thread_time) per call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt
from pydantic import Field

from starfabric._jit import frozen_each
from starfabric.config import Spec
from starfabric.errors import ConfigError
from starfabric.fornax import _softpath_kernels as K
from starfabric.fornax import keyindex
from starfabric.fornax.engine import EngineConfig, Scope
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine.engine import TRACK_COLS, track_args
from starfabric.fornax.engine.tcp import TcpEvent, TcpState
from starfabric.fornax.keys import (
    CanonicalKeys,
    canonicalize,
    canonicalize_columns,
    key_hash,
    quoted_tuple,
)
from starfabric.fornax.packets import (
    PROTO_TCP,
    TCP_ACK,
    TCP_FIN,
    TCP_RST,
    TCP_SYN,
    PacketBatch,
)

#: The engine's "VERSION_MISMATCH reported" flag in a tracker row's meta word (laid out as the
#: engine's: proto | state << 8 | flags << 16); the SoftEngine sets it (softengine.py).
_MISMATCH = np.uint64(CT.FLAG_MISMATCH_REPORTED << 16)


class SoftOutcome(IntEnum):
    """What the software datapath did with one packet."""

    HIT = K.SP_HIT  # forwarded with the direction's action
    MISS = K.SP_MISS  # no software session
    STALE = K.SP_STALE  # session's scope version is old: not forwarded, needs re-evaluation
    DROP = K.SP_DROP  # the direction's action is drop
    OVERLOAD = 4  # beyond the packet-rate budget: dropped (named reason)


class SoftStatus(IntEnum):
    OK = keyindex.OK
    EXISTS = keyindex.EXISTS
    FULL = keyindex.FULL


class SoftPathConfig(Spec):
    """Size and speed of the software datapath."""

    capacity: int = Field(
        262144, ge=1, le=1 << 26, description="sessions the CPU table holds (assumption)"
    )
    max_pps: float = Field(
        2.0e6,
        gt=0,
        description="packets per simulated second it forwards (assumption: a few DPDK cores)",
    )
    burst_s: float = Field(
        0.01, gt=0, description="rate-budget burst, seconds of max_pps (assumption)"
    )


SESSION_DTYPE = np.dtype(
    [
        ("slot", np.int64),
        ("vni", np.uint32),
        ("proto", np.uint8),
        ("orig_dir", np.uint8),
        ("tcp_state", np.uint8),
        ("a_hi", np.uint64),
        ("a_lo", np.uint64),
        ("b_hi", np.uint64),
        ("b_lo", np.uint64),
        ("a_port", np.uint16),
        ("b_port", np.uint16),
        ("action_orig", np.uint32),
        ("action_reply", np.uint32),
        ("eni_scope", np.uint32),
        ("vpc_scope", np.uint32),
        ("last_seen_ns", np.int64),
        ("pkts_orig", np.uint64),
        ("pkts_reply", np.uint64),
        ("aux", np.uint64),
        ("expires_ns", np.int64),
        ("track", np.uint64, (TRACK_COLS,)),  # tracker row, as ENTRY_DTYPE "track"
    ]
)
"""A software session read back (canonical key plus which side is ORIGINAL)."""


def tcp_events(flags: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Vectorized engine/tcp.tcp_event: RST, then SYN(-ACK), FIN, ACK, none."""
    ev = np.full(len(flags), int(TcpEvent.NONE), dtype=np.uint8)
    ev[(flags & TCP_ACK) != 0] = TcpEvent.ACK
    ev[(flags & TCP_FIN) != 0] = TcpEvent.FIN
    syn = (flags & TCP_SYN) != 0
    ev[syn] = TcpEvent.SYN
    ev[syn & ((flags & TCP_ACK) != 0)] = TcpEvent.SYNACK
    ev[(flags & TCP_RST) != 0] = TcpEvent.RST
    return ev


def related_mask(batch: PacketBatch) -> npt.NDArray[np.bool_]:
    """Which packets are ICMP errors that quote a tuple (nf_conntrack_inet_error): those are
    looked up by the quoted tuple, inverted, and may be RELATED to its session."""
    rel = np.zeros(len(batch), np.bool_)
    inputs = (batch.proto, (batch.dport >> np.uint16(8)).astype(np.uint8), batch.dst_hi,
              batch.dst_lo, batch.inner_proto, batch.inner_src_hi, batch.inner_src_lo,
              batch.inner_dport)  # fmt: skip
    K.sp_related(*frozen_each(inputs), rel)
    return rel


@dataclass(frozen=True)
class SoftResult:
    """Per-packet results of `SoftPath.process`, in batch order."""

    outcome: npt.NDArray[np.uint8]
    action: npt.NDArray[np.uint32]
    slot: npt.NDArray[np.int64]
    reopened_aux: npt.NDArray[np.uint64]  # cookies of sessions a reopening SYN ended
    verdict: npt.NDArray[np.uint8]  # conntrack.V_* (5 INVALID_NEW, 6 NEW, 8 UNTRACKED), 255: none
    tcp_state: npt.NDArray[np.uint8]  # the session's TCP state after the packet (0 none)
    ended_aux: npt.NDArray[np.uint64]  # cookies of sessions the tracker ended (RST-only
    #                                    reply, or a first packet creating no entry)
    ended_slots: npt.NDArray[np.int64]  # slots of every session ended here (reopened too):
    #                                     a later insert in the same batch may reuse them
    direction: npt.NDArray[np.uint8]  # canonical direction bit of the key looked up (an
    #                                   ICMP error RELATED to a session: its quoted tuple's)


class SoftPath:
    """The CPU session table and forwarding loop (see the module docstring)."""

    def __init__(self, engine_config: EngineConfig, config: SoftPathConfig | None = None) -> None:
        self.config = config or SoftPathConfig()
        self.engine_config = engine_config
        self.drop_action = np.uint32(engine_config.drop_action)
        size = 1 << max(4, int(2 * self.config.capacity - 1).bit_length())  # load <= 1/2
        self.index = keyindex.KeyIndex(size)  # canonical key -> slot of the columns below
        self.orig_dir = np.zeros(size, np.uint8)
        self.act = np.zeros((size, 2), np.uint32)
        self.scope = np.zeros((size, 2), np.uint32)
        self.ver = np.zeros((size, 2), np.uint32)
        self.trk = np.zeros((size, TRACK_COLS), np.uint64)
        self.fresh = np.zeros(size, np.uint8)
        self.last_ns = np.zeros(size, np.int64)
        self.pkts = np.zeros((size, 2), np.uint64)
        self.nbytes = np.zeros((size, 2), np.uint64)
        self.aux = np.zeros(size, np.uint64)
        self.eni_cur = np.zeros(engine_config.eni_scopes, np.uint32)
        self.vpc_cur = np.zeros(engine_config.vpc_scopes, np.uint32)
        self.count = 0
        self.tombstones = 0
        self.cpu_s = 0.0
        self.packets = 0
        self.overload = 0
        self._tokens = self.config.max_pps * self.config.burst_s
        self._last_ns: int | None = None
        self._tcfg = engine_config.tracker_params()
        self._inv_drop = engine_config.invalid_policy == "drop"

    # ---- table -----------------------------------------------------------------------
    @property
    def used(self) -> npt.NDArray[np.uint8]:
        """Per slot: 0 empty, 1 a session, 2 deleted (the index's flags)."""
        return self.index.used

    @property
    def key(self) -> npt.NDArray[np.uint64]:
        """Per slot: the session's canonical key words (keys.CanonicalKeys.words)."""
        return self.index.key

    @property
    def kproto(self) -> npt.NDArray[np.uint8]:
        """Per slot: the session key's protocol."""
        return self.index.proto

    def _hash(self, ck: CanonicalKeys) -> npt.NDArray[np.uint64]:
        return key_hash(ck, self.engine_config.hash_seed)

    def lookup(self, ck: CanonicalKeys) -> npt.NDArray[np.int64]:
        """Slot of each canonical key, -1 where there is no software session."""
        return self.index.lookup(self._hash(ck), ck.words(), ck.proto)

    def insert(
        self,
        ck: CanonicalKeys,
        *,
        orig_dir: npt.ArrayLike,
        action_orig: npt.ArrayLike,
        action_reply: npt.ArrayLike,
        eni_scope: npt.ArrayLike,
        vpc_scope: npt.ArrayLike,
        now_ns: int,
        tcp_state: npt.ArrayLike = 0,
        aux: npt.ArrayLike = 0,
        track: npt.ArrayLike | None = None,
        first: bool = False,
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """Create sessions at the current scope versions; (SoftStatus, slot) per key.

        first: the sessions are new connections whose first packet comes next (it creates
        the tracker entry); else `track` rows carry a moved session's tracker state, or
        `tcp_state` alone installs one with unknown windows (conntrack.install_state)."""
        n = len(ck)
        eni = np.broadcast_to(np.asarray(eni_scope, np.uint32), (n,))
        vpc = np.broadcast_to(np.asarray(vpc_scope, np.uint32), (n,))
        if n and (eni.max() >= len(self.eni_cur) or vpc.max() >= len(self.vpc_cur)):
            raise ConfigError(
                f"softpath insert: scope id {int(max(eni.max(), vpc.max()))} out of range",
                fix="use scope ids below the engine's eni_scopes/vpc_scopes",
            )
        status, slot, self.count = self.index.insert(
            self._hash(ck), ck.words(), ck.proto, self.count, self.config.capacity
        )
        ok = status == SoftStatus.OK
        s = slot[ok]

        def col(v: npt.ArrayLike, dt: type[np.generic]) -> np.ndarray:
            return np.broadcast_to(np.asarray(v, dt), (n,))[ok]

        trk, has = track_args(track, n)
        K.sp_store(
            s, col(orig_dir, np.uint8), col(action_orig, np.uint32), col(action_reply, np.uint32),
            eni[ok], vpc[ok], ck.proto[ok], col(tcp_state, np.uint8), col(aux, np.uint64),
            np.int64(now_ns), np.uint8(1 if first else 0), self.orig_dir, self.act, self.scope,
            self.ver, self.trk, self.fresh, self.last_ns, self.pkts, self.nbytes, self.aux,
            self.eni_cur, self.vpc_cur,
        )  # fmt: skip
        if not first:
            moved = has[ok] == 1
            self.trk[s[moved]] = trk[ok][moved]
            self.trk[s[moved], 0] &= ~_MISMATCH  # a new entry: no mismatch reported yet
            K.sp_install(self.trk, s[~moved], ck.proto[ok][~moved], now_ns, self._tcfg)
        return status, slot

    def installed_rows(
        self, proto: npt.NDArray[np.uint8], tcp_state: npt.NDArray[np.uint8], now_ns: int
    ) -> npt.NDArray[np.uint64]:
        """Tracker rows `insert` would install for sessions given a TCP state only (stored
        nowhere): what a refused insert's event reports."""
        rows = np.zeros((len(proto), TRACK_COLS), np.uint64)
        rows[:, 0] = proto.astype(np.uint64) | (tcp_state.astype(np.uint64) << np.uint64(8))
        K.sp_install(rows, np.arange(len(proto), dtype=np.int64), proto, now_ns, self._tcfg)
        return rows

    def update(
        self,
        slots: npt.NDArray[np.int64],
        *,
        action_orig: npt.ArrayLike,
        action_reply: npt.ArrayLike,
        aux: npt.ArrayLike | None = None,
        eni_scope: npt.ArrayLike | None = None,
        vpc_scope: npt.ArrayLike | None = None,
    ) -> None:
        """Re-decided sessions: new actions (and scopes), snapshots at the current versions."""
        od = self.orig_dir[slots].astype(np.int64)
        self.act[slots, od] = action_orig
        self.act[slots, 1 - od] = action_reply
        if aux is not None:
            self.aux[slots] = aux
        if eni_scope is not None:
            self.scope[slots, 0] = eni_scope
        if vpc_scope is not None:
            self.scope[slots, 1] = vpc_scope
        self.ver[slots, 0] = self.eni_cur[self.scope[slots, 0]]
        self.ver[slots, 1] = self.vpc_cur[self.scope[slots, 1]]
        self.trk[slots, 0] &= ~_MISMATCH  # as a modify: a stale session is reported again

    def delete(self, slots: npt.NDArray[np.int64]) -> None:
        """Remove sessions by slot (tombstones keep other probe chains intact)."""
        gone = self.index.forget(np.asarray(slots, np.int64))
        self.count -= gone
        self.tombstones += gone
        if self.tombstones > len(self.used) // 4:
            self._rehash()

    def _rehash(self) -> None:
        """Rebuild the probe chains without tombstones (amortized over the deletes)."""
        s = np.flatnonzero(self.used == 1)
        cols: list[np.ndarray] = [self.orig_dir, self.act, self.scope, self.ver, self.trk,
                                  self.fresh, self.last_ns, self.pkts, self.nbytes, self.aux]  # fmt: skip
        saved = [c[s].copy() for c in cols]
        words, proto = self.key[s].copy(), self.kproto[s].copy()
        self.used[:] = 0
        h = key_hash(CanonicalKeys.from_words(words, proto), self.engine_config.hash_seed)
        _, slot, _ = self.index.insert(h, words, proto)
        for c, v in zip(cols, saved, strict=True):
            c[slot] = v
        self.tombstones = 0

    def sessions(self, slots: npt.NDArray[np.int64] | None = None) -> np.ndarray:
        """SESSION_DTYPE records of the given slots (default: every valid session)."""
        s = np.flatnonzero(self.used == 1) if slots is None else np.asarray(slots, np.int64)
        out = np.zeros(len(s), SESSION_DTYPE)
        for name, col in self.session_columns(s).items():
            out[name] = col
        return out

    def move_columns(self, s: npt.NDArray[np.int64]) -> dict[str, np.ndarray]:
        """What a session carries when it moves to another engine, as columns of slots `s`
        (one gather each, no record): its key (SESSION_DTYPE's key fields and orig_dir),
        both actions, scopes, last_seen_ns, the tracker row and the cookie."""
        key = self.key[s]
        od = self.orig_dir[s].astype(np.int64)
        return {
            "vni": (key[:, 4] >> np.uint64(32)).astype(np.uint32),
            "proto": self.kproto[s],
            "orig_dir": od,
            "a_hi": key[:, 0], "a_lo": key[:, 1], "b_hi": key[:, 2], "b_lo": key[:, 3],
            "a_port": (key[:, 4] >> np.uint64(16)) & np.uint64(0xFFFF),
            "b_port": key[:, 4] & np.uint64(0xFFFF),
            "action_orig": self.act[s, od],
            "action_reply": self.act[s, 1 - od],
            "eni_scope": self.scope[s, 0],
            "vpc_scope": self.scope[s, 1],
            "last_seen_ns": self.last_ns[s],
            "track": self.trk[s],
            "aux": self.aux[s],
        }  # fmt: skip

    def session_columns(self, s: npt.NDArray[np.int64]) -> dict[str, np.ndarray]:
        """SESSION_DTYPE's fields of slots `s` as columns (one gather each): `move_columns`
        plus the slot, counters and what the tracker row holds; `sessions` and SoftEngine's
        entry records read these."""
        c = self.move_columns(s)
        trk, od = c["track"], c["orig_dir"]
        c["slot"] = s
        c["tcp_state"] = (trk[:, 0] >> np.uint64(8)) & np.uint64(0xFF)
        c["expires_ns"] = trk[:, 1 + CT.T_EXPIRES].view(np.int64)
        c["pkts_orig"] = self.pkts[s, od]
        c["pkts_reply"] = self.pkts[s, 1 - od]
        return c

    def occupancy(self) -> int:
        return self.count

    def live(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether each slot holds a session (one ended in the batch does not)."""
        return np.asarray(self.used[slots] == 1)

    def old_scopes(
        self, s: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Whether each session at slots `s` holds an old snapshot of its ENI scope's version,
        and of its VPC scope's: the one test of a stale session outside the kernels."""
        ver, scope = self.ver[s], self.scope[s]
        return ver[:, 0] != self.eni_cur[scope[:, 0]], ver[:, 1] != self.vpc_cur[scope[:, 1]]

    def stale(self, s: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether each session at slots `s` is stale (either scope moved on since)."""
        eni_old, vpc_old = self.old_scopes(s)
        return eni_old | vpc_old

    def current_slots(self) -> npt.NDArray[np.int64]:
        """Slots of the sessions decided under the current versions of both scopes (the
        promotable ones: a stale session is re-decided on its next packet first)."""
        live = np.flatnonzero(self.used == 1)
        return live[~self.stale(live)]

    @property
    def nbytes_table(self) -> int:
        """Bytes of the software table (allocated, whatever its occupancy)."""
        arrays = (self.orig_dir, self.act, self.scope, self.ver, self.trk, self.fresh,
                  self.last_ns, self.pkts, self.nbytes, self.aux)  # fmt: skip
        return self.index.nbytes + int(sum(a.nbytes for a in arrays))

    # ---- versions --------------------------------------------------------------------
    def bump_version(self, scope: Scope, scope_id: int) -> None:
        """Mirror of the engine's O(1) bump: the scope's sessions become STALE."""
        cur = self.eni_cur if scope == Scope.ENI else self.vpc_cur
        cur[scope_id] += np.uint32(1)

    # ---- packet path -----------------------------------------------------------------
    def process(
        self, batch: PacketBatch, ck: CanonicalKeys | None = None, *, limit: bool = True
    ) -> SoftResult:
        """Forward packets in order (as the engine does); OVERLOAD beyond the rate budget
        (`limit=False`: every packet runs, as through the engine contract, softengine.py)."""
        t0 = time.thread_time()
        n = len(batch)
        ck = canonicalize(batch) if ck is None else ck
        outcome = np.empty(n, np.uint8)
        action = np.zeros(n, np.uint32)
        slot = np.full(n, -1, np.int64)
        verdict = np.full(n, 255, np.uint8)
        state = np.zeros(n, np.uint8)
        admit = self._admit(batch) if limit else n
        if admit < n:
            outcome[admit:] = SoftOutcome.OVERLOAD
            self.overload += n - admit
        direction = ck.direction.copy()
        if admit:
            sub = slice(0, admit)
            ckk = ck.take(sub)
            b = batch
            icmp_t = (b.dport[sub] >> np.uint16(8)).astype(np.uint8)
            h = self._hash(ckk)
            related = related_mask(batch)[:admit]
            w = ckk.words()
            rw, rp, rd, rh = (
                self._related_keys(b.take(np.flatnonzero(related)), related, w, ckk, h)
                if related.any() else (w, ckk.proto, ckk.direction, h)
            )  # fmt: skip
            inputs = (
                h, w, ckk.proto, ckk.direction, rh, rw, rp, rd, related, b.time_ns[sub],
                b.length[sub], b.tcp_flags[sub], b.tcp_seq[sub], b.tcp_ack[sub],
                b.tcp_sack[sub], b.tcp_win[sub], b.tcp_opt[sub], b.tcp_wscale[sub],
                b.tcp_len[sub], icmp_t,
            )  # fmt: skip
            K.sp_process(
                *frozen_each(inputs),
                self.key, self.kproto, self.used, self.orig_dir, self.act, self.scope, self.ver,
                self.trk, self.fresh, self.last_ns, self.pkts, self.nbytes,
                self.eni_cur, self.vpc_cur, self._tcfg, self.drop_action, self._inv_drop,
                outcome[sub], action[sub], slot[sub], verdict[sub], state[sub], direction[sub],
            )  # fmt: skip
        has = slot >= 0
        # a SYN that reopened a finished session ended it in the kernel (MISS with its slot)
        reo = (outcome == SoftOutcome.MISS) & has
        ended = has & ~reo & np.isin(verdict, (CT.V_KILL, K.V_INVALID_NEW, K.V_UNTRACKED))
        reopened_aux = self.aux[slot[reo]].copy()
        ended_aux = self.aux[slot[ended]].copy()
        gone = int(reo.sum()) + int(ended.sum())
        self.count -= gone
        self.tombstones += gone
        ended_slots = slot[reo | ended].copy()
        slot[reo | ended] = -1
        self.packets += n
        self.cpu_s += time.thread_time() - t0
        return SoftResult(
            outcome,
            action,
            slot,
            reopened_aux,
            verdict,
            state,
            ended_aux,
            ended_slots,
            direction,
        )

    def _related_keys(
        self,
        err: PacketBatch,
        related: npt.NDArray[np.bool_],
        words: npt.NDArray[np.uint64],
        ck: CanonicalKeys,
        h: npt.NDArray[np.uint64],
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint8], npt.NDArray[np.uint8],
               npt.NDArray[np.uint64]]:  # fmt: skip
        """Key words, protocols, direction bits and hashes the packets are looked up by: the
        tuples the ICMP errors `err` quote, inverted (keys.quoted_tuple), in the rows
        `related` marks; ck's (`words`, `h`) elsewhere."""
        ek = canonicalize_columns(*quoted_tuple(err))
        rows = np.flatnonzero(related)
        rw, proto, direction = words.copy(), ck.proto.copy(), ck.direction.copy()
        rw[rows], proto[rows], direction[rows] = ek.words(), ek.proto, ek.direction
        rh = h.copy()
        rh[rows] = self._hash(ek)
        return rw, proto, direction, rh

    def _admit(self, batch: PacketBatch) -> int:
        """How many packets of the batch the rate budget admits (a token bucket)."""
        if not len(batch):
            return 0
        now = int(batch.time_ns[-1])
        burst = self.config.max_pps * self.config.burst_s
        if self._last_ns is not None and now > self._last_ns:
            self._tokens = min(
                burst, self._tokens + (now - self._last_ns) * 1e-9 * self.config.max_pps
            )
        self._last_ns = now if self._last_ns is None else max(now, self._last_ns)
        admit = min(len(batch), int(self._tokens))
        self._tokens -= admit
        return admit

    # ---- aging -----------------------------------------------------------------------
    def due(self, now_ns: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Slots of the sessions whose timer deadline (armed by the tracker) has passed, and
        whether each ends CLOSED (TCP in TIME_WAIT/CLOSE) rather than AGED."""
        s = np.flatnonzero(self.used == 1)
        gone = s[self.trk[s, 1 + CT.T_EXPIRES].view(np.int64) <= now_ns]
        state = (self.trk[gone, 0] >> np.uint64(8)) & np.uint64(0xFF)
        closed = (self.kproto[gone] == PROTO_TCP) & np.isin(
            state, (TcpState.TIME_WAIT, TcpState.CLOSE)
        )
        return gone, closed

    def expire(self, now_ns: int) -> tuple[np.ndarray, npt.NDArray[np.bool_]]:
        """Remove sessions whose timer deadline (armed by the tracker) has passed; returns
        their records and whether each ended CLOSED (TIME_WAIT/CLOSE) or AGED."""
        t0 = time.thread_time()
        gone, closed = self.due(now_ns)
        recs = self.sessions(gone)
        self.delete(gone)
        self.cpu_s += time.thread_time() - t0
        return recs, closed


__all__ = [
    "SESSION_DTYPE",
    "SoftOutcome",
    "SoftPath",
    "SoftPathConfig",
    "SoftResult",
    "SoftStatus",
    "tcp_events",
]
