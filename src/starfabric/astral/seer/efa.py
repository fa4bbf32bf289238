"""First-generation AWS EFA (p4d / p4de, A100): the bus bandwidth NCCL reaches across nodes.

Seer's default `nic_bus_fraction` (0.88 of line rate) comes from InfiniBand nccl-tests logs. On
p4d.24xlarge (8 A100 on NVSwitch, 4 x 100 Gb/s EFA per node = 50 GB/s) NCCL runs over libfabric
(aws-ofi-nccl) on the SRD transport and reaches well under that: nccl-tests all_reduce_perf at
1 GiB on 3 and 4 p4d nodes measured 31.77 and 29.61 GB/s bus bandwidth (NVIDIA/nccl issue 527,
2022-07-25, NCCL 2.9.9 with FI_EFA_USE_DEVICE_RDMA=1) = 0.635 and 0.592 of the 50 GB/s per node.
The 2-node figure of the same log (57.2 GB/s) is above line rate — NCCL's tree on two nodes
reports busbw that the link cannot carry (nccl-tests issue 22) — so it is not used.

`EFA_P4D_BUS_FRACTION` is the mean of the two multi-node points. It applies to a row whose
interconnect cell names EFA and whose GPU is an A100: p4d/p4de are the only A100 instances
with EFA, so the pair selects exactly that fabric generation (H100 p5 and Blackwell p6 run
newer EFA generations with many more NICs per node and are not covered by this measurement).
"""

from __future__ import annotations

from starfabric.astral.seer.statements import names_efa

EFA_P4D_ALLREDUCE_BUSBW_GBS = (31.77, 29.61)
"""nccl-tests all_reduce_perf busbw at 1 GiB on 3 and 4 p4d nodes (NVIDIA/nccl#527)."""
P4D_NODE_LINE_RATE_GBS = 50.0
"""p4d.24xlarge: 4 EFA adapters x 100 Gb/s = 400 Gb/s = 50 GB/s per node (AWS instance spec)."""
EFA_P4D_BUS_FRACTION = round(
    sum(EFA_P4D_ALLREDUCE_BUSBW_GBS) / len(EFA_P4D_ALLREDUCE_BUSBW_GBS) / P4D_NODE_LINE_RATE_GBS,
    3,
)
"""Achievable NCCL bus bandwidth / line rate across p4d nodes: 0.614 (see module doc)."""


def efa_bus_fraction(interconnect: str | None, gpu_family: str) -> float | None:
    """`EFA_P4D_BUS_FRACTION` when an interconnect cell names AWS EFA on an A100 (p4d/p4de),
    else None (the GPU's calibrated default stands)."""
    if gpu_family != "A100" or not names_efa(interconnect):
        return None
    return EFA_P4D_BUS_FRACTION


__all__ = [
    "EFA_P4D_ALLREDUCE_BUSBW_GBS",
    "EFA_P4D_BUS_FRACTION",
    "P4D_NODE_LINE_RATE_GBS",
    "efa_bus_fraction",
]
