"""The cudnn-frontend Llama-3.2-1B benchmark's cuDNN rows ran cuDNN 9.9.0 (its README and the
B200 log's `cudnn 90900`; tests/data/attention/cudnn_llama1b_training.csv), so Seer's rate for
them is its curve at cuDNN 9.9 (seer/cudnn_release.py on Hopper), the same rate `seer predict`
gives a job that states cuDNN 9.9: attention_in_training and make_context must agree (session
18 merged the two mechanisms separately; the benchmark side compared 9.9 with the 9.1 curve)."""

from pathlib import Path

import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.attention_in_training import (
    BENCHMARK_CUDNN,
    LLAMA_3_2_1B,
    PEAK_CLOCK_MHZ,
    PairRate,
    attention_flops,
    equal_token_pairs,
    implied_in_training_factor,
    read_timings,
    seer_pair_rate,
)
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.cudnn_release import hopper_multiplier
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import make_job

DATA = Path(__file__).parents[2] / "data" / "attention" / "cudnn_llama1b_training.csv"
PAIRS = list(equal_token_pairs(read_timings(DATA)))


def _ctx_rates(gpu: str, kernel: str, release: str | None) -> tuple[float, float]:
    ex = {"global_batch": 8, "micro_batch": 1, "seq_len": 4096, "flash_kernel": kernel,
          "cudnn_release": release}  # fmt: skip
    job = make_job(LLAMA_3_2_1B, ex, {"gpu": gpu, "gpus": 8})
    lay = resolve_layout(job.model, job.execution, job.system)
    ctx = make_context(job.execution, lay, efficiency_for(lay.gpu))
    return ctx.flash_rate, ctx.flash_rate_bwd


def test_benchmark_release_is_the_one_the_data_states() -> None:
    assert BENCHMARK_CUDNN == "9.9"
    assert "cuDNN 9.9.0" in DATA.read_text() and "cudnn 90900" in DATA.read_text()


@pytest.mark.parametrize(("gpu", "backend"), [
    ("H200", "CUDNN_ATTENTION"), ("H200", "FLASH_ATTENTION"),
    ("B200", "CUDNN_ATTENTION"), ("B200", "FLASH_ATTENTION"),
])  # fmt: skip
def test_pair_rate_is_predicts_rate_at_the_benchmarks_release(gpu: str, backend: str) -> None:
    """Seer's pair rate = its saturated rate with make_context's forward/backward kernel rates
    for a job at cuDNN 9.9 (FA2 rows: the release does not apply)."""
    kernel = "cudnn" if backend == "CUDNN_ATTENTION" else "fa2"
    fwd, bwd = _ctx_rates(gpu, kernel, BENCHMARK_CUDNN)
    eff = efficiency_for(get_gpu(gpu))
    clock = 1500.0
    peak = get_gpu(gpu).tflops("bf16") * clock / PEAK_CLOCK_MHZ[gpu]
    sat = peak * 3.5 / (1 / (eff.flash_fwd_fraction * fwd) + 2.5 / (eff.flash_bwd_fraction * bwd))
    pair = PairRate(gpu, backend, (1, 16384), (2, 8192), 1.0,
                    attention_flops(1, 16384) - attention_flops(2, 8192))  # fmt: skip
    assert seer_pair_rate(pair, clock) == pytest.approx(sat, rel=1e-9)


def test_hopper_cudnn_rows_move_by_the_release_blackwell_and_fa2_do_not() -> None:
    m = hopper_multiplier((9, 9))
    assert m[0] > 1.1 and m[1] > 1.03
    assert _ctx_rates("H200", "cudnn", "9.9") == pytest.approx(m)
    assert _ctx_rates("B200", "cudnn", "9.9") == (1.0, 1.0)
    assert _ctx_rates("H200", "fa2", "9.9") == _ctx_rates("H200", "fa2", None)


def test_implied_factor_on_h200_is_against_the_9_9_curve() -> None:
    """Against Seer's curve at cuDNN 9.9 (not 9.1) the H200 run implies ~0.95 (was 1.01)."""
    got = implied_in_training_factor(PAIRS, "H200", 1500.0)
    assert got == pytest.approx(0.95, abs=0.02)
    assert implied_in_training_factor(PAIRS, "B200", 1665.0) == pytest.approx(0.51, abs=0.03)
