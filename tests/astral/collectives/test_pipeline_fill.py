"""The tree pipeline fill `run_plan` charges against a chunk-level reference of NCCL's split
reduce/broadcast connections (tests/oracles/tree_pipeline.py)."""

from __future__ import annotations

import math

import pytest

from oracles.tree_pipeline import tree_allreduce_units


@pytest.mark.parametrize("nodes", [4, 8, 16])
def test_fill_at_the_channel_share_bounds_the_reference(nodes: int) -> None:
    # one channel per tree: a NIC carries 2 channels, so a chunk at its channel's share takes
    # 2 units; run_plan charges (2 depth - 1) of those, the old steady per-flow share 4 units
    depth = math.ceil(math.log2(nodes))
    t, work = tree_allreduce_units(nodes, chunks=16)
    exposed = t - work
    assert exposed <= (2 * depth - 1) * 2.0
    assert exposed >= 0.3 * (2 * depth - 1) * 2.0
    assert (2 * depth - 1) * 4.0 > 2.0 * exposed  # the steady share doubles it, at least


def test_fill_does_not_grow_with_the_message() -> None:
    t8, w8 = tree_allreduce_units(8, chunks=8)
    t32, w32 = tree_allreduce_units(8, chunks=32)
    assert t8 - w8 == pytest.approx(t32 - w32, abs=1.0)


def test_per_hop_latency_and_fill_are_partly_hidden_at_depth() -> None:
    # with a per-hop latency equal to a chunk's crossing at its share (NVLS-tree at 1,024 H100:
    # 20.9 us hwLat, 21.6 us a 64 KiB chunk at 1/16 of a 400G NIC), the reference exposes less
    # than run_plan's charge of 2 depth hops of latency plus (2 depth - 1) fill stages
    depth, lat = 7, 2
    t, work = tree_allreduce_units(2**depth, chunks=24, lat=lat)
    charged = 2 * depth * lat + (2 * depth - 1) * 2.0
    assert 0.5 * charged < t - work < 0.9 * charged
