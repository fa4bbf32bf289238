"""AWS's own sharded-data-parallel runs on p4d / p5 (tests/data/published_runs/smp_p4d_runs.csv,
session 21f): the transcription against the logs' own numbers, how Seer reads every row, and
the Hugging Face eager-attention reading (validate.EAGER_ATTENTION) the p4d row needs."""

import csv
import re
import statistics
from pathlib import Path

import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.cells import zero_shard_ranks
from starfabric.astral.seer.comm import collective_time, make_fabric
from starfabric.astral.seer.efa import EFA_P4D_BUS_FRACTION
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fabric import Group
from starfabric.astral.seer.validate import (
    _framework,
    _gpu,
    _nic,
    read_rows,
    validate_all,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"
CSV = DATA / "smp_p4d_runs.csv"
ROWS = read_rows(CSV)
LOGGED = [r for r in ROWS if r["unit_primary"] == "samples/s"]  # the FSDP test case's logs


def _num(raw: str) -> float:
    return float(raw.replace(",", ""))


def test_header_is_development_set_2s() -> None:
    with (DATA / "development_runs_2.csv").open(newline="") as fh:
        want = next(csv.reader(fh))
    with CSV.open(newline="") as fh:
        assert next(csv.reader(fh)) == want


@pytest.mark.parametrize("row", LOGGED, ids=[r["row_id"] for r in LOGGED])
def test_figure_is_the_median_of_the_logged_steps(row: dict[str, str]) -> None:
    """value = median of the samples/s listed in derivation_note; the step time and tokens/s
    are that figure's arithmetic (samples per step = micro-batch x GPUs, 4096 tokens each)."""
    listed = re.search(r"\(([\d., ]+)[;)]", row["derivation_note"])
    assert listed is not None
    steps = [float(x) for x in listed.group(1).split(",")]
    value = _num(row["value_primary"])
    assert value == pytest.approx(statistics.median(steps), abs=0.005)
    gpus, mb, seq = (int(row[k]) for k in ("num_gpus", "micro_batch", "seq_len"))
    assert int(row["global_batch_seqs"]) == mb * gpus
    assert int(row["tokens_per_batch"]) == mb * gpus * seq
    assert _num(row["derived_iter_time_s"]) == pytest.approx(mb * gpus / value, abs=0.001)
    assert _num(row["derived_tokens_per_sec_per_gpu"]) == pytest.approx(value * seq / gpus, abs=0.1)


@pytest.mark.parametrize("row", LOGGED, ids=[r["row_id"] for r in LOGGED])
def test_shape_reproduces_the_logged_parameter_count(row: dict[str, str]) -> None:
    """Llama / Mistral decoder with untied embeddings: the count the log printed ('Created
    model with total parameters: N', quoted in model_notes) follows from the row's cells."""
    logged = int(re.search(r"parameters: (\d+)", row["model_notes"]).group(1))  # type: ignore[union-attr]
    lay, h, f, heads, kv, hd, vocab = (
        int(row[k])
        for k in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab")
    )
    attn = h * heads * hd * 2 + h * kv * hd * 2  # q, o and k, v
    per_layer = attn + 3 * h * f + 2 * h  # SwiGLU MLP, two RMSNorms
    assert lay * per_layer + h + 2 * vocab * h == logged


def test_torchtitan_row_is_its_log_line() -> None:
    """AWSTT-P5-01: torchtitan logs tokens/s per GPU; one step is local batch 1 x 8192."""
    (row,) = [r for r in ROWS if r["row_id"] == "AWSTT-P5-01"]
    tps = _num(row["value_primary"])
    assert _num(row["tokens_per_sec_per_gpu"]) == tps == 6785
    assert _num(row["derived_iter_time_s"]) == pytest.approx(8192 / tps, abs=0.001)
    assert int(row["tokens_per_batch"]) == 32 * 8192


def test_seer_reads_and_predicts_every_row() -> None:
    done, failed = validate_all(CSV)
    assert failed == []
    assert sorted(r.row_id for r in done) == sorted(r["row_id"] for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["row_id"] for r in ROWS])
