"""Real captures (Zeek test traces, tests/data/pcap) through both engines, manager-style.

Each packet goes through the pipeline; a MISS is "punted": the session is inserted with the
state its first packet implies (initial_tcp_state), as the manager will do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from starfabric.fornax.engine import (
    EventType,
    FastEngine,
    FlowKeys,
    Outcome,
    ReferenceEngine,
    SessionEngine,
    TcpState,
    initial_tcp_state,
)
from starfabric.fornax.packets import PROTO_TCP
from starfabric.fornax.pcap import read_pcap

from .fornax_engine_helpers import assert_same_state, small_config

PCAPS = Path(__file__).parents[2] / "data" / "pcap"


def replay(e: SessionEngine, path: Path) -> tuple[list[int], list[int]]:
    batch, _ = read_pcap(path)
    outcomes, states = [], []
    for i in range(len(batch)):
        one = batch.take([i])
        res = e.process(one)
        if res.outcome[0] == Outcome.MISS:
            flags = int(one.tcp_flags[0])
            e.insert(FlowKeys.from_batch(one), action_orig=1, action_reply=2, eni_scope=0,
                     vpc_scope=0, eni_version=0, vpc_version=0, now_ns=int(one.time_ns[0]),
                     tcp_state=initial_tcp_state(flags) if one.proto[0] == PROTO_TCP else 0)  # fmt: skip
        outcomes.append(int(res.outcome[0]))
        states.append(int(res.tcp_state[0]))
    return outcomes, states


def test_vxlan_http_session_lifecycle() -> None:
    e = FastEngine(small_config(capacity=64, n_ports=1))
    outcomes, states = replay(e, PCAPS / "zeek_vxlan_tcp_http.pcap")
    assert outcomes[0] == Outcome.MISS and set(outcomes[1:]) == {Outcome.HIT}
    S = TcpState
    assert states[1:] == [S.SYN_RECV, S.ESTABLISHED, *[S.ESTABLISHED] * 6, S.FIN_WAIT,
                          S.LAST_ACK, S.TIME_WAIT]  # fmt: skip
    e.scrub(10**12, 64)
    (ev,) = e.poll_events()
    assert ev["type"] == EventType.CLOSED and ev["vni"] == 1
    assert (ev["pkts_orig"], ev["pkts_reply"]) == (6, 5)  # the SYN itself was punted
    assert ev["sport"] == 40354 and ev["dport"] == 80  # client is the initiator


@pytest.mark.parametrize(
    "name", ["zeek_nmap_vsn_syn_rst_udp.pcap", "zeek_tcp_handshake_fin.pcap",
             "zeek_icmp_echo.pcap", "zeek_icmp6_ping.pcap", "zeek_udp_dns.pcap"],
)  # fmt: skip
def test_real_traces_fast_equals_reference(name: str) -> None:
    cfg = small_config(capacity=4096, n_ports=4, ring_capacity=4096)
    fast, ref = FastEngine(cfg), ReferenceEngine(cfg)
    of, sf = replay(fast, PCAPS / name)
    orf, sr = replay(ref, PCAPS / name)
    assert of == orf and sf == sr
    assert_same_state(fast, ref)
    fast.scrub(10**13, 4096)
    ref.scrub(10**13, 4096)
    np.testing.assert_array_equal(fast.poll_events(), ref.poll_events())
    assert fast.occupancy() == 0
