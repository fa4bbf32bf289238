"""The SessionEngine contract (engine/interface.py), checked alike for every engine registered
in conftest.ENGINES: the same histories through the engine and through the baseline give
field-for-field equal query and dump records, packet results, events and counters, except
what the contract declares engine-specific (interface.ENGINE_SPECIFIC_*)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fornax.engine.fornax_engine_helpers import flow, flow_keys, insert_flows, packets, small_config
from starfabric.fornax.engine import EngineConfig, Scope, SessionEngine, Status, TcpState
from starfabric.fornax.engine.interface import (
    ENGINE_SPECIFIC_COUNTERS,
    ENGINE_SPECIFIC_ENTRY_FIELDS,
    ENGINE_SPECIFIC_EVENT_FIELDS,
    ENTRY_DTYPE,
    ENTRY_FLAG_ASSURED,
    ENTRY_FLAG_SEEN_REPLY,
    EVENT_DTYPE,
    OUTCOME_COUNTERS,
    ContractDifferences,
    Counter,
)
from starfabric.fornax.packets import (
    PROTO_ICMP,
    PROTO_ICMPV6,
    TCP_ACK,
    TCP_FIN,
    TCP_OPT_HDR,
    TCP_RST,
    TCP_SYN,
    PacketBatch,
)

Step = tuple[Any, ...]
EngineFactory = Callable[[EngineConfig], SessionEngine]
Pair = tuple[str, EngineFactory, EngineFactory]  # conftest.engine_pair

MS = 1_000_000
S = 1_000 * MS
SYN, SYNACK, ACK, FIN, RST = TCP_SYN, TCP_SYN | TCP_ACK, TCP_ACK, TCP_FIN | TCP_ACK, TCP_RST
PSH_ACK = 0x18
DROP = 99  # small_config's drop action
N_FLOWS = 96  # flow ids 0..95: TCP, UDP, ICMP, ICMPv6, GRE in turn (fornax_engine_helpers)
#: A table far larger than any history's sessions, a ring far longer than its events and
#: whole-table scrubs: the conditions the contract leaves engine-specific never arise.
CFG = small_config(capacity=1024, ring_capacity=4096, scrub_slots_per_tick=1024)
_KEY = ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")
_PROCESS = ("outcome", "reason", "direction", "reply", "action", "tcp_state", "verdict")


# ---- running a history ---------------------------------------------------------------------
def _by_key(rec: np.ndarray, *extra: str) -> np.ndarray:
    """Records in key order (dump's and one scrub's orders are slot orders: engine-specific)."""
    if not len(rec):
        return rec
    return rec[np.lexsort(tuple(rec[f] for f in reversed((*extra, *_KEY))))]


def _dump_all(e: SessionEngine, chunk: int, flt: dict[str, Any]) -> np.ndarray:
    """Every record a filtered dump returns, walked `chunk` records at a time."""
    parts, cursor = [], 0
    for _ in range(e.config.capacity + 1):
        rec, cursor = e.dump(cursor, chunk, **flt)
        parts.append(rec)
        if cursor >= e.config.capacity:
            break
    return _by_key(np.concatenate(parts))


def _move(e: SessionEngine, ids: list[int], t: int) -> dict[str, Any]:
    """A session moving between engines: read back, deleted, inserted again from its record
    (actions, scopes, versions, cookie and the whole tracker state)."""
    keys = flow_keys(ids)
    st_q, rec = e.query(keys)
    ok = st_q == Status.OK
    st_d = e.delete(keys.take(np.flatnonzero(ok)))
    r = rec[ok]
    st_i = e.insert(keys.take(np.flatnonzero(ok)), action_orig=r["action_orig"],
                    action_reply=r["action_reply"], eni_scope=r["eni_scope"],
                    vpc_scope=r["vpc_scope"], eni_version=r["eni_version"],
                    vpc_version=r["vpc_version"], now_ns=t, aux=r["aux"],
                    track=np.ascontiguousarray(r["track"]))  # fmt: skip
    return {"status": np.concatenate([st_q, st_d, st_i])}


def _apply(e: SessionEngine, step: Step) -> dict[str, Any]:
    """Run one step; what it returned, as comparable values."""
    kind = step[0]
    if kind == "insert":
        return {"status": insert_flows(e, step[1], **step[2])}
    if kind == "delete":
        return {"status": e.delete(flow_keys(step[1]))}
    if kind == "modify":
        return {"status": e.modify(flow_keys(step[1]), **step[2])}
    if kind == "query":
        status, rec = e.query(flow_keys(step[1]), step[2])
        return {"status": status, "records": rec}
    if kind == "dump":
        return {"dump": _dump_all(e, step[1], step[2])}
    if kind == "packets":
        res = e.process(step[1])
        return {**{f: getattr(res, f) for f in _PROCESS}, "has_slot": res.slot >= 0}
    if kind == "bump":
        return {"version": e.bump_version(step[1], step[2])}
    if kind == "scrub":
        return {"expired": e.scrub(step[1], e.config.capacity).expired}
    if kind == "move":
        return _move(e, step[1], step[2])
    if kind == "retrack":  # the first session's tracker state given to the others
        status, rec = e.query(flow_keys(step[1][:1]))
        n = len(step[1]) - 1
        track = np.repeat(rec["track"], n, axis=0) if status[0] == Status.OK else None
        return {"status": e.modify(flow_keys(step[1][1:]), track=track, aux=5)}
    raise AssertionError(f"unknown step {kind}")


def _observe(e: SessionEngine, step: Step) -> dict[str, Any]:
    """One step's results, then the events it raised, the counters and the scope versions."""
    obs = _apply(e, step)
    ev = e.poll_events()
    obs["events"] = _by_key(ev, "type") if step[0] == "scrub" else ev
    obs["counters"] = e.counters()
    obs["occupancy"] = e.occupancy()
    obs["versions"] = [e.scope_version(sc, i) for sc, n in ((Scope.ENI, CFG.eni_scopes),
                                                           (Scope.VPC, CFG.vpc_scopes))
                       for i in range(n)]  # fmt: skip
    return obs


