"""The software datapath through the engine contract (softengine.py) agrees with the
reference engine on the same operations: statuses, records read back, packet outcomes,
actions, TCP states, scope versions and aging events."""

from __future__ import annotations

import numpy as np
import pytest

from fornax.engine.fornax_engine_helpers import flow_keys, insert_flows, packets, small_config
from starfabric.errors import ConfigError
from starfabric.fornax.engine import FlowKeys, ReferenceEngine, Scope, Status, TcpState
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine.interface import EventType, Outcome
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PacketBatch
from starfabric.fornax.softengine import SoftEngine
from starfabric.fornax.softpath import SoftPath, SoftPathConfig

FIELDS = ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport",
          "action_orig", "action_reply", "eni_scope", "vpc_scope", "eni_version",
          "vpc_version", "aux", "tcp_state", "stale")  # fmt: skip


def pair() -> tuple[SoftEngine, ReferenceEngine]:
    cfg = small_config(capacity=1024, ring_capacity=1024, scrub_slots_per_tick=1024)
    return SoftEngine(SoftPath(cfg, SoftPathConfig(capacity=256))), ReferenceEngine(cfg)


def same_records(a: np.ndarray, b: np.ndarray) -> None:
    for f in FIELDS:
        np.testing.assert_array_equal(a[f], b[f], err_msg=f)


def test_entry_operations_agree() -> None:
    soft, ref = pair()
    ids = list(range(60))
    for e in (soft, ref):
        assert (insert_flows(e, ids, aux=7) == Status.OK).all()
    np.testing.assert_array_equal(insert_flows(soft, [3, 70]), insert_flows(ref, [3, 70]))
    keys = flow_keys([*ids, 99])
    (s1, r1), (s2, r2) = soft.query(keys), ref.query(keys)
    np.testing.assert_array_equal(s1, s2)
    same_records(r1[s1 == Status.OK], r2[s2 == Status.OK])
    gone = flow_keys([1, 5, 5, 99])
    np.testing.assert_array_equal(soft.delete(gone), ref.delete(gone))
    mk = flow_keys([2, 4, 5])
    np.testing.assert_array_equal(soft.modify(mk, action_orig=9, aux=3),
                                  ref.modify(mk, action_orig=9, aux=3))  # fmt: skip
    for e in (soft, ref):
        assert e.bump_version(Scope.ENI, 0) == 1
    (s1, r1), (s2, r2) = soft.query(keys), ref.query(keys)
    np.testing.assert_array_equal(s1, s2)
    same_records(r1[s1 == Status.OK], r2[s2 == Status.OK])
    assert soft.occupancy() == ref.occupancy()
    d1, _ = soft.dump(0, 1 << 10, eni_scope=0)
    d2, _ = ref.dump(0, 1 << 10, eni_scope=0)
    order = lambda d: np.lexsort((d["dport"], d["sport"], d["src_lo"], d["vni"]))  # noqa: E731
    same_records(d1[order(d1)], d2[order(d2)])


