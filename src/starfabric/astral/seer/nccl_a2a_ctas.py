"""How many SMs NCCL's all-to-all kernel occupies when the expert all-to-all (Megatron-Core's
`alltoall` dispatcher: `torch.distributed.all_to_all_single`, a group of ncclSend/ncclRecv)
spans several nodes.

Read from NVIDIA/nccl v2.22.3-1 … v2.27.3-1 (the NeMo/PyTorch containers' range):

- the kernel runs one thread block per channel that has work: `ncclLaunchKernel`, grid =
  `countOneBits(plan->channelMask)` (`src/enqueue.cc` v2.27.3 l.1542-1544), blocks of
  `NCCL_MAX_NTHREADS` = 512 threads launched with `__launch_bounds__(512, 1)`: one per SM;
- on more than one node, the base channel of p2p round r is `nodeDelta * divUp(localRanks, 8)
  + localDelta / 8` (`ncclP2pChannelBaseForRound`, `src/include/channel.h` l.19-29, since
  v2.22; 8 = `NCCL_MAX_DEV_WORK_P2P_PER_BATCH`, `src/include/device.h` l.369): the peers of
  one node share a channel, up to 8 of them batched in one work item;
- part p of an operation runs on channel `(base + reverseBits(p, log2 nP2pChannels)) &
  (nP2pChannels - 1)` (`ncclP2pChannelForPart`, `device.h` l.269-274);
- an operation is split into at most `p2pnChannelsPerPeer` parts, which with network peers is
  2 (`NCCL_NCHANNELS_PER_NET_PEER` unset: "start from 2 channels per NIC",
  `ncclTopoGetNchannels`, `src/graph/paths.cc` l.784-819, the minimum over all peers taken in
  `ncclTopoComputeP2pChannels` l.839-855); a transfer above one step (512 KiB with the
  default 4 MiB buffer) takes both (`addP2pToPlan`, `enqueue.cc` l.895-905), as a MoE
  layer's per-peer tokens do;
- `nP2pChannels` = pow2Up(coll channels), at least NVLS' 16 on an NVLS H100 node
  (`NVLS_NCHANNELS_SM90`, `src/transport/nvls.cc` l.147/195; `connect.cc` l.493 raises the
  coll channels to it), 16 in AWS's published two-node p5.48xlarge NCCL log.

So an all-to-all over n nodes of 8 ranks runs 2n blocks: 4 SMs on 2 nodes, 8 on 4. NCCL
v2.21 and older spread the peers over all p2p channels (not modelled: no run here uses it).
Inside one node the base is the round itself and NVLink peers take many more parts; that
case keeps `cost.EP_COMM_SMS`."""

from __future__ import annotations

NCCL_PARTS_PER_NET_PEER = 2
"""Parts (channels) per network peer: `NCCL_NCHANNELS_PER_NET_PEER` unset → 2, reduced only
when 2 x ranks > 4 x p2p channels (`src/graph/paths.cc` v2.27.3 l.806-815). Assumption: each
per-peer transfer exceeds one step (512 KiB), so both parts run (`enqueue.cc` l.895-905)."""
NCCL_P2P_PER_BATCH = 8
"""Peers of one node batched on one channel (`NCCL_MAX_DEV_WORK_P2P_PER_BATCH`,
`src/include/device.h` v2.27.3 l.369)."""
NCCL_P2P_CHANNELS = 16
"""p2p channels of an H100 node's communicator spanning nodes: NVLS' 16 (`NVLS_NCHANNELS_SM90`)
as the floor of the coll channels, rounded to a power of two (`paths.cc` l.851-852); AWS's
two-node p5.48xlarge log reads "16 coll channels, 16 nvls channels, 16 p2p channels, 2 p2p
channels per peer". Assumption: the runs' nodes are NVLS H100 nodes like p5 (coll channels
<= 16); only the part-1 offset (half of it) depends on it."""


def _reverse_bits(x: int, bits: int) -> int:
    return int(format(x, f"0{bits}b")[::-1], 2) if bits else 0


def nccl_alltoall_ctas(
    nodes: int,
    ranks_per_node: int,
    p2p_channels: int = NCCL_P2P_CHANNELS,
    parts: int = NCCL_PARTS_PER_NET_PEER,
) -> int:
    """Thread blocks (SMs) of NCCL's all-to-all kernel over `nodes` x `ranks_per_node` ranks
    (nodes > 1): the distinct channels `ncclP2pChannelForPart` gives every round's parts."""
    if nodes < 2:
        raise ValueError("NCCL's multi-node p2p channel rule needs nodes >= 2")
    if p2p_channels & (p2p_channels - 1):
        raise ValueError("NCCL's p2p channel count is a power of two")
    per_node_bases = -(-ranks_per_node // NCCL_P2P_PER_BATCH)
    log2 = p2p_channels.bit_length() - 1
    channels = {
        (node * per_node_bases + local // NCCL_P2P_PER_BATCH + _reverse_bits(part, log2))
        & (p2p_channels - 1)
        for node in range(nodes)
        for local in range(ranks_per_node)
        for part in range(min(parts, p2p_channels))
    }
    return len(channels)


__all__ = [
    "NCCL_P2P_CHANNELS",
    "NCCL_P2P_PER_BATCH",
    "NCCL_PARTS_PER_NET_PEER",
    "nccl_alltoall_ctas",
]
