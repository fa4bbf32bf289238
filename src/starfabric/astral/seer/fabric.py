"""The two bandwidth tiers a parallel group uses and the per-step latencies of collectives on
them: the shared vocabulary of the bus-bandwidth formulas (`comm`) and the expert dispatch
formulas (`expert_comm`)."""

from __future__ import annotations

from dataclasses import dataclass

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


__all__ = [
    "COLLECTIVE_LAUNCH_S",
    "NIC_STEP_LATENCY_S",
    "NVLINK_STEP_LATENCY_S",
    "Fabric",
    "Group",
]
