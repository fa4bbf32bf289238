"""What a row's free-text cells state about overlapping communication with compute, per kind.

A transcriber writes overlap in the framework, data-parallel (`zero_or_fsdp`), `sp` and notes
cells, naming the traffic it concerns or not: "Megatron-Core r0.8.0 (DP/TP/PP comm overlap on)",
"--overlap-grad-reduce", "ZeRO-1; gradient all-reduce not overlapped", "TP comm overlap
(userbuffers)", "AsyncTP", "EP all-to-all overlapped with 1F1B", "A2A_OVERLAP=0",
"--overlap-p2p-communication", "Megatron-LM, no overlap". `read_overlap` turns cells into
explicit statements, one per `OverlapKind` a mention concerns, each on or off; `Said` is the
result per kind (a kind stated once on and once off reads ON: statements.stated's convention,
the run is described by what it did; a kind never mentioned is UNSTATED and the caller keeps
its framework's default). Every reader of overlap words in seer (validate's framework and
data-parallel cells, TP and EP overlap, shipped_defaults' EP-overlap setting) reads them here.

Two kinds of mention, both negated as statements.negated_at reads them ("no", "not",
"without", "never" before; "off", "=0", "false", "disabled" after):

- a phrase naming one kind with its overlap (`KIND_PHRASES`): TP ("--tp-comm-overlap", "TP
  overlap", "AsyncTP"), EP ("--overlap-moe-expert-parallel-comm", "EP a2a overlap",
  "moe_a2a_overlap", "A2A_OVERLAP", "EP all-to-all not overlapped"), PP
  ("--overlap-p2p-communication", "PP comm overlap"), CP ("CP comm overlap"); the negation is
  read around the whole phrase ("no TP comm overlap");
- every word "overlap..." (`ANY_OVERLAP`), read from its clause: the text between the clause
  marks `;`, `,`, `(` around it, its own token included (`clause_of`). A clause naming DP, a
  mention whose own token names a DP collective ("--overlap-grad-reduce",
  "overlap_param_gather"), or a clause naming no other kind of traffic is a DP statement: about
  the gradient reduction when the token, else the clause, names it ("grad", "reduce",
  "reduce-scatter", "all-reduce"), the parameter all-gather ("param", "gather"), neither → both
  ("DP comm overlap on", "no overlap"). A clause naming no kind at all ("Megatron-LM, no
  overlap", "without communication overlap") is also a statement about the whole stack
  (`OverlapKind.STACK`). A clause naming another kind (`OTHER_KINDS`: TP; EP / a2a / MoE /
  expert / all-to-all; PP / p2p; CP / context parallel) states that kind, unless a
  phrase of that kind already covers the mention ("EP a2a: no overlap" is EP's alone; "DP/TP/PP
  comm overlap on" states DP, TP and PP). A name inside another mention's phrase (a kind
  phrase, or `DP_OVERLAP`'s "DP overlap") is that mention's: "DP overlap on and TP overlap off"
  states DP on and TP off, not TP on as well.

Words inside a longer word are not names ("MTP" is not TP, "DeepEP" is not EP); `_` and `-`
separate words in flags ("overlap_moe_expert_parallel_comm" names MoE and expert). The phrase
"after the backward pass" alone is not a statement of no overlap (an overlapped reduction also
finishes its last bucket after the backward).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from starfabric.astral.seer.statements import negated_at


class OverlapKind(Enum):
    """The traffic an overlap statement concerns."""

    DP_GRAD_REDUCE = "DP gradient reduction"
    DP_PARAM_GATHER = "DP parameter all-gather"
    TP_COMM = "TP communication"
    EP_A2A = "EP all-to-all"
    PP_P2P = "PP send/recv"
    CP_COMM = "CP communication"
    STACK = "the whole stack"


class Said(Enum):
    """What a row's cells state about one kind's overlap."""

    ON = "on"
    OFF = "off"
    UNSTATED = "unstated"


@dataclass(frozen=True)
class OverlapStatement:
    """One statement: `kind` stated overlapped (`on`) or not, by the mention text[start:end]."""

    kind: OverlapKind
    on: bool
    start: int
    end: int


TP_OVERLAP = re.compile(
    r"tp[-_ ]comm[-_ ]overlap|\btp(?:/\w+)*[-_ ](?:comm(?:unication)?[-_ ])?overlap"
    r"|\basync[-_ ]?tp\b"
    r"|overlap(?:ped|ping)?\s+(?:of\s+)?tp\b",
    re.I,
)
"""TP communication overlap (`--tp-comm-overlap`, "TP overlap", "TP/PP comm overlap",
"AsyncTP"); "tp" inside another word ("MTP") is not TP."""
EP_OVERLAP = re.compile(
    r"overlap[-_ ]moe[-_ ]expert[-_ ]parallel[-_ ]comm"
    r"|\b(?:ep|moe|expert[- ]parallel(?:ism)?)(?:/\w+)*[-_ ](?:(?:a2a|all[- ]to[- ]all)[-_ ])?"
    r"(?:comm(?:unication)?[-_ ])?overlap"
    r"|\ba2a[-_ ]overlap"
    r"|\b(?:ep|moe)[-_ ](?:a2a|all[- ]to[- ]all)\s+(?:(?:not|never)\s+)?(?:overlapped|hidden)"
    r"|overlap(?:s|ped|ping)?\s+(?:of\s+)?(?:the\s+)?(?:ep|moe|expert[- ]parallel)\b",
    re.I,
)
"""Megatron-Core's EP all-to-all overlap (`--overlap-moe-expert-parallel-comm`, "EP a2a
overlap", "moe_a2a_overlap", "A2A_OVERLAP", "EP all-to-all overlapped with 1F1B", "EP
all-to-all hidden"); negated as statements.negated_at reads it ("A2A_OVERLAP=0", "EP
all-to-all not overlapped", "no EP overlap")."""
PP_OVERLAP = re.compile(
    r"overlap[-_ ]p2p(?:[-_ ]comm(?:unication)?)?"
    r"|\b(?:pp|p2p|pipeline)(?:/\w+)*[-_ ](?:comm(?:unication)?[-_ ])?overlap"
    r"|overlap(?:s|ped|ping)?\s+(?:of\s+)?(?:the\s+)?(?:pp|p2p|pipeline)\b",
    re.I,
)
"""Megatron's PP send/recv overlap (`--overlap-p2p-communication`, "PP comm overlap",
"DP/PP communication overlap")."""
CP_OVERLAP = re.compile(
    r"\b(?:cp|context[- ]parallel(?:ism)?)(?:/\w+)*[-_ ](?:comm(?:unication)?[-_ ])?overlap"
    r"|overlap(?:s|ped|ping)?\s+(?:of\s+)?(?:the\s+)?(?:cp|context[- ]parallel)\b",
    re.I,
)
"""Context-parallel communication overlap ("CP comm overlap", "overlap of the CP ring")."""
KIND_PHRASES: dict[OverlapKind, re.Pattern[str]] = {
    OverlapKind.TP_COMM: TP_OVERLAP,
    OverlapKind.EP_A2A: EP_OVERLAP,
    OverlapKind.PP_P2P: PP_OVERLAP,
    OverlapKind.CP_COMM: CP_OVERLAP,
}
"""A phrase naming one kind together with its overlap."""

