"""The registry of experiments: adding one is one module plus one `register(...)` line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starfabric.errors import ConfigError
from starfabric.fornax.experiments.harness import Context
from starfabric.fornax.experiments.output import Result


@dataclass(frozen=True)
class Experiment:
    """A named experiment: `run(ctx) -> Result` and `plot(result) -> matplotlib Figure`."""

    name: str
    title: str
    run: Callable[[Context], Result]
    plot: Callable[[Result], Any]


EXPERIMENTS: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    """Add `exp` to the registry (its name must be new)."""
    if exp.name in EXPERIMENTS:
        raise ConfigError(f"experiment {exp.name!r} is registered twice", fix="rename one")
    EXPERIMENTS[exp.name] = exp
    return exp


def get_experiment(name: str) -> Experiment:
    """The named experiment (case-insensitive: `e7` is E7), or a one-line ConfigError
    listing the names."""
    by_lower = {k.lower(): v for k, v in EXPERIMENTS.items()}
    if name.lower() not in by_lower:
        raise ConfigError(
            f"experiment = {name!r}: not an experiment",
            fix=f"use one of {', '.join(EXPERIMENTS)} or all",
        )
    return by_lower[name.lower()]


__all__ = ["EXPERIMENTS", "Experiment", "get_experiment", "register"]
