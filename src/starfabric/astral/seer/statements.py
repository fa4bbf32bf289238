"""Whether a free-text cell states a setting or states it off (negation-aware mention reader).

The readers of a row's framework and notes cells look for the name of a setting ("forced load
balancing", "Ulysses", "EP a2a overlap", "delay-wgrad", "torch.compile"). A transcriber also
writes that a setting was NOT used, with the same words: "no forced balance stated", "without
forced load balancing", "EP all-to-all not overlapped", "A2A_OVERLAP=0",
"moe_a2a_overlap: false", "delay_wgrad off", "torch.compile disabled". `stated` reads each
mention with the words around it:

- before it, within two words: no / not / without / never / w/o / disable(d) / revert(ed)
  ("without any forced load balancing", "not using Ulysses", "reverted TE PR 2019"; but
  "reverted to X" states X); an "any" or "using" right after the negation is not one of the
  two ("without any DP/TP/PP comm overlap");
- inside it: not / no / never / without (for patterns that span "all-to-all not overlapped");
- right after it, or after one more word ("Ulysses SP off"): off / false / disabled /
  reverted / 0 (also after ':' or '='), "(off)", "(reverted)", or a bare
  ": no" / "= none" that ends the phrase ("forced balancing: no"; "eager: no torch.compile"
  is not a negation of "eager"); "not used" / "not enabled" / "not applied" / "not set" right
  after it ("TP overlap not used", "FP4 was not enabled", "CUDA graphs (not used)").

A cell that names a setting once affirmed and once negated reads as affirmed (the run is
described by what it did; the negated mention is usually a comparison).

`compared_at` reads the other way a cell names what the run did not use: the reference of a
comparison ("TE 2.3, compared with TE 2.9", "vs. TE 2.9", "rather than TE 2.9"). Readers of a
release or version (te_mxfp8_host) skip such mentions as they skip negated ones;
`stated_for_run` is `stated` that skips them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

NEGATION_BEFORE = re.compile(
    r"\b(?:no|not|without|never|w/o|disable[ds]?|revert(?:ed|s|ing)?(?!\s+(?:back\s+)?to\b))"
    r"(?:\s+(?:any|using))?\s+(?:[\w./'\"-]*\w[\w./'\"-]*\s+){0,2}$",
    re.I,
)
"""A negating word up to two words before a mention ("reverted TE PR 2019"; "reverted to X"
and "reverted back to X" state X, the setting the run went back to). "any" or "using" right
after the negation does not count as one of the two ("without any DP/TP/PP comm overlap",
"not using DP/TP comm overlap": session 22's review found the three-word overlap phrases read
as on). A word of the window holds a letter or digit: a bare separator ("/", "-") ends it
("EP a2a overlap disabled / DP overlap enabled" states DP overlap on)."""
NEGATION_INSIDE = re.compile(r"\b(?:no|not|never|without)\b", re.I)
NEGATION_AFTER = re.compile(
    r"^(?:\s+[A-Za-z][\w-]*)?(?:\s*[:=]\s*['\"]?|\s+|\s*\(\s*|[-_])"
    r"(?:off|false|disabled|reverted|0(?![.\d]))\b"
    r"|^\s*[:=]\s*['\"]?(?:no|none)\b['\"]?(?!\s*[\w.])"
    r"|^\s*(?:[:=]\s*|\(\s*)?(?:(?:is|was|were)\s+)?not\s+(?:used|enabled|applied|set)\b",
    re.I,
)
"""Words right after a mention that switch it off (also "not used" / "was not enabled" /
"(not applied)" / ": not set" right after it); a value after ':' or '=' may be quoted, as a
shell or YAML line writes it (`FP8_DPA="False"`, `fp8_dpa: 'false'`)."""


_TOKEN_HEAD = re.compile(r"[^\s(\[;,]*$")
_TOKEN_TAIL = re.compile(r"[^\s)\];,:=]*")


def negated_at(text: str, start: int, end: int) -> bool:
    """Whether the mention text[start:end] is negated by the words around it."""
    # A mention inside a longer token ("--moe-router-force-load-balancing") is read from the
    # token's start: "no --moe-router-force-..." negates it.
    head = _TOKEN_HEAD.search(text[:start])
    start = head.start() if head else start
    tail = _TOKEN_TAIL.match(text, end)
    end = tail.end() if tail else end
    return bool(
        NEGATION_BEFORE.search(text[:start])
        or NEGATION_INSIDE.search(text[start:end])
        or NEGATION_AFTER.search(text[end:])
    )


COMPARED_BEFORE = re.compile(
    r"(?:\bcompared\s+(?:with|to|against)|\bvs\.?|\bversus|\brelative\s+to|\bthan"
    r"|\binstead\s+of)\s+(?:[\w./'\"-]+\s+){0,2}$",
    re.I,
)
"""Words up to two words before a mention that make it the reference of a comparison."""


def compared_at(text: str, start: int) -> bool:
    """Whether the mention starting at text[start] is what the run is compared with ("TE 2.3,
    compared with TE 2.9"; "TE 2.6 rather than TE 2.9"), not what it ran."""
    return bool(COMPARED_BEFORE.search(text[:start]))


def stated(pattern: re.Pattern[str], *cells: str | None) -> bool | None:
    """True when some cell mentions `pattern` without negating it, False when every mention
    is negated, None when no cell mentions it."""
    seen = False
    for cell in cells:
        text = cell or ""
        for m in pattern.finditer(text):
            if not negated_at(text, m.start(), m.end()):
                return True
            seen = True
    return False if seen else None


def stated_for_run(
    pattern: re.Pattern[str],
    *cells: str | None,
    off: Callable[[str, re.Match[str]], bool] | None = None,
) -> bool | None:
    """`stated`, with the reference of a comparison read as no mention (`compared_at`, at the
    match's group "at" where the pattern has one and it took part, else at the match's start):
    True when some cell affirms `pattern` for the run, False when every other mention is
    negated (or `off(text, match)`, a reader's own way of saying off), None when none is left."""
    at = "at" in pattern.groupindex
    seen = False
    for cell in cells:
        text = cell or ""
        for m in pattern.finditer(text):
            where = m.start("at") if at and m.group("at") is not None else m.start()
            if compared_at(text, where):
                continue
            if negated_at(text, m.start(), m.end()) or (off is not None and off(text, m)):
                seen = True
                continue
            return True
    return False if seen else None


EFA = re.compile(
    r"\bEFA(?:\s*v?\d)?\b|elastic fabric adapter"
    r"|\bp[456](?:de|d|e|en)?\.\d*xlarge\b|\bp6[ee]?-b[23]00\b|\bp6e-gb[23]00\b",
    re.I,
)
"""A cell naming AWS Elastic Fabric Adapter ("EFA", "EFAv2", "3,200 Gbps EFA v3", "Elastic
Fabric Adapter") or an AWS GPU instance, whose only inter-node network is EFA
("p5.48xlarge", "p4de.24xlarge", "p6-b200")."""


def names_efa(*cells: str | None) -> bool:
    """Whether a row's interconnect (or GPU) cell names AWS EFA or an AWS GPU instance, not
    negated ("InfiniBand, not EFA")."""
    return bool(stated(EFA, *cells))


__all__ = [
    "COMPARED_BEFORE",
    "EFA",
    "NEGATION_AFTER",
    "NEGATION_BEFORE",
    "NEGATION_INSIDE",
    "compared_at",
    "names_efa",
    "negated_at",
    "stated",
    "stated_for_run",
]
