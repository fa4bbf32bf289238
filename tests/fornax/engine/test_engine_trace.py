"""`starfabric fornax trace`: golden text for each stage that can decide a packet."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.cli import app

HERE = Path(__file__).parent / "golden"
SC = str(HERE / "faults.yaml")

CASES = {
    "hit_default": ["--src", "10.0.0.1:1234", "--dst", "10.0.0.2:80", "--flags", "A"],
    "reply_synack_ignored": ["--src", "10.0.0.2:80", "--dst", "10.0.0.1:1234", "--flags", "SA"],
    "miss": ["--src", "10.0.0.9:1", "--dst", "10.0.0.2:80", "--flags", "S"],
    "stale": ["--scenario", SC, "--src", "10.0.0.2:80", "--dst", "10.0.0.3:1000", "--flags", "SA"],
    "ecc_corrected": ["--scenario", SC, "--vni", "8", "--proto", "udp",
                      "--src", "192.168.1.6:53", "--dst", "192.168.1.5:5000"],
    "ecc_uncorrectable": ["--scenario", SC, "--vni", "8", "--src", "192.168.1.5:6000",
                          "--dst", "192.168.1.7:22", "--flags", "A"],
    "drop": ["--scenario", SC, "--vni", "8", "--src", "192.168.1.8:443",
             "--dst", "192.168.1.5:7000", "--flags", "A"],
    "time_wait_reuse_ipv6": ["--scenario", SC, "--vni", "9", "--src", "[2001:db8::1]:40000",
                             "--dst", "[2001:db8::2]:443", "--flags", "S"],
    "icmp_echo_reply": ["--scenario", SC, "--vni", "9", "--proto", "icmp", "--icmp-type", "0",
                        "--src", "10.9.0.2:77", "--dst", "10.9.0.1:0"],
    "port_stalled": ["--scenario", SC, "--port", "3", "--src", "10.0.0.1:1234",
                     "--dst", "10.0.0.2:80", "--flags", "A"],
    "tcp_invalid": ["--scenario", SC, "--src", "10.0.0.1:1234", "--dst", "10.0.0.2:80",
                    "--flags", "SA"],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_trace_matches_golden(name: str) -> None:
    res = CliRunner().invoke(app, ["fornax", "trace", *CASES[name]])
    assert res.exit_code == 0, res.output
    golden = HERE / f"{name}.txt"
    if os.environ.get("STARFABRIC_UPDATE_GOLDEN"):
        golden.write_text(res.output)
    assert res.output == golden.read_text()


def test_trace_bad_endpoint_is_one_line() -> None:
    res = CliRunner().invoke(app, ["fornax", "trace", "--src", "10.0.0.1", "--dst", "x:1"])
    assert res.exit_code == 2
    assert "is not ADDRESS:PORT" in res.output and "Traceback" not in res.output
