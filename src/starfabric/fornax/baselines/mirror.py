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

import os
import tempfile
import time
import weakref
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax import keyindex
from starfabric.fornax.baselines.engines import DelegatingEngine
from starfabric.fornax.engine.interface import ENTRY_DTYPE, EventType, FlowKeys, Status
from starfabric.fornax.keyindex import KeyIndex
from starfabric.fornax.keys import canonicalize, key_hash
from starfabric.fornax.manager.decide import original_from_entries

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

#: Rows re-hashed per step of a reindex, and ukeys built per step of an add (bounds their
#: temporary arrays).
_REINDEX_CHUNK = 1 << 22
_ADD_CHUNK = 1 << 20

_KEY_FIELDS = ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")

HOT_DTYPE = np.dtype(
    [(f, ENTRY_DTYPE.fields[f][0]) for f in _KEY_FIELDS]  # type: ignore[index]
    + [
        ("action_orig", np.uint32),
        ("action_reply", np.uint32),
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
"""The part of a udpif_key revalidators read and write on every dump (kept in memory)."""
BLOB_DTYPE = np.dtype(
    [
        ("ufid", np.uint64, 2),  # OVS ufid is 128 bits [fact]
        ("key_nl_rest", np.uint8, NL_KEY_REST_BYTES),
        ("mask_nl", np.uint8, NL_MASK_BYTES),
        ("actions_nl", np.uint8, NL_ACTIONS_BYTES),
    ]
)
"""The part written once when the ukey is created (ufid and netlink buffers); it may live
in a disk-backed map (see SPILL_ABOVE_BYTES) and counts in the measured bytes all the same."""
UKEY_DTYPE = np.dtype(HOT_DTYPE.descr + BLOB_DTYPE.descr)
"""One whole udpif_key-like record (HOT_DTYPE + BLOB_DTYPE): its itemsize is the per-flow
record size of the measured bytes."""
#: Blob arrays larger than this go to an unlinked temporary file mapped into memory (in
#: $TMPDIR), so a 16M-session mirror (~15 GB of netlink buffers) runs on a machine whose RAM
#: holds only its hot part; an implementation limit of ours, not of the baseline.
SPILL_ABOVE_BYTES = 1 << 30
#: Most load of the mirror's hash index before it doubles (assumption: linear probing
#: rebuilt at most half full; OVS's cmap runs denser, so this overstates the index a little).
INDEX_MAX_LOAD = 0.7


def _canon(keys: Any) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], np.ndarray]:
    """(hash, key words, proto) of directed keys, or of records with key fields and aux (an
    engine record keeps only the ICMP echo id: the type word comes back from aux)."""
    k = keys if isinstance(keys, FlowKeys) else original_from_entries(keys)
    ck = canonicalize(k)
    return key_hash(ck), ck.words(), ck.proto


class _Blobs:
    """BLOB_DTYPE rows in memory or, above SPILL_ABOVE_BYTES, in an unlinked temporary file
    mapped into memory (pages the kernel writes back and drops under memory pressure).

    A forked child maps the file copy-on-write (see `_privatize_in_children`): the file is
    shared, so a child's writes must never reach its parent's records."""

    def __init__(self, rows: int) -> None:
        self._file: Any = None
        self._private = False
        self.arr: np.ndarray = self._make(rows)
        _SPILLABLE.add(self)

    def _make(self, rows: int) -> np.ndarray:
        nbytes = rows * BLOB_DTYPE.itemsize
        if nbytes <= SPILL_ABOVE_BYTES and self._file is None:
            return np.zeros(rows, BLOB_DTYPE)
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="starfabric-ukeys-")  # noqa: SIM115 - lives as long as the map
        self._file.seek(0, os.SEEK_END)
        if self._file.tell() < nbytes:
            self._file.truncate(nbytes)  # sparse: untouched rows take no disk
        if self._private:
            return np.memmap(self._file, BLOB_DTYPE, mode="c", shape=(rows,))
        return np.memmap(self._file, BLOB_DTYPE, mode="r+", shape=(rows,))

    def resize(self, rows: int) -> None:
        if self._file is None and rows * BLOB_DTYPE.itemsize <= SPILL_ABOVE_BYTES:
            self.arr.resize(rows, refcheck=False)
            return
        old = self.arr
        if self._file is None or self._private:  # rows not (all) in the file: copy them
            new = self._make(rows)
            new[: len(old)] = old
        else:
            if isinstance(old, np.memmap):
                old.flush()
            new = self._make(rows)
        del old
        self.arr = new

    def privatize(self) -> None:
        """Map the file copy-on-write from now on (in a forked child)."""
        if self._file is not None and not self._private:
            self._private = True
            self.arr = np.memmap(self._file, BLOB_DTYPE, mode="c", shape=self.arr.shape)

    @property
    def spilled(self) -> bool:
        return self._file is not None


