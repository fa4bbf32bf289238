"""TorchTitan's round-robin forced balance (torchtitan @5d4bdd0 `models/moe/moe.py`,
`_debug_force_load_balance_routing`) and the ranks DeepEP sends a token to
(seer/round_robin_routing.py): checked against the source's own index arithmetic and EP's
`Shard(0)` placement, not against any row's error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import round_robin_routing as rr
from starfabric.astral.seer.comm import formula_comm
from starfabric.astral.seer.deepep_kernels import rank_copy_fraction
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.validate import read_rows, row_setup, validate_row

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"


def _source_distinct(n_tokens: int, experts: int, topk: int, ranks: int) -> float:
    """The source's routing, `arange(n_tokens * top_k).reshape(n_tokens, top_k) % num_experts`,
    with experts sharded over `ranks` on dim 0 (`Shard(0)`: experts / ranks consecutive
    experts each); mean distinct ranks per token."""
    idx = np.arange(n_tokens * topk).reshape(n_tokens, topk) % experts
    owner = idx // (experts // ranks)
    return float(np.mean([len(set(row)) for row in owner.tolist()]))


def test_qwen3_30b_tokens_reach_one_rank() -> None:
    """128 experts, top-8, EP 8 (16 experts a rank): every window of 8 starts at a multiple of
    8, so a token's experts share one rank; random top-8 reaches 5.3 of 8."""
    assert _source_distinct(32768, 128, 8, 8) == 1.0
    assert rr.round_robin_distinct(128, 8, 8) == 1.0
    assert rr.round_robin_copy_fraction(128, 8, 8) == pytest.approx(1 / 8)
    assert rank_copy_fraction(128, 8, 8) * 8 == pytest.approx(5.34, abs=0.01)


@settings(max_examples=60, deadline=None)
@given(
    experts_per_rank=st.integers(1, 32),
    ranks=st.sampled_from([1, 2, 4, 8, 16]),
    topk=st.integers(1, 12),
)
def test_matches_the_source_arithmetic(experts_per_rank: int, ranks: int, topk: int) -> None:
    experts = experts_per_rank * ranks
    if topk > experts:
        return
    period = experts  # a multiple of the true period: the mean over it is exact
    assert rr.round_robin_distinct(experts, topk, ranks) == pytest.approx(
        _source_distinct(period, experts, topk, ranks)
    )
    assert 1.0 <= rr.round_robin_distinct(experts, topk, ranks) <= min(topk, ranks)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        rr.round_robin_distinct(0, 8, 8)


def test_read_only_for_torchtitan_forced_balance_through_deepep() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    assert row_setup(rows["TTDEEPEP-01"]).execution.get("moe_round_robin_routing") is True
    # DistMoE's fused kernels: its routing code was not read
    assert not row_setup(rows["TTDSV3-01"]).execution.get("moe_round_robin_routing", False)
    # Megatron-Core's --moe-router-force-load-balancing draws random logits
    assert not row_setup(rows["MZQ3-05"]).execution.get("moe_round_robin_routing", False)
    assert rr.runs_round_robin("TorchTitan (2025-10)", forced=True, fused_dispatch=False)
    assert not rr.runs_round_robin("TorchTitan (2025-10)", forced=False, fused_dispatch=False)
    assert not rr.runs_round_robin("Megatron-Core 0.14", forced=True, fused_dispatch=False)


def test_deepep_moves_one_copy_per_token_on_the_qwen3_rows() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    pred = validate_row(rows["TTDEEPEP-01"]).prediction
    ex, lay, model = pred.job.execution, pred.layout, pred.job.model
    eff = efficiency_for(lay.gpu)
    fc = formula_comm(ex, lay, eff, model)
    assert fc.ep_rank_fraction == pytest.approx(1 / 8)
    rnd = formula_comm(ex.model_copy(update={"moe_round_robin_routing": False}), lay, eff, model)
    assert rnd.ep_rank_fraction == pytest.approx(rank_copy_fraction(128, 8, 8))
    nbytes = 2.0 * 32768 * 8 * 2048  # every (token, expert) copy of a rank's 8 x 4,096 tokens
    ratio = fc.time("all_to_all", nbytes, "ep", phase="dispatch") / rnd.time(
        "all_to_all", nbytes, "ep", phase="dispatch"
    )
    assert ratio == pytest.approx(1 / rank_copy_fraction(128, 8, 8) / 8, rel=0.05)
