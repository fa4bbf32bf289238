"""The OVS-like per-flow software mirror: one `udpif_key`-like record per hardware entry,
and `MirroredEngine`, which keeps it in step with every insert, modify, delete and
disappearance event (OVS creates the ukey when it installs the flow and sweeps it when the
flow is gone).

The record keeps what a udpif_key holds (ofproto-dpif-upcall.c): the ufid, the flow key and
mask as netlink attributes, the actions, the stats (packets, bytes, used) and the policy
reference (our scopes and the revalidation sequence), the dump sequence and the state.
Sizes are the ENCODED lengths we can justify, not OVS's 640-byte buffers (named constants
below, each an assumption); `live_nbytes` is the records' real numpy bytes plus the hash
index. The model figure `OVS_UKEY_BYTES` (reference/fornax.md) is reported beside it only.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax import _softpath_kernels as K
from starfabric.fornax.baselines.engines import DelegatingEngine
from starfabric.fornax.engine import EventType, FlowKeys, Status
from starfabric.fornax.keys import canonicalize_columns, key_hash
from starfabric.fornax.manager.decide import original_from_entries
from starfabric.fornax.softpath import key_words

#: sizeof(struct udpif_key) with its key/mask buffers, ~1.5 KB (reference/fornax.md): a model
#: figure reported beside the measured bytes, never used for the measured ratio.
OVS_UKEY_BYTES = 1536
#: Netlink attributes of a datapath flow key beyond the 5-tuple+VNI we store explicitly
#: (assumption: IPv4 VXLAN flow with conntrack fields as OVS encodes it: tunnel nest 48,
#: in_port 8, ethernet 16, ethertype 8, ipv4 16, l4 8, tcp_flags 8, recirc_id 8, dp_hash 8,
#: ct_state/zone/mark 24 = 152 bytes, of which the 41 bytes of addresses, ports, protocol
#: and VNI are the explicit fields).
NL_KEY_REST_BYTES = 152 - 41
#: Megaflow mask, same attribute layout as the key (assumption: 152 bytes).
NL_MASK_BYTES = 152
#: Encoded datapath actions (assumption: set(tunnel) nest 48 + ct 8 + output 8 = 64 bytes).
NL_ACTIONS_BYTES = 64

_KEY_FIELDS = ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")

UKEY_DTYPE = np.dtype(
    [
        ("ufid", np.uint64, 2),  # OVS ufid is 128 bits [fact]
        ("vni", np.uint32),
        ("proto", np.uint8),
        ("src_hi", np.uint64),
        ("src_lo", np.uint64),
        ("dst_hi", np.uint64),
        ("dst_lo", np.uint64),
        ("sport", np.uint16),
        ("dport", np.uint16),
        ("key_nl_rest", np.uint8, NL_KEY_REST_BYTES),
        ("mask_nl", np.uint8, NL_MASK_BYTES),
        ("action_orig", np.uint32),
        ("action_reply", np.uint32),
        ("actions_nl", np.uint8, NL_ACTIONS_BYTES),
        ("eni_scope", np.uint32),
        ("vpc_scope", np.uint32),
        ("reval_seq", np.uint64),
        ("dump_seq", np.uint64),
        ("aux", np.uint64),
        ("created_ns", np.int64),
        ("pkts", np.uint64),
        ("bytes", np.uint64),
        ("used_ns", np.int64),
        ("hw_used_ns", np.int64),  # counters as last synced from hardware (stats lag)
        ("state", np.uint8),
    ]
)


def _canon(keys: Any) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], np.ndarray]:
    """(hash, key words, proto) of directed keys, or of records with key fields and aux (an
    engine record keeps only the ICMP echo id: the type word comes back from aux)."""
    k = keys if isinstance(keys, FlowKeys) else original_from_entries(keys)
    ck = canonicalize_columns(k.vni, k.proto, k.src_hi, k.src_lo, k.dst_hi, k.dst_lo, k.sport,
                              k.dport)  # fmt: skip
    return key_hash(ck), key_words(ck), ck.proto


class FlowMirror:
    """udpif_key records in dense rows, found by flow key through an open-addressing index."""

    def __init__(self, initial_rows: int = 1024) -> None:
        self.rows = np.zeros(initial_rows, UKEY_DTYPE)
        self.live = np.zeros(initial_rows, bool)
        self._free = np.arange(initial_rows - 1, -1, -1, dtype=np.int64)
        self._n_free = initial_rows
        self._new_index(1 << max(4, int(2 * initial_rows - 1).bit_length()))
        self.count = 0
        self.dump_seq = np.uint64(1)

    def _new_index(self, size: int) -> None:
        self.i_used = np.zeros(size, np.uint8)
        self.i_key = np.zeros((size, 5), np.uint64)
        self.i_proto = np.zeros(size, np.uint8)
        self.i_row = np.full(size, -1, np.int64)
        self.tombstones = 0

    def keys_of(self, rows: npt.NDArray[np.int64]) -> FlowKeys:
        """The directed flow keys stored in these rows (gathered field by field)."""
        r = self.rows
        return FlowKeys(*(np.ascontiguousarray(r[f][rows]) for f in _KEY_FIELDS))

    # ---- index ---------------------------------------------------------------------------
    def lookup(self, keys: Any) -> npt.NDArray[np.int64]:
        """Row of each key (FlowKeys or records with key fields), -1 when not mirrored."""
        h, w, p = _canon(keys)
        slot = np.empty(len(h), np.int64)
        K.sp_lookup(h, w, p, self.i_key, self.i_proto, self.i_used, slot)
        return np.where(slot >= 0, self.i_row[np.maximum(slot, 0)], -1)

    def _reindex(self, size: int) -> None:
        rows = np.flatnonzero(self.live)
        self._new_index(size)
        if len(rows):
            h, w, p = _canon(self.keys_of(rows))
            st = np.empty(len(rows), np.uint8)
            slot = np.empty(len(rows), np.int64)
            K.sp_insert(h, w, p, 0, size, self.i_key, self.i_proto, self.i_used, st, slot)
            self.i_row[slot] = rows

    def _alloc(self, n: int) -> npt.NDArray[np.int64]:
        if self._n_free < n:
            old = len(self.rows)
            grow = max(old, n - self._n_free)
            # realloc in place (new rows zeroed); no view of the arrays outlives a call here
            self.rows.resize(old + grow, refcheck=False)
            self.live.resize(old + grow, refcheck=False)
            extra = np.arange(old + grow - 1, old - 1, -1, dtype=np.int64)
            self._free = np.concatenate([extra, self._free[: self._n_free]])
            self._n_free = len(self._free)
        got = self._free[self._n_free - n : self._n_free][::-1].copy()
        self._n_free -= n
        return got

    # ---- records -------------------------------------------------------------------------
    def add(
        self,
        keys: FlowKeys,
        *,
        action_orig: npt.ArrayLike,
        action_reply: npt.ArrayLike,
        eni_scope: npt.ArrayLike,
        vpc_scope: npt.ArrayLike,
        aux: npt.ArrayLike,
        now_ns: npt.ArrayLike,
        reval_seq: int,
    ) -> None:
        """Create the ukeys of flows just installed (a key already mirrored is refreshed)."""
        n = len(keys)
        if not n:
            return
        if 2 * (self.count + n + self.tombstones) > len(self.i_used):
            self._reindex(1 << int(4 * (self.count + n) - 1).bit_length())
        h, w, p = _canon(keys)
        st = np.empty(n, np.uint8)
        slot = np.empty(n, np.int64)
        K.sp_insert(h, w, p, 0, len(self.i_used), self.i_key, self.i_proto, self.i_used, st,
                    slot)  # fmt: skip
        new = st == K.ST_OK
        fresh = self._alloc(int(new.sum()))
        self.i_row[slot[new]] = fresh
        rows = self.i_row[slot]  # a key repeated in the batch refreshes its one row
        self.live[fresh] = True
        self.count += len(fresh)
        rec = np.zeros(n, UKEY_DTYPE)  # built column by column, then stored row by row
        rec["ufid"][:, 0] = h
        rec["ufid"][:, 1] = key_hash(canonicalize_columns(
            keys.vni, keys.proto, keys.src_hi, keys.src_lo, keys.dst_hi, keys.dst_lo, keys.sport,
            keys.dport), seed=0x0F1D_0F1D_0F1D_0F1D)  # fmt: skip
        for f in ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport"):
            rec[f] = getattr(keys, f)
        rec["mask_nl"][:, :41] = 0xFF  # exact match on the explicit key fields
        rec["action_orig"] = action_orig
        rec["action_reply"] = action_reply
        rec["eni_scope"] = eni_scope
        rec["vpc_scope"] = vpc_scope
        rec["aux"] = aux
        rec["reval_seq"] = reval_seq
        rec["dump_seq"] = self.dump_seq
        rec["created_ns"] = now_ns
        rec["used_ns"] = now_ns
        rec["hw_used_ns"] = -1
        rec["state"] = 1  # UKEY_OPERATIONAL
        self.rows[rows] = rec

    def update(self, keys: FlowKeys, reval_seq: int, **fields: Any) -> None:
        """Modified flows: new actions/aux (None = unchanged)."""
        rows = self.lookup(keys)
        ok = rows >= 0
        for f, v in fields.items():
            if v is None:
                continue
            vals = np.broadcast_to(np.asarray(v), (len(keys),))
            self.rows[f][rows[ok]] = vals[ok]
        self.rows["reval_seq"][rows[ok]] = reval_seq

    def remove_rows(self, rows: npt.NDArray[np.int64]) -> None:
        rows = np.unique(rows[rows >= 0])
        rows = rows[self.live[rows]]
        if not len(rows):
            return
        h, w, p = _canon(self.keys_of(rows))
        slot = np.empty(len(rows), np.int64)
        K.sp_lookup(h, w, p, self.i_key, self.i_proto, self.i_used, slot)
        slot = slot[slot >= 0]
        self.i_used[slot] = 2
        self.i_row[slot] = -1
        self.tombstones += len(slot)
        self.live[rows] = False
        self.rows[rows] = np.zeros(1, UKEY_DTYPE)
        need = self._n_free + len(rows)
        if need > len(self._free):
            self._free = np.concatenate([self._free, np.zeros(need - len(self._free), np.int64)])
        self._free[self._n_free : need] = rows
        self._n_free = need
        self.count -= len(rows)
        if self.tombstones > len(self.i_used) // 4:
            self._reindex(len(self.i_used))

    def remove(self, keys: Any) -> None:
        self.remove_rows(self.lookup(keys))

    def live_rows(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.live)

    @property
    def live_nbytes(self) -> int:
        """Measured bytes: live records plus the hash index (allocated, as OVS's cmap)."""
        index = (self.i_used, self.i_key, self.i_proto, self.i_row)
        return int(self.count * UKEY_DTYPE.itemsize + sum(a.nbytes for a in index))

    @property
    def allocated_nbytes(self) -> int:
        index = (self.i_used, self.i_key, self.i_proto, self.i_row)
        return int(self.rows.nbytes + self.live.nbytes + self._free.nbytes
                   + sum(a.nbytes for a in index))  # fmt: skip


class MirroredEngine(DelegatingEngine):
    """Keeps a FlowMirror in step with the entries below it. Mirror upkeep is management
    work: its CPU time is moved out of the enclosing engine call's emulation time."""

    def __init__(self, inner: Any, mirror: FlowMirror, **kw: Any) -> None:
        super().__init__(inner, **kw)
        self.mirror = mirror
        self.reval_seq = 0

    def _charge(self, t0: float) -> None:
        if self.metrics is not None:  # inside Metrics.engine_call: hand the time back
            self.metrics.engine_cpu_s -= time.thread_time() - t0

    def insert(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        st = np.asarray(self.inner.insert(keys, **kw))
        t0 = time.thread_time()
        ok = np.flatnonzero(st == Status.OK)
        n = len(keys)

        def col(name: str, default: Any = 0) -> np.ndarray:
            return np.broadcast_to(np.asarray(kw.get(name, default)), (n,))[ok]

        self.mirror.add(
            keys.take(ok), action_orig=col("action_orig"), action_reply=col("action_reply"),
            eni_scope=col("eni_scope"), vpc_scope=col("vpc_scope"), aux=col("aux"),
            now_ns=col("now_ns"), reval_seq=self.reval_seq,
        )  # fmt: skip
        self._charge(t0)
        return st

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        st = self.inner.delete(keys)
        t0 = time.thread_time()
        self.mirror.remove(keys)
        self._charge(t0)
        return st

    def modify(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        st = np.asarray(self.inner.modify(keys, **kw))
        t0 = time.thread_time()
        ok = st == Status.OK
        fields = {f: kw.get(f) for f in ("action_orig", "action_reply", "aux")}
        fields = {
            f: (None if v is None else np.broadcast_to(np.asarray(v), (len(keys),))[ok])
            for f, v in fields.items()
        }
        self.mirror.update(keys.take(np.flatnonzero(ok)), self.reval_seq, **fields)
        self._charge(t0)
        return st

    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        ev = self.inner.poll_events(max_n)
        gone = np.isin(ev["type"], (EventType.AGED, EventType.CLOSED, EventType.ECC_UNCORRECTABLE))
        if gone.any():
            t0 = time.thread_time()
            self.mirror.remove(ev[gone])
            self._charge(t0)
        return ev


__all__ = [
    "NL_ACTIONS_BYTES",
    "NL_KEY_REST_BYTES",
    "NL_MASK_BYTES",
    "OVS_UKEY_BYTES",
    "UKEY_DTYPE",
    "FlowMirror",
    "MirroredEngine",
]
