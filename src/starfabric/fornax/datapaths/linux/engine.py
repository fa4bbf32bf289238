"""LinuxEngine: the SessionEngine contract over the Linux kernel's session table.

The "NIC" is the nic namespace of a Lab (netns.py): sessions are nf_conntrack entries created,
changed, read and removed through ctnetlink (ctnetlink.py), the version snapshots and scopes
live in the entry's ct mark and the actions and aux in its ct labels (marks.py), the packet
path is nf_conntrack plus the engine's nftables table (pipeline.py) on real packets the sender
(sender.py) writes into the lab, the per-packet outcomes come back over NFLOG (nflog.py) and
the event ring is the ctnetlink DESTROY multicast group (events.py).

Contract operation      kernel mechanism
insert                  IPCTNL_MSG_CT_NEW (create, NLM_F_EXCL): tuples, zone, mark, labels,
                        timeout, TCP state
delete / modify / query IPCTNL_MSG_CT_DELETE / CT_NEW (update) / CT_GET, by tuple and zone
dump                    IPCTNL_MSG_CT_GET with NLM_F_DUMP (a snapshot, walked by cursor)
bump_version            one nft transaction swapping the scope's snapshot ids in set `fresh`
process                 real frames -> nic; verdict chain; NFLOG gives each packet's verdict
events / poll_events    DESTROY multicast (AGED: timer, CLOSED: TCP teardown or RST kill),
                        VERSION_MISMATCH from the verdict log, RING_OVERFLOW from ENOBUFS
scrub                   the kernel ages by itself (its gc worker); scrub walks the table
                        (a dump evicts every expired entry it passes) and collects events
counters                the engine's own, from the statuses and verdicts it saw

What the kernel cannot express is KERNEL_DIFFERENCES (and the conformance suite skips exactly
those names for this engine)."""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError
from starfabric.fornax.datapaths.linux.ctnetlink import PROTO_GRE, CtSocket, Key
from starfabric.fornax.datapaths.linux.events import EventSocket
from starfabric.fornax.datapaths.linux.marks import (
    COMBO_MASK,
    DROP_ORIG_BIT,
    DROP_REPLY_BIT,
    MISMATCH_BIT,
    ScopeMarks,
    labels_of,
    mark_of,
    split_labels,
)
from starfabric.fornax.datapaths.linux.netns import Lab, LabConfig
from starfabric.fornax.datapaths.linux.nflog import NflogSocket
from starfabric.fornax.datapaths.linux.pipeline import NFLOG_GROUP, Pipeline
from starfabric.fornax.datapaths.linux.records import (
    entry_records,
    event_records,
    key_rows,
    row_keys,
    status_of_meta,
    track_meta,
)
from starfabric.fornax.datapaths.linux.sender import Sender, SeqState, build_frames
from starfabric.fornax.datapaths.linux.sidetable import SideTable
from starfabric.fornax.engine.config import EngineConfig
from starfabric.fornax.engine.interface import (
    ENTRY_DTYPE,
    EVENT_DTYPE,
    N_COUNTERS,
    ContractDifferences,
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
)
from starfabric.fornax.engine.tcp import TcpState
from starfabric.fornax.keys import canonicalize, canonicalize_columns
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP, PacketBatch

_CLOCK = (
    "the kernel ages entries on its own clock (jiffies; whole seconds through "
    "ctnetlink), not the packets' clock: scrub(now_ns) reaps what the kernel has expired "
    "by then (a dump evicts every expired entry it walks), it cannot move time forward"
)
_FRAMES = (
    "the kernel counts the real frames the sender writes (headers + a 12-byte id "
    "payload, sender.py), not the workload's `length`"
)
_TRACK = (
    "the TCP window words (td_end, td_maxwin, ...) never leave the kernel through "
    "ctnetlink: word 0 holds the TCP state, the rest 0; insert/modify(track=) apply "
    "its TCP state only"
)
_STALE = (
    "ct mark is read after nf_conntrack_in, which already ran the tracker on the "
    "packet: a STALE packet is not forwarded, but may have moved the TCP state and set "
    "SEEN_REPLY/ASSURED"
)
#: Where the kernel differs from the contract, with why (the conformance suite leaves out
#: exactly these for LinuxEngine, on top of the ENGINE_SPECIFIC_* names).
DIFFERENCES = ContractDifferences(
    fields={
        "entry.last_seen_ns": "nf_conntrack keeps no last-seen time, only a deadline (0 here)",
        "entry.expires_ns": _CLOCK,
        "entry.remaining_ns": _CLOCK,
        "entry.track": _TRACK,
        "entry.bytes_orig": _FRAMES,
        "entry.bytes_reply": _FRAMES,
        "entry.pkts_orig": "a packet conntrack calls INVALID is not counted in the entry",
        "entry.pkts_reply": "a packet conntrack calls INVALID is not counted in the entry",
        "entry.flags": _STALE,
        "entry.tcp_state": _STALE,
        "event.tcp_state": _STALE,
        "event.time_ns": "the engine's latest time when it read the kernel's event",
        "event.bytes_orig": _FRAMES,
        "event.bytes_reply": _FRAMES,
        "event.pkts_orig": "as entry.pkts_orig",
        "event.pkts_reply": "as entry.pkts_reply",
        "event.flags": "as entry.flags",
        "process.tcp_state": "the verdict log carries no conntrack state on kernels without "
        "CONFIG_NETFILTER_NETLINK_GLUE_CT: the state read after the batch, for every packet "
        "of the batch's connection",
        "process.reason": "TCP_IGNORED is invisible outside nf_conntrack (an ignored segment is "
        "accepted unchanged: HIT with reason NONE)",
        "process.verdict": "as process.reason",
        "counters.bytes_forwarded": _FRAMES,
        "counters.tcp_ignored": "as process.reason",
        "counters.tcp_invalid": "as process.reason",
        "counters.hit": "a STALE packet that conntrack calls INVALID is judged stale here",
        "counters.aged": _CLOCK,
        "counters.closed": _CLOCK,
        "counters.events_raised": _CLOCK,
    },
    clock="kernel",
    random="random histories draw packets on STALE sessions after a bump, and the kernel's "
    "tracker runs before nft sees the stale mark: a RST there ends the session in the kernel "
    "(CLOSED, CT_KILLED) where the NIC reports STALE and keeps it (entry.flags reason); "
    "histories without that conform on their prefix before any aging",
    protocols={
        PROTO_GRE: "the kernel's GRE tracker keys GRE by its key / PPTP call id (0 for the "
        "lab's frames), not by ports, and an entry created through ctnetlink has a zero GRE "
        "timeout (gre_new never ran): it dies on its first packet",
    },
    table="foreign",
)
#: The same, in words, for docs and reports.
KERNEL_DIFFERENCES: dict[str, str] = {
    **DIFFERENCES.fields,
    "ECC": "no ECC-protected records: no FAULT outcome, ECC_* events or OP_ECC_FAULT; "
    "flip_bits refuses (patrol and failover cover lost entries instead)",
    "ports": "no ports or pipeline watchdog: no PORT_HUNG, PIPELINE_HANG; stall_port refuses",
    "RING_OVERFLOW.detail": "ENOBUFS says events were lost, not how many: detail = 0, "
    "events_lost counts overflows",
    "RING_OVERFLOW.time": "ENOBUFS comes on the first read after the loss; the emulated ring "
    "writes its overflow marker when a poll frees a slot, so software reads the NIC's one "
    "poll later (a chaos run's ring_overflow detect_s is one tick shorter on Linux)",
    "RING_OVERFLOW.bursts": "the kernel ages in bursts (a reap walk or its gc pass evicts "
    "every expired entry at once), so a socket buffer sized like the NIC's ring "
    "(run/datapath.EVENT_MSG_BYTES per record) also overflows with the poller running; "
    "each overflow triggers the same dump-based patrol",
    "table_full": "the kernel's nf_conntrack_max is shared by all namespaces; the engine "
    "refuses inserts at EngineConfig.capacity itself (TABLE_FULL, never INSERT_FAILED)",
    "generic": "protocols other than TCP/UDP/ICMP/ICMPv6 keep no ports in the kernel's key",
    "invalid_on_wire": "under invalid_policy forward a TCP_INVALID packet is reported HIT "
    "(the contract) but dropped on the wire: nft sees no entry on any packet conntrack calls "
    "invalid, so it cannot tell it from conntrack's 'invalid new' (a lone FIN/RST with no "
    "session), which must not leave",
    **{f"protocol {p}": why for p, why in DIFFERENCES.protocols.items()},
}

