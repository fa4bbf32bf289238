"""`starfabric fornax …`: the SmartNIC session engine, manager, experiments."""

from __future__ import annotations

import typer

fornax_app = typer.Typer(
    help="Fornax: hardware-centric SmartNIC session management.", no_args_is_help=True
)
