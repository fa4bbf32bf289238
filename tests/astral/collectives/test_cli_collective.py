"""`astral sim collective` with NCCL's algorithms: the choice is printed, bad options exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from starfabric.cli import app

runner = CliRunner()
HW = Path(__file__).parents[2] / "data" / "nccl_hardware"


def test_auto_prints_the_tuners_choice_per_size(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(
        app,
        [
            "astral", "sim", "collective", "--topo", str(HW / "aws-p5-h100-efa-2node.yaml"),
            "--gpus", "16", "--sweep", "--min-size", "4KiB", "--max-size", "1GiB",
            "--json", str(out),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "nvls_tree/Simple" in res.output and "efa" in res.output
    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["protocol"] in ("LL", "LL128")  # small messages: a low-latency protocol
    assert rows[-1]["algorithm"] == "nvls_tree"
    assert all(r["busbw_gbps"] > 0 for r in rows)


def test_forced_algorithm_and_protocol(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(
        app,
        [
            "astral", "sim", "collective", "--topo", str(HW / "aws-p5-h100-efa-2node.yaml"),
            "--gpus", "16", "--algo", "ring", "--proto", "LL128", "--transport", "roce",
            "--json", str(out),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["transport"] == "roce"
    assert data["rows"][0]["algorithm"] == "ring" and data["rows"][0]["protocol"] == "LL128"


def test_bad_options_are_one_line_errors() -> None:
    topo = str(HW / "aws-p5-h100-efa-2node.yaml")
    for extra in (["--algo", "magic"], ["--proto", "LL64"], ["--transport", "carrier-pigeon"]):
        res = runner.invoke(
            app, ["astral", "sim", "collective", "--topo", topo, "--gpus", "16", *extra]
        )
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output and "error:" in res.output
    res = runner.invoke(
        app,
        ["astral", "sim", "collective", "--topo", topo, "--gpus", "8", "--algo", "nvls_tree"],
    )
    assert res.exit_code == 2 and "nvls_tree" in res.output


def test_nccl_env_takes_nvls_out_of_the_tuners_choice(tmp_path: Path) -> None:
    """NCCL_NVLS_ENABLE=0 (as CoreWeave's later GB200 jobs set it) leaves NCCL's ring and tree:
    the same 2-node H100 job picks nvls_tree without it and something else with it."""
    topo = str(HW / "aws-p5-h100-efa-2node.yaml")
    out = tmp_path / "r.json"
    base = ["astral", "sim", "collective", "--topo", topo, "--gpus", "16", "--size", "1GiB"]
    res = runner.invoke(app, [*base, "--nccl-env", "NCCL_NVLS_ENABLE=0", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["rows"][0]["algorithm"] in ("ring", "tree")
    for bad in ("NCCL_NVLS_ENABLE", "NCCL_NVLS_ENABLE=2", "NCCL_MAGIC=1"):
        res = runner.invoke(app, [*base, "--nccl-env", bad])
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output and "--nccl-env" in res.output
