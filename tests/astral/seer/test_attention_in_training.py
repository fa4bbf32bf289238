"""Attention inside a training step, measured: cudnn-frontend's Llama-3.2-1B training benchmark
(commit 7606332; tests/data/attention/cudnn_llama1b_training.csv) gives each SDPA backend's
attention rate from its equal-token pairs (seer/attention_in_training.py). These tests check the
transcription, the FLOP count, the pair mechanism, and the FA2/cuDNN ratios Seer takes from it
(cost.FA2_ON_HOPPER checked, cost.FA2_ON_BLACKWELL set) against the benchmark's own numbers."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.attention_in_training import (
    LLAMA_3_2_1B,
    PEAK_CLOCK_MHZ,
    PairRate,
    attention_flops,
    equal_token_pairs,
    fa2_cudnn_ratio,
    implied_in_training_factor,
    read_timings,
    seer_attention_seconds,
    seer_pair_rate,
    summed_rate,
)
from starfabric.astral.seer.cost import (
    FA2_ON_BLACKWELL,
    FA2_ON_HOPPER,
    FA2_PATH_IN_TRAINING,
    FUSED_ATTENTION_IN_TRAINING,
    fa2_rate,
    make_context,
)
from starfabric.astral.seer.cudnn_release import hopper_multiplier
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import make_job
from starfabric.errors import ConfigError

DATA = Path(__file__).parents[2] / "data" / "attention" / "cudnn_llama1b_training.csv"
ROWS = read_timings(DATA)
PAIRS = list(equal_token_pairs(ROWS))
CLOCK = {"H200": 1500.0, "B200": 1665.0}

README_TABLE = {
    # README.md of the same commit, "(sec per iter)" tables: (cuDNN, efficient, flash) by shape.
    "B200": {(1, 16384): (0.285, 0.716, 0.374), (2, 8192): (0.231, 0.444, 0.276),
             (3, 4096): (0.155, 0.236, 0.172), (6, 2048): (0.144, 0.184, 0.154),
             (12, 1024): (0.139, 0.160, 0.145), (24, 768): (0.200, 0.222, 0.208)},
    "H200": {(1, 16384): (0.424, 0.850, 0.500), (2, 8192): (0.357, 0.566, 0.397),
             (3, 4096): (0.243, 0.322, 0.260), (6, 2048): (0.229, 0.270, 0.240),
             (12, 1024): (0.222, 0.243, 0.228), (24, 768): (0.329, 0.352, 0.336)},
}  # fmt: skip
ORDER = ("CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "FLASH_ATTENTION")


def test_transcription_matches_the_readme_table() -> None:
    """The CSV artifacts and the README's rounded table are two published forms of one run."""
    assert len(ROWS) == 36
    for r in ROWS:
        assert r.clock_mhz == CLOCK[r.gpu]
        want = README_TABLE[r.gpu][(r.batch, r.seq)][ORDER.index(r.backend)]
        assert r.time_s == pytest.approx(want, abs=0.001)  # README rounds or truncates


def test_attention_flops_closed_form() -> None:
    """Causal: 16 layers x (1 + 2.5) x 2 * b * s * (s/2) * 32 heads * (64 + 64)."""
    for b, s in ((1, 16384), (2, 8192), (24, 768)):
        assert attention_flops(b, s) == pytest.approx(16 * 3.5 * b * s * s * 32 * 128)
    assert LLAMA_3_2_1B.head_dim == 64 and LLAMA_3_2_1B.kv_heads == 8


def test_pairs_have_equal_tokens_and_positive_differences() -> None:
    """Three pairs per GPU and backend; the longer sequence always costs more attention time."""
    assert len(PAIRS) == 2 * 3 * 3
    for p in PAIRS:
        assert p.long[0] * p.long[1] == p.short[0] * p.short[1]
        assert p.long[1] > p.short[1] and p.dt_s > 0 and p.dflops > 0


