"""Gray failures: every class with its signature off (and hidden another way) is still
localized from timing and transport; gray classes too; confounders blame no hardware."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from starfabric.astral.monitor import (
    FAULT_KINDS,
    Fault,
    SynthSpec,
    TelemetryStore,
    diagnose,
    synthesize,
)
from starfabric.astral.monitor.evaluate import (
    Scenario,
    healthy_twin,
    job_targets,
    random_fault,
    section_scenarios,
    visible_impact,
)
from starfabric.astral.monitor.faults import (
    CONFOUNDER_KINDS,
    GRAY_KINDS,
    LINK_FLAPPING,
    PORT_CONGESTED,
    parse_fault,
)
from starfabric.astral.monitor.localize import UNKNOWN, Diagnosis
from starfabric.errors import ConfigError

SEED = 21
SPEC = SynthSpec(gpus=1024, seed=SEED, placement_seed=SEED, ms_series=False)


def _fault(kind: str, signature: str, draw: int = 7) -> Fault:
    t = job_targets(1024, SEED)
    return random_fault(kind, np.random.default_rng([SEED, draw]), t, set(), signature=signature)


@pytest.fixture(scope="module")
def twin() -> Iterator[TelemetryStore]:
    st = healthy_twin(1024, Scenario("twin", (), SEED, SEED))
    yield st
    st.close()


def _visible(kind: str, signature: str, twin: TelemetryStore) -> Fault:
    """The first draw whose fault slows something above the physical layer (a fault with no
    visible impact and no signature leaves nothing to localize)."""
    for draw in range(7, 17):
        f = _fault(kind, signature, draw)
        with TelemetryStore() as st:
            synthesize(SPEC, [f], st)
            if visible_impact(st, twin):
                return f
    raise AssertionError(f"no draw of {kind} has a visible impact")


def _diagnose(faults: list[Fault], hide: bool = False) -> Diagnosis:
    with TelemetryStore() as st:
        synthesize(SPEC, faults, st)
        if hide:
            _hide_physical(st)
        return diagnose(st)


def _hide_physical(st: TelemetryStore) -> None:
    """Hide signatures the synthesizer does not know about: every physical reading of every
    component set to the fleet-typical value after the fact (as a held-out evaluation might)."""
    con = st.con
    con.execute("DELETE FROM phys_xid")
    con.execute(
        "UPDATE phys_gpu SET throttle_reasons = 0, ecc_uncorrected = 0, nvlink_replay = 0, "
        "nvlink_crc = 0, sm_clock_mhz = (SELECT median(sm_clock_mhz) FROM phys_gpu), "
        "temperature_c = (SELECT median(temperature_c) FROM phys_gpu)"
    )
    con.execute(
        "UPDATE phys_port SET crc_errors = 0, symbol_errors = 0, link_downed = 0, state_up = TRUE, "
        "pfc_pause_rx = 0, ecn_marked = 0"
    )
    con.execute(
        "UPDATE phys_optics SET rx_power_dbm = -1, tx_power_dbm = 0, temperature_c = 45, bias_ma = 7.5"
    )
    con.execute("UPDATE phys_host SET cpu_util_pct = 35")
    con.execute(
        "UPDATE config_nic SET mtu = 4096, dcqcn_rpg_ai_rate_mbps = 5, dcqcn_rpg_time_reset_us = 300"
    )


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_silent_variant_found_by_component(kind: str, twin: TelemetryStore) -> None:
    f = _visible(kind, "off", twin)
    d = _diagnose([f])
    top = d.reported()[0]
    assert top.component == f.component, d.causes[:3]
    assert all(c.component == f.component for c in d.reported() if c.hardware)
    if top.fault == UNKNOWN:  # class unknown: the chain says so and stays above physical
        assert "(class unknown)" in top.title
        assert any("no counter names" in e for e in top.evidence)


@pytest.mark.parametrize("kind", ["gpu_throttle", "link_crc", "pfc_storm", "misconfig_dcqcn"])
def test_signatures_hidden_after_the_fact_still_localized(kind: str, twin: TelemetryStore) -> None:
    f = _visible(kind, "on", twin)
    assert _diagnose([f]).reported()[0].fault == kind  # named while counters show it
    top = _diagnose([f], hide=True).reported()[0]
    assert top.component == f.component and top.fault == UNKNOWN


@pytest.mark.parametrize("kind", GRAY_KINDS)
def test_gray_class_found_by_component(kind: str, twin: TelemetryStore) -> None:
    f = _visible(kind, "off", twin)
    d = _diagnose([f])
    assert d.reported()[0].component == f.component, d.causes[:3]


@pytest.mark.parametrize("kind", [LINK_FLAPPING, PORT_CONGESTED])
def test_gray_class_named_when_its_counters_show(kind: str) -> None:
    f = _fault(kind, "on")
    top = _diagnose([f]).reported()[0]
    assert (top.component, top.fault) == (f.component, kind)


@pytest.mark.parametrize("kind", CONFOUNDER_KINDS)
def test_confounder_blames_no_hardware_and_is_named(kind: str) -> None:
    f = _fault(kind, "on")
    d = _diagnose([f])
    rep = d.reported()
    assert not [c for c in rep if c.hardware], rep
    assert (rep[0].component, rep[0].fault) == (f.component, kind)
    assert "no hardware cause" in rep[0].evidence[-1]


def test_signature_scales_the_counters_not_the_slowdown() -> None:
    seen = {}
    for sig in ("on", "partial", "off"):
        with TelemetryStore() as st:
            synthesize(SPEC, [Fault("gpu_throttle", 77, 0.8, 1, sig)], st)
            g = st.query(
                "SELECT sm_clock_mhz AS c, throttle_reasons AS r FROM phys_gpu WHERE gpu = 77 AND iter = 3"
            )
            a = st.query(
                "SELECT median(compute_ms) AS c FROM app_iteration WHERE rank = 77 AND iter >= 2"
            )
            seen[sig] = (float(g["c"][0]), int(g["r"][0]) & 0x40, float(a["c"][0]))
    assert seen["on"][1] and not seen["partial"][1] and not seen["off"][1]
    assert seen["on"][0] < seen["partial"][0] < 1900 < seen["off"][0]
    assert seen["on"][2] == pytest.approx(seen["off"][2], rel=0.05)


def test_fault_text_takes_a_signature() -> None:
    assert parse_fault("link_crc:12:0.7:3:off") == Fault("link_crc", 12, 0.7, 3, "off")
    with pytest.raises(ConfigError, match="signature"):
        parse_fault("link_crc:12:0.7:3:faint")
    assert not Fault("checkpoint_pause", 0).hardware and Fault("gpu_slow", 3).hardware


def test_sections_cover_every_class() -> None:
    for sec, kinds in (
        ("silent", FAULT_KINDS),
        ("gray", GRAY_KINDS),
        ("confounders", CONFOUNDER_KINDS),
    ):
        sc = section_scenarios(sec, 1024, seeds=2)
        assert sorted({s.faults[0].kind for s in sc}) == sorted(kinds) and len(sc) == 2 * len(kinds)
    assert {s.faults[0].signature for s in section_scenarios("silent", 1024, 1)} == {"off"}
    with pytest.raises(ConfigError, match="section"):
        section_scenarios("loud", 1024)


def test_no_impact_without_signature_leaves_nothing_to_blame(twin: TelemetryStore) -> None:
    # An optic failing on a link with spare capacity: no layer above the PHY sees it.
    for draw in range(7, 17):
        f = _fault("optical_failing", "off", draw)
        with TelemetryStore() as st:
            synthesize(SPEC, [f], st)
            if not visible_impact(st, twin):
                assert [c for c in diagnose(st).reported() if c.hardware] == []
                return
    pytest.skip("every draw had a visible impact")
