"""E7 at --scale ci: per fault class, detect_s / misforwarded / lost / failover_s for Fornax
and the OVS-like baseline from the same seeded fault draws; Fornax detects every table and
hang fault, faster than the baseline's chance discovery, and misforwards nothing."""

from __future__ import annotations

from starfabric.fornax.experiments import e7_faults
from starfabric.fornax.experiments.harness import Context
from starfabric.fornax.experiments.scales import get_scale


def test_e7_fornax_detects_faster_and_never_misforwards() -> None:
    res = e7_faults.run(Context(get_scale("ci"), []))
    rows = {(r["controller"], r["fault"]): r for r in res.rows}
    for key in ("detect_s", "misforwarded", "lost", "failover_s"):
        assert all(key in r for r in res.rows)
    classes = {"ecc_single", "ecc_multi", "port_stall", "ring_overflow", "engine_failure"}
    assert {f for c, f in rows if c == "fornax"} >= classes | {"manager_crash"}
    assert {f for c, f in rows if c == "ovs_like"} >= classes
    for f in ("ecc_single", "ecc_multi", "port_stall", "engine_failure"):
        fx = rows[("fornax", f)]
        assert fx["count"] >= 1 and fx["detected"] == fx["count"], fx
    assert res.summary["fornax_misforwarded"] == 0
    for f in ("ecc_single", "ecc_multi"):  # chance discovery is slower and incomplete
        fx, ovs = rows[("fornax", f)], rows[("ovs_like", f)]
        assert ovs["detected"] < ovs["count"]
        assert fx["detect_s"] < ovs["detect_s"]
    assert rows[("ovs_like", "port_stall")]["detected"] == 0  # no watchdog consumer
    assert rows[("fornax", "port_stall")]["failback_s"] is not None
    assert e7_faults.plot(res) is not None
