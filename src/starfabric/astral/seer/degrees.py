"""Candidate parallel degrees for a published run whose source leaves one unverified.

A source that states the GPU count but not, say, the pipeline depth defines the run up to the
layouts a tuning user of its framework would try; Seer predicts each and takes the fastest
that fits in memory (as it does for an unstated micro-batch) and prints the choice. The
candidates are the layouts Megatron-Core accepts (`initialize_model_parallel`): TP within one
host and dividing the attention heads and KV groups, CP splitting the sequence into 2*CP
load-balanced chunks, EP dividing the experts and the tp*cp*dp ranks it is folded over
(MoE parallel folding), and tp*pp*cp dividing the GPU count.
"""

from __future__ import annotations

import itertools
from typing import Any

from starfabric.astral.seer.model import ModelSpec

DEGREES = ("tp", "pp", "cp", "ep")
"""Parallel degrees a row may leave unverified (vpp is chosen with the micro-batch)."""
POWERS = (1, 2, 4, 8, 16, 32, 64, 128)
"""Degrees tried besides the divisors of the layer count (powers of two: the sizes of NVLink
domains, NIC rails and the GPU counts of the runs)."""
MAX_COMBOS = 96
"""At most this many degree combinations are predicted (the most balanced first: the
smallest model-parallel size, then the smallest pipeline), bounding the time of one row."""


def _tp(model: ModelSpec, gpn: int) -> list[int]:
    kv = model.heads if model.is_mla else model.kv_heads
    return [t for t in (1, 2, 4, 8) if t <= gpn and model.heads % t == 0 and kv % t == 0]


def _pp(model: ModelSpec) -> list[int]:
    divisors = {d for d in range(1, model.layers + 1) if model.layers % d == 0}
    return sorted({p for p in POWERS if p <= model.layers} | {d for d in divisors if d <= 64})


def _cp(seq_len: int) -> list[int]:
    # Megatron's load-balanced CP cuts the sequence into 2*cp chunks of whole tokens.
    return [c for c in POWERS[:7] if seq_len % (2 * c) == 0 and seq_len // c >= 1024]


def _ep(model: ModelSpec) -> list[int]:
    if not model.is_moe:
        return [1]
    return [e for e in POWERS if e <= model.moe_experts and model.moe_experts % e == 0]


def _etp(model: ModelSpec, gpn: int) -> list[int]:
    # Expert TP splits each expert's FFN inside one host (Megatron-Core
    # --expert-tensor-parallel-size), like TP.
    if not model.is_moe:
        return [1]
    return [t for t in (1, 2, 4, 8) if t <= gpn and model.moe_ffn_hidden % t == 0]


def degree_combos(
    model: ModelSpec,
    ex: dict[str, Any],
    gpus: int,
    gpus_per_node: int,
    batch_exact: bool,
    etp_open: bool = False,
) -> list[dict[str, int]]:
    """The layouts to try for the degrees `ex` leaves as None: every combination whose
    tp*pp*cp divides the GPUs, whose EP x expert-TP folds into tp*cp*dp, and (for an exact
    batch) whose data-parallel width divides the global batch. Degrees the row states are
    kept. `etp_open` (an MoE row whose expert-TP cell is UNVERIFIED): expert TP is chosen
    too and each layout carries it as "etp"."""
    given = {d: ex[d] for d in DEGREES if ex.get(d) is not None}
    open_etp = etp_open and model.is_moe
    if len(given) == len(DEGREES) and not open_etp:
        return [given]
    cands = {
        "tp": _tp(model, gpus_per_node),
        "pp": _pp(model),
        "cp": _cp(int(ex["seq_len"])),
        "ep": _ep(model),
        "etp": _etp(model, gpus_per_node) if open_etp else [int(ex.get("etp") or 1)],
    }
    out: list[dict[str, int]] = []
    keys = [*DEGREES, "etp"]
    for combo in itertools.product(*([given[k]] if k in given else cands[k] for k in keys)):
        d = dict(zip(keys, combo, strict=True))
        etp = d.pop("etp") if not open_etp else d["etp"]
        mp = d["tp"] * d["pp"] * d["cp"]
        if gpus % mp:
            continue
        dp = gpus // mp
        if batch_exact and int(ex["global_batch"]) % dp:
            continue
        if (d["tp"] * d["cp"] * dp) % (d["ep"] * etp):
            continue
        out.append(d)
    out.sort(key=lambda d: (d["tp"] * d["pp"] * d["cp"], d["pp"], d["cp"], -d["ep"],
                            d.get("etp", 1)))  # fmt: skip
    return out[:MAX_COMBOS]


def unverified_degrees(ex: dict[str, Any]) -> list[str]:
    """The degrees the row leaves to be chosen."""
    return [d for d in DEGREES if ex.get(d) is None]


__all__ = ["DEGREES", "MAX_COMBOS", "POWERS", "degree_combos", "unverified_degrees"]
