"""`starfabric fornax run`: scenarios, pcap replay of every shared trace, one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.cli import app

PCAPS = sorted(Path("tests/data/pcap").glob("zeek_*.pcap*"))
runner = CliRunner()


def _scenario(tmp: Path, pcap: Path, **extra: str) -> Path:
    shutil.copy("examples/vpc.yaml", tmp / "vpc.yaml")
    lines = ["vpc: vpc.yaml", "workload:", "  kind: pcap", f"  path: {pcap.resolve()}",
             "engine: {capacity: 4096}", "tick: 10ms"]  # fmt: skip
    lines += [f"{k}: {v}" for k, v in extra.items()]
    p = tmp / "scenario.yaml"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("pcap", PCAPS, ids=lambda p: p.name)
def test_every_shared_pcap_replays(tmp_path: Path, pcap: Path) -> None:
    out = tmp_path / "run.json"
    r = runner.invoke(app, ["fornax", "run", str(_scenario(tmp_path, pcap)), "--json", str(out)])
    assert r.exit_code == 0, r.output
    s = json.loads(out.read_text())
    p = s["packets"]
    assert p["offered"] > 0
    assert p["offered"] == sum(p[k] for k in ("hw_forwarded", "sw_forwarded", "policy_drop",
                                              "named_drop"))  # fmt: skip
    assert s["engine_counters"]["packets"] == p["offered"]


def test_corrupted_pcap_names_the_packet(tmp_path: Path) -> None:
    data = bytearray(Path("tests/data/pcap/zeek_tcp_handshake_fin.pcap").read_bytes())
    bad = tmp_path / "bad.pcap"
    # record header of packet 2 claims a huge captured length
    off = 24
    for _ in range(2):
        incl = int.from_bytes(data[off + 8 : off + 12], "little")
        off += 16 + incl
    data[off + 8 : off + 12] = (10**6).to_bytes(4, "little")
    bad.write_bytes(bytes(data))
    r = runner.invoke(app, ["fornax", "run", str(_scenario(tmp_path, bad))])
    assert r.exit_code == 2
    lines = [x for x in r.output.strip().splitlines() if x]
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "packet 2" in lines[0] or "packet index 2" in lines[0] or "#2" in lines[0]


def test_truncated_pcap_names_the_packet(tmp_path: Path) -> None:
    data = Path("tests/data/pcap/zeek_tcp_handshake_fin.pcap").read_bytes()
    bad = tmp_path / "short.pcap"
    bad.write_bytes(data[: len(data) - 7])
    r = runner.invoke(app, ["fornax", "run", str(_scenario(tmp_path, bad))])
    assert r.exit_code == 2
    lines = [x for x in r.output.strip().splitlines() if x]
    assert len(lines) == 1 and lines[0].startswith("error:") and "packet" in lines[0]


def test_example_scenarios(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    prom = tmp_path / "m.prom"
    r = runner.invoke(app, ["fornax", "run", "examples/scenario-pcap.yaml", "--json", str(out),
                            "--prometheus", str(prom)])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "final outcome" in r.output and "hw_forwarded" in r.output
    text = prom.read_text()
    assert "fornax_manager_cpu_seconds_total" in text and "fornax_manager_engine_ops" in text


def test_scenario_errors_are_one_line(tmp_path: Path) -> None:
    p = _scenario(tmp_path, PCAPS[0], tick_s="1")
    r = runner.invoke(app, ["fornax", "run", str(p)])
    assert r.exit_code == 2 and "tick_s" in r.output and len(r.output.strip().splitlines()) == 1
    p.write_text(p.read_text().replace("tick_s: 1\n", "").replace("kind: pcap", "kind: pcapng"))
    r = runner.invoke(app, ["fornax", "run", str(p)])
    assert r.exit_code == 2 and "kind" in r.output
