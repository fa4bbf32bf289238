"""Megatron-Core's alltoall dispatcher copies received tokens into local-expert order and back
(token_dispatcher.py "Permutation 2" / "Unpermutation 2", core_v0.11.0): two memory-bound
passes over every received copy, only with more than one local expert, not under DeepEP."""

import numpy as np
import pytest

from starfabric.astral.seer import make_job
from starfabric.astral.seer.expert_sort import (
    PERMUTATION_BWD_BYTES_FACTOR,
    SORT_SUFFIX,
    local_sort_bytes,
)
from starfabric.astral.seer.ops import backward_of, layer_ops
from starfabric.astral.seer.parallel import resolve_layout

# Qwen2-57B-A14B-shaped (64 experts, top-8) and Mixtral-8x22B-shaped (8 experts, top-2) MoE.
FINE = {
    "name": "fine", "layers": 4, "hidden": 3584, "heads": 28, "kv_heads": 4, "head_dim": 128,
    "ffn_hidden": 18944, "vocab": 151936, "activation": "swiglu", "moe_experts": 64,
    "moe_topk": 8, "moe_ffn_hidden": 2560,
}  # fmt: skip
COARSE = {**FINE, "name": "coarse", "hidden": 6144, "heads": 48, "kv_heads": 8,
          "moe_experts": 8, "moe_topk": 2, "moe_ffn_hidden": 16384}  # fmt: skip


def _table(model: dict, **ex: object):  # type: ignore[no-untyped-def]
    base = {"global_batch": 256, "seq_len": 4096, "micro_batch": 1, "tp": 2, "pp": 1,
            "ep": 4, "etp": 1, "sp": True, "moe_capacity_factor": 1.0}  # fmt: skip
    job = make_job(model, {**base, **ex}, {"gpu": "H100", "gpus": 64, "gpus_per_node": 8})
    lay = resolve_layout(job.model, job.execution, job.system)
    return layer_ops(job.model, job.execution, lay, moe=True), lay


def _bytes(t, suffix: str) -> float:  # type: ignore[no-untyped-def]
    return float(sum(b for n, b in zip(t.name, t.nbytes, strict=True) if n.endswith(suffix)))


def test_bytes_rule() -> None:
    assert local_sort_bytes("alltoall", 16, 1000, 4096, 2.0) == 2 * 2.0 * 1000 * 4096
    assert local_sort_bytes("alltoall", 1, 1000, 4096, 2.0) == 0.0
    assert local_sort_bytes("deepep", 16, 1000, 4096, 2.0) == 0.0


def test_alltoall_with_local_experts_sorts_both_ways() -> None:
    t, _ = _table(FINE)
    names = [n for n in t.name if n.endswith(SORT_SUFFIX)]
    assert names == [f"moe.{SORT_SUFFIX}", f"moe.un{SORT_SUFFIX}"]
    # Every received copy (the rank's share of all token-expert copies of its EP group) is read
    # and written once per sort, the same bytes as the dispatch-side permutation of its own copies.
    permute = _bytes(t, "moe.permute")
    assert _bytes(t, f"moe.{SORT_SUFFIX}") == pytest.approx(permute)  # imbalance 1 (capacity)
    # After the expert-TP all-gather the sort sees etp x the copies.
    t2, _ = _table(FINE, etp=2, ep=4, tp=2)
    assert _bytes(t2, f"moe.{SORT_SUFFIX}") == pytest.approx(2 * _bytes(t2, "moe.permute"))


def test_no_sort_for_one_local_expert_or_deepep() -> None:
    t, _ = _table(COARSE, ep=8)  # 8 experts over EP 8: one per rank
    assert not any(n.endswith(SORT_SUFFIX) for n in t.name)
    t, _ = _table(FINE, moe_capacity_factor=None, moe_dispatcher="deepep")
    assert not any(n.endswith(SORT_SUFFIX) for n in t.name)


def test_backward_is_the_inverse_copy() -> None:
    t, _ = _table(FINE)
    bt = backward_of(t)
    fwd = np.array([b for n, b in zip(t.name, t.nbytes, strict=True) if n.endswith(SORT_SUFFIX)])
    bwd = np.array(
        [b for n, b in zip(bt.name, bt.nbytes, strict=True) if n.endswith(SORT_SUFFIX + ".bwd")]
    )
    assert PERMUTATION_BWD_BYTES_FACTOR == 1.0
    assert sorted(bwd) == pytest.approx(sorted(fwd))
