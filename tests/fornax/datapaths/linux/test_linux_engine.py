"""LinuxEngine on real packets: entry ops as conntrack entries, per-packet outcomes from the
verdict log agreeing with what comes out of the nic, O(1) version bumps, the kernel's events
(entry deleted under the manager, timer expiry, ENOBUFS -> RING_OVERFLOW and resync by dump).
Skipped, with the reason, without root / nftables / conntrack."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from fornax.datapaths.linux.linux_fixtures import lab, needs_kernel, small_engine_config
from fornax.engine.fornax_engine_helpers import flow_keys, insert_flows, packets
from starfabric.fornax.datapaths.linux import KERNEL_DIFFERENCES, Lab, LinuxEngine
from starfabric.fornax.engine import Scope, Status, TcpState
from starfabric.fornax.engine.interface import EventType, Outcome, Reason
from starfabric.fornax.packets import TCP_ACK, TCP_SYN

__all__ = ["lab"]  # the module-scoped fixture
pytestmark = needs_kernel
DROP = 0xFFFF_FFFF
SYN, SYNACK, ACK = TCP_SYN, TCP_SYN | TCP_ACK, TCP_ACK


@pytest.fixture
def engine(lab: Lab) -> Iterator[LinuxEngine]:
    e = LinuxEngine(small_engine_config(tcp_syn_sent_s=60, udp_unreplied_s=60, icmp_s=60), lab)
    try:
        yield e
    finally:
        e.close()


def test_ops_and_real_packets(engine: LinuxEngine) -> None:
    """Inserted sessions forward their packets (and only they come out of the nic); a drop
    action drops on the wire; a packet with no entry is a MISS that stays in the nic."""
    st = insert_flows(engine, [0, 1, 2], tcp_state=TcpState.SYN_SENT, aux=77)
    assert st.tolist() == [Status.OK] * 3
    assert insert_flows(engine, [0]).tolist() == [Status.EXISTS]
    assert insert_flows(engine, [5], action_reply=DROP).tolist() == [Status.OK]
    # the SYN was the MISS the manager inserted on: the handshake goes on from SYN_SENT
    pb = packets([(0, 1, SYNACK, 60, 0, 2), (0, 0, ACK, 60, 0, 3),
                  (1, 0, 0, 60, 1, 4), (1, 1, 0, 60, 1, 5), (2, 0, 0, 60, 0, 6),
                  (5, 0, SYN, 60, 0, 7), (5, 1, SYNACK, 60, 0, 8), (10, 0, SYN, 60, 0, 9)])  # fmt: skip
    r = engine.process(pb)
    o = r.outcome.tolist()
    assert o == [Outcome.HIT] * 6 + [Outcome.DROP_HW, Outcome.MISS]
    assert r.reply.tolist() == [1, 0, 0, 1, 0, 0, 1, 255]
    assert r.action.tolist()[:3] == [2, 1, 1] and r.action[6] == DROP
    np.testing.assert_array_equal(engine.last_forwarded, r.outcome == Outcome.HIT)
    assert engine.wire["misforwarded"] == 0 and engine.wire["passed_not_seen"] == 0
    status, rec = engine.query(flow_keys([0, 1, 10]))
    assert status.tolist() == [Status.OK, Status.OK, Status.NOT_FOUND]
    assert rec["tcp_state"][0] == TcpState.ESTABLISHED
    assert rec["aux"][:2].tolist() == [77, 77]
    assert rec["pkts_orig"][:2].tolist() == [1, 1] and rec["pkts_reply"][:2].tolist() == [1, 1]
    assert engine.occupancy() == 4
    assert engine.delete(flow_keys([1, 10])).tolist() == [Status.OK, Status.NOT_FOUND]
    assert engine.modify(flow_keys([2]), aux=5, action_orig=9).tolist() == [Status.OK]
    _, rec = engine.query(flow_keys([2]))
    assert (int(rec["aux"][0]), int(rec["action_orig"][0])) == (5, 9)
    assert len(engine.poll_events()) == 0  # software's own delete raises nothing
    assert "entry.track" in {f"entry.{k.split('.', 1)[1]}" for k in KERNEL_DIFFERENCES if "." in k}


def test_version_bump_is_one_transaction_and_stales_packets(engine: LinuxEngine) -> None:
    """A bump is one nft transaction whatever the sessions in the scope; their packets are
    then STALE (not forwarded), one VERSION_MISMATCH per session until modify."""
    ids = list(range(0, 60, 5))  # TCP flows
    assert (insert_flows(engine, ids, tcp_state=TcpState.ESTABLISHED) == Status.OK).all()
    before = engine.pipeline.transactions
    engine.bump_version(Scope.ENI, 0)
    assert engine.pipeline.transactions - before == 1
    pb = packets([(i, 0, ACK, 60, 0, k) for k, i in enumerate(ids + ids)])
    r = engine.process(pb)
    assert (r.outcome == Outcome.STALE).all() and (r.reason == Reason.ENI_VERSION).all()
    assert not engine.last_forwarded.any()
    ev = engine.poll_events()
    assert (ev["type"] == EventType.VERSION_MISMATCH).sum() == len(ids)
    assert engine.modify(flow_keys(ids[:3]), eni_version=1).tolist() == [Status.OK] * 3
    r = engine.process(packets([(i, 0, ACK, 60, 0, 100 + k) for k, i in enumerate(ids[:4])]))
    assert r.outcome.tolist() == [Outcome.HIT] * 3 + [Outcome.STALE]
    assert engine.last_forwarded.tolist() == [True, True, True, False]
    stale, _ = engine.dump(0, 1000, stale_only=True)
    assert len(stale) == len(ids) - 3


def test_entry_deleted_under_the_manager_is_an_event(engine: LinuxEngine) -> None:
    """An entry removed behind the manager's back (conntrack -D) arrives as AGED with the
    session's aux and actions (kept beside the kernel: DESTROY carries no labels)."""
    insert_flows(engine, [0, 1], tcp_state=TcpState.ESTABLISHED, aux=4242, action_orig=3)
    assert engine.kernel_delete(flow_keys([0])) == 1
    time.sleep(0.05)
    ev = engine.poll_events()
    assert ev["type"].tolist() == [EventType.AGED]
    assert (int(ev["aux"][0]), int(ev["action_orig"][0]), int(ev["sport"][0])) == (4242, 3, 1000)
    assert engine.occupancy() == 1


