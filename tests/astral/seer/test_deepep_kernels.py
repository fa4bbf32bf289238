"""DeepEP kernel rates (seer/deepep_kernels.py) against DeepEP's own published benchmark tables
(tests/data/deepep/: the V1 README's normal-kernel table at DeepEP @0297fc8, an H200 2-node run
and an H20 intranode run from DeepEP's issues). Each published bandwidth is turned back into the
kernel time it implies (bytes as DeepEP's test scripts count them / bandwidth) and compared with
the time Seer's formula gives for the same job."""

import csv
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.comm import FormulaComm, make_fabric
from starfabric.astral.seer.deepep_kernels import (
    DEEPEP_NUM_SMS,
    DEEPEP_SM_RANK_COPY_BYTES_PER_S,
    deepep_internode_time,
    deepep_intranode_time,
    deepep_nvlink_bytes_per_s,
    rank_copy_fraction,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.expert_comm import (
    DEEPEP_FP8_BYTES_PER_ELEM,
    distinct_nodes,
    remote_copy_fraction,
)
from starfabric.astral.seer.fabric import Fabric, Group

TABLE = Path(__file__).parents[2] / "data" / "deepep" / "deepep_v1_normal_kernels.csv"
README_BAND = 0.06
"""Seer's time must match every README row's implied time within 6% (the formula leaves at
most 2.5%; the rest is room for the Monte-Carlo routing estimate)."""
OTHER_BAND = 0.12
"""The H200 2-node rows (another cluster, another DeepEP commit) within 12%: their own spread
(38-44 GB/s over dtypes and phases) is 15%."""


def _rows() -> list[dict[str, str]]:
    with TABLE.open() as f:
        return list(csv.DictReader(f))


def _test_routing_distinct(experts: int, topk: int, nodes: int, groups: int, tokens: int,
                           rng: np.random.Generator) -> tuple[float, float]:  # fmt: skip
    """(distinct nodes, distinct ranks) per token under DeepEP's test routing: random scores,
    the `groups` nodes with the highest maximum score, then the top-k experts inside them
    (tests/test_internode.py); 8 ranks per node."""
    s = rng.random((tokens, experts)) + 1.0
    per_node = experts // nodes
    top_g = np.argsort(-s.reshape(tokens, nodes, per_node).max(-1), axis=1)[:, :groups]
    keep = np.zeros((tokens, nodes), dtype=bool)
    np.put_along_axis(keep, top_g, True, axis=1)
    masked = np.where(np.repeat(keep, per_node, axis=1), s, 0.0)
    chosen = np.argsort(-masked, axis=1)[:, :topk]
    per_rank = experts // (8 * nodes)
    n_nodes = np.mean([len(set(r)) for r in chosen // per_node])
    n_ranks = np.mean([len(set(r)) for r in chosen // per_rank])
    return float(n_nodes), float(n_ranks)


def _fabric(gpu: str, nic_gbps: float = 400.0) -> Fabric:
    g = get_gpu(gpu)
    return make_fabric(g.nvlink_gbps * 1e9, nic_gbps * 1e9 / 8, efficiency_for(g))


def _predicted_bandwidth(row: dict[str, str], sms: int) -> float:
    """The bandwidth Seer's time gives for `row`, in the row's own definition (GB/s)."""
    nodes, g = int(row["nodes"]), int(row["ranks_per_node"])
    tok, h, k, e = (int(row[c]) for c in ("tokens", "hidden", "topk", "experts"))
    fp8 = row["dtype"] == "fp8"
    bpe = DEEPEP_FP8_BYTES_PER_ELEM if fp8 else 2.0
    fabric = _fabric(row["gpu"], float(row["nic_gbps"] or 400))
    nvl = deepep_nvlink_bytes_per_s(fabric.tiers("all_to_all")[0], g, sms)
    ranks = nodes * g
    nbytes = tok * k * h * 2.0
    rf = rank_copy_fraction(e, k, ranks)
    if row["kernel"] == "intranode":
        t = deepep_intranode_time(nbytes, Group(ranks, g), nvl, rf, fp8)
        return tok * rf * k * h * bpe / t / 1e9
    m = int(row["topk_groups"])
    t = deepep_internode_time(nbytes, Group(ranks, g), fabric, nvl,
                              remote_copy_fraction(e, k, nodes, m), rf, fp8, sms)  # fmt: skip
    return tok * distinct_nodes(e, k, nodes, m) * h * bpe / t / 1e9


@pytest.mark.parametrize("nodes,groups", [(2, 2), (4, 4), (8, 4)])
def test_distinct_nodes_and_ranks_match_deepeps_test_routing(nodes: int, groups: int) -> None:
    """The hypergeometric expectations Seer uses equal the node and rank counts of DeepEP's own
    benchmark routing (node-limited to `groups` nodes) within 2%."""
    rng = np.random.default_rng(7)
    n_nodes, n_ranks = _test_routing_distinct(256, 8, nodes, groups, 4000, rng)
    assert distinct_nodes(256, 8, nodes, groups) == pytest.approx(n_nodes, rel=0.02)
    # Ranks: the rank count inside the chosen node groups, as DeepEP's kernels see it.
    inside = groups * 8
    expected_ranks = distinct_nodes(256 * groups // nodes, 8, inside)
    assert expected_ranks == pytest.approx(n_ranks, rel=0.02)


@pytest.mark.parametrize("row", [r for r in _rows() if r["row"].startswith("README")],
                         ids=lambda r: r["row"])  # fmt: skip
def test_readme_table_reproduced(row: dict[str, str]) -> None:
    """Every normal-kernel row of DeepEP's V1 table (intranode 153/158 GB/s NVLink; internode
    43/43, 58/57, 51/50 GB/s logical RDMA at EP 16/32/64) within README_BAND, at the README's 24
    SMs."""
    bw = _predicted_bandwidth(row, sms=int(row["sms"]))
    assert bw == pytest.approx(float(row["bandwidth_gbps"]), rel=README_BAND)


@pytest.mark.parametrize("row", [r for r in _rows() if r["row"].startswith("I493")],
                         ids=lambda r: r["row"])  # fmt: skip
def test_two_node_rate_does_not_follow_nvlink(row: dict[str, str]) -> None:
    """H200 has 2.25x H800's NVLink, yet DeepEP at 2 nodes moves the same ~40 GB/s: the
    per-source-node forwarding pipeline, not NVLink, sets the 2-node rate."""
    bw = _predicted_bandwidth(row, sms=int(row["sms"]))
    assert bw == pytest.approx(float(row["bandwidth_gbps"]), rel=OTHER_BAND)


def test_nvlink_scaled_k_copies_would_miss_h200() -> None:
    """The model this replaced (all k copies at the NVLink rate) predicts ~2x the H200 2-node
    rate; the forwarding bound keeps H800 and H200 within 1% of each other."""
    h800, h200 = (next(r for r in _rows() if r["row"] == name) for name in
                  ("README-EP16-C", "I493-EP16-C"))  # fmt: skip
    assert _predicted_bandwidth(h200, 24) == pytest.approx(_predicted_bandwidth(h800, 24), rel=0.01)
    fabric = _fabric("H200")
    size = 4096 * 8 * 7168 * 2.0
    old = size * 7 / 8 / fabric.tiers("all_to_all")[0]
    old_bw = 4096 * distinct_nodes(256, 8, 2, 2) * 7168 * 2.0 / old / 1e9
    assert old_bw > 1.7 * float(h200["bandwidth_gbps"])


def test_sm_budget_binds_on_h20_not_on_h800() -> None:
    """At 24 SMs DeepEP copies 337 GB/s on H20 (its NVLink would allow ~360) — the SM budget
    binds (the calibration point); on H800 (160 GB/s) NVLink binds; Megatron-Core's default
    20 SMs copy less."""
    h20 = _fabric("H20").tiers("all_to_all")[0]
    h800 = _fabric("H800").tiers("all_to_all")[0]
    row = next(r for r in _rows() if r["row"] == "I16-H20-INTRA")
    assert deepep_nvlink_bytes_per_s(h20, 8, 24) == pytest.approx(
        float(row["bandwidth_gbps"]) * 1e9, rel=0.01
    )
    assert deepep_nvlink_bytes_per_s(h800, 8, 24) == h800
    assert deepep_nvlink_bytes_per_s(h20, 8) == DEEPEP_NUM_SMS * 8 * DEEPEP_SM_RANK_COPY_BYTES_PER_S


@pytest.mark.parametrize("row", [r for r in _rows() if r["row"].startswith("I394")],
                         ids=lambda r: r["row"])  # fmt: skip
def test_sm_rank_rate_carries_to_blackwell_with_four_ranks(row: dict[str, str]) -> None:
    """The per-SM-and-rank rate from H20 (8 ranks) predicts GB200's 4-rank intranode test
    (another architecture, half the ranks): dispatch within 2%; the combine is 20% slower
    there (OTHER_BAND is not met by it: the model gives the dispatch rate to both)."""
    bw = _predicted_bandwidth(row, sms=int(row["sms"]))
    band = 0.02 if row["phase"] == "dispatch" else 0.30
    assert bw == pytest.approx(float(row["bandwidth_gbps"]), rel=band)


def test_formula_comm_routes_deepep_by_group_span() -> None:
    """An EP group inside one node takes DeepEP's intranode formula (per-rank copies), one that
    spans nodes the internode formula; NCCL's all-to-all (no fractions) prices all k copies."""
    fabric = _fabric("H800")
    groups = {"ep": Group(8, 8), "ep2": Group(16, 8)}
    nvl = deepep_nvlink_bytes_per_s(fabric.tiers("all_to_all")[0], 8)
    rf = rank_copy_fraction(256, 8, 8)
    deepep = FormulaComm(fabric, groups, 1.0, rf, nvl)
    nccl = FormulaComm(fabric, groups)
    nbytes = 4096 * 8 * 7168 * 2.0
    t_deepep = deepep.time("all_to_all", nbytes, "ep", phase="combine")
    t_nccl = nccl.time("all_to_all", nbytes, "ep", phase="combine")
    assert t_deepep == pytest.approx(t_nccl * rf / (7 / 8), rel=0.02)
    assert deepep.time("all_to_all", nbytes, "ep") == t_nccl  # no phase: a plain all-to-all
