"""A100-era (2021-2023) runs (tests/data/published_runs/a100_era_runs.csv, session 22m): the
transcription's invariants — every MosaicML row is a multi-node row of llm-foundry's 2023-05
benchmark tables whose step time is the table's token rate's arithmetic, whose batch multiplies
out over data parallelism on every GPU and whose shape is the model yaml's (the table's own
parameter count checks it); the GPT-NeoX-20B row has the released config's layout — and Seer
reads every row as the sources state it. Seer's error values are not asserted here (outside
ground truth, nothing fitted to it)."""

import re

import pytest

from astral.seer.outside_rows import DATA, check_header_is_development_set_2s
from starfabric.astral.seer.validate import read_rows, row_model, row_setup, validate_all

CSV = DATA / "a100_era_runs.csv"
ROWS = read_rows(CSV)
IDS = [r["row_id"] for r in ROWS]
MPT = [r for r in ROWS if r["source_id"] == "MOSAIC_LLMF_BENCH23"]
MPT_IDS = [r["row_id"] for r in MPT]
(NEOX,) = [r for r in ROWS if r["source_id"] == "GPTNEOX20B_PAPER"]

LLMF_COMMIT = "300cc5c58b7a"
"""llm-foundry commit of the README tables read (2023-05-03; the .md's sources)."""

MPT_YAML_SHAPES = {
    "70b": (8192, 64, 80),
    "30b": (7168, 56, 48),
    "13b": (5120, 40, 40),
    "7b": (4096, 32, 32),
    "3b": (2560, 20, 32),
    "1b": (2048, 16, 24),
    "760m": (1536, 12, 24),
    "350m": (1024, 16, 24),
    "125m": (768, 12, 12),
}
"""(d_model, n_heads, n_layers) of scripts/train/yamls/mosaic_gpt/<size>.yaml at 300cc5c."""

MPT_VOCAB = 50368
"""vocab_size of every MosaicGPT yaml at 300cc5c."""

MIN_GPUS = 16
"""Rule 2 of the .md: only rows of two nodes or more."""


def _mpt_params(d: int, layers: int, seq: int) -> int:
    """MosaicGPT's parameter count at 300cc5c: per block 12d^2 weights + 13d biases and
    LayerNorm parameters, the final LayerNorm (2d), the tied wte (V x d) and a learned wpe of
    max_seq_len rows (S x d)."""
    return layers * (12 * d * d + 13 * d) + 2 * d + MPT_VOCAB * d + seq * d


def _note_int(row: dict[str, str], pattern: str) -> int:
    m = re.search(pattern, row["notes"])
    assert m is not None, pattern
    return int(m.group(1))


def test_header_is_development_set_2s() -> None:
    check_header_is_development_set_2s(CSV)


def test_rows_are_unique_and_from_the_two_sources() -> None:
    assert len(ROWS) == 59
    assert len(set(IDS)) == len(IDS)
    assert len(MPT) == 58
    keys = {(r["gpu"], r["model"], r["seq_len"], r["num_gpus"]) for r in MPT}
    assert len(keys) == len(MPT)  # no table row twice


@pytest.mark.parametrize("row", MPT, ids=MPT_IDS)
def test_mpt_row_cites_the_table_at_its_commit(row: dict[str, str]) -> None:
    cite = row["citation"]
    assert f"mosaicml/llm-foundry @{LLMF_COMMIT} scripts/train/benchmarking/README.md" in cite
    size = row["model"].split()[-1]
    assert f"yamls/mosaic_gpt/{size}.yaml" in cite
    assert row["verification"].startswith("VERIFIED_PRIMARY")
    assert int(row["num_gpus"]) >= MIN_GPUS and int(row["num_gpus"]) % 8 == 0


@pytest.mark.parametrize("row", MPT, ids=MPT_IDS)
def test_mpt_step_time_is_the_table_s_token_rate_arithmetic(row: dict[str, str]) -> None:
    """step = GBS x seq / Throughput (T/s); the table's T/s/GPU is the same rate rounded."""
    gbs, seq, gpus = (int(row[k]) for k in ("global_batch_seqs", "seq_len", "num_gpus"))
    tps = int(row["value_primary"])
    assert int(row["tokens_per_batch"]) == gbs * seq
    assert float(row["derived_iter_time_s"]) == pytest.approx(gbs * seq / tps, abs=5e-5)
    assert float(row["derived_tokens_per_sec_per_gpu"]) == pytest.approx(tps / gpus, abs=0.05)
    assert abs(int(row["tokens_per_sec_per_gpu"]) - tps / gpus) <= 1.0
    assert not row["iter_time_s"] and not row["tflops_per_gpu"]


