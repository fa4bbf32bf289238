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
from pydantic import Field, model_validator

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
    """A utility's limits on the site's load, each number with its published source.

    - ramp_mw_per_s / ramp_fraction_per_min: the largest change of the load's average over
      `ramp_window_s` (a per-second limit is metered on 1 s averages, a per-minute one on 1 min
      averages), absolute or as a fraction of the site's peak per minute; checked inside the
      iteration and on the job's start (a step from idle to the training mean, which a w-second
      average sees as a ramp of step / w).
    - band_share_max: the largest share of the fluctuation's spectral energy allowed inside
      `band_hz` (Choukse et al.'s frequency-domain specification).

    A limit left at None is not checked. `LIMIT_PROFILES` names the published ones."""

    name: str = "custom"
    source: str = ""
    ramp_mw_per_s: float | None = Field(None, gt=0, description="largest ramp, MW/s")
    ramp_fraction_per_min: float | None = Field(
        None, gt=0, le=1, description="largest ramp as a fraction of the site's peak per minute"
    )
    ramp_window_s: float = Field(1.0, gt=0, description="averaging window of the ramp check (s)")
    band_hz: tuple[float, float] = (0.1, 20.0)
    band_share_max: float | None = Field(
        None, gt=0, le=1, description="largest share of the fluctuation energy inside band_hz"
    )

    @model_validator(mode="after")
    def _check(self) -> UtilityLimits:
        lo, hi = self.band_hz
        if not 0 <= lo < hi:
            raise ValueError(f"band_hz {self.band_hz} must be 0 <= low < high")
        return self


EPJPV_2024 = (
    "EPJ Photovoltaics 15 (2024), article pv230051, Table 1 'Overview of regulations in "
    "different grid codes'"
)

LIMIT_PROFILES: dict[str, UtilityLimits] = {
    "choukse-2025": UtilityLimits(
        name="choukse-2025",
        source="Choukse et al. (Microsoft/OpenAI/NVIDIA), 'Power Stabilization for AI Training "
        "Datacenters', arXiv 2508.14318 (2025): utility specifications in the frequency domain "
        "name a critical range, e.g. 0.1-20 Hz, and cap the spectral magnitude inside it, e.g. "
        "at 20 % of the total; the paper names ramp-up / ramp-down rates (MW/s) without a "
        "number, so no ramp is checked under this profile",
        band_hz=(0.1, 20.0),
        band_share_max=0.20,
    ),
    "hawaii": UtilityLimits(
        name="hawaii",
        source=f"{EPJPV_2024}: Hawaii (HECO) +/-1 MW/s and +/-2 MW/min for plants at the point "
        "of interconnection (a generator-side grid code: the most explicit published per-second "
        "limit; no large-load rule we found states a number)",
        ramp_mw_per_s=1.0,
        ramp_window_s=1.0,
    ),
    "denmark": UtilityLimits(
        name="denmark",
        source=f"{EPJPV_2024}: Denmark (Energinet) +/-100 kW/s (generator-side grid code)",
        ramp_mw_per_s=0.1,
        ramp_window_s=1.0,
    ),
    "ten-percent-per-minute": UtilityLimits(
        name="ten-percent-per-minute",
        source=f"{EPJPV_2024}: China, India and Puerto Rico +/-10 % of the rating per minute "
        "(generator-side grid codes), applied to the site's peak",
        ramp_fraction_per_min=0.10,
        ramp_window_s=60.0,
    ),
}
"""The named limits a user picks with `--limits` (the default is `choukse-2025`). Large-load
interconnection rules published so far (ERCOT NPRR 1308 / NOGRR 282 for Large Electronic
Loads, NERC's 2025 Large Loads Task Force white paper and its 2026 alerts) set ride-through and
modelling obligations, not a numeric ramp or band limit; the ramp profiles therefore carry the
generator-side grid codes' numbers, applied symmetrically to the load, and say so."""

DEFAULT_LIMITS = "choukse-2025"


def limit_profile(name: str) -> UtilityLimits:
    """A named utility-limit profile (one line, exit 2 on an unknown name)."""
    key = name.strip().lower()
    if key not in LIMIT_PROFILES:
        raise ConfigError(
            f"utility limits {name!r} unknown", fix=f"use one of {', '.join(LIMIT_PROFILES)}"
        )
    return LIMIT_PROFILES[key]


@dataclass
class Smoothed:
    """One option's result."""

    name: str
    site_w: Array
    stats: dict[str, Any]
    energy_cost: float  # extra energy / unsmoothed energy
    throughput_cost: float  # iteration time stretch
    checks: dict[str, Any]

    @property
    def meets_limits(self) -> bool:
        return bool(self.checks["met"])

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
            "limits": self.checks,
        }


