"""The power chain from the utility feed to the IT load, each stage with its part-load losses.

Every stage loses power in three ways (Rasmussen, "Electrical Efficiency Modeling for Data
Centers", Schneider Electric White Paper 113; Avelar, "Making Large UPS Systems More
Efficient", White Paper 108): a no-load loss (control electronics, magnetising current, fans),
a loss proportional to the load (switching) and a square-law loss (I²R). In per-unit of the
stage's rating, with x = load / rating:

    loss(x) = a + b·x + c·x²,     efficiency(x) = x / (x + loss(x))

The three coefficients of each named stage are solved from the efficiency points its source
publishes (`fit_loss`), so a curve is data with a citation, not a guess of ours. Stages run
at the part load their redundancy leaves them: a 2N UPS pair never carries more than half of
the load per side, an N+1 rectifier shelf shares the load over N+1 modules, and a module-
shedding HVDC shelf switches modules off to keep the ones left near their best load.

Mechanical load (chillers, pumps, fans) is fed through the transformer only: it is not on
the UPS (the common design; `ChainSpec.mechanical_on_ups` puts it there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from starfabric.config import Spec
from starfabric.errors import ConfigError

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class StageCurve:
    """A stage's published efficiency points and the loss coefficients solved from them."""

    name: str
    source: str
    points: tuple[tuple[float, float], ...]  # (load fraction of rating, efficiency)
    square_law: float | None = None  # c fixed by the source where it gives only two points

    @property
    def coefficients(self) -> tuple[float, float, float]:
        return fit_loss(self.points, self.square_law)

    def loss(self, x: Array | float) -> Array:
        """Per-unit loss at per-unit load x (x = 0 still pays the no-load loss)."""
        a, b, c = self.coefficients
        xx = np.asarray(x, dtype=float)
        return a + b * xx + c * xx * xx

    def efficiency(self, x: Array | float) -> Array:
        xx = np.asarray(x, dtype=float)
        return np.where(xx > 0, xx / np.maximum(xx + self.loss(xx), 1e-12), 0.0)


def fit_loss(
    points: tuple[tuple[float, float], ...], square_law: float | None = None
) -> tuple[float, float, float]:
    """Least-squares (a, b, c) of loss(x) = a + b x + c x² through the points' losses.

    A point (x, η) says loss(x) = x (1/η − 1). With three or more points all three
    coefficients are fitted; with two, c is the source's square-law share. Coefficients
    come out non-negative or the curve is refused (a negative loss is not physical).
    """
    if any(not (0 < x <= 1.5 and 0 < e < 1) for x, e in points):
        raise ConfigError(
            f"efficiency points {points}: each needs a load fraction in (0, 1.5] and an "
            "efficiency in (0, 1)",
            fix="give efficiencies as fractions, e.g. 0.95",
        )
    xs = np.array([p[0] for p in points])
    ls = np.array([p[0] * (1.0 / p[1] - 1.0) for p in points])
    if square_law is not None:
        if len(points) < 2:
            raise ConfigError("an efficiency curve needs at least two points")
        m = np.stack([np.ones_like(xs), xs], axis=1)
        (a, b), *_ = np.linalg.lstsq(m, ls - square_law * xs * xs, rcond=None)
        c = square_law
    else:
        if len(points) < 3:
            raise ConfigError(
                "an efficiency curve with fewer than three points needs its square-law share",
                fix="add a point or set square_law",
            )
        m = np.stack([np.ones_like(xs), xs, xs * xs], axis=1)
        (a, b, c), *_ = np.linalg.lstsq(m, ls, rcond=None)
    if min(a, b, c) < -1e-9:
        # refit without the offending term (a published curve can be slightly non-convex)
        a, b, c = _nonnegative_fit(xs, ls)
    return float(max(a, 0.0)), float(max(b, 0.0)), float(max(c, 0.0))


