"""Which Megatron-Core, and which FLOP formula, MoE Parallel Folding's context-scaling table ran
(issue 32, session 20; development_runs_2.md "FLOP conventions re-checked", docs/astral.md
"MoE Parallel Folding's FLOP formula: what the sources settle").

The facts asserted here, each from its source (none from the rows' errors):
- arXiv 2504.14960: v1 submitted 2025-04-21 with 17 authors, and its abstract already claims
  "high performance with sequence lengths up to 128K tokens"; v3 (revised 2026-03-02) lists 18
  (Jianbin Chang added), as does the transcription the rows cite. The context-scaling experiment
  is in v1, so the paper's month stays 2025-04 and the release bound core_v0.11.0.
- NVIDIA/Megatron-LM: 8873b55d6a (2025-03-06) halved the attention term of
  `num_floating_point_operations`; core_v0.11.0 (2025-03-14, cut from core_r0.11.0) does not
  contain it, core_v0.12.0 (2025-05-06) does. Megatron-LM main had it from 2025-03-06.
- core_v0.9.0 `initialize_model_parallel` raises unless the data-parallel size (world / (TP x
  PP x CP)) is divisible by EP: "the maximum degree of expert parallelism is bounded by the
  degree of data parallelism" (paper section 3.2). Table 5's four non-folded "Mcore" mappings
  have DP 2 with EP 4 or 8, so they ran code with MoE Parallel Folding (7f22e210cd, 2024-11-23;
  core_v0.11.0 builds the expert groups tp-ep-dp-pp, ETP x EP contiguous). That bounds the code
  from below at 2024-11-23, before 8873b55: it does not decide the formula.
- The paper states no formula (section 4.2 defines MFU only in words); it names PyTorch 2.5.0 /
  CUDA 12.6 (section 4.1) and MCore v0.9 as the accuracy baseline (section 6.1). Megatron-LM's
  own CI ran nvcr.io/nvidia/pytorch:24.10-py3 from 2025-01-21 to 2025-03-18, across 8873b55, so
  the environment does not decide it either. The rows keep the full count, unverified.
"""

from pathlib import Path

import pytest

from starfabric.astral.seer import releases
from starfabric.astral.seer.cells import MEGATRON_CAUSAL_SINCE
from starfabric.astral.seer.comm import place_group
from starfabric.astral.seer.mcore_release import megatron_core_release, published_month
from starfabric.astral.seer.ops import megatron_model_flops
from starfabric.astral.seer.validate import _convention, read_rows, row_model

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
GPUS_PER_HOST = 8  # DGX H100 (Eos), paper section 4.1

ARXIV_V1 = (2025, 4)  # 2504.14960v1, submitted 2025-04-21
CAUSAL_COUNT_COMMIT = (2025, 3)  # 8873b55d6a, 2025-03-06
FOLDING_COMMIT = (2024, 11)  # 7f22e210cd, 2024-11-23, first tagged in core_v0.10.0


@pytest.fixture(scope="module")
def moefold() -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in read_rows(DEV2) if r["source_id"] == "MOEFOLD25"}


def _non_folded(row: dict[str, str]) -> bool:
    return "Folding" not in row["framework"]


def _attention_dp(row: dict[str, str]) -> int:
    """Megatron's data-parallel size: world / (TP x PP x CP) (core_v0.9.0 parallel_state)."""
    return int(row["num_gpus"]) // (int(row["tp"]) * int(row["pp"]) * int(row["cp"]))


