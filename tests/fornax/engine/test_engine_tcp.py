"""TCP tracking through the pipeline: nf_conntrack transitions, teardown, reuse; UDP and ICMP."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from starfabric.fornax.engine import EventType, Outcome, Reason, SessionEngine, Status, TcpState
from starfabric.fornax.engine.tcp import TRANSITIONS, TcpEvent, initial_tcp_state, tcp_event
from starfabric.fornax.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN

from .fornax_engine_helpers import flow_keys, insert_flows, packets

S = 1_000_000_000
SYN, SYNACK, ACK, FIN, RST = TCP_SYN, TCP_SYN | TCP_ACK, TCP_ACK, TCP_FIN | TCP_ACK, TCP_RST
TCP_FLOW = 0  # flow 0 is TCP (helpers.PROTOS[0])
UDP_FLOW = 1
ICMP_FLOW = 2


def run(
    e: SessionEngine, seq: list[tuple[int, int]], t0: int = 0, fid: int = TCP_FLOW
) -> list[int]:
    """Send (reverse?, flags) packets of one flow; return the TCP state after each."""
    res = e.process(packets([(fid, r, f, 100, 0, t0 + k) for k, (r, f) in enumerate(seq)]))
    assert set(res.outcome.tolist()) <= {Outcome.HIT}
    return res.tcp_state.tolist()


def new_session(e: SessionEngine, state: int = TcpState.SYN_SENT, fid: int = TCP_FLOW) -> None:
    assert insert_flows(e, [fid], tcp_state=state).tolist() == [0]


def test_table_matches_named_kernel_transitions() -> None:
    T = TRANSITIONS
    o, r = 0, 1
    assert T[o, TcpEvent.SYN, TcpState.NONE] == TcpState.SYN_SENT
    assert T[r, TcpEvent.SYNACK, TcpState.SYN_SENT] == TcpState.SYN_RECV
    assert T[o, TcpEvent.ACK, TcpState.SYN_RECV] == TcpState.ESTABLISHED
    assert T[r, TcpEvent.SYN, TcpState.SYN_SENT] == TcpState.SYN_SENT2  # simultaneous open
    assert T[o, TcpEvent.SYN, TcpState.TIME_WAIT] == TcpState.SYN_SENT  # reuse
    assert T[r, TcpEvent.SYN, TcpState.TIME_WAIT] == TcpState.SYN_SENT
    assert all(T[d, TcpEvent.RST, s] == TcpState.CLOSE for d in (0, 1) for s in range(1, 10))
    assert tcp_event(SYNACK) == TcpEvent.SYNACK and tcp_event(RST | ACK) == TcpEvent.RST
    assert initial_tcp_state(SYN) == TcpState.SYN_SENT
    assert initial_tcp_state(FIN) == TcpState.NONE


def test_three_way_handshake_and_close(make_engine: Callable[..., SessionEngine]) -> None:
    e = make_engine(tcp_time_wait_s=120.0)
    new_session(e)
    st = run(e, [(1, SYNACK), (0, ACK), (0, FIN), (1, ACK), (1, FIN), (0, ACK)])
    assert st == [
        TcpState.SYN_RECV,
        TcpState.ESTABLISHED,
        TcpState.FIN_WAIT,
        TcpState.CLOSE_WAIT,
        TcpState.LAST_ACK,
        TcpState.TIME_WAIT,
    ]
    e.scrub(100 * S, 64)
    assert len(e.poll_events()) == 0  # TIME_WAIT lasts 120 s
    e.scrub(121 * S, 64)
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.CLOSED]
    assert ev["pkts_orig"][0] == 3 and ev["pkts_reply"][0] == 3
    assert ev["bytes_orig"][0] == 300
    assert e.occupancy() == 0


def test_simultaneous_open(make_engine: Callable[..., SessionEngine]) -> None:
    e = make_engine()
    new_session(e)
    st = run(e, [(1, SYN), (0, SYNACK), (1, SYNACK), (0, ACK)])
    assert st == [TcpState.SYN_SENT2, TcpState.SYN_RECV, TcpState.SYN_RECV, TcpState.ESTABLISHED]


def test_simultaneous_close(make_engine: Callable[..., SessionEngine]) -> None:
    e = make_engine()
    new_session(e, TcpState.ESTABLISHED)
    st = run(e, [(0, FIN), (1, FIN), (0, ACK), (1, ACK)])
    assert st == [TcpState.FIN_WAIT, TcpState.LAST_ACK, TcpState.TIME_WAIT, TcpState.TIME_WAIT]


def test_rst_closes_and_close_expires_after_its_timeout(
    make_engine: Callable[..., SessionEngine],
) -> None:
    e = make_engine(tcp_close_s=10.0)
    new_session(e, TcpState.ESTABLISHED)
    assert run(e, [(1, RST)]) == [TcpState.CLOSE]
    e.scrub(9 * S, 64)
    assert e.occupancy() == 1
    e.scrub(11 * S, 64)
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.CLOSED] and ev["tcp_state"][0] == TcpState.CLOSE


def test_time_wait_reuse_by_new_syn(make_engine: Callable[..., SessionEngine]) -> None:
    e = make_engine()
    new_session(e, TcpState.TIME_WAIT)
    run(e, [(0, ACK), (1, ACK)])
    res = e.process(packets([(TCP_FLOW, 1, SYN, 60, 0, 10)]))  # the *responder* reconnects
    # as nf_conntrack does, the old session ends and the SYN is a new connection to decide:
    # the datapath never forwards it with the old session's actions
    assert res.outcome[0] == Outcome.MISS and res.reason[0] == Reason.TCP_REOPEN
    assert res.slot[0] == -1 and res.action[0] == 0
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.CLOSED] and ev["reason"][0] == Reason.TCP_REOPEN
    assert ev["pkts_orig"][0] == 1 and ev["pkts_reply"][0] == 1  # the old incarnation
    st, _ = e.query(flow_keys([TCP_FLOW]))
    assert st[0] == Status.NOT_FOUND and e.occupancy() == 0
    c = e.counters()
    assert c["tcp_reopen"] == 1 and c["miss"] == 1 and c["closed"] == 1


def test_invalid_and_ignored_segments_keep_state(make_engine: Callable[..., SessionEngine]) -> None:
    e = make_engine()
    new_session(e)
    res = e.process(packets([(TCP_FLOW, 0, SYNACK, 1, 0, 1), (TCP_FLOW, 1, ACK, 1, 0, 2)]))
    assert res.reason.tolist() == [Reason.TCP_INVALID, Reason.TCP_IGNORED]
    assert res.tcp_state.tolist() == [TcpState.SYN_SENT, TcpState.SYN_SENT]
    c = e.counters()
    assert c["tcp_invalid"] == 1 and c["tcp_ignored"] == 1 and c["hit"] == 2


def test_udp_unreplied_replied_stream(make_engine: Callable[..., SessionEngine]) -> None:
    """nf_conntrack_proto_udp: a reply keeps the unreplied timeout until the entry is older
    than 2 s; a later packet makes it a stream (stream timeout, ASSURED)."""
    e = make_engine(udp_unreplied_s=30.0, udp_assured_s=120.0)
    insert_flows(e, [UDP_FLOW, UDP_FLOW + 5, UDP_FLOW + 10])  # flows 1, 6, 11: UDP
    e.process(packets([(f, 0, 0, 10, 0, 0) for f in (UDP_FLOW, UDP_FLOW + 5, UDP_FLOW + 10)]))
    e.process(packets([(UDP_FLOW, 1, 0, 10, 0, 1), (UDP_FLOW + 10, 1, 0, 10, 0, 1)]))
    e.process(packets([(UDP_FLOW, 0, 0, 10, 0, 3 * S)]))  # flow 1, 3 s old, replied: stream
    _, rec = e.query(flow_keys([UDP_FLOW, UDP_FLOW + 10]), now_ns=3 * S)
    assert rec["remaining_ns"].tolist() == [120 * S, 27 * S + 1]
    e.scrub(31 * S, 64)
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.AGED] * 2 and set(ev["proto"]) == {17}
    assert e.occupancy() == 1
    e.scrub(124 * S, 64)
    assert e.poll_events()["type"].tolist() == [EventType.AGED]


def test_icmp_echo_request_and_reply_share_one_session(
    make_engine: Callable[..., SessionEngine],
) -> None:
    e = make_engine(icmp_s=30.0)
    insert_flows(e, [ICMP_FLOW], action_orig=11, action_reply=12)
    res = e.process(packets([(ICMP_FLOW, 0, 0, 84, 0, 0), (ICMP_FLOW, 1, 0, 84, 0, 1)]))
    assert res.outcome.tolist() == [Outcome.HIT, Outcome.HIT]
    assert res.action.tolist() == [11, 12] and res.slot[0] == res.slot[1]
    e.scrub(29 * S, 64)
    assert e.occupancy() == 1
    e.scrub(32 * S, 64)
    assert e.occupancy() == 0
    assert np.array_equal(e.poll_events()["type"], [EventType.AGED])