def _nonnegative_fit(xs: Array, ls: Array) -> tuple[float, float, float]:
    from scipy.optimize import nnls

    m = np.stack([np.ones_like(xs), xs, xs * xs], axis=1)
    sol, _ = nnls(m, ls)
    return float(sol[0]), float(sol[1]), float(sol[2])


STAGES: dict[str, StageCurve] = {
    "transformer": StageCurve(
        "MV/LV dry-type transformer",
        "US DOE 10 CFR 431.196 (2016) medium-voltage dry-type, 2500 kVA: 99.0-99.2% at 50% load; "
        "core (no-load) loss about 0.2% and copper (square-law) loss about 1% of rating",
        ((0.5, 0.991), (1.0, 0.988)),
        square_law=0.010,
    ),
    "ups-double-conversion": StageCurve(
        "double-conversion (VFI) UPS, legacy",
        "Avelar, Schneider WP 108: 93% published at full load; Riello UPS: 20-25% load 'may only "
        "be capable of 85%'; WP 108: square-law losses 1-4% at high load (1% taken)",
        ((0.25, 0.85), (1.0, 0.93)),
        square_law=0.010,
    ),
    "ups-double-conversion-modern": StageCurve(
        "double-conversion (VFI) UPS, transformerless",
        "transformerless double-conversion datasheets (e.g. Schneider Galaxy VX, Eaton 93PM): "
        "about 95% at 25% load and 96% at 50-100% load",
        ((0.25, 0.95), (0.5, 0.96), (1.0, 0.96)),
    ),
    "ups-eco-mode": StageCurve(
        "eco-mode UPS (static bypass, inverter on standby)",
        "Riello UPS / Centiel: 98-99% in eco-mode (the datasheet figure); 98% at 25% load, 99% "
        "at full load",
        ((0.25, 0.98), (1.0, 0.99)),
        square_law=0.002,
    ),
    "hvdc-rectifier": StageCurve(
        "HVDC rectifier module (240/380 V DC, direct feed, battery on the bus)",
        "LBNL 'DC Power for Improved Data Center Efficiency' (2008) 380 V demonstration and "
        "Alibaba/Tencent 240 V HVDC: rectifier modules about 96% at 25% and 97% at 50-100% load",
        ((0.25, 0.96), (0.5, 0.97), (1.0, 0.97)),
    ),
    "pdu-transformer": StageCurve(
        "transformer-based PDU (480/208 V)",
        "Rasmussen, Schneider WP 113: PDU losses are mostly square-law; about 98% at full load and "
        "97% at 25% load for a transformer PDU",
        ((0.25, 0.97), (1.0, 0.98)),
        square_law=0.010,
    ),
    "busway": StageCurve(
        "busway / cabling to the rack",
        "I²R distribution loss about 0.5% at rated current (WP 113: wiring square-law losses)",
        ((0.5, 0.99875), (1.0, 0.995)),
        square_law=0.005,
    ),
}
"""The named stages. Efficiency points are as the source publishes them; see each `source`."""


class ChainSpec(Spec):
    """The power chain: which stages the IT load passes through, and their redundancy."""

    kind: Literal["hvdc", "double-conversion", "eco-mode", "double-conversion-modern"] = "hvdc"
    redundancy: str = Field("N+1", description="N, N+1, N+2, 2N, 2(N+1) of the UPS/HVDC modules")
    module_kw: float = Field(500.0, gt=0, description="one UPS / rectifier module's rating")
    module_shedding: bool = Field(
        True, description="switch idle modules off (HVDC shelves and modular UPSs do)"
    )
    design_margin: float = Field(
        1.0, ge=1.0, description="installed capacity over design IT load (before redundancy)"
    )
    mechanical_on_ups: bool = False

    @model_validator(mode="after")
    def _check(self) -> ChainSpec:
        parse_redundancy(self.redundancy)
        return self


