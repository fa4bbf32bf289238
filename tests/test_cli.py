from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from starfabric.cli import _Boundary, _hoist_debug, app
from starfabric.errors import DataError, InfeasibleError, StarfabricError

DATA = Path(__file__).resolve().parent / "data"

runner = CliRunner()


def _app_that_fails() -> typer.Typer:
    t = typer.Typer(cls=_Boundary)

    @t.callback()
    def root(debug: bool = typer.Option(False, "--debug")) -> None:
        pass

    @t.command()
    def build() -> None:
        raise InfeasibleError("topology: radix 100 is not a power of two", fix="use 64 or 128")

    return t


def test_user_error_is_one_line_exit_2_no_traceback() -> None:
    res = runner.invoke(_app_that_fails(), ["build"])
    assert res.exit_code == 2
    out = res.output.strip()
    assert out == "error: topology: radix 100 is not a power of two (fix: use 64 or 128)"
    assert "Traceback" not in res.output


def test_debug_shows_the_exception() -> None:
    res = runner.invoke(_app_that_fails(), ["--debug", "build"])
    assert isinstance(res.exception, InfeasibleError)


def test_unknown_option_is_refused() -> None:
    res = runner.invoke(app, ["fornax", "--no-such-option"])
    assert res.exit_code == 2
    assert "No such option" in res.output


def test_groups_are_listed() -> None:
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for name in ("fornax", "astral", "demo"):
        assert name in res.output


def test_version() -> None:
    from starfabric import __version__

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"starfabric {__version__}"


def test_debug_works_anywhere_on_the_line(tmp_path: Path) -> None:
    args = ["astral", "topo", "build", str(tmp_path / "missing.yaml")]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "Traceback" not in res.output
    for at in (0, 2, len(args)):
        res = runner.invoke(app, [*args[:at], "--debug", *args[at:]])
        assert isinstance(res.exception, StarfabricError), at


def test_hoist_debug_stops_at_double_dash() -> None:
    assert _hoist_debug(["a", "--debug", "b"]) == ["--debug", "a", "b"]
    assert _hoist_debug(["a", "--", "--debug"]) == ["a", "--", "--debug"]


def test_failed_synth_keeps_the_good_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import starfabric.astral.monitor as monitor

    db = tmp_path / "t.duckdb"
    db.write_bytes(b"a good database")
    monitor.faults.truth_path(db).write_text("[]")

    def fails(spec: object, faults: object, path: Path) -> None:
        path.write_bytes(b"")  # what a crashed run leaves: an empty database
        raise DataError("synthesis failed half way")

    monkeypatch.setattr(monitor, "synth_to_file", fails)
    res = runner.invoke(app, ["astral", "monitor", "synth", str(db), "--gpus", "1024"])
    assert res.exit_code == 2, res.output
    assert db.read_bytes() == b"a good database"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.duckdb", "t.truth.json"]
    db.unlink()
    monitor.faults.truth_path(db).unlink()
    res = runner.invoke(app, ["astral", "monitor", "synth", str(db)])
    assert res.exit_code == 2 and list(tmp_path.iterdir()) == []  # no empty database left


def test_failed_ingest_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    import gzip

    good = DATA / "telemetry" / "gpud_dmesg_xid119_gsp_timeout.log"
    bad = tmp_path / "trace.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [' * 50)[:-20])  # a truncated gzip
    db = tmp_path / "t.duckdb"
    res = runner.invoke(app, ["astral", "monitor", "ingest", str(db), str(bad)])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert not db.exists()  # no empty database left behind
    res = runner.invoke(app, ["astral", "monitor", "ingest", str(db), str(good)])
    assert res.exit_code == 0, res.output
    before = db.read_bytes()
    res = runner.invoke(app, ["astral", "monitor", "ingest", str(db), str(good), str(bad)])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.duckdb", "trace.json.gz"]


def test_messages_keep_markup_and_emoji_codes_literal(tmp_path: Path) -> None:
    """':1234:' is an emoji code and '[bold]' Rich markup: paths and values print as typed."""
    weird = tmp_path / "[bold]link_crc:1234:0.7:2.yaml"
    res = runner.invoke(app, ["astral", "topo", "build", str(weird)])
    assert res.exit_code == 2
    assert str(weird) in res.output and "\U0001f522" not in res.output


def test_piped_tables_are_not_cut_to_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from starfabric.cli._console import PIPED_WIDTH, console

    monkeypatch.delenv("COLUMNS", raising=False)
    assert console().width == PIPED_WIDTH  # CliRunner's stdout is not a terminal
    monkeypatch.setenv("COLUMNS", "100")
    assert console().width == 100
