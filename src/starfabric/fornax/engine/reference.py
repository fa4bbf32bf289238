"""ReferenceEngine: the session engine written slowly and obviously, in plain Python.

Same interface and semantics as FastEngine (interface.py): one Python list of N_WORDS (23) ints per
slot, a deque for the event ring, loops for everything. It shares only pure tables and codecs
(the TCP transition table, the ECC layout, record/event decoding) and re-derives keys, hashes,
placement and events itself, so differential tests catch the fast engine's mistakes.
Use it for small tables (thousands of slots) in tests and as a dummy NIC provider.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError, DataError
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.config import EngineConfig, make_config
from starfabric.fornax.engine.ecc import ECC_CLEAN, ECC_CORRECTED, ecc_decode, ecc_encode, ecc_seal
from starfabric.fornax.engine.engine import (
    check_flip,
    check_port,
    check_scope,
    dump_args,
    modify_args,
    track_args,
)
from starfabric.fornax.engine.interface import (
    N_EVENT_WORDS,
    Counter,
    EventType,
    FlowKeys,
    Outcome,
    ProcessResult,
    Reason,
    Scope,
    ScrubResult,
    SessionEngine,
    Status,
    broadcast_arg,
    events_from_words,
)
from starfabric.fornax.engine.records import entries_from_rows
from starfabric.fornax.engine.tcp import N_STATES, TcpState
from starfabric.fornax.keys import (
    C_ALT,
    ICMP_CLASS_OFFSET,
    ICMP_ECHO_TYPES,
    bucket_pair,
    hash_key_py,
    icmp_inverted_word,
    tag_of,
)
from starfabric.fornax.packets import PROTO_TCP, PacketBatch

M64 = L.MASK64
M32 = L.MASK32
Key = tuple[int, int, int, int, int, int]  # a_hi, a_lo, b_hi, b_lo, ports word, proto


def canonical_key(
    vni: int, proto: int, src: tuple[int, int], dst: tuple[int, int], sport: int, dport: int
) -> tuple[Key, int]:
    """((a_hi, a_lo, b_hi, b_lo, ports word, proto), direction bit) of one directed tuple."""
    if proto in ICMP_ECHO_TYPES:  # keys.py: a query (id, id + k), its reply (id + k, id)
        off = int(ICMP_CLASS_OFFSET[0 if proto == 1 else 1, (dport >> 8) & 0xFF])
        ident = sport
        if off > 0:
            sport, dport = ident, (ident + off) & 0xFFFF
        elif off < 0:
            sport, dport = (ident - off) & 0xFFFF, ident
        else:
            sport = dport = 0
    ea = (src[0], src[1], sport)
    eb = (dst[0], dst[1], dport)
    direction = 0
    if eb < ea:
        ea, eb = eb, ea
        direction = 1
    ports = (vni << 32) | (ea[2] << 16) | eb[2]
    return (ea[0], ea[1], eb[0], eb[1], ports, proto), direction


#: The packet columns the tracker reads, in conntrack.ct_packet's order.
_HDR = ("tcp_flags", "tcp_seq", "tcp_ack", "tcp_sack", "tcp_win", "tcp_opt", "tcp_wscale",
        "tcp_len")  # fmt: skip


#: An ICMP error's quoted tuple (packets.py inner_*), in _one_packet's order.
_INNER = ("inner_proto", "inner_src_hi", "inner_src_lo", "inner_dst_hi", "inner_dst_lo",
          "inner_sport", "inner_dport")  # fmt: skip


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def _splitmix(state: int) -> tuple[int, int]:
    state = (state + C_ALT) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def _tuple_of(
    c: FlowKeys | PacketBatch, i: int
) -> tuple[int, int, tuple[int, int], tuple[int, int], int, int]:
    """Row i's (vni, proto, src, dst, sport, dport) as Python ints, as canonical_key takes them."""
    return (
        int(c.vni[i]), int(c.proto[i]), (int(c.src_hi[i]), int(c.src_lo[i])),
        (int(c.dst_hi[i]), int(c.dst_lo[i])), int(c.sport[i]), int(c.dport[i]),
    )  # fmt: skip


