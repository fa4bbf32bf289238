"""THE contract between the emulated Fornax NIC session engine and the software above it.

Terms
-----
session      One bidirectional connection: (VNI, protocol, endpoint A, endpoint B) stored
             canonically (fornax/keys.py), matched by packets of both directions.
slot         Index of the table row that holds a session (0 <= slot < capacity). Slots are
             hardware addresses: a session may move to another slot when a later insert
             displaces it (bounded cuckoo), so software must address sessions by key.
ORIGINAL     The direction of the packet that created the session (the key given to
             `insert`, src -> dst); REPLY is the other one. Actions, counters and the key in
             query/dump/event records are reported in ORIGINAL orientation (src = initiator).
scope        A policy-version domain: one ENI and one VPC per session. The engine holds the
             current version of every scope; each entry holds a snapshot of both.
action       An opaque u32 handle per direction, chosen by software (EngineConfig.drop_action
             means drop). The engine never interprets actions beyond drop.
aux          An opaque u64 software cookie per entry (e.g. SNAT index + port); never read by
             the engine, returned by query, dump and AGED/CLOSED events.
time         Every time is in nanoseconds on the packets' clock (PacketBatch.time_ns); entry
             insert and scrub take the caller's `now_ns` on that clock; events raised by
             delete/modify/query/dump carry the latest time the engine has seen.
             last-seen is kept in ns.

Ownership of state
------------------
Engine (hardware): the table (keys, TCP state, last-seen, counters, snapshots, flags, ECC),
the scope version arrays, the event ring, the counters, port stall/watchdog state, the scrub
cursor. Software: policy, action meaning, aux meaning, what to do with events. Software learns
hardware state only through query/dump/events; it never writes the table except through ops.

Packet path: `process(batch)`
-----------------------------
Packets are processed strictly in batch order, as if one at a time (the same session twice in
a batch behaves as two sequential packets). Every packet gets exactly one Outcome:
  PORT_HUNG  ingress port stalled (fault hook): the packet is not processed, and is counted.
  MISS       no entry: punt to software. Also a SYN that reopens a TIME_WAIT/CLOSE session
             (reason TCP_REOPEN): as in nf_conntrack, the old session ends (CLOSED event with
             its final counters, entry removed) and the SYN is a new connection to decide.
  FAULT      the probe found a tag-matching entry whose ECC is uncorrectable: the entry is
             invalidated, an ECC_UNCORRECTABLE event is raised, the packet is punted.
  STALE      entry found but its ENI or VPC snapshot differs from the scope's current version:
             the cached actions are NOT applied, the packet is punted, the entry is untouched
             except that one VERSION_MISMATCH event is raised per session until `modify`.
  HIT        forwarded by hardware with the direction's action handle.
  DROP_HW    as HIT, but the direction's action is the drop handle: dropped by hardware.
On HIT and DROP_HW the packet goes through connection tracking (conntrack.py: nf_conntrack's
TCP state table and window checks, UDP/ICMP status; the same code as the software path),
then last-seen and the direction's packet/byte counters are updated. The tracker's verdict
shows in the reason: TCP_INVALID (the state and timer are unchanged; the packet is forwarded,
or dropped as DROP_HW under EngineConfig.invalid_policy = "drop"), TCP_IGNORED (forwarded,
state and timer unchanged), CT_KILLED (forwarded, then the entry is deleted with a CLOSED
event: a RST was the connection's only reply). Expiry is by the deadline the tracker armed. A correctable ECC error found on the way is
corrected in place (ECC_CORRECTED event) and the lookup continues.

Entry operations (software -> hardware)
---------------------------------------
Batch forms take arrays (one element per entry, scalars broadcast) and return a Status per
entry; entries are applied in order, so a later element sees an earlier one's effect. Single
forms (`*_one`) are batch forms of one. Capacity limits are statuses and events, never
exceptions; exceptions are raised only for malformed calls (wrong lengths, bad port index).
  insert   key + actions (orig, reply) + ENI/VPC scope + version snapshots [+ TCP state, aux]
           -> OK | EXISTS | TABLE_FULL | INSERT_FAILED | BAD_SCOPE. TABLE_FULL and
           INSERT_FAILED also raise an event of that type.
  delete   key -> OK | NOT_FOUND | ECC_FAULT. No event (software asked).
           ECC_FAULT: the tag-matching entry was uncorrectable; it is invalidated (event).
  modify   key + any of actions / snapshots / aux / TCP state / tracker state / timeout
           (deadline = now + timeout) -> OK | NOT_FOUND | ECC_FAULT; clears the "mismatch
           reported" flag.
  query    key -> (Status, ENTRY_DTYPE record, with the remaining timeout).
  dump     cursor-based walk in slot order with filters (scopes, versions below, state, stale
           only): returns up to max_entries records (remaining_ns counted from the latest
           time) and the next cursor (== capacity when done). Inserts between chunks may move entries (displacement): such an entry can
           be missed or seen twice, as with OVS flow dumps; the patrol tolerates it.
  bump_version  O(1): increments one scope's current version, walks nothing.
Every read of an entry (pipeline, ops, dump, scrub) checks its ECC first.

Events (hardware -> software): `poll_events(max_n)`
---------------------------------------------------
Fixed-size EVENT_DTYPE records in a bounded ring, oldest first, in the order the hardware
raised them. When the ring is full, events are lost and counted (Counter.EVENTS_LOST); the
next push with room for two records, or else the next poll that leaves room, first writes a
RING_OVERFLOW record whose `detail` is the number lost, so software knows to run its patrol.
AGED and CLOSED carry final counters.

Aging: `scrub(now_ns, n_slots)`
-------------------------------
The scrubber visits the next n_slots slots (a cursor that wraps), checks each entry's ECC and
expires entries whose timer deadline (armed by the tracker: TCP per state with the kernel's
caps, UDP unreplied/stream, ICMP, other) has passed. Expiry in TIME_WAIT/CLOSE is a CLOSED event (completed teardown), otherwise AGED.
Each call is also the watchdog's clock tick (see fault hooks).

Fault hooks (tests, experiments)
--------------------------------
flip_bits(slot, bits) flips record bits (word*64+bit) without any check; stall_port /
unstall_port stop a port's pipeline. A stalled port's packets get PORT_HUNG; when one has
waited watchdog_timeout_s a PIPELINE_HANG event (once per stall) is raised.

Counters: `counters()` returns named totals, consistent after every call (an implementation
may add per-packet counts at the end of a batch); the packet outcomes always sum to PACKETS.

Concurrency: one caller at a time (a NIC queue pair); calls are not thread-safe.

Conformance: every implementation (fast, reference, software, any later one) gives the same
results for the same calls, except what ENGINE_SPECIFIC_* (below) declares, with why; an
engine over a datapath this project did not write (datapaths/linux) may declare more, with
reasons, as its `differences` (ContractDifferences).
"""

