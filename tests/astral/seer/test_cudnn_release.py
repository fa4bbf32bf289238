"""cuDNN fused attention by release (seer/cudnn_release.py) against its sources: NVIDIA
cudnn-frontend's Hopper SDPA training benchmarks at cuDNN 9.1.0 / 9.4.0 / 9.19.1
(tests/data/attention/cudnn_training_hopper.csv) and the NeMo container -> cuDNN table of
NVIDIA-NeMo/Megatron-Bridge docs/releases/software-versions.md."""

import csv
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.cudnn_release import (
    BLACKWELL_RELEASE_SPREAD,
    MEASURED_HOPPER,
    NEMO_CONTAINER_CUDNN,
    RATIO_SPREAD,
    container_release,
    hopper_multiplier,
    rate_multiplier,
    row_release,
    stated_release,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.validate import _cudnn_release
from starfabric.cli import app

DATA = Path(__file__).parents[2] / "data" / "attention" / "cudnn_training_hopper.csv"
BLACKWELL = DATA.with_name("cudnn_training_blackwell.csv")
SHARED = (4096, 8192, 16384, 32768)
"""Sequence lengths every transcribed release measured (causal)."""


def _causal(version: str) -> dict[int, tuple[float, float]]:
    with DATA.open() as f:
        rows = list(csv.DictReader(x for x in f if not x.startswith("#")))
    return {
        int(r["seq"]): (float(r["fwd_tflops"]), float(r["bwd_tflops"]))
        for r in rows
        if r["cudnn"] == version and r["mask"] == "causal"
    }


@pytest.mark.parametrize(("version", "release"), [("9.4.0", (9, 4)), ("9.19.1", (9, 19))])
def test_multiplier_reproduces_each_benchmark_ratio(version: str, release: tuple[int, int]) -> None:
    """Every per-length forward and backward ratio over 9.1.0 lies within RATIO_SPREAD of the
    release's multiplier, and the multiplier is their geometric mean (recomputed here)."""
    base, new = _causal("9.1.0"), _causal(version)
    fwd_m, bwd_m = hopper_multiplier(release)
    for d, m in ((0, fwd_m), (1, bwd_m)):
        ratios = [new[s][d] / base[s][d] for s in SHARED]
        assert all(abs(r / m - 1.0) <= RATIO_SPREAD for r in ratios), (version, d, ratios)
        gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        assert m == pytest.approx(gmean, abs=6e-4)


def test_9_4_speeds_the_forward_not_the_backward() -> None:
    """cuDNN 9.4 on the same script: forward +10-13%, backward within 2% of 9.1."""
    fwd, bwd = hopper_multiplier((9, 4))
    assert 1.10 < fwd < 1.14 and abs(bwd - 1.0) < 0.02


@pytest.mark.parametrize("release", [None, (8, 9), (9, 0), (9, 1)])
def test_unknown_and_older_releases_keep_the_curve(release: tuple[int, int] | None) -> None:
    assert hopper_multiplier(release) == (1.0, 1.0)


@given(st.integers(min_value=2, max_value=40))
def test_interpolated_only_between_measured_and_held_after(minor: int) -> None:
    """Between two measured releases the multiplier lies between theirs; after the last it
    is the last one's."""
    fwd, bwd = hopper_multiplier((9, minor))
    known = sorted(MEASURED_HOPPER)
    if (9, minor) >= known[-1]:
        assert (fwd, bwd) == MEASURED_HOPPER[known[-1]]
        return
    lo = max(r for r in known if r <= (9, minor))
    hi = min(r for r in known if r >= (9, minor))
    for d, v in ((0, fwd), (1, bwd)):
        a, b = MEASURED_HOPPER[lo][d], MEASURED_HOPPER[hi][d]
        assert min(a, b) - 1e-12 <= v <= max(a, b) + 1e-12


def test_only_cudnn_on_hopper_moves() -> None:
    assert rate_multiplier("9.19.1", "fa2", True) == (1.0, 1.0)
    assert rate_multiplier("9.19.1", "cudnn", False) == (1.0, 1.0)
    assert rate_multiplier(None, "cudnn", True) == (1.0, 1.0)
    assert rate_multiplier("9.19.1", "cudnn", True) == MEASURED_HOPPER[(9, 19)]


@pytest.mark.parametrize(
    ("tag", "want"),
    [("25.09", (9, 11)), ("25.11", (9, 13)), ("26.02", (9, 18)), ("26.04", (9, 20))],
)
def test_container_table_is_megatron_bridge_software_versions(
    tag: str, want: tuple[int, int]
) -> None:
    """Megatron-Bridge docs/releases/software-versions.md: 25.09 cuDNN 9.11.0.98, 25.11
    9.13.1.26, 26.02 9.18.0.50, 26.04 9.20.0.48-1."""
    yy, mm = (int(x) for x in tag.split("."))
    assert NEMO_CONTAINER_CUDNN[(yy, mm)] == want
    assert container_release(f"NeMo {tag} container") == (tag, want)
    assert container_release(f"nvcr.io/nvidia/nemo:{tag}") == (tag, want)


def test_row_release_reads_what_a_cell_states() -> None:
    aws = "Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1 (NeMo 26.04.01 image), MoE dispatcher"
    assert row_release(aws)[0] == (9, 20)
    # The cuDNN a cell names wins over its container.
    assert row_release("NeMo 26.04 container; cuDNN 9.4.0")[0] == (9, 4)
    assert stated_release("Transformer Engine 2.3+, cuDNN 9.11 MLA kernels") == (9, 11)
    # A container outside the table, NeMo's own 2.x version, a date: no release.
    rel, how = row_release("NeMo 24.07 container (NeMo 1.x/Megatron-Core)")
    assert rel is None and "24.07" in how and "not in the sourced table" in how
    assert row_release("NeMo 2.5.0, Megatron-Core (2025-09)")[0] is None
    assert row_release("Megatron-Core (2025; DeepEP)") == (
        None,
        "unknown (not stated): Seer's cuDNN 9.1 curve",
    )


def test_a_row_stating_a_2025_container_gets_its_release() -> None:
    """The validate reader sets the execution's release from a NeMo 25.09 container (cuDNN
    9.11) and says where it came from; an FA2 row gets none."""
    row = {"framework": "NeMo 25.09 container, Megatron-Core 0.14", "notes": ""}
    ex: dict[str, object] = {"attention": "flash", "flash_kernel": "cudnn"}
    read: dict[str, object] = {}
    _cudnn_release(row, ex, read)
    assert ex["cudnn_release"] == "9.11"
    assert read["cudnn_release"] == "9.11 (NeMo 25.09 container)"
    fa2: dict[str, object] = {"attention": "flash", "flash_kernel": "fa2"}
    _cudnn_release(row, fa2, read := {})
    assert "cudnn_release" not in fa2 and not read


@pytest.mark.parametrize(("gpu", "kernel", "moves"), [
    ("H100", "cudnn", True), ("H100", "fa2", False), ("GB200", "cudnn", False),
])  # fmt: skip
def test_make_context_scales_the_fused_attention_rate(gpu: str, kernel: str, moves: bool) -> None:
    job = {"global_batch": 8, "seq_len": 8192, "tp": 1, "pp": 1, "flash_kernel": kernel}
    rates = []
    for release in (None, "9.19.1"):
        p = predict(
            make_job("llama-3.1-8b", {**job, "cudnn_release": release}, {"gpu": gpu, "gpus": 8})
        )
        ctx = make_context(p.job.execution, p.layout, efficiency_for(p.layout.gpu, {}))
        rates.append((ctx.flash_rate, ctx.flash_rate_bwd))
    want = MEASURED_HOPPER[(9, 19)] if moves else (1.0, 1.0)
    assert rates[1][0] / rates[0][0] == pytest.approx(want[0])
    assert rates[1][1] / rates[0][1] == pytest.approx(want[1])


def test_predict_cudnn_option_is_refused_in_one_line() -> None:
    job = Path(__file__).parents[3] / "examples" / "jobs" / "llama31_70b_dense.yaml"
    res = CliRunner().invoke(app, ["astral", "seer", "predict", str(job), "--cudnn", "nine"])
    assert res.exit_code == 2
    assert "--cudnn 'nine'" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    ("gpu", "old", "new"),
    [("B200", "9.10.2", "9.13.1"), ("GB200", "9.18.1", "9.19.1"), ("GB300", "9.18.1", "9.19.1")],
)
def test_blackwell_releases_move_attention_less_than_the_spread(
    gpu: str, old: str, new: str
) -> None:
    """Why Blackwell keeps 1.0: each paired release step changes forward and backward by under
    BLACKWELL_RELEASE_SPREAD at every length (and by more than nothing: the data are not a copy)."""
    with BLACKWELL.open() as f:
        rows = [r for r in csv.DictReader(x for x in f if not x.startswith("#")) if r["gpu"] == gpu]
    by = {(r["cudnn"], int(r["seq"])): r for r in rows}
    moved = 0.0
    for s in SHARED:
        for col in ("fwd_tflops", "bwd_tflops"):
            r = float(by[(new, s)][col]) / float(by[(old, s)][col])
            assert abs(r - 1.0) < BLACKWELL_RELEASE_SPREAD, (gpu, s, col, r)
            moved = max(moved, abs(r - 1.0))
    assert moved > 0.005
    assert rate_multiplier(new, "cudnn", False) == (1.0, 1.0)
