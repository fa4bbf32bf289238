"""DeepEP multi-QP experiment: more QPs per peer → more bandwidth, saturating, below line rate."""

from collections import Counter

import numpy as np
import pytest

from starfabric.astral.collectives.deepep import (
    LINE_RATE_GBYTE_S,
    PUBLISHED_H800,
    deepep_rdma_bytes,
    deepep_sweep,
    format_rows,
    h800_fabric,
    split_qps,
    spread_hosts,
    with_qp_chunks,
)
from starfabric.astral.collectives.moe import MoEShape, moe_alltoall, route_tokens
from starfabric.astral.collectives.plan import Plan
from starfabric.astral.collectives.run import qp_stop_and_wait_capacity
from starfabric.errors import ConfigError

SMALL = MoEShape(
    ranks=16, local=4, tokens_per_rank=50, hidden=64, experts=32, topk=4, max_nodes_per_token=2
)
TOPO = h800_fabric()


def _flows(plan: Plan) -> list[tuple[int, int, int, float]]:
    (s,) = plan.steps
    sizes = np.round(s.size_bytes, 6).tolist()
    return sorted(zip(s.src.tolist(), s.dst.tolist(), s.qp.tolist(), sizes, strict=True))


@pytest.mark.parametrize("q", [2, 5])
@pytest.mark.parametrize("phase", ["dispatch", "combine"])
def test_split_qps_matches_building_with_qps(q: int, phase: str) -> None:
    one = moe_alltoall(SMALL, phase)
    many = moe_alltoall(MoEShape(**{**SMALL.__dict__, "qps_per_peer": q}), phase)
    assert _flows(split_qps(one, q, SMALL.local)) == _flows(many)


def test_rdma_bytes_count_tokens_per_distinct_node_own_included() -> None:
    ex = route_tokens(SMALL)
    per_node = SMALL.experts // (SMALL.ranks // SMALL.local)
    pairs = sum(len({e // per_node for e in row}) for row in ex.tolist())
    expect = pairs * SMALL.hidden * SMALL.dispatch_bytes_per_elem / SMALL.ranks
    assert deepep_rdma_bytes(SMALL, "dispatch") == pytest.approx(expect)
    assert deepep_rdma_bytes(SMALL, "combine") == pytest.approx(expect * 2 / (1 + 4 / 128))


def test_spread_hosts_sit_under_distinct_tors() -> None:
    gpus = spread_hosts(TOPO, 8)
    assert len(gpus) == 64 and (gpus.reshape(8, 8) % 8 == np.arange(8)).all()
    tors = TOPO.structure.gpu_tor[gpus[::8]]  # type: ignore[union-attr]
    assert len(set(tors[:, 0].tolist())) == 8
    with pytest.raises(ConfigError, match="distinct ToRs"):
        spread_hosts(TOPO, 10**6)


def test_more_qps_more_bandwidth_saturating_below_line_rate() -> None:
    qps = (1, 4, 8, 16)
    rows = deepep_sweep(eps=(32,), qps=qps, tokens_per_rank=256, seeds=(0, 1, 2))
    print(format_rows(rows))
    for phase in ("dispatch", "combine"):
        bw = [r.rdma_gbyte_s for r in rows if r.phase == phase]
        assert bw == sorted(bw), (phase, bw)
        assert bw[-1] / bw[0] > 1.3  # the multi-QP gain
        assert bw[-1] / bw[2] < bw[2] / bw[0]  # 8 → 16 gains less than 1 → 8
    for r in rows:
        assert r.nic_gbyte_s <= LINE_RATE_GBYTE_S
        assert r.max_nic_util <= 1.0 + 1e-6
        assert r.published == PUBLISHED_H800[(32, r.phase)]
    assert Counter(r.phase for r in rows) == {"dispatch": 4, "combine": 4}


def test_bad_qps() -> None:
    with pytest.raises(ConfigError, match="qps_per_peer = 0"):
        split_qps(moe_alltoall(SMALL), 0, SMALL.local)


def test_transport_ib_gain_is_qp_overlap_roce_adds_ports_and_paths() -> None:
    """On one 400G port with adaptive routing the only multi-QP gain is QPs overlapping their
    per-chunk signal waits (run.qp_stop_and_wait_capacity); with RoCE ECMP over 2x200G the
    QPs also spread over ports and paths, so the gain is larger."""
    ib = deepep_sweep(
        (32,), (1, 16), tokens_per_rank=256, seeds=(0,), transport="ib",
        topo=h800_fabric("CX7-400G", "ib"),
    )  # fmt: skip
    roce = deepep_sweep(
        (32,), (1, 16), tokens_per_rank=256, seeds=(0,), transport="roce",
        topo=h800_fabric("2x200G", "roce"),
    )  # fmt: skip
    for phase in ("dispatch", "combine"):
        one, many = (r.rdma_gbyte_s for r in ib if r.phase == phase)
        assert 1.1 < many / one < 1.5
        assert max(r.nic_gbyte_s for r in ib) <= LINE_RATE_GBYTE_S
        r1, r16 = (r.rdma_gbyte_s for r in roce if r.phase == phase)
        assert r16 / r1 > many / one


def test_qp_stop_and_wait_matches_the_closed_loop() -> None:
    """k QPs on a port, each a chunk then a wait: the port carries k chunks per
    (wait + k chunk / rate); one flow per port here, so u = b / (1 + b)."""
    cap = np.full(4, 400e9)
    nvl = np.zeros(4, np.bool_)
    nvl[3] = True
    ptr = np.array([0, 2, 4, 6, 7])
    links = np.array([0, 1, 0, 1, 2, 1, 3])  # flows 0, 1 leave by link 0, flow 2 by 2, 3 NVLink
    out = qp_stop_and_wait_capacity(ptr, links, cap, 250e3, 5e-6, nvl)
    b = 250e3 * 8 / (400e9 * 5e-6)
    assert out[0] == pytest.approx(400e9 * 2 * b / (1 + 2 * b))
    assert out[2] == pytest.approx(400e9 * b / (1 + b))
    assert out[1] == out[3] == 400e9  # not a first network hop; NVLink untouched
    with pytest.raises(ConfigError, match="EP12"):
        with_qp_chunks(moe_alltoall(SMALL), 12, "dispatch")
