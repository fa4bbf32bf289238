"""The FP4 training format a precision cell states: Seer's one reader of "does this row train in FP4".

Every reader of a precision cell that must know about FP4 asks `stated_fp4`: validate (NVFP4
rows are priced by seer/nvfp4.py, MXFP4 rows at the FP8 rate), fp8_recipe (an FP4 cell names no
FP8 recipe) and shipped_defaults (the precision class matched against Megatron-Bridge's
configurations). Before session 22 each held its own pattern and they disagreed on "MX-FP4",
"mx_fp4", "--fp4-format" and on negated mentions ("no FP4" was FP4 to shipped_defaults).

**Spellings.** A mention is "FP4" as its own token, optionally with a format prefix "NV"/"MX"
joined to it directly, by "-", "_" or spaces ("NVFP4", "nv-fp4", "nv_fp4", "NV FP4", "MXFP4",
"MX-FP4", "mx_fp4"), or with the format as a suffix the way Megatron-Bridge abbreviates FP8
recipes ("FP4-MX", "fp4_mx", "FP4 (MX)"; fp8_recipe reads "FP8 (MX)" so). The token may sit
inside an identifier ("bf16_with_nvfp4_mixed", TE's `NVFP4BlockScaling`, Megatron-Core's
`--fp4-format e2m1`, `fp4_param_gather`, which only FP4 training uses); a letter or digit
right before it ("xfp4") or a digit right after ("fp40") is not FP4. "E2M1" (the 4-bit element
type of both NVFP4 and MXFP4) only qualifies an FP4 mention ("FP4 (E2M1)", "fp4 e2m1"; read as
part of it, so "FP4 (E2M1) disabled" is negated): alone it states no format, as
`cells.precision` does not read it as a precision either.

**Negations.** A negated mention is not a statement of FP4 (`statements.negated_at`, the rule
every cell reader uses: "no FP4", "without NVFP4", "not MXFP4", "FP4 disabled", "NVFP4 off",
"fp4: no"). `cells.precision` reads "fp4" with the same rule, so a cell this reader calls FP4 is
an FP8-class precision cell there (tests/astral/seer/test_fp4_format.py checks it).
A reference of a comparison ("vs. NVFP4") is not treated specially: `cells.precision` does not,
and the two must agree.

**Which format.** An affirmed MXFP4 mention makes the cell MXFP4 (also beside an affirmed
NVFP4 one: the format Seer does not price faster wins, so a cell naming both is never timed
faster than it may have run). Otherwise an affirmed NVFP4 mention makes it NVFP4. A bare
"FP4" means NVFP4 (`BARE_FP4`), unless the cell denies NVFP4 ("FP4, not NVFP4"): then it names
an FP4 format other than NVFP4 and reads as MXFP4, the other FP4 training format (OCP
Microscaling Formats v1.0), timed at the FP8 rate as any FP4 recipe Seer does not price is
(megatron_cli keeps the FP8 rate for `--fp4-recipe custom` too).
"""

from __future__ import annotations

import re
from typing import Literal

from starfabric.astral.seer.statements import negated_at

Fp4Format = Literal["nvfp4", "mxfp4"]
"""The FP4 formats a cell can state: NVFP4 (priced, seer/nvfp4.py) and MXFP4 (FP8 rate)."""

BARE_FP4: Fp4Format = "nvfp4"
"""What a bare "FP4" (no NV/MX) means. Source: Megatron-Core `megatron/training/arguments.py`
(core_v0.17.1, the release megatron_cli reads): `--fp4-format e2m1` is "Which nvfp4 format
scheme to use for FP4 tensors" and `--fp4-recipe` defaults to "nvfp4" (its other choice,
"custom", is a user's own quantizer factory); Transformer Engine's one FP4 training recipe is
`NVFP4BlockScaling` (TE `transformer_engine/common/recipe/__init__.py` @d0067d0). A published
"FP4" training run on these stacks is NVFP4."""

FP4_MENTION = re.compile(
    r"(?<![a-z0-9])(?:(?P<pre>nv|mx)(?:[-_]|\s+)?)?fp4(?!\d)"
    r"(?:(?:[-_ ]?|\s*\(\s*)(?P<post>nv|mx)(?![a-z0-9])(?:\s*\))?)?"
    r"(?:[-_ ]?e2m1\b|\s*\(\s*e2m1\s*\))?",
    re.I,
)
"""One FP4 mention with its optional NV/MX prefix or suffix and E2M1 qualifier, which belongs
to the mention so that a negation after it reaches it ("FP4 (E2M1) disabled"; module
docstring, Spellings)."""


def _named(m: re.Match[str]) -> str | None:
    """'mx', 'nv' or None (bare) for one mention; MX wins where a mention carries both."""
    tags = {(m.group(g) or "").lower() for g in ("pre", "post")}
    return "mx" if "mx" in tags else "nv" if "nv" in tags else None


def stated_fp4(text: str | None) -> Fp4Format | None:
    """The FP4 format a precision cell states, or None when it states none (no mention, or
    only negated ones). Rules and sources in the module docstring: MXFP4 affirmed -> "mxfp4";
    NVFP4 affirmed -> "nvfp4"; a bare "FP4" -> `BARE_FP4` unless NVFP4 is denied in the cell
    ("mxfp4" then)."""
    cell = text or ""
    affirmed: set[str | None] = set()
    denied: set[str | None] = set()
    for m in FP4_MENTION.finditer(cell):
        (denied if negated_at(cell, m.start(), m.end()) else affirmed).add(_named(m))
    if "mx" in affirmed:
        return "mxfp4"
    if "nv" in affirmed:
        return "nvfp4"
    if None in affirmed:
        return "mxfp4" if "nv" in denied else BARE_FP4
    return None


__all__ = ["BARE_FP4", "FP4_MENTION", "Fp4Format", "stated_fp4"]
