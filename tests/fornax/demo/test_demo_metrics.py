"""The demo runs at demo scale with one policy change; metrics export as Prometheus/JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from fornax.manager.conftest import NO_AGING
from fornax.manager.helpers import example_spec, example_traffic
from starfabric.fornax.demo.manager import manager_demo
from starfabric.fornax.engine import FastEngine
from starfabric.fornax.manager import Manager
from starfabric.fornax.vpc import compile_policy


def test_manager_demo(tmp_path: Path) -> None:
    console = Console(record=True, width=120)
    s = manager_demo(tmp_path, seed=1, console=console)
    assert s["policy_changes"] == 1 and s["connections"] > 1000
    total = s["hw_forwarded"] + s["sw_forwarded"] + s["policy_drop"] + s["named_drop"]
    assert total == s["packets"] > 0
    assert s["hw_forwarded"] > s["sw_forwarded"]  # sessions live in hardware
    data = json.loads((tmp_path / "fornax_run.json").read_text())
    assert data["events"]["version_mismatch"] > 0  # the change reached live sessions
    assert data["counts"]["redecided"] > 0
    assert "final outcome" in console.export_text()


def test_metrics_json_and_prometheus() -> None:
    m = Manager(FastEngine(capacity=1 << 12, **NO_AGING), compile_policy(example_spec()))
    for wb in example_traffic(duration=0.1):
        m.process(wb.packets)
        m.tick(wb.t_end_ns)
    s = m.summary()
    assert s["cpu_s_by_activity"]["miss"] > 0
    assert s["engine_ops"]["insert"] == s["counts"]["inserted"] == s["connections"]
    assert s["engine_ops_per_connection"] == 1.0  # one insert per connection, nothing else
    assert s["software_bytes"] == m.nat.nbytes
    text = m.prometheus().decode()
    assert 'fornax_manager_engine_ops_total{op="insert"}' in text
    assert 'fornax_manager_cpu_seconds_total{activity="miss"}' in text
    assert "fornax_manager_software_bytes" in text
    json.dumps(s)  # plain data
