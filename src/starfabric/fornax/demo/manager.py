"""Demo-scale run of engine + manager: examples/vpc.yaml, synthetic traffic, one policy
change half way, a rich table, out/fornax_run.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from starfabric import outputs
from starfabric.errors import ConfigError
from starfabric.fornax.run.report import print_summary
from starfabric.fornax.run.scenario import Scenario, run_scenario

#: The packaged examples (the demo runs from a checkout; paths are relative to examples/).
EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def demo_scenario(seed: int) -> Scenario:
    """examples/scenario.yaml at demo scale: 1 s at 5k connections/s, change at 0.5 s."""
    return Scenario.model_validate(
        {
            "vpc": "vpc.yaml",
            "workload": {
                "kind": "synthetic", "seed": seed, "duration": 1.0, "cps": 5000.0,
                "tcp_ports": [443, 8080, 5432, 22, 80], "udp_ports": [53, 123],
                "batch": 0.002,
                "policy_changes": [{"at": 0.5, "vpc": "scenario-policy-v2.yaml"}],
            },
            "engine": {"capacity": 1 << 16, "tcp_time_wait_s": 0.5, "tcp_close_s": 0.5,
                       "udp_unreplied_s": 0.5, "udp_assured_s": 1.0, "icmp_s": 0.5,
                       "scrub_slots_per_tick": 8192},
            "softpath": {"capacity": 16384},
            "tick": 0.01,
        }
    )  # fmt: skip


def manager_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Run the demo; write out/fornax_run.json and return its summary."""
    if not (EXAMPLES / "vpc.yaml").is_file():
        raise ConfigError(
            f"manager demo: {EXAMPLES / 'vpc.yaml'} not found",
            fix="run the demo from a starfabric checkout (it replays examples/vpc.yaml)",
        )
    result = run_scenario(demo_scenario(seed), EXAMPLES)
    print_summary(console, result, title="Fornax manager (examples/vpc.yaml, 5k conn/s)")
    out.mkdir(parents=True, exist_ok=True)
    outputs.write_json(out / "fornax_run.json", result, sort_keys=True)
    p = result["packets"]
    return {
        "packets": p["offered"],
        "hw_forwarded": p["hw_forwarded"],
        "sw_forwarded": p["sw_forwarded"],
        "policy_drop": p["policy_drop"],
        "named_drop": p["named_drop"],
        "connections": result["connections"],
        "mgmt_cpu_s": result["mgmt_cpu_s"],
        "peak_sessions": result["peak_sessions"],
        "software_bytes_per_peak_session": result["software_bytes_per_peak_session"],
        "policy_changes": len(result["policy_changes"]),
    }


__all__ = ["demo_scenario", "manager_demo"]
