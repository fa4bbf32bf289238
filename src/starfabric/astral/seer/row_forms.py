"""The forms a transcriber gives a row's counts and figures, read as the values they state.

Published tables print a GPU count as "128 nodes x 8 GPUs", "128x8" or "16K", a batch as an
"MBS/GBS 1/1024" pair copied into both batch columns, and a figure with its unit: "850 ms",
"1.2 min", "0.5 PFLOP/s", "357,888 tokens/s (total)". `canonical_counts` rewrites the count and
batch cells into plain numbers before any reader sees the row (the shipped-configuration match
included); `figure_scale` and `states_job_total` say how a published figure's unit converts to
the column's own (seconds, TFLOP/s per GPU, tokens/s per GPU).
"""

from __future__ import annotations

import re

from starfabric.astral.seer import cells
from starfabric.errors import DataError

NODES_TIMES_GPUS = re.compile(
    r"(?<![\w.,])(\d+)\s*(?:nodes?|hosts?|servers?|systems?|trays?)?\s*[x×*]\s*(\d+)\b", re.I
)
"""A GPU count written as hosts times GPUs per host ("128 nodes x 8 GPUs", "128x8", "64 × 4");
not a number inside a name ("B200 x 32": not 200 x 32)."""
_FIRST_NUMBER = re.compile(r"(?<![\w.,])\d")


def gpu_count(raw: str | None) -> int | None:
    """GPUs a num_gpus cell states: a product of hosts and GPUs per host (`NODES_TIMES_GPUS`)
    that opens the cell, else its first number with K read as 1,024 (cluster sizes are written so: Llama 3's "16K
    GPUs" are 16,384 H100s, Meta's "24K-GPU" clusters 24,576, arXiv 2407.21783 section 3.3);
    None when it holds no number."""
    text = raw or ""
    m = NODES_TIMES_GPUS.search(text)
    first = _FIRST_NUMBER.search(text)
    # A count stated before the product is the count ("3,072 (8 x 12 x 32)": TP x PP x DP).
    if m and first is not None and first.start() == m.start():
        return int(m.group(1)) * int(m.group(2))
    val = cells.number(text, binary=True)
    return None if val is None else int(round(val))


_LABEL = r"(mbs|gbs|micro[-_ ]?batch(?:[-_ ]?size)?|global[-_ ]?batch(?:[-_ ]?size)?|mb|gb)"
_LABELLED_PAIR = re.compile(
    _LABEL + r"\s*/\s*" + _LABEL + r"\s*[:=]?\s*\(?\s*(\d[\d,]*)\s*/\s*(\d[\d,]*)(?![\d/])", re.I
)
_PAIR = re.compile(r"(?<![\d/.])(\d[\d,]*)\s*/\s*(\d[\d,]*)(?![\d/.])")
_BATCH_KEYS = ("micro_batch", "global_batch_seqs")
_NAMES = {"micro_batch": "micro-batch", "global_batch_seqs": "global batch (sequences)"}


def _is_micro(label: str) -> bool:
    return label.lower().startswith(("mb", "micro"))


def batch_pair(raw: str | None) -> tuple[int, int] | None:
    """(micro-batch, global batch) of a cell that states both as a labelled pair ("MBS/GBS
    1/1024", "GBS/MBS: 1024/1", "micro/global batch 2/512"); None otherwise."""
    m = _LABELLED_PAIR.search(raw or "")
    if m is None or _is_micro(m.group(1)) == _is_micro(m.group(2)):
        return None
    a, b = (int(g.replace(",", "")) for g in m.group(3, 4))
    return (a, b) if _is_micro(m.group(1)) else (b, a)


def canonical_counts(row: dict[str, str]) -> dict[str, str]:
    """The row with its GPU count (`gpu_count`) and an "MBS/GBS" pair in either batch column
    (`batch_pair`) written as plain numbers; an unlabelled pair ("1/1024") in both batch cells
    is read the same way (the global batch is never below the micro-batch). A pair in one
    batch cell without labels is a one-line DataError: which is which cannot be told."""
    out = dict(row)
    raw = row.get("num_gpus") or ""
    n = gpu_count(raw)
    if n is not None and str(n) != raw.strip() and not cells.is_hint(raw):
        out["num_gpus"] = str(n)
    cells_ = {k: (row.get(k) or "").strip() for k in _BATCH_KEYS}
    pair = next((p for k in _BATCH_KEYS if (p := batch_pair(cells_[k]))), None)
    same = cells_["micro_batch"] == cells_["global_batch_seqs"]
    if pair is None and same and (m := _PAIR.fullmatch(cells_["micro_batch"])):
        a, b = (int(g.replace(",", "")) for g in m.groups())
        pair = (min(a, b), max(a, b))
    for i, key in enumerate(_BATCH_KEYS):
        text = cells_[key]
        if cells.unverified(text) and text:
            continue  # an UNVERIFIED cell stays as written (its hint is read as a hint)
        if pair is not None and (not text or batch_pair(text) or same):
            out[key] = str(pair[i])
        elif _PAIR.fullmatch(text) and not batch_pair(text):
            raise DataError(
                f"row {row.get('row_id', '?')}: column {key!r} = {text!r} holds two numbers "
                "and does not say which is the micro-batch and which the global batch",
                fix=f"write the {_NAMES[key]} alone, or label the pair (e.g. 'MBS/GBS 1/1024')",
            )
    return out


