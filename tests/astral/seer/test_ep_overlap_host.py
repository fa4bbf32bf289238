"""Megatron's EP overlap with host launches on: a forward with no partner in the combined
1F1B schedule (a warm-up forward, `ep_overlap.solo_ops`) is a forward alone, waiting before
each EP dispatch as the no-overlap forward does (`host_segments`), so it lasts the same
segment flow shop, not max(host, GPU)."""

from __future__ import annotations

import pytest

from starfabric.astral.seer import make_job
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.ops import layer_ops
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.schedule import PieceCost, piece_cost, with_host

MODEL = {"name": "qwen3-30b-a3b", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4,
         "head_dim": 128, "ffn_hidden": 6144, "vocab": 151936, "activation": "swiglu",
         "moe_experts": 128, "moe_topk": 8, "moe_ffn_hidden": 768, "qk_norm": True}  # fmt: skip


def _piece(overlap: bool, micro_batch: int) -> PieceCost:
    ex = {"global_batch": 256, "seq_len": 4096, "micro_batch": micro_batch, "tp": 8, "pp": 1,
          "ep": 16, "etp": 1, "sp": True, "moe_dispatcher": "alltoall", "host_launches": True,
          "ep_comm_overlap": overlap}  # fmt: skip
    job = make_job(MODEL, ex, {"gpu": "H100", "gpus": 64, "gpus_per_node": 8})
    model, exe = job.model, job.execution
    lay = resolve_layout(model, exe, job.system)
    ctx = make_context(exe, lay, efficiency_for(lay.gpu, {}), job.system, model)
    assert ctx.megatron_ep_overlap == overlap
    pc = piece_cost(layer_ops(model, exe, lay, moe=True), ctx, exe.recompute)
    return with_host(pc, model, exe, lay, True)


@pytest.mark.parametrize("micro_batch", [1, 4, 8, 16])
def test_unpaired_forward_is_timed_as_the_no_overlap_forward(micro_batch: int) -> None:
    alone = _piece(False, micro_batch).fwd
    solo = _piece(True, micro_batch).fwd_solo
    assert solo is not None
    assert solo.total == pytest.approx(alone.total, rel=1e-9)
    assert solo.comm.get("host", 0.0) == pytest.approx(alone.comm.get("host", 0.0), abs=1e-12)


@pytest.mark.parametrize("micro_batch", [8, 16])
def test_gpu_bound_unpaired_forward_still_waits_for_the_first_launches(micro_batch: int) -> None:
    # GPU-bound (GPU > host): max(host, GPU) is the GPU alone, but after each wait the GPU
    # idles until the host has issued the segment's first launches (`flow_shop`), so the
    # forward carries a host excess, as the no-overlap forward does
    solo = _piece(True, micro_batch).fwd_solo
    assert solo is not None
    assert solo.comm.get("host", 0.0) > 0.0