def test_measured_rates_in_training() -> None:
    """The 16k/8k pair (the largest time difference) on each GPU, TFLOP/s: H200 @1500 MHz cuDNN
    464, FA2 299; B200 cuDNN 573, FA2 311. The memory-efficient kernel is ~110 on both."""
    got = {(p.gpu, p.backend): p.tflops for p in PAIRS if p.long == (1, 16384)}
    assert got[("H200", "CUDNN_ATTENTION")] == pytest.approx(464, abs=2)
    assert got[("H200", "FLASH_ATTENTION")] == pytest.approx(299, abs=2)
    assert got[("B200", "CUDNN_ATTENTION")] == pytest.approx(573, abs=2)
    assert got[("B200", "FLASH_ATTENTION")] == pytest.approx(311, abs=2)
    for gpu in CLOCK:
        assert 100 < summed_rate(PAIRS, gpu, "EFFICIENT_ATTENTION") < 120


def test_fa2_on_hopper_holds_in_training() -> None:
    """FA2_ON_HOPPER (0.62, FA3 paper, isolated) against the H200 run's raw FA2 / cuDNN 9.9
    ratio in training: 0.647 summed, every pair within 0.07 (not release-corrected: see
    test_fa2_on_hopper_against_the_release_seer_prices)."""
    assert fa2_cudnn_ratio(PAIRS, "H200") == pytest.approx(FA2_ON_HOPPER, abs=0.035)
    fa2 = {p.long: p.tflops for p in PAIRS if p.gpu == "H200" and p.backend == "FLASH_ATTENTION"}
    for p in PAIRS:
        if p.gpu == "H200" and p.backend == "CUDNN_ATTENTION":
            assert fa2[p.long] / p.tflops == pytest.approx(FA2_ON_HOPPER, abs=0.07)


def test_fa2_on_hopper_against_the_release_seer_prices() -> None:
    """Seer prices FA2 at FA2_ON_HOPPER of the cuDNN 9.1 curve and this run's cuDNN at 9.9's
    multiplier (cudnn_release), so its FA2 / cuDNN ratio here is 0.62 / 1.065 = 0.58 where the
    run measures 0.647: FA2 on H200 is 0.69 of the 9.1 curve by this benchmark (head dim 64),
    11% above FA2_ON_HOPPER (head dim 128, isolated). Documented, the constant left (global)."""
    f, b = hopper_multiplier((9, 9))
    seer = FA2_ON_HOPPER * 3.5 / (1 / f + 2.5 / b)
    seer_ratio = FA2_ON_HOPPER / (3.5 / (1 / f + 2.5 / b))
    measured = fa2_cudnn_ratio(PAIRS, "H200")
    assert seer_ratio == pytest.approx(0.583, abs=0.003)
    assert measured * (seer / FA2_ON_HOPPER) == pytest.approx(0.689, abs=0.003)
    assert 1.08 < measured / seer_ratio < 1.14


def test_fa2_on_blackwell_is_the_b200_runs_ratio() -> None:
    """FA2_ON_BLACKWELL is the B200 run's summed ratio, and B200's ratio is below H200's in
    every pair of the same benchmark (FA2 gains less from the new SM than cuDNN)."""
    assert fa2_cudnn_ratio(PAIRS, "B200") == pytest.approx(FA2_ON_BLACKWELL, abs=0.005)
    by = {(p.gpu, p.backend, p.long): p.tflops for p in PAIRS}
    for p in PAIRS:
        if p.gpu == "B200" and p.backend == "CUDNN_ATTENTION":
            b200 = by[("B200", "FLASH_ATTENTION", p.long)] / p.tflops
            h200 = by[("H200", "FLASH_ATTENTION", p.long)] / by[("H200", p.backend, p.long)]
            assert b200 < h200
    # The same benchmark: FA2 on B200 barely beats H200's, cuDNN gains a quarter.
    assert summed_rate(PAIRS, "B200", "FLASH_ATTENTION") / summed_rate(
        PAIRS, "H200", "FLASH_ATTENTION"
    ) == pytest.approx(1.07, abs=0.02)


