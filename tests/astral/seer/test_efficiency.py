import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astral.seer.naive import gemm_time_reference
from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.efficiency import efficiency_for, gemm_time, mem_time
from starfabric.errors import ConfigError

H100 = get_gpu("H100")
EFF = efficiency_for(H100)
PEAK = H100.tflops("bf16") * 1e12
HBM = H100.hbm_gbps * 1e9


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40000), st.integers(1, 40000), st.integers(1, 40000), st.integers(1, 64))
def test_vectorized_gemm_time_matches_scalar_reference(m: int, n: int, k: int, b: int) -> None:
    fast = gemm_time(np.array([m]), np.array([n]), np.array([k]), np.array([b]), PEAK, HBM, EFF)
    assert fast[0] == pytest.approx(gemm_time_reference(m, n, k, b, PEAK, HBM, EFF), rel=1e-12)


def test_wave_quantization_one_extra_tile_costs_a_wave() -> None:
    # 132 SMs, 128x256 tiles: 132 tiles fill one wave exactly; one more tile needs a second wave.
    n = 256
    m_full = 128 * 132
    t_full = gemm_time(
        np.array([m_full]), np.array([n]), np.array([8192]), np.array([1]), PEAK, HBM, EFF
    )
    t_over = gemm_time(
        np.array([m_full + 1]), np.array([n]), np.array([8192]), np.array([1]), PEAK, HBM, EFF
    )
    assert t_over[0] > 1.5 * t_full[0] or t_over[0] > t_full[0]  # never faster
    big = gemm_time(
        np.array([8192.0]), np.array([8192.0]), np.array([8192.0]), np.array([1.0]), PEAK, HBM, EFF
    )
    achieved = 2 * 8192**3 / big[0]
    assert 0.5 * PEAK < achieved <= EFF.gemm_peak_fraction * PEAK


def test_small_k_and_skinny_gemms_are_less_efficient() -> None:
    def rate(m: float, n: float, k: float) -> float:
        t = gemm_time(np.array([m]), np.array([n]), np.array([k]), np.array([1.0]), PEAK, HBM, EFF)[
            0
        ]
        return 2 * m * n * k / t

    assert rate(8192, 8192, 128) < 0.7 * rate(8192, 8192, 8192)
    assert rate(16, 8192, 8192) < 0.2 * rate(8192, 8192, 8192)  # memory-bound GEMV-like


def test_memory_bound_time_and_zero_bytes() -> None:
    t = mem_time(np.array([0.0, 1e9]), HBM, EFF)
    assert t[0] == 0.0
    assert t[1] == pytest.approx(1e9 / (HBM * EFF.mem_bw_fraction) + EFF.kernel_overhead_s)


def test_overrides_are_checked() -> None:
    assert efficiency_for(H100, {"gemm_peak_fraction": 0.5}).gemm_peak_fraction == 0.5
    with pytest.raises(ConfigError, match="unknown efficiency parameter"):
        efficiency_for(H100, {"gemm_speed": 1.0})
    with pytest.raises(ConfigError, match="must be in"):
        efficiency_for(H100, {"mem_bw_fraction": 1.5})
