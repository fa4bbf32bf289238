"""MLPerf Training v6.0 gpt-oss-20b (tests/data/published_runs/mlperf_gptoss_runs.csv, session
22b, read from the fork Richardyu114/training_results_v6.0): the transcription's invariants —
each row's step time is the median of the per-log figures its notes list, the token rate is that
time's arithmetic, the layout multiplies out to the GPU count and to the global batch, the config
file name agrees with the cells, every row cites its own logs, config and the model's
pretrain.py, the shape is gpt-oss-20b's as that pretrain.py builds it — and Seer reads every row
(with the alternating sliding window and not as a GPT-3-family model). Seer's error values are
not asserted here (outside ground truth, nothing fitted to it). The checks shared with the other
MLPerf files are in mlperf_transcription.py."""

import pytest

from astral.seer import mlperf_transcription as mt
from starfabric.astral.seer.validate import row_model

DATA = mt.load("mlperf_gptoss_runs")
ROWS = DATA.rows
IDS = DATA.ids
FORK = "github.com/Richardyu114/training_results_v6.0 (fork of mlcommons/training_results_v6.0)"


def test_header_is_development_set_2s() -> None:
    mt.assert_header_is_development_set_2s(DATA.csv)


def test_one_row_per_result_folder_of_the_fork() -> None:
    assert len(ROWS) == 8
    mt.assert_one_row_per_result_folder(ROWS, "gpt_oss_20b")
    for row in ROWS:
        assert row["citation"].startswith(FORK + " @eabf23a07b2a ")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_cites_its_logs_config_and_model(row: dict[str, str]) -> None:
    cite = row["citation"]
    mt.assert_cites_logs_and_config(row, "gpt_oss_20b")
    assert cite.endswith("model NVIDIA/benchmarks/gpt_oss_20b/implementations/nemo/pretrain.py")
    # a config the fork does not hold is said so in the citation, verification and unverified cells
    absent = "(absent from the fork)" in cite
    assert absent == ("absent from the fork" in row["verification"])
    assert not absent or "config file name" in row["unverified_fields"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_median_of_the_listed_logs(row: dict[str, str]) -> None:
    """The notes list three logs' medians of the block-mean train_step_time; the row's figure is
    their median."""
    listed = mt.listed_logs(row, r"result_\w+\.txt (\d+\.\d+) \(\d blocks\)")
    assert len(listed) == 3
    mt.assert_logged_not_derived(row, "block-mean train_step_time")
    mt.assert_median_of_listed_logs(row, listed, abs_tol=5e-6)
    assert "3 of 10 logs read" in row["notes"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tokens_per_second_is_gbs_times_seq_over_step_time(row: dict[str, str]) -> None:
    mt.assert_token_rate(row, seq_len=8192)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out_and_matches_the_config_name(row: dict[str, str]) -> None:
    """TP x PP x CP x DP = GPUs; GBS = MBS x GA x DP; the config file name
    NODESxGPUSxMINIBSxtpTppPcpCepE agrees with the cells (MINIBS = MBS x GA)."""
    tp, dp, cp, ep, mb = mt.ints(row, "tp", "dp", "cp", "ep", "micro_batch")
    ga = mt.assert_layout_multiplies_out(row)
    assert 32 % ep == 0 and dp * cp * tp % ep == 0  # the experts split over the EP group
    name = mt.config_name(row, with_ep=True)
    assert name is not None
    mt.assert_config_name_agrees(row, name, minibs=mb * ga)
    assert name.ep == ep


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_shape_is_gpt_oss_20b_as_the_reference_pretrain_builds_it(row: dict[str, str]) -> None:
    shape = tuple(
        int(row[k])
        for k in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab",
                  "moe_experts", "moe_topk", "moe_shared_experts", "moe_ffn_hidden",
                  "moe_dense_layers")
    )  # fmt: skip
    assert shape == (24, 2880, 2880, 64, 8, 64, 128256, 32, 4, 0, 2880, 0)
    assert "sliding-window attention 128 on 12 of 24 layers" in row["model_notes"]


def test_precision_matches_the_config() -> None:
    """Blackwell rows source an MXFP8 config; the H100 row runs FP8 delayed scaling."""
    for row in ROWS:
        if "H100" in row["gpu"]:
            assert row["precision"].startswith("FP8 (FP8=True, FP8_HYBRID=True")
            assert "FP8_RECIPE=delayed" in row["precision"]
        else:
            assert row["precision"].startswith("MXFP8")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_seer_reads_the_model_as_gpt_oss(row: dict[str, str]) -> None:
    """The window on half the layers, and none of the GPT-3 family's LayerNorm / learned
    positions / tied embeddings / dropout (the name holds 'gpt')."""
    model = row_model(row)
    assert (model.sliding_window, model.sliding_window_layers) == (128, 12)
    assert model.norm == "rmsnorm"
    assert not (model.learned_pos_emb or model.tied_embeddings or model.attention_dropout)
    assert (model.moe_experts, model.moe_topk, model.moe_layers) == (32, 4, 24)


def test_seer_reads_every_row() -> None:
    mt.assert_seer_reads_every_row(DATA)


@pytest.mark.parametrize(
    "notes",
    [
        "no sliding-window attention 4096",
        "sliding-window attention 4096 disabled",
        "without SWA (4096)",
        "SWA 4096: off",
        "not using sliding window 4096",
    ],
)
def test_a_negated_sliding_window_is_not_applied(notes: str) -> None:
    """A model-notes cell that states the window off ('no sliding-window attention 4096',
    'SWA 4096: off') leaves every layer on full attention (the size was read and applied
    whatever the negation: statements.negated_at, as every cell reader)."""
    model = row_model({**ROWS[0], "model_notes": notes})
    assert (model.sliding_window, model.sliding_window_layers) == (0, None)
    affirmed = row_model({**ROWS[0], "model_notes": "sliding-window attention 4096"})
    assert affirmed.sliding_window == 4096
