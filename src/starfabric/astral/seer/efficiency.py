"""Achievable kernel efficiency, kept as data (`efficiency.yaml`), and the roofline timers.

GEMM time is shape-aware: tile quantization (the last CTA tile row/column is partly idle),
wave quantization (the last wave of tiles leaves SMs idle) and a K-dependent prologue/epilogue
cost, taking the fastest of the tile shapes a BLAS library chooses from. Memory-bound kernels
run at a fraction of HBM bandwidth. All functions are vectorized over numpy arrays.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import yaml

from starfabric.astral.hardware import GPUSpec
from starfabric.errors import ConfigError

FloatArray = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True)
class Efficiency:
    """Per-GPU efficiency parameters (see efficiency.yaml for each one's meaning and source)."""

    sms: int
    gemm_tiles: tuple[tuple[int, int], ...]
    gemm_peak_fraction: float
    gemm_k_half: float
    mem_bw_fraction: float
    kernel_overhead_s: float
    flash_fwd_fraction: float
    flash_bwd_fraction: float
    bmm_peak_fraction: float
    nvlink_bus_fraction: float
    nic_bus_fraction: float
    fp8_gemm_peak_fraction: float
    flash_fwd_keys_half: float = 0.0
    """Keys per query at which the fused-attention forward runs at half its saturated
    fraction (per-query-block prologue/epilogue and the causal diagonal); 0: no dependence."""
    flash_bwd_keys_half: float = 0.0
    """The same for the backward kernel (dQ accumulation and dK/dV epilogue per block)."""
    collective_bus_fractions: tuple[tuple[str, float, float, float, float], ...] = ()
    """Calibrated (collective, NVLink fraction, NIC fraction, NVLink alpha s, NIC alpha s);
    0 fractions / negative alphas mean "not measured"."""
    basis: str = ""
    """What the GPU's kernel fractions are calibrated on, or "estimate: ..." when no measured
    run of that GPU backs them (Blackwell today)."""

    @property
    def is_estimate(self) -> bool:
        """True when no published measurement calibrates these fractions."""
        return self.basis.startswith("estimate")


_FIELDS = set(Efficiency.__dataclass_fields__)

SPLIT_K_MIN = 256
"""Smallest K slice cuBLAS gives one split-K partition (assumption)."""


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    """The parsed efficiency.yaml, read once per process (callers copy before merging)."""
    path = resources.files("starfabric.astral.seer") / "efficiency.yaml"
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def efficiency_for(gpu: GPUSpec, overrides: dict[str, Any] | None = None) -> Efficiency:
    """Efficiency parameters for `gpu`: file defaults, then the GPU's row, then `overrides`."""
    table = _table()
    merged: dict[str, Any] = dict(table["default"])
    merged.update(table.get("gpus", {}).get(gpu.name, {}))
    for key, val in (overrides or {}).items():
        if key not in _FIELDS:
            raise ConfigError(
                f"unknown efficiency parameter {key!r}",
                fix=f"use one of: {', '.join(sorted(_FIELDS))}",
            )
        merged[key] = val
    merged["gemm_tiles"] = tuple((int(a), int(b)) for a, b in merged["gemm_tiles"])
    merged["collective_bus_fractions"] = _collective_fractions(
        merged.get("collective_bus_fractions", {})
    )
    eff = Efficiency(**merged)
    skip = {"gemm_tiles", "sms", "kernel_overhead_s", "gemm_k_half", "collective_bus_fractions",
            "basis", "flash_fwd_keys_half", "flash_bwd_keys_half"}  # fmt: skip
    for name in _FIELDS - skip:
        val = getattr(eff, name)
        if not 0 < val <= 1:
            raise ConfigError(f"efficiency {name} = {val} must be in (0, 1]", fix="give a fraction")
    return eff


def _collective_fractions(raw: Any) -> tuple[tuple[str, float, float, float, float], ...]:
    """{kind: {nvlink: f, nic: f, nvlink_alpha_s: a, nic_alpha_s: a}} (as calibrate writes
    it) → sorted tuples; checked."""
    if isinstance(raw, tuple):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(
            "efficiency.collective_bus_fractions must map a collective to {nvlink, nic}",
            fix="write e.g. all_reduce: {nvlink: 1.05, nic: 0.9}",
        )
    out = []
    for kind, fr in sorted(raw.items()):
        keys = {"nvlink", "nic", "nvlink_alpha_s", "nic_alpha_s"}
        if not isinstance(fr, dict) or set(fr) - keys:
            raise ConfigError(
                f"efficiency.collective_bus_fractions.{kind} = {fr!r}",
                fix=f"use only the keys {sorted(keys)}",
            )
        nvl, nic = float(fr.get("nvlink", 0.0)), float(fr.get("nic", 0.0))
        a_nvl, a_nic = float(fr.get("nvlink_alpha_s", -1.0)), float(fr.get("nic_alpha_s", -1.0))
        if not (0 <= nvl <= 2 and 0 <= nic <= 2):
            raise ConfigError(
                f"efficiency.collective_bus_fractions.{kind}: fractions must be in [0, 2]",
                fix="give measured busbw / link bandwidth",
            )
        out.append((str(kind), nvl, nic, a_nvl, a_nic))
    return tuple(out)


def gemm_time(
    m: FloatArray,
    n: FloatArray,
    k: FloatArray,
    batch: FloatArray,
    peak_flops: float,
    hbm_bytes_per_s: float,
    eff: Efficiency,
    elem_bytes: float = 2.0,
    peak_fraction: float | None = None,
) -> FloatArray:
    """Seconds for `batch` GEMMs of (m x k) @ (k x n), best tile, roofline with HBM traffic."""
    m = np.maximum(np.asarray(m, dtype=np.float64), 1.0)
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    k = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    batch = np.asarray(batch, dtype=np.float64)
    frac = eff.gemm_peak_fraction if peak_fraction is None else peak_fraction
    flops = 2.0 * m * n * k * batch
    best = np.full(np.broadcast(m, n, k, batch).shape, np.inf)
    hbm_eff = hbm_bytes_per_s * eff.mem_bw_fraction
    for tm, tn in eff.gemm_tiles:
        tiles = np.ceil(m / tm) * np.ceil(n / tn) * batch
        # Split-K (cuBLAS): when the tiles leave SMs idle, K is cut into slices computed in
        # parallel and summed by a reduction kernel (fp32 partials through HBM).
        split = np.clip(np.floor(eff.sms / tiles), 1.0, np.maximum(1.0, np.floor(k / SPLIT_K_MIN)))
        for sp in (np.ones_like(split), split):
            kk = k / sp
            waves = np.ceil(tiles * sp / eff.sms)
            # Each wave costs one full tile's time on every SM, whether or not the SM is busy.
            t = (
                waves
                * 2.0
                * tm
                * tn
                * kk
                / (peak_flops * frac * (kk / (kk + eff.gemm_k_half)) / eff.sms)
            )
            t = t + np.where(
                sp > 1, (sp + 1) * 4.0 * m * n * batch / hbm_eff + eff.kernel_overhead_s, 0.0
            )
            best = np.minimum(best, t)
    mem = elem_bytes * (m * k + k * n + m * n) * batch / (hbm_bytes_per_s * eff.mem_bw_fraction)
    out: FloatArray = np.maximum(best, mem) + eff.kernel_overhead_s
    return np.where(flops > 0, out, 0.0)


def mem_time(nbytes: FloatArray, hbm_bytes_per_s: float, eff: Efficiency) -> FloatArray:
    """Seconds for memory-bound kernels moving `nbytes` (0 bytes = no kernel)."""
    b = np.asarray(nbytes, dtype=np.float64)
    out: FloatArray = np.where(
        b > 0, b / (hbm_bytes_per_s * eff.mem_bw_fraction) + eff.kernel_overhead_s, 0.0
    )
    return out


def flash_time(
    flops: FloatArray, keys: FloatArray, peak_flops: float, eff: Efficiency, backward: bool
) -> FloatArray:
    """Seconds of fused (flash) attention kernels doing `flops` with `keys` keys per query per
    call: the saturated fraction of peak times keys / (keys + keys_half) — each query block
    pays a fixed prologue/epilogue (load Q, rescale and write O; in the backward, dQ's
    accumulation) worth `keys_half` keys of main-loop work (FlashAttention-2, Dao 2023,
    section 3; the curves of FlashAttention-3, Shah et al. 2024, Figures 5-6)."""
    f = np.asarray(flops, dtype=np.float64)
    k = np.maximum(np.asarray(keys, dtype=np.float64), 1.0)
    frac, half = (
        (eff.flash_bwd_fraction, eff.flash_bwd_keys_half)
        if backward
        else (eff.flash_fwd_fraction, eff.flash_fwd_keys_half)
    )
    out: FloatArray = np.where(
        f > 0, f * (1.0 + half / k) / (peak_flops * frac) + eff.kernel_overhead_s, 0.0
    )
    return out
