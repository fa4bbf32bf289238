"""`starfabric astral monitor ...` commands end to end, and the demo entry point."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from starfabric.astral.monitor.demo import monitor_demo
from starfabric.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[2] / "data"


def test_synth_then_diagnose(tmp_path: Path) -> None:
    db = tmp_path / "j.duckdb"
    res = runner.invoke(
        app,
        [
            "astral",
            "monitor",
            "synth",
            str(db),
            "--fault",
            "cpu_contention:9:0.8:1",
            "--parquet",
            str(tmp_path / "pq"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert db.is_file() and (tmp_path / "j.truth.json").is_file()
    assert (tmp_path / "pq" / "phys_port.parquet").is_file()
    out = tmp_path / "d.json"
    tr = tmp_path / "t.json"
    res = runner.invoke(
        app, ["astral", "monitor", "diagnose", str(db), "--json", str(out), "--trace", str(tr)]
    )
    assert res.exit_code == 0, res.output
    names = {e.get("args", {}).get("name") for e in json.loads(tr.read_text())["traceEvents"]}
    assert {"suspect ranks", "reference ranks", "rank 72"} <= names
    assert "cpu_contention at host:9" in res.output
    d = json.loads(out.read_text())
    assert d["causes"][0]["component"] == "host:9"


def test_user_errors_are_one_line(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["astral", "monitor", "synth", str(tmp_path / "x.duckdb"), "--fault", "gpu_throttle"]
    )
    assert res.exit_code == 2 and res.output.startswith("error: --fault 'gpu_throttle'")
    res = runner.invoke(app, ["astral", "monitor", "diagnose", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 2 and "no such telemetry database" in res.output
    res = runner.invoke(
        app, ["astral", "monitor", "synth", str(tmp_path / "x.duckdb"), "--gpus", "1000"]
    )
    assert res.exit_code == 2 and "no monitored cluster layout" in res.output


def test_ingest_command(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "astral",
            "monitor",
            "ingest",
            str(tmp_path / "real.duckdb"),
            str(DATA / "telemetry" / "gpud_dmesg_xid119_gsp_timeout.log"),
            str(DATA / "telemetry" / "alibaba_v2020_minibatch_time_job_1_norm.csv"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "rank:6" in res.output and "Xid 119" in res.output
    res = runner.invoke(app, ["astral", "monitor", "diagnose", str(tmp_path / "real.duckdb")])
    assert res.exit_code == 0, res.output
    assert "1. straggler at rank:6" in res.output  # the README's straggler ranks first
    assert "Xid 119" in res.output


def test_superbench_through_ingest_and_diagnose(tmp_path: Path) -> None:
    db = tmp_path / "sb.duckdb"
    files = ["superbench_diagnosis_summary.jsonl", "superbench_monitor_gpu_node.jsonl"]
    res = runner.invoke(
        app, ["astral", "monitor", "ingest", str(db), *[str(DATA / "telemetry" / f) for f in files]]
    )
    assert res.exit_code == 0, res.output
    assert "superbench-diagnosis" in res.output and "superbench-monitor" in res.output
    out = tmp_path / "d.json"
    res = runner.invoke(app, ["astral", "monitor", "diagnose", str(db), "--json", str(out)])
    assert res.exit_code == 0, res.output
    top = [c["component"] for c in json.loads(out.read_text())["causes"][:2]]
    # SuperBench's data diagnosis names two defective nodes; both are found, nothing else high.
    assert sorted(top) == ["node:sb-validation-01/gpu0", "node:sb-validation-03"]


def test_demo(tmp_path: Path) -> None:
    con = Console(record=True, width=120)
    s = monitor_demo(tmp_path, 1, con)
    assert s["top1_correct"] and s["injected"] == s["reported"][:1]
    assert json.loads((tmp_path / "monitor.json").read_text())["gpus"] == 1024
    assert "root cause: link_crc" in con.export_text()


def test_example_spec_runs_and_is_diagnosed(tmp_path: Path) -> None:
    ex = Path(__file__).resolve().parents[3] / "examples" / "monitor-1k-two-faults.yaml"
    db = tmp_path / "ex.duckdb"
    res = runner.invoke(app, ["astral", "monitor", "synth", str(db), "--spec", str(ex)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["astral", "monitor", "diagnose", str(db)])
    assert "misconfig_dcqcn at nic:640" in res.output and "gpu_throttle at gpu:301" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus: 1024\nfautls: []\n")
    res = runner.invoke(app, ["astral", "monitor", "synth", str(db), "--spec", str(bad)])
    assert res.exit_code == 2 and "fautls" in res.output
