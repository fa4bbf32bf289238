"""The experiments' traffic: distinct background keys the policy allows, replies that undo
them, the hero shape's 6-packet connections, and the policy update of E5."""

from __future__ import annotations

import numpy as np

from starfabric.fornax.experiments import traffic
from starfabric.fornax.keys import canonicalize_columns, key_hash
from starfabric.fornax.vpc import compile_policy, evaluate


def _keys(b):  # type: ignore[no-untyped-def]
    return key_hash(canonicalize_columns(b.vni, b.proto, b.src_hi, b.src_lo, b.dst_hi,
                                         b.dst_lo, b.sport, b.dport))  # fmt: skip


def test_background_sessions_are_distinct_allowed_and_replies_match() -> None:
    n = 200_000
    ids = np.arange(n, dtype=np.int64)
    first = traffic.background_packets(ids, 0, tcp_share=0.5)
    assert len(np.unique(_keys(first))) == n
    pol = compile_policy(traffic.vpc_spec(n))
    assert (evaluate(pol, first.take(np.arange(0, n, 97))).reason == 0).all()
    reply = traffic.keepalive(ids[:1000], 0, 10**6, tcp_share=0.5)
    assert (_keys(reply) == _keys(first.take(np.arange(1000)))).all()
    assert (first.proto[:1000] == reply.proto).all()


def test_policy_update_refuses_udp_of_the_touched_enis_only() -> None:
    n = 4096
    ids = np.arange(n, dtype=np.int64)
    first = traffic.background_packets(ids, 0)
    pol = compile_policy(traffic.vpc_spec(n, deny_udp_enis=16))
    ok = evaluate(pol, first).reason == 0
    touched = ids % traffic.N_ENIS < 16
    assert not ok[touched].any() and ok[~touched].all()


def test_hero_connections_have_six_packets() -> None:
    spec = traffic.vpc_spec(1000)
    counts: dict[int, int] = {}
    for wb in traffic.new_connections(spec, 2000, 0.0, 0.2, six_packets=True):
        for c, k in zip(*np.unique(wb.conn, return_counts=True), strict=True):
            counts[int(c)] = counts.get(int(c), 0) + int(k)
    sizes = np.array(list(counts.values()))
    assert len(sizes) > 100
    # the generator's window bookkeeping may attribute a packet of two connections to each
    # other rarely; the shape is 6 packets per connection
    assert (sizes == 6).mean() > 0.98 and sizes.sum() == 6 * len(sizes)
