"""MLPerf Training v6.0 DeepSeek-V3 671B (tests/data/published_runs/mlperf_dsv3_runs.csv,
session 22a): the transcription's invariants — each row's step time is the median of the
per-log figures its notes list, the token rate is that time's arithmetic, the layout multiplies
out to the GPU count and to the logged global batch, every row cites its own logs and config in
the v6.0 fork, the shape is DeepSeek-V3's with one MTP layer — and Seer reads every row, with
the configs' full-iteration CUDA graphs read as no host launch model (validate's
FULL_ITERATION_GRAPHS). Seer's error values are not asserted here (outside ground truth,
nothing fitted to it)."""

import csv
import re
import statistics
from pathlib import Path

import pytest

from starfabric.astral.seer.validate import (
    FULL_ITERATION_GRAPHS,
    read_rows,
    row_setup,
    validate_all,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"
CSV = DATA / "mlperf_dsv3_runs.csv"
ROWS = read_rows(CSV)
IDS = [r["row_id"] for r in ROWS]
FORK = "github.com/Richardyu114/training_results_v6.0"
COMMIT = "eabf23a07b2a"


def test_header_is_development_set_2s() -> None:
    with (DATA / "development_runs_2.csv").open(newline="") as fh:
        want = next(csv.reader(fh))
    with CSV.open(newline="") as fh:
        assert next(csv.reader(fh)) == want


def test_one_row_per_result_folder_of_the_fork() -> None:
    assert len(ROWS) == 10
    assert len(set(IDS)) == len(IDS)
    for row in ROWS:
        assert f"{FORK} (fork of mlcommons/training_results_v6.0) @{COMMIT} " in row["citation"]
    folders = [re.search(r"\S+/results/\S+/deepseekv3_671b/", r["citation"]) for r in ROWS]
    assert all(folders)
    assert len({f.group(0) for f in folders if f}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_cites_its_logs_and_config(row: dict[str, str]) -> None:
    cite = row["citation"]
    assert re.search(r"/results/[^/ ]+/deepseekv3_671b/result_\*\.txt", cite)
    assert re.search(r"config [\w/.+-]+/config_GB[23]00_\w+_mxfp8_full_cg\.sh", cite)
    assert row["verification"].startswith("VERIFIED_PRIMARY")
    # the submitter in the row id, the results folder and the config path agree
    org = re.search(r"@\w+ (\S+?)/results/", cite)
    assert org is not None
    assert f"config {org.group(1)}/benchmarks/deepseekv3_671b/implementations/" in cite


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_median_of_the_listed_logs(row: dict[str, str]) -> None:
    """The notes list each log's median train_step_time over its last 8 steps; the row's
    figure is their median (rule 2 of the .md)."""
    listed = [float(x) for x in re.findall(r"result_\w+\.txt (\d+\.\d+)", row["notes"])]
    assert len(listed) == 3
    assert float(row["iter_time_s"]) == pytest.approx(statistics.median(listed), abs=5e-5)
    assert float(row["value_primary"]) == float(row["iter_time_s"])
    assert not row["derived_iter_time_s"]
    assert "train_step_time" in row["derivation_note"]
    assert "last 8 steps" in row["derivation_note"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tokens_per_second_is_gbs_times_seq_over_step_time(row: dict[str, str]) -> None:
    gbs, seq, gpus = (int(row[k]) for k in ("global_batch_seqs", "seq_len", "num_gpus"))
    assert seq == 4096
    assert gbs in (15360, 16384)
    assert int(row["tokens_per_batch"]) == gbs * seq
    tps = gbs * seq / float(row["iter_time_s"]) / gpus
    assert float(row["derived_tokens_per_sec_per_gpu"]) == pytest.approx(tps, rel=1e-4)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out_to_gpus_and_logged_batch(row: dict[str, str]) -> None:
    """TP x PP x CP x DP = GPUs; GBS = micro-batch x accumulation x DP; the config file's name
    <GPU>_NODESx4xMINIBSxtpTppPepEcpC agrees with the cells; EP 32 x TP fits one NVL72 rack."""
    tp, pp, dp, cp, ep, gpus, mb, gbs, gpn = (
        int(row[k])
        for k in ("tp", "pp", "dp", "cp", "ep", "num_gpus", "micro_batch",
                  "global_batch_seqs", "gpus_per_node")
    )  # fmt: skip
    assert tp * pp * cp * dp == gpus
    ga = re.search(r"gradient_accumulation_steps (\d+)", row["notes"])
    assert ga is not None
    assert mb * int(ga.group(1)) * dp == gbs
    name = re.search(
        r"config_(GB[23]00)_(\d+)x(\d+)x(\d+)xtp(\d+)pp(\d+)ep(\d+)cp(\d+)", row["citation"]
    )
    assert name is not None
    gpu, *nums = name.groups()
    nodes, per_node, minibs, c_tp, c_pp, c_ep, c_cp = (int(x) for x in nums)
    assert (nodes * per_node, per_node, minibs, c_tp, c_pp, c_ep, c_cp) == (
        gpus,
        gpn,
        int(ga.group(1)),
        tp,
        pp,
        ep,
        cp,
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
    results, failed = validate_all(CSV)
    assert failed == []
    assert sorted(r.row_id for r in results) == sorted(IDS)