def test_the_paper_month_is_v1s_and_bounds_the_release_before_the_causal_count(moefold) -> None:
    t5 = [r for rid, r in moefold.items() if rid.startswith("MPF-T5")]
    assert len(t5) == 8
    for row in moefold.values():
        assert published_month(row["citation"]) == ARXIV_V1
        assert megatron_core_release(row["framework"], row["citation"]) == (0, 11)
    # the bound release predates the tag that first carries 8873b55's halved attention term
    # (core_v0.11.0 2025-03-14, core_v0.12.0 2025-05-06), so the rows keep the full count
    causal_since = MEGATRON_CAUSAL_SINCE["megatron-core"]
    assert releases.MEGATRON_CORE[(0, 11)] == (2025, 3)
    assert releases.MEGATRON_CORE[causal_since] == (2025, 5)
    assert causal_since > (0, 11)
    # ... while main carried it from 2025-03, before the month the reader dates the rows: a tag
    # bound does not settle it
    assert all(published_month(r["citation"]) > CAUSAL_COUNT_COMMIT for r in moefold.values())


def test_the_rows_keep_the_full_count_and_say_it_is_unverified(moefold) -> None:
    assert len(moefold) == 34
    for row in moefold.values():
        assert _convention(row) == "megatron"
        assert "exact MFU formula version" in row["unverified_fields"]


def test_table5_mcore_mappings_are_refused_before_parallel_folding(moefold) -> None:
    """core_v0.9.0 requires DP % EP == 0; every non-folded 4K mapping (Tables 3/4) passes it,
    none of Table 5's does (DP 2, EP 4 or 8)."""
    t5 = {rid: r for rid, r in moefold.items() if rid.startswith("MPF-T5") and _non_folded(r)}
    assert sorted(t5) == ["MPF-T5-01", "MPF-T5-02", "MPF-T5-03", "MPF-T5-04"]
    for row in t5.values():
        dp = _attention_dp(row)
        assert dp == int(row["dp"]) == 2
        assert dp % int(row["ep"]) != 0
        assert "folding-era code" in row["notes"]
    short = [r for rid, r in moefold.items() if not rid.startswith("MPF-T5") and _non_folded(r)]
    assert len(short) == 16
    for row in short:
        assert int(row["cp"]) == 1 and _attention_dp(row) % int(row["ep"]) == 0
    # the lower bound this gives the code (folding's first tag, core_v0.10.0) predates the first
    # tag with the causal count: it decides nothing
    first_folding_tag = min(k for k, v in releases.MEGATRON_CORE.items() if v > FOLDING_COMMIT)
    assert first_folding_tag == (0, 10)
    assert first_folding_tag < MEGATRON_CAUSAL_SINCE["megatron-core"]


@pytest.mark.parametrize(
    ("row_id", "hosts"), [("MPF-T5-01", 1), ("MPF-T5-02", 1), ("MPF-T5-03", 1), ("MPF-T5-04", 4)]
)
def test_seer_places_the_expert_group_as_folding_era_code_does(moefold, row_id, hosts) -> None:
    """Experts tp-ep-dp-pp with ETP = TP: EP ranks ETP apart (`comm.layout_groups`)."""
    row = moefold[row_id]
    ep, etp = int(row["ep"]), int(row["etp"])
    assert etp == int(row["tp"])
    group = place_group(ep, etp, GPUS_PER_HOST)
    assert group.nodes == hosts == max(1, ep * etp // GPUS_PER_HOST)


def test_the_open_question_is_the_attention_term_and_grows_with_sequence(moefold) -> None:
    """Full over causal count (8873b55 halves only s/h): a few percent at 4K (Tables 3/4),
    half again at 128K (Table 5), so only the context-scaling rows hinge on it."""

    def ratio(row_id: str) -> float:
        row = moefold[row_id]
        m, seq = row_model(row), int(row["seq_len"])
        return megatron_model_flops(m, 1.0, seq) / megatron_model_flops(m, 1.0, seq, causal=True)

    for rid in moefold:
        if not rid.startswith("MPF-T5"):
            assert 1.0 < ratio(rid) < 1.07
    assert ratio("MPF-T5-01") == pytest.approx(1.126, abs=0.002)  # 16K
    assert ratio("MPF-T5-04") == pytest.approx(1.537, abs=0.002)  # 128K
    assert ratio("MPF-T5-04") == pytest.approx(ratio("MPF-T5-08"))
