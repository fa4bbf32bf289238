"""Configurations a framework ships and its vendor ran, asked of Seer's memory model.

`tests/data/shipped_configs/megatron_bridge_moe_perf.csv` transcribes every MoE workload of
Megatron-Bridge's performance scripts (v0.5.0: DeepSeek-V3, Qwen3-235B-A22B, Qwen3-30B-A3B on
H100, B200, B300, GB200, GB300) in the published-runs layout, without a published figure:
NVIDIA ran each with its stated recompute, so its peak fits in the GPU. Two questions per
configuration, through the path a published row takes (`validate.row_setup` and the same
fastest-that-fits search `seer validate` runs):

- **stated**: with the recompute the configuration states, does Seer find it fits?
- **open**: with the recompute cell UNVERIFIED (as a row that does not state it), which
  recompute does Seer choose, does that fit, and how does its step time compare with the
  stated one's?

A Seer that over-estimates Megatron MoE memory would find shipped configurations short, or
choose full recompute where NVIDIA runs selective or none (issue 32's held-out class).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starfabric.astral.seer import validate
from starfabric.errors import DataError

OPEN_RECOMPUTE = "UNVERIFIED"
"""The recompute cell of a row that does not state its recompute (`validate._choices`)."""


@dataclass(frozen=True)
class Answer:
    """Seer's fastest setting that fits (or, when none fits, its least-memory one)."""

    fits: bool
    peak_gib: float
    capacity_gib: float
    step_s: float
    recompute: str
    """"none", "full", or "selective (modules)" as chosen or stated."""
    choices: dict[str, Any]


@dataclass(frozen=True)
class ShippedCheck:
    """Both answers for one shipped configuration."""

    row_id: str
    stated_recompute: str
    stated: Answer
    open: Answer

    @property
    def open_vs_stated(self) -> float:
        """Relative step-time change from the stated recompute to Seer's own choice."""
        return self.open.step_s / self.stated.step_s - 1.0


def _recompute_text(opts: dict[str, Any]) -> str:
    rc = str(opts.get("recompute", "none"))
    mods = opts.get("recompute_modules") or ()
    return f"{rc} ({' '.join(mods)})" if rc == "selective" and mods else rc


def answer(row: dict[str, str], shipped: bool = False) -> Answer:
    """Seer's answer for one published-runs row: the fastest candidate that fits in memory,
    else the least-memory one, over the settings the row leaves open. `shipped` False (the
    audit's question: Seer's own choice): the settings are not taken from the matching
    shipped configuration (validate.row_setup, shipped_defaults)."""
    best, fallback, reason = validate.fastest_fitting(row, shipped)
    chosen = best or fallback
    if chosen is None:
        raise DataError(
            f"row {row.get('row_id', '?')}: no candidate could be predicted: {reason}",
            fix="check the row's GPU and parallel columns",
        )
    step_s, pred, opts, _ = chosen
    mem = pred.memory
    return Answer(
        fits=best is not None,
        peak_gib=mem.total / 2**30,
        capacity_gib=mem.capacity / 2**30,
        step_s=step_s,
        recompute=_recompute_text(opts),
        choices={k: v for k, v in opts.items() if k not in ("recompute", "recompute_modules")},
    )


def check(row: dict[str, str]) -> ShippedCheck:
    """The stated and the open answer for one shipped configuration."""
    return ShippedCheck(
        row_id=row["row_id"],
        stated_recompute=row.get("recompute") or "",
        stated=answer(row),
        open=answer({**row, "recompute": OPEN_RECOMPUTE}),
    )


__all__ = ["OPEN_RECOMPUTE", "Answer", "ShippedCheck", "answer", "check"]
