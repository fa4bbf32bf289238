"""OVS's dynamic flow limit: the adjustment rule, refusal of new flows above the limit (they
stay in the software datapath), the 100 ms idle timeout above it and the flush above 2x."""

from __future__ import annotations

import numpy as np

from starfabric.fornax.baselines import DynamicFlowLimit, FlowLimitConfig, SoftwareCentricConfig
from starfabric.fornax.manager import Final

from .helpers import ACK, controller, web_packets


def test_limit_shrinks_on_slow_dumps_and_grows_on_fast_ones() -> None:
    fl = DynamicFlowLimit(FlowLimitConfig())
    assert fl.limit == 10000
    assert fl.after_dump(5000, 3000) == 3333  # > 2 s: divided by the duration in seconds
    assert fl.after_dump(5000, 1500) == 2499  # > 1.3 s: three quarters
    assert fl.after_dump(2000, 500) == 3499  # < 1 s and below the dump rate: +1000
    assert fl.after_dump(100, 500) == 3499  # dump rate 200 flows/s: no growth
    assert fl.after_dump(2000, 1100) == 3499  # between 1 and 1.3 s: unchanged
    assert fl.after_dump(5000, 100_000) == 1000  # floor
    for _ in range(300):
        fl.after_dump(10**6, 10)
    assert fl.limit == 200000  # ceiling (flow-limit)
    assert fl.dump_duration_ms(200_000) == 1000  # 5 us per flow (assumption)
    assert fl.idle_timeout_s(200_001, 10.0) == 0.1 and fl.idle_timeout_s(10, 10.0) == 10.0
    assert fl.must_flush(400_001) and not fl.must_flush(400_000)


def _ovs(**limit: float) -> SoftwareCentricConfig:
    fl = FlowLimitConfig(**{"start": 40, "minimum": 20, "maximum": 100, "grow": 10, **limit})
    return SoftwareCentricConfig(entries="per_direction", aging="revalidate", policy="rescan",
                                 mirror="full", flow_limit=fl, idle_timeout_s=10.0)  # fmt: skip


def test_new_flows_above_the_limit_stay_in_software_then_move_when_it_grows() -> None:
    m = controller(_ovs())
    f = m.process(web_packets(np.arange(50), 1_000_000))
    assert (f.final == Final.SW_FORWARDED).all()
    assert m.hw.occupancy() == 40 and m.sessions() == 50  # 20 connections x 2 flows in HW
    assert m.metrics.counts["flow_limit_refused"] == 30
    f = m.process(web_packets(np.arange(50), 2_000_000, flags=ACK))
    assert (f.final[:20] == Final.HW_FORWARDED).all()
    assert (f.final[20:] == Final.SW_FORWARDED).all()  # forwarded by the software datapath
    m.tick(10_000_000)
    m.tick(600_000_000)  # revalidator: a 40-flow dump takes 1 ms -> limit 40 + 10
    assert m.flow_limit is not None and m.flow_limit.limit == 50
    m.tick(700_000_000)  # promotion fills the new room (5 connections)
    assert m.hw.occupancy() == 50


def test_slow_dumps_shrink_the_limit_then_100ms_idle_then_flush() -> None:
    # 0.1 s per flow: a 40-flow dump takes 4 s -> limit 40 // 4 = 10 -> floor 20
    m = controller(_ovs(dump_ns_per_flow=1e8))
    m.process(web_packets(np.arange(20), 1_000_000))
    assert m.hw.occupancy() == 40
    m.tick(10_000_000)
    m.tick(600_000_000)
    assert m.flow_limit is not None and m.flow_limit.limit == 20
    assert m.hw.occupancy() == 40  # everything was active within 10 s
    # the 4 s dump delays the next pass to 0.6 + 4 s (OVS: back to back, not every 500 ms)
    m.tick(1_100_000_000)
    assert m.sessions() == 20 and m.metrics.counts.get("revalidate_aged", 0) == 0
    # 40 flows > limit 20: the idle timeout is now 100 ms; connections 0..9 keep talking
    m.process(web_packets(np.arange(10), 4_550_000_000, flags=ACK))
    m.tick(4_600_000_000)
    assert m.sessions() == 10 and m.metrics.counts["revalidate_aged"] == 10
    assert m.metrics.counts.get("flow_limit_flushes", 0) == 0


def test_flows_above_twice_the_limit_are_all_flushed() -> None:
    m = controller(_ovs(start=100, maximum=100, dump_ns_per_flow=1e8))
    m.process(web_packets(np.arange(50), 1_000_000))
    assert m.hw.occupancy() == 100
    m.tick(10_000_000)
    m.tick(600_000_000)  # 100 flows dump in 10 s: limit 100 // 10 = 10 -> floor 20
    assert m.flow_limit is not None and m.flow_limit.limit == 20
    m.process(web_packets(np.arange(50), 10_500_000_000, flags=ACK))  # all active
    m.tick(10_600_000_000)  # the next pass, after the 10 s dump: 100 flows > 2 x 20: kill all
    assert m.metrics.counts["flow_limit_flushes"] == 1
    assert m.hw.occupancy() == 0 and m.mirror is not None and m.mirror.count == 0
