"""The OVS-like preset's calibration to a measured ovs-vswitchd (config.OVS_*): software bytes
charged per live flow, revalidator CPU charged per dumped flow; the uncalibrated preset keeps
the measured numpy bytes and thread time."""

from __future__ import annotations

import numpy as np
import pytest

from starfabric.errors import ConfigError
from starfabric.fornax.baselines import (
    OVS_CALIBRATION_VERSION,
    OVS_HOST_BYTES_PER_FLOW,
    OVS_REVALIDATE_NS_PER_FLOW,
    doca_like,
    ovs_like,
    software_centric_config,
)

from .helpers import controller, web_packets


def test_calibrated_preset_names_its_ovs_and_differs_only_in_the_calibration() -> None:
    assert "3.1" in OVS_CALIBRATION_VERSION
    cal, raw = ovs_like(), ovs_like(calibrated=False)
    assert cal.host_bytes_per_flow == OVS_HOST_BYTES_PER_FLOW
    assert cal.revalidate_ns_per_flow == OVS_REVALIDATE_NS_PER_FLOW
    diff = {k for k, v in cal.model_dump().items() if v != raw.model_dump()[k]}
    assert diff == {"host_bytes_per_flow", "revalidate_ns_per_flow"}


def test_calibrated_bytes_and_cpu_are_charged_per_flow() -> None:
    n = 500
    for calibrated in (True, False):
        m = controller(ovs_like(calibrated=calibrated))
        m.process(web_packets(np.arange(n), 1_000_000))
        assert m.mirror is not None and m.flows() == 2 * n
        if calibrated:
            assert m.software_bytes == pytest.approx(
                m.nat.nbytes + 2 * n * OVS_HOST_BYTES_PER_FLOW, abs=1
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
