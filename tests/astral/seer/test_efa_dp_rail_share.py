"""Data-parallel traffic across p4d nodes when TP fills the node (issue 32, session 20):
what per-GPU EFA share Seer prices, checked against the structure NCCL runs and against
outside nccl-tests numbers — not against a development row's error.

With TP = 8 on an 8-GPU node, a GPU's DP peers are the same local rank on other nodes, so
each DP communicator has one rank per node and no NVSwitch stage: the node's 8 concurrent DP
rings share its 4 x 100 Gb/s EFA, 1/8 each. A hierarchical reduction of an 8-per-node DP
group (NVSwitch reduce-scatter, then one rail per GPU across nodes) moves the same bytes per
node, so both must price the same per-node NIC traffic. The rate is `efa.py`'s fraction of
line rate, and the 2-node tree figure of the same nccl-tests log (NVIDIA/nccl#527) must read
the same fraction once its busbw is converted to per-node NIC bytes.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.comm import collective_time, make_fabric, place_group
from starfabric.astral.seer.efa import (
    EFA_P4D_ALLREDUCE_BUSBW_GBS,
    EFA_P4D_BUS_FRACTION,
    P4D_NODE_LINE_RATE_GBS,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fabric import Fabric, Group
from starfabric.astral.seer.nic_count import P4D_EFA_ADAPTERS
from starfabric.astral.seer.validate import _nic

GPN = 8
PER_GPU = P4D_NODE_LINE_RATE_GBS * 1e9 / GPN  # bytes/s: a p4d node's EFA over its 8 GPUs
NCCL527_TWO_NODE_ALGBW_GBS = 30.49
"""NVIDIA/nccl#527 (2022-07-25, NCCL 2.9.9): all_reduce_perf at 1 GiB on 2 p4d nodes, 16
ranks: algbw 30.49 GB/s (busbw 57.17, above line rate: NCCL's tree on two nodes)."""


def _fabric() -> Fabric:
    eff = efficiency_for(get_gpu("A100"), {"nic_bus_fraction": EFA_P4D_BUS_FRACTION})
    return make_fabric(get_gpu("A100").nvlink_gbps * 1e9, PER_GPU, eff)


@pytest.mark.parametrize(("dp", "nodes"), [(64, 64), (8, 8), (2, 2)])
def test_dp_peers_of_a_full_tp_node_are_one_rank_per_node(dp: int, nodes: int) -> None:
    """Megatron rank order (TP fastest): DP ranks are TP = 8 apart, one per node."""
    g = place_group(dp, GPN, GPN)
    assert (g.per_node, g.nodes) == (1, nodes)


def test_per_gpu_share_is_the_node_rate_over_eight() -> None:
    """A one-rank-per-node ring runs on 1/8 of the node's measured EFA rate; the node's eight
    concurrent DP rings then carry the node rate nccl-tests measured on 3 and 4 nodes."""
    nbytes = 8 * 2**30  # large: the latency terms are < 0.1% of it
    n = 64
    t = collective_time("reduce_scatter", nbytes, Group(n, 1), _fabric())
    per_gpu = (n - 1) / n * nbytes / t
    assert per_gpu == pytest.approx(PER_GPU * EFA_P4D_BUS_FRACTION, rel=2e-3)
    # All-gather and all-reduce run at the same rate: no per-kind NIC fraction on A100.
    ag = collective_time("all_gather", nbytes, Group(n, 1), _fabric())
    ar = collective_time("all_reduce", nbytes, Group(n, 1), _fabric())
    assert ag == pytest.approx(t, rel=1e-9)
    assert ar == pytest.approx(2 * t, rel=5e-3)
    node = GPN * per_gpu / 1e9
    for measured in EFA_P4D_ALLREDUCE_BUSBW_GBS:
        assert node == pytest.approx(measured, rel=0.05)


@pytest.mark.parametrize(
    "cell",
    [
        "NVSwitch intra-node; AWS EFA (P4d instances): p4d.24xlarge with 4x100 Gb/s EFA per node",
        "NVSwitch 600 GB/s intra-node; EFA 4x100 Gb/s per node (400 Gb/s per node)",
        "NVSwitch; 4 EFA NICs per 8 GPUs",
    ],
)
def test_p4d_cells_read_half_an_adapter_per_gpu(cell: str) -> None:
    """The interconnect cells the p4d rows write (FALCON180B-01, BBGPT-01, a count without a
    rate) read as 4 x 100 Gb/s over 8 GPUs: 50 Gb/s per GPU, two GPUs per adapter."""
    row = {"row_id": "T", "interconnect": cell, "gpus_per_node": "8", "gpu": "A100-SXM4-40GB"}
    got = float(_nic(row, "A100").rstrip("G"))
    assert got * 1e9 / 8 == pytest.approx(PER_GPU)
    assert got == pytest.approx(P4D_EFA_ADAPTERS * 100.0 / GPN)


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(2, 512), gib=st.integers(4, 64))
def test_rail_dp_moves_the_node_bytes_of_a_hierarchical_reduction(nodes: int, gib: int) -> None:
    """Property: TP = 8 DP (each GPU reduce-scatters its 1/8 of a buffer of S bytes over one
    rank per node) and an 8-per-node DP of S bytes (NCCL's NVSwitch + rail structure) load a
    node's EFA with the same bytes, so their times differ only by the ring factors
    (N-1)/N against (8N-1)/8N."""
    s = gib * 2**30
    fab = _fabric()
    rail = collective_time("reduce_scatter", s / GPN, Group(nodes, 1), fab)
    flat = collective_time("reduce_scatter", s, Group(GPN * nodes, GPN), fab)
    ring = ((nodes - 1) / nodes) / ((GPN * nodes - 1) / (GPN * nodes))
    assert rail / flat == pytest.approx(ring, rel=0.02)


def test_two_node_tree_reads_the_same_fraction() -> None:
    """NCCL's tree on two nodes sends and receives each byte of the buffer once per node (two
    trees, each node the root of one half), so its per-node EFA rate is the algbw: 30.49 GB/s
    = 0.61 of p4d's 50 GB/s, the fraction the 3- and 4-node ring points give (efa.py)."""
    tree_node_rate = NCCL527_TWO_NODE_ALGBW_GBS / P4D_NODE_LINE_RATE_GBS
    assert tree_node_rate == pytest.approx(EFA_P4D_BUS_FRACTION, rel=0.05)


def test_falcon_shaped_reduce_scatter_by_hand() -> None:
    """Falcon-180B's shape at TP 8 / PP 8 / DP 64 (HF card: 80 layers, hidden 14,848, FFN 4h,
    8 KV groups of head dim 64, no biases): a middle stage holds 10 layers / 8, about 2.8e9
    parameters; their FP32 gradient reduce-scatter over 64 nodes takes the bytes over the
    per-GPU share: 4 B x 2.8e9 x 63/64 / (0.614 x 6.25 GB/s) = 2.85 s."""
    h, ffn, kv, hd, layers = 14848, 4 * 14848, 8, 64, 80
    per_layer = h * (h + 2 * kv * hd) + h * h + 2 * h * ffn + 2 * h  # QKV, out, MLP, 2 norms
    stage = per_layer * (layers // 8) / 8
    assert stage == pytest.approx(2.78e9, rel=0.01)
    t = collective_time("reduce_scatter", 4.0 * stage, place_group(64, GPN, GPN), _fabric())
    hand = 4.0 * stage * 63 / 64 / (PER_GPU * EFA_P4D_BUS_FRACTION)
    assert t == pytest.approx(hand, rel=0.01)
    assert t == pytest.approx(2.85, abs=0.05)
