"""The `starfabric` command: the one error boundary of the project.

Every StarfabricError raised below becomes one line on stderr and exit code 2; `--debug`
shows the traceback instead.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from starfabric.errors import StarfabricError

_err = Console(stderr=True, highlight=False, soft_wrap=True)


class _Boundary(TyperGroup):
    """Root group that turns user errors into one line instead of a traceback."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except StarfabricError as exc:
            if ctx.params.get("debug"):
                raise
            _err.print(f"error: {exc.one_line()}", markup=False)
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=_Boundary,
    name="starfabric",
    help="Fornax SmartNIC session offload and Astral LLM-training datacenter (SIGCOMM 2025).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
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
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