@pytest.mark.parametrize(
    ("gpu", "want"),
    [("A100-SXM-80GB", 1.0), ("H100-SXM", FA2_ON_HOPPER), ("H200", FA2_ON_HOPPER),
     ("B200", FA2_ON_BLACKWELL), ("GB200", FA2_ON_BLACKWELL), ("GB300", FA2_ON_BLACKWELL)],
)  # fmt: skip
def test_fa2_rate_per_generation(gpu: str, want: float) -> None:
    """cost.fa2_rate and the context a FA2 job gets on each generation; cuDNN stays at 1. Where
    the curve is cuDNN's in training (Hopper, Blackwell) FA2 also keeps the older in-training
    factor (FA2_PATH_IN_TRAINING over FUSED_ATTENTION_IN_TRAINING)."""
    assert fa2_rate(get_gpu(gpu)) == want
    path = FA2_PATH_IN_TRAINING / FUSED_ATTENTION_IN_TRAINING if want < 1.0 else 1.0
    for kernel, rate in (("fa2", want * path), ("cudnn", 1.0)):
        job = make_job(LLAMA_3_2_1B, {"global_batch": 8, "micro_batch": 1, "seq_len": 4096,
                                      "flash_kernel": kernel}, {"gpu": gpu, "gpus": 8})  # fmt: skip
        lay = resolve_layout(job.model, job.execution, job.system)
        ctx = make_context(job.execution, lay, efficiency_for(lay.gpu))
        assert ctx.flash_rate == pytest.approx(rate, rel=1e-12)
        assert ctx.flash_rate_bwd == pytest.approx(rate, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 32), log_s=st.integers(9, 15), gpu=st.sampled_from(["H200", "B200"]))
def test_seer_pair_rate_is_its_saturated_rate(b: int, log_s: int, gpu: str) -> None:
    """flash_time's per-query-block term scales with tokens, so an equal-token pair sees only
    Seer's saturated rate: peak x 3.5 / (1/fwd_fraction + 2.5/bwd_fraction), for any pair (on
    H200 at the benchmark's cuDNN 9.9: its release multiplier, cudnn_release)."""
    s = 2**log_s
    pair = PairRate(gpu, "CUDNN_ATTENTION", (b, 2 * s), (2 * b, s), 1.0,
                    attention_flops(b, 2 * s) - attention_flops(2 * b, s))  # fmt: skip
    eff = efficiency_for(get_gpu(gpu))
    peak = get_gpu(gpu).tflops("bf16") * CLOCK[gpu] / PEAK_CLOCK_MHZ[gpu]
    mf, mb = hopper_multiplier((9, 9)) if gpu == "H200" else (1.0, 1.0)
    sat = peak * 3.5 / (1 / (eff.flash_fwd_fraction * mf) + 2.5 / (eff.flash_bwd_fraction * mb))
    assert seer_pair_rate(pair, CLOCK[gpu]) == pytest.approx(sat, rel=1e-9)


def test_implied_in_training_factor() -> None:
    """At H200's locked 1500 MHz, cuDNN 9.9 at head dim 64 reaches 0.95 of Seer's isolated
    cuDNN 9.9 (head dim 128) curve in training — the factor Seer now prices
    (FUSED_ATTENTION_IN_TRAINING; it was a calibrated 0.65). B200 (clock lock failed in its
    log): ~0.5, Seer's Blackwell curve is faster than this cuDNN 9.9 run."""
    assert implied_in_training_factor(PAIRS, "H200", 1500.0) == pytest.approx(0.95, abs=0.02)
    assert implied_in_training_factor(PAIRS, "B200", 1665.0) == pytest.approx(0.51, abs=0.03)


def test_the_priced_factor_is_the_measured_one() -> None:
    """FUSED_ATTENTION_IN_TRAINING is this benchmark's H200 figure to two decimals, and Seer's
    cuDNN rate over the benchmark's pairs is then the measured rate (not a fitted value)."""
    got = implied_in_training_factor(PAIRS, "H200", 1500.0)
    assert round(got, 2) == FUSED_ATTENTION_IN_TRAINING
    measured = summed_rate(PAIRS, "H200", "CUDNN_ATTENTION")
    sel = [p for p in PAIRS if p.gpu == "H200" and p.backend == "CUDNN_ATTENTION"]
    assert seer_pair_rate(sel[0], 1500.0) == pytest.approx(measured, rel=0.01)


def test_unknown_clock_reference_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="H100-SXM"):
        seer_attention_seconds("H100-SXM", "cudnn", 1, 4096, 1500.0)


def test_bad_row_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text(
        "gpu,clock_mhz_stated,backend,batch,seq,time_s\nH200,1500,CUDNN_ATTENTION,1,x,0.4\n"
    )
    with pytest.raises(ConfigError, match="row 2"):
        read_timings(bad)
    bad.write_text("gpu,clock_mhz_stated,backend,batch,seq,time_s\nH200,1500,MATH,1,8,0.4\n")
    with pytest.raises(ConfigError, match="MATH"):
        read_timings(bad)
