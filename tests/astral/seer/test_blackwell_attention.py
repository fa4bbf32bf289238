"""Blackwell attention curve: the fused-attention forward's fraction of peak on each Blackwell GPU,
by keys per query, is Hopper's calibrated curve times the ratio that ONE benchmark measures
between that GPU and H200 (NVIDIA cudnn-frontend prefill sweep, cuDNN 9.27.0, BF16 causal, head
dim 128; tests/data/attention/cudnn_prefill_sweep.csv), refitted in flash_time's form. The
backward has no published Blackwell curve: Hopper's backward times the forward's measured shape
ratio only (assumption BLACKWELL_BWD_FROM_FWD_SHAPE, efficiency.yaml)."""

import csv
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.cost import FUSED_ATTENTION_IN_TRAINING
from starfabric.astral.seer.efficiency import Efficiency, efficiency_for, flash_time

SWEEP = Path(__file__).parents[2] / "data" / "attention" / "cudnn_prefill_sweep.csv"
BLACKWELL = ["B200", "GB200", "GB300"]
"""GPUs with their own published sweep (B300 borrows GB300's, the same sm_103 die)."""
BAND = 0.03
"""The model's Blackwell/Hopper rate ratio must match the measured one within 3% at every
measured length (the two-parameter refit leaves at most 2%, on GB200's and GB300's sweeps)."""


def _sweep(gpu: str) -> tuple[np.ndarray, np.ndarray]:
    """(keys per query, measured fraction of the GPU's dense BF16 peak) of `gpu`'s sweep."""
    with SWEEP.open() as f:
        rows = [r for r in csv.DictReader(x for x in f if not x.startswith("#")) if r["gpu"] == gpu]
    seq = np.array([float(r["seq"]) for r in rows])
    tflops = np.array([float(r["tflops"]) for r in rows])
    return seq / 2.0, tflops / get_gpu(gpu).tflops("bf16")  # causal: keys = seq / 2


def _fit(keys: np.ndarray, frac: np.ndarray) -> tuple[float, float]:
    """Least-squares (saturation, keys_half) of frac = sat * keys / (keys + keys_half)."""
    best = (np.inf, 0.0, 0.0)
    for half in np.arange(1.0, 3000.0, 1.0):
        x = keys / (keys + half)
        sat = float(x @ frac / (x @ x))
        best = min(best, (float(np.sum((sat * x - frac) ** 2)), sat, float(half)))
    return best[1], best[2]


def _curve(eff: Efficiency, keys: np.ndarray, backward: bool = False) -> np.ndarray:
    """flash_time's fraction of peak at `keys`, written out."""
    sat, half = (
        (eff.flash_bwd_fraction, eff.flash_bwd_keys_half)
        if backward
        else (eff.flash_fwd_fraction, eff.flash_fwd_keys_half)
    )
    return np.asarray(sat * keys / (keys + half))


def _flash_time_fraction(eff: Efficiency, keys: np.ndarray) -> np.ndarray:
    """Fraction of peak flash_time gives the forward at `keys` (overhead-free flop count)."""
    flops = np.full_like(keys, 1e15)
    t = flash_time(flops, keys, 1.0, eff, backward=False) - eff.kernel_overhead_s
    return np.asarray(flops / t)


def test_sweep_is_transcribed_and_within_each_peak() -> None:
    for gpu in ["H200", *BLACKWELL]:
        keys, frac = _sweep(gpu)
        assert list(keys) == [1024.0, 2048.0, 4096.0, 8192.0]
        assert np.all(np.diff(frac) > 0) and np.all(frac < 1.0)
    # tflops column = causal FLOPs / time: 4 * s^2 * 64 heads * 128 / 2 / t
    with SWEEP.open() as f:
        for r in csv.DictReader(x for x in f if not x.startswith("#")):
            s = float(r["seq"])
            rate = 4 * s * s * 64 * 128 / 2 / (float(r["time_ms"]) * 1e-3) / 1e12
            assert rate == pytest.approx(float(r["tflops"]), rel=2e-3)


