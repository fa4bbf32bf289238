"""The one registry of network backends: `make_backend(name)` builds the flow-level or the
analytical backend, or one added by `register_backend`. It imports the backends; they import
only the contract (backend.py), never this module, so there is no import cycle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy.typing as npt

from starfabric.astral.netsim.analytical import Analytical
from starfabric.astral.netsim.backend import NetworkBackend
from starfabric.astral.netsim.flowsim import FlowSim
from starfabric.errors import ConfigError

BackendFactory = Callable[..., NetworkBackend]
"""Builds a backend from per-link capacities (bit/s), latencies (s) and backend options."""

_BUILTIN: dict[str, BackendFactory] = {"flow": FlowSim, "analytical": Analytical}
_FACTORIES: dict[str, BackendFactory] = {}

BUILTIN_BACKENDS: tuple[str, ...] = tuple(_BUILTIN)
"""The backends every caller can name: max-min fair flow-level, and alpha-beta analytical."""


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make another backend available to `make_backend` under `name`."""
    if not name or name in BUILTIN_BACKENDS:
        raise ConfigError(f"netsim backend name {name!r} is taken", fix="choose another name")
    _FACTORIES[name] = factory


def backend_names() -> tuple[str, ...]:
    """Every name `make_backend` accepts."""
    return BUILTIN_BACKENDS + tuple(sorted(_FACTORIES))


def make_backend(
    name: str,
    capacity_bps: npt.ArrayLike,
    latency_s: npt.ArrayLike | None = None,
    **options: Any,
) -> NetworkBackend:
    """The one registry of network backends: collectives, Seer and the monitor build theirs here."""
    factory = _BUILTIN.get(name) or _FACTORIES.get(name)
    if factory is None:
        raise ConfigError(
            f"netsim backend {name!r} is unknown", fix=f"use one of {', '.join(backend_names())}"
        )
    return factory(capacity_bps, latency_s, **options)


__all__ = [
    "BUILTIN_BACKENDS",
    "BackendFactory",
    "backend_names",
    "make_backend",
    "register_backend",
]
