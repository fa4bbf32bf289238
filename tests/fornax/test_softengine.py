"""The software datapath through the engine contract (softengine.py) agrees with the
reference engine on the same operations: statuses, records read back, packet outcomes,
actions, TCP states, scope versions and aging events."""

from __future__ import annotations

import numpy as np
import pytest

from fornax.engine.fornax_engine_helpers import flow_keys, insert_flows, packets, small_config
from starfabric.errors import ConfigError
from starfabric.fornax.engine import ReferenceEngine, Scope, Status
from starfabric.fornax.engine.interface import EventType, Outcome
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
