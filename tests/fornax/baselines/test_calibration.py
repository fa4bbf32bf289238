"""The OVS-like preset's calibration to a measured ovs-vswitchd (config.OVS_*, ovs_cost):
software bytes charged as base + per live flow, revalidator CPU per dumped flow, passes every
max(500 ms, dump duration); the uncalibrated preset keeps the measured numpy bytes and thread
time; `fit` recovers the constants of levels made from them."""

from __future__ import annotations

import numpy as np
import pytest

from starfabric.errors import ConfigError
from starfabric.fornax.baselines import (
    OVS_CALIBRATION_VERSION,
    OVS_DUMP_NS_PER_FLOW,
    OVS_HOST_BASE_BYTES,
    OVS_HOST_BYTES_PER_FLOW,
    OVS_REVALIDATE_NS_PER_FLOW,
    doca_like,
    ovs_cost,
    ovs_like,
    software_centric_config,
)

from .helpers import controller, web_packets


def test_calibrated_preset_names_its_ovs_and_differs_only_in_the_calibration() -> None:
    assert "3.1" in OVS_CALIBRATION_VERSION
    cal, raw = ovs_like(), ovs_like(calibrated=False)
    assert cal.host_bytes_per_flow == OVS_HOST_BYTES_PER_FLOW
    assert cal.revalidate_ns_per_flow == OVS_REVALIDATE_NS_PER_FLOW
    assert cal.host_base_bytes == OVS_HOST_BASE_BYTES
    assert cal.flow_limit is not None and cal.flow_limit.dump_ns_per_flow == OVS_DUMP_NS_PER_FLOW
    diff = {k for k, v in cal.model_dump().items() if v != raw.model_dump()[k]}
    assert diff == {"host_bytes_per_flow", "host_base_bytes", "revalidate_ns_per_flow",
                    "flow_limit"}  # fmt: skip


def test_calibrated_bytes_and_cpu_are_charged_per_flow() -> None:
    n = 500
    for calibrated in (True, False):
        m = controller(ovs_like(calibrated=calibrated))
        m.process(web_packets(np.arange(n), 1_000_000))
        assert m.mirror is not None and m.flows() == 2 * n
        if calibrated:
            assert m.software_bytes == pytest.approx(
                m.nat.nbytes + OVS_HOST_BASE_BYTES + 2 * n * OVS_HOST_BYTES_PER_FLOW, abs=1
            )
        else:
            assert m.software_bytes == m.nat.nbytes + m.mirror.live_nbytes
        cpu0 = m.metrics.cpu_s["revalidate"]
        out = m.aging_pass()
        charged = m.metrics.cpu_s["revalidate"] - cpu0
        if calibrated:
            assert out["flows"] == 2 * n
            assert charged == pytest.approx(2 * n * OVS_REVALIDATE_NS_PER_FLOW / 1e9)
        else:
            assert charged > 0


@pytest.mark.parametrize(
    ("update", "match"),
    [({"host_bytes_per_flow": 100.0, "mirror": "none", "stats_lag_s": 0.0}, "mirror"),
     ({"revalidate_ns_per_flow": 10.0}, "aging: revalidate"),
     ({"host_bytes_per_flow": -1.0}, "host_bytes_per_flow")],
)  # fmt: skip
def test_calibration_fields_are_validated(update: dict[str, object], match: str) -> None:
    base = (
        ovs_like(calibrated=False).model_dump() if "mirror" in update else doca_like().model_dump()
    )
    if "host_bytes_per_flow" in update and "mirror" not in update:
        base = ovs_like(calibrated=False).model_dump()
    base.update(update)
    with pytest.raises(ConfigError, match=match):
        software_centric_config(base)


def test_pass_interval_follows_the_dump_past_the_period() -> None:
    cfg = ovs_like()
    assert cfg.flow_limit is not None
    short = int(0.1 * 1e9 / cfg.flow_limit.dump_ns_per_flow)  # a 100 ms dump
    long = int(2.0 * 1e9 / cfg.flow_limit.dump_ns_per_flow)  # a 2 s dump
    assert ovs_cost.pass_interval_s(cfg, short) == cfg.period_s() == 0.5
    assert ovs_cost.pass_interval_s(cfg, long) == pytest.approx(2.0, rel=1e-4)
    # back-to-back passes: CPU/s is the per-pass cost over the dump, not x 2 passes/s
    cpu = ovs_cost.revalidator_cpu_per_s(cfg, long)
    assert cfg.revalidate_ns_per_flow is not None
    assert cpu == pytest.approx(long * cfg.revalidate_ns_per_flow / 1e9 / 2.0, rel=1e-4)
    assert ovs_cost.host_bytes(cfg, 0) == 0.0
    assert ovs_cost.host_bytes(ovs_like(calibrated=False), 10) is None


def test_fit_recovers_the_constants_of_affine_levels() -> None:
    base, per, ns, dump_ns = 2e8, 5000.0, 1500.0, 3000.0
    levels = []
    for conns in (10_000, 25_000, 50_000, 100_000):
        mflows = 2 * conns
        dump_ms = mflows * dump_ns / 1e6
        interval = max(0.5, dump_ms / 1e3)
        cpu = mflows * ns / 1e9 / interval
        levels.append(ovs_cost.LevelFigures(conns, 2 * mflows, int(base + per * mflows), cpu,
                                            dump_ms))  # fmt: skip
    cal = ovs_cost.fit(levels, dp_flows_per_model_flow=2)
    assert cal.host_base_bytes == pytest.approx(base, rel=1e-6)
    assert cal.host_bytes_per_flow == pytest.approx(per, rel=1e-6)
    assert cal.revalidate_ns_per_flow == pytest.approx(ns, rel=1e-6)
    assert cal.dump_ns_per_flow == pytest.approx(dump_ns, rel=1e-6)
    assert max(cal.worst_residual.values()) < 1e-6
    with pytest.raises(ValueError, match="two levels"):
        ovs_cost.fit(levels[:1], 2)
