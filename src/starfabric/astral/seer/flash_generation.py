"""Fused-attention kernels of the generation before FlashAttention-2 (mid-2022 to mid-2023).

A100 runs of 2022-23 that name a fused attention kernel ran FlashAttention 1.x, xformers'
memory-efficient attention (its "cutlass" kernels) or the Triton FlashAttention — not
FlashAttention-2, released as flash-attn 2.0.0 on 2023-07-17 (`FA2_RELEASE`). Seer's A100
fused-attention fractions are FlashAttention-2's (they reproduce Table 1 of the FlashAttention-2
paper, Dao 2023, within 3%: `tests/astral/seer/test_flash_generation.py`); the older kernels run
at FA2's rate divided by `PRE_FA2_SPEEDUP`, the speedups that paper measured on A100 80GB SXM4
(section 4.1): FlashAttention-2 is "around 2x faster than FlashAttention and FlashAttention in
xformers (the 'cutlass' implementation)", and "around 1.3-1.5x faster than FlashAttention in
Triton in the forward pass and around 2x faster in the backward pass".

A row's kernel is read from its framework cell (`pre_fa2_kernel`): a version named with the
kernel ("FlashAttention v1.0.5", "flash-attn 1.0") decides by itself; an unversioned
FlashAttention / xformers / Triton FlashAttention is the older kernel only when the run is dated
before FA2's release — by a YYYY-MM in the framework cell or, as an upper bound, the arXiv month
of the paper that reports it (a run published in 2023-05 cannot have used a July 2023 kernel), or
a bare year before 2023 ("2022"). A bare year 2023 decides nothing and the row keeps
FlashAttention-2.

On Hopper and later an older kernel gets the same ratio on top of FA2's (`cost.fa2_rate`);
the paper measured it on A100 only, and no development row runs FlashAttention 1.x on Hopper.
"""

from __future__ import annotations

import re

from starfabric.astral.seer import mcore_release, releases
from starfabric.astral.seer.statements import stated

FA2_RELEASE = (2023, 7)
"""flash-attn 2.0.0 (github.com/Dao-AILab/flash-attention, tag v2.0.0, 2023-07-17)."""

PRE_FA2_SPEEDUP: dict[str, tuple[float, float]] = {
    "fa1": (2.0, 2.0),
    "xformers": (2.0, 2.0),
    "triton": (1.4, 2.0),
}
"""FlashAttention-2's speed over each older kernel, (forward, backward), on A100 (Dao 2023,
arXiv:2307.08691, section 4.1): "around 2x" over FlashAttention 1.x and xformers' cutlass
kernels in both passes; over the Triton FlashAttention "1.3-1.5x" forward and "around 2x"
backward (taking the midpoint 1.4 of the forward range is an assumption)."""

KERNEL_NAMES = tuple(PRE_FA2_SPEEDUP)
"""The `ExecutionSpec.flash_kernel` values of this generation."""

_FLASH_WORD = r"flash[-_ ]?(?:attn|attention)"
_FA2_NAMED = re.compile(
    _FLASH_WORD + r"[-_ ]?(?:==\s*)?\(?(?:v|version )?2(?![\d])|\bfa-?v?2\b", re.I
)
_FA1_NAMED = re.compile(
    _FLASH_WORD + r"[-_ ]?(?:==\s*)?\(?(?:v|version )?(?:1\.\d|1\b|0\.\d)|\bfa-?v?1\b", re.I
)
_FLASH = re.compile(_FLASH_WORD + r"|\bfa-?v?[123]\b", re.I)
_FLASH_ANY = re.compile(_FLASH.pattern + r"|\bflash\b", re.I)
_XFORMERS = re.compile(r"x-?formers|memory[- ]efficient attention \(cutlass\)", re.I)
_TRITON_FLASH = re.compile(r"triton", re.I)


def kernel_rates(kernel: str) -> tuple[float, float]:
    """(forward, backward) rate of `kernel` relative to FlashAttention-2's (1, 1 for FA2 and
    cuDNN, whose rates the efficiency tables already hold)."""
    fwd, bwd = PRE_FA2_SPEEDUP.get(kernel, (1.0, 1.0))
    return 1.0 / fwd, 1.0 / bwd


def run_month(framework: str, citation: str) -> tuple[int, int] | None:
    """The month a run's software is known to predate: a YYYY-MM the framework cell states,
    else the arXiv month of the citation (the report comes after the run)."""
    stated = releases.stated_month(framework)
    if stated is not None:
        return stated
    arxiv = mcore_release.published_month(citation)
    if arxiv is not None:
        return arxiv
    year = releases.stated_year(framework)
    if year is not None and year < FA2_RELEASE[0]:
        return year, 12  # a bare year before FA2's: its last month bounds it
    return None


def names_flash(framework: str | None) -> bool:
    """Whether a framework cell names a FlashAttention kernel, not negated ("FlashAttention",
    "flash_attn", "FA2"; "without FlashAttention" is not)."""
    return bool(stated(_FLASH_ANY, framework))


def pre_fa2_kernel(framework: str, citation: str = "", notes: str = "") -> str | None:
    """The pre-FlashAttention-2 kernel a row's framework (or notes) cell names
    (`KERNEL_NAMES`), or None (no fused kernel named, FlashAttention-2 named, or nothing dates
    the run before FA2: the date is read from the framework cell and the citation only)."""
    fw = framework + " ; " + notes
    if stated(_FA2_NAMED, fw):
        return None
    if stated(_FA1_NAMED, fw):
        return "fa1"
    flash = stated(_FLASH, fw)
    if stated(_XFORMERS, fw):
        kernel = "xformers"
    elif stated(_TRITON_FLASH, fw) and flash:
        kernel = "triton"
    elif flash:
        kernel = "fa1"
    else:
        return None  # none named, or named only negated ("without FlashAttention")
    month = run_month(framework, citation)
    return kernel if month is not None and month < FA2_RELEASE else None


__all__ = [
    "FA2_RELEASE",
    "KERNEL_NAMES",
    "PRE_FA2_SPEEDUP",
    "kernel_rates",
    "names_flash",
    "pre_fa2_kernel",
    "run_month",
]