_SPILLABLE: weakref.WeakSet[_Blobs] = weakref.WeakSet()


def _privatize_in_children() -> None:
    for b in list(_SPILLABLE):
        b.privatize()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_privatize_in_children)


class FlowMirror:
    """udpif_key records in dense rows, found by flow key through an open-addressing index.

    `initial_rows` reserves rows up front (the controller passes the hardware table's
    capacity: a mirror never holds more flows than hardware); pages of rows never used are
    never touched, so a reservation costs address space, not memory."""

    def __init__(self, initial_rows: int = 1024) -> None:
        self._reset(initial_rows)

    def _reset(self, initial_rows: int) -> None:
        """An empty mirror reserving `initial_rows` rows (see the class docstring)."""
        initial_rows = max(1, int(initial_rows))
        self.rows = np.zeros(initial_rows, HOT_DTYPE)
        self.live = np.zeros(initial_rows, bool)
        self._blobs = _Blobs(initial_rows)
        self._high = 0  # rows below were handed out at least once
        self._free = np.zeros(0, np.int64)  # freed rows, reused first (a stack)
        self._n_free = 0
        self._new_index(16)
        self.count = 0
        self.dump_seq = np.uint64(1)

    @staticmethod
    def index_slots(flows: int) -> int:
        """Index slots after a rebuild for `flows` keys (a power of two, at most half full)."""
        size = 16
        while flows > size // 2:
            size <<= 1
        return size

    @staticmethod
    def resident_bytes(flows: int) -> int:
        """In-memory bytes of a mirror of `flows` ukeys whose blobs have spilled: rows, live
        flags and the hash index (an estimate for planning a run)."""
        slot = 1 + 5 * 8 + 1 + 8  # i_used, i_key, i_proto, i_row
        return int(flows * (HOT_DTYPE.itemsize + 1) + FlowMirror.index_slots(flows) * slot)

    @property
    def blobs(self) -> np.ndarray:
        """The write-once part of each record (BLOB_DTYPE), row for row with `rows`."""
        return self._blobs.arr

    @property
    def spilled(self) -> bool:
        """Blobs are in a disk-backed map (see SPILL_ABOVE_BYTES)."""
        return self._blobs.spilled

    def _new_index(self, size: int) -> None:
        self.index = KeyIndex(size)
        self.i_row = np.full(size, -1, np.int64)
        self.tombstones = 0

    def keys_of(self, rows: npt.NDArray[np.int64]) -> FlowKeys:
        """The directed flow keys stored in these rows (gathered field by field)."""
        r = self.rows
        return FlowKeys(*(np.ascontiguousarray(r[f][rows]) for f in _KEY_FIELDS))

    # ---- index ---------------------------------------------------------------------------
    def lookup(self, keys: Any) -> npt.NDArray[np.int64]:
        """Row of each key (FlowKeys or records with key fields), -1 when not mirrored."""
        slot = self.index.lookup(*_canon(keys))
        return np.where(slot >= 0, self.i_row[np.maximum(slot, 0)], -1)

    def _reindex(self, size: int) -> None:
        rows = np.flatnonzero(self.live)
        self._new_index(0)  # the old index is freed before the new one is built
        self._new_index(size)
        for s in range(0, len(rows), _REINDEX_CHUNK):
            part = rows[s : s + _REINDEX_CHUNK]
            _, slot, _ = self.index.insert(*_canon(self.keys_of(part)))
            self.i_row[slot] = part

    def _index_room(self, n: int) -> None:
        """Grow (or clean) the index so that `n` more keys keep it under INDEX_MAX_LOAD."""
        if self.count + n + self.tombstones > INDEX_MAX_LOAD * len(self.index):
            self._reindex(max(self.index_slots(self.count + n), len(self.index)))

    def _alloc(self, n: int) -> npt.NDArray[np.int64]:
        """n row numbers: freed rows first, then rows never used (growing the arrays past
        the reservation by half again when needed)."""
        take = min(n, self._n_free)
        got = self._free[self._n_free - take : self._n_free][::-1].copy()
        self._n_free -= take
        rest = n - take
        if rest:
            cap = len(self.rows)
            if self._high + rest > cap:
                new = max(self._high + rest, cap + cap // 2)
                # realloc in place (new rows zeroed); no view of the arrays outlives a call
                self.rows.resize(new, refcheck=False)
                self.live.resize(new, refcheck=False)
                self._blobs.resize(new)
            got = np.concatenate([got, np.arange(self._high, self._high + rest, dtype=np.int64)])
            self._high += rest
        return got

    # ---- records -------------------------------------------------------------------------
    def add(self, keys: FlowKeys, *, reval_seq: int, **cols: npt.ArrayLike) -> None:
        """Create the ukeys of flows just installed (a key already mirrored is refreshed);
        `cols`: action_orig, action_reply, eni_scope, vpc_scope, aux, now_ns."""
        action_orig, action_reply = cols["action_orig"], cols["action_reply"]
        eni_scope, vpc_scope, aux, now_ns = (cols[k] for k in ("eni_scope", "vpc_scope", "aux",
                                                               "now_ns"))  # fmt: skip
        n = len(keys)
        if not n:
            return
        if n > _ADD_CHUNK:  # bounded temporaries (a recovery adopts a whole table)
            full = {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in cols.items()}
            for s in range(0, n, _ADD_CHUNK):
                sl = np.arange(s, min(n, s + _ADD_CHUNK))
                self.add(keys.take(sl), reval_seq=reval_seq, **{k: v[sl] for k, v in full.items()})
            return
        self._index_room(n)
        h, w, p = _canon(keys)
        st, slot, _ = self.index.insert(h, w, p)
        new = st == keyindex.OK
        fresh = self._alloc(int(new.sum()))
        self.i_row[slot[new]] = fresh
        rows = self.i_row[slot]  # a key repeated in the batch refreshes its one row
        self.live[fresh] = True
        self.count += len(fresh)
        rec = np.zeros(n, HOT_DTYPE)  # built column by column, then stored row by row
        for f in _KEY_FIELDS:
            rec[f] = getattr(keys, f)
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
        blob = np.zeros(n, BLOB_DTYPE)
        blob["ufid"][:, 0] = h
        blob["ufid"][:, 1] = key_hash(canonicalize(keys), seed=0x0F1D_0F1D_0F1D_0F1D)
        blob["mask_nl"][:, :41] = 0xFF  # exact match on the explicit key fields
        self.blobs[rows] = blob

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
        """Sweep these rows' ukeys (their blobs are left to be overwritten on reuse)."""
        rows = np.unique(rows[rows >= 0])
        rows = rows[self.live[rows]]
        if not len(rows):
            return
        slot = self.index.lookup(*_canon(self.keys_of(rows)))
        slot = slot[slot >= 0]
        self.index.forget(slot)
        self.i_row[slot] = -1
        self.tombstones += len(slot)
        self.live[rows] = False
        self.rows[rows] = np.zeros(1, HOT_DTYPE)
        need = self._n_free + len(rows)
        if need > len(self._free):
            grow = max(need, 2 * len(self._free)) - len(self._free)
            self._free = np.concatenate([self._free, np.zeros(grow, np.int64)])
        self._free[self._n_free : need] = rows
        self._n_free = need
        self.count -= len(rows)
        if self.tombstones > len(self.index) // 4:
            self._reindex(len(self.index))

    def free(self) -> None:
        """Drop every record and the index (the process holding the mirror is gone)."""
        self._reset(1)

    def remove(self, keys: Any) -> None:
        self.remove_rows(self.lookup(keys))

    def live_rows(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.live[: self._high])

    @property
    def live_nbytes(self) -> int:
        """Measured bytes: live records plus the hash index (allocated, as OVS's cmap)."""
        return int(self.count * UKEY_DTYPE.itemsize + self.index.nbytes + self.i_row.nbytes)

    @property
    def allocated_nbytes(self) -> int:
        """Bytes of the rows handed out so far (reserved, never-used rows take no memory),
        the free list and the index."""
        return int(self._high * (UKEY_DTYPE.itemsize + 1) + self._free.nbytes
                   + self.index.nbytes + self.i_row.nbytes)  # fmt: skip


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
    "BLOB_DTYPE",
    "HOT_DTYPE",
    "INDEX_MAX_LOAD",
    "NL_ACTIONS_BYTES",
    "NL_KEY_REST_BYTES",
    "NL_MASK_BYTES",
    "OVS_UKEY_BYTES",
    "SPILL_ABOVE_BYTES",
    "UKEY_DTYPE",
    "FlowMirror",
    "MirroredEngine",
]
