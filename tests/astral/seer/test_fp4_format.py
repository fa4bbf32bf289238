"""seer/fp4_format.py: the one FP4 reader of a precision cell, and its three callers agreeing.

Before session 22 three detectors read FP4 from a precision cell: fp8_recipe's and
shipped_defaults' `\\bfp4\\b|nvfp4|mxfp4` (the first negation-aware through `statements.stated`,
the second a plain search whose first match chose the format) and nvfp4.stated_fp4 (separate
MX and NV patterns, negation-aware). They disagreed on these cells (`OLD` below re-runs them):

- "nv_fp4", "mx_fp4": fp8_recipe and shipped_defaults saw no FP4 ("_" is a word character, so
  `\\bfp4\\b` missed it); nvfp4 read both as NVFP4 (its MX pattern took only "-"/spaces, its
  bare pattern then matched). Now NVFP4 and MXFP4.
- "MX-FP4", "MX FP4": shipped_defaults classed them NVFP4 (its first match was the bare "FP4",
  which has no "mx"); nvfp4 said MXFP4. Now MXFP4.
- "no FP4", "without NVFP4", "FP4 disabled", "not MXFP4", "MXFP4 off", "FP8 current scaling,
  not FP4", "FP8 (fp4: no)": shipped_defaults classed them FP4 (no negation reading); the
  other two read no FP4. Now no FP4 (a negated mention states nothing).
- "--fp4-format e2m1": fp8_recipe and shipped_defaults read FP4; nvfp4 read none (its bare
  pattern refused a "-" before "fp4" so as not to read "MX-FP4" as NVFP4). Now NVFP4, as
  megatron_cli reads the flag.

Where all three read alike but the behaviour is now decided otherwise:
- "FP4 (MX)", "FP4-MX", "fp4_mx": the format as a suffix (as fp8_recipe reads "FP8 (MX)"):
  MXFP4 (before: NVFP4 / FP4, or nothing for "fp4_mx").
- "FP4, not NVFP4": a bare FP4 whose cell denies NVFP4 is not NVFP4: MXFP4, timed at the FP8
  rate (before: NVFP4).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import cells, fp8_recipe, shipped_defaults
from starfabric.astral.seer.fp4_format import BARE_FP4, stated_fp4
from starfabric.astral.seer.statements import stated
from starfabric.astral.seer.validate import FP4_AS_FP8, NVFP4_READ, row_setup

RUNS = Path(__file__).parents[2] / "data" / "published_runs"

# The three detectors as they stood at b567f99, kept here only to compare against.
_OLD_EITHER = re.compile(r"\bfp4\b|nvfp4|mxfp4", re.I)
_OLD_MX = re.compile(r"mx-?\s*fp4", re.I)
_OLD_NV = re.compile(r"nv-?\s*fp4|(?<![a-z0-9-])fp4\b", re.I)


def _old_fp8_recipe(cell: str) -> bool:
    return bool(stated(_OLD_EITHER, cell))


def _old_shipped(cell: str) -> str | None:
    m = _OLD_EITHER.search(cell)
    return None if m is None else ("mxfp4" if "mx" in m.group(0).lower() else "nvfp4")


def _old_nvfp4(cell: str) -> str | None:
    if stated(_OLD_MX, cell):
        return "mxfp4"
    return "nvfp4" if stated(_OLD_NV, cell) else None


OLD = {"fp8_recipe": _old_fp8_recipe, "shipped_defaults": _old_shipped, "nvfp4": _old_nvfp4}


@pytest.mark.parametrize(
    ("cell", "old", "new"),
    [
        # (cell, (old fp8_recipe saw FP4, old shipped_defaults class, old nvfp4), new)
        ("nv_fp4", (False, None, "nvfp4"), "nvfp4"),
        ("mx_fp4", (False, None, "nvfp4"), "mxfp4"),
        ("MX-FP4", (True, "nvfp4", "mxfp4"), "mxfp4"),
        ("MX FP4", (True, "nvfp4", "mxfp4"), "mxfp4"),
        ("no FP4", (False, "nvfp4", None), None),
        ("without NVFP4", (False, "nvfp4", None), None),
        ("FP4 disabled", (False, "nvfp4", None), None),
        ("not MXFP4", (False, "mxfp4", None), None),
        ("MXFP4 off", (False, "mxfp4", None), None),
        ("FP8 current scaling, not FP4", (False, "nvfp4", None), None),
        ("FP8 (fp4: no)", (False, "nvfp4", None), None),
        ("--fp4-format e2m1", (True, "nvfp4", None), "nvfp4"),
        ("FP4 (MX)", (True, "nvfp4", "nvfp4"), "mxfp4"),
        ("FP4-MX", (True, "nvfp4", "nvfp4"), "mxfp4"),
        ("fp4_mx", (False, None, None), "mxfp4"),
        ("FP4, not NVFP4", (True, "nvfp4", "nvfp4"), "mxfp4"),
    ],
)
def test_where_the_old_detectors_disagreed(
    cell: str, old: tuple[bool, str | None, str | None], new: str | None
) -> None:
    assert (OLD["fp8_recipe"](cell), OLD["shipped_defaults"](cell), OLD["nvfp4"](cell)) == old
    assert stated_fp4(cell) == new


@pytest.mark.parametrize(
    ("cell", "fmt"),
    [
        ("NVFP4", "nvfp4"),
        ("nv-fp4", "nvfp4"),
        ("NV FP4", "nvfp4"),
        ("MXFP4", "mxfp4"),
        ("FP4", BARE_FP4),
        ("fp4 e2m1", BARE_FP4),
        ("FP4 (E2M1)", BARE_FP4),
        ("NVFP4 (Transformer Engine NVFP4 GEMMs)", "nvfp4"),
        ("TE NVFP4BlockScaling", "nvfp4"),
        ("bf16_with_nvfp4_mixed", "nvfp4"),
        ("MXFP4 weights", "mxfp4"),
        ("MXFP4 weights, NVFP4 GEMMs", "mxfp4"),  # both affirmed: MXFP4 (never timed faster)
        ("NVFP4 GEMMs, MXFP4 weights", "mxfp4"),
        ("NVFP4 (not MXFP4)", "nvfp4"),
        ("FP4 (not MXFP4)", "nvfp4"),
        ("FP8 (Transformer Engine)", None),
        ("E2M1", None),  # the element type alone names no format
        ("xfp4", None),
        ("fp40", None),
        ("", None),
        (None, None),
    ],
)
def test_spellings(cell: str | None, fmt: str | None) -> None:
    assert stated_fp4(cell) == fmt


def test_a_bare_fp4_is_nvfp4_megatron_cores_default_recipe() -> None:
    assert BARE_FP4 == "nvfp4"


# Phrasings: an FP4 mention in one of its spellings, set in a cell between texts that name no
# FP4 format and negate nothing.
_NV = st.builds(
    "{}{}{}".format, st.sampled_from(["nv", "NV", "Nv"]),
    st.sampled_from(["", "-", "_", " "]), st.sampled_from(["fp4", "FP4", "Fp4"]),
)  # fmt: skip
_MX_PREFIX = st.builds(
    "{}{}{}".format, st.sampled_from(["mx", "MX", "Mx"]),
    st.sampled_from(["", "-", "_", " "]), st.sampled_from(["fp4", "FP4"]),
)  # fmt: skip
_MX_SUFFIX = st.builds(
    "{}{}".format, st.sampled_from(["FP4", "fp4"]),
    st.sampled_from(["-MX", "_mx", " (MX)", "(mx)", " mx"]),
)  # fmt: skip
_MX = st.one_of(_MX_PREFIX, _MX_SUFFIX)
_BARE_WORDS = ["FP4", "fp4", "Fp4", "FP4 (E2M1)", "fp4 e2m1"]
_BARE = st.sampled_from([*_BARE_WORDS, "--fp4-format e2m1"])
_BEFORE = st.sampled_from(["", "Megatron-Core ", "trained in ", "BF16 attention; ", "TE 2.9, "])
_AFTER = st.sampled_from(["", " GEMMs", " (16-value blocks)", "; attention FP8 current scaling"])
_NEG_BEFORE = st.sampled_from(["no ", "not ", "without ", "w/o ", "never ", "disabled "])
_NEG_AFTER = st.sampled_from([" disabled", " off", ": no", " = false", " (off)", "=0"])
_AFTER_NEG = st.sampled_from(["", "; BF16 elsewhere", ", FP8 current scaling"])


def _mention(fmt: str, flag: bool = True) -> st.SearchStrategy[str]:
    """One mention of the format; `flag=False` leaves out Megatron's "--fp4-format e2m1" (a
    flag is switched off by dropping it, not by a word after its value)."""
    bare = _BARE if flag else st.sampled_from(_BARE_WORDS)
    return {"nvfp4": _NV, "mxfp4": _MX, "bare": bare}[fmt]


_FMT = st.sampled_from(["nvfp4", "mxfp4", "bare"])
_EXPECT = {"nvfp4": "nvfp4", "mxfp4": "mxfp4", "bare": BARE_FP4}


@st.composite
def _affirmed(draw: st.DrawFn) -> tuple[str, str]:
    """(cell, which spelling: 'nvfp4', 'mxfp4' or 'bare')."""
    fmt = draw(_FMT)
    return draw(_BEFORE) + draw(_mention(fmt)) + draw(_AFTER), fmt


@st.composite
def _negated(draw: st.DrawFn) -> tuple[str, str]:
    """(cell whose one FP4 mention is negated, which spelling it negates)."""
    fmt = draw(_FMT)
    if draw(st.booleans()):
        return draw(_BEFORE) + draw(_NEG_BEFORE) + draw(_mention(fmt)) + draw(_AFTER), fmt
    cell = draw(_BEFORE) + draw(_mention(fmt, flag=False)) + draw(_NEG_AFTER) + draw(_AFTER_NEG)
    return cell, fmt


@settings(max_examples=300, deadline=None)
@given(_affirmed())
def test_an_affirmed_mention_states_its_format_in_any_case(case: tuple[str, str]) -> None:
    cell, fmt = case
    for text in (cell, cell.upper(), cell.lower(), cell.swapcase()):
        assert stated_fp4(text) == _EXPECT[fmt], text


@settings(max_examples=300, deadline=None)
@given(_negated())
def test_a_negated_mention_states_no_fp4(case: tuple[str, str]) -> None:
    cell = case[0]
    assert stated_fp4(cell) is None
    # ... so the FP8 recipe the cell names is read, and shipped_defaults classes it FP8
    recipe_cell = "FP8 blockwise (1x128 / 128x128); " + cell
    assert fp8_recipe.stated_recipe(recipe_cell) == "blockwise"
    assert shipped_defaults.precision_class(recipe_cell) == "fp8:blockwise"


@settings(max_examples=300, deadline=None)
@given(_affirmed(), _negated(), _affirmed(), st.booleans())
def test_affirmed_and_negated_mentions_together(
    one: tuple[str, str], negated: tuple[str, str], two: tuple[str, str], first: bool
) -> None:
    """Negated mentions never count; MXFP4 affirmed anywhere wins, then NVFP4; a bare FP4 is
    NVFP4 unless the cell denies NVFP4. The order of the mentions does not matter."""
    parts = [one[0], negated[0], two[0]] if first else [negated[0], two[0], one[0]]
    said = {one[1], two[1]}
    if "mxfp4" in said:
        want = "mxfp4"
    elif "nvfp4" in said:
        want = "nvfp4"
    else:
        want = "mxfp4" if negated[1] == "nvfp4" else BARE_FP4
    assert stated_fp4("; ".join(parts)) == want


@settings(max_examples=300, deadline=None)
@given(st.one_of(_affirmed(), _negated()).map(lambda c: c[0]))
def test_every_caller_reads_the_same_fp4(cell: str) -> None:
    fmt = stated_fp4(cell)
    if fmt is None:
        return
    assert fp8_recipe.stated_recipe(cell) is None  # an FP4 cell names no FP8 recipe
    assert fp8_recipe.row_recipe(cell, "--fp8-recipe blockwise") is None
    assert shipped_defaults.precision_class(cell) == fmt
    assert cells.precision(cell) == "fp8"  # FP4 GEMMs are an FP8-class precision there


# Cells every old detector read alike and right: the unification leaves them as they were.
_COMMON = st.builds(
    "{}{}{}".format, _BEFORE,
    st.sampled_from(["NVFP4", "nvfp4", "MXFP4", "mxfp4", "FP4", "FP4 (E2M1)", "fp4 e2m1"]),
    st.sampled_from(["", " GEMMs", " (16-value blocks)"]),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(_COMMON)
def test_where_the_old_detectors_agreed_nothing_moves(cell: str) -> None:
    old = _old_nvfp4(cell)
    assert _old_shipped(cell) == old and _old_fp8_recipe(cell) == (old is not None)
    assert stated_fp4(cell) == old


def _phrasing_row(row_id: str) -> dict[str, str]:
    with open(RUNS / "reader_phrasings.csv") as f:
        return next(r for r in csv.DictReader(f) if r["row_id"] == row_id)


@pytest.mark.parametrize(
    ("precision", "recipe", "read"),
    [
        ("FP4 (NVFP4)", "nvfp4", NVFP4_READ),
        ("MX-FP4", None, FP4_AS_FP8),
        ("mx_fp4 (E2M1)", None, FP4_AS_FP8),
        ("FP8 current scaling, no FP4", None, None),
    ],
)
def test_validate_reads_the_row_through_the_one_reader(
    precision: str, recipe: str | None, read: str | None
) -> None:
    row = {**_phrasing_row("PREC-B07"), "precision": precision}
    setup = row_setup(row, shipped=False)
    assert setup.execution.get("fp4_recipe") == recipe
    assert setup.execution["precision"] == "fp8"
    assert setup.read.get("precision") == read
