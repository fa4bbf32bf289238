"""The Megatron-Core release a published run can have used, and what that release did not have.

A row names its Megatron-Core release ("Megatron-Core v0.9") or only the stack and a paper: a
run reported in a paper ran software released by the paper's month, so the newest
Megatron-Core release out then (`releases.MEGATRON_CORE`, tag dates) bounds what it had. The
arXiv identifier of the row's citation (YYMM.NNNNN) dates the paper. Two Megatron-Core
behaviours change at a known release (NVIDIA/Megatron-LM):

- `--recompute-modules` (core_attn, moe_act, layernorm, mla_up_proj, mlp, moe): commit
  3b141a2471 (2025-04-05, "Add output-discarding recomputation method"), first tagged in
  core_v0.12.0. Before it, selective recompute is the attention core only
  (`--recompute-granularity selective`) and the whole MoE layer (`--moe-layer-recompute`,
  since e61c384101, 2024-05-01, core_r0.7).
- The MoE unpermutation keeps the expert output for the router-probability gradient:
  `moe_utils.unpermute` multiplies the returned tokens by their probabilities
  (`permuted_tokens * permuted_probs.unsqueeze(-1)`, core_v0.11.0), so autograd saves the k
  token copies of the combine, 16-bit, per token. Commit 2659630721 (2025-04-09, "Memory
  efficient token permutation") applies the probabilities inside the expert activation
  instead; first tagged in core_v0.13.0.

- The MXFP8 recipe runs FP8 attention: `fp8_utils.get_fp8_recipe` builds
  `MXFP8BlockScaling(fp8_format=...)` without `fp8_dpa` up to core_v0.17.1, so
  `--fp8-dot-product-attention` (MLPerf / NeMo `FP8_DPA`) leaves attention in BF16 under MXFP8
  GEMMs; commit 22e0bb5fd1 (2026-04-09, "Enable FP8 DPA for MXFP8 recipe", PR #4066) passes
  `fp8_dpa=config.fp8_dot_product_attention`, first tagged in core_v0.18.0 (and the
  26.04-alpha release candidates).

Rows that name no release and cite no dated paper, and stacks that are not Megatron-Core, get
None: the caller keeps the current release's behaviour.
"""

from __future__ import annotations

import re

from starfabric.astral.seer import releases

Release = tuple[int, int]

RECOMPUTE_MODULES_SINCE: Release = (0, 12)
"""First Megatron-Core release with `--recompute-modules` (commit 3b141a2471, core_v0.12.0)."""
UNPERMUTE_KEEPS_OUTPUT_BEFORE: Release = (0, 13)
"""First Megatron-Core release whose unpermutation no longer saves the expert output for the
probability gradient (commit 2659630721, core_v0.13.0)."""

MXFP8_DPA_SINCE: Release = (0, 18)
"""First Megatron-Core release whose MXFP8 recipe passes fp8_dpa to Transformer Engine (commit
22e0bb5fd1, core_v0.18.0); before it FP8 attention stays BF16 under MXFP8 GEMMs."""

_MCORE_STACK = re.compile(r"megatron[- ]?core|\bmcore\b", re.I)
_ARXIV = re.compile(r"arxiv(?:\.org/(?:abs|pdf)/|[:\s]*)(\d\d)(0[1-9]|1[0-2])\.\d{4,5}", re.I)
"""An arXiv identifier as a citation writes it: "arXiv:2504.14960", "arXiv 2504.14960",
"arxiv.org/abs/2504.14960"."""


def published_month(citation: str | None) -> releases.YearMonth | None:
    """(year, month) of the first arXiv identifier a citation cell names (2504.14960 → 2025-04),
    the paper that reports the run; None without one."""
    m = _ARXIV.search(citation or "")
    return (2000 + int(m.group(1)), int(m.group(2))) if m else None


def newest_release_by(month: releases.YearMonth) -> Release | None:
    """The newest Megatron-Core release tagged in or before `month`; None if none was."""
    out = [ver for ver, when in releases.MEGATRON_CORE.items() if when <= month]
    return max(out) if out else None


def megatron_core_release(framework: str | None, citation: str | None) -> Release | None:
    """The newest Megatron-Core release a row's run can have used: the version its framework
    cell names, else the newest released by its paper's month (`published_month`); None when
    the stack is not Megatron-Core, nothing dates it, or the framework cell dates the run
    after the paper (a later run of the paper's model, not the one it reports)."""
    fw = framework or ""
    named = releases.named_megatron_core(fw)
    if named:
        return named
    if not _MCORE_STACK.search(fw):
        return None
    month = published_month(citation)
    if month is None:
        return None
    stated = releases.stated_month(fw)
    year = releases.stated_year(fw)
    if (stated and stated > month) or (year is not None and year > month[0]):
        return None  # the cell dates the run after the paper: the paper does not report it
    return newest_release_by(month)


def offers_recompute_modules(release: Release | None) -> bool:
    """Whether `--recompute-modules` exists in the release (unknown release: yes)."""
    return release is None or release >= RECOMPUTE_MODULES_SINCE


def unpermute_keeps_output(release: Release | None) -> bool:
    """Whether the release's MoE unpermutation saves the expert output (unknown: no)."""
    return release is not None and release < UNPERMUTE_KEEPS_OUTPUT_BEFORE


def mxfp8_runs_fp8_attention(release: Release | None) -> bool:
    """Whether the release's MXFP8 recipe turns on FP8 attention when a run asks for it
    (unknown release: yes, the current behaviour)."""
    return release is None or release >= MXFP8_DPA_SINCE


__all__ = [
    "MXFP8_DPA_SINCE",
    "RECOMPUTE_MODULES_SINCE",
    "UNPERMUTE_KEEPS_OUTPUT_BEFORE",
    "megatron_core_release",
    "mxfp8_runs_fp8_attention",
    "newest_release_by",
    "offers_recompute_modules",
    "published_month",
    "unpermute_keeps_output",
]
