"""Shared pieces of the LinuxEngine tests: the skip reason, one lab per test module (removed in
a finally, also on an interrupt: Lab cleans up on SIGINT/SIGTERM too), engines closed after
each test, and a small scenario (examples/vpc.yaml) replayed through a Manager."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from starfabric.fornax.datapaths.linux.netns import Lab, LabConfig, linux_support
from starfabric.fornax.engine import EngineConfig, SessionEngine, make_config
from starfabric.fornax.manager.accounting import Fate
from starfabric.fornax.manager.config import ManagerConfig
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.vpc import compile_policy, load_vpc_spec
from starfabric.fornax.workload import parse_workload, workload_batches

WHY = linux_support()
needs_kernel = pytest.mark.skipif(WHY is not None, reason=f"Linux datapath: {WHY}")
EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    """One lab (three namespaces, unique names) for a test module, always removed."""
    if WHY is not None:
        pytest.skip(f"Linux datapath: {WHY}")
    lb = Lab(LabConfig(prefix="sfxe"))
    try:
        lb.__enter__()
        yield lb
    finally:
        lb.close()


def small_engine_config(**kw: Any) -> EngineConfig:
    base: dict[str, Any] = {"capacity": 4096, "ring_capacity": 4096, "eni_scopes": 1024,
                            "vpc_scopes": 64, "scrub_slots_per_tick": 4096}  # fmt: skip
    return make_config(None, **{**base, **kw})


def workload(duration: str = "0.3s", cps: int = 300, seed: int = 7) -> Any:
    """A short synthetic workload over examples/vpc.yaml (TCP, UDP, ICMP; east-west,
    outbound, inbound)."""
    return parse_workload({
        "kind": "synthetic", "seed": seed, "duration": duration, "cps": cps, "tcp": 0.8,
        "udp": 0.15, "icmp": 0.05, "east_west": 0.7, "outbound": 0.2, "inbound": 0.1,
        "tcp_ports": [443, 8080, 5432, 22, 80], "udp_ports": [53, 123], "batch": "10ms",
    })  # fmt: skip


def manager_over(engine: SessionEngine, vpc: str = "vpc.yaml") -> Manager:
    return Manager(engine, compile_policy(load_vpc_spec(EXAMPLES / vpc)),
                   ManagerConfig(install_drop_sessions=True))  # fmt: skip


def replay(m: Manager, wl: Any, *, change_at_ns: int | None = None,
           change_vpc: str = "scenario-policy-v2.yaml") -> list[tuple[Any, Fate, Any]]:  # fmt: skip
    """Run the workload batch by batch through the manager (ticks at batch ends); returns
    (batch, fate, what the wire showed or None) per batch. A policy change, when asked, is
    applied (and acknowledged: apply_policy returned) before the first batch at or after
    change_at_ns."""
    spec = load_vpc_spec(EXAMPLES / "vpc.yaml")
    out = []
    changed = change_at_ns is None
    seen: list[np.ndarray] = []  # what the wire showed per engine.process call
    engine = m.engine
    process = engine.process

    def recording(batch: Any) -> Any:
        res = process(batch)
        wire = getattr(engine, "last_forwarded", None)
        if wire is not None:
            seen.append(np.asarray(wire).copy())
        return res

    engine.process = recording  # type: ignore[method-assign]
    try:
        for wb in workload_batches(spec, wl):
            if not changed and wb.t_start_ns >= change_at_ns:
                m.apply_policy(load_vpc_spec(EXAMPLES / change_vpc))
                changed = True
            seen.clear()
            fate = m.process(wb.packets)  # the manager may split a batch (time cuts), in order
            wire = np.concatenate(seen) if seen else None
            assert wire is None or len(wire) == len(wb.packets), (
                len(wire),
                len(wb.packets),
                [len(x) for x in seen],
            )
            out.append((wb, fate, wire))
            m.tick(wb.t_end_ns)
    finally:
        del engine.process  # the class's method again
    return out