from __future__ import annotations

import ipaddress
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError
from starfabric.fornax.engine.config import EngineConfig
from starfabric.fornax.engine.layout import FLAG_ASSURED, FLAG_SEEN_REPLY
from starfabric.fornax.packets import COLUMN_RANGES, PacketBatch, ip_to_halves
from starfabric.ranges import check_values


class Outcome(IntEnum):
    """What happened to a packet (exactly one per packet)."""

    HIT = 0
    MISS = 1
    STALE = 2
    FAULT = 3
    DROP_HW = 4
    PORT_HUNG = 5


class Reason(IntEnum):
    """Why a packet got its outcome, one level deeper."""

    NONE = 0
    NO_ENTRY = 1
    ENI_VERSION = 2
    VPC_VERSION = 3
    ECC_UNCORRECTABLE = 4
    DROP_ACTION = 5
    PORT_STALLED = 6
    TCP_INVALID = 7  # HIT, but nf_conntrack calls the segment invalid here (state unchanged)
    TCP_IGNORED = 8  # HIT, segment ignored by the state machine (state unchanged)
    TCP_REOPEN = 9  # MISS: a SYN on a TIME_WAIT/CLOSE session opens a new connection
    KEY_CONSISTENT = 10  # ECC_UNCORRECTABLE event: the key read back hashes to its slot
    KEY_SUSPECT = 11  # ECC_UNCORRECTABLE event: the key read back may itself be corrupted
    CT_KILLED = 12  # HIT, then the entry is deleted (CLOSED event): a RST was the only reply
    CT_INVALID_NEW = 13  # software path: the first packet creates no entry (nf_conntrack's
    #                      "invalid new": a lone FIN/RST/SYN-ACK, bad flags, tcp_loose=0
    #                      pickup, an ICMP reply with no request)
    CT_UNTRACKED = 14  # software path: the kernel leaves the packet untracked (ICMPv6 ND/MLD):
    #                    no entry, forwarded by the policy alone


