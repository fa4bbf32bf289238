"""Small test switches and NICs, so that every pair of a whole cluster can be routed in a test."""

import pytest

from starfabric.astral.hardware import NICSpec, SwitchSpec, register_nic, register_switch


@pytest.fixture(scope="session", autouse=True)
def small_switches() -> None:
    for radix in (8, 16):
        register_switch(
            SwitchSpec(
                name=f"test-{radix}x200G",
                capacity_gbps=radix * 200.0,
                port_modes={200: radix},
                power_w=radix * 10.0,
                cost_usd=radix * 500.0,
                latency_ns=500.0,
                source="assumption: test switch",
            ),
            replace=True,
        )
    register_nic(
        NICSpec(
            name="test-1x200G",
            ports=1,
            port_gbps=200,
            power_w=20,
            cost_usd=1000,
            source="assumption: test NIC",
        ),
        replace=True,
    )