def parse_redundancy(text: str) -> tuple[int, int]:
    """'N' → (1, 0), 'N+1' → (1, 1), '2N' → (2, 0), '2(N+1)' → (2, 1): (paths, spare modules)."""
    t = text.replace(" ", "").upper()
    paths = 1
    if t.startswith("2(") and t.endswith(")"):
        paths, t = 2, t[2:-1]
    elif t.startswith("2N"):
        paths, t = 2, t[1:]
    if t == "N":
        return paths, 0
    if t.startswith("N+") and t[2:].isdigit() and int(t[2:]) <= 8:
        return paths, int(t[2:])
    raise ConfigError(
        f"redundancy {text!r} is not N, N+k (k <= 8), 2N or 2(N+k)",
        fix="use e.g. N+1 or 2N",
    )


CHAIN_STAGES = {
    "hvdc": ("transformer", "hvdc-rectifier", "busway"),
    "double-conversion": ("transformer", "ups-double-conversion", "pdu-transformer"),
    "double-conversion-modern": ("transformer", "ups-double-conversion-modern", "busway"),
    "eco-mode": ("transformer", "ups-eco-mode", "pdu-transformer"),
}
"""Stages from the feed to the rack, per chain kind. HVDC feeds the racks directly (no UPS
stage: the battery floats on the DC bus)."""


@dataclass(frozen=True)
class ChainResult:
    """Hourly input power of the chain and its losses per stage."""

    input_w: Array
    loss_w: dict[str, Array]
    efficiency: Array
    modules_installed: int


def chain_input(
    spec: ChainSpec, it_w: Array, mech_w: Array, design_it_w: float, design_mech_w: float = 0.0
) -> ChainResult:
    """Utility input for IT load it_w and mechanical load mech_w (both W, hourly arrays).

    Walking from the rack back to the feed, each stage's load is the next stage's output
    plus its own loss. The conversion stage (UPS / rectifier) has modules of module_kw for
    design_it_w × design_margin plus the redundancy's spares, on one or two paths; the
    distribution stage of each path is rated for the whole design load; the transformer feeds
    the conversion stage and the mechanical plant and is rated for both designs.
    """
    if design_it_w <= 0:
        raise ConfigError("design IT load must be positive")
    paths, spare = parse_redundancy(spec.redundancy)
    cap_w = design_it_w * spec.design_margin
    mod_w = spec.module_kw * 1e3
    n_mod = max(1, math.ceil(cap_w / mod_w))
    installed = (n_mod + spare) * paths
    dist, conv, xfmr = (STAGES[n] for n in reversed(CHAIN_STAGES[spec.kind]))
    it = np.asarray(it_w, dtype=float)
    mech = np.asarray(mech_w, dtype=float)
    on_ups = it + (mech if spec.mechanical_on_ups else 0.0)
    losses: dict[str, Array] = {}
    # distribution: each path rated for the whole load, the load shared over the paths
    rating = cap_w + (design_mech_w if spec.mechanical_on_ups else 0.0)
    losses[dist.name] = dist.loss(on_ups / (paths * rating)) * paths * rating
    load = on_ups + losses[dist.name]
    # conversion: the active modules share the load
    if spec.module_shedding:
        # the fewest modules that carry the load at <= 80 % each, plus the spares, per path
        per_path = np.ceil(load / paths / (0.8 * mod_w)) + spare
        active = np.minimum(np.maximum(per_path, 1.0 + spare) * paths, installed)
    else:
        active = np.full(load.shape, float(installed))
    losses[conv.name] = conv.loss(load / (active * mod_w)) * active * mod_w
    load = load + losses[conv.name]
    # transformer: the conversion stage plus the mechanical plant when it is not on the UPS
    total = load + (0.0 if spec.mechanical_on_ups else mech)
    t_rating = cap_w + design_mech_w
    losses[xfmr.name] = xfmr.loss(total / (paths * t_rating)) * paths * t_rating
    inp = total + losses[xfmr.name]
    eff = np.where(inp > 0, (it + mech) / np.maximum(inp, 1e-9), 0.0)
    return ChainResult(input_w=inp, loss_w=losses, efficiency=eff, modules_installed=installed)
