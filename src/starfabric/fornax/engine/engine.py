"""FastEngine: the emulated NIC session engine, state in flat numpy arrays, work in numba.

The wrapper validates and canonicalizes (vectorized numpy), the kernels (kernels/) do the
table work one packet / one entry at a time in order, exactly as reference.py does slowly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric._jit import frozen, frozen_each
from starfabric.errors import ConfigError, DataError
from starfabric.fornax.engine import kernels as K
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.config import EngineConfig, make_config
from starfabric.fornax.engine.interface import (
    N_COUNTERS,
    N_EVENT_WORDS,
    Counter,
    FlowKeys,
    ProcessResult,
    Scope,
    ScrubResult,
    SessionEngine,
    broadcast_arg,
    events_from_words,
)
from starfabric.fornax.engine.records import entries_from_rows
from starfabric.fornax.engine.tcp import N_STATES
from starfabric.fornax.keys import CanonicalKeys, canonicalize_columns
from starfabric.fornax.packets import PacketBatch


def _aligned_rows(n: int, width: int) -> npt.NDArray[np.uint64]:
    """Zeroed uint64[n, width] whose first row starts on a 64-byte boundary (cache line)."""
    flat = np.zeros(n * width + 8, dtype=np.uint64)
    off = (-flat.ctypes.data % 64) // 8
    return flat[off : off + n * width].reshape(n, width)


_U64 = npt.NDArray[np.uint64]
#: A canonical key as the kernels take it: a_hi, a_lo, b_hi, b_lo, ports word, proto.
_KeyWords = tuple[_U64, _U64, _U64, _U64, _U64, npt.NDArray[np.uint8]]


class FastEngine(SessionEngine):
    """The session engine at real scale (numba kernels over numpy state)."""

    def __init__(self, config: EngineConfig | None = None, **overrides: Any) -> None:
        cfg = make_config(config, **overrides) if (config is None or overrides) else config
        self.config = cfg
        self._tags = np.zeros(cfg.capacity, dtype=np.uint16)
        self._rec = _aligned_rows(cfg.capacity, L.N_WORDS)
        self._st = np.zeros(4, dtype=np.int64)
        self._rng = np.array([cfg.hash_seed], dtype=np.uint64)
        self._ring = np.zeros((cfg.ring_capacity, N_EVENT_WORDS), dtype=np.uint64)
        self._rmeta = np.zeros(4, dtype=np.int64)
        self._ctr = np.zeros(N_COUNTERS, dtype=np.int64)
        self._eni = np.zeros(cfg.eni_scopes, dtype=np.uint32)
        self._vpc = np.zeros(cfg.vpc_scopes, dtype=np.uint32)
        self._stalled = np.zeros(cfg.n_ports, dtype=np.uint8)
        self._stuck = np.full(cfg.n_ports, -1, dtype=np.int64)
        self._hung = np.zeros(cfg.n_ports, dtype=np.uint8)
        self._prm = np.array(
            [
                cfg.n_buckets,
                cfg.bucket_size,
                cfg.drop_action,
                round(cfg.watchdog_timeout_s * 1e9),
                cfg.max_displacement,
                cfg.capacity,
                1 if cfg.invalid_policy == "drop" else 0,
            ],
            dtype=np.int64,
        )
        self._seed = np.uint64(cfg.hash_seed)
        self._tcfg = cfg.tracker_params()
        self._clock = 0  # latest time seen (packets, inserts, scrub): the time of op events

    # ---- helpers -----------------------------------------------------------------------
    @staticmethod
    def _key_words(k: CanonicalKeys) -> _KeyWords:
        """The canonical key as the kernels take it: a_hi, a_lo, b_hi, b_lo, ports word, proto."""
        return (k.a_hi, k.a_lo, k.b_hi, k.b_lo, k.ports_word(), k.proto)

    def _hashes(self, words: _KeyWords) -> npt.NDArray[np.uint64]:
        out = np.empty(len(words[0]), dtype=np.uint64)
        K.hash_many(*frozen_each(words), self._seed, out)
        return out

    @staticmethod
    def _canon(keys: FlowKeys) -> CanonicalKeys:
        return canonicalize_columns(
            keys.vni,
            keys.proto,
            keys.src_hi,
            keys.src_lo,
            keys.dst_hi,
            keys.dst_lo,
            keys.sport,
            keys.dport,
        )

    def _tab(self) -> tuple[Any, Any, Any, Any, Any, Any, Any]:
        return (self._tags, self._rec, self._st, self._ring, self._rmeta, self._ctr, self._prm)

    # ---- packet path -------------------------------------------------------------------
    def process(self, batch: PacketBatch, out: ProcessResult | None = None) -> ProcessResult:
        """Run a batch through the pipeline; `out` (same length) is filled instead of new arrays.

        Reusing `out` across batches is how a driver reuses its completion ring: no fresh
        memory is touched per batch.
        """
        n = len(batch)
        if n and int(batch.port.max()) >= self.config.n_ports:
            bad = int(batch.port.max())
            raise DataError(
                f"packet batch: port {bad} does not exist (n_ports = {self.config.n_ports})",
                fix="raise EngineConfig.n_ports or fix the workload's ports",
            )
        if out is None:
            out = ProcessResult(
                outcome=np.empty(n, dtype=np.uint8),
                reason=np.empty(n, dtype=np.uint8),
                direction=np.empty(n, dtype=np.uint8),
                reply=np.empty(n, dtype=np.uint8),
                action=np.empty(n, dtype=np.uint32),
                slot=np.empty(n, dtype=np.int64),
                tcp_state=np.empty(n, dtype=np.uint8),
                verdict=np.empty(n, dtype=np.uint8),
            )
        elif len(out) != n:
            raise ConfigError(
                f"process: out has {len(out)} rows for a batch of {n}",
                fix="pass an out of the batch's length or none",
            )
        K.k_process(
            *self._tab(),
            self._seed,
            self._eni,
            self._vpc,
            self._stalled,
            self._stuck,
            self._hung,
            self._tcfg,
            frozen(batch.time_ns),
            frozen(batch.port),
            frozen(batch.vni),
            frozen(batch.proto),
            frozen(batch.src_hi),
            frozen(batch.src_lo),
            frozen(batch.dst_hi),
            frozen(batch.dst_lo),
            frozen(batch.sport),
            frozen(batch.dport),
            frozen(batch.tcp_flags),
            frozen(batch.length),
            frozen(batch.tcp_seq),
            frozen(batch.tcp_ack),
            frozen(batch.tcp_sack),
            frozen(batch.tcp_win),
            frozen(batch.tcp_opt),
            frozen(batch.tcp_wscale),
            frozen(batch.tcp_len),
            frozen(batch.inner_proto),
            frozen(batch.inner_src_hi),
            frozen(batch.inner_src_lo),
            frozen(batch.inner_dst_hi),
            frozen(batch.inner_dst_lo),
            frozen(batch.inner_sport),
            frozen(batch.inner_dport),
            out.outcome,
            out.reason,
            out.direction,
            out.reply,
            out.action,
            out.slot,
            out.tcp_state,
            out.verdict,
        )
        if n:
            self._clock = max(self._clock, int(batch.time_ns.max()))
        return out

    # ---- entry operations --------------------------------------------------------------
    def insert(
        self,
        keys: FlowKeys,
        *,
        action_orig: npt.ArrayLike,
        action_reply: npt.ArrayLike,
        eni_scope: npt.ArrayLike,
        vpc_scope: npt.ArrayLike,
        eni_version: npt.ArrayLike,
        vpc_version: npt.ArrayLike,
        now_ns: npt.ArrayLike,
        tcp_state: npt.ArrayLike = 0,
        aux: npt.ArrayLike = 0,
        track: npt.ArrayLike | None = None,
    ) -> npt.NDArray[np.uint8]:
        n = len(keys)
        trk, has = track_args(track, n)
        ts = broadcast_arg(tcp_state, n, np.uint8, "tcp_state")
        ts = np.where(
            has == 1, ((trk[:, 0] >> np.uint64(8)) & np.uint64(0xFF)).astype(np.uint8), ts
        )
        if n and int(ts.max()) >= N_STATES:
            raise ConfigError(
                f"insert: tcp_state {int(ts.max())} is not a TcpState", fix="use TcpState values"
            )
        k = self._canon(keys)
        kw = self._key_words(k)
        now = broadcast_arg(now_ns, n, np.int64, "now_ns")
        status = np.empty(n, dtype=np.uint8)
        slots = np.empty(n, dtype=np.int64)
        K.k_insert(
            self._tags,
            self._rec,
            self._st,
            self._rng,
            self._ring,
            self._rmeta,
            self._ctr,
            self._prm,
            self._seed,
            len(self._eni),
            len(self._vpc),
            *frozen_each(kw),
            frozen(k.direction),
            frozen(self._hashes(kw)),
            frozen(broadcast_arg(action_orig, n, np.uint32, "action_orig")),
            frozen(broadcast_arg(action_reply, n, np.uint32, "action_reply")),
            frozen(broadcast_arg(eni_scope, n, np.uint32, "eni_scope")),
            frozen(broadcast_arg(vpc_scope, n, np.uint32, "vpc_scope")),
            frozen(broadcast_arg(eni_version, n, np.uint32, "eni_version")),
            frozen(broadcast_arg(vpc_version, n, np.uint32, "vpc_version")),
            frozen(now),
            frozen(ts),
            frozen(broadcast_arg(aux, n, np.uint64, "aux")),
            frozen(trk),
            frozen(has),
            self._tcfg,
            status,
            slots,
        )
        if n:
            self._clock = max(self._clock, int(now.max()))
        return status

    def _by_key(
        self, kind: int, keys: FlowKeys, mask: npt.NDArray[np.uint8] | None = None, **vals: Any
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        n = len(keys)
        kw = self._key_words(self._canon(keys))
        status = np.empty(n, dtype=np.uint8)
        slots = np.empty(n, dtype=np.int64)
        rows = np.zeros((n if kind == 2 else 0, L.N_WORDS), dtype=np.uint64)
        z32 = np.zeros(n, dtype=np.uint32)
        K.k_lookup_op(
            kind,
            *self._tab(),
            self._seed,
            *frozen_each(kw),
            frozen(self._hashes(kw)),
            self._clock,
            frozen(mask if mask is not None else np.zeros(n, dtype=np.uint8)),
            frozen(vals.get("action_orig", z32)),
            frozen(vals.get("action_reply", z32)),
            frozen(vals.get("eni_version", z32)),
            frozen(vals.get("vpc_version", z32)),
            frozen(vals.get("aux", np.zeros(n, dtype=np.uint64))),
            frozen(vals.get("tcp_state", np.zeros(n, dtype=np.uint8))),
            frozen(vals.get("timeout_ns", np.zeros(n, dtype=np.int64))),
            frozen(vals.get("track", np.zeros((n, TRACK_COLS), dtype=np.uint64))),
            status,
            slots,
            rows,
        )
        return status, slots, rows

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        return self._by_key(0, keys)[0]

    def modify(
        self,
        keys: FlowKeys,
        *,
        action_orig: npt.ArrayLike | None = None,
        action_reply: npt.ArrayLike | None = None,
        eni_version: npt.ArrayLike | None = None,
        vpc_version: npt.ArrayLike | None = None,
        aux: npt.ArrayLike | None = None,
        tcp_state: npt.ArrayLike | None = None,
        timeout_ns: npt.ArrayLike | None = None,
        track: npt.ArrayLike | None = None,
    ) -> npt.NDArray[np.uint8]:
        n = len(keys)
        vals, m = modify_args(
            n, action_orig, action_reply, eni_version, vpc_version, aux, tcp_state, timeout_ns,
            track,
        )  # fmt: skip
        return self._by_key(1, keys, np.full(n, m, dtype=np.uint8), **vals)[0]

    def query(
        self, keys: FlowKeys, now_ns: int | None = None
    ) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        status, slots, rows = self._by_key(2, keys)
        ent = entries_from_rows(rows, slots, self._eni, self._vpc)
        ent["remaining_ns"] = np.maximum(ent["expires_ns"] - (self._clock if now_ns is None
                                                                else int(now_ns)), 0)  # fmt: skip
        ent[status != 0] = np.zeros(1, dtype=ent.dtype)
        return status, ent

    def dump(
        self,
        cursor: int = 0,
        max_entries: int = 65536,
        *,
        eni_scope: int | None = None,
        vpc_scope: int | None = None,
        eni_version_below: int | None = None,
        vpc_version_below: int | None = None,
        tcp_state: int | None = None,
        stale_only: bool = False,
    ) -> tuple[np.ndarray, int]:
        cursor, max_entries = dump_args(self.config, cursor, max_entries)
        rows = np.zeros((max_entries, L.N_WORDS), dtype=np.uint64)
        slots = np.zeros(max_entries, dtype=np.int64)
        n, nxt = K.k_dump(
            *self._tab(),
            self._seed,
            self._eni,
            self._vpc,
            self._clock,
            cursor,
            max_entries,
            _opt(eni_scope),
            _opt(vpc_scope),
            _opt(eni_version_below),
            _opt(vpc_version_below),
            _opt(tcp_state),
            stale_only,
            rows,
            slots,
        )
        ent = entries_from_rows(rows[:n], slots[:n], self._eni, self._vpc)
        ent["remaining_ns"] = np.maximum(ent["expires_ns"] - self._clock, 0)
        return ent, int(nxt)

    def bump_version(self, scope: Scope, scope_id: int) -> int:
        arr = self._scope_array(scope, scope_id)
        arr[scope_id] = np.uint32((int(arr[scope_id]) + 1) & L.MASK32)
        self._ctr[Counter.VERSION_BUMPS] += 1
        return int(arr[scope_id])

    def scope_version(self, scope: Scope, scope_id: int) -> int:
        return int(self._scope_array(scope, scope_id)[scope_id])

    def _scope_array(self, scope: Scope, scope_id: int) -> npt.NDArray[np.uint32]:
        arr = self._eni if Scope(scope) == Scope.ENI else self._vpc
        check_scope(scope, scope_id, len(arr))
        return arr

    # ---- events, aging, counters ------------------------------------------------------
    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        n = max(0, min(int(max_n), int(self._rmeta[1])))
        out = np.zeros((n, N_EVENT_WORDS), dtype=np.uint64)
        K.ring_pop(self._ring, self._rmeta, self._ctr, n, out)
        return events_from_words(out)

    def scrub(self, now_ns: int, n_slots: int | None = None) -> ScrubResult:
        n = self.config.scrub_slots_per_tick if n_slots is None else int(n_slots)
        n = max(0, min(n, self.config.capacity))
        self._clock = max(self._clock, int(now_ns))
        expired = K.k_scrub(
            *self._tab(),
            self._seed,
            self._stalled,
            self._stuck,
            self._hung,
            int(now_ns),
            n,
        )
        return ScrubResult(visited=n, expired=int(expired), cursor=int(self._st[1]))

    def counters(self) -> dict[str, int]:
        return {c.name.lower(): int(self._ctr[c]) for c in Counter}

    def occupancy(self) -> int:
        return int(self._st[0])

    # ---- fault hooks -------------------------------------------------------------------
    def slot_of(self, keys: FlowKeys) -> npt.NDArray[np.int64]:
        k = self._canon(keys)
        kw = self._key_words(k)
        h = self._hashes(kw)
        pw = kw[4]
        out = np.full(len(keys), -1, dtype=np.int64)
        bs = self.config.bucket_size
        for i in range(len(keys)):
            tag = K.tag_of(h[i])
            for b in K.buckets(h[i], self.config.n_buckets):
                for s in range(b * bs, b * bs + bs):
                    if self._tags[s] == tag and K.key_eq(
                        self._rec, s, k.a_hi[i], k.a_lo[i], k.b_hi[i], k.b_lo[i], pw[i],
                        np.uint64(k.proto[i]),
                    ):  # fmt: skip
                        out[i] = s
                        break
                if out[i] >= 0:
                    break
        return out

    def flip_bits(self, slot: int, bits: npt.ArrayLike) -> None:
        for b in check_flip(self.config, slot, bits):
            self._rec[slot, b // 64] ^= np.uint64(1 << (b % 64))

    def stall_port(self, port: int) -> None:
        check_port(self.config, port)
        self._stalled[port] = 1

    def unstall_port(self, port: int) -> None:
        check_port(self.config, port)
        self._stalled[port] = 0
        self._stuck[port] = -1
        self._hung[port] = 0

    # ---- introspection for explain/benchmarks ------------------------------------------
    def raw_record(self, slot: int) -> npt.NDArray[np.uint64]:
        """Copy of one slot's record words (debug; no ECC check)."""
        return self._rec[slot].copy()

    def raw_tag(self, slot: int) -> int:
        return int(self._tags[slot])

    def port_stalled(self, port: int) -> bool:
        return bool(self._stalled[port])


