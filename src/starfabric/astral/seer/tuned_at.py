"""Settings tuned at one scale and held fixed at others (a strong-scaling study).

Papers often tune a configuration once and then only add GPUs: "To investigate the scalability
of various methods, we fixed the parallel configuration and increased the number of GPUs ...
All parallel configurations are the same as those identified in the performance experiments"
(Liu et al. 2025, MoE Parallel Folding, arXiv 2504.14960, appendix 6.4). When the source does
not print the settings it left open (VPP, micro-batch, recompute), the run at a larger scale
used what was fastest — and fit — at the tuning scale, not what would be fastest at its own:
with fewer GPUs the optimizer state is sharded over fewer ranks, so a setting that only fits
at 1,024 GPUs was never tried.

A row states its tuning scale in its notes cell, transcribed from the source:
"as tuned at 128 GPUs, global batch 256". `seer validate` then chooses the open settings for
the same layout at that scale (data parallelism = GPUs / (TP·PP·CP), the batch given) and
predicts the row with them (`validate.validate_row`).
"""

from __future__ import annotations

import re

from starfabric.astral.seer.statements import NEGATION_BEFORE

_COUNT = r"(\d{1,3}(?:,\d{3})+|\d+)"
TUNED_AT = re.compile(
    r"(?:as )?tuned (?:once )?at " + _COUNT + r" GPUs?\b(?:[,;]?\s*\(?(?:and |with |at )?"
    r"(?:a )?(?:global[- ]batch(?:[- ]size)?|GBS)\s*(?:=|:|of)?\s*" + _COUNT + ")?",
    re.I,
)
"""The notes phrase naming the scale a row's open settings were tuned at ("as tuned at 128
GPUs, global batch 256", "tuned at 1,024 GPUs (GBS 512)", "tuned at 64 GPUs with global batch
size 128"); without a batch ("as tuned at 128 GPUs") the row's own batch was kept."""


def tuning_scale(notes: str | None, own_batch: int | None = None) -> tuple[int, int] | None:
    """(GPUs, global batch in sequences) the notes say the open settings were tuned at (the
    row's `own_batch` when they name no batch); a negated phrase ("not as tuned at ...") is not
    one."""
    for m in TUNED_AT.finditer(notes or ""):
        if NEGATION_BEFORE.search((notes or "")[: m.start()]):
            continue
        batch = int(m.group(2).replace(",", "")) if m.group(2) else own_batch
        if batch is not None:
            return int(m.group(1).replace(",", "")), batch
    return None


def reference_row(row: dict[str, str], gpus: int, global_batch: int) -> dict[str, str]:
    """The row as run at its tuning scale: the GPU count and batch replaced, data parallelism
    refigured from the stated model-parallel degrees, no published figure (it is not
    compared), and no tuning phrase (the reference is its own tuning scale)."""
    ref = dict(row, num_gpus=str(gpus), global_batch_seqs=str(global_batch))
    ref["notes"] = TUNED_AT.sub("", row.get("notes") or "")
    try:
        model_par = int(row["tp"]) * int(row["pp"]) * int(row.get("cp") or 1)
    except (KeyError, ValueError):
        return ref  # a degree left open: data parallelism is chosen with it
    if gpus % model_par == 0:
        ref["dp"] = str(gpus // model_par)
    return ref


__all__ = ["TUNED_AT", "reference_row", "tuning_scale"]