class Status(IntEnum):
    """Completion status of one entry operation."""

    OK = 0
    EXISTS = 1
    NOT_FOUND = 2
    TABLE_FULL = 3
    INSERT_FAILED = 4
    BAD_SCOPE = 5
    ECC_FAULT = 6


class EventType(IntEnum):
    """Event record types (hardware -> software)."""

    AGED = 1
    CLOSED = 2
    VERSION_MISMATCH = 3
    ECC_CORRECTED = 4
    ECC_UNCORRECTABLE = 5
    INSERT_FAILED = 6
    TABLE_FULL = 7
    PIPELINE_HANG = 8
    RING_OVERFLOW = 9


class Scope(IntEnum):
    """Which version domain `bump_version` addresses."""

    ENI = 0
    VPC = 1


class Counter(IntEnum):
    """Named engine counters; `counters()` returns them as a dict by lower-case name."""

    PACKETS = 0
    HIT = 1
    MISS = 2
    STALE = 3
    FAULT = 4
    DROP_HW = 5
    PORT_HUNG = 6
    BYTES_FORWARDED = 7
    TCP_INVALID = 8
    TCP_IGNORED = 9
    TCP_REOPEN = 10
    ECC_CORRECTED = 11
    ECC_UNCORRECTABLE = 12
    MISMATCH_EVENTS = 13
    INSERT_OK = 14
    INSERT_EXISTS = 15
    INSERT_TABLE_FULL = 16
    INSERT_FAILED = 17
    INSERT_BAD_SCOPE = 18
    DISPLACEMENTS = 19
    DELETE_OK = 20
    DELETE_NOT_FOUND = 21
    MODIFY_OK = 22
    MODIFY_NOT_FOUND = 23
    QUERY_OK = 24
    QUERY_NOT_FOUND = 25
    DUMP_ENTRIES = 26
    VERSION_BUMPS = 27
    AGED = 28
    CLOSED = 29
    SCRUB_VISITED = 30
    EVENTS_RAISED = 31
    EVENTS_LOST = 32
    PIPELINE_HANG = 33
    OP_ECC_FAULT = 34
    RING_OVERFLOW = 35


N_COUNTERS = len(Counter)
OUTCOME_COUNTERS = (
    Counter.HIT,
    Counter.MISS,
    Counter.STALE,
    Counter.FAULT,
    Counter.DROP_HW,
    Counter.PORT_HUNG,
)

#: Event record words (the ring stores uint64[ring_capacity, N_EVENT_WORDS]).
E_HEAD = 0  # type | tcp state << 8 | proto << 16 | reason << 24 | flags << 32 | port << 48
E_VNI = 1
E_TIME = 2
E_SLOT = 3
E_SRC_HI = 4
E_SRC_LO = 5
E_DST_HI = 6
E_DST_LO = 7
E_PORTS = 8  # sport | dport << 16
E_SCOPE = 9
E_VER = 10
E_ACT = 11  # orig | reply << 32
E_PKTS = 12  # orig | reply << 32
E_BYTES_ORIG = 13
E_BYTES_REPLY = 14
E_AUX = 15
E_DETAIL = 16  # RING_OVERFLOW: events lost; ECC_CORRECTED: bit position; else 0
N_EVENT_WORDS = 17

#: The fields an event and an entry record share: the session's key in ORIGINAL orientation,
#: its scopes, the version snapshots and the two actions.
_SESSION_FIELDS: list[tuple[str, type]] = [
    ("src_hi", np.uint64),
    ("src_lo", np.uint64),
    ("dst_hi", np.uint64),
    ("dst_lo", np.uint64),
    ("sport", np.uint16),
    ("dport", np.uint16),
    ("eni_scope", np.uint32),
    ("vpc_scope", np.uint32),
    ("eni_version", np.uint32),
    ("vpc_version", np.uint32),
    ("action_orig", np.uint32),
    ("action_reply", np.uint32),
]

