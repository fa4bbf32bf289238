"""NCCL's topology search for the NVLS graph of one NVLink domain, as NCCL's tuner reads it.

search.cc (NCCL 2.25.1, unchanged for this case through 2.28) gives each NVLS channel a head
GPU and a per-channel speed from its speed array; tuning.cc then estimates NVLS from that
graph (`nccl.tuner_time_s` with a `SearchGraph`). This reproduces the search for a
communicator that is one NVLink domain (an 8-GPU host, or a 72-GPU NVL72 rack fused by MNNVL),
so the estimate NCCL itself makes there can be set beside the model and a log. It is NCCL's
cost model, not a timing model: nothing here changes a plan.
"""

from __future__ import annotations

from starfabric.astral.collectives.nccl import NCCL_MAX_NVLS_ARITY, NcclShape, SearchGraph
from starfabric.errors import ConfigError

SPEED_ARRAY_INTRA_GBS = {
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0),
}
"""sm90SpeedArrayIntra / sm100SpeedArrayIntra (search.cc, 2.25.1; 2.27 appends 18.0 to the
Blackwell one): the per-channel speeds, GB/s, the search tries inside a node. A communicator
that is one node (or one MNNVL clique) searches with these: ncclTopoTrimSystem (paths.cc)
removes the NICs when every GPU of the topology is a rank."""

NVLINK_BW_PER_LINK_GBS = {"hopper": 20.6, "blackwell": 40.0}
"""SM90_NVLINK_BW / SM100_NVLINK_BW (graph/topo.h, 2.25.1; 40.1 on Blackwell from 2.27): what
NCCL's topology counts per NVLink, against the link's line rate below."""

NVLINK_LINE_RATE_PER_LINK_GBS = {"hopper": 25.0, "blackwell": 50.0}
"""One NVLink 4 / NVLink 5 link's rate per direction (18 links: 450 / 900 GB/s per GPU)."""


def nvls_domain_graph(shape: NcclShape) -> SearchGraph:
    """The NVLS graph NCCL's search builds on a communicator that is one NVLink domain.

    Channels: one per head, min(NCCL_MAX_NVLS_ARITY, GPUs), all required (without NICs the
    search sets minChannels = maxChannels). bwIntra: the fastest speed of the array at which
    every channel fits (ncclTopoSearchTryNvls routes a channel's speed from and to every GPU,
    twice for its head, so a head GPU's link carries (heads + 1) x speed of NCCL's per-GPU
    NVLink bandwidth, links x NVLINK_BW_PER_LINK). bwInter: pass 2 raises it through the faster
    speeds while it stays below 2 x bwIntra (it does not load NVSwitch paths, so each try holds).
    """
    gen = shape.generation
    speeds = SPEED_ARRAY_INTRA_GBS.get(gen)
    if shape.nodes != 1 or not shape.nvswitch or speeds is None:
        raise ConfigError(
            f"NVLS search graph: {shape.ranks} ranks in {shape.nodes} domains of {gen} GPUs",
            fix="use one NVSwitch domain of Hopper or Blackwell GPUs",
        )
    heads = min(NCCL_MAX_NVLS_ARITY, shape.local)
    max_bw = shape.nvlink_gbs * NVLINK_BW_PER_LINK_GBS[gen] / NVLINK_LINE_RATE_PER_LINK_GBS[gen]
    total_bw = max_bw * shape.local / (shape.local - 1)  # search.cc: non-ring patterns
    start = next(
        (i for i, s in enumerate(speeds) if s <= max_bw and s * heads <= total_bw),
        len(speeds) - 1,
    )
    intra_i = next(
        (i for i in range(start, len(speeds)) if (heads + 1) * speeds[i] <= max_bw), None
    )
    if intra_i is None:
        raise ConfigError(
            f"NVLS search graph: no speed fits {heads} heads in {max_bw:.1f} GB/s",
            fix="check the GPU's NVLink rate in the hardware catalog",
        )
    bw_intra = speeds[intra_i]
    inter_i = intra_i
    while inter_i > 0 and speeds[inter_i] < 2.0 * bw_intra:
        inter_i -= 1
    return SearchGraph(heads, bw_intra, speeds[inter_i])
