"""Entry operations, events, faults and accounting, on both implementations."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from starfabric.errors import ConfigError, DataError
from starfabric.fornax.engine import (
    EventType,
    FastEngine,
    FlowKeys,
    Outcome,
    Reason,
    Scope,
    SessionEngine,
    Status,
    TcpState,
)
from starfabric.fornax.engine.reference import ReferenceEngine

from .fornax_engine_helpers import flow, flow_keys, insert_flows, packets, small_config

Make = Callable[..., SessionEngine]
OUTCOMES = ("hit", "miss", "stale", "fault", "drop_hw", "port_hung")


def adds_up(e: SessionEngine) -> None:
    c = e.counters()
    assert sum(c[k] for k in OUTCOMES) == c["packets"]


def test_both_directions_hit_one_entry(make_engine: Make) -> None:
    e = make_engine()
    assert insert_flows(e, [0], action_orig=7, action_reply=8, aux=1234).tolist() == [Status.OK]
    assert insert_flows(e, [0]).tolist() == [Status.EXISTS]
    res = e.process(packets([(0, 0, 0x10, 100, 0, 1), (0, 1, 0x10, 40, 0, 2)]))
    assert res.outcome.tolist() == [Outcome.HIT, Outcome.HIT]
    assert res.slot[0] == res.slot[1] >= 0
    assert res.action.tolist() == [7, 8] and res.reply.tolist() == [0, 1]
    assert res.direction[0] != res.direction[1]
    st, rec = e.query(flow_keys([0]))
    assert st.tolist() == [Status.OK]
    r = rec[0]
    assert (r["pkts_orig"], r["pkts_reply"], r["bytes_orig"], r["bytes_reply"]) == (1, 1, 100, 40)
    assert r["last_seen_ns"] == 2 and r["aux"] == 1234
    f = flow(0)
    assert (r["src_lo"], r["dst_lo"], r["sport"], r["dport"]) == (
        f["src_lo"],
        f["dst_lo"],
        f["sport"],
        f["dport"],
    )
    adds_up(e)


def test_insert_in_reply_orientation_keeps_initiator(make_engine: Make) -> None:
    e = make_engine()
    k = flow_keys([0])
    rev = FlowKeys(
        vni=k.vni, proto=k.proto, src_hi=k.dst_hi, src_lo=k.dst_lo, dst_hi=k.src_hi,
        dst_lo=k.src_lo, sport=k.dport, dport=k.sport,
    )  # fmt: skip
    e.insert(rev, action_orig=1, action_reply=2, eni_scope=0, vpc_scope=0, eni_version=0,
             vpc_version=0, now_ns=0)  # fmt: skip
    _, rec = e.query(k)
    assert rec["src_lo"][0] == k.dst_lo[0] and rec["sport"][0] == k.dport[0]
    res = e.process(packets([(0, 1, 0x10, 1, 0, 1)]))  # the reversed packet is ORIGINAL now
    assert res.reply[0] == 0 and res.action[0] == 1


def test_ipv6_session(make_engine: Make) -> None:
    e = make_engine()
    k = FlowKeys.single(9, 6, "2001:db8::1", "2001:db8:ffff::2", 40000, 443)
    e.insert(k, action_orig=3, action_reply=4, eni_scope=0, vpc_scope=0, eni_version=0,
             vpc_version=0, now_ns=0, tcp_state=TcpState.ESTABLISHED)  # fmt: skip
    b = packets([])
    from starfabric.fornax.packets import PacketBatch

    b = PacketBatch.from_columns(
        time_ns=[1, 2], vni=9, proto=6, src_hi=[k.src_hi[0], k.dst_hi[0]],
        src_lo=[k.src_lo[0], k.dst_lo[0]], dst_hi=[k.dst_hi[0], k.src_hi[0]],
        dst_lo=[k.dst_lo[0], k.src_lo[0]], sport=[40000, 443], dport=[443, 40000], tcp_flags=0x10,
    )  # fmt: skip
    res = e.process(b)
    assert res.outcome.tolist() == [Outcome.HIT, Outcome.HIT] and res.action.tolist() == [3, 4]


def test_vni_isolation(make_engine: Make) -> None:
    """Same addresses and ports in two VNIs are two sessions; neither hits the other."""
    e = make_engine()
    k1 = FlowKeys.single(1, 6, "10.0.0.1", "10.0.0.2", 1234, 80)
    k2 = FlowKeys.single(2, 6, "10.0.0.1", "10.0.0.2", 1234, 80)
    common = {"eni_scope": 0, "vpc_scope": 0, "eni_version": 0, "vpc_version": 0, "now_ns": 0}
    e.insert(k1, action_orig=10, action_reply=11, **common)
    from starfabric.fornax.packets import PacketBatch

    def pkt(vni: int) -> PacketBatch:
        return PacketBatch.from_columns(
            time_ns=[1], vni=vni, proto=6, src_hi=k1.src_hi, src_lo=k1.src_lo,
            dst_hi=k1.dst_hi, dst_lo=k1.dst_lo, sport=1234, dport=80, tcp_flags=0x10,
        )  # fmt: skip

    assert e.process(pkt(2)).outcome[0] == Outcome.MISS
    e.insert(k2, action_orig=20, action_reply=21, **common)
    r1, r2 = e.process(pkt(1)), e.process(pkt(2))
    assert (r1.action[0], r2.action[0]) == (10, 20) and r1.slot[0] != r2.slot[0]
    assert e.occupancy() == 2


def test_delete_modify_query_statuses(make_engine: Make) -> None:
    e = make_engine()
    insert_flows(e, [0, 1])
    assert e.delete(flow_keys([0, 0, 5])).tolist() == [
        Status.OK,
        Status.NOT_FOUND,
        Status.NOT_FOUND,
    ]
    assert e.process(packets([(0, 0, 0x10, 1, 0, 1)])).outcome[0] == Outcome.MISS
    st = e.modify(flow_keys([1, 5]), action_orig=77, aux=9, tcp_state=TcpState.ESTABLISHED)
    assert st.tolist() == [Status.OK, Status.NOT_FOUND]
    st, rec = e.query(flow_keys([1, 5]))
    assert st.tolist() == [Status.OK, Status.NOT_FOUND]
    assert rec["action_orig"][0] == 77 and rec["action_reply"][0] == 2 and rec["aux"][0] == 9
    assert rec["tcp_state"][0] == TcpState.ESTABLISHED
    assert rec[1]["slot"] == 0 and rec[1]["aux"] == 0  # not found: zeros
    c = e.counters()
    assert (c["delete_ok"], c["delete_not_found"], c["modify_ok"], c["query_ok"]) == (1, 2, 1, 1)
    with pytest.raises(ConfigError, match="tcp_state"):
        e.modify(flow_keys([1]), tcp_state=42)
    with pytest.raises(ConfigError, match="shape"):
        e.modify(flow_keys([1]), aux=[1, 2])


def test_version_bump_makes_stale_and_one_mismatch_event(make_engine: Make) -> None:
    e = make_engine()
    insert_flows(e, [0, 1], eni_scope=1, vpc_scope=1)
    insert_flows(e, [2], eni_scope=2, vpc_scope=1)
    assert e.bump_version(Scope.ENI, 1) == 1 and e.scope_version(Scope.ENI, 1) == 1
    res = e.process(packets([(0, 0, 0x10, 1, 0, 1), (0, 1, 0x10, 1, 0, 2), (2, 0, 0, 1, 0, 3)]))
    assert res.outcome.tolist() == [Outcome.STALE, Outcome.STALE, Outcome.HIT]
    assert res.reason[0] == Reason.ENI_VERSION
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.VERSION_MISMATCH]  # coalesced per session
    _, rec = e.query(flow_keys([0]))
    assert rec["pkts_orig"][0] == 0  # stale packets were not forwarded by hardware
    assert rec["stale"][0]
    stale, cur = e.dump(0, 100, stale_only=True)
    assert cur == 64 and sorted(stale["aux"].tolist()) == [0, 0]  # flows 0 and 1
    assert e.modify(flow_keys([0]), eni_version=1).tolist() == [Status.OK]
    assert e.process(packets([(0, 0, 0x10, 1, 0, 4)])).outcome[0] == Outcome.HIT
    e.bump_version(Scope.VPC, 1)
    res = e.process(packets([(0, 0, 0x10, 1, 0, 5)]))
    assert res.outcome[0] == Outcome.STALE and res.reason[0] == Reason.VPC_VERSION
    assert e.poll_events()["type"].tolist() == [EventType.VERSION_MISMATCH]  # re-armed
    with pytest.raises(ConfigError, match="scope id"):
        e.bump_version(Scope.VPC, 99)


def test_dump_in_chunks_and_filters(make_engine: Make) -> None:
    e = make_engine()
    insert_flows(e, list(range(0, 20)), eni_scope=0)
    insert_flows(e, list(range(20, 30)), eni_scope=3, eni_version=2, tcp_state=TcpState.ESTABLISHED)
    seen: list[int] = []
    cur = 0
    while cur < 64:
        chunk, cur = e.dump(cur, 7)
        assert len(chunk) <= 7
        seen += chunk["slot"].tolist()
    assert len(seen) == len(set(seen)) == 30
    assert len(e.dump(0, 100, eni_scope=3)[0]) == 10
    assert len(e.dump(0, 100, eni_version_below=1)[0]) == 20
    assert len(e.dump(0, 100, tcp_state=TcpState.ESTABLISHED)[0]) == 10
    with pytest.raises(ConfigError, match="cursor"):
        e.dump(65, 1)


def test_bad_scope_is_a_status(make_engine: Make) -> None:
    e = make_engine()
    assert insert_flows(e, [0], eni_scope=4).tolist() == [Status.BAD_SCOPE]
    assert e.counters()["insert_bad_scope"] == 1 and e.occupancy() == 0


def test_table_full_and_insert_failed_are_statuses_and_events(make_engine: Make) -> None:
    e = make_engine(capacity=64, bucket_size=4, ring_capacity=128, max_displacement=0)
    st = insert_flows(e, list(range(80)))
    ok = int((st == Status.OK).sum())
    assert ok + int((st == Status.INSERT_FAILED).sum()) + int((st == Status.TABLE_FULL).sum()) == 80
    assert (st == Status.INSERT_FAILED).any()  # no displacement: two full buckets fail early
    first_fail = int(np.argmax(st == Status.INSERT_FAILED))
    assert int((st[:first_fail] == Status.OK).sum()) < 64  # failed while slots were free
    types = set(e.poll_events()["type"].tolist())
    assert EventType.INSERT_FAILED in types
    e2 = make_engine(capacity=16, bucket_size=4, ring_capacity=64, max_displacement=64)
    st = insert_flows(e2, list(range(40)))
    assert (st == Status.OK).sum() == 16 and (st == Status.TABLE_FULL).sum() == 24
    ev = e2.poll_events()
    assert (ev["type"] == EventType.TABLE_FULL).sum() == 24 and (ev["slot"] == -1).all()


def test_fills_past_95_percent() -> None:
    e = FastEngine(small_config(capacity=65536, bucket_size=8, max_displacement=128,
                                ring_capacity=1024, eni_scopes=1, vpc_scopes=1))  # fmt: skip
    n = int(65536 * 0.97)
    i = np.arange(n, dtype=np.uint64)
    keys = FlowKeys.from_columns(vni=1, proto=6, src_lo=i | np.uint64(0xFFFF_0A00_0000),
                                 dst_lo=np.uint64(0xFFFF_0B00_0001), sport=80, dport=443)  # fmt: skip
    st = e.insert(keys, action_orig=1, action_reply=2, eni_scope=0, vpc_scope=0, eni_version=0,
                  vpc_version=0, now_ns=0)  # fmt: skip
    first_fail = int(np.argmax(st != Status.OK)) if (st != Status.OK).any() else n
    assert first_fail / 65536 >= 0.95
    assert e.counters()["displacements"] > 0


def test_drop_action(make_engine: Make) -> None:
    e = make_engine()  # drop_action = 99 in the small config
    insert_flows(e, [0], action_reply=99)
    res = e.process(packets([(0, 0, 0x10, 5, 0, 1), (0, 1, 0x10, 5, 0, 2)]))
    assert res.outcome.tolist() == [Outcome.HIT, Outcome.DROP_HW]
    assert e.counters()["bytes_forwarded"] == 5
    adds_up(e)


def test_port_stall_watchdog_and_hang_event(make_engine: Make) -> None:
    e = make_engine(watchdog_timeout_s=0.002)
    insert_flows(e, [0])
    e.stall_port(1)
    res = e.process(packets([(0, 0, 0x10, 1, 1, 1_000_000), (0, 0, 0x10, 1, 0, 1_500_000)]))
    assert res.outcome.tolist() == [Outcome.PORT_HUNG, Outcome.HIT]
    assert len(e.poll_events()) == 0
    e.scrub(2_900_000, 1)
    assert len(e.poll_events()) == 0
    e.scrub(3_000_000, 1)  # 2 ms after the first waiting packet
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.PIPELINE_HANG] and ev["port"][0] == 1
    assert ev["detail"][0] == 2_000_000
    e.process(packets([(0, 0, 0x10, 1, 1, 9_000_000)]))
    assert len(e.poll_events()) == 0  # once per stall
    e.unstall_port(1)
    assert e.process(packets([(0, 0, 0x10, 1, 1, 9_100_000)])).outcome[0] == Outcome.HIT
    c = e.counters()
    assert c["port_hung"] == 2 and c["pipeline_hang"] == 1
    adds_up(e)
    with pytest.raises(DataError, match="port 5"):
        e.process(packets([(0, 0, 0x10, 1, 5, 1)]))


def test_ring_overflow_is_counted_and_reported(make_engine: Make) -> None:
    e = make_engine(ring_capacity=4, udp_unreplied_s=1.0)
    insert_flows(e, [1, 6, 11, 16, 21, 26, 31, 36])  # all UDP (PROTOS[1])
    e.scrub(2_000_000_000, 64)  # 8 AGED events into a ring of 4
    c = e.counters()
    assert c["aged"] == 8 and c["events_lost"] == 4 and c["events_raised"] == 8
    first = e.poll_events()
    assert first["type"].tolist() == [EventType.AGED] * 4
    second = e.poll_events()
    assert second["type"].tolist() == [EventType.RING_OVERFLOW] and second["detail"][0] == 4
    assert e.counters()["ring_overflow"] == 1


def test_aged_event_carries_final_state(make_engine: Make) -> None:
    e = make_engine(udp_unreplied_s=1.0)
    insert_flows(e, [1], aux=555, action_orig=5, action_reply=6, eni_scope=2, vpc_scope=1)
    e.process(packets([(1, 0, 0, 70, 0, 10), (1, 0, 0, 30, 0, 20)]))
    e.scrub(2_000_000_000, 64)
    (ev,) = e.poll_events()
    assert ev["type"] == EventType.AGED and ev["aux"] == 555 and ev["bytes_orig"] == 100
    assert (ev["pkts_orig"], ev["action_orig"], ev["eni_scope"], ev["vpc_scope"]) == (2, 5, 2, 1)
    assert ev["src_lo"] == flow(1)["src_lo"] and ev["time_ns"] == 2_000_000_000


def test_config_errors_are_one_line() -> None:
    with pytest.raises(ConfigError, match="multiple of bucket_size"):
        FastEngine(capacity=100)
    with pytest.raises(ConfigError, match="unknown field"):
        ReferenceEngine(capasity=64)