def _site(tl: Timeline, gpu_w: Array) -> Array:
    sh = tl.shape
    static = tl.rack_w - tl.gpu_w * sh.gpus_per_rack
    rack = gpu_w * sh.gpus_per_rack + static
    return (rack * tl.racks_per_stage[:, None]).sum(axis=0) + (
        tl.site_w - (tl.rack_w * tl.racks_per_stage[:, None]).sum(axis=0)
    )


def band_share(w: Array, dt_s: float, lo_hz: float, hi_hz: float) -> float:
    """Share of the fluctuation's (w - mean) spectral energy inside [lo_hz, hi_hz)."""
    x = np.asarray(w, dtype=float)
    spec = np.abs(np.fft.rfft(x - x.mean())) ** 2
    freqs = np.fft.rfftfreq(x.size, dt_s)
    tot = float(spec.sum())
    return float(spec[(freqs >= lo_hz) & (freqs < hi_hz)].sum() / tot) if tot > 0 else 0.0


def windowed_ramp(w: Array, dt_s: float, window_s: float) -> float:
    """Largest |d/dt| of the window_s moving average of a periodic waveform (W/s): the
    average's slope is (P(t) - P(t - window)) / window, and a window longer than the period
    only sees its remainder."""
    x = np.asarray(w, dtype=float)
    k = max(1, int(round(window_s / dt_s)))
    r = k % x.size
    if r == 0:
        return 0.0
    return float(np.abs(x - np.roll(x, r)).max() / (k * dt_s))


def check_limits(
    site_w: Array, dt_s: float, start_step_w: float, start_rate_w_per_s: float,
    lim: UtilityLimits,
) -> dict[str, Any]:  # fmt: skip
    """The waveform of one iteration (periodic) and the job's start step against `lim`.

    start_rate_w_per_s: how fast the start step is taken (inf: at once); a window_s average of
    a ramp at rate R lasting step / R rises at min(R, step / window_s)."""
    out: dict[str, Any] = {"profile": lim.name}
    ok = True
    peak = float(np.max(site_w))
    limit_w_s: float | None = None
    if lim.ramp_mw_per_s is not None:
        limit_w_s = lim.ramp_mw_per_s * 1e6
    if lim.ramp_fraction_per_min is not None:
        frac = lim.ramp_fraction_per_min * peak / 60.0
        limit_w_s = frac if limit_w_s is None else min(limit_w_s, frac)
    if limit_w_s is not None:
        it_ramp = windowed_ramp(site_w, dt_s, lim.ramp_window_s)
        start = min(start_rate_w_per_s, max(start_step_w, 0.0) / lim.ramp_window_s)
        out.update(
            ramp_limit_mw_per_s=limit_w_s / 1e6,
            ramp_window_s=lim.ramp_window_s,
            iteration_ramp_mw_per_s=it_ramp / 1e6,
            start_ramp_mw_per_s=start / 1e6,
            iteration_ramp_ok=bool(it_ramp <= limit_w_s),
            start_ramp_ok=bool(start <= limit_w_s),
        )
        ok = ok and out["iteration_ramp_ok"] and out["start_ramp_ok"]
    if lim.band_share_max is not None:
        share = band_share(site_w, dt_s, *lim.band_hz)
        out.update(
            band_hz=list(lim.band_hz),
            band_share=share,
            band_share_max=lim.band_share_max,
            band_ok=bool(share <= lim.band_share_max),
        )
        ok = ok and out["band_ok"]
    out["met"] = bool(ok)
    return out


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
    lim = limits or LIMIT_PROFILES[DEFAULT_LIMITS]
    dt = tl.dt_s
    base_e = float(tl.site_w.sum() * dt)
    n_gpu_stage = tl.racks_per_stage * tl.shape.gpus_per_rack
    out: list[Smoothed] = []

    idle_site = float(tl.summary()["site_idle_w"])

    def add(
        name: str, site: Array, energy_cost: float, throughput: float,
        start_rate: float = float("inf"),
    ) -> None:  # fmt: skip
        st = waveform_stats(site, dt)
        checks = check_limits(site, dt, float(site.mean()) - idle_site, start_rate, lim)
        out.append(Smoothed(name, site, st, energy_cost, throughput, checks))

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
        add(
            f"ramp limit {spec.ramp_w_per_s:g} W/s per GPU", site, burned / base_e, stretch,
            start_rate=spec.ramp_w_per_s * float(n_gpu_stage.sum()),
        )  # fmt: skip
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