EVENT_DTYPE = np.dtype(
    [
        ("type", np.uint8),
        ("tcp_state", np.uint8),
        ("proto", np.uint8),
        ("reason", np.uint8),
        ("flags", np.uint16),
        ("port", np.uint16),
        ("vni", np.uint32),
        ("time_ns", np.int64),
        ("slot", np.int64),
        *_SESSION_FIELDS,
        ("pkts_orig", np.uint64),
        ("pkts_reply", np.uint64),
        ("bytes_orig", np.uint64),
        ("bytes_reply", np.uint64),
        ("aux", np.uint64),
        ("detail", np.uint64),
    ]
)

ENTRY_DTYPE = np.dtype(
    [
        ("slot", np.int64),
        ("vni", np.uint32),
        ("proto", np.uint8),
        ("tcp_state", np.uint8),
        ("flags", np.uint8),
        ("stale", np.bool_),
        *_SESSION_FIELDS,
        ("last_seen_ns", np.int64),
        ("pkts_orig", np.uint64),
        ("pkts_reply", np.uint64),
        ("bytes_orig", np.uint64),
        ("bytes_reply", np.uint64),
        ("aux", np.uint64),
        ("expires_ns", np.int64),  # timer deadline on the packets' clock (tracker-armed)
        ("remaining_ns", np.int64),  # expires_ns - the query's time (dump: the latest), >= 0
        ("track", np.uint64, (8,)),  # tracker state: meta bits (conntrack.TRACK_META_MASK
        #                               and the TCP state), then the N_TRACK window words
    ]
)

#: Bit of an entry record's `flags` (query/dump): IPS_SEEN_REPLY, the tracker accepted a
#: packet the REPLY way (the record layout's bit, re-exported for software).
ENTRY_FLAG_SEEN_REPLY = FLAG_SEEN_REPLY
#: Bit of an entry record's `flags`: IPS_ASSURED (TCP past the handshake's reply, UDP stream).
ENTRY_FLAG_ASSURED = FLAG_ASSURED

# ---- what the contract leaves to each implementation -----------------------------------
# Given the same calls, every SessionEngine returns equal query/dump records (ENTRY_DTYPE),
# events (EVENT_DTYPE), packet results and counters, field for field, except the names below
# (tests/fornax/test_contract_conformance.py checks exactly this for every registered engine).
# Also engine-specific, and so kept out of the histories that suite runs: the order of the
# events one scrub call raises and of dump's records (slot order), which slots a partial scrub
# visits (ScrubResult.visited and cursor), the load at which an insert is refused and with
# which status (TABLE_FULL or INSERT_FAILED: the table's structure), the event queue's bound
# (software's is unbounded: no RING_OVERFLOW, events_lost 0) and the fault hooks (software
# has no ECC-protected records and no ports: flip_bits and stall_port refuse).

#: ENTRY_DTYPE fields: "slot" is the table's own address of the session (a hardware bucketed
#: cuckoo table and software's open-addressed index place one key differently); whether an
#: entry has one (ProcessResult.slot >= 0) is common.
ENGINE_SPECIFIC_ENTRY_FIELDS: frozenset[str] = frozenset({"slot"})
#: EVENT_DTYPE fields: "slot", the slot the entry had (as above).
ENGINE_SPECIFIC_EVENT_FIELDS: frozenset[str] = frozenset({"slot"})
#: Counters: "displacements" counts cuckoo moves (only a table that displaces has them);
#: "scrub_visited" counts slots walked (hardware walks n_slots of its capacity per call,
#: software its whole table).
ENGINE_SPECIFIC_COUNTERS: frozenset[str] = frozenset({"displacements", "scrub_visited"})