DELAY_WGRAD = re.compile(r"delay(?:ed)?[-_ ]wgrad(?:[-_]compute)?", re.I)
"""Megatron's `--delay-wgrad-compute`, which runs with the EP overlap (the expert wgrad is
delayed into the overlapped partner's window); stated or not ("delay_wgrad off", "no
delay-wgrad") as statements.stated reads it."""

ANY_OVERLAP = re.compile(r"\boverlap\w*", re.I)
"""A mention of overlap, including Megatron's flags ("--overlap-grad-reduce")."""


def _names(words: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9])(?:{words})(?![a-z0-9])", re.I)


DP_NAME = _names(r"dp|data[- ]parallel")
"""DP named in a mention's clause ("DP/TP/PP comm overlap on"): the mention covers DP."""
OTHER_KINDS: dict[OverlapKind, re.Pattern[str]] = {
    OverlapKind.TP_COMM: _names(r"tp"),
    OverlapKind.EP_A2A: _names(r"ep|a2a|moe|all-to-all|expert"),
    OverlapKind.PP_P2P: _names(r"pp|p2p"),
    OverlapKind.CP_COMM: _names(r"cp|context[- ]parallel"),
}
"""Kinds of traffic other than DP named in a mention's clause, also as a part of a flag's name
("overlap_moe_expert_parallel_comm": `_` and `-` separate words here)."""
DP_OVERLAP = re.compile(
    r"\b(?:dp|data[- ]parallel)(?:/\w+)*[-_ ](?:[a-z]+[-_ ]){0,2}?overlap\w*", re.I
)
"""A phrase naming DP with its overlap ("DP overlap", "DP grad overlap", "DP comm overlap"):
read only to tell which names of a shared clause belong to which mention (`_statements`)."""
_GRAD = re.compile(r"grad|reduc", re.I)
_PARAM = re.compile(r"param|gather", re.I)
_CLAUSE_END = re.compile(r"[;,(]")
_TOKEN = re.compile(r"[\w-]*")


