"""A100 3D-parallel runs at 128-1,024 GPUs (tests/data/published_runs/a100_scale_runs.csv,
session 24): the transcription's invariants — every row is a NeMo Megatron 22.06 README table
cell whose step time is its token rate's arithmetic, whose layout multiplies out (TP x PP x DP =
GPUs, the batch over DP micro-batches) and whose speed-ups are the ones the README prints; the
rule-2 arithmetic that keeps the July 2022 175B table and drops the September one — and Seer
reads every row as the sources state it. Seer's error values are not asserted here (outside
ground truth, nothing fitted to it)."""

import pytest

from astral.seer.outside_rows import DATA, check_header_is_development_set_2s
from starfabric.astral.seer.validate import read_rows, row_model, row_setup, validate_all

CSV = DATA / "a100_scale_runs.csv"
ROWS = read_rows(CSV)
IDS = [r["row_id"] for r in ROWS]
G175 = [r for r in ROWS if "-175B-" in r["row_id"]]
G5 = [r for r in ROWS if "-5B-" in r["row_id"]]

TABLE_175B_COMMIT = "d4317dddae7f"
"""NeMo-Framework-Launcher commit that first printed the 175B table (2022-07-14)."""
TABLE_5B_COMMIT = "b20f85d4d685"
"""NeMo-Framework-Launcher commit that first printed the 5B table (2022-06-03)."""

SPEEDUP_175B = {16: 1.0, 32: 1.84, 128: 6.85}
"""'Speed-up' row the README prints under the 175B table (nodes -> x), @d4317ddd."""
SPEEDUP_5B = {1: 1.0, 2: 2.0, 5: 4.93, 9: 8.71, 10: 9.7, 18: 16.95, 20: 18.51}
"""'Speed-up' row the README prints under the 5B table (nodes -> x), @b20f85d4."""

ACCURACY_5B_TOKENS_S = 726_384
"""The README's 5B 'Training Accuracy Results' row: 160 GPUs, GBS 1440, seq 2048, tokens/s."""

CONFIG_175B_TOKENS = 75_000 * 2048 * 2048
"""175b.yaml @64ae8d57 (2022-08-29): max_steps x global batch x sequence (315B tokens; the
22.06 config's 100,000 x 1,536 x 2,048 is the same count)."""
CONFIG_175B_LIMIT_DAYS = 26.0
"""175b.yaml @64ae8d57 time_limit '26-00:00:00'."""
TABLE_B_128_NODES_TOKENS_S = 109_684
"""The later 175B table's 128-node figure (README @3579cdb3, 2022-09-07): not a row (.md)."""


def _nodes(row: dict[str, str]) -> int:
    return int(row["num_gpus"]) // int(row["gpus_per_node"])


def test_header_is_development_set_2s() -> None:
    check_header_is_development_set_2s(CSV)


def test_rows_are_the_two_tables_once_each() -> None:
    assert len(set(IDS)) == len(IDS) == 10
    assert {_nodes(r) for r in G175} == set(SPEEDUP_175B)
    assert {_nodes(r) for r in G5} == set(SPEEDUP_5B)
    assert {r["source_id"] for r in ROWS} == {"NEMO_LAUNCHER_2206"}


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_cites_its_table_and_config_at_one_commit(row: dict[str, str]) -> None:
    commit = TABLE_175B_COMMIT if row in G175 else TABLE_5B_COMMIT
    size = "175b" if row in G175 else "5b"
    cite = row["citation"]
    assert f"NeMo-Framework-Launcher @{commit} README.md" in cite
    assert f"conf/training/gpt3/{size}.yaml @{commit}" in cite
    assert row["verification"].startswith("VERIFIED_PRIMARY")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_step_time_is_the_token_rate_arithmetic(row: dict[str, str]) -> None:
    """step = global batch x sequence / tokens/s; tokens/s/GPU = tokens/s / GPUs."""
    gbs, seq, tps = (int(row[k]) for k in ("global_batch_seqs", "seq_len", "value_primary"))
    assert int(row["tokens_per_batch"]) == gbs * seq
    assert float(row["derived_iter_time_s"]) == pytest.approx(gbs * seq / tps, abs=6e-5)
    per_gpu = tps / int(row["num_gpus"])
    assert float(row["derived_tokens_per_sec_per_gpu"]) == pytest.approx(per_gpu, abs=0.006)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_layout_multiplies_out(row: dict[str, str]) -> None:
    """TP x PP x DP = GPUs, and the global batch splits into whole micro-batches per replica."""
    tp, pp, dp, gpus, mb, gbs = (
        int(row[k]) for k in ("tp", "pp", "dp", "num_gpus", "micro_batch", "global_batch_seqs")
    )
    assert tp * pp * dp == gpus
    assert gbs % (dp * mb) == 0
    want = (8, 8, 2, 1536) if row in G175 else (2, 1, 2, 1440)
    assert (tp, pp, mb, gbs) == want


