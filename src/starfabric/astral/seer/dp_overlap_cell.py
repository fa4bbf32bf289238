"""What a row's cells state about overlapping data-parallel communication with compute.

A transcriber writes the overlap of DP traffic in two places: the framework cell
("Megatron-Core r0.8.0 (DP/TP/PP comm overlap on)", "--overlap-grad-reduce") and the
data-parallel cell (`zero_or_fsdp`), next to the sharding it qualifies: "distributed optimizer
(ZeRO-1; --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather)", "ZeRO-1
with the gradient reduce-scatter overlapped with the backward pass", "ZeRO-1; gradient
all-reduce not overlapped". `overlap_statement` reads one cell and says, per DP collective,
whether it was stated overlapped, stated not overlapped, or not stated:

- each mention of overlap ("overlap", "overlapped", "--overlap-grad-reduce") counts unless its
  clause (the text between the clause marks `;`, `,`, `(` around it, the mention's own token
  included) names another kind of traffic (EP / all-to-all / MoE / expert / TP) without naming
  DP or PP ("EP a2a not overlapped", "overlap of the TP communication",
  "--overlap-moe-expert-parallel-comm" are not DP statements);
- its subject is read from the same token or clause: a gradient reduction ("grad", "gradient",
  "reduce", "reduce-scatter", "all-reduce") → the gradient reduction; a parameter gather
  ("param", "gather", "all-gather") → the parameter all-gather; neither ("DP comm overlap on",
  "no overlap") → both;
- negation is statements.negated_at's ("not overlapped", "no overlap", "without overlap",
  "--overlap-grad-reduce off"); a collective stated once overlapped and once not reads as
  overlapped (statements' convention: the run is described by what it did).

A cell that never mentions overlap states nothing (None for both): Seer then keeps the
framework's default. The phrase "after the backward pass" alone is not read as a statement of
no overlap (an overlapped reduction also finishes its last bucket after the backward).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from starfabric.astral.seer.statements import negated_at

ANY_OVERLAP = re.compile(r"\boverlap\w*", re.I)
"""A mention of overlap, including Megatron's flags ("--overlap-grad-reduce")."""
OVERLAP_KIND = re.compile(r"(?<![a-z0-9])(?:ep|a2a|moe|all-to-all|tp|expert)(?![a-z0-9])", re.I)
"""A kind of traffic other than DP named in the clause of an overlap mention, also as a part of
a flag's name ("overlap_moe_expert_parallel_comm": `_` and `-` separate words here)."""
DP_OR_PP = re.compile(r"(?<![a-z0-9])(?:dp|pp)(?![a-z0-9])", re.I)
"""DP or PP named in the same clause ("DP/TP/PP comm overlap on"): the mention covers DP."""
_GRAD = re.compile(r"grad|reduc", re.I)
_PARAM = re.compile(r"param|gather", re.I)
_CLAUSE_END = re.compile(r"[;,(]")
_TOKEN = re.compile(r"[\w-]*")


@dataclass(frozen=True)
class DpOverlap:
    """Per DP collective: True stated overlapped, False stated not overlapped, None unstated."""

    grad_reduce: bool | None = None
    param_gather: bool | None = None


def _subject(text: str, start: int, end: int) -> tuple[bool, bool]:
    """(gradient reduction, parameter gather) that the mention text[start:end] is about."""
    tail = _TOKEN.match(text, end)
    token = text[start : tail.end() if tail else end]
    clause = _CLAUSE_END.split(text[:start])[-1]
    after = _CLAUSE_END.split(text[end:])[0]
    for words in (token, clause + " " + after):
        grad, param = bool(_GRAD.search(words)), bool(_PARAM.search(words))
        if grad or param:
            return grad, param
    return True, True


def overlap_statement(cell: str | None) -> DpOverlap:
    """What one cell states about overlapping the DP gradient reduction and parameter gather."""
    text = cell or ""
    said: dict[str, list[bool]] = {"grad": [], "param": []}
    for m in ANY_OVERLAP.finditer(text):
        clause = _CLAUSE_END.split(text[: m.start()])[-1] + text[m.start() : m.end()]
        clause += _CLAUSE_END.split(text[m.end() :])[0]
        if OVERLAP_KIND.search(clause) and not DP_OR_PP.search(clause):
            continue
        on = not negated_at(text, m.start(), m.end())
        grad, param = _subject(text, m.start(), m.end())
        if grad:
            said["grad"].append(on)
        if param:
            said["param"].append(on)
    return DpOverlap(
        grad_reduce=any(said["grad"]) if said["grad"] else None,
        param_gather=any(said["param"]) if said["param"] else None,
    )


def states_dp_overlap(cell: str | None) -> bool:
    """Whether a cell states DP (or unqualified) communication overlap, not negated."""
    st = overlap_statement(cell)
    return bool(st.grad_reduce) or bool(st.param_gather)
