"""Stats lag makes a revalidator age an active flow; rescan re-evaluates exactly the flows
of the changed scope; versions bump in O(1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from starfabric.fornax.baselines import (
    SoftwareCentric,
    SoftwareCentricConfig,
    ablation,
    doca_like,
    fornax,
    ovs_like,
)
from starfabric.fornax.manager import Final

from .helpers import (
    ACK,
    controller,
    example_data,
    spec_of,
    web2_egress_http_only,
    web2_own_sg,
    web_packets,
)

MS = 1_000_000


def _lagged_run(lag_s: float) -> tuple[SoftwareCentric, list[int]]:
    cfg = ovs_like().model_copy(update={"idle_timeout_s": 1.0, "stats_lag_s": lag_s})
    m = controller(cfg)
    finals = []
    m.process(web_packets(np.arange(4), 100 * MS))
    m.tick(100 * MS)
    for t in (500, 900, 1300):  # the connections stay active in hardware
        f = m.process(web_packets(np.arange(4), t * MS, flags=ACK))
        finals += list(f.final)
        m.tick((t + 100) * MS)
    m.tick(1600 * MS)
    f = m.process(web_packets(np.arange(4), 1700 * MS, flags=ACK))
    finals += list(f.final)
    return m, finals


def test_stats_lag_ages_a_flow_active_within_the_lag() -> None:
    fresh, f0 = _lagged_run(0.0)
    assert fresh.metrics.counts.get("revalidate_aged", 0) == 0
    assert all(x == Final.HW_FORWARDED for x in f0)
    lagged, f1 = _lagged_run(2.0)
    # last packet at 1.3 s, the revalidator at 1.6 s sees counters synced at 0.1 s: idle 1.5 s
    assert lagged.metrics.counts["revalidate_aged"] == 4
    assert all(x == Final.HW_FORWARDED for x in f1[:12])
    assert all(x == Final.SW_FORWARDED for x in f1[12:])  # punted again, then re-installed
    assert lagged.metrics.counts["inserted"] == 8


@pytest.mark.parametrize(
    "cfg", [doca_like(), ovs_like(), ablation("no_versions")], ids=["doca", "ovs", "no_versions"]
)
def test_rescan_touching_one_eni_re_evaluates_exactly_its_flows(cfg: SoftwareCentricConfig) -> None:
    # infinite rescan rate: this test checks which flows are re-evaluated and that the result
    # is enforced in hardware, not the stale window (test_rescan_over_time_... below)
    cfg = cfg.model_copy(update={"rescan_flows_per_thread_s": math.inf})
    base = web2_own_sg(example_data())
    m = controller(cfg, data=base)
    m.process(web_packets(np.arange(600), MS))  # even ids: web-1, odd ids: web-2
    m.tick(2 * MS)
    before = dict(m.metrics.ops)
    out = m.apply_policy(spec_of(web2_egress_http_only(base)))
    assert (out["eni_scopes"], out["vpc_scopes"]) == (1, 0)
    web2 = list(m.policy.eni_names).index("acme/prod/web-2")
    raw = m.hw.dump(0, m.hw.config.capacity)[0]
    assert int((raw["eni_scope"] == web2).sum()) == 300 * cfg.entries_per_connection
    assert out["rescanned_flows"] == 300 * cfg.entries_per_connection
    assert m.metrics.counts["rescanned_flows"] == out["rescanned_flows"]
    assert out["modified"] == 300  # now drop sessions (the egress to 443 is refused)
    assert m.metrics.ops["bump_version"] == before["bump_version"] == 0
    assert m.metrics.cpu_s["rescan"] > 0 and m.metrics.cpu_s["policy"] == 0
    f = m.process(web_packets(np.arange(600), 3 * MS, flags=ACK))
    assert (f.final[0::2] == Final.HW_FORWARDED).all()
    assert (f.final[1::2] == Final.POLICY_DROP).all()  # enforced at once, in hardware


def test_versions_bump_each_affected_scope_once_whatever_the_table_size() -> None:
    for n in (10, 3000):
        base = web2_own_sg(example_data())
        m = controller(fornax(), data=base)
        m.process(web_packets(np.arange(n), MS))
        before = dict(m.metrics.ops)
        out = m.apply_policy(spec_of(web2_egress_http_only(base)))
        ops = {k: m.metrics.ops[k] - before[k] for k in before}
        assert ops["bump_version"] == out["eni_scopes"] + out["vpc_scopes"] == 1
        assert sum(v for k, v in ops.items() if k != "bump_version") == 0
        assert m.metrics.counts.get("rescanned_flows", 0) == 0


@pytest.mark.parametrize("cfg", [doca_like(), ovs_like()], ids=["doca", "ovs"])
def test_rescan_over_time_leaves_unreached_entries_stale_then_enforces(
    cfg: SoftwareCentricConfig,
) -> None:
    """300 connections at 10k flows/s in 32-flow chunks: a packet right after the change
    meets the old actions of every connection not reached yet; once the rescan's time has
    passed, every one is enforced in hardware."""
    cfg = cfg.model_copy(
        update={"rescan_flows_per_thread_s": 10000.0, "rescan_threads": 1, "rescan_chunk": 32}
    )
    base = web2_own_sg(example_data())
    m = controller(cfg, data=base)
    m.process(web_packets(np.arange(600), MS))
    m.tick(2 * MS)
    out = m.apply_policy(spec_of(web2_egress_http_only(base)))
    per_chunk = 32 // cfg.entries_per_connection
    assert out["modified"] == per_chunk  # the first chunk at once, the rest over time
    assert out["pending"] == 300 - per_chunk == m.rescan_pending()
    span_ns = round(300 * cfg.entries_per_connection / 10000.0 * 1e9)
    assert m.rescan_end_ns is not None and 2 * MS < m.rescan_end_ns <= 2 * MS + span_ns
    # one packet of each connection in random order, spread evenly over the rescan's span
    ids = np.random.default_rng(1).permutation(600)
    t = 2 * MS + 1 + np.arange(600, dtype=np.int64) * (span_ns // 600)
    f = m.process(web_packets(ids, t, flags=ACK))
    web2 = ids % 2 == 1
    stale = f.final[web2] == Final.HW_FORWARDED
    assert (f.final[~web2] == Final.HW_FORWARDED).all()  # web-1 untouched
    assert (f.final[web2][~stale] == Final.POLICY_DROP).all()
    # packets spread over the span meet about half the connections not reached yet
    assert 300 // 4 < stale.sum() < 3 * 300 // 4
    m.tick(2 * MS + span_ns + MS)
    assert m.rescan_pending() == 0 and m.metrics.counts["rescan_modified"] == 300
    f = m.process(web_packets(ids, 3 * MS + span_ns, flags=ACK))
    assert (f.final[web2] == Final.POLICY_DROP).all()
    assert (f.final[~web2] == Final.HW_FORWARDED).all()