TIME_UNITS = (
    (re.compile(r"^(?:ms|msec|millisec\w*)\b", re.I), 1e-3),
    (re.compile(r"^(?:µs|us|microsec\w*)\b", re.I), 1e-6),
    (re.compile(r"^(?:min|mins|minutes?)\b", re.I), 60.0),
    (re.compile(r"^(?:h|hr|hrs|hours?)\b", re.I), 3600.0),
)
"""Units of an iteration-time cell other than seconds ("850 ms", "1.2 min")."""
FLOP_UNITS = (
    (re.compile(r"^P(?:FLOP|FLOPS|FLOP/s)\b", re.I), 1e3),
    (re.compile(r"^G(?:FLOP|FLOPS|FLOP/s)\b", re.I), 1e-3),
)
"""Units of a TFLOP/s cell other than TFLOP/s ("0.5 PFLOP/s" = 500 TFLOP/s)."""
RATE_UNITS = (
    (re.compile(r"^(?:tokens?|tok)\s*/\s*(?:min|minute)\b", re.I), 1 / 60),
    (re.compile(r"^(?:tokens?|tok)\s*/\s*(?:h|hr|hour)\b", re.I), 1 / 3600),
)
"""Units of a tokens-per-second cell other than per second ("tokens/min")."""
_UNITS = {
    "iter_time_s": TIME_UNITS,
    "derived_iter_time_s": TIME_UNITS,
    "tflops_per_gpu": FLOP_UNITS,
    "tokens_per_sec_per_gpu": RATE_UNITS,
}
_AFTER_NUMBER = re.compile(r"^\s*~?\s*[\d,]*\.?\d+\s*(?:[KM](?![A-Za-z]))?\s*")


def figure_scale(key: str, raw: str) -> float:
    """Factor from the unit a published-figure cell writes after its number to its column's
    unit (seconds, TFLOP/s, tokens/s); 1 for that unit or none."""
    rest = _AFTER_NUMBER.sub("", raw, count=1)
    for pat, scale in _UNITS.get(key, ()):
        if pat.match(rest):
            return scale
    return 1.0


JOB_TOTAL = re.compile(
    r"\b(?:total|aggregate|whole[- ]job|job[- ]wide|cluster[- ]wide|all\s+GPUs|global)\b"
    r"(?!\s+(?:batch|tokens?\b(?!\s*/)|steps?|iter\w*|train\w*))",
    re.I,
)
"""A tokens-per-second cell that gives the whole job's rate, not one GPU's ("(total)",
"aggregate", "across all GPUs"); not a word about something else the cell mentions ("global
batch 2048", "1T total tokens")."""
_AVERAGED = re.compile(r"\b(?:mean|average[ds]?|avg)\b(?:\s+\w+){0,2}\s*$", re.I)
"""Words before "all GPUs" that make the figure a per-GPU average ("mean over all GPUs")."""


def states_job_total(raw: str) -> bool:
    """True when a tokens/s cell says its figure is the job's total ("357,888 tokens/s
    (total)") and not per GPU (nor a mean over the GPUs)."""
    if re.search(r"per\s*GPU|/\s*GPU", raw, re.I):
        return False
    return any(not _AVERAGED.search(raw[: m.start()]) for m in JOB_TOTAL.finditer(raw))


TRAIN_TIME = re.compile(r"time[- ]to[- ]train|train(?:ing)?[- ]time|\bTTT\b", re.I)
"""A metric that is a whole training's wall time (MLPerf's time-to-train), not a step's."""


__all__ = [
    "FLOP_UNITS",
    "JOB_TOTAL",
    "NODES_TIMES_GPUS",
    "RATE_UNITS",
    "TIME_UNITS",
    "TRAIN_TIME",
    "batch_pair",
    "canonical_counts",
    "figure_scale",
    "gpu_count",
    "states_job_total",
]
