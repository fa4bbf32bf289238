from collections import Counter

import numpy as np
import pytest

from starfabric.astral.collectives.moe import MoEShape, moe_alltoall, route_tokens
from starfabric.errors import ConfigError

SMALL = MoEShape(
    ranks=16, local=4, tokens_per_rank=50, hidden=64, experts=32, topk=4, max_nodes_per_token=2
)


def test_routing_is_topk_distinct_and_node_limited() -> None:
    ex = route_tokens(SMALL)
    assert ex.shape == (16 * 50, 4)
    assert all(len(set(row)) == 4 for row in ex.tolist())
    nodes = ex // (32 // 4)  # experts per node
    assert max(len(set(row)) for row in nodes.tolist()) <= 2


def test_zipf_skews_expert_load() -> None:
    flat = np.bincount(route_tokens(SMALL).ravel(), minlength=32)
    skew = np.bincount(
        route_tokens(MoEShape(**{**SMALL.__dict__, "zipf_s": 1.2})).ravel(), minlength=32
    )
    assert skew.max() / skew.mean() > 1.5 * flat.max() / flat.mean()


def test_dispatch_flows_match_a_token_by_token_count() -> None:
    plan = moe_alltoall(SMALL)
    step = plan.steps[0]
    tb = plan.notes["token_bytes"]
    ex = route_tokens(SMALL)
    local, per_rank = 4, 32 // 16
    rdma: Counter[tuple[int, int]] = Counter()
    nvl: Counter[tuple[int, int]] = Counter()
    for t, row in enumerate(ex.tolist()):
        src = t // 50
        dsts = {e // per_rank for e in row}
        for node in {d // local for d in dsts} - {src // local}:
            rdma[(src, node * local + src % local)] += 1
        for d in dsts:
            if d // local == src // local:
                nvl[(src, d)] += 1
            else:
                relay = (d // local) * local + src % local
                if relay != d:
                    nvl[(relay, d)] += 1
    got: Counter[tuple[int, int]] = Counter()
    for s, d, b in zip(step.src.tolist(), step.dst.tolist(), step.size_bytes.tolist(), strict=True):
        got[(s, d)] += round(b / tb)
    assert got == rdma + nvl


def test_forwarding_keeps_rdma_on_one_rail_and_sends_less() -> None:
    fwd = moe_alltoall(SMALL).steps[0]
    direct = moe_alltoall(MoEShape(**{**SMALL.__dict__, "nvlink_forwarding": False})).steps[0]
    cross_f = fwd.src // 4 != fwd.dst // 4
    cross_d = direct.src // 4 != direct.dst // 4
    assert (fwd.src[cross_f] % 4 == fwd.dst[cross_f] % 4).all()
    assert fwd.size_bytes[cross_f].sum() < direct.size_bytes[cross_d].sum()


def test_qps_split_rdma_only_and_combine_reverses() -> None:
    one = moe_alltoall(SMALL).steps[0]
    four = moe_alltoall(MoEShape(**{**SMALL.__dict__, "qps_per_peer": 4})).steps[0]
    assert four.size_bytes.sum() == pytest.approx(one.size_bytes.sum())
    assert set(four.qp.tolist()) == {0, 1, 2, 3}
    comb = moe_alltoall(SMALL, "combine").steps[0]
    assert sorted(zip(comb.dst.tolist(), comb.src.tolist(), strict=True)) == sorted(
        zip(one.src.tolist(), one.dst.tolist(), strict=True)
    )


def test_invalid_shapes() -> None:
    with pytest.raises(ConfigError, match="multiple of local"):
        moe_alltoall(MoEShape(ranks=12, local=8))
    with pytest.raises(ConfigError, match="not divisible"):
        moe_alltoall(MoEShape(ranks=64, experts=100))