@dataclass(frozen=True)
class ContractDifferences:
    """What an engine over a foreign datapath (one this project did not write: the Linux
    kernel) cannot give field for field, each with its reason. An engine declares it as its
    class attribute `differences`; the conformance suite leaves out exactly these, on top of
    the ENGINE_SPECIFIC_* names every engine may differ in.

    fields     "entry.<ENTRY_DTYPE field>", "event.<EVENT_DTYPE field>",
               "process.<ProcessResult field>", "counters.<counter name>" -> why
    clock      "packets": entries age on the packets' clock (scrub(now_ns) moves time);
               "kernel": they age on the datapath's own clock, so histories are compared up
               to their first step where the packets' clock could have aged an entry (a
               scrub, or a time past the shortest timeout)
    histories  history name -> why it is not compared at all
    random     why randomized histories are not compared (None: they are)
    protocols  IP protocol -> why the datapath cannot hold its sessions as the contract does
               (their flows are left out of the histories)
    table      "own" (this project's table layout) or "foreign": a foreign table refuses
               inserts at other loads than the baseline's (engine-specific, above), so the
               keys the baseline refuses for its structure are left out of the histories
    """

    fields: dict[str, str]
    clock: str = "packets"
    histories: dict[str, str] = field(default_factory=dict)
    random: str | None = None
    protocols: dict[int, str] = field(default_factory=dict)
    table: str = "own"

    def skips(self, kind: str) -> frozenset[str]:
        """Field names of one kind ("entry", "event", "process", "counters") to leave out."""
        return frozenset(k.split(".", 1)[1] for k in self.fields if k.startswith(kind + "."))


_M32 = np.uint64(0xFFFF_FFFF)


def events_from_words(words: npt.NDArray[np.uint64]) -> np.ndarray:
    """Decode raw ring records (uint64[n, N_EVENT_WORDS]) into EVENT_DTYPE records."""
    w = np.asarray(words, dtype=np.uint64).reshape(-1, N_EVENT_WORDS)
    out = np.zeros(len(w), dtype=EVENT_DTYPE)
    head = w[:, E_HEAD]
    out["type"] = head & np.uint64(0xFF)
    out["tcp_state"] = (head >> np.uint64(8)) & np.uint64(0xFF)
    out["proto"] = (head >> np.uint64(16)) & np.uint64(0xFF)
    out["reason"] = (head >> np.uint64(24)) & np.uint64(0xFF)
    out["flags"] = (head >> np.uint64(32)) & np.uint64(0xFFFF)
    out["port"] = (head >> np.uint64(48)) & np.uint64(0xFFFF)
    out["vni"] = w[:, E_VNI]
    out["time_ns"] = w[:, E_TIME].view(np.int64)
    out["slot"] = w[:, E_SLOT].view(np.int64)
    for name, col in (
        ("src_hi", E_SRC_HI),
        ("src_lo", E_SRC_LO),
        ("dst_hi", E_DST_HI),
        ("dst_lo", E_DST_LO),
        ("bytes_orig", E_BYTES_ORIG),
        ("bytes_reply", E_BYTES_REPLY),
        ("aux", E_AUX),
        ("detail", E_DETAIL),
    ):
        out[name] = w[:, col]
    for lo, hi, col in (
        ("sport", "dport", E_PORTS),
        ("eni_scope", "vpc_scope", E_SCOPE),
        ("eni_version", "vpc_version", E_VER),
        ("action_orig", "action_reply", E_ACT),
        ("pkts_orig", "pkts_reply", E_PKTS),
    ):
        if lo == "sport":
            out[lo] = w[:, col] & np.uint64(0xFFFF)
            out[hi] = (w[:, col] >> np.uint64(16)) & np.uint64(0xFFFF)
        else:
            out[lo] = w[:, col] & _M32
            out[hi] = w[:, col] >> np.uint64(32)
    return out


