"""The Megatron-Core release a run can have used (bounded by its paper's month) and the two
behaviours that changed at a known release (seer/mcore_release.py).

Sources: NVIDIA/Megatron-LM tags (core_v0.11.0 2025-03-14, core_v0.12.0 2025-05-06,
core_v0.13.0 2025-07-25); `--recompute-modules` from commit 3b141a2471 (2025-04-05, first in
core_v0.12.0); `moe_utils.unpermute` at core_v0.11.0 returns
`permuted_tokens * permuted_probs.unsqueeze(-1)` (autograd keeps the 16-bit expert output for
the probabilities' gradient) until commit 2659630721 (2025-04-09, "Memory efficient token
permutation", first in core_v0.13.0).
"""

from typing import Any

import pytest

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.activations import activation_bytes_per_layer
from starfabric.astral.seer.mcore_release import (
    RECOMPUTE_MODULES_SINCE,
    UNPERMUTE_KEEPS_OUTPUT_BEFORE,
    megatron_core_release,
    newest_release_by,
    offers_recompute_modules,
    published_month,
    unpermute_keeps_output,
)
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.validate import _module_sets, selective_module_sets

PAPER = "arXiv:2504.14960 (Liu et al., MoE Parallel Folding, Megatron-Core) Table 3"


def test_the_paper_month_bounds_the_release() -> None:
    assert published_month(PAPER) == (2025, 4)
    assert published_month("arxiv 2104.04473 Table 1") == (2021, 4)
    assert published_month("github.com/NVIDIA/Megatron-LM README") is None
    # core_v0.11.0 was tagged 2025-03-14, core_v0.12.0 only on 2025-05-06
    assert newest_release_by((2025, 4)) == (0, 11)
    assert newest_release_by((2025, 5)) == (0, 12)
    assert newest_release_by((2020, 1)) is None
    assert megatron_core_release("Megatron-Core 5D parallelism (2025)", PAPER) == (0, 11)


def test_a_named_release_wins_and_other_stacks_are_unknown() -> None:
    assert megatron_core_release("Megatron-Core v0.9 (2024; TE 1.11)", PAPER) == (0, 9)
    assert megatron_core_release("Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1", None) == (0, 17)
    assert megatron_core_release("TorchTitan (2025-10)", PAPER) is None
    assert megatron_core_release("Megatron-Core (2025; DeepEP)", "github.com/x/y") is None
    # a framework cell dated after the paper: a later run, not the one the paper reports
    assert megatron_core_release("Megatron-Core (2025)", "arXiv:2412.19437 Table 1") is None
    assert megatron_core_release("Megatron-Core (2024-12)", "arXiv:2412.19437") == (0, 9)


def test_feature_releases() -> None:
    assert RECOMPUTE_MODULES_SINCE == (0, 12) and UNPERMUTE_KEEPS_OUTPUT_BEFORE == (0, 13)
    assert not offers_recompute_modules((0, 11))
    assert offers_recompute_modules((0, 12)) and offers_recompute_modules(None)
    assert unpermute_keeps_output((0, 11)) and unpermute_keeps_output((0, 12))
    assert not unpermute_keeps_output((0, 13)) and not unpermute_keeps_output(None)


def _g8t8(ffn: int, k: int, experts: int) -> ModelSpec:
    """Mixtral-8x22B's shape (HF config) with `experts` experts of width `ffn`, top-k."""
    return ModelSpec(
        name="moe", layers=56, hidden=6144, ffn_hidden=16384, heads=48, kv_heads=8,
        head_dim=128, vocab=32768, moe_experts=experts, moe_topk=k, moe_ffn_hidden=ffn,
    )  # fmt: skip


EX: dict[str, Any] = {
    "global_batch": 256, "micro_batch": 1, "seq_len": 4096, "tp": 2, "pp": 8, "ep": 8,
    "etp": 2, "recompute": "none",
}  # fmt: skip


def _per_layer(model: ModelSpec, **kw: Any) -> float:
    p = predict(make_job(model, {**EX, **kw}, {"gpu": "H100", "gpus": 128}))
    return activation_bytes_per_layer(model, p.job.execution, p.layout, moe=True)


@pytest.mark.parametrize(("ffn", "k", "experts"), [(2048, 8, 64), (16384, 2, 8)])
def test_unpermute_keeps_k_hidden_copies_per_token(ffn: int, k: int, experts: int) -> None:
    """The kept tensor is the combine's input: k tokens of the hidden size, 16-bit, on the
    rank's sequence shard (tokens / TP under SP) — whatever the expert width."""
    m = _g8t8(ffn, k, experts)
    extra = _per_layer(m, moe_unpermute_keeps_output=True) - _per_layer(m)
    assert extra == pytest.approx(2 * k * 6144 * 4096 / 2)
    # with the whole MoE layer recomputed (--moe-layer-recompute) nothing of it is kept
    rec = {"recompute": "selective", "recompute_modules": ("moe",)}
    assert _per_layer(m, moe_unpermute_keeps_output=True, **rec) == _per_layer(m, **rec)


def test_releases_before_recompute_modules_offer_the_whole_moe_layer_only() -> None:
    m = _g8t8(2048, 8, 64)
    old = {"framework": "Megatron-Core 5D parallelism (2025)", "citation": PAPER}
    assert _module_sets(old, m) == [("selective", ("moe",))]
    new = {"framework": "Megatron-Core 0.14 (2025)", "citation": PAPER}
    assert _module_sets(new, m) == selective_module_sets(m)