def test_kernel_timer_ages_and_scrub_reaps(lab: Lab) -> None:
    """UDP unreplied after the kernel's 1 s timer: scrub walks the table, the kernel evicts
    the entry, the DESTROY becomes AGED with its final counters."""
    e = LinuxEngine(small_engine_config(udp_unreplied_s=1), lab)
    try:
        insert_flows(e, [1, 6], aux=9)
        e.process(packets([(1, 0, 0, 60, 0, 1), (6, 0, 0, 60, 0, 2), (6, 0, 0, 60, 0, 3)]))
        assert e.scrub(10).expired == 0
        deadline = time.monotonic() + 5
        expired = 0
        while expired < 2 and time.monotonic() < deadline:
            time.sleep(0.3)
            expired += e.scrub(10).expired
        assert expired == 2
        ev = e.poll_events()
        assert sorted(ev["pkts_orig"].tolist()) == [1, 2]
        assert set(ev["type"].tolist()) == {EventType.AGED} and (ev["aux"] == 9).all()
        assert e.occupancy() == 0
    finally:
        e.close()


def test_enobufs_is_ring_overflow_and_dump_resyncs(lab: Lab) -> None:
    """A full netlink receive buffer loses DESTROY events: the next poll raises RING_OVERFLOW
    and a dump (the patrol's resync) shows what the table really holds."""
    e = LinuxEngine(small_engine_config(), lab, event_rcvbuf=4096)
    try:
        ids = list(range(0, 90))
        ok = insert_flows(e, ids, tcp_state=TcpState.ESTABLISHED) == Status.OK
        gone = [i for i, k in zip(ids, ok, strict=True) if k][:60]
        assert e.kernel_delete(flow_keys(gone)) == len(gone)
        time.sleep(0.05)
        ev = e.poll_events()
        assert EventType.RING_OVERFLOW in ev["type"].tolist()
        assert e.counters()["events_lost"] >= 1
        assert (ev["type"] == EventType.AGED).sum() < len(gone)
        table, cursor = e.dump(0, 10_000)
        assert cursor == e.config.capacity and len(table) == int(ok.sum()) - len(gone)
    finally:
        e.close()


def test_batched_creates_equal_pyroute2s(engine: LinuxEngine) -> None:
    """ctread's own create messages (sent many to a datagram) make the same kernel entries as
    pyroute2's NFCTSocket for TCP, UDP, ICMP and ICMPv6 keys, with status bits."""
    keys = engine._keys(flow_keys([0, 1, 2, 3, 5, 6]))
    items = [(k, 0x40000000 | 7, (5 << 64) | 99, 50, 3 if k[1] == 6 else 0, 6 * (i % 2))
             for i, k in enumerate(keys)]  # fmt: skip

    def table() -> list[dict[str, int]]:
        rows = sorted(engine.ct.dump(), key=lambda r: (r["proto"], r["src_lo"], r["sport"]))
        return [{k: v for k, v in r.items() if k not in ("id", "timeout")} for r in rows]

    for k, mark, labels, tmo, ts, status in items:
        assert engine.ct.create(k, mark=mark, labels=labels, timeout_s=tmo, tcp_state=ts,
                                status=status) == 0  # fmt: skip
    by_pyroute2 = table()
    engine.ct.flush()
    assert engine.ct.create_many(items) == [0] * len(items)
    assert table() == by_pyroute2 and len(by_pyroute2) == len(items)
    assert engine.ct.create_many(items[:1]) == [17]  # EEXIST
