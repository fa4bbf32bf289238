"""MLPerf Training v6.0 DeepSeek-V3 671B (tests/data/published_runs/mlperf_dsv3_runs.csv,
session 22a): the transcription's invariants — each row's step time is the median of the
per-log figures its notes list, the token rate is that time's arithmetic, the layout multiplies
out to the GPU count and to the logged global batch, every row cites its own logs and config in
the v6.0 fork, the shape is DeepSeek-V3's with one MTP layer — and Seer reads every row, with
the configs' full-iteration CUDA graphs read as no host launch model (validate's
FULL_ITERATION_GRAPHS). Seer's error values are not asserted here (outside ground truth,
nothing fitted to it). The checks shared with the other MLPerf files are in
mlperf_transcription.py."""

import re

import pytest

from astral.seer import mlperf_transcription as mt
from starfabric.astral.seer.validate import FULL_ITERATION_GRAPHS, row_setup

DATA = mt.load("mlperf_dsv3_runs")
ROWS = DATA.rows
IDS = DATA.ids
BENCHMARK = "deepseekv3_671b"
FORK = "github.com/Richardyu114/training_results_v6.0"
COMMIT = "eabf23a07b2a"
CONFIG = r"config [\w/.+-]+/config_GB[23]00_\w+_mxfp8_full_cg\.sh"
"""The cited config: a GB200/GB300 MXFP8 full-iteration-CUDA-graph config of the fork."""


def test_header_is_development_set_2s() -> None:
    mt.assert_header_is_development_set_2s(DATA.csv)


