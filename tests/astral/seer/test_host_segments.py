"""A synced MoE forward as a flow shop of the modules between two host waits (host_segments)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer import make_job
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.host_ops import (
    HOST_S_PER_LAUNCH_FWD,
    LAUNCHES,
    LayerLaunchSpec,
    layer_launches,
)
from starfabric.astral.seer.host_segments import (
    PRE_WAIT_LAUNCHES,
    SEGMENT_ORDER,
    flow_shop,
    gpu_by_module,
    launches_by_module,
    segment_seconds,
)
from starfabric.astral.seer.ops import layer_ops
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.schedule import piece_cost, with_host
from starfabric.errors import InvariantError


def test_flow_shop_by_hand() -> None:
    # host work first, GPU work last: nothing overlaps (1 + 5)
    assert flow_shop(np.array([1.0, 0.0]), np.array([0.0, 5.0])) == 6.0
    # GPU work first (issued at once), host work after it: fully overlapped
    assert flow_shop(np.array([0.0, 1.0]), np.array([5.0, 0.0])) == 5.0
    # h = [2, 1], g = [1, 3]: j = 0 gives 2 + 4, j = 1 gives 3 + 3
    assert flow_shop(np.array([2.0, 1.0]), np.array([1.0, 3.0])) == 6.0
    # h = [1, 1, 1], g = [3, 0.5, 0.5]: max(1 + 4, 2 + 1, 3 + 0.5) = 5
    assert flow_shop(np.array([1.0, 1, 1]), np.array([3.0, 0.5, 0.5])) == 5.0


pos = st.lists(st.floats(0.0, 1e-2), min_size=1, max_size=12)


@given(pos, pos)
def test_flow_shop_between_max_and_sum(h: list[float], g: list[float]) -> None:
    n = min(len(h), len(g))
    hh, gg = np.array(h[:n]), np.array(g[:n])
    t = flow_shop(hh, gg)
    assert max(hh.sum(), gg.sum()) - 1e-12 <= t <= hh.sum() + gg.sum() + 1e-12


@given(pos, pos, st.integers(1, 6))
def test_cutting_modules_into_launches_never_lengthens(
    h: list[float], g: list[float], k: int
) -> None:
    n = min(len(h), len(g))
    coarse = flow_shop(np.array(h[:n]), np.array(g[:n]))
    fine = flow_shop(np.repeat(np.array(h[:n]) / k, k), np.repeat(np.array(g[:n]) / k, k))
    assert fine <= coarse + 1e-12


def test_wait_splits_the_dispatch_module_as_the_code_does() -> None:
    # core_v0.17.1 alltoall: preprocess 8 + 4 D2H copies, stream wait, event 6 + permute 4 before
    # `d2h_event.synchronize()` in token_dispatch; the two all_to_all calls after it.
    assert PRE_WAIT_LAUNCHES["dispatch_alltoall"] == 8 + 6 + 4
    assert LAUNCHES["dispatch_alltoall"].fwd - PRE_WAIT_LAUNCHES["dispatch_alltoall"] == 2
    # DeepEP: multihot map 3 + layout and notify 2 before the host spins on the counts.
    assert PRE_WAIT_LAUNCHES["dispatch_deepep"] == 3 + 2
    # the router and the preprocess are the last modules issued before the wait
    assert SEGMENT_ORDER[0] == "dispatch" and SEGMENT_ORDER[-2:] == ("router", "pre_wait")


@pytest.mark.parametrize(
    "dispatcher,local,shared,graphs,mla,qk",
    list(
        itertools.product(
            ("alltoall", "deepep"), (1, 4, 8), (0, 1), (False, True), (False, True), (False, True)
        )
    ),
)
def test_module_launches_sum_to_the_layer(
    dispatcher: str, local: int, shared: int, graphs: bool, mla: bool, qk: bool
) -> None:
    spec = LayerLaunchSpec(
        True, dispatcher=dispatcher, local_experts=local, shared_experts=shared,
        cuda_graphs=graphs, mla=mla, qk_norm=qk,
    )  # fmt: skip
    assert sum(launches_by_module(spec).values()) == layer_launches(spec).fwd


def test_a_dense_layer_has_no_segments() -> None:
    with pytest.raises(InvariantError, match="dense"):
        launches_by_module(LayerLaunchSpec(False))


# Qwen3-style alltoall layer: 8 local experts, no shared expert, QK-norm
QWEN3_EP16 = LayerLaunchSpec(True, dispatcher="alltoall", local_experts=8, qk_norm=True)


def test_layer_segment_by_hand() -> None:
    # Qwen3-style alltoall layer, 8 local experts, no shared expert, QK-norm:
    # dispatch 2, experts 11 + 16 + sort 5 = 32, combine 3, attention 12 + 4 = 16, router 28,
    # pre-wait 18 launches.
    nl = launches_by_module(QWEN3_EP16)
    assert nl == {"dispatch": 2, "experts": 32, "combine": 3, "shared_expert": 0,
                  "attention": 16, "router": 28, "pre_wait": 18}  # fmt: skip
    h = {k: v * HOST_S_PER_LAUNCH_FWD for k, v in nl.items()}
    # host-bound: 99 launches x 47.5 us = 4.7025 ms; GPU 1 ms, all in the experts. The last
    # expert step ends at host 36 launches + its 1/32 of 1 ms, then the GPU drains the other
    # steps only if that is later: max over j of h(<= j) + g(>= j) = h(<= first expert step)
    # + 1 ms = 3 x 47.5 us + 1 ms, against the whole host time 4.7025 ms: host-bound, T = H.
    g = {"experts": 1e-3}
    assert segment_seconds(h, g, nl) == pytest.approx(99 * HOST_S_PER_LAUNCH_FWD)
    # GPU-bound: 10 ms in the attention module, issued after 37 launches (dispatch, experts,
    # combine) and spread over its 16 launches: T = 38 launches of host + 10 ms.
    g = {"attention": 10e-3}
    assert segment_seconds(h, g, nl) == pytest.approx(38 * HOST_S_PER_LAUNCH_FWD + 10e-3)
    # one step per module (upper bound): the whole 16 attention launches before its GPU work
    assert segment_seconds(h, g) == pytest.approx(53 * HOST_S_PER_LAUNCH_FWD + 10e-3)


def test_gpu_modules_cover_every_operator_of_a_moe_layer() -> None:
    job = _job()
    lay = resolve_layout(job.model, job.execution, job.system)
    t = layer_ops(job.model, job.execution, lay, moe=True)
    by = gpu_by_module(t.name, np.ones(len(t)))
    assert sum(by.values()) == len(t)
    assert by["attention"] > 0 and by["router"] == 2 and by["experts"] >= 3
    assert by["dispatch"] == 2  # permute + EP dispatch


def _job(**ex: object):  # type: ignore[no-untyped-def]
    model = {"name": "qwen3-30b-a3b", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4,
             "head_dim": 128, "ffn_hidden": 6144, "vocab": 151936, "activation": "swiglu",
             "moe_experts": 128, "moe_topk": 8, "moe_ffn_hidden": 768, "qk_norm": True}  # fmt: skip
    base = {"global_batch": 256, "seq_len": 4096, "micro_batch": 1, "tp": 8, "pp": 4,
            "ep": 16, "etp": 1, "sp": True, "moe_dispatcher": "alltoall",
            "host_launches": True}  # fmt: skip
    return make_job(model, {**base, **ex}, {"gpu": "H100", "gpus": 64, "gpus_per_node": 8})


@pytest.mark.parametrize("micro_batch", [1, 4, 16])
def test_synced_forward_is_the_segment_flow_shop(micro_batch: int) -> None:
    job = _job(micro_batch=micro_batch)
    model, ex = job.model, job.execution
    lay = resolve_layout(model, ex, job.system)
    ctx = make_context(ex, lay, efficiency_for(lay.gpu, {}), job.system, model)
    pc = piece_cost(layer_ops(model, ex, lay, moe=True), ctx, ex.recompute)
    out = with_host(pc, model, ex, lay, True)
    # 4 KV heads under TP 8: the num_query_groups < TP QKV gather is launched (host_ops)
    spec = replace(QWEN3_EP16, qkv_gather=True)
    host = layer_launches(spec).fwd
    host *= HOST_S_PER_LAUNCH_FWD
    gpu = pc.fwd.total
    # at least max(host, GPU) (the rule before), at most their sum
    assert max(host, gpu) - 1e-12 <= out.fwd.total <= host + gpu + 1e-12
    nl = launches_by_module(spec)
    g = gpu_by_module(pc.fwd_table.name, pc.fwd_costs.exposed)
    k = gpu / sum(g.values())
    expect = segment_seconds({n: c * HOST_S_PER_LAUNCH_FWD for n, c in nl.items()},
                             {n: v * k for n, v in g.items()}, nl)  # fmt: skip
    assert out.fwd.total == pytest.approx(max(gpu, expect))
    # the excess is reported as the host component
    assert out.fwd.comm.get("host", 0.0) == pytest.approx(max(0.0, expect - gpu))
