"""Power, cost, PUE, racks; rail-only vs rail-optimized lands in Wang et al.'s published range."""

import pytest

from starfabric.astral.power import PowerSpec, power_report, rail_only_savings
from starfabric.astral.topology import ClusterSpec, build
from starfabric.astral.topology.inventory import inventory


def test_rail_only_savings_land_in_published_range() -> None:
    rows = rail_only_savings()
    assert [r.radix for r in rows] == [64, 128]
    for r in rows:
        # Wang et al.: -38% to -77% network cost, -37% to -75% network power.
        assert -0.77 <= r.cost_change <= -0.38, r
        assert -0.75 <= r.power_change <= -0.37, r
    # 64-port: rail Clos is 2-tier (6 switches per rail of 128); 128-port: 1 switch per rail.
    assert rows[0].rail_only_switches == 6 * 256 and rows[1].rail_only_switches == 256
    assert rows[0].rail_optimized_switches == 5 * 32_768 // 64


def _report(cooling: str, chain: str) -> tuple[float, float, int]:
    spec = ClusterSpec(switch="25.6T", pods=1, power=PowerSpec(cooling=cooling, power_chain=chain))  # type: ignore[arg-type]
    inv = inventory(build(spec), spec)
    r = power_report(inv, spec.power)
    assert r.it_w == pytest.approx(r.gpu_w + r.host_w + r.nic_w + r.switch_w + r.optics_w)
    assert r.total_cost_usd == pytest.approx(
        r.compute_cost_usd + r.switch_cost_usd + r.optics_cost_usd
    )
    assert r.per_pod()["it_w"] == pytest.approx(r.it_w)
    return r.facility_w, r.pue, r.server_racks


def test_hvdc_and_air_liquid_beat_ac_and_air() -> None:
    f_hvdc, pue_hvdc, racks_al = _report("air-liquid", "hvdc")
    f_ac, pue_ac, _ = _report("air-liquid", "ac-ups")
    _, pue_air, racks_air = _report("air", "hvdc")
    assert f_hvdc < f_ac and pue_hvdc < pue_ac < pue_air
    assert 1.05 < pue_hvdc < 1.3
    assert racks_al < racks_air  # denser racks with air-liquid cooling


def test_16k_pod_power_is_dominated_by_gpus_and_hosts() -> None:
    spec = ClusterSpec(switch="25.6T", pods=1, gpu="H800")
    inv = inventory(build(spec), spec)
    r = power_report(inv, spec.power)
    assert r.gpu_w == 16_384 * 700
    assert 0.03 * r.it_w < r.network_w < 0.15 * r.it_w
    assert 9.0 < r.host_kw < 11.5  # astral.md: an 8-GPU server draws about 10-11 kW


def test_a_host_bigger_than_a_rack_spans_racks() -> None:
    spec = ClusterSpec(
        topology="rail-only", switch="51.2T", port_speed="400G", nic="CX7-400G", gpu="H100",
        gpus_per_host=256, gpus=32_768,
    )  # fmt: skip
    inv = inventory(build(spec), spec)
    r = power_report(inv, spec.power)
    assert r.host_kw > r.rack_kw
    assert r.server_racks == 128 * -(-r.host_kw // r.rack_kw)
    assert r.rack_density_kw <= r.rack_kw
