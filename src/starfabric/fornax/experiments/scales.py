"""The three sizes every experiment runs at: `ci` (seconds, for tests), `default` (a few
minutes) and `paper` (16M sessions, 100k CPS: the Fornax paper's largest table)."""

from __future__ import annotations

from dataclasses import dataclass

from starfabric.errors import ConfigError


@dataclass(frozen=True)
class Scale:
    """Sizes, rates and simulated durations of one scale (every value is an assumption of
    ours except paper's 16M sessions and 100k CPS, Fornax §abstract/§evaluation)."""

    name: str
    sizes: tuple[int, ...]
    """E1/E2 table sizes (live sessions)."""
    cps: float
    """New connections per simulated second during measurements (E2, E5, E8, E9)."""
    measure_s: float
    """Simulated seconds of traffic per measurement (covers several revalidation periods)."""
    table: int
    """Background sessions of the full-table experiments (E3-E6, E8, E9)."""
    e3_cps: tuple[float, ...]
    """CPS levels E3 climbs on one filled table (each `probe_s` long)."""
    probe_s: float
    e4_timeouts: tuple[float, ...]
    """Idle timeouts (s) E4 sweeps."""
    e5_fractions: tuple[float, ...]
    """Fractions of sessions an E5 policy update touches."""
    surge_base_cps: float
    surge_s: float
    """E6: x10 the base CPS for this long (paper: 10 s)."""
    hero_sessions: int
    """SONiC-DASH hero test steady-state table (half TCP, half UDP; DASH: 15M + 15M): reached
    by CPS = hero_sessions / 5 s aging."""
    hero_s: float
    """Simulated seconds of the hero test (DASH: 100 s; longer than the 5 s aging)."""
    mirror_max_sessions: int | None = None
    """Largest table a contender with a per-flow mirror (OVS-like) runs at (None: no cap of
    the scale's own; a contender that would not fit the machine's available memory is left
    out regardless, see harness.MEMORY_HEADROOM)."""


SCALES: dict[str, Scale] = {
    "ci": Scale(
        name="ci", sizes=(1 << 13, 1 << 15, 1 << 17), cps=2000.0, measure_s=1.0, table=1 << 14,
        e3_cps=(1e3, 4e3, 16e3, 64e3, 256e3), probe_s=0.2, e4_timeouts=(0.3, 1.0),
        e5_fractions=(0.25, 1.0), surge_base_cps=2000.0, surge_s=0.5,
        hero_sessions=1 << 13, hero_s=6.0,
    ),
    "default": Scale(
        name="default", sizes=(1 << 17, 1 << 19, 1 << 21), cps=20000.0, measure_s=2.0,
        table=1 << 20, e3_cps=(1e4, 3e4, 1e5, 3e5, 1e6, 3e6), probe_s=0.2,
        e4_timeouts=(0.5, 1.0, 2.0), e5_fractions=(0.1, 0.5, 1.0), surge_base_cps=20000.0,
        surge_s=2.0, hero_sessions=1 << 19, hero_s=6.0,
    ),
    "paper": Scale(
        name="paper", sizes=(1 << 20, 1 << 21, 1 << 22, 1 << 24), cps=100000.0, measure_s=2.0,
        table=1 << 24, e3_cps=(1e4, 3e4, 1e5, 3e5, 1e6, 3e6), probe_s=0.2,
        e4_timeouts=(1.0, 2.0, 5.0), e5_fractions=(0.1, 0.5, 1.0), surge_base_cps=100000.0,
        surge_s=10.0, hero_sessions=1 << 24, hero_s=6.0,
    ),
}  # fmt: skip


def get_scale(name: str) -> Scale:
    """The named scale, or a one-line ConfigError."""
    if name not in SCALES:
        raise ConfigError(f"--scale = {name!r}: not a scale", fix=f"use one of {', '.join(SCALES)}")
    return SCALES[name]


__all__ = ["SCALES", "Scale", "get_scale"]