@dataclass(frozen=True)
class FlowKeys:
    """Directed keys for entry ops (src = the ORIGINAL direction's sender), one per entry."""

    vni: npt.NDArray[np.uint32]
    proto: npt.NDArray[np.uint8]
    src_hi: npt.NDArray[np.uint64]
    src_lo: npt.NDArray[np.uint64]
    dst_hi: npt.NDArray[np.uint64]
    dst_lo: npt.NDArray[np.uint64]
    sport: npt.NDArray[np.uint16]
    dport: npt.NDArray[np.uint16]

    def __len__(self) -> int:
        return len(self.vni)

    @classmethod
    def from_batch(cls, batch: PacketBatch) -> FlowKeys:
        """The directed key of each packet (the manager inserts misses with these)."""
        c = batch.columns()
        return cls(**{f.name: c[f.name] for f in fields(cls)})

    @classmethod
    def from_columns(cls, **cols: npt.ArrayLike) -> FlowKeys:
        """Build from columns, casting dtypes and broadcasting scalars."""
        dt = {f.name: PacketBatch.empty().columns()[f.name].dtype for f in fields(cls)}
        unknown = set(cols) - set(dt)
        if unknown:
            raise ValueError(f"FlowKeys: unknown column(s) {sorted(unknown)}")
        for k, v in cols.items():
            check_values(k, v, COLUMN_RANGES[k])
        n = max((np.size(v) for v in cols.values()), default=0)
        # Cast with the target dtype up front: a list mixing small ints and ints >= 2**63 would
        # otherwise pass through float64 and lose address bits.
        return cls(
            **{
                k: np.ascontiguousarray(np.broadcast_to(np.asarray(cols.get(k, 0), dtype=t), (n,)))
                for k, t in dt.items()
            }
        )

    @classmethod
    def single(cls, vni: int, proto: int, src: str, dst: str, sport: int, dport: int) -> FlowKeys:
        """One key from text addresses (IPv4 or IPv6)."""
        sh, sl = ip_to_halves(ipaddress.ip_address(src))
        dh, dl = ip_to_halves(ipaddress.ip_address(dst))
        return cls.from_columns(
            vni=[vni],
            proto=[proto],
            src_hi=[sh],
            src_lo=[sl],
            dst_hi=[dh],
            dst_lo=[dl],
            sport=[sport],
            dport=[dport],
        )

    def take(self, idx: npt.ArrayLike) -> FlowKeys:
        return FlowKeys(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


@dataclass(frozen=True)
class ProcessResult:
    """Per-packet results of `process`, arrays in batch order."""

    outcome: npt.NDArray[np.uint8]  # Outcome
    reason: npt.NDArray[np.uint8]  # Reason
    direction: npt.NDArray[np.uint8]  # canonical direction bit of the packet (keys.py)
    reply: npt.NDArray[np.uint8]  # 0 ORIGINAL, 1 REPLY, 255 no entry
    action: npt.NDArray[np.uint32]  # the direction's action handle (HIT/DROP_HW), else 0
    slot: npt.NDArray[np.int64]  # slot of the entry consulted, -1 if none
    tcp_state: npt.NDArray[np.uint8]  # the entry's TCP state after the packet (0 if none)
    #: the connection tracker's verdict (conntrack.V_*: 0 accepted, 1 ignored, 2 INVALID,
    #: 3 reopen, 4 accepted and the entry ended), 255 where no entry tracked the packet
    verdict: npt.NDArray[np.uint8] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.verdict is None:
            object.__setattr__(self, "verdict", np.full(len(self.outcome), 255, np.uint8))

    def __len__(self) -> int:
        return len(self.outcome)

    def outcome_counts(self) -> dict[str, int]:
        counts = np.bincount(self.outcome, minlength=len(Outcome))
        return {o.name: int(counts[o]) for o in Outcome}


@dataclass(frozen=True)
class ScrubResult:
    """What one scrub tick did."""

    visited: int
    expired: int
    cursor: int


def broadcast_arg(value: Any, n: int, dtype: type[np.generic], name: str) -> np.ndarray:
    """Broadcast a scalar or length-n array argument to a contiguous array of `dtype`."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        return np.full(n, arr, dtype=dtype)
    if arr.shape != (n,):
        raise ConfigError(
            f"argument '{name}' has shape {arr.shape}, not ({n},)",
            fix=f"pass a scalar or one value per key ({n})",
        )
    return np.ascontiguousarray(arr, dtype=dtype)


class SessionEngine(ABC):
    """The interface every session engine implements (fast engine, reference, and any other).

    All state lives in the implementation; callers see only these methods. See the module
    docstring for semantics; implementations must agree on outcomes, states, records,
    counters, events and event order for the same call sequence, except the fields and
    conditions ENGINE_SPECIFIC_* declare.
    """

    config: EngineConfig

    # ---- packet path -------------------------------------------------------------------
    @abstractmethod
    def process(self, batch: PacketBatch) -> ProcessResult:
        """Run a batch through the pipeline in order; one outcome per packet."""

    # ---- entry operations --------------------------------------------------------------
    @abstractmethod
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
        """Insert sessions (key in ORIGINAL orientation); a Status per entry.

        `track` (uint64[n, 8], ENTRY_DTYPE "track" / the software path's tracker rows) carries
        a session's whole tracker state and timer deadline (then tcp_state is taken from it);
        without it an entry starts in `tcp_state` with unknown windows (checked liberally) and
        its class's timeout from now_ns."""

    @abstractmethod
    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        """Remove sessions by key (either orientation); a Status per entry."""

    @abstractmethod
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
        """Change the given fields (None = unchanged); clears the mismatch-reported flag.

        timeout_ns re-arms the timer to the engine's latest time + timeout_ns (what
        `conntrack -U --timeout` does); track replaces the tracker state, its TCP state
        included (as insert's; tcp_state, given too, wins)."""

    @abstractmethod
    def query(
        self, keys: FlowKeys, now_ns: int | None = None
    ) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        """(Status per key, ENTRY_DTYPE record per key; zeros where not OK). remaining_ns is
        counted from now_ns (default: the latest time the engine has seen)."""

    @abstractmethod
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
        """(ENTRY_DTYPE records in slot order from `cursor`, next cursor; capacity = done)."""

    @abstractmethod
    def bump_version(self, scope: Scope, scope_id: int) -> int:
        """Make every snapshot of this scope stale in O(1); returns the new version."""

    @abstractmethod
    def scope_version(self, scope: Scope, scope_id: int) -> int:
        """Current version of a scope."""

    # ---- events, aging, counters ------------------------------------------------------
    @abstractmethod
    def poll_events(self, max_n: int = 1 << 30) -> np.ndarray:
        """Remove and return up to max_n EVENT_DTYPE records, oldest first."""

    @abstractmethod
    def scrub(self, now_ns: int, n_slots: int | None = None) -> ScrubResult:
        """Visit the next n_slots slots (default config.scrub_slots_per_tick); age, check ECC."""

    @abstractmethod
    def counters(self) -> dict[str, int]:
        """Named counters (Counter names in lower case)."""

    @abstractmethod
    def occupancy(self) -> int:
        """Number of valid entries."""

    # ---- fault hooks -------------------------------------------------------------------
    @abstractmethod
    def slot_of(self, keys: FlowKeys) -> npt.NDArray[np.int64]:
        """Debug access: slot of each key or -1, with no ECC check and no side effect."""

    @abstractmethod
    def flip_bits(self, slot: int, bits: npt.ArrayLike) -> None:
        """Fault hook: flip record bits (word * 64 + bit) of one slot, no check."""

    @abstractmethod
    def stall_port(self, port: int) -> None:
        """Fault hook: the port's pipeline stops making progress."""

    @abstractmethod
    def unstall_port(self, port: int) -> None:
        """Fault hook: the port works again; the watchdog re-arms."""

    # ---- single-entry forms (shared) ---------------------------------------------------
    def insert_one(self, key: FlowKeys, **kw: Any) -> Status:
        return Status(int(self.insert(key, **kw)[0]))

    def delete_one(self, key: FlowKeys) -> Status:
        return Status(int(self.delete(key)[0]))

    def modify_one(self, key: FlowKeys, **kw: Any) -> Status:
        return Status(int(self.modify(key, **kw)[0]))

    def query_one(self, key: FlowKeys) -> tuple[Status, np.void]:
        st, rec = self.query(key)
        return Status(int(st[0])), rec[0]


__all__ = [
    "ENGINE_SPECIFIC_COUNTERS",
    "ENGINE_SPECIFIC_ENTRY_FIELDS",
    "ENGINE_SPECIFIC_EVENT_FIELDS",
    "ENTRY_DTYPE",
    "ENTRY_FLAG_ASSURED",
    "ENTRY_FLAG_SEEN_REPLY",
    "EVENT_DTYPE",
    "N_COUNTERS",
    "N_EVENT_WORDS",
    "OUTCOME_COUNTERS",
    "ContractDifferences",
    "Counter",
    "EventType",
    "FlowKeys",
    "Outcome",
    "ProcessResult",
    "Reason",
    "Scope",
    "ScrubResult",
    "SessionEngine",
    "Status",
    "broadcast_arg",
    "events_from_words",
]