#: Receive buffer of the event socket (bytes): the ring's bound. Assumption: 4 MiB holds the
#: DESTROY messages (~250 bytes each) of ~16k sessions between two polls.
EVENT_RCVBUF = 4 << 20
#: How long process() waits for the last verdict of a batch (seconds) before counting the
#: missing ones as lost frames (assumption: a veth hop takes microseconds).
VERDICT_WAIT_S = 0.5
_NS = 1_000_000_000
#: The capture after a batch stops when no frame arrived for this long (seconds; assumption:
#: a forwarded frame crosses the two veth hops in well under a millisecond).
CAPTURE_QUIET_S = 0.002
#: Least wall time between two reaping walks of scrub (seconds; assumption: the kernel's own
#: gc worker evicts expired entries too, the walk only bounds how late an AGED event comes,
#: and it costs a few ms whatever the table holds).
REAP_INTERVAL_S = 0.25
#: query/slot_of with at least this many keys, and at least 1/QUERY_DUMP_RATIO of the table's
#: entries, read the table with one dump instead of a GET per key (assumption: a GET costs
#: ~0.1 ms in the kernel and syscall, a dumped entry ~20 us to parse).
QUERY_DUMP_MIN_KEYS = 32
QUERY_DUMP_RATIO = 4
#: Side-table slots per table entry (a power of two): the index also numbers the connections
#: packets open before the manager inserts them, and open addressing wants room (assumption).
SIDE_SLOTS_PER_ENTRY = 2


def _timeout_s(cfg: EngineConfig, proto: int, tcp_state: int) -> int:
    """The kernel's timeout for a new entry of this class, in whole seconds."""
    t = cfg.timeouts_ns()
    if proto == PROTO_TCP:
        ns = int(t[min(tcp_state, 9)])
    elif proto == PROTO_UDP:
        ns = int(t[10])
    elif proto in (PROTO_ICMP, PROTO_ICMPV6):
        ns = int(t[12])
    else:
        ns = int(t[13])
    return max(1, math.ceil(ns / _NS))


def _undirected(row: dict[str, int]) -> tuple[int, ...]:
    """A kernel row's key, the same whichever end is the source."""
    a = (row["src_hi"], row["src_lo"], row["sport"])
    b = (row["dst_hi"], row["dst_lo"], row["dport"])
    return (row["zone"], row["proto"], *min(a, b), *max(a, b))


def _undirected_key(key: Key) -> tuple[int, ...]:
    z, proto, sh, sl, dh, dl, sp, dp = key
    a, b = (sh, sl, sp), (dh, dl, dp)
    return (z, proto, *min(a, b), *max(a, b))


def _session_keys(batch: PacketBatch, idx: npt.NDArray[np.int64]) -> FlowKeys:
    """Directed keys of the sessions packets `idx` belong to: a packet's own tuple, and for
    an ICMP error the tuple of the packet it quotes (conntrack makes it RELATED to that
    session, nf_conntrack_inet_error)."""
    b = batch.take(idx)
    err = (b.inner_proto != 0) & np.isin(b.proto, (PROTO_ICMP, PROTO_ICMPV6))
    cols = {f: np.where(err, getattr(b, "inner_" + f), getattr(b, f))
            for f in ("src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")}  # fmt: skip
    return FlowKeys.from_columns(vni=b.vni, proto=np.where(err, b.inner_proto, b.proto), **cols)


