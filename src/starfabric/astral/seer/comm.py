"""Collective communication time for a parallel group placed on the cluster.

The interface is deliberately small — `Group` (size, members per node) and
`collective_time(kind, nbytes, group, fabric)` — so it can later be backed by the
collectives/netsim models on the real topology. The model here is hierarchical alpha-beta with
NCCL bus-bandwidth factors: a group inside one node runs at NVLink bus bandwidth; a group that
spans nodes is limited by the NICs (one rail per GPU) of its members on each node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from starfabric.errors import ConfigError

Kind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]

NVLINK_STEP_LATENCY_S = 2.0e-6
"""Per-step latency of an NVLink ring step incl. kernel sync (assumption)."""
NIC_STEP_LATENCY_S = 5.0e-6
"""Per-step latency of an RDMA hop across the rail network (assumption)."""
COLLECTIVE_LAUNCH_S = 10.0e-6
"""Fixed cost of launching one NCCL collective (assumption)."""


@dataclass(frozen=True)
class Group:
    """A communication group: `size` ranks, `per_node` of them on each node they occupy."""

    size: int
    per_node: int

    @property
    def nodes(self) -> int:
        """Number of nodes the group spans."""
        return max(1, self.size // max(1, self.per_node))


@dataclass(frozen=True)
class Fabric:
    """Achievable bandwidths (bytes/s) of the two tiers a group can use; `per_kind` overrides
    them per collective (calibrated: NVLS/SHARP all-reduce beats ring all-gather)."""

    nvlink_bus_bytes_per_s: float
    nic_bus_bytes_per_s: float
    per_kind: tuple[tuple[str, float, float, float, float], ...] = ()
    """(collective, NVLink bus B/s, NIC bus B/s, NVLink alpha s, NIC alpha s); alpha < 0 =
    not calibrated (use the step-latency model)."""

    def tiers(self, kind: str) -> tuple[float, float, float, float]:
        """(NVLink bus, NIC bus, NVLink alpha, NIC alpha) for collective `kind`."""
        for k, nvl, nic, a_nvl, a_nic in self.per_kind:
            if k == kind:
                return nvl, nic, a_nvl, a_nic
        return self.nvlink_bus_bytes_per_s, self.nic_bus_bytes_per_s, -1.0, -1.0


def place_group(size: int, stride: int, gpus_per_node: int) -> Group:
    """Group of `size` ranks whose members are `stride` ranks apart (Megatron rank order)."""
    if size < 1 or stride < 1:
        raise ConfigError(f"group size {size} / stride {stride} must be >= 1", fix="use >= 1")
    per_node = 1 if stride >= gpus_per_node else max(1, min(size, gpus_per_node // stride))
    return Group(size=size, per_node=per_node)


_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "p2p": lambda n: 1.0,
}


def collective_time(kind: Kind, nbytes: float, group: Group, fabric: Fabric) -> float:
    """Seconds for one collective over `nbytes` (the full buffer: AR buffer, AG output, RS input,
    A2A send buffer, P2P message) on `group`."""
    n = group.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    if kind not in _FACTOR:
        raise ConfigError(f"unknown collective {kind!r}", fix=f"use one of {sorted(_FACTOR)}")
    factor = _FACTOR[kind](n)
    g, nodes = group.per_node, group.nodes
    nvl_bw, nic_bw, a_nvl, a_nic = fabric.tiers(kind)
    if kind == "p2p":
        bw = nvl_bw if nodes == 1 else nic_bw
        lat = NVLINK_STEP_LATENCY_S if nodes == 1 else NIC_STEP_LATENCY_S
        return COLLECTIVE_LAUNCH_S + lat + nbytes / bw
    if nodes == 1:
        steps = (2 if kind == "all_reduce" else 1) * (n - 1)
        lat = steps * NVLINK_STEP_LATENCY_S + COLLECTIVE_LAUNCH_S if a_nvl < 0 else a_nvl
        return lat + factor * nbytes / nvl_bw
    if kind == "all_to_all":
        # Each rank sends (n-g)/n of its buffer over its own NIC and (g-1)/n over NVLink.
        inter = nbytes * (n - g) / n / nic_bw
        intra = nbytes * (g - 1) / n / nvl_bw
        lat = COLLECTIVE_LAUNCH_S + NIC_STEP_LATENCY_S * np.log2(n) if a_nic < 0 else a_nic
        return float(lat + max(inter, intra))
    # Rings cross each node boundary once per channel; a node's g NICs carry the ring traffic.
    bus = min(nvl_bw, g * nic_bw)
    steps = (2 if kind == "all_reduce" else 1) * (nodes - 1)
    lat = steps * NIC_STEP_LATENCY_S + (g - 1) * NVLINK_STEP_LATENCY_S + COLLECTIVE_LAUNCH_S
    return (lat if a_nic < 0 else a_nic) + factor * nbytes / bus
