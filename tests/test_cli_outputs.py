"""Every command with an output option refuses an unwritable path while its command line is
parsed: exit 2, one line naming the option, no traceback, and the command body never runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from click.testing import CliRunner

from starfabric.cli import app

EX = Path(__file__).resolve().parents[1] / "examples"
DATA = Path(__file__).resolve().parent / "data"

#: The smallest valid command line of each command that writes files (inputs that exist).
BASE: dict[str, list[str]] = {
    "demo": ["demo"],
    "fornax run": ["fornax", "run", str(EX / "scenario.yaml")],
    "fornax experiment": ["fornax", "experiment", "E1", "--scale", "ci"],
    "fornax chaos": ["fornax", "chaos", str(EX / "chaos-mixed.yaml")],
    "fornax policy check": ["fornax", "policy", "check", str(EX / "vpc-small.yaml")],
    "astral sim collective": ["astral", "sim", "collective", "--topo",
                              str(EX / "cluster-small.yaml"), "--gpus", "16"],
    "astral sim compare": ["astral", "sim", "compare", "--topo", str(EX / "cluster-small.yaml")],
    "astral sim deepep": ["astral", "sim", "deepep"],
    "astral seer predict": ["astral", "seer", "predict", str(EX / "jobs/llama31_70b_dense.yaml")],
    "astral seer validate": ["astral", "seer", "validate"],
    "astral seer search": ["astral", "seer", "search", "llama-3.1-8b", "--gpus", "8",
                           "--global-batch", "8", "--seq-len", "2048"],
    "astral seer calibrate": ["astral", "seer", "calibrate", "--gpu", "A100", "--nccl-tests",
                              str(DATA / "nccl_tests/superbench_1node_8xa100_40gb_nccl_allreduce.log")],
    "astral topo build": ["astral", "topo", "build", str(EX / "cluster-small.yaml")],
    "astral topo compare": ["astral", "topo", "compare", str(EX / "cluster-small.yaml")],
    "astral monitor synth": ["astral", "monitor", "synth"],
    "astral monitor diagnose": ["astral", "monitor", "diagnose", "x.duckdb"],
    "astral monitor ingest": ["astral", "monitor", "ingest"],
    "astral monitor eval": ["astral", "monitor", "eval"],
    "astral power timeline": ["astral", "power", "timeline", str(EX / "jobs/llama31_70b_dense.yaml"),
                              "--cluster", str(EX / "cluster-small.yaml")],
    "astral power year": ["astral", "power", "year"],
    "astral power crosscheck": ["astral", "power", "crosscheck"],
    "astral power provision": ["astral", "power", "provision", "--cluster",
                               str(EX / "cluster-small.yaml"), "--job",
                               str(EX / "jobs/llama31_70b_dense.yaml")],
}  # fmt: skip

#: Options that look like outputs but are not (a flag, an input).
NOT_OUTPUTS = {("astral seer predict", "--json"), ("astral seer validate", "--csv")}
OUTPUT_WORDS = ("--json", "--png", "--trace", "--out", "--csv", "--plot", "--prometheus",
                "--graphml", "--parquet")  # fmt: skip


def _commands(
    cmd: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        yield " ".join(path), cmd
        return
    for name, sub in subs.items():
        yield from _commands(sub, (*path, name))


def _output_params() -> list[tuple[str, click.Command, click.Parameter, str]]:
    found = []
    for name, cmd in _commands(typer.main.get_command(app)):
        for p in cmd.params:
            kind = getattr(p.callback, "starfabric_output", None)
            if kind:
                found.append((name, cmd, p, kind))
    return found


OUTPUTS = _output_params()


def test_every_output_looking_option_is_checked() -> None:
    """A new --json/--png/... option without the output layer's check fails here."""
    for name, cmd in _commands(typer.main.get_command(app)):
        for p in cmd.params:
            words = [o for o in p.opts if o in OUTPUT_WORDS]
            if words and (name, words[0]) not in NOT_OUTPUTS:
                assert getattr(p.callback, "starfabric_output", None), (name, words[0])
    assert {name for name, *_ in OUTPUTS} <= set(BASE)
    assert len(OUTPUTS) >= 20


def _bad_paths(tmp: Path, kind: str) -> list[str]:
    (tmp / "plain-file").write_text("keep me\n")
    proc = "/proc/sf19-no-such" + ("/x.out" if kind == "file" else "")
    if kind == "file":
        return [str(tmp), str(tmp / "plain-file" / "x.json"), proc]
    return [str(tmp / "plain-file"), proc]


@pytest.mark.parametrize(
    ("name", "param", "kind"),
    [(n, p.name, k) for n, _, p, k in OUTPUTS],
    ids=[f"{n}:{(p.opts[0])}" for n, _, p, _ in OUTPUTS],
)
def test_unwritable_output_fails_before_computing(
    name: str, param: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = typer.main.get_command(app)
    cmd = dict(_commands(root))[name]
    p = next(q for q in cmd.params if q.name == param)

    def body(**_: Any) -> None:
        raise AssertionError(f"{name} ran its computation with an unwritable {p.opts[0]}")

    monkeypatch.setattr(cmd, "callback", body)
    runner = CliRunner()
    for bad in _bad_paths(tmp_path, kind):
        args = list(BASE[name])
        if p.param_type_name == "argument":
            args.append(bad)
            if name == "astral monitor ingest":
                args.append(str(DATA / "telemetry/gpud_dmesg_xid119_gsp_timeout.log"))
        else:
            args += [p.opts[0], bad]
        res = runner.invoke(root, args, catch_exceptions=False)
        lines = res.output.strip().splitlines()
        assert res.exit_code == 2, (args, res.output)
        assert len(lines) == 1 and lines[0].startswith("error: "), res.output
        label = p.opts[0] if p.param_type_name == "option" else p.name.upper()
        assert label in lines[0] and "fix:" in lines[0], lines[0]
        assert "Traceback" not in res.output
    assert (tmp_path / "plain-file").read_text() == "keep me\n"
    assert sorted(q.name for q in tmp_path.iterdir()) == ["plain-file"]
