"""The power commands: what they print, and bad input refused in one line with exit 2."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.power.weather import weather_path
from starfabric.cli import app

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


def _refused(args: list[str], *words: str) -> str:
    res = runner.invoke(app, args)
    out = res.output.strip()
    assert res.exit_code == 2, f"{args}: exit {res.exit_code}: {res.output[-500:]}"
    assert "Traceback" not in res.output
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _epw_lines() -> list[str]:
    return weather_path("chicago").read_text(encoding="latin-1").splitlines()


def test_year_prints_pue_and_modes(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["astral", "power", "year", "--plant", "air-econ", "--weather", "tampa",
              "--json", str(tmp_path / "y.json")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "PUE" in res.output and "air_economizer_full" in res.output
    assert (tmp_path / "y.json").is_file()


def test_bad_weather_files(tmp_path: Path) -> None:
    lines = _epw_lines()
    short = tmp_path / "short.epw"
    short.write_text("\n".join(lines[:5000]) + "\n")
    _refused(["astral", "power", "year", "--weather", str(short)], "truncated")
    nan = tmp_path / "nan.epw"
    f = lines[100].split(",")
    f[6] = "nan"
    nan.write_text("\n".join([*lines[:100], ",".join(f), *lines[101:]]) + "\n")
    _refused(["astral", "power", "year", "--weather", str(nan)], "dry bulb is nan")
    _refused(["astral", "power", "year", "--weather", str(tmp_path / "missing.epw")], "not found")


def test_bad_plant_and_hierarchy(tmp_path: Path) -> None:
    neg = tmp_path / "neg.yaml"
    neg.write_text("air:\n  fan_efficiency: -0.6\n")
    _refused(["astral", "power", "year", "--plant-file", str(neg)], "fan_efficiency")
    red = tmp_path / "red.yaml"
    red.write_text("chain:\n  redundancy: 3N\n")
    _refused(["astral", "power", "year", "--plant-file", str(red)], "redundancy")
    _refused(["astral", "power", "year", "--plant", "nope"], "unknown")
    reuse = tmp_path / "reuse.yaml"
    reuse.write_text("heat_reuse:\n  annual_fraction: 1.5\n")
    _refused(["astral", "power", "year", "--plant-file", str(reuse)], "annual_fraction")
    _refused(
        ["astral", "power", "timeline", str(ROOT / "examples/jobs/llama31_70b_dense.yaml"),
         "--cluster", str(ROOT / "examples/cluster-small.yaml"), "--limits", "mars"],
        "utility limits 'mars' unknown", "choukse-2025",
    )  # fmt: skip


def test_air_rack_over_its_limit_is_refused_with_the_fix(tmp_path: Path) -> None:
    cl = tmp_path / "cl.yaml"
    cl.write_text(
        "name: hot\ntopology: fat-tree\ngpu: H100\nswitch: 25.6T\nport_speed: 400G\n"
        "nic: CX7-400G\ngpus_per_host: 8\ngpus: 1024\npower:\n  cooling: air\n  rack_kw: 60\n"
    )
    line = _refused(
        ["astral", "power", "timeline", str(ROOT / "examples/jobs/llama31_70b_dense.yaml"),
         "--cluster", str(cl)], "60.0 kW rack exceeds what air cooling removes", "fix:",
    )  # fmt: skip
    assert "air-liquid" in line


@pytest.mark.slow
def test_timeline_and_provision(tmp_path: Path) -> None:
    cl = tmp_path / "cl.yaml"
    cl.write_text(
        "name: h100-1k\ntopology: fat-tree\ngpu: H100\nswitch: 25.6T\nport_speed: 400G\n"
        "nic: CX7-400G\ngpus_per_host: 8\ngpus: 1024\npower:\n  cooling: air-liquid\n"
    )
    job = str(ROOT / "examples/jobs/llama31_70b_dense.yaml")
    res = runner.invoke(
        app, ["astral", "power", "timeline", job, "--cluster", str(cl), "--smooth",
              "floor=0.6,storage=50kWh/1000kW", "--png", str(tmp_path / "t.png"),
              "--trace", str(tmp_path / "t.json")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "power floor 60% TDP" in res.output and (tmp_path / "t.png").stat().st_size > 1000
    import json

    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(e.get("ph") == "C" and e["name"] == "site power (MW)" for e in trace["traceEvents"])
    res = runner.invoke(
        app, ["astral", "power", "provision", "--cluster", str(cl), "--job", job, "--site-mw", "20"]
    )
    assert res.exit_code == 0, res.output
    assert "fails first" in res.output
    hier = tmp_path / "h.yaml"
    hier.write_text("levels:\n  - {name: rack, rating_kw: 40, redundancy: N-1}\n")
    _refused(
        ["astral", "power", "provision", "--cluster", str(cl), "--job", job, "--hierarchy",
         str(hier)], "redundancy",
    )  # fmt: skip
