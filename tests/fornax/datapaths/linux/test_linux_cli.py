"""`starfabric fornax run --datapath linux`: the scenario's traffic as real packets through
the same manager, the same summary as on the emulated NIC plus what the wire showed; on a
host that cannot run it, one line naming what is missing and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fornax.datapaths.linux.linux_fixtures import EXAMPLES, needs_kernel
from starfabric.cli import app
from starfabric.fornax.datapaths.linux import netns

runner = CliRunner()
SCENARIO = """vpc: {vpc}
workload: {{kind: synthetic, seed: 7, duration: 0.1s, cps: 300, batch: 10ms,
           tcp_ports: [443, 8080, 22], udp_ports: [53]}}
engine: {{capacity: 4096, eni_scopes: 1024, vpc_scopes: 64, scrub_slots_per_tick: 4096}}
manager: {{install_drop_sessions: true}}
tick: 10ms
"""


def _scenario(tmp: Path) -> Path:
    p = tmp / "scenario.yaml"
    p.write_text(SCENARIO.format(vpc=EXAMPLES / "vpc.yaml"))
    return p


def test_missing_kernel_support_is_one_line_exit_2(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(netns, "linux_support", lambda: "needs root (network namespaces)")
    r = runner.invoke(app, ["fornax", "run", str(_scenario(tmp_path)), "--datapath", "linux"])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "--datapath linux" in lines[0] and "needs root" in lines[0]
    r = runner.invoke(app, ["fornax", "run", str(_scenario(tmp_path)), "--datapath", "dpdk"])
    assert r.exit_code == 2 and "emulated, linux" in r.output


@needs_kernel
def test_run_over_linux_reports_the_emulated_metrics(tmp_path: Path) -> None:
    outs = {}
    for dp in ("emulated", "linux"):
        out = tmp_path / f"{dp}.json"
        r = runner.invoke(app, ["fornax", "run", str(_scenario(tmp_path)), "--datapath", dp,
                                "--json", str(out)])  # fmt: skip
        assert r.exit_code == 0, r.output
        outs[dp] = json.loads(out.read_text())
    emu, lin = outs["emulated"], outs["linux"]
    assert lin["datapath"] == "linux" and set(emu) <= set(lin)
    assert lin["packets"] == emu["packets"]  # every packet's final verdict, totalled
    assert lin["connections"] == emu["connections"]
    w = lin["wire"]
    assert w["frames"] == lin["packets"]["offered"] and w["lost"] == 0
    assert w["misforwarded"] == 0 and w["passed_not_seen"] == 0
    assert not [
        n for n in netns.lab_namespaces("sfx") if n.startswith(f"sfx-{__import__('os').getpid()}-")
    ]  # its lab is gone


def test_chaos_refuses_faults_without_a_kernel_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    """ECC bit flips, port stalls and pipeline stops have no kernel twin: one line, exit 2."""
    monkeypatch.setattr(netns, "linux_support", lambda: None)
    r = runner.invoke(app, ["fornax", "chaos", str(EXAMPLES / "chaos-mixed.yaml"),
                            "--datapath", "linux"])  # fmt: skip
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "faults.bit_flips has no kernel twin" in lines[0]