def _opt(v: int | None) -> int:
    return -1 if v is None else int(v)


def modify_args(
    n: int,
    action_orig: npt.ArrayLike | None,
    action_reply: npt.ArrayLike | None,
    eni_version: npt.ArrayLike | None,
    vpc_version: npt.ArrayLike | None,
    aux: npt.ArrayLike | None,
    tcp_state: npt.ArrayLike | None,
    timeout_ns: npt.ArrayLike | None = None,
    track: npt.ArrayLike | None = None,
) -> tuple[dict[str, np.ndarray], int]:
    """Broadcast modify's optional fields and build the field mask (bit per field)."""
    vals: dict[str, np.ndarray] = {}
    mask = 0
    spec: list[tuple[str, Any, type[np.generic]]] = [
        ("action_orig", action_orig, np.uint32),
        ("action_reply", action_reply, np.uint32),
        ("eni_version", eni_version, np.uint32),
        ("vpc_version", vpc_version, np.uint32),
        ("aux", aux, np.uint64),
        ("tcp_state", tcp_state, np.uint8),
        ("timeout_ns", timeout_ns, np.int64),
    ]
    for bit, (name, value, dt) in enumerate(spec):
        if value is not None:
            vals[name] = broadcast_arg(value, n, dt, name)
            mask |= 1 << bit
    if track is not None:
        vals["track"] = track_args(track, n)[0]
        mask |= 128
    ts = vals.get("tcp_state")
    if ts is not None and n and int(ts.max()) >= N_STATES:
        raise ConfigError(
            f"modify: tcp_state {int(ts.max())} is not a TcpState", fix="use TcpState values"
        )
    return vals, mask


