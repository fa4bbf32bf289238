"""Split a pipeline stage's time per micro-batch into a part fixed per layer and a part per sequence.

Rows of a published-runs CSV that differ only in micro-batch size (same model, GPUs, TP/PP/DP/EP,
VPP 1, global batch, sequence, recompute, framework) give two points of the 1F1B schedule:

    iteration = (m + p - 1) x slot,   m = global batch / (DP x micro-batch)

(Narayanan et al. SC'21, section 2.2: m micro-batches, p stages, one slot = a micro-batch's
forward and backward on the slowest stage). With slot = fixed + per_seq x micro-batch, the two
points solve for `fixed` (time a micro-batch costs whatever its size) and `per_seq` (time per
sequence in it); both are printed per layer of the slowest stage (ceil(layers / PP)). With
`--json` (the output of `starfabric astral seer validate --json`), Seer's predicted split of the
same pair is printed beside the published one.

    python scripts/seer_microbatch_split.py --csv tests/data/published_runs/development_runs_2.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from starfabric.astral.seer.validate import stated_iteration_times

KEY_FIELDS = (
    "model", "gpu", "num_gpus", "tp", "pp", "vpp", "dp", "cp", "ep", "etp",
    "global_batch_seqs", "seq_len", "recompute", "framework", "interconnect",
)  # fmt: skip
"""A pair's rows agree on all of these and differ in `micro_batch`."""


@dataclass(frozen=True)
class Split:
    """One pair's slot split: seconds per layer of the slowest stage."""

    row_lo: str
    row_hi: str
    mb_lo: int
    mb_hi: int
    slot_lo_s: float
    slot_hi_s: float
    fixed_per_layer_s: float
    per_seq_per_layer_s: float


def slot_time(iteration_s: float, global_batch: int, dp: int, micro_batch: int, pp: int) -> float:
    """Seconds of one 1F1B slot: the iteration over its m + p - 1 slots."""
    m = global_batch // (dp * micro_batch)
    if m < 1:
        raise ValueError(f"global batch {global_batch} < DP {dp} x micro-batch {micro_batch}")
    return iteration_s / (m + pp - 1)


def split(slot_lo: float, mb_lo: int, slot_hi: float, mb_hi: int) -> tuple[float, float]:
    """(fixed, per_seq) with slot = fixed + per_seq x micro-batch through the two points."""
    if mb_hi == mb_lo:
        raise ValueError("a pair needs two different micro-batch sizes")
    per_seq = (slot_hi - slot_lo) / (mb_hi - mb_lo)
    return slot_lo - per_seq * mb_lo, per_seq


def _int(cell: str) -> int | None:
    return int(cell) if cell.strip().isdigit() else None


def pairs(rows: Iterable[Mapping[str, str]], times: Mapping[str, float]) -> list[Split]:
    """Every pair of rows that differ only in micro-batch (VPP 1, all degrees stated), split
    with the iteration times in `times` (row id -> seconds; rows without one are skipped)."""
    groups: dict[tuple[str, ...], list[Mapping[str, str]]] = {}
    for r in rows:
        if r["row_id"] not in times or r.get("vpp", "").strip() not in ("1", ""):
            continue
        if any(_int(r[f]) is None for f in ("micro_batch", "pp", "dp", "layers",
                                            "global_batch_seqs")):  # fmt: skip
            continue
        groups.setdefault(tuple(r.get(f, "") for f in KEY_FIELDS), []).append(r)
    out = []
    for members in groups.values():
        by_mb = sorted(members, key=lambda r: int(r["micro_batch"]))
        lo, hi = by_mb[0], by_mb[-1]
        if int(lo["micro_batch"]) == int(hi["micro_batch"]):
            continue
        pp, dp, gbs = int(lo["pp"]), int(lo["dp"]), int(lo["global_batch_seqs"])
        layers = math.ceil(int(lo["layers"]) / pp)
        mb_lo, mb_hi = int(lo["micro_batch"]), int(hi["micro_batch"])
        s_lo = slot_time(times[lo["row_id"]], gbs, dp, mb_lo, pp)
        s_hi = slot_time(times[hi["row_id"]], gbs, dp, mb_hi, pp)
        fixed, per_seq = split(s_lo, mb_lo, s_hi, mb_hi)
        out.append(Split(lo["row_id"], hi["row_id"], mb_lo, mb_hi, s_lo, s_hi,
                         fixed / layers, per_seq / layers))  # fmt: skip
    return sorted(out, key=lambda s: s.row_lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, required=True, help="published-runs CSV")
    ap.add_argument("--json", type=Path, help="`seer validate --json` output of the same CSV")
    a = ap.parse_args(argv)
    with a.csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    pub = pairs(rows, stated_iteration_times(rows))
    pred: dict[tuple[str, str], Split] = {}
    if a.json is not None:
        doc = json.loads(a.json.read_text())
        times = {x["row_id"]: float(x["predicted_iter_s"]) for x in doc["rows"]}
        pred = {(s.row_lo, s.row_hi): s for s in pairs(rows, times)}
    print(
        "pair (micro-batch lo / hi)                     slot lo / hi ms   fixed/layer ms"
        "   per-seq/layer ms   (Seer: fixed / per-seq)"
    )
    for s in pub:
        line = (
            f"{s.row_lo} / {s.row_hi} ({s.mb_lo}/{s.mb_hi})".ljust(46)
            + f"{s.slot_lo_s * 1e3:7.1f} /{s.slot_hi_s * 1e3:7.1f}"
            + f"{s.fixed_per_layer_s * 1e3:15.2f}{s.per_seq_per_layer_s * 1e3:19.2f}"
        )
        p = pred.get((s.row_lo, s.row_hi))
        if p is not None:
            line += f"   ({p.fixed_per_layer_s * 1e3:.2f} / {p.per_seq_per_layer_s * 1e3:.2f})"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
