"""How far a row's unstated settings alone move Seer's prediction (`seer validate --spread`).

Where a published run leaves a setting unstated (micro-batch, recompute, ZeRO stage, VPP, an
UNVERIFIED parallel degree, the MoE dispatcher, ...), `validate.validate_row` predicts it at
the fastest setting that fits in memory — what a tuning user of the framework runs. A user
judging a miss needs to know how much of it those settings alone could explain: the spread is
the range of signed errors over every memory-feasible combination of the settings Seer chose
(`validate.Alternative`, read from the same search's predictions: no enumeration of its own),
and whether the published figure lies inside it (the range straddles zero). Settings the row
states are never varied. The spread is information; the headline error stays Seer's single
prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starfabric.astral.seer.degrees import DEGREES
from starfabric.astral.seer.validate import Alternative, RowResult
from starfabric.errors import ConfigError

SPREAD_MAX_CANDIDATES = 512
"""Assumption: memory-feasible combinations a row's spread compares at most. Above it the spread
takes the combinations that change one open setting at a time from Seer's choice (`_one_away`;
a parallel layout counts as one setting, recompute with its module set as one), which grows
with the sum of the settings' candidate counts, not their product. The search itself predicts
each combination once (about 15 ms each on the development machine: development_runs_2.csv's
3,293 candidates in 48 s), so 512 is ~8 s of search per row; the largest row of the bundled
tables has 336 candidates (LLAMA1-01), so no row there is cut. Override: `--spread-cap`."""

EVERY = "every combination"
"""`Spread.enumeration` when every memory-feasible combination is compared."""
ONE_AWAY = "one setting at a time"
"""`Spread.enumeration` when a row has more combinations than the cap (`_one_away`)."""
NONE_FITS = "none fits in memory"
"""`Spread.enumeration` when no combination fits (Seer used its least-memory setting)."""

_GROUPS = {**{d: "layout" for d in (*DEGREES, "etp")}, "recompute_modules": "recompute"}
"""Settings that change together: a parallel layout's degrees; recompute and its modules."""


@dataclass(frozen=True)
class Spread:
    """One row's spread: Seer's error and the range its open settings span."""

    row_id: str
    source: str
    error: float
    """Seer's headline error (its chosen setting)."""
    feasible: int
    """Memory-feasible combinations of the row's open settings."""
    compared: tuple[Alternative, ...]
    """The combinations the range is taken over (all feasible, or `_one_away` above the cap)."""
    enumeration: str

    @property
    def low(self) -> Alternative | None:
        """The combination with the lowest error (the fastest, for a fixed published figure)."""
        return min(self.compared, key=lambda a: a.error, default=None)

    @property
    def high(self) -> Alternative | None:
        """The combination with the highest error (the slowest that fits)."""
        return max(self.compared, key=lambda a: a.error, default=None)

    @property
    def closest(self) -> Alternative | None:
        """The combination whose error is nearest zero."""
        return min(self.compared, key=lambda a: abs(a.error), default=None)

    @property
    def contains_published(self) -> bool:
        """True when the published figure lies inside [low, high] (the range straddles 0)."""
        lo, hi = self.low, self.high
        return lo is not None and hi is not None and lo.error <= 0.0 <= hi.error

    @property
    def varied(self) -> list[str]:
        """The open settings that take more than one value across the compared combinations."""
        keys = sorted({k for a in self.compared for k in a.settings})
        return [k for k in keys if len({repr(a.settings.get(k)) for a in self.compared}) > 1]

    def reaches(self, bound: float) -> bool:
        """True when the range [low, high] comes within `bound` of the published figure."""
        lo, hi = self.low, self.high
        return lo is not None and hi is not None and lo.error <= bound and hi.error >= -bound

    def as_dict(self) -> dict[str, Any]:
        """JSON fields (`seer validate --spread --json`: each row's "spread")."""

        def end(a: Alternative | None) -> dict[str, Any] | None:
            return None if a is None else {"error": a.error, "settings": a.settings}

        return {
            "enumeration": self.enumeration,
            "feasible": self.feasible,
            "compared": len(self.compared),
            "varied": self.varied,
            "low": end(self.low),
            "high": end(self.high),
            "closest": end(self.closest),
            "contains_published": self.contains_published,
        }


def _group(key: str) -> str:
    return _GROUPS.get(key, key)


def _one_away(alts: Sequence[Alternative]) -> tuple[Alternative, ...]:
    """Seer's choice and the combinations that differ from it in one setting group only."""
    mine = next((a for a in alts if a.chosen), None)
    if mine is None:
        return ()
    keys = set(mine.settings).union(*(a.settings for a in alts))

    def groups_changed(a: Alternative) -> int:
        return len({_group(k) for k in keys if a.settings.get(k) != mine.settings.get(k)})

    return tuple(a for a in alts if groups_changed(a) <= 1)


def row_spread(result: RowResult, cap: int = SPREAD_MAX_CANDIDATES) -> Spread:
    """The spread of one row validated with `alternatives=True` (`validate.validate_row`)."""
    if cap < 1:
        raise ConfigError(f"spread cap {cap}: must be at least 1", fix="give a cap of 1 or more")
    alts = result.alternatives
    compared: tuple[Alternative, ...]
    if not alts:
        compared, how = (), NONE_FITS
    elif len(alts) <= cap:
        compared, how = alts, EVERY
    else:
        compared, how = _one_away(alts), ONE_AWAY
    return Spread(result.row_id, result.source, result.error, len(alts), compared, how)


def spread_summary(spreads: Sequence[Spread], cap: int) -> dict[str, Any]:
    """Per source and in all: rows, rows whose range contains the published figure, rows whose
    range lies wholly above or below it, rows with no feasible combination."""

    def count(group: Sequence[Spread]) -> dict[str, int]:
        inside = sum(s.contains_published for s in group)
        above = sum(s.low is not None and s.low.error > 0 for s in group)
        below = sum(s.high is not None and s.high.error < 0 for s in group)
        return {"rows": len(group), "contains_published": inside, "all_slower": above,
                "all_faster": below, "none_fits": len(group) - inside - above - below}  # fmt: skip

    sources = sorted({s.source for s in spreads})
    return {
        "max_candidates": cap,
        "all": count(spreads),
        "per_source": {src: count([s for s in spreads if s.source == src]) for src in sources},
    }


__all__ = [
    "EVERY",
    "NONE_FITS",
    "ONE_AWAY",
    "SPREAD_MAX_CANDIDATES",
    "Spread",
    "row_spread",
    "spread_summary",
]