#: Columns of a tracker-state row (ENTRY_DTYPE "track"): meta bits, then the window words.
TRACK_COLS = 1 + L.N_TRACK_WORDS


def track_args(
    track: npt.ArrayLike | None, n: int
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint8]]:
    """(uint64[n, TRACK_COLS] rows, uint8[n] present flags) of an optional `track` argument."""
    if track is None:
        return np.zeros((n, TRACK_COLS), np.uint64), np.zeros(n, np.uint8)
    arr = np.ascontiguousarray(np.asarray(track, dtype=np.uint64))
    if arr.shape != (n, TRACK_COLS):
        raise ConfigError(
            f"argument 'track' has shape {arr.shape}, not ({n}, {TRACK_COLS})",
            fix="pass ENTRY_DTYPE 'track' rows (or the software path's) of the same sessions",
        )
    return arr, np.ones(n, np.uint8)


def dump_args(cfg: EngineConfig, cursor: int, max_entries: int) -> tuple[int, int]:
    if not 0 <= int(cursor) <= cfg.capacity:
        raise ConfigError(
            f"dump: cursor {cursor} outside 0..{cfg.capacity}",
            fix="start at 0, then pass the cursor dump returned",
        )
    if int(max_entries) < 1:
        raise ConfigError(f"dump: max_entries {max_entries} < 1", fix="ask for at least 1")
    return int(cursor), int(max_entries)


def check_scope(scope: Scope, scope_id: int, n: int) -> None:
    if not 0 <= int(scope_id) < n:
        raise ConfigError(
            f"{Scope(scope).name} scope id {scope_id} outside 0..{n - 1}",
            fix="use an id below the engine's scope count",
        )


def check_port(cfg: EngineConfig, port: int) -> None:
    if not 0 <= int(port) < cfg.n_ports:
        raise ConfigError(
            f"port {port} outside 0..{cfg.n_ports - 1}", fix="use an existing port index"
        )


def check_flip(cfg: EngineConfig, slot: int, bits: npt.ArrayLike) -> list[int]:
    if not 0 <= int(slot) < cfg.capacity:
        raise ConfigError(f"flip_bits: slot {slot} outside table", fix="use a valid slot")
    out = [int(b) for b in np.atleast_1d(np.asarray(bits))]
    for b in out:
        if not 0 <= b < L.N_WORDS * 64:
            raise ConfigError(
                f"flip_bits: bit {b} outside 0..{L.N_WORDS * 64 - 1}",
                fix=f"give word * 64 + bit of the {L.N_WORDS}-word record",
            )
    return out


__all__ = ["FastEngine"]
