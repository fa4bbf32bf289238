import typer
from typer.testing import CliRunner

from starfabric.cli import _Boundary, app
from starfabric.errors import InfeasibleError

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
