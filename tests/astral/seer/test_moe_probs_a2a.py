"""The router probabilities' own all-to-all in Megatron-Core's alltoall dispatcher
(`moe_probs_a2a`; NVIDIA/Megatron-LM 2659630721, core_v0.13.0 on; core_v0.17.1
`MoEAlltoAllTokenDispatcher.token_dispatch`)."""

import pytest

from starfabric.astral.seer.mcore_release import UNPERMUTE_KEEPS_OUTPUT_BEFORE
from starfabric.astral.seer.moe_probs_a2a import (
    PROB_BYTES,
    PROBS_ALL_TO_ALL_SINCE,
    sends_probs_all_to_all,
)
from starfabric.astral.seer.ops import backward_of, layer_ops
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import make_job
from starfabric.astral.seer.validate import read_rows, row_setup

DSV3_EP32 = {
    "global_batch": 256, "seq_len": 4096, "micro_batch": 4, "precision": "bf16", "tp": 8,
    "pp": 8, "cp": 1, "ep": 32, "etp": 1, "zero": 1, "moe_dispatcher": "alltoall",
    "moe_load_balance": "forced", "pipeline_layers": [7, 7, 8, 8, 8, 8, 8, 7],
}  # fmt: skip


def _table(**over: object):  # type: ignore[no-untyped-def]
    job = make_job("deepseek-v3", DSV3_EP32 | over, {"gpu": "B300", "gpus": 256,
                                                    "gpus_per_node": 8})  # fmt: skip
    lay = resolve_layout(job.model, job.execution, job.system)
    return layer_ops(job.model, job.execution, lay, moe=True)


def _ops(**over: object) -> tuple[list[str], list[float]]:
    t = _table(**over)
    return t.name, t.nbytes


def test_release_bound_is_the_memory_efficient_permutation_commit() -> None:
    assert PROBS_ALL_TO_ALL_SINCE == UNPERMUTE_KEEPS_OUTPUT_BEFORE == (0, 13)
    assert not sends_probs_all_to_all(None)
    assert not sends_probs_all_to_all((0, 12))
    assert sends_probs_all_to_all((0, 13)) and sends_probs_all_to_all((0, 17))


def test_the_probabilities_follow_the_tokens_with_one_fp32_value_per_copy() -> None:
    names, nbytes = _ops(moe_probs_all_to_all=True)
    i = names.index("moe.ep_dispatch")
    assert names[i + 1] == "moe.ep_dispatch_probs"
    tokens_per_rank = 4 * 4096 / 8  # sequence parallel: the rank's shard of the micro-batch
    assert nbytes[i + 1] == pytest.approx(PROB_BYTES * tokens_per_rank * 8)
    assert nbytes[i] / nbytes[i + 1] == pytest.approx(2 * 7168 / PROB_BYTES)
    # the combine sends tokens only
    assert names.count("moe.ep_combine") == 1
    assert not any("combine_probs" in n for n in names)


def test_older_releases_other_dispatchers_and_single_rank_ep_send_none() -> None:
    for over in ({}, {"moe_probs_all_to_all": True, "moe_dispatcher": "deepep"},
                 {"moe_probs_all_to_all": True, "ep": 1}):  # fmt: skip
        names, _ = _ops(**over)
        assert "moe.ep_dispatch_probs" not in names, over


def test_backward_returns_the_probability_gradient() -> None:
    bwd = backward_of(_table(moe_probs_all_to_all=True))
    assert "moe.ep_dispatch_probs.bwd" in bwd.name
    ep_a2a = [n for n, c, g in zip(bwd.name, bwd.coll, bwd.group, strict=True)
              if c == "all_to_all" and g == "ep"]  # fmt: skip
    assert len(ep_a2a) == 3  # combine's, the tokens' and the probabilities' gradients


def test_rows_read_it_from_the_release_they_name() -> None:
    """The AWS Megatron-Core 0.17.1 rows send it; Megatron-Core 0.11 rows (MoE Parallel
    Folding) and TorchTitan rows do not."""
    from pathlib import Path

    dev2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
    seen = set()
    for row in read_rows(dev2):
        ex = row_setup(row).execution
        flag = bool(ex.get("moe_probs_all_to_all"))
        if row["row_id"].startswith("AWS"):
            assert flag, row["row_id"]
            seen.add("aws")
        elif row["source_id"] in ("MOEFOLD25", "TORCHTITAN_2412", "TORCHTITAN_DEEPEP_B200"):
            assert not flag, row["row_id"]
            seen.add(row["source_id"])
    assert len(seen) == 4