def _show(v: Any) -> str:
    text = str(v.tolist() if isinstance(v, np.ndarray) else v)
    return text if len(text) <= 160 else text[:157] + "..."


def _diff_records(name: str, a: np.ndarray, b: np.ndarray, skip: frozenset[str]) -> list[str]:
    if a.dtype != b.dtype or a.shape != b.shape:
        return [f"{name}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}"]
    return [f"{name}.{f}: {_show(a[f])} vs {_show(b[f])}"
            for f in a.dtype.names if f not in skip and not np.array_equal(a[f], b[f])]  # fmt: skip


def _differences(e: SessionEngine) -> ContractDifferences:
    """What the engine declares it cannot give (engines of this project: nothing)."""
    return getattr(e, "differences", None) or ContractDifferences(fields={})


def _diff(a: dict[str, Any], b: dict[str, Any],
          declared: ContractDifferences | None = None) -> list[str]:  # fmt: skip
    """Where the baseline's observation `a` and the engine's `b` differ (contract fields,
    less the engine-specific ones and what the engine declares)."""
    d = declared or ContractDifferences(fields={})
    out: list[str] = []
    for k, va in a.items():
        vb = b[k]
        if k == "counters":
            skip = ENGINE_SPECIFIC_COUNTERS | d.skips("counters")
            names = [c.name.lower() for c in Counter if c.name.lower() not in skip]
            out += [f"counters.{n}: {va[n]} vs {vb.get(n, 'missing')}"
                    for n in names if vb.get(n) != va[n]]  # fmt: skip
        elif isinstance(va, np.ndarray) and va.dtype == ENTRY_DTYPE:
            out += _diff_records(k, va, vb, ENGINE_SPECIFIC_ENTRY_FIELDS | d.skips("entry"))
        elif isinstance(va, np.ndarray) and va.dtype == EVENT_DTYPE:
            out += _diff_records(k, va, vb, ENGINE_SPECIFIC_EVENT_FIELDS | d.skips("event"))
        elif k in d.skips("process"):
            continue
        elif isinstance(va, np.ndarray):
            if not np.array_equal(va, vb):
                out.append(f"{k}: {_show(va)} vs {_show(np.asarray(vb))}")
        elif va != vb:
            out.append(f"{k}: {_show(va)} vs {_show(vb)}")
    return out


