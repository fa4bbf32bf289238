"""tuner_time_s on NCCL's search graphs (SearchGraph) against tuning.cc's formulas by hand."""

from __future__ import annotations

import pytest

from starfabric.astral.collectives import nccl as N
from starfabric.astral.collectives.protocols import (
    PER_CH_MAX_NVLS_TREE_BW_GBS,
    PER_CH_MAX_TREE_BW_GBS,
    TREE_BW_RATIO,
)

BIG = 2.0**40  # large enough that bytes / bandwidth dominates, read back exactly below


def _algbw(algo: str, shape: N.NcclShape, graph: N.SearchGraph | None) -> float:
    """bytes / (time - latency): the tuner's algorithm bandwidth, GB/s."""
    t = N.tuner_time_s("all_reduce", algo, "Simple", BIG, shape, graph)
    lat = N.tuner_time_s("all_reduce", algo, "Simple", 0.0, shape, graph)
    return BIG / (t - lat) / 1e9


@pytest.mark.parametrize("ranks", [16, 64, 1024])
@pytest.mark.parametrize("algo", ["ring", "tree", "nvls_tree"])
def test_shape_graph_is_the_default(ranks: int, algo: str) -> None:
    shape = N.NcclShape(ranks=ranks, local=8)
    ch = shape.channels(algo)
    graph = N.SearchGraph(ch, shape.nvlink_gbs / ch, shape.nic_gbs * shape.local / ch)
    for proto in ("Simple", "LL128"):
        a = N.tuner_time_s("all_reduce", algo, proto, 2.0**30, shape)
        b = N.tuner_time_s("all_reduce", algo, proto, 2.0**30, shape, graph)
        assert a == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize("ranks", [32, 1024, 4096])
def test_h100_400g_graphs_by_hand(ranks: int) -> None:
    """8 channels at 48 GB/s: NVLS-tree capped at 8 x perChMaxNVLSTreeBw, tree at 8 x
    perChMaxTreeBw (below 0.92 x 8 x 48), ring at 8 x 48; algbw = busbw x n / 2(n - 1)."""
    shape = N.NcclShape(ranks=ranks, local=8)
    g = N.SearchGraph(8, 48.0, 48.0)
    to_alg = ranks / (2.0 * (ranks - 1))
    nvls_tree = 8 * PER_CH_MAX_NVLS_TREE_BW_GBS["hopper"][2]
    tree = min(8 * 48.0 * TREE_BW_RATIO, 8 * PER_CH_MAX_TREE_BW_GBS["hopper"][2])
    assert _algbw("nvls_tree", shape, g) == pytest.approx(nvls_tree * to_alg, rel=1e-6)
    assert _algbw("tree", shape, g) == pytest.approx(tree * 0.5, rel=1e-6)
    assert _algbw("ring", shape, g) == pytest.approx(8 * 48.0 * to_alg, rel=1e-6)
