"""seer/overlap_words.py: a row's overlap words read as per-kind statements.

Property tests combine each kind's spellings with negations and context taken from the
development rows, and check that the spelling states its own kind (on, or off when negated)
and no other; the phrase tests pin the phrasings the readers before overlap_words misread
(session 22), each also through validate's reading of a row.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astral.seer.cell_context import (
    EP_OVERLAPS,
    NEGATE_AFTER,
    NEGATE_BEFORE,
    PREFIXES,
    SUFFIXES,
    TP_OVERLAPS,
)
from starfabric.astral.seer.overlap_words import (
    OverlapKind,
    Said,
    read_overlap,
    statements,
)
from starfabric.astral.seer.validate import read_rows, row_job_options
from starfabric.errors import DataError

K = OverlapKind
DP = {K.DP_GRAD_REDUCE, K.DP_PARAM_GATHER}
DATA = Path(__file__).parents[2] / "data" / "published_runs"

# Spellings of each kind's overlap, and the kinds each states.
SPELLINGS: dict[frozenset[OverlapKind], tuple[str, ...]] = {
    frozenset({K.TP_COMM}): TP_OVERLAPS,
    frozenset({K.EP_A2A}): EP_OVERLAPS,
    frozenset({K.PP_P2P}): (
        "--overlap-p2p-communication",
        "overlap_p2p_comm",
        "PP comm overlap",
        "PP overlap",
        "p2p overlap",
    ),
    frozenset({K.CP_COMM}): ("CP comm overlap", "CP overlap", "context-parallel overlap"),
    frozenset({K.DP_GRAD_REDUCE}): ("--overlap-grad-reduce", "overlap_grad_reduce"),
    frozenset({K.DP_PARAM_GATHER}): ("--overlap-param-gather", "overlap_param_gather"),
    frozenset(DP): ("DP comm overlap", "DP overlap", "data-parallel overlap"),
    frozenset(DP | {K.STACK}): ("overlap", "comm overlap", "communication overlap"),
    frozenset(DP | {K.TP_COMM, K.PP_P2P}): ("DP/TP/PP comm overlap",),
    frozenset(DP | {K.PP_P2P}): ("DP/PP communication overlap",),
}


@st.composite
def _case(draw: st.DrawFn) -> tuple[str, frozenset[OverlapKind], bool]:
    """(cell text, kinds it states, stated on)."""
    kinds, spelling = draw(st.sampled_from([(k, s) for k, ss in SPELLINGS.items() for s in ss]))
    how = draw(st.sampled_from(("plain", "before", "after")))
    text, on = spelling, True
    if how == "before":
        text, on = draw(st.sampled_from(NEGATE_BEFORE)) + spelling, False
    elif how == "after":
        text, on = spelling + draw(st.sampled_from(NEGATE_AFTER)), False
    return draw(st.sampled_from(PREFIXES)) + text + draw(st.sampled_from(SUFFIXES)), kinds, on


@settings(max_examples=400, deadline=None)
@given(_case())
def test_each_spelling_states_its_kinds_only(
    case: tuple[str, frozenset[OverlapKind], bool],
) -> None:
    text, kinds, on = case
    said = read_overlap(text)
    want = Said.ON if on else Said.OFF
    for kind in OverlapKind:
        assert said.said(kind) is (want if kind in kinds else Said.UNSTATED), (text, kind)


@settings(max_examples=200, deadline=None)
@given(_case(), _case())
def test_cells_read_together(
    first: tuple[str, frozenset[OverlapKind], bool],
    second: tuple[str, frozenset[OverlapKind], bool],
) -> None:
    # Two cells: a kind stated on in either reads ON, off in every one that states it OFF.
    said = read_overlap(first[0], second[0])
    for kind in OverlapKind:
        ons = [on for text, kinds, on in (first, second) if kind in kinds]
        want = Said.UNSTATED if not ons else Said.ON if any(ons) else Said.OFF
        assert said.said(kind) is want, (first[0], second[0], kind)


def test_statements_carry_their_mention() -> None:
    text = "ZeRO-1; gradient all-reduce not overlapped"
    (st_,) = statements(text)
    assert (st_.kind, st_.on, text[st_.start : st_.end]) == (K.DP_GRAD_REDUCE, False, "overlapped")
    assert statements(None) == () and statements("UNVERIFIED") == ()
    assert read_overlap("").on(K.STACK) is None


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # the data-parallel cell's wordings (also in test_falcon_paper)
        (
            "gradient reduce-scatter overlapped with backward; parameter all-gather not overlapped",
            {K.DP_GRAD_REDUCE: True, K.DP_PARAM_GATHER: False},
        ),
        (
            "grad reduce overlapped (the 2022 run: grad reduce not overlapped)",
            {K.DP_GRAD_REDUCE: True},
        ),
        ("ZeRO-1; overlap_param_gather: true", {K.DP_PARAM_GATHER: True}),
        # the rows' own wordings
        (
            "Megatron-Core r0.8.0 (DP/TP/PP comm overlap on)",
            {K.DP_GRAD_REDUCE: True, K.DP_PARAM_GATHER: True, K.TP_COMM: True, K.PP_P2P: True},
        ),
        (
            "--tp-comm-overlap (PR=bf16); A2A_OVERLAP=0 (EP all-to-all not overlapped, "
            "CUDA_DEVICE_MAX_CONNECTIONS=1)",
            {K.TP_COMM: True, K.EP_A2A: False},
        ),
        (
            "TP communication overlap off (no --tp-comm-overlap: sbatch_benchmarking.sh adds it "
            "for PR=bf16 only); A2A_OVERLAP=1: EP a2a overlap with 1F1B",
            {K.TP_COMM: False, K.EP_A2A: True},
        ),
        ("cross-node EP strategy with '+1f1b overlap' (EP all-to-all hidden)", {K.EP_A2A: True}),
        ("Megatron-Core (MTP; EP a2a overlap)", {K.EP_A2A: True}),  # 'tp' inside MTP
        # phrasings the readers before overlap_words misread (session 22)
        ("Megatron-Core, comm overlap off", {K.STACK: False} | dict.fromkeys(DP, False)),
        ("Megatron-LM, no overlap of TP comm", {K.TP_COMM: False}),
        ("gradient all-reduce: no overlap", {K.DP_GRAD_REDUCE: False}),
        ("EP a2a: overlap on", {K.EP_A2A: True}),
        ("EP a2a: no overlap", {K.EP_A2A: False}),
        ("TP no overlap", {K.TP_COMM: False}),
        ("overlap of the TP communication", {K.TP_COMM: True}),
        ("PP comm overlap on", {K.PP_P2P: True}),
        ("ZeRO-1; context-parallel overlap off", {K.CP_COMM: False}),
        (
            "--overlap-grad-reduce --overlap-moe-expert-parallel-comm",
            {K.DP_GRAD_REDUCE: True, K.EP_A2A: True},
        ),
        (
            "ZeRO-1 with overlap of DP and EP communication",
            {K.DP_GRAD_REDUCE: True, K.DP_PARAM_GATHER: True, K.EP_A2A: True},
        ),
        # words that are not overlap statements
        ("ZeRO optimizer sharding; gradients reduced after the backward pass", {}),
        ("DeepEP dispatcher; MTP 1", {}),
    ],
)
def test_phrasings(text: str, want: dict[OverlapKind, bool]) -> None:
    said = read_overlap(text)
    assert {k: said.on(k) for k in OverlapKind if said.on(k) is not None} == want


def _row(row_id: str) -> dict[str, str]:
    return next(r for r in read_rows(DATA / "development_runs_2.csv") if r["row_id"] == row_id)


def _overlaps(row: dict[str, str]) -> dict[str, bool]:
    _, ex, _ = row_job_options(row)
    keys = ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "overlap_p2p")
    return {k: ex[k] for k in keys} | {"ep_comm_overlap": ex["ep_comm_overlap"]}


def test_core_row_stating_overlap_off_runs_without() -> None:
    # "comm overlap off" is the whole stack's, as "no overlap" is (before: not read, the
    # row kept Megatron-Core's DP overlap).
    row = _row("FALCON180B-01")
    core = {**row, "framework": "Megatron-Core 0.13"}
    assert _overlaps(core)["overlap_grad_reduce"] is True
    off = _overlaps({**core, "framework": "Megatron-Core 0.13, comm overlap off"})
    assert not any(off.values())
    # a DP collective stated in the framework cell follows the statement
    one = _overlaps({**core, "framework": "Megatron-Core 0.13, --overlap-grad-reduce off"})
    assert one["overlap_grad_reduce"] is False and one["overlap_param_gather"] is True


def test_kind_named_no_overlap_is_not_the_stack() -> None:
    # "no overlap of TP comm" turns TP off, not the stack (before: the DP overlap too, and a
    # data-parallel cell stating its overlap was rejected as contradicting it).
    row = _row("MCGB-L12")
    assert "--overlap-grad-reduce" in row["zero_or_fsdp"]
    with pytest.raises(DataError, match="states no overlap"):
        row_job_options({**row, "framework": row["framework"] + ", no overlap"})
    tp_off = _overlaps({**row, "framework": row["framework"] + ", no overlap of TP comm"})
    assert tp_off["overlap_grad_reduce"] is True and tp_off["tp_comm_overlap"] is False


def test_plain_megatron_pp_flag_is_not_dp_overlap() -> None:
    # Plain Megatron-LM's --overlap-p2p-communication states PP overlap only (before: read as
    # DP overlap, which also read the stack as not plain Megatron-LM).
    row = _row("STARCODER-01")
    base = _overlaps(row)
    assert base["overlap_grad_reduce"] is False and base["overlap_p2p"] is False
    p2p = _overlaps({**row, "framework": row["framework"] + "; --overlap-p2p-communication"})
    assert p2p == base | {"overlap_p2p": True}


def test_ep_overlap_stated_by_its_clause() -> None:
    row = _row("MZQ3-GB1")
    assert _overlaps(row)["ep_comm_overlap"] is False  # A2A_OVERLAP=0
    on = {**row, "notes": (row.get("notes") or "") + "; EP a2a: overlap on"}
    assert _overlaps(on)["ep_comm_overlap"] is True


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("no TP overlap but DP overlap on", {K.TP_COMM: False} | dict.fromkeys(DP, True)),
        ("DP overlap on and TP overlap off", {K.TP_COMM: False} | dict.fromkeys(DP, True)),
        ("DP overlap off and TP overlap on", {K.TP_COMM: True} | dict.fromkeys(DP, False)),
        ("TP comm overlap off and DP grad overlap on", {K.TP_COMM: False, K.DP_GRAD_REDUCE: True}),
        ("EP a2a overlap on and PP comm overlap off", {K.EP_A2A: True, K.PP_P2P: False}),
        # one phrase naming several kinds still states each of them
        (
            "DP/TP/PP comm overlap on",
            {K.TP_COMM: True, K.PP_P2P: True} | dict.fromkeys(DP, True),
        ),
        (
            "ZeRO-1 with overlap of DP and EP communication",
            {K.EP_A2A: True} | dict.fromkeys(DP, True),
        ),
    ],
)
def test_two_kinds_in_one_clause_keep_their_own_overlap_words(
    text: str, want: dict[OverlapKind, bool]
) -> None:
    """A clause with two overlap phrases joined by 'and' / 'but' (no clause mark between them):
    each phrase's kind takes its own on/off, not the other phrase's ('no TP overlap but DP
    overlap on' read TP on: the DP phrase's 'overlap' named TP through the shared clause)."""
    said = read_overlap(text)
    assert {k: said.on(k) for k in OverlapKind if said.on(k) is not None} == want