_ID_STEPS = ("insert", "delete", "modify", "query", "move", "retrack")


def _without(steps: list[Step], ids: set[int], protos: set[int]) -> list[Step]:
    """The steps with flows `ids` left out of every id list and packets of `protos` out of
    every batch."""
    out: list[Step] = []
    for s in steps:
        if s[0] in _ID_STEPS:
            kept = [i for i in s[1] if i not in ids]
            if kept:
                out.append((s[0], kept, *s[2:]))
        elif s[0] == "packets" and protos:
            keep = np.flatnonzero(~np.isin(s[1].proto, list(protos)))
            if len(keep):
                out.append(("packets", s[1].take(keep)))
        else:
            out.append(s)
    return out


def _refused(steps: list[Step], obs: list[dict[str, Any]]) -> set[int]:
    """Flows whose insert an engine refused with INSERT_FAILED."""
    return {i for s, o in zip(steps, obs, strict=True) if s[0] == "insert"
            for i, st_ in zip(s[1], o["status"], strict=True)
            if st_ == Status.INSERT_FAILED}  # fmt: skip


def _step_time(s: Step) -> int:
    """The latest packets'-clock time a step names (0 for steps that name none)."""
    if s[0] == "packets":
        return int(s[1].time_ns.max()) if len(s[1]) else 0
    if s[0] == "insert":
        return int(np.max(s[2].get("now_ns", 0)))
    if s[0] in ("scrub", "move"):
        return int(s[-1])
    return 0


def _first_aging_step(steps: list[Step], cfg: EngineConfig) -> int:
    """Index of the first step where the packets' clock could have aged something: a scrub,
    or a time past the shortest timeout (an engine on its own clock cannot follow either)."""
    shortest = int(cfg.timeouts_ns().min())
    return next((i for i, s in enumerate(steps)
                 if s[0] == "scrub" or _step_time(s) >= shortest), len(steps))  # fmt: skip


