"""Chaos: every fault class alone, all of them mixed, and repeated, with traffic and a policy
change running. Every packet is checked against the plain per-packet conntrack reference
(reference.py): nothing is forwarded with another action than the reference's, every packet
has one final outcome, a DELIVER never crosses tenants, and every fault is detected within
its bound (first hit for ECC, the watchdog for hangs, one tick after the poller recovers for
ring overflow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fornax.manager.reference import ConntrackReference
from starfabric.fornax.manager.accounting import Final
from starfabric.fornax.packets import halves_to_ip
from starfabric.fornax.run.chaos import run_chaos
from starfabric.fornax.run.chaos_report import summary_rows
from starfabric.fornax.run.chaos_spec import ChaosSpec
from starfabric.fornax.vpc import ActionKind, VpcSpec, load_vpc_spec

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

BASE: dict[str, Any] = {
    "vpc": "vpc.yaml",
    "seed": 5,
    "workload": {
        "seed": 4, "duration": 0.6, "cps": 1500, "outbound": 0.5, "east_west": 0.4,
        "inbound": 0.1, "tcp_ports": [443, 8080, 5432, 22], "batch": 0.002,
        "policy_changes": [{"at": 0.3, "vpc": "scenario-policy-v2.yaml"}],
    },
    "engine": {"capacity": 16384, "ring_capacity": 1024, "n_ports": 4,
               "watchdog_timeout_s": 0.005, "scrub_slots_per_tick": 2048,
               "tcp_time_wait_s": 0.2, "tcp_close_s": 0.1, "udp_unreplied_s": 0.3},
    "health": {"patrol_rate": 200000, "healthy_s": 0.1},
    "tick": 0.004,
}  # fmt: skip

FAULTS: dict[str, dict[str, Any]] = {
    "ecc_single": {"bit_flips": [{"rate_per_entry_hour": 20000, "bits": 1, "start": 0.05}]},
    "ecc_multi": {"bit_flips": [{"rate_per_entry_hour": 20000, "bits": 2, "start": 0.05}]},
    "ecc_multi_4": {"bit_flips": [{"rate_per_entry_hour": 8000, "bits": 4, "start": 0.05}]},
    "stall": {"stalls": [{"port": 1, "at": 0.1, "duration": 0.05}]},
    "ring_overflow": {"ring_overflows": [{"at": 0.28, "duration": 0.05}]},
    "crash": {"crashes": [{"at": 0.2}]},
    "engine_failure": {"engine_failures": [{"at": 0.15, "duration": 0.03}]},
}


def _desc(pb: Any, i: int) -> tuple[Any, ...]:
    return (
        int(pb.vni[i]),
        str(halves_to_ip(int(pb.src_hi[i]), int(pb.src_lo[i]))),
        str(halves_to_ip(int(pb.dst_hi[i]), int(pb.dst_lo[i]))),
        int(pb.proto[i]), int(pb.sport[i]), int(pb.dport[i]), int(pb.tcp_flags[i]),
    )  # fmt: skip


def run_checked(faults: dict[str, Any], oracle: bool = False, **over: Any) -> dict[str, Any]:
    """Run a chaos spec and check every packet against the conntrack reference."""
    data = {**BASE, **over, "faults": faults}
    spec = ChaosSpec.model_validate(data)
    ref = ConntrackReference(load_vpc_spec(EXAMPLES / "vpc.yaml"), True)
    policy: list[VpcSpec] = []
    seen = {"mis": 0, "fwd": 0, "lost": 0}
    state: dict[str, Any] = {}

    def on_policy(new: VpcSpec) -> None:
        ref.set_policy(new)
        policy.append(new)

    def on_batch(pb: Any, fate: Any) -> None:
        from starfabric.fornax.vpc import compile_policy

        if "compiled" not in state or state["n_policy"] != len(policy):
            state["compiled"] = compile_policy(policy[-1] if policy else ref_spec)
            state["n_policy"] = len(policy)
        for i in range(len(pb)):
            if fate.final[i] == Final.NAMED_DROP:  # lost before any session state saw it
                seen["lost"] += 1
                continue
            want = ref.packet(_desc(pb, i))
            fwd = fate.final[i] in (Final.HW_FORWARDED, Final.SW_FORWARDED)
            if fwd:
                seen["fwd"] += 1
                # compiled handles are stable across recompiles: describe with the latest
                got = state["compiled"].describe_action(int(fate.action[i]))
                row = state["compiled"].actions[int(fate.action[i])]
                if row["kind"] == ActionKind.DELIVER:  # tenants never see each other
                    assert int(row["vni"]) == int(pb.vni[i])
                if got != want:
                    seen["mis"] += 1
            elif want is not None:
                seen["lost"] += 1

    ref_spec = load_vpc_spec(EXAMPLES / "vpc.yaml")
    report = run_chaos(spec, EXAMPLES, on_batch=on_batch, on_policy=on_policy, oracle=oracle)
    report["reference"] = seen
    return report


def _assert_clean(report: dict[str, Any]) -> None:
    assert report["reference"]["mis"] == 0, report["reference"]
    if "oracle" in report:  # the fault-free Fornax oracle agrees
        assert report["oracle"]["misforwarded"] == 0
    assert report["reference"]["fwd"] > 1000
    p = report["packets"]
    assert p["offered"] == sum(p[k] for k in ("hw_forwarded", "sw_forwarded", "policy_drop",
                                              "named_drop"))  # fmt: skip
    late = [r for r in report["faults"] if r["detected"] and not r["within_bound"]]
    assert not late, late
    for r in report["faults"]:
        if r["fault"] in ("ecc_multi", "ecc_single", "port_stall", "engine_failure") and (
            r.get("occupied", True) and r.get("first_hit_s") is not None and not r["event_lost"]
        ):
            assert r["detected"], r


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_class_alone(name: str) -> None:
    over = {}
    if name == "ring_overflow":  # a small ring, so the stuck poller really loses events
        over["engine"] = {**BASE["engine"], "ring_capacity": 16}
    report = run_checked(FAULTS[name], **over)
    _assert_clean(report)
    rows = {r["fault"]: r for r in summary_rows(report)}
    assert rows, "no fault was drawn"
    if name.startswith("ecc"):
        cls = "ecc_single" if name == "ecc_single" else "ecc_multi"
        assert rows[cls]["count"] >= 3 and rows[cls]["detected"] >= 3
    if name == "stall":
        r = rows["port_stall"]
        assert r["detected"] == 1 and r["failback_s_max"] is not None
    if name == "ring_overflow":
        assert report["manager"]["engine_ops"]["dump"] > 0  # the patrol ran after lost events
        r = next(r for r in report["faults"] if r["fault"] == "ring_overflow")
        assert r["events_lost"] > 0 and r["detected"]
    if name == "engine_failure":
        assert "engine" in rows["engine_failure"]["scopes"]
        assert rows["engine_failure"]["failback_s_max"] is not None


def test_all_fault_classes_mixed() -> None:
    faults: dict[str, list[Any]] = {}
    for f in FAULTS.values():
        for k, v in f.items():
            faults.setdefault(k, []).extend(v)
    report = run_checked(faults, oracle=True)
    _assert_clean(report)
    assert report["oracle"]["forwarded"] > 1000
    classes = {r["fault"] for r in report["faults"]}
    assert {"ecc_single", "ecc_multi", "port_stall", "ring_overflow", "manager_crash",
            "engine_failure"} <= classes  # fmt: skip


def test_faults_repeated() -> None:
    faults = {
        "stalls": [{"port": 2, "at": 0.08, "duration": 0.03},
                   {"port": 2, "at": 0.25, "duration": 0.03},
                   {"port": 0, "at": 0.4, "duration": 0.02}],
        "crashes": [{"at": 0.15}, {"at": 0.35}],
        "engine_failures": [{"at": 0.2, "duration": 0.02}, {"at": 0.45, "duration": 0.02}],
        "bit_flips": [{"rate_per_entry_hour": 10000, "bits": 2, "start": 0.05}],
    }  # fmt: skip
    report = run_checked(faults)
    _assert_clean(report)
    stalls = [r for r in report["faults"] if r["fault"] == "port_stall"]
    assert len(stalls) == 3 and all(r["detected"] for r in stalls)
    assert report["crashes"] == 2


def test_uncorrectable_entries_are_rebuilt_not_lost() -> None:
    """Most uncorrectable entries come back (rebuilt from the event and current policy); only
    unconfirmable ones are quarantined, and their packets are counted as lost."""
    report = run_checked(FAULTS["ecc_multi"])
    counts = report["manager"]["counts"]
    assert counts.get("ecc_rebuilt", 0) > 0
    assert counts.get("ecc_rebuilt", 0) >= counts.get("ecc_quarantined", 0)
    assert np.isfinite(report["patrol_period_s"])
