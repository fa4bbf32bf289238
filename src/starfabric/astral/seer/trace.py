"""Chrome-trace (Perfetto) JSON of one predicted iteration.

One process per PP stage (the timeline of its representative rank), with a compute track
(operators as slices, grouped under their forward/backward pass), a comm track for exposed
TP/CP/EP/PP communication and a DP track for gradient buckets and the optimizer step. Very long
iterations detail operators for the first micro-batch only, so the file stays loadable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from starfabric.astral.seer import partial_recompute
from starfabric.astral.seer.ops import COMM
from starfabric.astral.seer.predict import Prediction
from starfabric.astral.seer.schedule import PieceCost, chunk_pieces
from starfabric.report.trace import ChromeTrace

MAX_OP_SLICES = 200_000
"""Above this many operator slices the trace details operators of micro-batch 0 only (every
pass still gets its slice), so the file stays loadable in Perfetto."""


def _piece_sequence(pred: Prediction, s: int, c: int) -> list[str]:
    """Pieces of chunk c on stage s in forward order: embedding, layers, logits."""
    counts = chunk_pieces(pred.job.model, pred.layout, s, c)
    first = pred.layout.chunk_first_layer[s][c]
    n = pred.layout.stage_layers[s][c]
    model = pred.job.model
    layers = [
        "moe" if model.is_moe and i >= model.moe_dense_layers else "dense"
        for i in range(first, first + n)
    ]
    ex = pred.job.execution
    if ex.recompute_method == "block":  # past the chunk's first N, layers re-run nothing
        keep = partial_recompute.recomputed_layers("block", ex.recompute_num_layers, n)
        layers = layers[:keep] + [f"{k}_norec" for k in layers[keep:]]
    return ["embedding"] * counts["embedding"] + layers + ["logits"] * counts["logits"]


def _emit_ops(
    tr: ChromeTrace, proc: str, piece: PieceCost, t0: float, which: str, tag: str
) -> float:
    if which == "bwd":
        table, costs = piece.bwd_table, piece.bwd_costs
        mask = np.ones(len(table), dtype=bool)
    else:
        table, costs = piece.fwd_table, piece.fwd_costs
        if which == "rec-full":
            mask = np.ones(len(table), dtype=bool)
        elif which == "rec-selective":
            mask = np.asarray(table.selective, dtype=bool)
        else:
            mask = np.ones(len(table), dtype=bool)
    t = t0
    for i in np.flatnonzero(mask):
        dur = float(costs.exposed[i])
        if dur <= 0:
            continue
        track = "comm" if costs.kind[i] == COMM else "compute"
        name = table.name[i] + (" (recompute)" if which.startswith("rec") else "")
        tr.slice(proc, track, name, t, dur, cat=tag)
        t += dur
    return t


def build_trace(pred: Prediction) -> ChromeTrace:
    """The iteration's timeline as a ChromeTrace."""
    tl, lay = pred.timeline, pred.layout
    tr = ChromeTrace()
    p, n = tl.is_fwd.shape
    per_pass = sum(len(pc.fwd_table) + len(pc.bwd_table) for pc in tl.pieces.values())
    layers_per_chunk = max(max(x) for x in lay.stage_layers)
    fine = p * n * per_pass * layers_per_chunk <= MAX_OP_SLICES
    rec = pred.job.execution.recompute
    for s in range(p):
        proc = f"PP stage {s}"
        for i in range(n):
            f = bool(tl.is_fwd[s, i])
            c, mb = int(tl.chunk[s, i]), int(tl.mb[s, i])
            t0, t1 = float(tl.start[s, i]), float(tl.end[s, i])
            label = f"{'F' if f else 'B'} mb{mb} chunk{c}"
            tr.slice(proc, "passes", label, t0, t1 - t0, cat="pass", args={"micro_batch": mb})
            if not fine and mb != 0:
                continue
            seq = _piece_sequence(pred, s, c)
            t = t0
            if f:
                for key in seq:
                    t = _emit_ops(tr, proc, tl.pieces[key], t, "fwd", "forward")
            else:
                for key in reversed(seq):
                    if rec != "none" and key in ("dense", "moe"):
                        t = _emit_ops(tr, proc, tl.pieces[key], t, f"rec-{rec}", "recompute")
                    t = _emit_ops(tr, proc, tl.pieces[key], t, "bwd", "backward")
        for j, (a, b) in enumerate(tl.dp_windows[s]):
            tr.slice(proc, "dp", f"grad bucket {j}", a, b - a, cat="dp")
        end = float(tl.stage_end_s[s] + tl.tail_s[s])
        opt = pred.breakdown["optimizer"]
        tr.slice(proc, "dp", "optimizer step", end, opt, cat="optimizer")
    return tr


def write_trace(pred: Prediction, path: str | Path) -> Path:
    """Write the iteration's Chrome-trace JSON to `path`."""
    return build_trace(pred).write(path)


def trace_json(pred: Prediction) -> dict[str, Any]:
    """The trace as a JSON-ready mapping."""
    return build_trace(pred).to_json()