class LinuxEngine(SessionEngine):
    """The contract over nf_conntrack in a Lab's nic namespace (see the module doc)."""

    differences = DIFFERENCES

    def __init__(self, config: EngineConfig, lab: Lab | None = None, *,
                 event_rcvbuf: int = EVENT_RCVBUF, min_timeout_s: int = 0,
                 pace: bool = False) -> None:  # fmt: skip
        """`min_timeout_s` raises every kernel timeout to at least this (a test whose histories
        run on the packets' clock keeps a loaded host's real seconds from aging entries).
        `pace`: hold each batch (and scrub) until the wall clock since the first one has
        caught up with the packets' clock, so the kernel ages entries on (about) the packets'
        time; when the host cannot keep up, `wire["behind_max_s"]` says by how much."""
        self.config = config
        self.min_timeout_s = min_timeout_s
        self.pace = pace
        self._clock0: tuple[float, int] | None = None
        self._own_lab = lab is None
        self.lab = lab if lab is not None else Lab(LabConfig.from_engine(config)).__enter__()
        try:
            self._open(event_rcvbuf)
        except BaseException:
            self.close()
            raise

    def _open(self, event_rcvbuf: int) -> None:
        lab = self.lab
        nic = lab.worker
        sysctls = {
            k: max(v, self.min_timeout_s) if "timeout" in k else v
            for k, v in LabConfig.from_engine(self.config).conntrack.items()
        }
        sysctls.update(nf_conntrack_acct=1, nf_conntrack_events=1)
        for name, val in sysctls.items():
            lab.sysctl(f"net.netfilter.{name}", val)
        self.pipeline = Pipeline(lab)
        self.ct = CtSocket(nic)
        self.ct.flush()  # a lab reused by a new engine starts with an empty table
        self.events = EventSocket(nic, event_rcvbuf)
        self.nflog = NflogSocket(nic, NFLOG_GROUP)
        self.sender = Sender(lab)
        self.marks = ScopeMarks(self.config.eni_scopes, self.config.vpc_scopes)
        self._zone: dict[int, int] = {}
        self._zone_vni = np.zeros(1, np.uint32)  # zone 0: no VNI
        self.side = SideTable(SIDE_SLOTS_PER_ENTRY * (1 << (self.config.capacity - 1).bit_length()))
        self._seq = SeqState()
        self._next_id = 0
        self._ctr = np.zeros(N_COUNTERS, np.int64)
        self._ring: list[np.ndarray] = []
        self._deleted: dict[tuple[int, ...], int] = {}  # our deletes whose DESTROY is pending
        self._count = 0
        self._dump: list[dict[str, int]] = []
        self.latest_ns = 0
        self.last_forwarded = np.zeros(0, np.bool_)
        self.lost_frames = 0
        self._epoch = 0  # bumped by anything that may change the table (see _snapshot)
        self._snap: tuple[int, list[dict[str, int]]] | None = None
        self._last_reap = -math.inf
        self._events_held = False
        #: what the wire showed, summed over batches (see _check_wire)
        self.wire: dict[str, float] = {"frames": 0, "lost": 0, "forwarded": 0,
                                       "passed_not_seen": 0, "misforwarded": 0,
                                       "behind_max_s": 0.0}  # fmt: skip
        self._last_pulled: tuple[list[dict[str, int]], np.ndarray] = ([], np.zeros(0, EVENT_DTYPE))
        self._closed = False

    # ---- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        if getattr(self, "_closed", True) and not self._own_lab:
            return
        self._closed = True
        for part in ("sender", "nflog", "events", "ct", "pipeline"):
            obj = getattr(self, part, None)
            if obj is not None:
                with contextlib.suppress(OSError):
                    obj.close()
        if self._own_lab:
            self.lab.close()

    def __enter__(self) -> LinuxEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- helpers ---------------------------------------------------------------------------
    def _zones(self, vni: npt.NDArray[np.uint32]) -> list[int]:
        """The zone of each VNI, interning new ones (one nft transaction for all new)."""
        new: dict[int, int] = {}
        out = []
        for v in vni.tolist():
            z = self._zone.get(v)
            if z is None:
                z = len(self._zone) + 1
                if z > 0xFFFF:
                    raise ConfigError(f"more than 65535 VNIs on one Linux datapath (VNI {v})",
                                      fix="split the tenants over several labs")  # fmt: skip
                self._zone[v] = new[v] = z
            out.append(z)
        if new:
            self.pipeline.add_zones(new)
            grow = np.zeros(len(self._zone) + 1, np.uint32)
            grow[: len(self._zone_vni)] = self._zone_vni
            for v, z in new.items():
                grow[z] = v
            self._zone_vni = grow
        return out

    def _rows(self, keys: FlowKeys) -> list[dict[str, int] | None]:
        """The kernel's row of each key (either orientation), None where absent: one GET per
        key, or, for many keys against a small table, one dump matched on canonical keys."""
        n = len(keys)
        if n < QUERY_DUMP_MIN_KEYS or n * QUERY_DUMP_RATIO < self._count:
            return [self.ct.get(key) for key in self._keys(keys)]
        self._zones(keys.vni)
        table = self._snapshot()
        out: list[dict[str, int] | None] = [None] * n
        if not table:
            return out
        tw = canonicalize(row_keys(table, self._zone_vni))
        at = {(*w, p): i for i, (w, p) in enumerate(zip(map(tuple, tw.words().tolist()),
                                                        tw.proto.tolist(), strict=True))}  # fmt: skip
        qw = canonicalize(keys)
        for i, (w, p) in enumerate(zip(map(tuple, qw.words().tolist()), qw.proto.tolist(),
                                       strict=True)):  # fmt: skip
            j = at.get((*w, p))
            if j is not None:
                out[i] = table[j]
        return out

    def _snapshot(self) -> list[dict[str, int]]:
        """The table from one dump, reused while nothing could have changed it (no packet,
        op or kernel event since): a patrol's dump and its query of the same keys cost one
        kernel walk (a walk visits every bucket of the shared hash table: milliseconds)."""
        if self._snap is None or self._snap[0] != self._epoch:
            self._snap = (self._epoch, sorted(self.ct.dump(), key=lambda r: r["id"]))
        return self._snap[1]

    def _hold(self, t_ns: int) -> None:
        """Pacing: wait until the wall clock reaches the packets' time t_ns (see __init__)."""
        if not self.pace:
            return
        now = time.monotonic()
        if self._clock0 is None:
            self._clock0 = (now, t_ns)
            return
        wait = self._clock0[0] + (t_ns - self._clock0[1]) / _NS - now
        if wait > 0:
            time.sleep(wait)
        else:
            self.wire["behind_max_s"] = max(self.wire["behind_max_s"], -wait)

    def _keys(self, keys: FlowKeys) -> list[Key]:
        return key_rows(keys, self._zones(keys.vni))

    def _combo(self, e: int, v: int, ev: int, vv: int, fresh_add: list[int]) -> int:
        cid, joins = self.marks.intern(e, v, ev, vv)
        if joins:
            fresh_add.append(cid)
        return cid

    def _states(self, rows: list[dict[str, int]]) -> np.ndarray:
        """The TCP-state field of kernel rows: the kernel's for TCP, the one software gave at
        insert/modify for other protocols (the kernel has none; the side table keeps it)."""
        st = np.array([r["tcp_state"] for r in rows], np.uint8)
        other = np.array([r["proto"] != PROTO_TCP for r in rows], np.bool_)
        if other.any():
            idx = np.flatnonzero(other)
            sl = self.side.slots(canonicalize(row_keys([rows[i] for i in idx], self._zone_vni)),
                                 add=False)  # fmt: skip
            st[idx] = np.where(sl >= 0, self.side.state[np.maximum(sl, 0)], 0)
        return st

    def _entries(self, rows: list[dict[str, int]], now_ns: int) -> np.ndarray:
        rec = entry_records(rows, self.marks, self._zone_vni, now_ns)
        if rows:
            rec["tcp_state"] = self._states(rows)
            rec["track"][:, 0] = track_meta(rec["proto"], rec["tcp_state"], rec["flags"])
        return rec

    def _event(self, typ: EventType, rows: list[dict[str, int]], detail: int = 0) -> None:
        rec = event_records(rows, [int(typ)] * len(rows), self.marks, self._zone_vni,
                            self.latest_ns)  # fmt: skip
        if not rows:
            rec = np.zeros(1, EVENT_DTYPE)
            rec["type"], rec["time_ns"], rec["detail"] = int(typ), self.latest_ns, detail
        self._ring.append(rec)
        self._ctr[Counter.EVENTS_RAISED] += len(rec)

    @staticmethod
    def _tuple_key(row: dict[str, int]) -> tuple[int, ...]:
        return (row["zone"], row["proto"], row["src_hi"], row["src_lo"], row["dst_hi"],
                row["dst_lo"], row["sport"], row["dport"])  # fmt: skip

    def hold_events(self, held: bool) -> None:
        """A stuck event poller (chaos run): while held, nothing reads the event socket, so
        the kernel queues DESTROY messages in its receive buffer and drops them once it is
        full; the first read after release fails with ENOBUFS (RING_OVERFLOW). Packets keep
        flowing; a kill or reopen in a batch meanwhile is not recognised in that batch."""
        self._events_held = held

    def _pull(self) -> int:
        """Move the kernel's DESTROY events into the ring; returns AGED + CLOSED raised."""
        if self._events_held:
            self._last_pulled = ([], np.zeros(0, EVENT_DTYPE))
            return 0
        rows, overflow = self.events.read()
        if rows or overflow:
            self._epoch += 1
        if overflow:
            self._ctr[Counter.EVENTS_LOST] += overflow
            self._ctr[Counter.RING_OVERFLOW] += 1
            self._event(EventType.RING_OVERFLOW, [], 0)
        mine = []
        for r in rows:
            k = self._tuple_key(r)
            left = self._deleted.get(k, 0)
            if left:
                if left == 1:
                    del self._deleted[k]
                else:
                    self._deleted[k] = left - 1
                continue
            mine.append(r)
        if overflow:  # a DESTROY of our own delete not read by now was one the kernel dropped
            self._deleted.clear()
        self._last_pulled = ([], np.zeros(0, EVENT_DTYPE))
        if not mine:
            return 0
        closed = [r["tcp_state"] in (TcpState.TIME_WAIT, TcpState.CLOSE) and r["proto"] == PROTO_TCP
                  for r in mine]  # fmt: skip
        types = [int(EventType.CLOSED if c else EventType.AGED) for c in closed]
        rec = event_records(mine, types, self.marks, self._zone_vni, self.latest_ns)
        # DESTROY carries no ct labels: aux and actions from the side table
        sl = self.side.slots(canonicalize(row_keys(mine, self._zone_vni)), add=False)
        have = sl >= 0
        rec["aux"][have] = self.side.aux[sl[have]]
        rec["action_orig"][have] = self.side.act[sl[have], 0]
        rec["action_reply"][have] = self.side.act[sl[have], 1]
        other = have & (rec["proto"] != PROTO_TCP)
        rec["tcp_state"][other] = self.side.state[sl[other]]
        self.side.forget(sl)
        self._ring.append(rec)
        self._last_pulled = (mine, rec)
        n_closed = sum(closed)
        self._ctr[Counter.CLOSED] += n_closed
        self._ctr[Counter.AGED] += len(mine) - n_closed
        self._ctr[Counter.EVENTS_RAISED] += len(mine)
        self._count = max(0, self._count - len(mine))
        return len(mine)

    # ---- packet path -----------------------------------------------------------------------
    def _quoted_slots(self, batch: PacketBatch) -> npt.NDArray[np.int64]:
        """Per packet, the side-table slot (the sender's connection id) of the session an
        ICMP error's quoted packet belongs to; -1 for other packets and unknown sessions."""
        out = np.full(len(batch), -1, np.int64)
        err = np.flatnonzero((batch.inner_proto != 0)
                             & np.isin(batch.proto, (PROTO_ICMP, PROTO_ICMPV6)))  # fmt: skip
        if len(err):
            b = batch.take(err)
            qk = canonicalize_columns(b.vni, b.inner_proto, b.inner_src_hi, b.inner_src_lo,
                                      b.inner_dst_hi, b.inner_dst_lo, b.inner_sport,
                                      b.inner_dport)  # fmt: skip
            out[err] = self.side.slots(qk, add=False)
        return out

    def process(self, batch: PacketBatch) -> ProcessResult:
        n = len(batch)
        self._epoch += 1
        outcome = np.full(n, Outcome.MISS, np.uint8)
        reason = np.full(n, Reason.NO_ENTRY, np.uint8)
        reply = np.full(n, 255, np.uint8)
        action = np.zeros(n, np.uint32)
        slot = np.full(n, -1, np.int64)
        tcp_state = np.zeros(n, np.uint8)
        verdict = np.full(n, 255, np.uint8)
        ck = canonicalize(batch)
        self.last_forwarded = np.zeros(n, np.bool_)
        if n == 0:
            return ProcessResult(outcome, reason, ck.direction, reply, action, slot, tcp_state,
                                 verdict)  # fmt: skip
        self._hold(int(batch.time_ns[0]))
        self._pull()
        self.latest_ns = max(self.latest_ns, int(batch.time_ns.max()))
        self._zones(batch.vni)
        conn = self.side.slots(ck)
        conn = np.where(conn >= 0, conn, 0)
        ids = np.arange(self._next_id, self._next_id + n, dtype=np.uint64)
        self._next_id += n
        frames = build_frames(batch, ck.direction.astype(np.bool_), self.sender.macs, ids=ids,
                              conn=conn, seq_state=self._seq,
                              quote_conn=self._quoted_slots(batch))  # fmt: skip
        self.sender.send(frames)
        v = self.nflog.read(n, VERDICT_WAIT_S)
        self.last_forwarded = self.sender.capture(CAPTURE_QUIET_S).forwarded(frames)
        pos = v.pid - int(ids[0])
        ok = (pos >= 0) & (pos < n)
        pos = pos[ok]
        letter = np.full(n, ord("?"), np.uint8)
        letter[pos] = v.letter[ok]
        self.lost_frames += int(n - len(pos))
        has = v.reply[ok] != 255
        reply[pos[has]] = v.reply[ok][has]
        slot[pos[has]] = v.ct_id[ok][has] & 0x7FFF_FFFF
        H, D, S, V, inv = (ord(c) for c in "HDSVI")
        tracked = np.flatnonzero(np.isin(letter, [H, D, S, V, inv]))
        # one look-up per connection the batch touched: state after the batch, actions, combo
        _, first = np.unique(conn[tracked], return_index=True)
        fk = _session_keys(batch, tracked[first])
        rows = {}
        for j, key, row in zip(tracked[first].tolist(), self._keys(fk), self._rows(fk),
                               strict=True):  # fmt: skip
            rows[int(conn[j])] = (row, key)
        drop_inv = self.config.invalid_policy == "drop"
        self._pull()  # entries the batch ended (a RST as the only reply: CT_KILLED)
        gone_rows, gone_rec = self._last_pulled
        gone = {_undirected(r): k for k, r in enumerate(gone_rows)}
        # the packet that ended a session the batch ended: its first accepted RST, else its
        # last tracked packet; the session's later packets met no entry
        killer = {int(conn[j]): j for j in tracked.tolist()}
        for j in reversed(tracked.tolist()):
            if letter[j] in (H, D) and batch.proto[j] == PROTO_TCP and batch.tcp_flags[j] & 0x04:
                killer[int(conn[j])] = j
        first_miss: dict[int, int] = {}
        for j in np.flatnonzero(letter == ord("M")).tolist():
            first_miss.setdefault(int(conn[j]), j)
        for j in tracked.tolist():
            row, key = rows[int(conn[j])]
            lt = int(letter[j])
            if row is None:
                k = gone.get(_undirected_key(key))
                after_reopen = first_miss.get(int(conn[j]), n) < j
                after_kill = k is not None and killer[int(conn[j])] < j
                if (k is None or after_reopen or after_kill) and lt == inv:  # "invalid new"
                    reply[j], slot[j] = 255, -1
                    continue
                outcome[j], reason[j] = (Outcome.HIT, Reason.NONE) if lt in (H, inv) else (
                    Outcome.DROP_HW, Reason.DROP_ACTION) if lt == D else (
                    Outcome.STALE, Reason.ENI_VERSION)  # fmt: skip
                if k is None:
                    continue
                g = gone_rows[k]
                ao, ar = int(gone_rec["action_orig"][k]), int(gone_rec["action_reply"][k])
                verdict[j] = 0
                if lt == inv:  # INVALID on the entry the batch then ended
                    same = (int(batch.src_hi[j]), int(batch.src_lo[j]), int(batch.sport[j])) == (
                        g["src_hi"], g["src_lo"], g["wire_sport"])  # fmt: skip
                    reply[j], slot[j] = (0 if same else 1), g["id"] & 0x7FFF_FFFF
                    reason[j], verdict[j] = Reason.TCP_INVALID, 2
                    if self.config.invalid_policy == "drop":
                        outcome[j] = Outcome.DROP_HW
                action[j] = ao if int(reply[j]) == 0 else ar
                if killer[int(conn[j])] == j and g["tcp_state"] == TcpState.CLOSE:
                    reason[j], verdict[j], tcp_state[j] = Reason.CT_KILLED, 4, TcpState.CLOSE
                    slot[j] = -1
                    gone_rec["reason"][k] = Reason.CT_KILLED
                    gone_rec["port"][k] = batch.port[j]
                continue
            if lt == inv:
                same = (int(batch.src_hi[j]), int(batch.src_lo[j]), int(batch.sport[j])) == (
                    row["src_hi"], row["src_lo"], row["sport"])  # fmt: skip
                reply[j] = 0 if same else 1
                slot[j] = row["id"] & 0x7FFF_FFFF
            r = int(reply[j])
            _aux, ao, ar = split_labels(row["labels"])
            tcp_state[j] = row["tcp_state"]
            mark = row["mark"]
            if lt == inv and not self.marks.current(mark & COMBO_MASK):
                lt = V if not mark & MISMATCH_BIT else S  # stale is judged before tracking
                if lt == V:
                    self.ct.update(key, mark=mark | MISMATCH_BIT)
            if lt in (S, V):
                e, _vp, ev, _vv = self.marks.combo(mark & COMBO_MASK)
                eni_ok = int(self.marks.eni[e]) == ev
                outcome[j] = Outcome.STALE
                reason[j] = Reason.VPC_VERSION if eni_ok else Reason.ENI_VERSION
                if lt == V:
                    self._ctr[Counter.MISMATCH_EVENTS] += 1
                    self._event(EventType.VERSION_MISMATCH, [row])
                    ev_rec = self._ring[-1]
                    ev_rec["reason"], ev_rec["port"] = reason[j], batch.port[j]
                    ev_rec["tcp_state"] = self._states([row])[0]
                continue
            act = ao if r == 0 else ar
            action[j] = act
            verdict[j] = 2 if lt == inv else 0
            if lt == inv:
                drop_dir = mark & (DROP_ORIG_BIT if r == 0 else DROP_REPLY_BIT)
                dropped = drop_inv or bool(drop_dir)
                outcome[j] = Outcome.DROP_HW if dropped else Outcome.HIT
                reason[j] = Reason.TCP_INVALID
            elif lt == D:
                outcome[j], reason[j] = Outcome.DROP_HW, Reason.DROP_ACTION
            else:
                outcome[j], reason[j] = Outcome.HIT, Reason.NONE
        self._reopened(batch, letter, gone, gone_rows, gone_rec, reason, verdict)
        self._account(outcome, reason, batch)
        self._check_wire(outcome, letter)
        return ProcessResult(outcome, reason, ck.direction, reply, action, slot, tcp_state,
                             verdict)  # fmt: skip

    def _check_wire(self, outcome: np.ndarray, letter: np.ndarray) -> None:
        """What the capture at the far end says against the verdict log: a frame the pipeline
        passed that never came out, and a frame that came out although the pipeline dropped
        it (a misforward). (A HIT with reason TCP_INVALID is dropped on the wire: pipeline.py.)"""
        passed = (letter == ord("H")) | (letter == ord("U"))
        fwd = self.last_forwarded
        self.wire["frames"] += len(letter)
        self.wire["lost"] += int((letter == ord("?")).sum())
        self.wire["forwarded"] += int(fwd.sum())
        self.wire["passed_not_seen"] += int((passed & ~fwd).sum())
        self.wire["misforwarded"] += int((~passed & fwd).sum())

    def _reopened(self, batch: PacketBatch, letter: np.ndarray, gone: dict[tuple[int, ...], int],
                  gone_rows: list[dict[str, int]], gone_rec: np.ndarray, reason: np.ndarray,
                  verdict: np.ndarray) -> None:  # fmt: skip
        """A SYN that met a TIME_WAIT/CLOSE entry: the kernel killed the entry (its DESTROY
        arrived in this batch) and tracked the SYN as new (a MISS): the contract's TCP_REOPEN."""
        if not gone:
            return
        syn = np.flatnonzero((letter == ord("M")) & (batch.proto == PROTO_TCP)
                             & ((batch.tcp_flags & 0x12) == 0x02))  # fmt: skip
        if not len(syn):
            return
        keys = self._keys(FlowKeys.from_batch(batch).take(syn))
        for j, key in zip(syn.tolist(), keys, strict=True):
            k = gone.get(_undirected_key(key))
            if k is None or gone_rows[k]["tcp_state"] not in (TcpState.TIME_WAIT, TcpState.CLOSE):
                continue
            if gone_rec["reason"][k] in (Reason.TCP_REOPEN, Reason.CT_KILLED):
                continue  # reopened once already, or a RST of this batch ended it
            reason[j], verdict[j] = Reason.TCP_REOPEN, 3
            gone_rec["reason"][k] = Reason.TCP_REOPEN
            gone_rec["port"][k] = batch.port[j]
            gone_rec["type"][k] = EventType.CLOSED
            self._ctr[Counter.TCP_REOPEN] += 1

    def _account(self, outcome: np.ndarray, reason: np.ndarray, batch: PacketBatch) -> None:
        c = self._ctr
        c[Counter.PACKETS] += len(outcome)
        counts = np.bincount(outcome, minlength=len(Outcome))
        for o, ctr in ((Outcome.HIT, Counter.HIT), (Outcome.MISS, Counter.MISS),
                       (Outcome.STALE, Counter.STALE), (Outcome.DROP_HW, Counter.DROP_HW)):  # fmt: skip
            c[ctr] += int(counts[o])
        c[Counter.TCP_INVALID] += int((reason == Reason.TCP_INVALID).sum())
        hit = outcome == Outcome.HIT
        c[Counter.BYTES_FORWARDED] += int(batch.length[hit].astype(np.int64).sum())

    # ---- entry operations ------------------------------------------------------------------
    def insert(self, keys: FlowKeys, *, action_orig: npt.ArrayLike, action_reply: npt.ArrayLike,
               eni_scope: npt.ArrayLike, vpc_scope: npt.ArrayLike, eni_version: npt.ArrayLike,
               vpc_version: npt.ArrayLike, now_ns: npt.ArrayLike, tcp_state: npt.ArrayLike = 0,
               aux: npt.ArrayLike = 0, track: npt.ArrayLike | None = None
               ) -> npt.NDArray[np.uint8]:  # fmt: skip
        n = len(keys)
        a = {name: broadcast_arg(val, n, dt, name) for name, val, dt in (
            ("action_orig", action_orig, np.uint32), ("action_reply", action_reply, np.uint32),
            ("eni_scope", eni_scope, np.uint32), ("vpc_scope", vpc_scope, np.uint32),
            ("eni_version", eni_version, np.uint32), ("vpc_version", vpc_version, np.uint32),
            ("now_ns", now_ns, np.int64), ("tcp_state", tcp_state, np.uint8),
            ("aux", aux, np.uint64))}  # fmt: skip
        if track is not None:
            tr = np.asarray(track, np.uint64).reshape(n, 8)
            a["tcp_state"] = ((tr[:, 0] >> np.uint64(8)) & np.uint64(0xFF)).astype(np.uint8)
            a["status"] = status_of_meta(tr[:, 0])
        out = np.zeros(n, np.uint8)
        if n == 0:
            return out
        status = a.pop("status", None)
        self._epoch += 1
        self._pull()
        self.latest_ns = max(self.latest_ns, int(a["now_ns"].max()))
        krows = self._keys(keys)
        fresh: list[int] = []
        drop = self.config.drop_action
        cols = {k: v.tolist() for k, v in a.items()}
        plan: list[tuple[int, int] | None] = []
        for i in range(n):
            e, v = cols["eni_scope"][i], cols["vpc_scope"][i]
            if e >= self.config.eni_scopes or v >= self.config.vpc_scopes:
                plan.append(None)
                continue
            cid = self._combo(e, v, cols["eni_version"][i], cols["vpc_version"][i], fresh)
            ao, ar = cols["action_orig"][i], cols["action_reply"][i]
            plan.append((mark_of(cid, ao == drop, ar == drop), labels_of(cols["aux"][i], ao, ar)))
        self.pipeline.update_fresh(fresh, [])
        c = self._ctr
        send: list[tuple[int, tuple[int, int]]] = []  # (row, its (mark, labels))
        room = self.config.capacity - self._count
        for i, key in enumerate(krows):
            p = plan[i]
            if p is None:
                out[i] = Status.BAD_SCOPE
                c[Counter.INSERT_BAD_SCOPE] += 1
            elif len(send) >= room:
                out[i] = Status.TABLE_FULL
                c[Counter.INSERT_TABLE_FULL] += 1
                self._event(EventType.TABLE_FULL, [self._row_of(key, p)])
            else:
                send.append((i, p))
        items = []
        for i, p in send:
            ts = cols["tcp_state"][i]
            items.append((krows[i], p[0], p[1],
                          max(self.min_timeout_s, _timeout_s(self.config, krows[i][1], ts)), ts,
                          int(status[i]) if status is not None else 0))  # fmt: skip
        for (i, p), err in zip(send, self.ct.create_many(items), strict=True):
            if err == 0:
                out[i] = Status.OK
                c[Counter.INSERT_OK] += 1
                self._count += 1
            elif err == 17:  # EEXIST
                out[i] = Status.EXISTS
                c[Counter.INSERT_EXISTS] += 1
            else:
                out[i] = Status.INSERT_FAILED
                c[Counter.INSERT_FAILED] += 1
                self._event(EventType.INSERT_FAILED, [self._row_of(krows[i], p)])
        ok = out == Status.OK
        if ok.any():
            sl = np.full(n, -1, np.int64)
            sl[ok] = self.side.slots(canonicalize(keys.take(np.flatnonzero(ok))))
            self.side.put(sl, a["aux"], a["action_orig"], a["action_reply"], a["tcp_state"])
        return out

    @staticmethod
    def _row_of(key: Key, plan: tuple[int, int]) -> dict[str, int]:
        z, proto, sh, sl, dh, dl, sp, dp = key
        return {"zone": z, "proto": proto, "src_hi": sh, "src_lo": sl, "dst_hi": dh,
                "dst_lo": dl, "sport": sp, "dport": dp, "tcp_state": 0, "mark": plan[0],
                "labels": plan[1], "status": 0, "timeout": 0, "id": -1, "pkts_orig": 0,
                "pkts_reply": 0, "bytes_orig": 0, "bytes_reply": 0}  # fmt: skip

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        out = np.zeros(len(keys), np.uint8)
        self._epoch += 1
        self._pull()
        for i, key in enumerate(self._keys(keys)):
            row = self.ct.get(key)
            err = 2 if row is None else self.ct.delete(key)
            if err == 0 and row is not None:
                k = self._tuple_key(row)
                self._deleted[k] = self._deleted.get(k, 0) + 1
                out[i] = Status.OK
                self._ctr[Counter.DELETE_OK] += 1
                self._count = max(0, self._count - 1)
            else:
                out[i] = Status.NOT_FOUND
                self._ctr[Counter.DELETE_NOT_FOUND] += 1
        done = np.flatnonzero(out == Status.OK)
        if len(done):
            self.side.forget(self.side.slots(canonicalize(keys.take(done)), add=False))
        return out

    def modify(self, keys: FlowKeys, *, action_orig: npt.ArrayLike | None = None,
               action_reply: npt.ArrayLike | None = None, eni_version: npt.ArrayLike | None = None,
               vpc_version: npt.ArrayLike | None = None, aux: npt.ArrayLike | None = None,
               tcp_state: npt.ArrayLike | None = None, timeout_ns: npt.ArrayLike | None = None,
               track: npt.ArrayLike | None = None) -> npt.NDArray[np.uint8]:  # fmt: skip
        n = len(keys)
        given = {name: (None if val is None else broadcast_arg(val, n, dt, name).tolist())
                 for name, val, dt in (
                     ("action_orig", action_orig, np.uint32),
                     ("action_reply", action_reply, np.uint32),
                     ("eni_version", eni_version, np.uint32),
                     ("vpc_version", vpc_version, np.uint32), ("aux", aux, np.uint64),
                     ("tcp_state", tcp_state, np.uint8), ("timeout_ns", timeout_ns, np.int64))}  # fmt: skip
        if track is not None and given["tcp_state"] is None:
            tr = np.asarray(track, np.uint64).reshape(n, 8)
            given["tcp_state"] = (
                ((tr[:, 0] >> np.uint64(8)) & np.uint64(0xFF)).astype(np.uint8).tolist()
            )
        out = np.zeros(n, np.uint8)
        self._pull()
        drop = self.config.drop_action
        kept: list[tuple[int, int, int, int]] = []  # (i, aux, action_orig, action_reply)
        self._epoch += 1
        for i, key in enumerate(self._keys(keys)):
            row = self.ct.get(key)
            if row is None:
                out[i] = Status.NOT_FOUND
                self._ctr[Counter.MODIFY_NOT_FOUND] += 1
                continue
            e, v, ev, vv = self.marks.combo(row["mark"] & COMBO_MASK)
            old_aux, ao, ar = split_labels(row["labels"])

            def pick(name: str, old: int, i: int = i) -> int:
                vals = given[name]
                return old if vals is None else int(vals[i])

            ev, vv = pick("eni_version", ev), pick("vpc_version", vv)
            ao, ar = pick("action_orig", ao), pick("action_reply", ar)
            fresh: list[int] = []
            cid = self._combo(e, v, ev, vv, fresh)
            self.pipeline.update_fresh(fresh, [])
            tmo = given["timeout_ns"]
            ts = given["tcp_state"]
            new_aux = pick("aux", old_aux)
            err = self.ct.update(
                key, mark=mark_of(cid, ao == drop, ar == drop),
                labels=labels_of(new_aux, ao, ar),
                timeout_s=None if tmo is None else max(self.min_timeout_s,
                                                       math.ceil(int(tmo[i]) / _NS)),
                tcp_state=None if ts is None else int(ts[i]))  # fmt: skip
            out[i] = Status.OK if err == 0 else Status.NOT_FOUND
            self._ctr[Counter.MODIFY_OK if err == 0 else Counter.MODIFY_NOT_FOUND] += 1
            if err == 0:
                kept.append((i, new_aux, ao, ar))
        if kept:
            where = [k[0] for k in kept]
            sl = self.side.slots(canonicalize(keys.take(where)))
            old = self.side.state[np.maximum(sl, 0)]
            ts_all = given["tcp_state"]
            state = old if ts_all is None else np.array([ts_all[i] for i in where], np.uint8)
            self.side.put(sl, [k[1] for k in kept], [k[2] for k in kept], [k[3] for k in kept],
                          state)  # fmt: skip
        return out

    def query(self, keys: FlowKeys, now_ns: int | None = None
              ) -> tuple[npt.NDArray[np.uint8], np.ndarray]:  # fmt: skip
        n = len(keys)
        status = np.full(n, Status.NOT_FOUND, np.uint8)
        rec = np.zeros(n, ENTRY_DTYPE)
        self._pull()
        rows, where = [], []
        for i, row in enumerate(self._rows(keys)):
            if row is not None:
                rows.append(row)
                where.append(i)
        t = self.latest_ns if now_ns is None else int(now_ns)
        rec[where] = self._entries(rows, t)
        status[where] = Status.OK
        self._ctr[Counter.QUERY_OK] += len(where)
        self._ctr[Counter.QUERY_NOT_FOUND] += n - len(where)
        return status, rec

    def dump(self, cursor: int = 0, max_entries: int = 65536, *, eni_scope: int | None = None,
             vpc_scope: int | None = None, eni_version_below: int | None = None,
             vpc_version_below: int | None = None, tcp_state: int | None = None,
             stale_only: bool = False) -> tuple[np.ndarray, int]:  # fmt: skip
        """Cursor 0 takes a snapshot of the table (one ctnetlink dump, ordered by CTA_ID);
        later cursors walk that snapshot, as a NIC's dump walks its slots."""
        self._pull()
        if cursor == 0:
            self._dump = self._snapshot()
            self._count = len(self._dump)
            self._pull()
        snap = self._dump
        cap = self.config.capacity
        end = min(len(snap), cursor + max_entries)
        rec = self._entries(snap[cursor:end], self.latest_ns)
        keep = np.ones(len(rec), np.bool_)
        for fld, val in (("eni_scope", eni_scope), ("vpc_scope", vpc_scope),
                         ("tcp_state", tcp_state)):  # fmt: skip
            if val is not None:
                keep &= rec[fld] == val
        if eni_version_below is not None:
            keep &= rec["eni_version"] < eni_version_below
        if vpc_version_below is not None:
            keep &= rec["vpc_version"] < vpc_version_below
        if stale_only:
            keep &= rec["stale"]
        out = rec[keep]
        self._ctr[Counter.DUMP_ENTRIES] += len(out)
        return out, (cap if end >= len(snap) else end)

    def bump_version(self, scope: Scope, scope_id: int) -> int:
        lim = self.config.eni_scopes if scope == Scope.ENI else self.config.vpc_scopes
        if not 0 <= scope_id < lim:
            raise ConfigError(f"bump_version: {Scope(scope).name} scope {scope_id} out of range",
                              fix=f"use 0..{lim - 1}")  # fmt: skip
        ver, leave, join = self.marks.bump(scope == Scope.ENI, scope_id)
        self.pipeline.update_fresh(join, leave)
        self._ctr[Counter.VERSION_BUMPS] += 1
        return ver

    def scope_version(self, scope: Scope, scope_id: int) -> int:
        return int((self.marks.eni if scope == Scope.ENI else self.marks.vpc)[scope_id])

    # ---- events, aging, counters -----------------------------------------------------------
    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        self._pull()
        ring = np.concatenate(self._ring) if self._ring else np.zeros(0, EVENT_DTYPE)
        out, rest = ring[:max_n], ring[max_n:]
        self._ring = [rest] if len(rest) else []
        return out

    def scrub(self, now_ns: int, n_slots: int | None = None) -> ScrubResult:
        self._hold(int(now_ns))
        self.latest_ns = max(self.latest_ns, int(now_ns))
        before = self._pull()
        wall = time.monotonic()
        if wall - self._last_reap >= REAP_INTERVAL_S:
            self._last_reap = wall
            self.ct.dump(reap_only=True)  # a walk: the kernel evicts what has expired
        expired = before + self._pull()
        self._ctr[Counter.SCRUB_VISITED] += self._count
        return ScrubResult(visited=self._count, expired=expired, cursor=0)

    def counters(self) -> dict[str, int]:
        return {c.name.lower(): int(self._ctr[c]) for c in Counter}

    def occupancy(self) -> int:
        self._pull()
        return self._count

    # ---- fault hooks -----------------------------------------------------------------------
    def slot_of(self, keys: FlowKeys) -> npt.NDArray[np.int64]:
        out = np.full(len(keys), -1, np.int64)
        for i, row in enumerate(self._rows(keys)):
            if row is not None:
                out[i] = row["id"] & 0x7FFF_FFFF
        return out

    def flip_bits(self, slot: int, bits: npt.ArrayLike) -> None:
        raise ConfigError("flip_bits: the Linux datapath has no ECC-protected records",
                          fix="inject bit flips into an emulated engine (FastEngine)")  # fmt: skip

    def stall_port(self, port: int) -> None:
        raise ConfigError("stall_port: the Linux datapath has no ports or pipeline watchdog",
                          fix="stall a port of an emulated engine (FastEngine)")  # fmt: skip

    def unstall_port(self, port: int) -> None:
        self.stall_port(port)

    # ---- fault injection with a kernel twin ------------------------------------------------
    def kernel_delete(self, keys: FlowKeys) -> int:
        """Chaos: remove entries behind the manager's back (as `conntrack -D` by an operator
        would): the DESTROY events are NOT suppressed; returns how many were removed."""
        n = 0
        for key in self._keys(keys):
            n += self.ct.delete(key) == 0
        return n

    def software_bytes(self) -> int:
        """Bytes this engine object holds in user space (scope table, interning, zones,
        connection index for sequence numbering): the kernel's table is not counted."""
        return int(self.marks.nbytes() + self._zone_vni.nbytes + self.side.nbytes
                   + self._seq.used.nbytes)  # fmt: skip


__all__ = ["DIFFERENCES", "KERNEL_DIFFERENCES", "LinuxEngine"]