def test_packets_agree() -> None:
    soft, ref = pair()
    for e in (soft, ref):
        insert_flows(e, list(range(20)), action_orig=5, action_reply=6, tcp_state=3)
    pb = packets([(i % 25, i % 2, 0x10, 100, 0, 1000 + i) for i in range(80)])
    a, b = soft.process(pb), ref.process(pb)
    for f in ("outcome", "direction", "reply", "action", "tcp_state"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    for e in (soft, ref):
        e.bump_version(Scope.VPC, 0)
    a, b = soft.process(pb), ref.process(pb)
    np.testing.assert_array_equal(a.outcome, b.outcome)
    assert (a.outcome[a.slot >= 0] == Outcome.STALE).all()


def _errors(specs: list[tuple[int, int, bool]], t: int) -> PacketBatch:
    """ICMP errors (port unreachable) quoting flow fid's packet (rev: its reply), sent back
    to the quoted source, or (wrong) to another address: (fid, rev, wrong) per packet."""
    cols: dict[str, list[int]] = {}
    for fid, rev, wrong in specs:
        q = packets([(fid, rev, 0x10, 60, 0, t)])
        v6 = int(q.src_hi[0]) != 0
        row = {"time_ns": t, "vni": int(q.vni[0]), "proto": PROTO_ICMPV6 if v6 else PROTO_ICMP,
               "src_hi": int(q.dst_hi[0]), "src_lo": int(q.dst_lo[0]),
               "dst_hi": int(q.src_hi[0]), "dst_lo": int(q.src_lo[0]) ^ int(wrong), "sport": 0,
               "dport": (1 << 8 | 4) if v6 else (3 << 8 | 3), "length": 56,
               "inner_proto": int(q.proto[0]), "inner_src_hi": int(q.src_hi[0]),
               "inner_src_lo": int(q.src_lo[0]), "inner_dst_hi": int(q.dst_hi[0]),
               "inner_dst_lo": int(q.dst_lo[0]), "inner_sport": int(q.sport[0]),
               "inner_dport": int(q.dport[0])}  # fmt: skip
        for k, v in row.items():
            cols.setdefault(k, []).append(v)
    return PacketBatch.from_columns(**cols)


def test_icmp_errors_related_as_in_the_reference() -> None:
    """An ICMP error quoting a session's tuple (either direction) is RELATED to it: forwarded
    with that direction's action (drop included), the session untouched; one not sent back to
    the quoted source, or quoting no session, is a MISS of its own tuple."""
    soft, ref = pair()
    drop = int(soft.config.drop_action)
    for e in (soft, ref):
        insert_flows(e, list(range(20)), action_orig=5, action_reply=6, tcp_state=3)
        insert_flows(e, [20, 21], action_orig=drop, action_reply=6, tcp_state=3)
    specs = [(fid, rev, fid % 5 == 4) for fid in range(26) for rev in (0, 1)]
    keys = flow_keys(list(range(22)))
    before = [e.query(keys, now_ns=10**9)[1] for e in (soft, ref)]
    pb = _errors(specs, 10**9)
    a, b = soft.process(pb), ref.process(pb)
    for f in ("outcome", "verdict", "direction", "reply", "action", "tcp_state"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    rel = np.array([fid < 22 and not wrong for fid, _, wrong in specs])
    assert (a.verdict[rel] == CT.V_RELATED).all() and (a.verdict[~rel] != CT.V_RELATED).all()
    assert (a.outcome[~rel] == Outcome.MISS).all()
    assert {int(x) for x in a.outcome[rel]} == {Outcome.HIT, Outcome.DROP_HW}
    after = [e.query(keys, now_ns=10**9)[1] for e in (soft, ref)]
    same_records(after[0], after[1])
    for old, new in zip(before, after, strict=True):  # no state, timer or counter moved
        for f in (*FIELDS, "expires_ns", "last_seen_ns", "pkts_orig", "pkts_reply", "track"):
            np.testing.assert_array_equal(old[f], new[f], err_msg=f)


def test_aging_events_agree() -> None:
    soft, ref = pair()
    for e in (soft, ref):
        insert_flows(e, list(range(30)), now_ns=0)
    t = 10**12
    soft.scrub(t)
    ref.scrub(t, ref.config.capacity)
    ev_s, ev_r = soft.poll_events(), ref.poll_events()
    aged = lambda ev: sorted(  # noqa: E731
        (int(x["vni"]), int(x["src_lo"]), int(x["sport"]), int(x["type"]))
        for x in ev if x["type"] in (EventType.AGED, EventType.CLOSED)
    )  # fmt: skip
    assert aged(ev_s) == aged(ev_r)
    assert soft.occupancy() == ref.occupancy() == 0


def test_hardware_fault_hooks_are_refused() -> None:
    soft, _ = pair()
    with pytest.raises(ConfigError, match="no ECC"):
        soft.flip_bits(0, [1])
    with pytest.raises(ConfigError, match="no ports"):
        soft.stall_port(0)


def test_refused_insert_raises_table_full_as_the_engine_reports_it() -> None:
    """A full software table refuses an insert with TABLE_FULL and raises that event, carrying
    what the entry would have held exactly as the engine's refusal event does (the key in
    ORIGINAL orientation, ORIG_B and the installed tracker's flags, state, scopes, cookie)."""
    cfg = small_config(capacity=16, bucket_size=4, max_displacement=0, ring_capacity=64)
    ref = ReferenceEngine(cfg)
    k = flow_keys(list(range(40)))
    keys = FlowKeys(vni=k.vni, proto=k.proto, src_hi=k.dst_hi, src_lo=k.dst_lo,
                    dst_hi=k.src_hi, dst_lo=k.src_lo, sport=k.dport, dport=k.sport)  # fmt: skip
    kw = {"action_orig": 3, "action_reply": 4, "eni_scope": 1, "vpc_scope": 1,
          "eni_version": 2, "vpc_version": 0, "now_ns": 5, "aux": 9,
          "tcp_state": TcpState.ESTABLISHED}  # fmt: skip
    st = ref.insert(keys, **kw)
    j = int(np.flatnonzero(st != Status.OK)[0])
    soft = SoftEngine(SoftPath(cfg, SoftPathConfig(capacity=j)))
    assert (soft.insert(keys.take(np.arange(j)), **kw) == Status.OK).all()
    assert soft.insert(keys.take([j]), **kw).tolist() == [Status.TABLE_FULL]
    ev_s, ev_r = soft.poll_events(), ref.poll_events()[:1]
    assert ev_s["type"].tolist() == [EventType.TABLE_FULL]
    assert int(ev_s["flags"][0]) & 1  # ORIG_B: the ORIGINAL direction is B -> A
    for f in ev_s.dtype.names:
        if f != "type":  # the engine's refusal here is INSERT_FAILED (its buckets were full)
            np.testing.assert_array_equal(ev_s[f], ev_r[f], err_msg=f)
    assert soft.counters()["insert_table_full"] == 1
