"""Smoothing the job's power and what each option costs.

The options that exist (Choukse et al., "Power Stabilization for AI Training Datacenters",
Microsoft/OpenAI/NVIDIA 2025; NVIDIA, "How new GB300 NVL72 features provide steady power for
AI", 2025):

- **power floor**: the GPU firmware keeps each GPU at or above a fraction of TDP (GB200/GB300
  "power smoothing" floor). The dips fill with burned power: energy cost, no throughput cost.
- **filler work**: dummy GEMMs in the communication phases (Meta's Llama 3 team's
  workaround): the same as a floor at the filler's power, paid in energy.
- **ramp limiter**: the GPU's power may rise and fall at most r W/s; on the way down it burns
  the difference (energy), on the way up it runs slower than it could (throughput: the work
  the missing power would have done is done later, so the iteration stretches).
- **energy storage** (rack BBUs / supercapacitors in the PSU, site batteries): the grid
  sees the mean, the store supplies or absorbs the difference within its power and energy
  ratings; its round-trip losses are the cost.

Each option is applied to the waveform of one iteration (periodic) and, for storage, also to
a run view with checkpoints; `compare` reports swing, ramp rates, band energy, energy and
throughput cost, and the verdict against the named utility limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from starfabric.astral.power.timeline import Timeline, waveform_stats
from starfabric.config import Spec
from starfabric.errors import ConfigError

Array = np.ndarray[Any, Any]


class StorageSpec(Spec):
    """An energy store behind the racks or at the site."""

    kwh: float = Field(gt=0, description="usable energy")
    kw: float = Field(gt=0, description="charge / discharge power")
    efficiency: float = Field(0.92, gt=0, le=1, description="round-trip efficiency")


class SmoothingSpec(Spec):
    """The smoothing options to compare (any subset)."""

    floor_fraction: float | None = Field(None, ge=0, le=1, description="GPU power floor / TDP")
    filler_fraction: float | None = Field(None, ge=0, le=1, description="filler work power / TDP")
    ramp_w_per_s: float | None = Field(None, gt=0, description="per-GPU ramp limit")
    storage: StorageSpec | None = None


class UtilityLimits(Spec):
    """The utility's limits on the site's load (assumptions: interconnection agreements set
    them per site; the defaults are illustrative)."""

    ramp_mw_per_s: float = Field(20.0, gt=0, description="largest allowed ramp, MW/s")
    swing_fraction: float = Field(
        0.10, gt=0, le=1, description="largest allowed swing / peak within the 0.1-20 Hz band"
    )


@dataclass
class Smoothed:
    """One option's result."""

    name: str
    site_w: Array
    stats: dict[str, Any]
    energy_cost: float  # extra energy / unsmoothed energy
    throughput_cost: float  # iteration time stretch
    meets_limits: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "option": self.name,
            "swing_mw": self.stats["swing_w"] / 1e6,
            "swing_fraction": self.stats["swing_fraction"],
            "ramp_mw_per_s": max(self.stats["ramp_up_w_per_s"], self.stats["ramp_down_w_per_s"])
            / 1e6,
            "band_0.1_20hz": self.stats["band_energy"]["0.1-20Hz"],
            "energy_cost": self.energy_cost,
            "throughput_cost": self.throughput_cost,
            "meets_limits": self.meets_limits,
        }


def _site(tl: Timeline, gpu_w: Array) -> Array:
    sh = tl.shape
    static = tl.rack_w - tl.gpu_w * sh.gpus_per_rack
    rack = gpu_w * sh.gpus_per_rack + static
    return (rack * tl.racks_per_stage[:, None]).sum(axis=0) + (
        tl.site_w - (tl.rack_w * tl.racks_per_stage[:, None]).sum(axis=0)
    )


def _verdict(stats: dict[str, Any], lim: UtilityLimits) -> bool:
    ramp = max(stats["ramp_up_w_per_s"], stats["ramp_down_w_per_s"]) / 1e6
    band = stats["band_energy"]["0.1-20Hz"]
    # the swing's amplitude in the band: rms of the band's share, as a fraction of the peak
    band_swing = np.sqrt(band) * stats["rms_swing_w"] * 2 * np.sqrt(2) / max(stats["peak_w"], 1e-9)
    return bool(ramp <= lim.ramp_mw_per_s and band_swing <= lim.swing_fraction)


def floor(tl: Timeline, fraction: float) -> Array:
    """Per-GPU waveform under a power floor of fraction × TDP."""
    return np.maximum(tl.gpu_w, fraction * tl.shape.tdp_w)


