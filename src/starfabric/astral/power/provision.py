"""Provisioning: how many GPUs a site of N MW holds, level by level, and what fails first.

The power hierarchy is feed → transformer → UPS / HVDC lineup → row (busway / RPP) → rack.
Each level has a rating and a redundancy (N, N+1, 2N, 2(N+1)): 2N gives each of two paths
the whole load, so the usable capacity is one path's; N+k leaves k units spare. A level's
budget per GPU is a percentile of the power that level sees in the job's timeline (a rack
its rack's waveform, the lineups and feed the site's, whose stages are offset), not the
nameplate: this is where measured draw buys GPUs. Capping (oversubscription) lets a level
carry more than its rating by capping the GPUs' peaks; the throughput it costs is the work
the capped peaks would have done.

The feed also carries the cooling plant: the design-day peak PUE of the plant (from the
year's simulation) converts IT budget to feed budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from starfabric.astral.power.chain import parse_redundancy
from starfabric.astral.power.timeline import Timeline
from starfabric.config import Spec
from starfabric.errors import InfeasibleError

Array = np.ndarray[Any, Any]


class LevelSpec(Spec):
    """One level of the power hierarchy."""

    name: str
    rating_kw: float = Field(gt=0, description="one unit's rating")
    redundancy: str = "N"
    fan_in: int | None = Field(
        None, ge=1, description="units of the level below per unit (None: as many as fit)"
    )
    percentile: float = Field(100.0, gt=0, le=100, description="budget percentile of the draw")
    oversubscription: float = Field(
        0.0, ge=0, le=1, description="load above rating held by capping"
    )

    @model_validator(mode="after")
    def _check(self) -> LevelSpec:
        parse_redundancy(self.redundancy)
        return self

    def usable_w(self) -> float:
        """One active unit's capacity (redundant units add hardware, not capacity)."""
        return self.rating_kw * 1e3 * (1.0 + self.oversubscription)


class HierarchySpec(Spec):
    """The site's power hierarchy from the feed down (defaults: a typical hyperscale hall)."""

    site_mw: float = Field(100.0, gt=0, description="utility feed capacity")
    feed_redundancy: str = "N"
    levels: list[LevelSpec] = Field(
        default_factory=lambda: [
            LevelSpec(name="transformer", rating_kw=3000.0, redundancy="N+1"),
            LevelSpec(name="UPS/HVDC lineup", rating_kw=2500.0, redundancy="N+1"),
            LevelSpec(name="row busway", rating_kw=1250.0, redundancy="2N"),
            LevelSpec(name="rack", rating_kw=140.0, redundancy="2N"),
        ]
    )

    @model_validator(mode="after")
    def _check(self) -> HierarchySpec:
        parse_redundancy(self.feed_redundancy)
        return self


@dataclass
class LevelResult:
    name: str
    budget_w_per_gpu: float
    gpus_per_unit: int
    units_active: int
    units_installed: int
    capacity_gpus: int
    peak_load_fraction: float  # peak draw / rating at the site's GPU count (> 1: capped)
    capped_fraction: float  # share of the samples a unit spends above its rating

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Provision:
    site_mw: float
    gpus: int
    gpus_tdp_basis: int
    gpus_per_mw: float
    peak_pue: float
    levels: list[LevelResult]
    binding: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "site_mw": self.site_mw,
            "gpus": self.gpus,
            "gpus_tdp_basis": self.gpus_tdp_basis,
            "gpus_per_mw": self.gpus_per_mw,
            "gain_over_tdp": self.gpus / max(self.gpus_tdp_basis, 1) - 1.0,
            "peak_pue": self.peak_pue,
            "binding": self.binding,
            "levels": [lv.as_dict() for lv in self.levels],
        }


