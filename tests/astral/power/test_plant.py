"""The plant over a year: physics of each mode, climates, the legacy plant against the survey."""

import numpy as np
import pytest

from starfabric.astral.power.chain import STAGES, ChainSpec, chain_input, fit_loss, parse_redundancy
from starfabric.astral.power.curves import DOE2_CENTRIFUGAL, chiller_power, yorkcalc_approach
from starfabric.astral.power.plant import PRESETS, preset, simulate_year
from starfabric.astral.power.weather import load_weather
from starfabric.errors import ConfigError, InfeasibleError


@pytest.fixture(scope="module")
def chicago():  # type: ignore[no-untyped-def]
    return load_weather("chicago")


@pytest.fixture(scope="module")
def tampa():  # type: ignore[no-untyped-def]
    return load_weather("tampa")


def test_every_design_is_worse_hot_and_humid(chicago, tampa) -> None:  # type: ignore[no-untyped-def]
    for name in PRESETS:
        cold = simulate_year(preset(name), chicago, 6e6, 10e6)
        hot = simulate_year(preset(name), tampa, 6e6, 10e6)
        assert hot.pue > cold.pue, name
        assert hot.wue_l_per_kwh >= cold.wue_l_per_kwh, name


def test_legacy_plant_lands_in_the_survey_range(chicago) -> None:  # type: ignore[no-untyped-def]
    # Uptime Institute 2023 survey: industry average PUE 1.58 (1.55-1.59 since 2020), pulled up
    # by legacy sites; a legacy site runs its IT at part of its design load.
    r = simulate_year(preset("legacy"), chicago, 6e6, 10e6)
    assert 1.45 <= r.pue <= 1.75
    modern = simulate_year(preset("liquid"), chicago, 6e6, 10e6)
    assert modern.pue < 1.15 < r.pue


def test_air_economizer_modes_follow_the_weather(chicago) -> None:  # type: ignore[no-untyped-def]
    r = simulate_year(preset("air-econ"), chicago, 8e6, 10e6)
    h = r.hours_per_mode()
    assert h["air_economizer_full"] + h["air_economizer_partial"] + h["mechanical_air"] == 8760
    cold = chicago.dry_bulb_c < 5
    assert r.parts_w["chillers"][cold].max() < 1e-6  # free cooling when it is cold
    hot = chicago.dry_bulb_c > 30
    assert (r.parts_w["chillers"][hot] > 0).all()
    s = r.summary()
    assert s["design_day"]["peak_facility_w"] == pytest.approx(r.facility_w.max())
    assert sum(s["monthly_facility_mwh"]) == pytest.approx(s["facility_mwh"])


def test_chiller_cop_falls_with_lift() -> None:
    load = np.full(3, 1e6)
    p, _, _ = chiller_power(DOE2_CENTRIFUGAL, 1.2e6, 5.5, load, 7.0, np.array([24.0, 29.4, 35.0]))
    cop = load / p
    assert cop[0] > cop[1] > cop[2]
    # warmer chilled water lowers the lift too
    p_warm, _, _ = chiller_power(DOE2_CENTRIFUGAL, 1.2e6, 5.5, load, 10.0, np.full(3, 29.4))
    assert (p_warm < p[1]).all()


def test_yorkcalc_approach_grows_with_wet_bulb_drop_and_load() -> None:
    a = yorkcalc_approach(np.array([25.0, 10.0]), np.array([5.6, 5.6]), np.array([1.0, 1.0]))
    assert a[1] > a[0] > 0  # towers approach the wet bulb less closely in cold air
    a2 = yorkcalc_approach(np.array([25.0]), np.array([8.0]), np.array([1.0]))
    assert a2[0] > a[0]


def test_chain_part_load_and_redundancy() -> None:
    for st in STAGES.values():
        a, b, c = st.coefficients
        assert min(a, b, c) >= 0
        for x, eff in st.points:
            assert float(st.efficiency(x)) == pytest.approx(eff, abs=0.006), st.name
    it, mech = np.array([5e6]), np.array([1e6])
    n1 = chain_input(
        ChainSpec(kind="double-conversion", redundancy="N+1", module_shedding=False),
        it,
        mech,
        10e6,
        2e6,
    )
    two = chain_input(
        ChainSpec(kind="double-conversion", redundancy="2N", module_shedding=False),
        it,
        mech,
        10e6,
        2e6,
    )
    assert two.efficiency[0] < n1.efficiency[0]  # 2N halves each UPS's load
    hv = chain_input(ChainSpec(kind="hvdc", redundancy="N+1"), it, mech, 10e6, 2e6)
    assert hv.efficiency[0] > n1.efficiency[0]
    assert parse_redundancy("2(N+1)") == (2, 1)
    with pytest.raises(ConfigError, match="redundancy"):
        parse_redundancy("N-1")
    with pytest.raises(ConfigError, match="efficiency"):
        fit_loss(((0.5, -0.9), (1.0, 0.9)), 0.01)