def ramp_limit(gpu_w: Array, r_w_per_s: float, dt_s: float) -> tuple[Array, Array]:
    """Per-GPU waveform under a ramp limit (two periods run so the result is periodic);
    returns (limited, unmet demand ≥ 0)."""
    x = np.asarray(gpu_w, dtype=float)
    step = r_w_per_s * dt_s
    y = np.empty_like(x)
    cur = x[:, -1].copy()
    for _ in range(2):
        for i in range(x.shape[1]):
            cur = np.clip(x[:, i], cur - step, cur + step)
            y[:, i] = cur
    return y, np.maximum(x - y, 0.0)


def storage(site_w: Array, spec: StorageSpec, dt_s: float) -> tuple[Array, float]:
    """Grid power with a store that supplies / absorbs the difference from the mean, within
    its power and energy; returns (grid power, losses J). Two periods run for a periodic
    state of charge."""
    w = np.asarray(site_w, dtype=float)
    target = float(w.mean())
    p_max = spec.kw * 1e3
    e_max = spec.kwh * 3.6e6
    eta = np.sqrt(spec.efficiency)  # one way
    soc = 0.5 * e_max
    grid = np.empty_like(w)
    loss = 0.0
    for rep in range(2):
        loss = 0.0
        for i in range(w.size):
            need = w[i] - target  # > 0: discharge
            if need > 0:
                p = min(need, p_max, soc * eta / dt_s)
                soc -= p / eta * dt_s
                loss += p * (1 / eta - 1) * dt_s
            else:
                p = -min(-need, p_max, (e_max - soc) / eta / dt_s)
                soc -= p * eta * dt_s
                loss += -p * (1 - eta) * dt_s
            grid[i] = w[i] - p
        del rep
    # the losses are bought from the grid too, spread over the period
    grid = grid + loss / (w.size * dt_s)
    return grid, loss


def compare(
    tl: Timeline, spec: SmoothingSpec, limits: UtilityLimits | None = None
) -> list[Smoothed]:
    """The unsmoothed waveform and each option of spec, with costs and verdicts."""
    lim = limits or UtilityLimits()
    dt = tl.dt_s
    base_e = float(tl.site_w.sum() * dt)
    n_gpu_stage = tl.racks_per_stage * tl.shape.gpus_per_rack
    out: list[Smoothed] = []

    def add(name: str, site: Array, energy_cost: float, throughput: float) -> None:
        st = waveform_stats(site, dt)
        out.append(Smoothed(name, site, st, energy_cost, throughput, _verdict(st, lim)))

    add("none", tl.site_w, 0.0, 0.0)
    for label, frac in (
        ("power floor", spec.floor_fraction),
        ("filler work", spec.filler_fraction),
    ):
        if frac is None:
            continue
        g = floor(tl, frac)
        site = _site(tl, g)
        add(f"{label} {frac:.0%} TDP", site, float(site.sum() * dt) / base_e - 1.0, 0.0)
    if spec.ramp_w_per_s is not None:
        g, unmet = ramp_limit(tl.gpu_w, spec.ramp_w_per_s, dt)
        site = _site(tl, g)
        idle = tl.extra["idle_fraction"] * tl.shape.tdp_w
        dyn = float(((tl.gpu_w - idle) * n_gpu_stage[:, None]).sum())
        stretch = float((unmet * n_gpu_stage[:, None]).sum()) / max(dyn, 1e-9)
        burned = float(((g - tl.gpu_w).clip(min=0) * n_gpu_stage[:, None]).sum() * dt)
        add(f"ramp limit {spec.ramp_w_per_s:g} W/s per GPU", site, burned / base_e, stretch)
    if spec.storage is not None:
        grid, loss = storage(tl.site_w, spec.storage, dt)
        add(f"storage {spec.storage.kwh:g} kWh / {spec.storage.kw:g} kW", grid, loss / base_e, 0.0)
    return out


def parse_smoothing(text: str) -> SmoothingSpec:
    """'floor=0.6,ramp=2000,storage=500kWh/20000kW' → SmoothingSpec (CLI shorthand)."""
    kw: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, val = part.partition("=")
        key = key.strip().lower()
        try:
            if key == "floor":
                kw["floor_fraction"] = float(val)
            elif key == "filler":
                kw["filler_fraction"] = float(val)
            elif key == "ramp":
                kw["ramp_w_per_s"] = float(val)
            elif key == "storage":
                e, _, p = val.lower().partition("/")
                kw["storage"] = {
                    "kwh": float(e.replace("kwh", "")),
                    "kw": float(p.replace("kw", "")),
                }
            else:
                raise ConfigError(
                    f"smoothing option {key!r} unknown",
                    fix="use floor=, filler=, ramp=, storage=kWh/kW",
                )
        except ValueError as e:
            raise ConfigError(
                f"smoothing option {part!r}: {e}", fix="e.g. floor=0.6,ramp=2000"
            ) from e
    from starfabric.config import parse_spec

    return parse_spec(SmoothingSpec, kw, "--smooth")
