"""The model on H100 8 x 400G hosts beyond 2 nodes against figures published in prose
(tests/data/nccl_published): a held-out check, nothing was fitted to these rows."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from starfabric.astral.collectives import nccl as N
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.topology import ClusterSpec, Topology, build
from starfabric.config import load_spec

DATA = Path(__file__).parents[2] / "data"
ROWS = list(csv.DictReader((DATA / "nccl_published" / "h100_400g_multinode.csv").open()))
TOLERANCE = 0.15  # issue 21's bar for the nccl-tests logs


@pytest.fixture(scope="module")
def topo() -> Topology:
    return build(load_spec(ClusterSpec, DATA / "clusters" / "fat-tree-h100-4k.yaml"))


@pytest.mark.parametrize("row", ROWS, ids=[r["row_id"] for r in ROWS])
def test_model_within_15pct_of_published(row: dict[str, str], topo: Topology) -> None:
    shape = N.shape_of(topo, int(row["gpus"]))
    assert shape.nodes == int(row["nodes"]) and shape.local == int(row["nics_per_node"])
    shape = N.with_nccl_env(shape, {"NCCL_NVLS_ENABLE": int(row["nvls_enable"])}, row["row_id"])
    measured = float(row["busbw_gbps"])
    for size in (float(row["size_min_bytes"]), float(row["size_max_bytes"])):
        plan = N.nccl_collective(row["collective"], shape, size)
        res = run_plan(topo, plan, transport=row["transport"], rel_tol=0.02)
        rel = res.busbw_gbps / measured - 1.0
        assert abs(rel) <= TOLERANCE, (row["row_id"], size, plan.algorithm, res.busbw_gbps)