def test_one_row_per_result_folder_of_the_fork() -> None:
    assert len(ROWS) == 10
    mt.assert_one_row_per_result_folder(ROWS, BENCHMARK)
    for row in ROWS:
        assert f"{FORK} (fork of mlcommons/training_results_v6.0) @{COMMIT} " in row["citation"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_cites_its_logs_and_config(row: dict[str, str]) -> None:
    cite = row["citation"]
    mt.assert_cites_logs_and_config(row, BENCHMARK, config=CONFIG)
    # the submitter in the row id, the results folder and the config path agree
    org = re.search(r"@\w+ (\S+?)/results/", cite)
    assert org is not None
    assert f"config {org.group(1)}/benchmarks/deepseekv3_671b/implementations/" in cite


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_median_of_the_listed_logs(row: dict[str, str]) -> None:
    """The notes list each log's median train_step_time over its last 8 steps; the row's
    figure is their median (rule 2 of the .md)."""
    listed = mt.listed_logs(row)
    assert len(listed) == 3
    mt.assert_logged_not_derived(row, "train_step_time")
    mt.assert_median_of_listed_logs(row, listed, abs_tol=5e-5)
    assert "last 8 steps" in row["derivation_note"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tokens_per_second_is_gbs_times_seq_over_step_time(row: dict[str, str]) -> None:
    mt.assert_token_rate(row, seq_len=4096)
    assert int(row["global_batch_seqs"]) in (15360, 16384)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out_to_gpus_and_logged_batch(row: dict[str, str]) -> None:
    """TP x PP x CP x DP = GPUs; GBS = micro-batch x accumulation x DP; the config file's name
    <GPU>_NODESx4xMINIBSxtpTppPepEcpC agrees with the cells; EP 32 x TP fits one NVL72 rack."""
    ga = mt.assert_layout_multiplies_out(row)
    tp, ep = mt.ints(row, "tp", "ep")
    # this benchmark's names put EP before CP (mt.config_name reads ...cpC[epE])
    name = re.search(
        r"config_(GB[23]00)_(\d+)x(\d+)x(\d+)xtp(\d+)pp(\d+)ep(\d+)cp(\d+)", row["citation"]
    )
    assert name is not None
    gpu, *nums = name.groups()
    nodes, per_node, minibs, c_tp, c_pp, c_ep, c_cp = (int(x) for x in nums)
    mt.assert_config_name_agrees(
        row, mt.ConfigName(nodes, per_node, minibs, c_tp, c_pp, c_cp, ep=c_ep), minibs=ga
    )
    assert row["gpu"].startswith(gpu)
    assert (int(row["vpp"]), ep, int(row["etp"])) == (4, 32, 1)
    assert ep * tp <= 72  # one EP group inside one NVL72 rack (USE_MNNVL=1)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_shape_is_deepseek_v3_with_one_mtp_layer(row: dict[str, str]) -> None:
    shape = tuple(
        int(row[k])
        for k in ("layers", "hidden", "ffn_hidden", "heads", "vocab", "moe_experts",
                  "moe_topk", "moe_shared_experts", "moe_ffn_hidden", "moe_dense_layers")
    )  # fmt: skip
    assert shape == (61, 7168, 18432, 128, 129280, 256, 8, 1, 2048, 3)
    assert "hidden" in row["unverified_fields"]  # not in the repository (rule 4 of the .md)
    assert "mtp_num_layers 1" in row["model_notes"]
    assert "Et*4|(t*4|)*14tmL" in row["model_notes"]


def test_full_iteration_graphs_pattern() -> None:
    """The scope's spellings are read; the inference scope and a negation are not."""
    for text in (
        "CUDA graphs over the full iteration (CUDA_GRAPH_SCOPE=full_iteration)",
        "CUDA graphs full_iteration; EP a2a overlap",
        "--cuda-graph-scope full_iteration",
        "full-iteration CUDA graphs",
    ):
        assert FULL_ITERATION_GRAPHS.search(text), text
    for text in (
        "--cuda-graph-scope full_iteration_inference",
        "CUDA graphs (--cuda-graph-scope attn moe_router)",
        "one outer full-step CUDA graph",
    ):
        assert not FULL_ITERATION_GRAPHS.search(text), text


def test_full_iteration_graphs_leave_no_host_launch_model() -> None:
    """A Megatron-Core/NeMo row with full-iteration CUDA graphs: graphs on, host launches off;
    the same row stating only attention/router graphs keeps the host launch model."""
    row = next(r for r in ROWS if r["row_id"] == "MLP60-NV-GB200-0512")
    ex = row_setup(row).execution
    assert ex["cuda_graphs"] is True and ex["host_launches"] is False
    partial = {
        **row,
        "framework": row["framework"].replace(
            "CUDA graphs over the full iteration (CUDA_GRAPH_IMPLEMENTATION=local, "
            "CUDA_GRAPH_SCOPE=full_iteration, OPTIMIZER_CG=True, ON_DEVICE_CLIP_GRAD=True)",
            "CUDA graphs (--cuda-graph-scope attn moe_router)",
        ),
    }
    assert partial["framework"] != row["framework"]
    ex = row_setup(partial).execution
    assert ex["cuda_graphs"] is True and ex["host_launches"] is True
    negated = {
        **row,
        "framework": "NeMo / Megatron-Bridge on Megatron-Core; CUDA graphs "
        "(--cuda-graph-scope attn moe_router), no full-iteration CUDA graphs",
    }
    assert row_setup(negated).execution["host_launches"] is True


def test_seer_reads_every_row() -> None:
    mt.assert_seer_reads_every_row(DATA)


@pytest.mark.parametrize(
    "graphs",
    [
        "CUDA graphs (--cuda-graph-scope attn moe_router) instead of full_iteration",
        "CUDA graphs per layer rather than full iteration",
        "CUDA graphs per layer vs. full-iteration CUDA graphs",
        "attn/moe_router CUDA graphs, compared with full-iteration CUDA graphs",
    ],
)
def test_full_iteration_graphs_as_a_comparison_keep_the_host_launch_model(graphs: str) -> None:
    """The full-iteration scope named as what the run is compared with ('instead of
    full_iteration', 'vs. full-iteration CUDA graphs': statements.compared_at) is not the run's
    scope: the host launch model stays (it was switched off)."""
    row = next(r for r in ROWS if r["row_id"] == "MLP60-NV-GB200-0512")
    fw = f"NeMo / Megatron-Bridge on Megatron-Core; {graphs}"
    ex = row_setup({**row, "framework": fw}).execution
    assert ex["cuda_graphs"] is True and ex["host_launches"] is True
