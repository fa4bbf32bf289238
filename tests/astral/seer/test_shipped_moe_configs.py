"""Megatron-Bridge's shipped MoE performance configurations against Seer's memory model.

tests/data/shipped_configs/megatron_bridge_moe_perf.csv (provenance in its .md: Megatron-Bridge
v0.5.0, fcbb603, scripts/performance/configs) lists 99 configurations NVIDIA ran — DeepSeek-V3,
Qwen3-235B-A22B and Qwen3-30B-A3B on H100, B200, B300, GB200 and GB300 — each with its stated
recompute. A run that ran fits: Seer must find every one within HBM with that recompute, and
with the recompute left open (UNVERIFIED, as a row that does not state it) it must never
conclude memory is short nor fall back to full recompute, which is what would make held-out
Megatron MoE rows too slow (issue 32).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from starfabric.astral.seer.shipped_configs import ShippedCheck, answer, check
from starfabric.astral.seer.validate import fastest_fitting, read_rows, row_setup

CSV = Path(__file__).parents[2] / "data" / "shipped_configs" / "megatron_bridge_moe_perf.csv"
ROWS = read_rows(CSV)


@functools.cache
def _checks() -> dict[str, ShippedCheck]:
    return {r["row_id"]: check(r) for r in ROWS}


def test_the_file_holds_every_shipped_moe_configuration() -> None:
    # v0.5.0's __all__ lists (VR200 and Qwen3-Next left out, see the .md).
    models = [r["model"] for r in ROWS]
    assert (models.count("DeepSeek-V3"), models.count("Qwen3-235B-A22B")) == (44, 41)
    assert models.count("Qwen3-30B-A3B") == 14
    for r in ROWS:
        gpus = int(r["num_gpus"])
        tp, pp, cp, dp = (int(r[k]) for k in ("tp", "pp", "cp", "dp"))
        assert tp * pp * cp * dp == gpus, r["row_id"]
        assert (dp * tp * cp) % int(r["ep"]) == 0, r["row_id"]  # EP inside DP x TP x CP


def test_a_transcribed_configuration_reads_as_the_source_states_it() -> None:
    # deepseek_workload_base_configs.py DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1: 1,024 GPUs, TP2
    # PP8 VPP4 EP64, GBS 8192, recompute mla_up_proj + mlp, layout Et|(tt|)*30mL.
    row = next(r for r in ROWS if r["row_id"] == "MBPERF-DSV3-H100-BF16-V1")
    st = row_setup(row)
    ex = st.execution
    assert (ex["tp"], ex["pp"], ex["ep"], st.system["gpus"]) == (2, 8, 64, 1024)
    assert ex["global_batch"] == 8192 and st.model.mtp_layers == 1
    assert ex["pipeline_layers"] == [1] + [2] * 30 + [0]
    opts = st.options[0][1]
    assert opts["vpp"] == [4] and opts["recompute_modules"] == [("mla_up_proj", "mlp")]
    assert opts["optimizer_moments"] == ["bf16"] and opts["moe_dispatcher"] == ["deepep"]


def test_every_deepseek_row_states_a_layer_split_seer_reads() -> None:
    for r in ROWS:
        if r["model"] == "DeepSeek-V3":
            split = row_setup(r).execution["pipeline_layers"]
            assert sum(split) == 61 and len(split) == int(r["pp"]) * int(r["vpp"]), r["row_id"]


def test_every_shipped_configuration_fits_with_its_stated_recompute() -> None:
    short = {
        k: f"{c.stated.peak_gib:.1f} of {c.stated.capacity_gib:.0f} GiB"
        for k, c in _checks().items()
        if not c.stated.fits
    }
    assert not short


def test_with_recompute_open_seer_never_finds_memory_short_nor_picks_full() -> None:
    bad = {
        k: (c.open.recompute, c.open.fits)
        for k, c in _checks().items()
        if not c.open.fits or c.open.recompute == "full"
    }
    assert not bad


def test_seer_chooses_no_more_recompute_than_the_configuration_states() -> None:
    # Its choice is at least as fast as the stated recompute, never slower by more than
    # rounding between recompute sets of about the same cost (measured: -1.7% .. +0.7%).
    for k, c in _checks().items():
        assert c.open_vs_stated < 0.01, k


def test_the_check_finds_an_oversized_configuration_short() -> None:
    # Not vacuous: the DeepSeek-V3 H100 layout at 8 sequences per micro-batch without
    # recompute holds about eight times the activations and does not fit in 80 GB.
    row = next(r for r in ROWS if r["row_id"] == "MBPERF-DSV3-H100-BF16-V1")
    big = {**row, "micro_batch": "8", "recompute": "none"}
    got = answer(big)
    assert not got.fits and got.peak_gib > got.capacity_gib


def test_deepseek_rows_without_their_split_run_the_recipe_layout() -> None:
    # A row that names Megatron-Bridge but not the split (as a results table would be
    # transcribed) gets the recipe's (PP, VPP) map, which is what the performance scripts ran
    # wherever the workload names no other layout (bridge_layout); before bridge_layout, Seer
    # split 61 layers Llama-3 style and its last stage carried 3 layers + MTP + the loss.
    for r in ROWS:
        if r["model"] != "DeepSeek-V3" or "recipe map" not in r["pp_layout"]:
            continue
        stated = row_setup(r).execution["pipeline_layers"]
        best, _, _ = fastest_fitting({**r, "notes": ""})
        assert best is not None and best[3]["pipeline_layers"] == stated, r["row_id"]


def test_the_script_refuses_a_csv_without_rows_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A header-only CSV: exit 2 and one line naming the file (a traceback from min() before)."""
    from astral.seer.load_script import load_script

    empty = tmp_path / "empty.csv"
    empty.write_text(CSV.read_text().splitlines()[0] + "\n")
    assert load_script("seer_shipped_configs").main(["--csv", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty.csv: a header and no rows" in err[0]
