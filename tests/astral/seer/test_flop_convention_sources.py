"""Which FLOP formula each long-context source's published figure counts (issue 32, session 19).

Pinned from the sources themselves (development_runs_2.md, "FLOP conventions re-checked"):
- MoE Parallel Folding (arXiv 2504.14960) states no formula and no Megatron-LM commit: its rows keep
  the full-attention count Megatron-LM printed before 8873b55 (2025-03-06).
- The Model Zoo Qwen3 long-context command passes `--recompute-modules layernorm moe` (Megatron-LM
  3b141a2471, 2025-04-05, a descendant of 8873b55): the causal count.
- TorchTitan's 2024-12 tables give TPS/GPU only ("We do not report Model FLOPS Utilization"): no
  formula enters the published time.
"""

from pathlib import Path

import pytest

from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.ops import megatron_model_flops
from starfabric.astral.seer.validate import (
    _convention,
    global_batch_seqs,
    published_iteration_s,
    read_rows,
    row_model,
)

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in read_rows(DEV2)}


def _megatron_flops_8873b55_parent(m: ModelSpec, batch: int, seq: int) -> float:
    """Megatron-LM `num_floating_point_operations` as written at 8873b55^ (full attention; MoE
    MLP = moe_ffn_hidden x top-k x 3/2 for SwiGLU, no capacity factor), transcribed term by term
    with the model's fields in place of Megatron's args, for a model whose every layer is MoE."""
    qproj = m.head_dim * m.heads / m.hidden
    return (
        12 * batch * seq * m.layers * m.hidden * m.hidden
        * (
            (1 + m.kv_heads / m.heads + seq / m.hidden) * qproj
            + (m.moe_ffn_hidden / m.hidden) * m.moe_topk * 1.5
            + m.vocab / (2 * m.layers * m.hidden)
        )
    )  # fmt: skip


def test_moe_parallel_folding_rows_convert_with_megatrons_full_attention_count(rows) -> None:
    """All 34 MOEFOLD25 rows read `megatron`; the 128K row's published time is its MFU x 989.5
    turned back with the pre-8873b55 formula (top-k experts, capacity not counted)."""
    mpf = [r for r in rows.values() if r["source_id"] == "MOEFOLD25"]
    assert len(mpf) == 34
    assert {_convention(r) for r in mpf} == {"megatron"}
    row = rows["MPF-T5-04"]  # Mixtral-8x22B, 131072 tokens, 1024 GPUs, MFU 38.2%
    m = row_model(row)
    assert m.is_moe and m.moe_layers == m.layers and m.activation == "swiglu"
    seq, batch, gpus = int(row["seq_len"]), global_batch_seqs(row), int(row["num_gpus"])
    flops = _megatron_flops_8873b55_parent(m, batch, seq)
    assert megatron_model_flops(m, batch * seq, seq) == pytest.approx(flops, rel=1e-12)
    expect = flops / (float(row["tflops_per_gpu"]) * 1e12 * gpus)
    assert published_iteration_s(row, m) == pytest.approx(expect, rel=1e-9)


def test_at_128k_the_attention_term_is_most_of_mixtral_8x22bs_count(rows) -> None:
    """Why the question matters: at 131072 tokens the s x s term is ~70% of the full count, so the
    causal reading would shorten the published time by ~35%."""
    row = rows["MPF-T5-04"]
    m = row_model(row)
    seq = int(row["seq_len"])
    full = megatron_model_flops(m, float(seq), seq)
    causal = megatron_model_flops(m, float(seq), seq, causal=True)
    assert 2 * (full - causal) / full == pytest.approx(0.70, abs=0.02)
    assert causal / full == pytest.approx(0.65, abs=0.02)


@pytest.mark.parametrize("row_id", [f"MZQ3-LC{i}{k}" for i in range(1, 5) for k in "FD"])
def test_model_zoo_long_context_cells_name_the_causal_formula_by_the_commands_flags(
    rows, row_id: str
) -> None:
    row = rows[row_id]
    cell = row["tflops_flop_convention"]
    assert "--recompute-modules layernorm moe" in cell and "3b141a2" in cell
    assert ("--moe-router-force-load-balancing" in cell) == row_id.endswith("F")
    assert _convention(row) == "megatron_causal"


@pytest.mark.parametrize("row_id", ["MZQ3-GB1", "MZQ3-GB2", "MZQ3-GBX1", "MZQ3-GBX2", "MZQ3-GBX3"])
def test_model_zoo_hybridep_rows_convert_with_the_causal_formula(rows, row_id: str) -> None:
    row = rows[row_id]
    assert "3df2009" in row["tflops_flop_convention"]
    assert _convention(row) == "megatron_causal"


@pytest.mark.parametrize("row_id", [f"TT24-T2-0{i}" for i in range(1, 5)])
def test_torchtitan_cp_rows_read_tokens_per_second_whatever_the_convention_cell(
    rows, row_id: str
) -> None:
    """TPS counts one DP rank's full-sequence tokens over the CP x TP x PP ranks that share them
    (train.py @9dec370): time = global tokens / (TPS x GPUs), with no FLOP formula in it."""
    row = rows[row_id]
    m = row_model(row)
    tokens = global_batch_seqs(row) * int(row["seq_len"])
    expect = tokens / (float(row["tokens_per_sec_per_gpu"]) * int(row["num_gpus"]))
    for cell in (row["tflops_flop_convention"], "Megatron-LM formula, causal attention", ""):
        assert published_iteration_s(dict(row, tflops_flop_convention=cell), m) == pytest.approx(
            expect, rel=1e-3
        )
