"""The cluster and training job a monitored run uses: topology for a GPU count, Seer baseline.

A real monitor knows both: the cluster's wiring (and so its routing) and the job's
configuration, for which Seer predicts the healthy per-phase times.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from starfabric.astral.seer import make_job, predict
from starfabric.astral.topology import ClusterSpec, Topology, build
from starfabric.errors import ConfigError

ASTRAL_POD_GPUS = 16_384
"""GPUs in one Astral pod of the 25.6T generation (reference/astral.md, [A])."""

SMALL_CLUSTER_GPUS = 1_024
"""Assumption: below a pod, a 2-tier fat-tree of 25.6T switches at 64x400G (one 400G port per GPU)."""


def cluster_for(gpus: int) -> dict[str, Any]:
    """ClusterSpec fields for a monitored cluster of `gpus` GPUs (Astral pods, or a 1K fat-tree)."""
    if gpus > 0 and gpus % ASTRAL_POD_GPUS == 0:
        return {"name": f"astral-{gpus}", "topology": "astral", "switch": "25.6T", "gpus": gpus}
    if gpus == SMALL_CLUSTER_GPUS:
        return {
            "name": "fat-tree-1k",
            "topology": "fat-tree",
            "switch": "25.6T",
            "port_speed": "400G",
            "nic": "CX7-400G",
            "dual_tor": False,
            "layout": "rail",
            "gpus": gpus,
        }
    raise ConfigError(
        f"gpus = {gpus} has no monitored cluster layout",
        fix=f"use {SMALL_CLUSTER_GPUS} or a multiple of {ASTRAL_POD_GPUS}",
    )


@lru_cache(maxsize=8)
def _build(key: tuple[tuple[str, Any], ...]) -> Topology:
    return build(ClusterSpec(**dict(key)))


def build_cluster(fields: dict[str, Any]) -> Topology:
    """Build (and cache) the topology of a cluster description."""
    return _build(tuple(sorted(fields.items())))


@lru_cache(maxsize=8)
def seer_baseline(gpus: int, gpus_per_host: int, model: str, seq_len: int) -> dict[str, float]:
    """Seer's healthy per-phase times (s) for a TP-in-host, DP-across-hosts job on `gpus` GPUs."""
    dp = gpus // gpus_per_host
    job = make_job(
        model,
        {
            "tp": gpus_per_host,
            "pp": 1,
            "micro_batch": 1,
            "global_batch": dp * 4,
            "seq_len": seq_len,
        },
        {"gpus": gpus, "gpu": "H800", "gpus_per_node": gpus_per_host},
    )
    p = predict(job)
    b = p.breakdown
    compute = b["compute"] + b["recompute"] + b["optimizer"]
    return {
        "iteration_s": p.iteration_s,
        "compute_s": compute,
        "tp_s": b["tp"],
        "dp_s": max(b["dp"], 1e-3),
        "overhead_s": b["overhead"] + b["bubble"] + b["pp"] + b["cp"] + b["ep"],
    }
