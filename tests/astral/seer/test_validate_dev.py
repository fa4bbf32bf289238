"""Seer on the 53 development runs (tests/data/published_runs/development_runs.csv): rows read
as a user reads them, refusals only for undefined runs, and the error per source."""

from pathlib import Path

import pytest

from starfabric.astral.seer import cells
from starfabric.astral.seer.validate import read_rows, summary, validate_all
from starfabric.errors import ConfigError

DEV = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs.csv"

MEAN_TARGET = 0.08
"""The issue's mean |error| target on the development rows (this revision: 6.9%)."""
MAX_TARGET = 0.20
"""The issue's max |error| target (this revision: 17.2%, a ZeRO-3 row of Narayanan Table 2)."""


@pytest.fixture(scope="module")
def dev():
    return validate_all(DEV)


def test_at_least_50_of_53_rows_predicted_and_refusals_name_why(dev) -> None:
    done, failed = dev
    assert len(read_rows(DEV)) == 53
    assert len(done) >= 50, failed
    for rid, why in failed:
        assert "undefined" in why, (rid, why)


def test_dev_rows_error_figures(dev) -> None:
    s = summary(*dev)
    assert s["mean_abs_error"] <= MEAN_TARGET
    assert s["max_abs_error"] <= MAX_TARGET
    # Every source with a readable row is reported on its own.
    assert set(s["per_source"]) >= {
        "NARAYANAN21_T2", "LLAMA3_T4", "MEGASCALE24_T2", "MEGASCALE24_F9", "DEEPSEEKV3_TR",
        "NEMO_2407_PERF", "OPT175B_PAPER",
    }  # fmt: skip
    assert sum(v["rows"] for v in s["per_source"].values()) == len(s["rows"])


def test_mechanism_rows_within_bounds(dev) -> None:
    """Sources whose mechanism this revision models: ZeRO-3 saturation, FP8 via TE, PTD-P."""
    per = summary(*dev)["per_source"]
    assert per["NARAYANAN21_T2"]["max_abs_error"] <= 0.20
    assert per["NEMO_2407_PERF"]["mean_abs_error"] <= 0.06
    assert per["NEMO_2407_PERF"]["max_abs_error"] <= 0.12
    # MTP + DualPipe + DeepEP's per-node deduplication and its 20 communication SMs (issue 32:
    # +2.3% at the end of issue 32, -9% midway; 1.8% before, with NCCL-style all-to-all).
    assert per["DEEPSEEKV3_TR"]["max_abs_error"] <= 0.10
    assert per["MEGASCALE24_T2"]["max_abs_error"] <= 0.20
    # Issue 32 calibrates fused attention on both development sets (long-context rows of
    # development_runs_2 want it slower): Llama 3's CP16 row at 128K went from +10.8% to +17.7%.
    assert per["LLAMA3_T4"]["max_abs_error"] <= 0.20


def test_zero3_time_saturates_with_gpus_at_fixed_batch(dev) -> None:
    done, _ = dev
    z3 = {r.row_id: r.predicted_iter_s for r in done if r.row_id in ("N21-T2-08", "N21-T2-09")}
    # 768 -> 1536 GPUs at the same batch: ZeRO-3's gathers do not shrink (Narayanan Table 2).
    assert z3["N21-T2-09"] > 0.8 * z3["N21-T2-08"]


def test_no_run_that_fit_is_called_out_of_memory(dev) -> None:
    done, _ = dev
    assert [r.row_id for r in done if "note" in r.choices] == []
    # Llama 3 405B ran TP8/PP16 interleaved without recompute at 8K: Seer finds that it fits
    # with 8 virtual stages, the first holding only the embedding, the last only the loss.
    l3 = next(r for r in done if r.row_id == "L3-T4-1")
    assert l3.choices["recompute"] == "none" and l3.choices["vpp"] == 8
    assert l3.choices["pipeline_layers"][0] == 0 and l3.choices["pipeline_layers"][-1] == 0
    assert not l3.prediction.memory.oom


