"""The `starfabric` command: the one error boundary of the project.

Every StarfabricError raised below becomes one line on stderr and exit code 2; `--debug`
(anywhere on the command line) shows the traceback instead.
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from typer.core import TyperGroup

from starfabric import __version__
from starfabric.config import validation_message
from starfabric.errors import StarfabricError

try:  # typer >= 0.26 carries its own copy of click, whose errors are not click's
    from typer._click.exceptions import UsageError as _UsageError
except ImportError:  # pragma: no cover - an older typer on click itself
    from click import UsageError as _UsageError  # type: ignore[assignment]

_err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def _hoist_debug(args: list[str]) -> list[str]:
    """`--debug` is a root option, but users put it anywhere: move it to the front (only
    before a `--` separator, after which every word is an argument)."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args
    rest = [a for a in args[:end] if a != "--debug"]
    return ["--debug", *rest, *args[end:]]


class _Boundary(TyperGroup):
    """Root group that turns user errors into one line instead of a traceback."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _hoist_debug(list(args)))

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            try:
                return super().invoke(ctx)
            except ValidationError as exc:  # a spec built from options without parse_spec
                raise validation_message(exc, "options") from None
        except StarfabricError as exc:
            if ctx.params.get("debug"):
                raise
            _err.print(f"error: {exc.one_line()}", markup=False)
            raise typer.Exit(exc.exit_code) from None
        except _UsageError as exc:  # a subcommand's option or argument that does not parse
            if ctx.params.get("debug") or type(exc).__name__ == "NoArgsIsHelpError":
                raise
            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            msg = " ".join(exc.format_message().split())
            _err.print(f"error: {where}: {msg} (fix: see '{where} --help')", markup=False)
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=_Boundary,
    name="starfabric",
    help="Fornax SmartNIC session offload and Astral LLM-training datacenter (SIGCOMM 2025).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"starfabric {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit.",
        callback=_show_version,
        is_eager=True,
    ),
) -> None:
    """starfabric: emulate Fornax and simulate Astral."""


def _register() -> None:
    from starfabric.cli.astral import astral_app
    from starfabric.cli.demo import demo
    from starfabric.cli.fornax import fornax_app

    app.add_typer(fornax_app, name="fornax")
    app.add_typer(astral_app, name="astral")
    app.command("demo")(demo)


_register()


def main() -> None:
    """Console-script entry point: announces a cold numba cache on stderr (one line)."""
    from starfabric import _jit

    _jit.announce_compiles(_err)
    app()


__all__ = ["app", "main"]
