"""Ray-distributed search: chunk the candidate layouts and evaluate the chunks as Ray tasks.

Each task runs the same vectorized evaluator as the local search on its slice of the layout
columns; the driver concatenates the slices in order, so the ranking is identical to the local
path. `"local"` starts a Ray instance on this machine (or reuses one already initialized in this
process); any other value is a cluster address (`host:port`, `ray://host:port` or `auto`).
"""

from __future__ import annotations

import logging
import re
import socket
from typing import Any

import numpy as np

from starfabric.astral.seer.evaluate import evaluate_vectorized
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec
from starfabric.errors import ConfigError

CONNECT_TIMEOUT_S = 3.0
"""How long to wait for a TCP connection to a cluster address before calling it unreachable
(assumption: a reachable head node answers within a few seconds)."""

_ADDRESS = re.compile(r"^(?:ray://)?(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")


def check_address(address: str) -> None:
    """Raise a one-line ConfigError unless `address` is local, auto, or a reachable host:port."""
    if address in ("local", "auto"):
        return
    m = _ADDRESS.match(address)
    if m is None or not 0 < int(m["port"]) < 65536:
        raise ConfigError(
            f"--ray {address!r} is not a Ray address",
            fix="use local, auto, HOST:PORT or ray://HOST:PORT",
        )
    host = m["host"].strip("[]")
    try:
        with socket.create_connection((host, int(m["port"])), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConfigError(
            f"--ray {address!r}: cannot reach a Ray cluster there ({exc.strerror or exc})",
            fix="start the cluster (ray start --head) or give its head address",
        ) from None


def _chunk(
    model: ModelSpec,
    system: SystemSpec,
    cfg: dict[str, np.ndarray[Any, Any]],
    global_batch: int,
    seq_len: int,
    precision: str,
    base: ExecutionSpec | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """One Ray task: the vectorized evaluator on a slice of the layouts."""
    return evaluate_vectorized(model, system, cfg, global_batch, seq_len, precision, base)


def evaluate_on_ray(
    address: str,
    model: ModelSpec,
    system: SystemSpec,
    cfg: dict[str, np.ndarray[Any, Any]],
    global_batch: int,
    seq_len: int,
    precision: str,
    chunk: int | None,
    min_chunk: int = 1,
    base: ExecutionSpec | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Iteration seconds, memory bytes and offloaded bytes of every layout in `cfg`, computed
    by Ray tasks of
    `chunk` layouts each (None: one task per cluster CPU, at least `min_chunk` layouts) and
    gathered in order; `base`: the stack every layout runs with (search_stack.py)."""
    if chunk is not None and chunk < 1:
        raise ConfigError(f"ray_chunk = {chunk} must be >= 1", fix="give a positive count")
    check_address(address)
    import ray

    started = False
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(include_dashboard=False, logging_level=logging.WARNING)
            else:
                ray.init(address=address, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"--ray {address!r}: could not join the cluster ({first})",
                fix="check the address and that the cluster runs this Ray version",
            ) from None
        started = True
    try:
        task = ray.remote(num_cpus=1)(_chunk)
        model_ref, system_ref = ray.put(model), ray.put(system)
        n = len(cfg["tp"])
        if chunk is None:
            cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
            chunk = max(min_chunk, -(-n // cpus))
        refs = [
            task.remote(
                model_ref,
                system_ref,
                {c: v[lo : lo + chunk] for c, v in cfg.items()},
                global_batch,
                seq_len,
                precision,
                base,
            )
            for lo in range(0, n, chunk)
        ]
        parts = ray.get(refs)
    finally:
        if started:
            ray.shutdown()
    it = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    mem = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    moved = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
    return it, mem, moved
