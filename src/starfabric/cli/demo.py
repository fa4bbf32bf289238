"""`starfabric demo`: both systems end to end on embedded defaults, at demo scale."""

from __future__ import annotations

from pathlib import Path

import typer

from starfabric.cli._console import console
from starfabric.cli._options import seed_option
from starfabric.demo import run_demo
from starfabric.outputs import output_dir


def demo(
    out: Path = typer.Option(
        Path("out/demo"),
        "--out",
        help="Folder for the demo's outputs.",
        callback=output_dir("--out"),
    ),
    seed: int = typer.Option(
        1, "--seed", help="Random seed for every generator.", callback=seed_option("--seed")
    ),
) -> None:
    """Run Fornax and Astral end to end and write DIR/summary.json."""
    run_demo(out, seed=seed, console=console())
