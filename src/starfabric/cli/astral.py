"""`starfabric astral …`: topology, network simulation, Seer, monitor."""

from __future__ import annotations

import typer

astral_app = typer.Typer(
    help="Astral: LLM-training datacenter network, power, Seer and monitor.", no_args_is_help=True
)