def provision(tl: Timeline, hier: HierarchySpec, peak_pue: float) -> Provision:
    """GPUs the site holds with budgets from the timeline's percentiles, and what binds.

    The feed's IT share is site MW / design-day peak PUE. Walking down, each level has as many
    active units as its parent feeds (fan_in per parent unit, or as many as the parent's
    rating carries), each unit holding floor(rating × (1 + oversubscription) / budget) GPUs
    (whole hosts in a rack); redundancy adds installed units (N+k: k per group; 2N: a second
    path) without adding capacity. The site holds the fewest GPUs any level allows; that level
    fails first.
    """
    if peak_pue < 1.0 or not math.isfinite(peak_pue):
        raise InfeasibleError(f"peak PUE {peak_pue} is below 1", fix="check the plant")
    sh = tl.shape
    per_gpu_site = tl.site_w / sh.gpus
    rack_gpu = tl.rack_w / sh.gpus_per_rack
    gpus, binding, results = _walk(
        hier, peak_pue, sh.gpus_per_host, per_gpu_site[None, :], rack_gpu
    )
    nameplate = (
        sh.tdp_w + (sh.host_overhead_w + sh.nic_w_per_gpu * sh.gpus_per_host) / sh.gpus_per_host
    )
    flat = np.full((1, 1), nameplate)
    gpus_tdp, _, _ = _walk(hier, peak_pue, sh.gpus_per_host, flat, flat)
    return Provision(
        site_mw=hier.site_mw,
        gpus=gpus,
        gpus_tdp_basis=gpus_tdp,
        gpus_per_mw=gpus / hier.site_mw,
        peak_pue=peak_pue,
        levels=results,
        binding=binding,
    )


def _walk(
    hier: HierarchySpec, peak_pue: float, per_host: int, site: Array, rack: Array
) -> tuple[int, str, list[LevelResult]]:
    it_w = hier.site_mw * 1e6 / peak_pue
    feed_cap = int(it_w // float(site.max()))
    feed_cap = (feed_cap // per_host) * per_host
    rows: list[tuple[LevelSpec, Array, float, int, int]] = []
    parent_units, parent_w = 1, it_w
    for lv in hier.levels:
        w = rack if lv.name == "rack" else site
        budget = float(np.percentile(w, lv.percentile))
        per_unit = int(lv.usable_w() // budget)
        per_unit = (per_unit // per_host) * per_host if lv.name == "rack" else per_unit
        if per_unit < 1:
            raise InfeasibleError(
                f"{lv.name}: one {lv.rating_kw:g} kW unit cannot carry one "
                f"{'host' if lv.name == 'rack' else 'GPU'} at its budget "
                f"({budget * (per_host if lv.name == 'rack' else 1) / 1e3:.2f} kW)",
                fix=f"raise {lv.name} rating_kw or allow oversubscription with capping",
            )
        if lv.fan_in is not None:
            units = parent_units * lv.fan_in
        else:
            units = max(1, int(parent_units * parent_w // (lv.rating_kw * 1e3)))
        rows.append((lv, w, budget, per_unit, units))
        parent_units, parent_w = units, lv.rating_kw * 1e3
    caps = [("feed", feed_cap)] + [(lv.name, u * pu) for lv, _, _, pu, u in rows]
    binding, gpus = min(caps, key=lambda x: x[1])
    gpus = (gpus // per_host) * per_host
    results: list[LevelResult] = []
    for lv, w, budget, per_unit, units in rows:
        paths, spare = parse_redundancy(lv.redundancy)
        active = min(units, math.ceil(gpus / per_unit))
        group = lv.fan_in or active
        installed = (active + spare * math.ceil(active / max(group, 1))) * paths
        on_unit = min(per_unit, gpus)
        peak = float(w.max()) * on_unit / (lv.rating_kw * 1e3)
        capped = float((w * on_unit > lv.rating_kw * 1e3).mean())
        results.append(
            LevelResult(
                lv.name, budget, per_unit, active, installed, units * per_unit, peak, capped
            )
        )
    return gpus, binding, results