def test_cells_are_read_as_the_logs_mean_them(row: dict[str, str]) -> None:
    """FULL_SHARD over every rank; p4d's 4 x 100 Gb/s EFA per 8 GPUs (50 Gb/s per GPU) at the
    first-generation EFA fraction; p5's 32 x 100 Gb/s (400 Gb/s per GPU); 40 GB A100 on p4d."""
    gpus = int(row["num_gpus"])
    assert zero_shard_ranks(row["zero_or_fsdp"], 8) == gpus
    gpu, hbm = _gpu(row)
    if "A100" in row["gpu"]:
        assert (gpu.startswith("A100"), hbm, _nic(row, gpu)) == (True, 40.0, "50G")
    else:
        assert (gpu.startswith("H100"), _nic(row, gpu)) == (True, "400G")


def test_p4d_row_reads_efa_fraction_and_eager_attention() -> None:
    done, _ = validate_all(CSV)
    by_id = {r.row_id: r for r in done}
    assert "efa.py" in str(by_id["AWSFSDP-P4D-01"].choices.get("nic_bus_fraction"))
    p4d = next(r for r in ROWS if r["row_id"] == "AWSFSDP-P4D-01")
    assert _framework(p4d)["attention"] == "unfused"
    for row in ROWS:
        if row["row_id"] != "AWSFSDP-P4D-01":  # transformers 4.50 / 4.52: SDPA
            assert _framework(row)["attention"] == "flash"


@pytest.mark.parametrize(
    ("stack", "attention"),
    [
        ("(eager attention: matmuls around a float32 softmax)", "unfused"),
        ("HF Trainer, attn_implementation='eager'", "unfused"),
        ("attn_implementation: eager", "unfused"),
        ("--attn_implementation eager", "unfused"),
        ("attention: eager", "unfused"),
        ("no eager attention (SDPA)", "flash"),  # negated
        ("eager attention off", "flash"),
        ("eager: no torch.compile", "flash"),  # PyTorch's execution mode, not attention
        ("FSDP (eager, BF16)", "flash"),
        ("attn_implementation='sdpa'", "flash"),
        ("eager attention, flash-attn 2", "flash"),  # a named flash kernel wins
    ],
)
def test_eager_attention_is_read_only_where_the_cell_names_it(stack: str, attention: str) -> None:
    """The p4d row's stack with only the attention words changed: validate's framework reader
    prices HF eager attention as unfused, and nothing else that says "eager"."""
    p4d = next(r for r in ROWS if r["row_id"] == "AWSFSDP-P4D-01")
    cell = "PyTorch FSDP (torch 2.0.1, FSDP1) + Hugging Face transformers 4.35 " + stack
    assert _framework({**p4d, "framework": cell})["attention"] == attention


def test_full_exposure_bound_of_the_p4d_fsdp_collectives() -> None:
    """The bound docs/astral.md quotes: FSDP FULL_SHARD of the 6.89B-parameter model over 4 p4d
    nodes moves two bf16 parameter all-gathers and one bf16 gradient reduce-scatter per step;
    at the nccl-tests p4d rate (EFA_P4D_BUS_FRACTION of 50 GB/s per node) they take 1.30 s
    together, even with none of it hidden under compute."""
    eff = efficiency_for(get_gpu("A100"), {"nic_bus_fraction": EFA_P4D_BUS_FRACTION})
    fab = make_fabric(300e9, 50e9 / 8, eff)
    grp = Group(32, 8)
    nbytes = 2.0 * 6_889_410_560
    total = 2 * collective_time("all_gather", nbytes, grp, fab)
    total += collective_time("reduce_scatter", nbytes, grp, fab)
    assert total == pytest.approx(
        3 * nbytes * 31 / 32 / (8 * 50e9 / 8 * EFA_P4D_BUS_FRACTION), rel=0.02
    )
    assert total == pytest.approx(1.30, abs=0.02)