def test_unverified_choices_are_printed(dev) -> None:
    done, _ = dev
    by = {r.row_id: r for r in done}
    assert by["DSV3-01"].choices["recompute_modules"] == ("layernorm", "mla_up_proj")
    assert "50000" in by["NEMO2407-01"].choices["vocab"]
    assert "tp" in by["OPT-01"].choices
    assert by["MS-T2-01"].prediction.layout.gpu.name.startswith("A100")


@pytest.mark.parametrize(
    ("text", "value"),
    [("~50K GPT-2 BPE UNVERIFIED", 50_000), ("128000 (paper Table 3; HF config 128256)", 128_000),
     ("128K (paper); 129280 HF config", 128_000), ("UNVERIFIED(1 in Table 5)", 1),
     ("18432 (3 dense layers)", 18_432), ("UNVERIFIED", None), ("", None)],
)  # fmt: skip
def test_numbers_read_from_free_text(text: str, value: float | None) -> None:
    assert cells.number(text) == value


def test_gpu_cells_match_by_name_family_and_memory() -> None:
    assert cells.match_gpu("NVIDIA Ampere (A100-class; MFU basis 312)")[0].name.startswith("A100")
    assert cells.match_gpu("NVIDIA Ampere")[0].name.startswith("A100")
    gpu, hbm = cells.match_gpu("A100-SXM4-40GB")
    assert gpu.name.startswith("A100") and hbm == 40.0
    assert cells.match_gpu("H100-SXM5-80GB HBM3 700W (Grand Teton)") == (
        cells.match_gpu("H100")[0],
        None,
    )
    with pytest.raises(ConfigError, match="unknown gpu"):
        cells.match_gpu("TPU v5p")


def test_flop_conventions_and_zero_stages_from_prose() -> None:
    assert cells.flop_convention("Narayanan Eq.3 (includes recompute)") == "narayanan"
    assert cells.flop_convention("MFU; rows reproduce with 72*B*s*l*h^2*(...)") == "megatron"
    assert cells.flop_convention("Meta 'model FLOPs' (formula not given)") == "model"
    assert cells.zero_stage("ZeRO-3 (DeepSpeed), no model parallelism", False) == 3
    assert cells.zero_stage("FSDP over DP: weights not resharded after fwd", False) == 2
    assert cells.zero_stage("ZeRO-1 DP", False) == 1
    assert cells.zero_stage("none", False) == 0
    assert cells.zero_stage("UNVERIFIED", False) is None


def test_mla_rows_without_a_bundled_config_are_read_from_their_notes() -> None:
    from starfabric.astral.seer import load_model, param_counts
    from starfabric.astral.seer.validate import row_model

    row = next(r for r in read_rows(DEV) if r["row_id"] == "DSV3-01")
    m = row_model(dict(row, model="DeepSeek-V3-style (no bundled config)"))
    ref = load_model("deepseek-v3")
    assert (m.kv_lora_rank, m.q_lora_rank, m.qk_rope_head_dim, m.moe_max_nodes) == (
        512,
        1536,
        64,
        4,
    )
    assert param_counts(m).total == pytest.approx(param_counts(ref).total, rel=0.002)


def test_a_blackwell_fp4_row_is_read_and_its_assumptions_printed() -> None:
    """A held-out-style row: GB200 NVL72 trays of 4, FP4 training, Megatron-Core framework."""
    from starfabric.astral.seer.validate import validate_row

    row = next(r for r in read_rows(DEV) if r["row_id"] == "NEMO2407-05")
    gb = dict(row, gpu="NVIDIA GB200 NVL72", gpus_per_node="4", precision="NVFP4 (TE)",
              framework="Megatron-LM (core r0.12, 2025)", interconnect="")  # fmt: skip
    res = validate_row(gb)
    assert res.prediction.layout.gpu.name == "GB200"
    assert res.choices["precision"].startswith("fp8")
    assert res.prediction.summary()["efficiency_basis"].startswith("estimate")
    assert res.prediction.job.execution.overlap_grad_reduce  # Megatron-Core overlaps by default
    h100 = validate_row(row)
    assert res.predicted_iter_s < h100.predicted_iter_s
