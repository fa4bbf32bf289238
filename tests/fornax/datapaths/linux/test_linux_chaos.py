"""The chaos faults with a kernel twin, run over LinuxEngine: a stuck event poller over a small
netlink receive buffer (the ring: ENOBUFS) and a manager crash with restart from the kernel's
table (a ctnetlink dump), with traffic and real packets; the per-fault figures (detected,
detection time, packets lost, misforwarded) and the packet totals equal the emulated NIC's
under the same run. Kernel timeouts are floored (LinuxEngine min_timeout_s) as in the
conformance suite: the run's packets' clock moves faster than the kernel's."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from fornax.datapaths.linux.linux_fixtures import EXAMPLES, lab, needs_kernel
from starfabric.fornax.datapaths.linux import Lab, LinuxEngine
from starfabric.fornax.engine import EngineConfig, SessionEngine
from starfabric.fornax.run.chaos import run_chaos
from starfabric.fornax.run.chaos_spec import load_chaos

__all__ = ["lab"]  # the module-scoped fixture
pytestmark = needs_kernel
SPEC = {
    "vpc": str(EXAMPLES / "vpc.yaml"), "seed": 3,
    "workload": {"kind": "synthetic", "seed": 11, "duration": "0.3s", "cps": 500,
                 "tcp_ports": [443, 8080, 5432, 22, 80], "udp_ports": [53, 123],
                 "batch": "5ms"},
    "engine": {"capacity": 16384, "ring_capacity": 16, "n_ports": 8, "eni_scopes": 1024,
               "vpc_scopes": 64, "scrub_slots_per_tick": 16384},
    "softpath": {"capacity": 65536},
    "health": {"patrol_rate": 100000, "healthy_s": 0.3, "vpc_sessions": 8},
    "tick": "10ms",
    "faults": {"ring_overflows": [{"at": "0.05s", "duration": "0.15s"}],
               "crashes": [{"at": "0.22s"}]},
}  # fmt: skip
FIGURES = ("fault", "at_s", "detected", "detect_s", "events_lost", "lost", "misforwarded")


def test_kernel_twin_faults_match_the_emulated_nic(lab: Lab, tmp_path: Path) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    spec, base = load_chaos(path)
    t0 = time.perf_counter()
    emulated = run_chaos(spec, base)
    t1 = time.perf_counter()
    engines: list[LinuxEngine] = []

    def make(cfg: EngineConfig) -> SessionEngine:
        e = LinuxEngine(cfg, lab, event_rcvbuf=4096, min_timeout_s=60)
        engines.append(e)
        return e

    try:
        linux = run_chaos(spec, base, engine_factory=make)
    finally:
        for e in engines:
            e.close()
    print(f"emulated {t1 - t0:.1f} s, linux {time.perf_counter() - t1:.1f} s")
    fig = [{k: f.get(k) for k in FIGURES} for f in linux["faults"]]
    assert fig == [{k: f.get(k) for k in FIGURES} for f in emulated["faults"]]
    assert [f["fault"] for f in fig] == ["ring_overflow", "manager_crash"]
    crash = fig[1]
    assert crash["detected"] and crash["lost"] == 0 and crash["misforwarded"] == 0
    assert linux["packets"] == emulated["packets"]
    assert linux["oracle"]["misforwarded"] == 0 and linux["oracle"]["lost"] == 0