def test_hopper_curve_is_the_isolated_curve_at_the_in_training_factor() -> None:
    """FA3-paper cuDNN saturation 0.565 / 0.545 times cost.FUSED_ATTENTION_IN_TRAINING."""
    for name in ["H100", "H200", "H800", "GH200"]:
        eff = efficiency_for(get_gpu(name))
        fwd, bwd = 0.565 * FUSED_ATTENTION_IN_TRAINING, 0.545 * FUSED_ATTENTION_IN_TRAINING
        assert eff.flash_fwd_fraction == pytest.approx(fwd, abs=5e-4)
        assert eff.flash_bwd_fraction == pytest.approx(bwd, abs=5e-4)
        assert (eff.flash_fwd_keys_half, eff.flash_bwd_keys_half) == (187, 360)


@pytest.mark.parametrize("gpu", BLACKWELL)
def test_forward_is_hoppers_curve_times_the_measured_ratio_refitted(gpu: str) -> None:
    keys, frac = _sweep(gpu)
    _, h_frac = _sweep("H200")
    hop = efficiency_for(get_gpu("H200"))
    sat, half = _fit(keys, _curve(hop, keys) * frac / h_frac)
    eff = efficiency_for(get_gpu(gpu))
    assert eff.flash_fwd_fraction == pytest.approx(sat, rel=0.01)
    assert eff.flash_fwd_keys_half == pytest.approx(half, rel=0.01)


@pytest.mark.parametrize("gpu", BLACKWELL)
def test_model_reproduces_the_measured_blackwell_to_hopper_ratio(gpu: str) -> None:
    keys, frac = _sweep(gpu)
    h_keys, h_frac = _sweep("H200")
    assert np.array_equal(keys, h_keys)
    measured = frac / h_frac
    model = _flash_time_fraction(efficiency_for(get_gpu(gpu)), keys) / _flash_time_fraction(
        efficiency_for(get_gpu("H200")), keys
    )
    assert np.all(np.abs(model / measured - 1.0) < BAND), (model, measured)


def test_hoppers_curve_unscaled_would_miss_blackwell_short_sequences() -> None:
    """The mechanism is not a no-op: Hopper's curve used as-is on B200 (the previous model, a
    Blackwell/Hopper ratio of 1 at every length) is off by more than the band at 2k tokens."""
    _, frac = _sweep("B200")
    _, h_frac = _sweep("H200")
    measured = frac / h_frac
    assert measured[0] < 1.0 - 5 * BAND  # 0.82: cuDNN on B200 ramps up later than on H200
    assert measured[-1] == pytest.approx(0.96, abs=0.02)  # and nearly catches up at 16k


def test_blackwell_ultra_shares_gb300s_curve_and_is_faster_at_long_sequences() -> None:
    b300, gb300 = efficiency_for(get_gpu("B300")), efficiency_for(get_gpu("GB300"))
    b200 = efficiency_for(get_gpu("B200"))
    assert b300.flash_fwd_fraction == gb300.flash_fwd_fraction
    assert b300.flash_fwd_keys_half == gb300.flash_fwd_keys_half
    long = np.array([8192.0])
    assert _curve(gb300, long)[0] > 1.15 * _curve(b200, long)[0]


@pytest.mark.parametrize(("name", "sweep"), [("B200", "B200"), ("GB200", "GB200"),
                                           ("B300", "GB300"), ("GB300", "GB300")])  # fmt: skip
def test_backward_is_hoppers_times_the_forwards_measured_shape(name: str, sweep: str) -> None:
    keys, frac = _sweep(sweep)
    keys_h, h_frac = _sweep("H200")
    _, half = _fit(keys, frac)
    _, h_half = _fit(keys_h, h_frac)
    hop = efficiency_for(get_gpu("H200"))
    sat, bwd_half = _fit(keys, _curve(hop, keys, backward=True) * (keys + h_half) / (keys + half))
    eff = efficiency_for(get_gpu(name))
    assert eff.flash_bwd_fraction == pytest.approx(sat, rel=0.01)
    assert eff.flash_bwd_fraction == pytest.approx(hop.flash_bwd_fraction, rel=0.01)
    assert eff.flash_bwd_keys_half == pytest.approx(bwd_half, rel=0.01)
    assert eff.flash_bwd_keys_half > hop.flash_bwd_keys_half  # more per-block overhead
