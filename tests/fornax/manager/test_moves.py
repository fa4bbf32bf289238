"""A move to hardware by software's columns (moves.Datapaths: SoftEngine.move_columns, then
delete by slot) does what a move by the contract's records does (SoftEngine.records ->
ORIGINAL keys -> insert, then delete by key): the same hardware entries and statuses, and
the same sessions left in software, also when hardware refuses some; and hardware holds
what was inserted into software (actions, scopes, cookie, TCP state) at its own versions."""

from __future__ import annotations

import numpy as np

from fornax.engine.fornax_engine_helpers import flow_keys, small_config
from starfabric.fornax.engine import ReferenceEngine, Scope, Status
from starfabric.fornax.manager import cookie
from starfabric.fornax.manager.config import TokenBucket
from starfabric.fornax.manager.decide import original_from_entries
from starfabric.fornax.manager.driver import EngineDriver
from starfabric.fornax.manager.metrics import Metrics
from starfabric.fornax.manager.moves import Datapaths
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6
from starfabric.fornax.softengine import SoftEngine
from starfabric.fornax.softpath import SoftPath, SoftPathConfig

IDS = list(range(70))


def _inserted() -> dict[str, np.ndarray]:
    """What `_software` inserts, per flow of IDS (the ground truth a move must carry)."""
    keys = flow_keys(IDS)
    i = np.arange(len(IDS))
    icmp = np.isin(keys.proto, (PROTO_ICMP, PROTO_ICMPV6))  # the cookie keeps the ICMP word
    return {"action_orig": i % 5, "action_reply": 10 + i % 3, "eni_scope": i % 2,
            "vpc_scope": (i // 2) % 2, "tcp_state": (i % 4).astype(np.uint8),
            "aux": cookie.pack(i % 3 == 0, i, 1024 + i, icmp, keys.dport)}  # fmt: skip


def _software() -> tuple[SoftEngine, np.ndarray]:
    """A software engine holding flows IDS (mixed protocols, cookies, TCP states, times)."""
    cfg = small_config(capacity=1024)
    sw = SoftEngine(SoftPath(cfg, SoftPathConfig(capacity=256)))
    st, slots = sw.insert_slots(
        flow_keys(IDS), eni_version=0, vpc_version=0, now_ns=1000, **_inserted()
    )
    assert (st == Status.OK).all()
    sw.bump_version(Scope.VPC, 1)  # software versions differ from hardware's: not carried
    return sw, slots


def _hardware() -> EngineDriver:
    eng = ReferenceEngine(small_config(capacity=48, bucket_size=4, max_displacement=4))
    eng.bump_version(Scope.ENI, 1)
    return EngineDriver(eng, Metrics(), TokenBucket(1e12, 1 << 30))


def _by_records(sw: SoftEngine, hw: EngineDriver, slots: np.ndarray) -> np.ndarray:
    recs = sw.records(slots)
    keys = original_from_entries(recs)
    st = hw.insert_columns(keys, {f: recs[f] for f in recs.dtype.names or ()})
    sw.delete(keys.take(np.flatnonzero(st == Status.OK)))
    return np.asarray(st)


def test_a_move_by_columns_is_a_move_by_records() -> None:
    (sw_a, slots), (sw_b, _) = _software(), _software()
    hw_a, hw_b = _hardware(), _hardware()
    pick = slots[::-1][:60]  # more than hardware holds: some are refused and stay
    st_a = Datapaths(hw_a, sw_a).to_hardware(pick)
    st_b = _by_records(sw_b, hw_b, pick)
    np.testing.assert_array_equal(st_a, st_b)
    assert (st_a == Status.OK).any() and (st_a != Status.OK).any()
    dump_a, _ = hw_a.engine.dump(0, 1 << 10)
    dump_b, _ = hw_b.engine.dump(0, 1 << 10)
    np.testing.assert_array_equal(dump_a, dump_b)
    moved = np.flatnonzero(st_a == Status.OK)  # rows of `pick`, slots in IDS order
    flows = [IDS[int(np.flatnonzero(slots == s)[0])] for s in pick[moved]]
    qs, rec = hw_a.engine.query(flow_keys(flows))
    assert (qs == Status.OK).all()
    truth = _inserted()
    for f, col in truth.items():
        np.testing.assert_array_equal(rec[f], col[flows], err_msg=f)
    np.testing.assert_array_equal(rec["eni_version"], rec["eni_scope"])  # ENI 1 bumped once
    np.testing.assert_array_equal(rec["vpc_version"], 0)
    assert sw_a.occupancy() == sw_b.occupancy() == len(IDS) - int((st_a == Status.OK).sum())
    live_a, live_b = sw_a.live(slots), sw_b.live(slots)
    np.testing.assert_array_equal(live_a, live_b)
    np.testing.assert_array_equal(sw_a.records(slots[live_a]), sw_b.records(slots[live_b]))