class ReferenceEngine(SessionEngine):
    """Plain-Python session engine (slow, obvious; the oracle for FastEngine)."""

    def __init__(self, config: EngineConfig | None = None, **overrides: Any) -> None:
        cfg = make_config(config, **overrides) if (config is None or overrides) else config
        self.config = cfg
        self.tags = [0] * cfg.capacity
        self.rec = [[0] * L.N_WORDS for _ in range(cfg.capacity)]
        self.count = 0
        self.cursor = 0
        self.rng = cfg.hash_seed
        self.ring: deque[list[int]] = deque()
        self.lost_pending = 0
        self.last_lost_time = 0
        self.ctr = dict.fromkeys(Counter, 0)
        self.eni = [0] * cfg.eni_scopes
        self.vpc = [0] * cfg.vpc_scopes
        self.stalled = [False] * cfg.n_ports
        self.stuck = [-1] * cfg.n_ports
        self.hung = [False] * cfg.n_ports
        self.tcfg = cfg.tracker_params()
        self.watchdog_ns = round(cfg.watchdog_timeout_s * 1e9)
        self.clock = 0  # latest time seen: the time of events raised by delete/modify/query/dump

    # ---- events ------------------------------------------------------------------------
    def _marker(self, t: int) -> None:
        ev = [0] * N_EVENT_WORDS
        ev[0] = EventType.RING_OVERFLOW
        ev[2] = t & M64
        ev[3] = M64  # slot -1
        ev[16] = self.lost_pending
        self.ring.append(ev)
        self.lost_pending = 0
        self.ctr[Counter.RING_OVERFLOW] += 1

    def _push(self, ev: list[int], t: int) -> None:
        cap = self.config.ring_capacity
        self.ctr[Counter.EVENTS_RAISED] += 1
        if self.lost_pending:
            if cap - len(self.ring) >= 2:
                self._marker(t)
            else:
                self._lose(t)
                return
        if len(self.ring) >= cap:
            self._lose(t)
            return
        self.ring.append(ev)

    def _lose(self, t: int) -> None:
        self.lost_pending += 1
        self.last_lost_time = t
        self.ctr[Counter.EVENTS_LOST] += 1

    def _event_from(
        self, etype: int, reason: int, r: list[int], slot: int, t: int, port: int, detail: int
    ) -> None:
        meta = r[L.W_META]
        flags = (meta >> 16) & 0xFF
        orig_b = flags & L.FLAG_ORIG_B
        a = (r[L.W_A_HI], r[L.W_A_LO], (r[L.W_PORTS] >> 16) & 0xFFFF)
        b = (r[L.W_B_HI], r[L.W_B_LO], r[L.W_PORTS] & 0xFFFF)
        src, dst = (b, a) if orig_b else (a, b)
        act = [r[L.W_ACT] & M32, r[L.W_ACT] >> 32]
        pk = [r[L.W_PKTS] & M32, r[L.W_PKTS] >> 32]
        by = [r[L.W_BYTES0], r[L.W_BYTES1]]
        o, p = (1, 0) if orig_b else (0, 1)
        ev = [0] * N_EVENT_WORDS
        ev[0] = (
            etype
            | (((meta >> 8) & 0xFF) << 8)
            | ((meta & 0xFF) << 16)
            | (reason << 24)
            | (flags << 32)
            | (port << 48)
        )
        ev[1] = r[L.W_PORTS] >> 32
        ev[2] = t & M64
        ev[3] = slot & M64
        ev[4], ev[5], ev[6], ev[7] = src[0], src[1], dst[0], dst[1]
        ev[8] = src[2] | (dst[2] << 16)
        ev[9] = r[L.W_SCOPE]
        ev[10] = r[L.W_VER]
        ev[11] = act[o] | (act[p] << 32)
        ev[12] = pk[o] | (pk[p] << 32)
        ev[13] = by[o]
        ev[14] = by[p]
        ev[15] = r[L.W_AUX]
        ev[16] = detail & M64
        self._push(ev, t)

    def _event_simple(self, etype: int, t: int, port: int, detail: int) -> None:
        ev = [0] * N_EVENT_WORDS
        ev[0] = etype | (port << 48)
        ev[2] = t & M64
        ev[3] = M64
        ev[16] = detail & M64
        self._push(ev, t)

    # ---- table primitives --------------------------------------------------------------
    def _hash_rec(self, r: list[int]) -> int:
        return hash_key_py(r[0], r[1], r[2], r[3], r[4], r[L.W_META] & 0xFF, self.config.hash_seed)

    def _invalidate(self, s: int) -> None:
        self.tags[s] = 0
        self.rec[s] = [0] * L.N_WORDS
        self.count -= 1

    def _read_check(self, s: int, t: int, port: int) -> bool:
        """ECC-check a slot before using it; correct (one flip per group) or invalidate it,
        raising the event."""
        for _ in range(3):
            status, pos = ecc_decode(self.rec[s])
            if status == ECC_CLEAN:
                return True
            if status != ECC_CORRECTED:
                break
            self.rec[s][pos // 64] ^= 1 << (pos % 64)  # undo the flip: a codeword again
            self.ctr[Counter.ECC_CORRECTED] += 1
            self._event_from(EventType.ECC_CORRECTED, 0, self.rec[s], s, t, port, pos)
        h = self._hash_rec(self.rec[s])
        consistent = tag_of(h) == self.tags[s] and s // self.config.bucket_size in bucket_pair(
            h, self.config.n_buckets
        )
        self.ctr[Counter.ECC_UNCORRECTABLE] += 1
        reason = Reason.KEY_CONSISTENT if consistent else Reason.KEY_SUSPECT
        self._event_from(EventType.ECC_UNCORRECTABLE, reason, self.rec[s], s, t, port, 0)
        self._invalidate(s)
        return False

    def _slots_of(self, h: int) -> list[int]:
        bs = self.config.bucket_size
        b1, b2 = bucket_pair(h, self.config.n_buckets)
        return list(range(b1 * bs, b1 * bs + bs)) + list(range(b2 * bs, b2 * bs + bs))

    def _stale_reason(self, r: list[int]) -> Reason:
        """ENI_VERSION / VPC_VERSION where record r's versions are behind its scopes' current
        ones, else NONE; a scope id naming no scope (damaged past what ECC corrects) is stale
        (twin of kernels/table.stale_reason)."""
        e, v = r[L.W_SCOPE] & M32, r[L.W_SCOPE] >> 32
        if e >= len(self.eni) or r[L.W_VER] & M32 != self.eni[e]:
            return Reason.ENI_VERSION
        if v >= len(self.vpc) or r[L.W_VER] >> 32 != self.vpc[v]:
            return Reason.VPC_VERSION
        return Reason.NONE

    def _probe(self, key: Key, t: int, port: int) -> tuple[int, bool]:
        h = hash_key_py(*key, self.config.hash_seed)
        tag = tag_of(h)
        for s in self._slots_of(h):
            if self.tags[s] != tag:
                continue
            if not self._read_check(s, t, port):
                return s, True
            r = self.rec[s]
            if (r[0], r[1], r[2], r[3], r[4], r[L.W_META] & 0xFF) == key:
                return s, False
        return -1, False

    def _watchdog(self, p: int, t: int) -> None:
        if (
            self.stalled[p]
            and self.stuck[p] >= 0
            and not self.hung[p]
            and t - self.stuck[p] >= self.watchdog_ns
        ):
            self.hung[p] = True
            self.ctr[Counter.PIPELINE_HANG] += 1
            self._event_simple(EventType.PIPELINE_HANG, t, p, t - self.stuck[p])

    @staticmethod
    def _set_meta(r: list[int], state: int, flags: int) -> None:
        r[L.W_META] = (r[L.W_META] & ~0xFFFF00 & M64) | (state << 8) | (flags << 16)

    # ---- packet path -------------------------------------------------------------------
    def process(self, batch: PacketBatch) -> ProcessResult:
        n = len(batch)
        out: dict[str, np.ndarray] = {
            "outcome": np.zeros(n, np.uint8),
            "reason": np.zeros(n, np.uint8),
            "direction": np.zeros(n, np.uint8),
            "reply": np.full(n, 255, np.uint8),
            "action": np.zeros(n, np.uint32),
            "slot": np.full(n, -1, np.int64),
            "tcp_state": np.zeros(n, np.uint8),
            "verdict": np.full(n, 255, np.uint8),
        }
        for i in range(n):
            p = int(batch.port[i])
            if p >= self.config.n_ports:
                raise DataError(
                    f"packet batch: port {p} does not exist (n_ports = {self.config.n_ports})",
                    fix="raise EngineConfig.n_ports or fix the workload's ports",
                )
        for i in range(n):
            oc, rs, d, rel, act, s, state, vd = self._one_packet(
                int(batch.time_ns[i]),
                int(batch.port[i]),
                *_tuple_of(batch, i),
                int(batch.tcp_flags[i]),
                int(batch.length[i]),
                tuple(int(getattr(batch, f)[i]) for f in _HDR),
                tuple(int(getattr(batch, f)[i]) for f in _INNER),
            )
            for name, v in zip(out, (oc, rs, d, rel, act, s, state, vd), strict=True):
                out[name][i] = v
            self.clock = max(self.clock, int(batch.time_ns[i]))
        return ProcessResult(**out)

    def _one_packet(
        self,
        t: int,
        p: int,
        vni: int,
        proto: int,
        src: tuple[int, int],
        dst: tuple[int, int],
        sport: int,
        dport: int,
        flags: int,
        length: int,
        hdr: tuple[int, ...],
        inner: tuple[int, ...] = (0, 0, 0, 0, 0, 0, 0),
    ) -> tuple[int, int, int, int, int, int, int, int]:
        c = self.ctr
        c[Counter.PACKETS] += 1
        ip, is_hi, is_lo, id_hi, id_lo, isp, idp = inner
        related = proto in ICMP_ECHO_TYPES and bool(
            CT.icmp_error_quotes(proto, dport >> 8, ip, idp >> 8, np.uint64(dst[0]),
                                 np.uint64(dst[1]), np.uint64(is_hi), np.uint64(is_lo))
        )  # fmt: skip
        if related:  # an ICMP error: looked up by the tuple it quotes, inverted
            icmp_in = ip in ICMP_ECHO_TYPES
            key, d = canonical_key(vni, ip, (id_hi, id_lo), (is_hi, is_lo),
                                   isp if icmp_in else idp,
                                   icmp_inverted_word(ip, idp) if icmp_in else isp)  # fmt: skip
        else:
            key, d = canonical_key(vni, proto, src, dst, sport, dport)
        if self.stalled[p]:
            if self.stuck[p] < 0:
                self.stuck[p] = t
            self._watchdog(p, t)
            c[Counter.PORT_HUNG] += 1
            return Outcome.PORT_HUNG, Reason.PORT_STALLED, d, 255, 0, -1, 0, 255
        s, fault = self._probe(key, t, p)
        if fault:
            c[Counter.FAULT] += 1
            return Outcome.FAULT, Reason.ECC_UNCORRECTABLE, d, 255, 0, s, 0, 255
        if s < 0:
            c[Counter.MISS] += 1
            return Outcome.MISS, Reason.NO_ENTRY, d, 255, 0, -1, 0, 255
        r = self.rec[s]
        fl = (r[L.W_META] >> 16) & 0xFF
        state = (r[L.W_META] >> 8) & 0xFF
        rel = d ^ (fl & L.FLAG_ORIG_B)
        reason = self._stale_reason(r)
        if reason != Reason.NONE:
            if not fl & L.FLAG_MISMATCH_REPORTED:
                fl |= L.FLAG_MISMATCH_REPORTED
                self._set_meta(r, state, fl)
                r[L.W_ECC] = ecc_encode(r)
                c[Counter.MISMATCH_EVENTS] += 1
                self._event_from(EventType.VERSION_MISMATCH, reason, r, s, t, p, 0)
            c[Counter.STALE] += 1
            return Outcome.STALE, reason, d, rel, 0, s, state, 255
        if related:  # RELATED: forwarded with the entry's action; the entry is left as it is
            act = (r[L.W_ACT] >> (32 * d)) & M32
            if act == self.config.drop_action:
                c[Counter.DROP_HW] += 1
                return Outcome.DROP_HW, Reason.DROP_ACTION, d, rel, act, s, state, CT.V_RELATED
            c[Counter.HIT] += 1
            c[Counter.BYTES_FORWARDED] += length
            return Outcome.HIT, Reason.NONE, d, rel, act, s, state, CT.V_RELATED
        if proto in ICMP_ECHO_TYPES:  # the tracker's flags: an ICMP packet's type
            hdr = (dport >> 8, *hdr[1:])
        v = self._track(r, proto, rel, t, hdr)
        if v == CT.V_REOPEN:
            # a new connection: close the old session, punt the SYN for a decision
            c[Counter.TCP_REOPEN] += 1
            c[Counter.CLOSED] += 1
            self._event_from(EventType.CLOSED, Reason.TCP_REOPEN, r, s, t, p, 0)
            self._invalidate(s)
            c[Counter.MISS] += 1
            return Outcome.MISS, Reason.TCP_REOPEN, d, 255, 0, -1, 0, CT.V_REOPEN
        state = (r[L.W_META] >> 8) & 0xFF
        if v == CT.V_INVALID:
            reason = Reason.TCP_INVALID
            c[Counter.TCP_INVALID] += 1
        elif v == CT.V_IGNORE:
            reason = Reason.TCP_IGNORED
            c[Counter.TCP_IGNORED] += 1
        elif v == CT.V_KILL:
            reason = Reason.CT_KILLED
        pk = [r[L.W_PKTS] & M32, r[L.W_PKTS] >> 32]
        pk[d] = (pk[d] + 1) & M32
        r[L.W_PKTS] = pk[0] | (pk[1] << 32)
        r[L.W_BYTES0 + d] = (r[L.W_BYTES0 + d] + length) & M64
        r[L.W_SEEN] = t & M64
        ecc_seal(r)
        act = (r[L.W_ACT] >> (32 * d)) & M32
        if v == CT.V_KILL:  # the only reply was a RST: the entry goes (final counters)
            c[Counter.CLOSED] += 1
            self._event_from(EventType.CLOSED, Reason.CT_KILLED, r, s, t, p, 0)
            self._invalidate(s)
            s = -1
        if act == self.config.drop_action:
            c[Counter.DROP_HW] += 1
            return Outcome.DROP_HW, Reason.DROP_ACTION, d, rel, act, s, state, v
        if v == CT.V_INVALID and self.config.invalid_policy == "drop":
            c[Counter.DROP_HW] += 1
            return Outcome.DROP_HW, Reason.TCP_INVALID, d, rel, act, s, state, v
        c[Counter.HIT] += 1
        c[Counter.BYTES_FORWARDED] += length
        return Outcome.HIT, reason, d, rel, act, s, state, v

    def _track(self, r: list[int], proto: int, rel: int, t: int, h: tuple[int, ...]) -> int:
        """Run the shared tracker (conntrack.py) on record r in place; returns the verdict."""
        row = np.array([r], dtype=np.uint64)
        fl, seq, ack, sack, win, opt, wsc, plen = h
        v, _rearmed = CT.ct_packet(row, 0, L.W_META, L.W_TRACK, proto, rel, fl, seq, ack, sack,
                                   win, opt, wsc, plen, t, self.tcfg)  # fmt: skip
        r[:] = [int(x) for x in row[0]]
        return int(v)

    # ---- entry operations --------------------------------------------------------------
    def _keys(self, keys: FlowKeys) -> list[tuple[Key, int]]:
        return [canonical_key(*_tuple_of(keys, i)) for i in range(len(keys))]

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
        args = {
            "ao": broadcast_arg(action_orig, n, np.uint32, "action_orig"),
            "ar": broadcast_arg(action_reply, n, np.uint32, "action_reply"),
            "eni": broadcast_arg(eni_scope, n, np.uint32, "eni_scope"),
            "vpc": broadcast_arg(vpc_scope, n, np.uint32, "vpc_scope"),
            "ev": broadcast_arg(eni_version, n, np.uint32, "eni_version"),
            "vv": broadcast_arg(vpc_version, n, np.uint32, "vpc_version"),
            "t": broadcast_arg(now_ns, n, np.int64, "now_ns"),
            "ts": broadcast_arg(tcp_state, n, np.uint8, "tcp_state"),
            "aux": broadcast_arg(aux, n, np.uint64, "aux"),
        }
        if n and int(args["ts"].max()) >= N_STATES:
            raise ConfigError(
                f"insert: tcp_state {int(args['ts'].max())} is not a TcpState",
                fix="use TcpState values",
            )
        args["ts"] = np.where(has == 1, (trk[:, 0] >> np.uint64(8)) & np.uint64(0xFF), args["ts"])
        out = np.zeros(n, np.uint8)
        for i, (key, d) in enumerate(self._keys(keys)):
            a = {k: int(v[i]) for k, v in args.items()}
            tr = [int(x) for x in trk[i]] if has[i] else None
            out[i] = self._insert_one(key, d, a, tr)
            self.clock = max(self.clock, int(args["t"][i]))
        return out

    def _insert_one(self, key: Key, d: int, a: dict[str, int], track: list[int] | None) -> int:
        c = self.ctr
        t = a["t"]
        r = [0] * L.N_WORDS
        r[0:5] = key[0:5]
        r[L.W_META] = key[5] | (a["ts"] << 8) | (d << 16)
        r[L.W_SCOPE] = a["eni"] | (a["vpc"] << 32)
        r[L.W_VER] = a["ev"] | (a["vv"] << 32)
        act = [a["ao"], a["ar"]] if d == 0 else [a["ar"], a["ao"]]
        r[L.W_ACT] = act[0] | (act[1] << 32)
        r[L.W_SEEN] = t & M64
        r[L.W_AUX] = a["aux"]
        if track is not None:  # the tracker state of a session moved from software
            r[L.W_META] |= track[0] & CT.TRACK_META_MASK
            r[L.W_TRACK : L.W_TRACK + L.N_TRACK_WORDS] = track[1:]
        else:
            row = np.array([r], dtype=np.uint64)
            CT.install_state(row, 0, L.W_META, L.W_TRACK, key[5], t, self.tcfg)
            r[:] = [int(x) for x in row[0]]
        ecc_seal(r)
        if a["eni"] >= len(self.eni) or a["vpc"] >= len(self.vpc):
            c[Counter.INSERT_BAD_SCOPE] += 1
            return Status.BAD_SCOPE
        while True:
            s, fault = self._probe(key, t, 0)
            if not fault:
                break
        if s >= 0:
            c[Counter.INSERT_EXISTS] += 1
            return Status.EXISTS
        if self.count >= self.config.capacity:
            c[Counter.INSERT_TABLE_FULL] += 1
            self._event_from(EventType.TABLE_FULL, 0, r, -1, t, 0, 0)
            return Status.TABLE_FULL
        h = hash_key_py(*key, self.config.hash_seed)
        bs = self.config.bucket_size
        free = next((s for s in self._slots_of(h) if self.tags[s] == 0), -1)
        path: list[int] = []
        if free < 0:
            cur = bucket_pair(h, self.config.n_buckets)[0]
            for _ in range(self.config.max_displacement):
                self.rng, z = _splitmix(self.rng)
                start = z % bs
                choices = [cur * bs + (start + k) % bs for k in range(bs)]
                victims = [v for v in choices if v not in path]
                if not victims:
                    break
                v = victims[0]
                if not self._read_check(v, t, 0):
                    free = v
                    break
                path.append(v)
                vb1, vb2 = bucket_pair(self._hash_rec(self.rec[v]), self.config.n_buckets)
                alt = vb2 if vb1 == cur else vb1
                free = next((s for s in range(alt * bs, alt * bs + bs) if self.tags[s] == 0), -1)
                if free >= 0:
                    break
                cur = alt
        if free < 0:
            c[Counter.INSERT_FAILED] += 1
            self._event_from(EventType.INSERT_FAILED, 0, r, -1, t, 0, 0)
            return Status.INSERT_FAILED
        dst = free
        for src in reversed(path):
            self.rec[dst] = list(self.rec[src])
            self.tags[dst] = self.tags[src]
            c[Counter.DISPLACEMENTS] += 1
            dst = src
        self.rec[dst] = r
        self.tags[dst] = tag_of(h)
        self.count += 1
        c[Counter.INSERT_OK] += 1
        return Status.OK

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        out = np.zeros(len(keys), np.uint8)
        for i, (key, _d) in enumerate(self._keys(keys)):
            s, st = self._find_for_op(key, Counter.DELETE_NOT_FOUND)
            out[i] = st
            if st == Status.OK:
                self._invalidate(s)
                self.ctr[Counter.DELETE_OK] += 1
        return out

    def _find_for_op(self, key: Key, not_found: Counter) -> tuple[int, int]:
        s, fault = self._probe(key, self.clock, 0)
        if fault:
            self.ctr[Counter.OP_ECC_FAULT] += 1
            return s, Status.ECC_FAULT
        if s < 0:
            self.ctr[not_found] += 1
            return s, Status.NOT_FOUND
        return s, Status.OK

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
        vals, _mask = modify_args(
            len(keys), action_orig, action_reply, eni_version, vpc_version, aux, tcp_state,
            timeout_ns, track,
        )  # fmt: skip
        out = np.zeros(len(keys), np.uint8)
        for i, (key, _d) in enumerate(self._keys(keys)):
            s, st = self._find_for_op(key, Counter.MODIFY_NOT_FOUND)
            out[i] = st
            if st != Status.OK:
                continue
            r = self.rec[s]
            fl = ((r[L.W_META] >> 16) & 0xFF) & ~L.FLAG_MISMATCH_REPORTED
            state = (r[L.W_META] >> 8) & 0xFF
            act = [r[L.W_ACT] & M32, r[L.W_ACT] >> 32]
            o = 1 if fl & L.FLAG_ORIG_B else 0
            if "action_orig" in vals:
                act[o] = int(vals["action_orig"][i])
            if "action_reply" in vals:
                act[1 - o] = int(vals["action_reply"][i])
            r[L.W_ACT] = act[0] | (act[1] << 32)
            ev, vv = r[L.W_VER] & M32, r[L.W_VER] >> 32
            ev = int(vals["eni_version"][i]) if "eni_version" in vals else ev
            vv = int(vals["vpc_version"][i]) if "vpc_version" in vals else vv
            r[L.W_VER] = ev | (vv << 32)
            if "aux" in vals:
                r[L.W_AUX] = int(vals["aux"][i])
            if "track" in vals:  # the whole tracker state, its TCP state included
                tr = [int(x) for x in vals["track"][i]]
                keep = r[L.W_META] & ~CT.TRACK_META_MASK & M64
                r[L.W_META] = keep | (tr[0] & CT.TRACK_META_MASK)
                fl = ((r[L.W_META] >> 16) & 0xFF) & ~L.FLAG_MISMATCH_REPORTED
                state = (tr[0] >> 8) & 0xFF
                r[L.W_TRACK : L.W_TRACK + L.N_TRACK_WORDS] = tr[1:]
            if "tcp_state" in vals:  # an explicit TCP state wins over the track's
                state = int(vals["tcp_state"][i])
            self._set_meta(r, state, fl)
            if "timeout_ns" in vals:
                r[L.W_EXPIRES] = (self.clock + int(vals["timeout_ns"][i])) & M64
            ecc_seal(r)
            self.ctr[Counter.MODIFY_OK] += 1
        return out

    def query(
        self, keys: FlowKeys, now_ns: int | None = None
    ) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        n = len(keys)
        status = np.zeros(n, np.uint8)
        rows = np.zeros((n, L.N_WORDS), np.uint64)
        slots = np.full(n, -1, np.int64)
        for i, (key, _d) in enumerate(self._keys(keys)):
            s, st = self._find_for_op(key, Counter.QUERY_NOT_FOUND)
            status[i] = st
            if st == Status.OK:
                rows[i] = self.rec[s]
                slots[i] = s
                self.ctr[Counter.QUERY_OK] += 1
        ent = entries_from_rows(rows, slots, np.array(self.eni), np.array(self.vpc))
        now = self.clock if now_ns is None else int(now_ns)
        ent["remaining_ns"] = np.maximum(ent["expires_ns"] - now, 0)
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
        s, max_entries = dump_args(self.config, cursor, max_entries)
        rows: list[list[int]] = []
        slots: list[int] = []
        while s < self.config.capacity and len(rows) < max_entries:
            if self.tags[s] and self._read_check(s, self.clock, 0):
                r = self.rec[s]
                e, v = r[L.W_SCOPE] & M32, r[L.W_SCOPE] >> 32
                ev, vv = r[L.W_VER] & M32, r[L.W_VER] >> 32
                keep = (
                    (eni_scope is None or e == eni_scope)
                    and (vpc_scope is None or v == vpc_scope)
                    and (eni_version_below is None or ev < eni_version_below)
                    and (vpc_version_below is None or vv < vpc_version_below)
                    and (tcp_state is None or (r[L.W_META] >> 8) & 0xFF == tcp_state)
                    and (not stale_only or self._stale_reason(r) != Reason.NONE)
                )
                if keep:
                    rows.append(list(r))
                    slots.append(s)
                    self.ctr[Counter.DUMP_ENTRIES] += 1
            s += 1
        arr = np.array(rows, dtype=np.uint64).reshape(-1, L.N_WORDS)
        ent = entries_from_rows(arr, np.array(slots, np.int64), np.array(self.eni),
                                np.array(self.vpc))  # fmt: skip
        ent["remaining_ns"] = np.maximum(ent["expires_ns"] - self.clock, 0)
        return ent, s

    def bump_version(self, scope: Scope, scope_id: int) -> int:
        arr = self.eni if Scope(scope) == Scope.ENI else self.vpc
        check_scope(scope, scope_id, len(arr))
        arr[scope_id] = (arr[scope_id] + 1) & M32
        self.ctr[Counter.VERSION_BUMPS] += 1
        return arr[scope_id]

    def scope_version(self, scope: Scope, scope_id: int) -> int:
        arr = self.eni if Scope(scope) == Scope.ENI else self.vpc
        check_scope(scope, scope_id, len(arr))
        return arr[scope_id]

    # ---- events, aging, counters ------------------------------------------------------
    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        out: list[list[int]] = []
        while self.ring and len(out) < max_n:
            out.append(self.ring.popleft())
        if self.lost_pending and len(self.ring) < self.config.ring_capacity:
            self._marker(self.last_lost_time)
        return events_from_words(np.array(out, dtype=np.uint64).reshape(-1, N_EVENT_WORDS))

    def scrub(self, now_ns: int, n_slots: int | None = None) -> ScrubResult:
        n = self.config.scrub_slots_per_tick if n_slots is None else int(n_slots)
        n = max(0, min(n, self.config.capacity))
        self.clock = max(self.clock, int(now_ns))
        expired = 0
        for _ in range(n):
            s = self.cursor
            self.ctr[Counter.SCRUB_VISITED] += 1
            if self.tags[s] and self._read_check(s, now_ns, 0):
                r = self.rec[s]
                if now_ns >= _signed(r[L.W_EXPIRES]):
                    state = (r[L.W_META] >> 8) & 0xFF
                    closed = (r[L.W_META] & 0xFF) == PROTO_TCP and state in (
                        TcpState.TIME_WAIT,
                        TcpState.CLOSE,
                    )
                    kind = Counter.CLOSED if closed else Counter.AGED
                    self.ctr[kind] += 1
                    etype = EventType.CLOSED if closed else EventType.AGED
                    self._event_from(etype, 0, r, s, now_ns, 0, 0)
                    self._invalidate(s)
                    expired += 1
            self.cursor = (s + 1) % self.config.capacity
        for p in range(self.config.n_ports):
            self._watchdog(p, now_ns)
        return ScrubResult(visited=n, expired=expired, cursor=self.cursor)

    def counters(self) -> dict[str, int]:
        return {c.name.lower(): self.ctr[c] for c in Counter}

    def occupancy(self) -> int:
        return self.count

    # ---- fault hooks -------------------------------------------------------------------
    def slot_of(self, keys: FlowKeys) -> npt.NDArray[np.int64]:
        out = np.full(len(keys), -1, np.int64)
        for i, (key, _d) in enumerate(self._keys(keys)):
            h = hash_key_py(*key, self.config.hash_seed)
            for s in self._slots_of(h):
                r = self.rec[s]
                if self.tags[s] == tag_of(h) and (
                    (r[0], r[1], r[2], r[3], r[4], r[L.W_META] & 0xFF) == key
                ):
                    out[i] = s
                    break
        return out

    def flip_bits(self, slot: int, bits: npt.ArrayLike) -> None:
        for b in check_flip(self.config, slot, bits):
            self.rec[slot][b // 64] ^= 1 << (b % 64)

    def stall_port(self, port: int) -> None:
        check_port(self.config, port)
        self.stalled[port] = True

    def unstall_port(self, port: int) -> None:
        check_port(self.config, port)
        self.stalled[port] = False
        self.stuck[port] = -1
        self.hung[port] = False

    # ---- introspection for explain -----------------------------------------------------
    def raw_record(self, slot: int) -> np.ndarray:
        """Copy of one slot's record words (debug; no ECC check)."""
        return np.array(self.rec[slot], dtype=np.uint64)

    def raw_tag(self, slot: int) -> int:
        return self.tags[slot]

    def port_stalled(self, port: int) -> bool:
        return bool(self.stalled[port])


__all__ = ["ReferenceEngine", "canonical_key"]
