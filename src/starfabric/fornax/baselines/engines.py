"""Engine wrappers that give the baselines their hardware view without changing the engine.

`DelegatingEngine` forwards every SessionEngine call (and can switch hardware aging off: a
software-centric manager ages in software, so its scrub tick does not expire entries).
`PerDirectionEngine` keeps TWO engine entries per connection, one per direction, as OVS
datapath flows do. The engine canonicalizes keys, so the direction is made part of the key:
bit 31 of the VNI (VXLAN VNIs are 24 bits, so the bit is free) carries the packet's canonical
direction bit (keys.py), both in the keys inserted and in the packets before `process`. Each
direction's packets therefore match their own entry in the same emulated table, and every
connection costs two inserts, two deletes and two slots. Towards the manager it still looks
like a session engine: records and events come back in the connection's ORIGINAL orientation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine import (
    EventType,
    FlowKeys,
    ProcessResult,
    ScrubResult,
    SessionEngine,
    Status,
)
from starfabric.fornax.engine.proxy import EngineProxy
from starfabric.fornax.keys import canonicalize_columns, icmp_inverted_words, key_hash
from starfabric.fornax.manager.decide import is_icmp, original_from_entries
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.packets import PacketBatch

#: VNI bit that carries the direction of a per-direction entry (VNIs are 24-bit).
DIR_BIT = np.uint32(1 << 31)
#: aux bit marking the REPLY-direction entry of a connection (bits 56..61 of the manager's
#: cookie are unused, manager/cookie.py). The reply entry carries no SNAT flag, so only the
#: ORIGINAL entry's event releases the connection's port.
REPLY_MARK = np.uint64(1 << 61)
_NAT_FLAG = np.uint64(1 << 63)
_GONE = (int(EventType.AGED), int(EventType.CLOSED), int(EventType.ECC_UNCORRECTABLE))


class DelegatingEngine(EngineProxy):
    """Forwards every call to `inner`; `hardware_aging=False` makes scrub a no-op tick."""

    def __init__(self, inner: SessionEngine, *, hardware_aging: bool = True) -> None:
        super().__init__(inner)
        self.hardware_aging = hardware_aging
        self.metrics: Metrics | None = None  # set by the controller: extra ops are counted

    def _extra(self, op: str, n: int) -> None:
        if self.metrics is not None and n:
            self.metrics.ops[op] += int(n)

    def scrub(self, now_ns: int, n_slots: int | None = None) -> ScrubResult:
        if not self.hardware_aging:  # software ages: the hardware keeps every entry
            return ScrubResult(0, 0, 0)
        return self.inner.scrub(now_ns, n_slots)


def state_of_track(track: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """The TCP state held in tracker rows (ENTRY_DTYPE "track")."""
    t = np.asarray(track, np.uint64).reshape(-1, np.asarray(track).shape[-1])
    return ((t[:, 0] >> np.uint64(8)) & np.uint64(0xFF)).astype(np.uint8)


def state_only(kw: dict[str, Any]) -> dict[str, Any]:
    """Per-direction entries are installed with a TCP state only (each entry sees its own
    direction as ORIGINAL, so a connection's two-direction tracker state does not apply):
    a `track` argument becomes its TCP state."""
    if kw.get("track") is None:
        kw.pop("track", None)
        return kw
    out = dict(kw)
    out["tcp_state"] = state_of_track(out.pop("track"))
    return out


def direction_of(keys: FlowKeys) -> npt.NDArray[np.uint8]:
    """Canonical direction bit of directed keys (the VNI's direction bit ignored)."""
    ck = canonicalize_columns(keys.vni & ~DIR_BIT, keys.proto, keys.src_hi, keys.src_lo,
                              keys.dst_hi, keys.dst_lo, keys.sport, keys.dport)  # fmt: skip
    return ck.direction


def reverse_keys(keys: FlowKeys) -> FlowKeys:
    """The other direction's directed keys (ICMP keeps its identifier, its type inverted as
    nf_ct_invert_tuple does: a request's reply)."""
    icmp = is_icmp(keys.proto)
    return FlowKeys(
        vni=keys.vni.copy(), proto=keys.proto.copy(), src_hi=keys.dst_hi.copy(),
        src_lo=keys.dst_lo.copy(), dst_hi=keys.src_hi.copy(), dst_lo=keys.src_lo.copy(),
        sport=np.where(icmp, keys.sport, keys.dport).astype(np.uint16),
        dport=np.where(icmp, icmp_inverted_words(keys.proto, keys.dport),
                       keys.sport).astype(np.uint16),
    )  # fmt: skip


def with_direction(keys: FlowKeys) -> FlowKeys:
    """Keys whose VNI carries their canonical direction bit (what the engine stores)."""
    d = direction_of(keys).astype(np.uint32)
    return dataclasses.replace(keys, vni=((keys.vni & ~DIR_BIT) | (d << np.uint32(31))))


def to_original(rec: np.ndarray) -> tuple[np.ndarray, npt.NDArray[np.bool_]]:
    """Per-direction entry/event records in their connection's ORIGINAL orientation (VNI bit
    and reply mark stripped, reply entries turned around); also which rows were reply entries."""
    out = rec.copy()
    out["vni"] &= ~DIR_BIT
    rep = (out["aux"] & REPLY_MARK) != 0
    if rep.any():
        r = out[rep]
        icmp = is_icmp(r["proto"])
        for a, b in (("src_hi", "dst_hi"), ("src_lo", "dst_lo"), ("action_orig", "action_reply"),
                     ("pkts_orig", "pkts_reply"), ("bytes_orig", "bytes_reply")):  # fmt: skip
            if a in (out.dtype.names or ()):  # records may carry the key fields only
                r[a], r[b] = r[b].copy(), r[a].copy()
        sp = r["sport"].copy()
        r["sport"] = np.where(icmp, sp, r["dport"])
        r["dport"] = np.where(icmp, r["dport"], sp)
        out[rep] = r
    out["aux"] &= ~REPLY_MARK
    return out, rep


def connection_ids(rec: np.ndarray) -> npt.NDArray[np.uint64]:
    """One id per connection for records in ORIGINAL orientation (canonical key hash)."""
    k = original_from_entries(rec)  # the ICMP type word comes back from aux
    ck = canonicalize_columns(k.vni, k.proto, k.src_hi, k.src_lo, k.dst_hi, k.dst_lo, k.sport,
                              k.dport)  # fmt: skip
    return key_hash(ck)


class PerDirectionEngine(DelegatingEngine):
    """Two engine entries per connection (see the module docstring)."""

    def halves(self, keys: FlowKeys) -> tuple[FlowKeys, FlowKeys, npt.NDArray[np.bool_]]:
        """(ORIGINAL entry keys, REPLY entry keys, whether the reply entry is distinct)."""
        orig = with_direction(keys)
        rev = with_direction(reverse_keys(keys))
        distinct = orig.vni != rev.vni
        return orig, rev, distinct

    def process(self, batch: PacketBatch) -> ProcessResult:
        d = direction_of(FlowKeys.from_batch(batch)).astype(np.uint32)
        vni = (batch.vni & ~DIR_BIT) | (d << np.uint32(31))
        return self.inner.process(dataclasses.replace(batch, vni=vni.astype(np.uint32)))

    def insert(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        n = len(keys)
        kw = state_only(kw)
        o, r, two = self.halves(keys)
        aux = np.broadcast_to(np.asarray(kw.pop("aux", 0), np.uint64), (n,))
        ao = np.broadcast_to(np.asarray(kw.pop("action_orig"), np.uint32), (n,))
        ar = np.broadcast_to(np.asarray(kw.pop("action_reply"), np.uint32), (n,))
        kw = {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in kw.items()}
        st = np.asarray(self.inner.insert(o, action_orig=ao, action_reply=ar, aux=aux, **kw))
        st = st.copy()
        do = np.flatnonzero(two & (st == Status.OK))
        if len(do):
            self._extra("insert", len(do))
            st_r = np.asarray(
                self.inner.insert(
                    r.take(do), action_orig=ar[do], action_reply=ao[do],
                    aux=(aux[do] & ~_NAT_FLAG) | REPLY_MARK, **{k: v[do] for k, v in kw.items()},
                )
            )  # fmt: skip
            bad = do[st_r != Status.OK]
            if len(bad):  # the connection needs both entries: undo the ORIGINAL one
                self._extra("delete", len(bad))
                self.inner.delete(o.take(bad))
                st[bad] = st_r[st_r != Status.OK]
        return st

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        o, r, two = self.halves(keys)
        st = np.asarray(self.inner.delete(o)).copy()
        idx = np.flatnonzero(two)
        if len(idx):
            self._extra("delete", len(idx))
            st_r = np.asarray(self.inner.delete(r.take(idx)))
            st[idx] = np.where(st_r == Status.OK, Status.OK, st[idx])
        return st

    def modify(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        n = len(keys)
        kw = state_only(kw)
        o, r, two = self.halves(keys)
        st = np.asarray(self.inner.modify(o, **kw)).copy()
        idx = np.flatnonzero(two)
        if not len(idx):
            return st
        self._extra("modify", len(idx))
        rk: dict[str, Any] = {}
        for k, v in kw.items():
            if v is None:
                continue
            rk[k] = np.broadcast_to(np.asarray(v), (n,))[idx]
        if "action_orig" in kw or "action_reply" in kw:
            rk.pop("action_orig", None)
            rk.pop("action_reply", None)
            if kw.get("action_reply") is not None:
                rk["action_orig"] = np.broadcast_to(np.asarray(kw["action_reply"]), (n,))[idx]
            if kw.get("action_orig") is not None:
                rk["action_reply"] = np.broadcast_to(np.asarray(kw["action_orig"]), (n,))[idx]
        if "aux" in rk:
            rk["aux"] = (rk["aux"].astype(np.uint64) & ~_NAT_FLAG) | REPLY_MARK
        st_r = np.asarray(self.inner.modify(r.take(idx), **rk))
        st[idx] = np.where(st[idx] == Status.OK, st[idx], st_r)
        return st

    def query(
        self, keys: FlowKeys, now_ns: int | None = None
    ) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        o, r, two = self.halves(keys)
        s1, r1 = self.inner.query(o, now_ns)
        self._extra("query", int(two.sum()))
        s2, r2 = self.inner.query(r, now_ns)
        s2 = np.where(two, s2, Status.NOT_FOUND)
        c1, _ = to_original(r1)
        c2, rep2 = to_original(r2)
        ok1, ok2 = s1 == Status.OK, s2 == Status.OK
        # the ORIGINAL entry is the base; the reply entry adds its direction's counters
        base_is_2 = (ok2 & ~rep2) | (~ok1 & ok2)
        out = np.where(base_is_2, c2, c1)
        other = np.where(base_is_2, c1, c2)
        both = ok1 & ok2
        for f in ("pkts_reply", "bytes_reply"):
            out[f] = np.where(both, np.maximum(out[f], other[f]), out[f])
        out["last_seen_ns"] = np.where(
            both, np.maximum(out["last_seen_ns"], other["last_seen_ns"]), out["last_seen_ns"]
        )
        st = np.where(ok1 | ok2, Status.OK, s1).astype(np.uint8)
        out[~(ok1 | ok2)] = np.zeros(1, out.dtype)
        return st, out

    def dump(self, cursor: int = 0, max_entries: int = 65536, **kw: Any) -> tuple[np.ndarray, int]:
        """Connections (their ORIGINAL entries), in ORIGINAL orientation."""
        recs, nxt = self.inner.dump(cursor, max_entries, **kw)
        keep = (recs["aux"] & REPLY_MARK) == 0
        out, _ = to_original(recs[keep])
        return out, nxt

    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        """Events in ORIGINAL orientation, one per connection and type; a connection one of
        whose entries aged or closed loses its other entry too (one more delete)."""
        ev = self.inner.poll_events(max_n)
        if not len(ev):
            return ev
        keyed = np.isin(ev["type"], (*_GONE, int(EventType.VERSION_MISMATCH)))
        out, rep = to_original(ev)
        cid = np.where(keyed, connection_ids(out), np.arange(len(out), dtype=np.uint64))
        grp = np.where(np.isin(out["type"], _GONE), 0, out["type"]).astype(np.uint64)
        # one event per connection and kind, the ORIGINAL entry's (it holds the SNAT flag)
        order = np.lexsort((rep, grp, cid))
        new = np.ones(len(out), bool)
        new[1:] = (cid[order][1:] != cid[order][:-1]) | (grp[order][1:] != grp[order][:-1])
        keep = np.zeros(len(out), bool)
        keep[order[new]] = True
        keep |= ~keyed
        gone = np.flatnonzero(keep & np.isin(out["type"], _GONE) & keyed)
        if len(gone):
            g = out[gone]
            k = FlowKeys(vni=g["vni"], proto=g["proto"], src_hi=g["src_hi"], src_lo=g["src_lo"],
                         dst_hi=g["dst_hi"], dst_lo=g["dst_lo"], sport=g["sport"],
                         dport=g["dport"])  # fmt: skip
            o, r, _two = self.halves(k)
            self._extra("delete", 2 * len(gone))
            self.inner.delete(o)
            self.inner.delete(r)
        return out[keep]

    def slot_of(self, keys: FlowKeys) -> npt.NDArray[np.int64]:
        return self.inner.slot_of(with_direction(keys))

    def connections(self) -> int:
        """Connections in hardware (entries / 2: a connection holds both or neither)."""
        return (self.inner.occupancy() + 1) // 2


__all__ = [
    "DIR_BIT",
    "REPLY_MARK",
    "DelegatingEngine",
    "PerDirectionEngine",
    "connection_ids",
    "direction_of",
    "reverse_keys",
    "to_original",
    "with_direction",
]