def test_speedups_are_the_ones_the_readme_prints() -> None:
    """Each table's printed 'Speed-up' (rounded to 2 decimals) is its tokens/s over the first
    column's: a mistyped rate fails here."""
    for rows, printed in ((G175, SPEEDUP_175B), (G5, SPEEDUP_5B)):
        by_nodes = {_nodes(r): int(r["value_primary"]) for r in rows}
        first = by_nodes[min(by_nodes)]
        for nodes, x in printed.items():
            assert round(by_nodes[nodes] / first, 2) == pytest.approx(x, abs=1e-9), nodes


def test_5b_table_agrees_with_the_readme_s_accuracy_row() -> None:
    """160 GPUs at GBS 1440: the accuracy table's 726,384 tokens/s is within 1% of the
    performance table's 20-node figure, and its '4.8 days' is 300B tokens at that rate."""
    (row,) = [r for r in G5 if int(r["num_gpus"]) == 160]
    assert int(row["global_batch_seqs"]) == 1440
    assert abs(int(row["value_primary"]) / ACCURACY_5B_TOKENS_S - 1) < 0.01
    assert round(300e9 / ACCURACY_5B_TOKENS_S / 86400, 1) == 4.8


def test_rule_2_keeps_the_table_the_config_s_time_limit_agrees_with() -> None:
    """The config's 315B tokens at the kept table's 128-node rate fit its 26-day limit (25.8
    days; the README text says 'about 27'); at the later table's rate they take 33.2 days."""
    (row,) = [r for r in G175 if _nodes(r) == 128]
    kept = CONFIG_175B_TOKENS / int(row["value_primary"]) / 86400
    dropped = CONFIG_175B_TOKENS / TABLE_B_128_NODES_TOKENS_S / 86400
    assert kept < CONFIG_175B_LIMIT_DAYS < dropped
    assert (round(kept, 1), round(dropped, 1)) == (25.8, 33.2)


def test_shapes_are_the_configs_and_their_names() -> None:
    """GPT-3 175B and 5B: 12 L h^2 + embeddings round to the configs' names; the vocab is the
    GPT-2 BPE padded to 128 x TP."""
    for rows, billions, tp in ((G175, 175, 8), (G5, 5, 2)):
        for r in rows:
            layers, h, vocab, seq = (int(r[k]) for k in ("layers", "hidden", "vocab", "seq_len"))
            assert int(r["ffn_hidden"]) == 4 * h and int(r["heads"]) * 128 == h
            assert vocab == -(-50257 // (128 * tp)) * (128 * tp)
            params = layers * (12 * h * h + 13 * h) + (vocab + seq) * h
            assert round(params / 1e9) == billions


@pytest.mark.parametrize("row", G175, ids=[r["row_id"] for r in G175])
def test_seer_reads_175b_as_2022_nemo_megatron(row: dict[str, str]) -> None:
    """PP 8 without interleaving, SP, selective recompute of core attention; a 2022 stack:
    unfused attention, DP all-reduce after the backward pass, and no userbuffers TP overlap to
    try (the launcher's configs first set it in 2023-06)."""
    st = row_setup(row)
    ex = st.execution
    assert (ex["tp"], ex["pp"], ex["sp"], ex["zero"]) == (8, 8, True, 0)
    assert ex["attention"] == "unfused" and not ex["overlap_grad_reduce"]
    assert ex["tp_comm_overlap"] is False
    assert all("tp_comm_overlap" not in o for _, o in st.options)
    assert all(o["recompute"] == ["selective"] and o["vpp"] == [1] for _, o in st.options)
    assert st.system["nic_bandwidth"] == "200G"
    model = row_model(row)
    assert model.tied_embeddings and model.learned_pos_emb and model.linear_bias


def test_seer_reads_the_5b_control_without_recompute_or_pipeline() -> None:
    for row in G5:
        st = row_setup(row)
        assert (st.execution["tp"], st.execution["pp"], st.execution["sp"]) == (2, 1, False)
        assert all(o["recompute"] == ["none"] for _, o in st.options)


def test_seer_reads_every_row() -> None:
    results, failed = validate_all(CSV)
    assert failed == []
    assert sorted(r.row_id for r in results) == sorted(IDS)