def _clause_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the clause of the mention text[start:end] begins and ends: the clause marks
    around it."""
    lo = start - len(_CLAUSE_END.split(text[:start])[-1])
    return lo, end + len(_CLAUSE_END.split(text[end:])[0])


def clause_of(text: str, start: int, end: int) -> tuple[str, str]:
    """(token, clause) of the mention text[start:end]: the token it ends inside of, and the
    text between the clause marks around it, the token included."""
    tail = _TOKEN.match(text, end)
    lo, hi = _clause_span(text, start, end)
    return text[start : tail.end() if tail else end], text[lo:hi]


def _dp_subject(token: str, clause: str) -> tuple[bool, bool] | None:
    """(gradient reduction, parameter gather) the token, else the clause, names; None when
    neither names a DP collective."""
    for words in (token, clause):
        grad, param = bool(_GRAD.search(words)), bool(_PARAM.search(words))
        if grad or param:
            return grad, param
    return None


def statements(cell: str | None) -> tuple[OverlapStatement, ...]:
    """Every overlap statement in one cell, in the order of the rules above."""
    return tuple(_statements(cell or ""))


def _others_masked(text: str, start: int, end: int, phrases: list[tuple[int, int]]) -> str:
    """The clause of the mention text[start:end] (`_clause_span`) with every phrase that does not
    overlap the mention blanked: the names in another mention's phrase ("TP" in "DP overlap on
    and TP overlap off") are that mention's, not this one's."""
    lo, hi = _clause_span(text, start, end)
    chars = list(text[lo:hi])
    for s, e in phrases:
        if s < end and start < e:
            continue
        for i in range(max(s, lo), min(e, hi)):
            chars[i - lo] = " "
    return "".join(chars)


def _statements(text: str) -> Iterator[OverlapStatement]:
    covered: dict[OverlapKind, list[tuple[int, int]]] = {}
    for kind, phrase in KIND_PHRASES.items():
        for m in phrase.finditer(text):
            covered.setdefault(kind, []).append((m.start(), m.end()))
            yield OverlapStatement(kind, not negated_at(text, m.start(), m.end()), *m.span())
    phrases = [sp for spans in covered.values() for sp in spans]
    phrases += [m.span() for m in DP_OVERLAP.finditer(text)]
    for m in ANY_OVERLAP.finditer(text):
        on = not negated_at(text, m.start(), m.end())
        token, _ = clause_of(text, m.start(), m.end())
        clause = _others_masked(text, m.start(), m.end(), phrases)
        subject = _dp_subject(token, clause)
        token_dp = _dp_subject(token, "") is not None
        others = [k for k, name in OTHER_KINDS.items() if name.search(clause)]
        if token_dp or DP_NAME.search(clause) or not others:
            grad, param = subject or (True, True)
            if grad:
                yield OverlapStatement(OverlapKind.DP_GRAD_REDUCE, on, *m.span())
            if param:
                yield OverlapStatement(OverlapKind.DP_PARAM_GATHER, on, *m.span())
        if not others and subject is None and not DP_NAME.search(clause):
            yield OverlapStatement(OverlapKind.STACK, on, *m.span())
        if token_dp:
            continue
        for kind in others:
            spans = covered.get(kind, [])
            if not any(s <= m.start() and m.end() <= e for s, e in spans):
                yield OverlapStatement(kind, on, *m.span())


@dataclass(frozen=True)
class OverlapReading:
    """The statements of a row's cells, read per kind."""

    statements: tuple[OverlapStatement, ...]

    def said(self, kind: OverlapKind) -> Said:
        """ON when some statement of `kind` is on, OFF when every one is off, else UNSTATED."""
        ons = [s.on for s in self.statements if s.kind is kind]
        if not ons:
            return Said.UNSTATED
        return Said.ON if any(ons) else Said.OFF

    def on(self, kind: OverlapKind) -> bool | None:
        """`said` as True (ON), False (OFF) or None (UNSTATED)."""
        said = self.said(kind)
        return None if said is Said.UNSTATED else said is Said.ON


def read_overlap(*cells: str | None) -> OverlapReading:
    """The overlap statements of `cells` together (a row's framework, sp and notes cells)."""
    return OverlapReading(tuple(s for cell in cells for s in statements(cell)))


__all__ = [
    "ANY_OVERLAP",
    "CP_OVERLAP",
    "DELAY_WGRAD",
    "DP_NAME",
    "DP_OVERLAP",
    "EP_OVERLAP",
    "KIND_PHRASES",
    "OTHER_KINDS",
    "PP_OVERLAP",
    "TP_OVERLAP",
    "OverlapKind",
    "OverlapReading",
    "OverlapStatement",
    "Said",
    "clause_of",
    "read_overlap",
    "statements",
]