@pytest.mark.parametrize("row", MPT, ids=MPT_IDS)
def test_mpt_batch_is_data_parallel_over_every_gpu(row: dict[str, str]) -> None:
    """FSDP FULL_SHARD: DP = GPUs, GBS = MicroBatchSize x GradAccum x GPUs (the table's)."""
    gpus, mb, gbs = (int(row[k]) for k in ("num_gpus", "micro_batch", "global_batch_seqs"))
    assert (int(row["tp"]), int(row["pp"]), int(row["cp"]), int(row["dp"])) == (1, 1, 1, gpus)
    ga = _note_int(row, r"GradAccum (\d+)")
    assert mb == _note_int(row, r"MicroBatchSize (\d+)")
    assert mb * ga * gpus == gbs
    assert "FULL_SHARD" in row["zero_or_fsdp"] and f"over {gpus} GPUs" in row["zero_or_fsdp"]
    checkpointing = "Activation Checkpointing True" in row["notes"]
    assert row["recompute"].startswith("full") == checkpointing
    assert row["recompute"].startswith("none") != checkpointing


@pytest.mark.parametrize("row", MPT, ids=MPT_IDS)
def test_mpt_shape_is_the_yaml_s_and_matches_the_table_s_parameter_count(
    row: dict[str, str],
) -> None:
    d, heads, layers = MPT_YAML_SHAPES[row["model"].split()[-1]]
    cells = tuple(int(row[k]) for k in ("hidden", "heads", "layers", "ffn_hidden", "vocab"))
    assert cells == (d, heads, layers, 4 * d, MPT_VOCAB)
    m = re.search(r"NumParams (\d+)", row["model_notes"])
    assert m is not None
    assert int(m.group(1)) == _mpt_params(d, layers, int(row["seq_len"]))


def test_only_the_40gb_rows_state_an_interconnect() -> None:
    """The 1600 Gb/s RoCE heading covers the 40GB table only; the 80GB rows leave it open."""
    for row in MPT:
        if "A100-40GB" in row["gpu"]:
            assert "1600 Gb/s per node" in row["interconnect"]
        else:
            assert row["interconnect"].startswith("UNVERIFIED")
            assert "interconnect" in row["unverified_fields"]


@pytest.mark.parametrize("row", MPT, ids=MPT_IDS)
def test_seer_reads_mpt_as_gpt_family_fsdp_with_the_pre_fa2_triton_kernel(
    row: dict[str, str],
) -> None:
    """The 2023-05 date in the framework cell makes the Triton FlashAttention the pre-FA2
    kernel (flash_generation); FSDP is ZeRO-3; the 40GB rows get 1600/8 Gb/s per GPU."""
    st = row_setup(row)
    assert st.execution["flash_kernel"] == "triton"
    assert st.execution["zero"] == 3
    if "A100-40GB" in row["gpu"]:
        assert st.system["nic_bandwidth"] == "200G"
        assert st.system["hbm_gib"] == 40.0
    model = row_model(row)
    assert model.tied_embeddings and model.learned_pos_emb and model.linear_bias


def test_neox_layout_is_the_released_config_s() -> None:
    """configs/20B.yml: TP 2, PP 4, micro-batch 4 x 32 accumulation on 96 GPUs (DP 12)."""
    tp, pp, dp, gpus, mb, gbs = (
        int(NEOX[k]) for k in ("tp", "pp", "dp", "num_gpus", "micro_batch", "global_batch_seqs")
    )
    assert (tp, pp, dp, gpus) == (2, 4, 12, 96)
    assert mb * 32 * dp == gbs == 1536
    assert int(NEOX["tokens_per_batch"]) == gbs * int(NEOX["seq_len"])
    assert float(NEOX["tflops_per_gpu"]) == 117.0
    assert "megatron" in NEOX["tflops_flop_convention"].lower()
    assert "FLOP count" in NEOX["unverified_fields"]
    assert NEOX["verification"].startswith("VERIFIED_SECONDARY")
    assert "configs/20B.yml" in NEOX["citation"] and "2204.06745" in NEOX["citation"]


def test_seer_reads_neox_as_its_sources_state() -> None:
    """4 HCAs per 8 GPUs at 200 Gb/s: 100 Gb/s per GPU; the GPT-NeoX architecture (rotary,
    untied, no dropout, parallel block); DeepSpeed ZeRO-1 with FP16."""
    st = row_setup(NEOX)
    assert st.system["nic_bandwidth"] == "100G"
    assert st.execution["zero"] == 1 and st.execution["precision"] == "fp16"
    model = row_model(NEOX)
    assert model.parallel_block and model.norm == "layernorm"
    assert not (model.tied_embeddings or model.learned_pos_emb or model.attention_dropout)


def test_seer_reads_every_row() -> None:
    results, failed = validate_all(CSV)
    assert failed == []
    assert sorted(r.row_id for r in results) == sorted(IDS)
