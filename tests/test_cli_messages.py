"""Issue 19's "silently accepted nonsense" and "misleading messages", typed as a user would:
each ends in exit 2 with one line that names the option the user gave, the value and a fix
that works (the input files' cases are in test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.cli import app

EX = Path(__file__).resolve().parents[1] / "examples"
JOB = str(EX / "jobs" / "llama31_70b_dense.yaml")
SMALL = str(EX / "cluster-small.yaml")
SEARCH = ["astral", "seer", "search", "llama-3.1-8b", "--gpus", "8", "--global-batch", "8"]
TRACE = ["fornax", "trace", "--src", "10.0.0.1:1234", "--proto"]
COLLECTIVE = ["astral", "sim", "collective", "--topo", SMALL, "--op", "all_reduce", "--gpus"]

CASES = [
    (["astral", "seer", "predict", JOB, "--gpus", "-8"], "--gpus -8: must be at least 1"),
    ([*COLLECTIVE, "16", "--size", "1XB"], "--size: cannot read '1XB'"),
    ([*COLLECTIVE, "16", "--sweep", "--max-size", "2XB"], "--max-size: cannot read '2XB'"),
    ([*SEARCH, "--seq-len", "2048", "--top", "-3"], "--top -3: must be at least 1"),
    ([*SEARCH, "--seq-len", "10000000"], "--seq-len 10,000,000 is beyond llama-3.1-8b's"),
    ([*TRACE, "tcp", "--dst", "[fd00::2]:80", "--flags", "S"], "mix IPv4 and IPv6"),
    ([*TRACE, "udp", "--dst", "10.0.0.2:80", "--flags", "S"], "only TCP has flags"),
    (["fornax", "policy", "check", str(EX / "vpc.yaml"), "--vni", "5"], "--vni is used only"),
    (
        [
            "astral",
            "monitor",
            "synth",
            "OUT.duckdb",
            "--spec",
            str(EX / "monitor-1k-two-faults.yaml"),
            "--gpus",
            "2048",
        ],
        "--gpus would be ignored with --spec",
    ),
]


@pytest.mark.parametrize(("args", "words"), CASES, ids=[" ".join(a[:3]) for a, _ in CASES])
def test_nonsense_is_refused_in_one_line_naming_the_option(
    args: list[str], words: str, tmp_path: Path
) -> None:
    args = [str(tmp_path / a) if a.endswith(".duckdb") else a for a in args]
    res = CliRunner().invoke(app, args)
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2, res.output[-500:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "(fix: " in lines[0], lines
    assert words in lines[0], lines[0]
    assert not list(tmp_path.iterdir()), "an output was written"
