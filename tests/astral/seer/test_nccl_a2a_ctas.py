"""SMs of NCCL's all-to-all kernel across nodes (`nccl_a2a_ctas`), against NVIDIA/nccl
v2.22-v2.27's channel rules: `ncclP2pChannelBaseForRound` (channel.h), `ncclP2pChannelForPart`
(device.h), 2 parts per network peer (paths.cc), 8 peers per batch (device.h)."""

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer.cost import EP_COMM_SMS, _ep_comm_sms
from starfabric.astral.seer.nccl_a2a_ctas import nccl_alltoall_ctas
from starfabric.astral.seer.predict import make_job, predict

sys.path.insert(0, str(Path(__file__).parent))
from test_ep_overlap import PR6311, SYSTEM, _proxy


def test_two_and_four_h100_nodes_run_four_and_eight_blocks() -> None:
    """16 p2p channels, 8 ranks a node: bases 0..n-1 (one per node), part 1 at
    reverseBits(1, 4) = 8 further: {0, 1, 8, 9} on two nodes, {0..3, 8..11} on four."""
    assert nccl_alltoall_ctas(2, 8) == 4
    assert nccl_alltoall_ctas(4, 8) == 8
    assert nccl_alltoall_ctas(2, 8, p2p_channels=32) == 4  # part 1 at +16: {0, 1, 16, 17}
    assert nccl_alltoall_ctas(2, 8, parts=1) == 2


def test_more_than_eight_ranks_a_node_take_one_base_per_batch_of_eight() -> None:
    assert nccl_alltoall_ctas(2, 16) == 8  # divUp(16, 8) = 2 bases a node


@given(st.integers(2, 64), st.sampled_from([1, 2, 4, 8]), st.sampled_from([16, 32, 64]))
def test_blocks_never_exceed_the_p2p_channels_and_are_two_per_node_until_they_wrap(
    nodes: int, ranks: int, channels: int
) -> None:
    n = nccl_alltoall_ctas(nodes, ranks, channels)
    assert n <= channels
    if nodes <= channels // 2:
        assert n == 2 * nodes


def test_one_node_and_non_power_of_two_channels_are_refused() -> None:
    with pytest.raises(ValueError, match="nodes"):
        nccl_alltoall_ctas(1, 8)
    with pytest.raises(ValueError, match="power of two"):
        nccl_alltoall_ctas(2, 8, p2p_channels=24)


def _sms(ex: dict[str, object], system: dict[str, object] = SYSTEM) -> int:
    p = predict(make_job(_proxy(), ex, system))
    return _ep_comm_sms(p.job.execution, p.layout)


def test_cost_charges_nccls_blocks_for_the_alltoall_dispatcher_across_nodes_only() -> None:
    assert _sms(PR6311) == 4  # EP16 over two 8-GPU nodes
    assert _sms({**PR6311, "moe_dispatcher": "deepep", "deepep_num_sms": 24}) == 24
    one_node = {**PR6311, "ep": 8, "pp": 1, "vpp": 1, "pipeline_layers": None}
    assert _sms(one_node) == EP_COMM_SMS
