"""Restart: the manager is dropped mid-run, a new one recovers from the engine (chunked dumps
while the engine keeps forwarding), every session keeps forwarding and the SNAT allocations
are rebuilt exactly."""

from __future__ import annotations

import numpy as np
import pytest

from starfabric.fornax.engine import FlowKeys, Outcome
from starfabric.fornax.manager import Manager, ManagerConfig
from starfabric.fornax.manager.decide import original_from_entries
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.vpc import compile_policy

from .conftest import NO_AGING, make_engine
from .helpers import example_spec, example_traffic


def _probe(keys: FlowKeys, t: int) -> PacketBatch:
    """One ACK of each session in its ORIGINAL direction."""
    return PacketBatch.from_columns(
        vni=keys.vni, proto=keys.proto, src_hi=keys.src_hi, src_lo=keys.src_lo,
        dst_hi=keys.dst_hi, dst_lo=keys.dst_lo, sport=keys.sport, dport=keys.dport,
        tcp_flags=0x10, time_ns=t, length=80,
    )  # fmt: skip


def test_restart_recovers_every_session_and_nat_port(engine_kind: str) -> None:
    policy = compile_policy(example_spec())
    eng = make_engine(engine_kind, capacity=1 << 12, **NO_AGING)
    m = Manager(eng, policy)
    batches = list(example_traffic(duration=0.2, cps=2000))
    half = len(batches) // 2
    for wb in batches[:half]:
        m.process(wb.packets)
        m.tick(wb.t_end_ns)
    bitmap, used = m.nat.bitmap.copy(), m.nat.used.copy()
    assert m.nat.allocated() > 0
    softpath = m.softpath
    offered, hw_before = m.ledger.offered, eng.occupancy()
    t = m.now_ns
    del m  # the manager process dies; the NIC (and the software datapath) keep running

    live, cursor = [], 0
    while cursor < eng.config.capacity:
        recs, cursor = eng.dump(cursor, 1 << 16)
        live.append(recs)
    entries = np.concatenate(live)
    assert len(entries) == hw_before > 0
    keys = original_from_entries(entries)
    hits: list[np.ndarray] = []

    def forward() -> None:  # traffic between recovery chunks: hardware alone forwards it
        r = eng.process(_probe(keys, t + 1 + len(hits)))
        hits.append(r.outcome)

    m2 = Manager.recover(eng, policy, ManagerConfig(recover_chunk=64), softpath=softpath,
                         between_chunks=forward)  # fmt: skip
    assert len(hits) >= len(entries) // 64 - 1 >= 2  # traffic ran between the chunks
    for h in hits:  # every session kept forwarding (or dropping, for drop sessions) in HW
        assert np.isin(h, (Outcome.HIT, Outcome.DROP_HW)).all()
    np.testing.assert_array_equal(m2.nat.bitmap[: len(bitmap)], bitmap)
    np.testing.assert_array_equal(m2.nat.used[: len(used)], used)
    assert m2.summary()["counts"]["recovered_entries"] == hw_before
    # the new manager carries on: new connections get fresh ports, never a held one
    for wb in batches[half:]:
        m2.process(wb.packets)
        m2.tick(wb.t_end_ns)
    m2.ledger.check()
    assert m2.ledger.offered + offered == sum(len(b.packets) for b in batches)
    final = np.concatenate(
        [eng.dump(c, 1 << 16)[0] for c in range(0, eng.config.capacity, 1 << 16)]
    )
    from starfabric.fornax.manager import cookie

    held = cookie.has_nat(final["aux"])
    pairs = set(zip(cookie.nat_ip(final["aux"][held]).tolist(),
                    cookie.nat_port(final["aux"][held]).tolist(), strict=True))  # fmt: skip
    assert len(pairs) == int(held.sum())  # no (public IP, port) held twice


def test_recover_reads_the_surviving_software_sessions() -> None:
    """Sessions hardware could not take live in the software datapath; their ports count."""
    policy = compile_policy(example_spec())
    eng = make_engine("fast", capacity=64, bucket_size=4, max_displacement=4, **NO_AGING)
    m = Manager(eng, policy, ManagerConfig(promote_per_tick=0))
    for wb in example_traffic(duration=0.2, cps=2000):
        m.process(wb.packets)
    assert m.softpath.occupancy() > 0
    want = m.nat.bitmap.copy()
    m2 = Manager.recover(eng, policy, softpath=m.softpath)
    np.testing.assert_array_equal(m2.nat.bitmap, want)
    with pytest.raises(AssertionError):  # and the software half matters
        np.testing.assert_array_equal(Manager.recover(eng, policy).nat.bitmap, want)