def _runs(pair: Pair, steps: list[Step], cfg: EngineConfig, d: ContractDifferences
          ) -> tuple[list[Step], list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """(steps compared, the baseline's observations, the engine's). Flows of the protocols
    the engine declares it cannot hold are left out; for a foreign table (d.table), so are the
    flows either table refuses to insert (INSERT_FAILED: a table's structure, engine-specific),
    and, on a clock of the engine's own, the histories are compared up to their first step
    where the packets' clock could have aged an entry."""
    _name, make, make_base = pair
    protos = set(d.protocols)
    ids = {i for i in range(N_FLOWS) if flow(i)["proto"] in protos}
    for _ in range(N_FLOWS):
        run = _without(steps, ids, protos)
        if d.clock != "packets":
            run = run[: _first_aging_step(run, cfg)]
        base = make_base(cfg)
        wants = [_observe(base, s) for s in run]  # the baseline first: never keeps a real
        e = make(cfg)  #                              clock waiting between the engine's steps
        gots = [_observe(e, s) for s in run]
        refused = _refused(run, wants) | _refused(run, gots)
        if d.table == "own" or not refused:
            return run, wants, gots
        ids |= refused
    raise AssertionError("the tables keep refusing inserts")


def _conforms(pair: Pair, steps: list[Step], cfg: EngineConfig = CFG,
              history: str | None = None) -> None:  # fmt: skip
    """Run `steps` through the baseline and the engine under test; fail naming, for each
    field that differs anywhere, the first step where it does (baseline's value first)."""
    name, make, _ = pair
    d = _differences(make(cfg))
    if history is not None and history in d.histories:
        pytest.skip(f"{name}: {d.histories[history]}")
    if history is None and d.random is not None:
        pytest.skip(f"{name}: {d.random}")
    run, wants, gots = _runs(pair, steps, cfg, d)
    first: dict[str, str] = {}
    for i, (step, want, got) in enumerate(zip(run, wants, gots, strict=True)):
        c = got["counters"]
        total = sum(c.get(o.name.lower(), 0) for o in OUTCOME_COUNTERS)
        lines = [] if total == c.get("packets") else [f"outcome counters: sum {total} vs "
                                                      f"packets {c.get('packets')}"]  # fmt: skip
        for line in lines + _diff(want, got, d):
            first.setdefault(line.split(":")[0], f"step {i} ({step[0]}) {line}")
    assert not first, f"{name} differs from the baseline:\n" + "\n".join(first.values())


# ---- packets -------------------------------------------------------------------------------
def _tcp(fid: int, segs: list[tuple[int, int, int]], t0: int, gap: int = MS) -> PacketBatch:
    """A TCP conversation of flow `fid` with real headers: (reverse?, flags, payload) per
    segment, sequence numbers following the bytes and flags sent, each side acking the other."""
    nxt = [1_000, 900_000]  # next sequence number: ORIGINAL, REPLY
    seen = [False, False]
    pb = packets([(fid, r, f, 40 + n, 0, t0 + k * gap) for k, (r, f, n) in enumerate(segs)])
    seq, ack = [], []
    for r, f, n in segs:
        seq.append(nxt[r])
        ack.append(nxt[1 - r] if seen[1 - r] else 0)
        nxt[r] += n + (1 if f & (TCP_SYN | TCP_FIN) else 0)
        seen[r] = True
    cols = pb.columns()
    cols.update(tcp_seq=seq, tcp_ack=ack, tcp_sack=ack, tcp_win=65_535, tcp_opt=TCP_OPT_HDR,
                tcp_len=[n for _, _, n in segs])  # fmt: skip
    return PacketBatch.from_columns(**cols)


def _flags_only(specs: list[tuple[int, int, int]], t0: int, gap: int = MS) -> PacketBatch:
    """(flow, reverse?, flags) packets without headers (tracked by their flags alone)."""
    return packets([(f, r, fl, 100 + 7 * k, k % 2, t0 + k * gap)
                    for k, (f, r, fl) in enumerate(specs)])  # fmt: skip


def _icmp_error(fid: int, t: int) -> PacketBatch:
    """A port-unreachable error sent back to flow `fid`'s initiator, quoting its packet."""
    q = packets([(fid, 0, ACK, 60, 0, t)])
    v6 = int(q.src_hi[0]) != 0
    return PacketBatch.from_columns(
        time_ns=t, vni=q.vni, proto=PROTO_ICMPV6 if v6 else PROTO_ICMP, src_hi=q.dst_hi,
        src_lo=q.dst_lo, dst_hi=q.src_hi, dst_lo=q.src_lo,
        dport=(1 << 8 | 4) if v6 else (3 << 8 | 3), length=56, inner_proto=q.proto,
        inner_src_hi=q.src_hi, inner_src_lo=q.src_lo, inner_dst_hi=q.dst_hi,
        inner_dst_lo=q.dst_lo, inner_sport=q.sport, inner_dport=q.dport,
    )  # fmt: skip


def _ins(ids: list[int], t: int = 0, **kw: Any) -> Step:
    return ("insert", ids, {"now_ns": t, **kw})


# ---- histories -----------------------------------------------------------------------------
HANDSHAKE = [(0, SYN, 0), (1, SYNACK, 0), (0, ACK, 0)]
DATA = [(0, PSH_ACK, 500), (1, ACK, 0), (1, PSH_ACK, 1200), (0, ACK, 0)]
TEARDOWN = [(0, FIN, 0), (1, ACK, 0), (1, FIN, 0), (0, ACK, 0)]

# fmt: off
HISTORIES: dict[str, list[Step]] = {
    # TCP with real headers: the manager inserts on the SYN's miss, then handshake, data, FIN
    # both ways; read back at each stage; TIME_WAIT ends in a CLOSED event.
    "tcp_lifecycle": [
        ("packets", _tcp(0, HANDSHAKE[:1], 0)),
        _ins([0], 0, tcp_state=TcpState.SYN_SENT, aux=7),
        ("packets", _tcp(0, HANDSHAKE, 0)),
        ("query", [0], None),
        ("packets", _tcp(0, HANDSHAKE + DATA, 0)),
        ("query", [0], 20 * MS),
        ("packets", _tcp(0, HANDSHAKE + DATA + TEARDOWN, 0)),
        ("query", [0], None),
        ("dump", 4, {}),
        ("scrub", 500 * MS),
        ("scrub", 3 * S),
        ("query", [0], None),
    ],
    # TCP tracked by flags alone, several sessions interleaved in one batch.
    "tcp_flags_only": [
        _ins([0, 5, 10, 15], 0, tcp_state=TcpState.SYN_SENT),
        ("packets", _flags_only([(0, 1, SYNACK), (5, 1, SYNACK), (0, 0, ACK), (10, 1, RST),
                                 (5, 0, ACK), (0, 0, FIN), (15, 0, ACK), (5, 1, FIN)], MS)),
        ("query", [0, 5, 10, 15], None),
        ("dump", 2, {"tcp_state": int(TcpState.ESTABLISHED)}),
        ("scrub", 4 * S),
    ],
    # UDP one way (unreplied: ages), replied (SEEN_REPLY) and replied after 2 s (ASSURED).
    "udp": [
        _ins([1, 6, 11], 0, aux=3),
        ("packets", _flags_only([(1, 0, 0), (6, 0, 0), (11, 0, 0)], MS)),
        ("query", [1, 6, 11], None),
        ("packets", _flags_only([(6, 1, 0), (11, 1, 0)], 100 * MS)),
        ("query", [1, 6, 11], None),
        ("scrub", 1200 * MS),
        ("packets", _flags_only([(11, 0, 0), (11, 1, 0)], 2500 * MS)),
        ("query", [6, 11], None),
        ("dump", 1, {}),
        ("scrub", 10 * S),
    ],
    # ICMP and ICMPv6 echo request/reply, an error RELATED to a session, GRE (generic).
    "icmp_and_generic": [
        _ins([2, 3, 4, 0], 0, tcp_state=TcpState.ESTABLISHED),
        ("packets", _flags_only([(2, 0, 0), (3, 0, 0), (4, 0, 0), (2, 1, 0), (3, 1, 0),
                                 (4, 1, 0)], MS)),
        ("packets", PacketBatch.concat([_icmp_error(0, 20 * MS), _icmp_error(7, 21 * MS)])),
        ("query", [0, 2, 3, 4], None),
        ("scrub", 1500 * MS),
        ("query", [0, 2, 3, 4], None),
    ],
    # Entry operations: statuses, modify of every field, versions, STALE and its one
    # VERSION_MISMATCH event per session until modify, dumps with every filter.
    "entry_ops": [
        _ins(list(range(20)), 0, aux=11),
        _ins([3, 40, 41], 0),
        _ins([42], 0, eni_scope=4),
        ("delete", [1, 5, 5, 90]),
        ("modify", [2, 4, 90], {"action_orig": 9, "action_reply": DROP, "aux": 5}),
        ("modify", [6], {"tcp_state": int(TcpState.ESTABLISHED), "timeout_ns": 7 * S}),
        ("modify", [7, 8], {"eni_version": 2, "vpc_version": 1}),
        ("query", [2, 4, 6, 7, 8, 90], None),
        ("bump", Scope.ENI, 0),
        ("packets", _flags_only([(0, 0, ACK), (2, 1, 0), (0, 0, ACK), (7, 0, 0), (6, 1, ACK)],
                                MS)),
        ("packets", _flags_only([(0, 0, ACK), (2, 0, 0)], 10 * MS)),
        ("dump", 3, {"stale_only": True}),
        ("modify", [0], {"eni_version": 1}),
        ("packets", _flags_only([(0, 0, ACK), (2, 1, 0)], 20 * MS)),
        ("bump", Scope.VPC, 1),
        ("dump", 5, {"eni_scope": 0, "vpc_scope": 1}),
        ("dump", 5, {"eni_version_below": 1}),
        ("dump", 5, {"vpc_version_below": 1, "tcp_state": 0}),
        ("query", list(range(22)), 30 * MS),
        ("move", [6, 9, 12, 90], 40 * MS),
        ("query", [6, 9, 12], None),
        ("retrack", [6, 13, 14]),
        ("query", [6, 13, 14], None),
    ],
    # RST as the only reply kills the entry (CT_KILLED); a SYN on TIME_WAIT reopens it.
    "kill_and_reopen": [
        _ins([0, 5], 0, tcp_state=TcpState.SYN_SENT, aux=1),
        ("packets", _flags_only([(0, 1, RST | ACK)], MS)),
        ("packets", _flags_only([(5, 1, SYNACK), (5, 0, ACK), (5, 0, FIN), (5, 1, FIN),
                                 (5, 0, ACK), (5, 0, SYN), (5, 1, SYNACK)], 2 * MS)),
        ("query", [0, 5], None),
        _ins([5], 20 * MS, tcp_state=TcpState.SYN_SENT),
        ("packets", _flags_only([(5, 1, SYNACK), (5, 0, ACK)], 21 * MS)),
        ("query", [5], None),
    ],
    # Drop actions in each direction and invalid segments.
    "drop_and_invalid": [
        _ins([0, 1], 0, action_reply=DROP, tcp_state=TcpState.SYN_SENT),
        _ins([5], 0, action_orig=DROP, tcp_state=TcpState.ESTABLISHED),
        ("packets", _flags_only([(0, 1, SYNACK), (0, 0, ACK), (0, 0, SYNACK), (1, 0, 0),
                                 (1, 1, 0), (5, 0, ACK), (5, 1, TCP_FIN | TCP_SYN)], MS)),
        ("query", [0, 1, 5], None),
    ],
    # Many sessions in several scopes and states; full dumps with every filter, in chunks.
    "dump_many": [
        *[_ins(list(range(k, N_FLOWS, 4)), 0, eni_scope=k, vpc_scope=k % 2, eni_version=0,
               tcp_state=[0, 1, 3, 7][k], aux=100 + k) for k in range(4)],
        ("packets", _flags_only([(i, i % 2, ACK) for i in range(0, N_FLOWS, 3)], MS)),
        ("bump", Scope.ENI, 2),
        ("dump", 7, {}),
        ("dump", 1000, {}),
        ("dump", 9, {"eni_scope": 1}),
        ("dump", 9, {"vpc_scope": 0, "stale_only": True}),
        ("dump", 9, {"eni_version_below": 1}),
        ("dump", 9, {"tcp_state": int(TcpState.ESTABLISHED)}),
        ("scrub", 1500 * MS),
        ("dump", 11, {}),
    ],
}
# fmt: on


@pytest.mark.parametrize("history", sorted(HISTORIES))
def test_history_conforms(engine_pair: Pair, history: str) -> None:
    """Each named history gives the baseline's records, events and counters."""
    _conforms(engine_pair, HISTORIES[history], history=history)


def test_invalid_drop_policy_conforms(engine_pair: Pair) -> None:
    """Under invalid_policy = "drop" the invalid segments are dropped alike."""
    cfg = CFG.model_copy(update={"invalid_policy": "drop"})
    _conforms(engine_pair, HISTORIES["drop_and_invalid"], cfg, history="drop_and_invalid")


def test_flags_show_seen_reply_and_assured(engine_pair: Pair) -> None:
    """A replied session reads SEEN_REPLY, an assured one ASSURED, from query and dump (the
    flags the contract documents; a replay reading them must not see replied as unreplied)."""
    name, make, _ = engine_pair
    e = make(CFG)
    if _differences(e).clock != "packets":
        pytest.skip(f"{name}: UDP turns ASSURED 2 s after its first packet on the engine's own "
                    "clock; this test moves the packets' clock instead")  # fmt: skip
    udp = [(1, 0, 0), (6, 0, 0), (11, 0, 0), (6, 1, 0), (11, 1, 0)]
    for step in [_ins([1, 6, 11], 0), _ins([20], 0, tcp_state=TcpState.SYN_SENT),
                 ("packets", _flags_only(udp, MS, 200 * MS)),  # 11 stays, past 2 s: stream
                 ("packets", _flags_only([(11, 0, 0), (11, 1, 0)] * 6, 900 * MS, 300 * MS)),
                 ("packets", _tcp(20, HANDSHAKE + DATA, 3 * S))]:  # fmt: skip
        _apply(e, step)
    status, rec = e.query(flow_keys([1, 6, 11, 20]))
    assert (status == Status.OK).all()
    seen = (rec["flags"] & ENTRY_FLAG_SEEN_REPLY) != 0
    assured = (rec["flags"] & ENTRY_FLAG_ASSURED) != 0
    assert seen.tolist() == [False, True, True, True], f"{name}: SEEN_REPLY {rec['flags']}"
    assert assured.tolist() == [False, False, True, True], f"{name}: ASSURED {rec['flags']}"
    dumped = _dump_all(e, 2, {})
    np.testing.assert_array_equal(_by_key(rec)["flags"], dumped["flags"])


# ---- randomized histories ------------------------------------------------------------------
_ids = st.lists(st.integers(0, N_FLOWS - 1), min_size=1, max_size=10)
_pkt = st.tuples(st.integers(0, N_FLOWS - 1), st.integers(0, 1),
                 st.sampled_from([SYN, SYNACK, ACK, FIN, RST, RST | ACK, PSH_ACK, TCP_FIN, 0]))  # fmt: skip
_modify = st.fixed_dictionaries({}, optional={
    "action_orig": st.sampled_from([3, DROP]), "action_reply": st.sampled_from([4, DROP]),
    "eni_version": st.integers(0, 2), "vpc_version": st.integers(0, 2),
    "aux": st.integers(0, 2**64 - 1), "tcp_state": st.sampled_from([0, 1, 3, 5, 7]),
    "timeout_ns": st.integers(0, 5 * S)})  # fmt: skip
_filters = st.fixed_dictionaries({}, optional={
    "eni_scope": st.integers(0, 3), "vpc_scope": st.integers(0, 1),
    "eni_version_below": st.integers(0, 2), "vpc_version_below": st.integers(0, 2),
    "tcp_state": st.sampled_from([0, 1, 3, 7]), "stale_only": st.booleans()})  # fmt: skip
_step = st.one_of(
    st.tuples(st.just("packets"), st.lists(_pkt, min_size=1, max_size=20),
              st.integers(0, 3 * S)),
    st.tuples(st.just("insert"), _ids, st.fixed_dictionaries({
        "eni_scope": st.integers(0, 4), "vpc_scope": st.integers(0, 1),
        "eni_version": st.integers(0, 1), "tcp_state": st.sampled_from([0, 1, 3, 7]),
        "action_reply": st.sampled_from([2, DROP]), "aux": st.integers(0, 2**64 - 1)})),
    st.tuples(st.just("delete"), _ids),
    st.tuples(st.just("modify"), _ids, _modify),
    st.tuples(st.just("query"), _ids, st.none()),
    st.tuples(st.just("dump"), st.integers(1, 30), _filters),
    st.tuples(st.just("bump"), st.sampled_from([Scope.ENI, Scope.VPC]), st.integers(0, 1)),
    st.tuples(st.just("scrub"), st.integers(0, 8 * S)),
    st.tuples(st.just("move"), _ids),
    st.tuples(st.just("retrack"), st.lists(st.integers(0, N_FLOWS - 1), min_size=2, max_size=4)),
)  # fmt: skip


def _timed(steps: list[Step]) -> list[Step]:
    """Give the drawn steps a clock that never runs backwards (packets, inserts, scrubs)."""
    out: list[Step] = []
    now = 0
    for s in steps:
        if s[0] == "packets":
            out.append(("packets", _flags_only(s[1], now + s[2], MS)))
            now += s[2] + len(s[1]) * MS
        elif s[0] == "insert":
            out.append(("insert", s[1], {**s[2], "now_ns": now}))
        elif s[0] == "scrub":
            now += s[1]
            out.append(("scrub", now))
        elif s[0] == "move":
            out.append(("move", s[1], now))
        else:
            out.append(s)
    return out


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    pre=st.lists(st.integers(0, N_FLOWS - 1), min_size=5, max_size=40, unique=True),
    steps=st.lists(_step, min_size=1, max_size=14),
)
def test_random_histories_conform(engine_pair: Pair, pre: list[int], steps: list[Step]) -> None:
    """Hypothesis-drawn histories after a prefill: every contract field equal at every step."""
    prefill = _ins(pre, 0, tcp_state=TcpState.SYN_SENT, aux=flow(pre[0])["sport"])
    _conforms(engine_pair, [prefill, *_timed(steps)])