def test_bad_plant_input(chicago) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InfeasibleError, match="A1"):
        preset("air-econ", air={"supply_c": 40.0})
    with pytest.raises(InfeasibleError, match="W32"):
        preset("liquid", liquid={"facility_supply_c": 38.0})
    with pytest.raises(ConfigError, match="finite"):
        simulate_year(preset("legacy"), chicago, np.full(8760, np.nan), 1e6)
    with pytest.raises(ConfigError, match="above the"):
        simulate_year(preset("legacy"), chicago, 2e6, 1e6)


def test_reused_heat_leaves_through_the_buildings_not_the_towers(chicago) -> None:  # type: ignore[no-untyped-def]
    base = simulate_year(preset("liquid"), chicago, 6e6, 10e6)
    spec = preset("liquid", heat_reuse={"annual_fraction": 0.3})
    r = simulate_year(spec, chicago, 6e6, 10e6)
    reused = r.extra["heat_reused_w"]
    # the year's reuse is the design's share of the IT energy, only in heating hours, never
    # more than the facility water carries
    assert reused.sum() == pytest.approx(0.3 * r.it_w.sum(), rel=1e-6)
    assert not reused[chicago.dry_bulb_c >= spec.heat_reuse.balance_point_c].any()
    assert (reused <= 0.85 * r.it_w * 1.01 + 1e6).all()
    # towers reject less: less water and less fan power, the IT unchanged
    assert r.water_m3.sum() < 0.9 * base.water_m3.sum()
    assert (
        r.parts_w["liquid_heat_rejection_fans"].sum()
        < base.parts_w["liquid_heat_rejection_fans"].sum()
    )
    s = r.summary()
    assert s["ere"] == pytest.approx(s["pue"] - 0.3, abs=1e-9)
    # a warm climate has fewer heating hours: what it cannot reuse still goes to the towers
    far = simulate_year(
        preset("liquid", heat_reuse={"annual_fraction": 0.99}), load_weather("tampa"), 6e6, 10e6
    )
    assert far.extra["heat_reused_w"].sum() < 0.5 * far.it_w.sum()


def test_plate_hx_effectiveness_and_its_design_point(chicago) -> None:  # type: ignore[no-untyped-def]
    from starfabric.astral.power.plant import (
        CP_WATER,
        hx_effectiveness,
        size_plant,
        water_side_economizer,
        wse_ua,
    )

    # counterflow: balanced NTU=1 gives 1/2; Cr=0 gives 1 - e^-NTU
    assert float(hx_effectiveness(1.0, 1.0, 1.0)) == pytest.approx(0.5)
    assert float(hx_effectiveness(2.0, 1.0, 1e12)) == pytest.approx(1 - np.exp(-2.0), rel=1e-9)
    spec = preset("water-econ", chilled_water={"pump_control": "constant"})
    sz = size_plant(spec, 1e6)
    cw = spec.chilled_water
    # the UA brings the design return to the supply with tower water hx_approach colder
    c = sz.chw_kg_s * CP_WATER
    eps = float(hx_effectiveness(wse_ua(spec, sz), c, sz.wse_kg_s * CP_WATER))
    assert eps * (cw.delta_t_k + cw.hx_approach_k) == pytest.approx(cw.delta_t_k, rel=1e-6)
    # hour by hour: never more than the load, nothing when the tower water is not colder
    q = np.full(chicago.hours, 0.8 * sz.coil_w)
    q_free, _, pump, _, t_tw = water_side_economizer(spec, sz, chicago, q, q > 0)
    assert (q_free <= q + 1e-6).all() and (q_free >= 0).all()
    t_ret = cw.supply_c + q / c
    assert not q_free[t_tw >= t_ret].any()
    assert ((pump > 0) == (q_free > 0)).all()
    assert q_free[chicago.wet_bulb_c < -5].min() > 0.9 * q[0]  # a cold night carries it all
