"""The CP ring's KV exchange and the ZeRO-3/FSDP prefetch share one layer's wall-clock window.

Two transfers run beside a layer's kernels when context parallelism (TransformerEngine's p2p
ring, cp_comm.py) meets ZeRO-3/FSDP without pipelining:

- the ring: `AttnFuncWithCPAndKVP2P` (TE v2.8, context_parallel.py L1356-1373, L2071-2106)
  posts each step's KV send/recv with `torch.distributed.batch_isend_irecv` on the CP group
  (NCCL's own stream) and the compute stream waits on it before the next step's kernel: what
  an exchange exceeds one step's attention kernel stalls the compute stream
  (`cp_comm.ring_exposed`);
- the FSDP gathers and reduce-scatters: issued from a separate CUDA stream ahead of the layer
  that needs them (PyTorch FSDP, docs/source/notes/fsdp.rst "FSDP Prefetch Nuances": "issuing
  the all-gathers from a separate CUDA stream"; FSDP2's all-gather stream; Megatron-FSDP's
  asynchronous `_coalescing_manager`, fsdp_side_window.py); nothing waits for them until the
  layer that uses the parameters starts.

`cost.op_costs` hid the ring behind the attention kernels and, independently, the FSDP
transfers behind *all* the layer's kernels, attention included: one window counted twice.
Faster attention then exposed more ring time *and* more FSDP time, each up to what it saved,
so a step could get slower when a kernel got faster (Llama-3.1-70B, 64 H100, TP 8, CP 4,
ZeRO-3, 16K tokens, 100G NICs: +0.016 s at cuDNN 9.19). What the hardware does instead
depends on whether the two transfers ride the same link:

- **different links** (the ring inside a host on NVLink, FSDP across hosts on the NICs, or the
  reverse): the FSDP stream keeps moving while the compute stream stalls on the ring, so the
  FSDP window is the layer's compute *plus* the ring's stall (free of `DP_OVERLAP_RESIDUAL`:
  no kernel runs beside it) — the layer takes max(compute + stall, FSDP transfer);
- **the same link** (both across hosts, or both inside one): the link carries the ring's bytes
  and the FSDP bytes one after the other. During the stall the link is busy with the ring, and
  the part of the ring hidden under attention occupies the link for that time too, so the
  FSDP transfer only has compute - (ring time - stall) of free link — the layer takes
  max(compute + stall, ring + FSDP transfer).

Both are monotone: a faster kernel shortens the window by at most what it saved, so the
exposed transfer grows by at most that much. Nothing here is fitted: the links are
`comm.layout_groups`' placement. When the ring's group is already one of Megatron-FSDP's
side groups (`fsdp_side_window`: intra-host groups whose exposed collectives are FSDP's free
link time), its stall is counted there, not again here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from starfabric.astral.seer.comm import layout_groups
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, cp_split

RING_GROUPS = ("cp", "cp_p2p")
"""The op-table groups of the CP ring's p2p exchanges (`ops`)."""


def ring_shares_fsdp_link(ex: ExecutionSpec, lay: Layout) -> bool:
    """Whether the CP ring's exchanges and the ZeRO-3/FSDP collectives ride the same link:
    both across hosts (the NICs) or both inside one host (NVLink). False without a ring or
    without ZeRO-3."""
    if ex.zero < 3 or lay.cp <= 1:
        return False
    if cp_split(ex, lay)[1] <= 1:
        return False
    groups = layout_groups(ex, lay)
    ring_remote = groups["cp_p2p"].nodes > 1
    used = [groups["fsdp_dp"]] + ([groups["fsdp_edp"]] if lay.ep > 1 else [])
    return any((g.nodes > 1) == ring_remote for g in used if g.size > 1)


def ring_mask(
    groups: np.ndarray[Any, Any], colls: np.ndarray[Any, Any], is_comm: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Operators that are the CP ring's p2p exchanges."""
    return is_comm & np.isin(groups, np.asarray(RING_GROUPS)) & (colls == "p2p")


def fsdp_window(
    compute: float,
    ring_time: float,
    ring_exposed: float,
    shared_link: bool,
    counted_as_side: bool,
) -> tuple[float, float]:
    """(compute window, extra free window) the FSDP transfers of a pass hide behind, given the
    pass's `compute` seconds and its ring's `ring_time` seconds of transfer of which
    `ring_exposed` stall the compute stream. Same link: the ring's hidden part takes link
    time out of the compute window and its stall gives none. Different links: the stall is
    free FSDP time (none extra when `counted_as_side`: Megatron-FSDP's side window has it)."""
    if ring_time <= 0:
        return compute, 0.0
    stall = min(ring_time, max(0.0, ring_exposed))
    if shared_link:
        return max(0.0, compute - (ring_time - stall)), 0.0
    return compute, 0.0 if counted_as_side else stall


def ring_window(
    compute: float,
    groups: np.ndarray[Any, Any],
    colls: np.ndarray[Any, Any],
    is_comm: np.ndarray[Any, Any],
    time: np.ndarray[Any, Any],
    exposed: np.ndarray[Any, Any],
    shared_link: bool,
    side_groups: tuple[str, ...],
) -> tuple[float, float]:
    """`fsdp_window` of a pass from its operator table: the ring is the pass's p2p exchanges
    (`ring_mask`) with their time and exposed seconds; they count as Megatron-FSDP's side
    window when every one of them is in `side_groups` (`fsdp_side_window`)."""
    ring = ring_mask(groups, colls, is_comm)
    return fsdp_window(
        compute, float(time[ring].sum()), float(exposed[ring].sum()), shared_link,
        bool(np.isin(groups[ring], np.asarray(side_groups)).all()),
    )  # fmt: skip


__all__ = ["RING_GROUPS", "fsdp_window", "ring_mask", "ring_shares_fsdp_link", "ring_window"]
