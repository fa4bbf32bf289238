"""Stats lag makes a revalidator age an active flow; rescan re-evaluates exactly the flows
of the changed scope; versions bump in O(1)."""

from __future__ import annotations

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
