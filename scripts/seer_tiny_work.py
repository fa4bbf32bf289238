"""Candidate mechanisms for Seer's misses where each GPU's work per step is tiny (session 22i).

MLPerf Training Llama 3.1 8B at 512-1,024 GB200/GB300 (TP 2-4 x CP 4, 1,024-2,048 tokens per GPU
per step), Cisco H100 TP 2 and University of Florida B200 at 256 GPUs run slower than Seer says
(`tests/data/published_runs/mlperf_llama31_8b_runs.csv`). This script prices, per row and with
Seer's own comm model and op table, each candidate the sources name, without changing any
timing (the amax reductions are Seer's own, seer/fp8_amax_reduction.py); docs/astral.md
("Tiny work per GPU", session 22i) reads its output. Columns:

- gap: published minus Seer (ms); per-layer: the gap spread over the layers' forward+backward
  passes of the step (us), i.e. what a per-layer mechanism would have to cost.
- kern: Seer's kernels per layer (forward + backward op-table rows that are not collectives) and
  what they already carry at `efficiency.yaml` `kernel_overhead_s`; need: how many more kernels
  at that floor the per-layer gap would take.
- amax: what TransformerEngine's per-tensor amax all-reduces over TP add to the step
  (seer/fp8_amax_reduction.py, priced in Seer since session 22i: 2 forward + 2 backward per dense
  layer and micro-batch under current scaling or NVFP4 with SP); part of "seer" already.
- dp: Seer's exposed DP term now; then the configuration's own gradient buckets
  (`config_common_8b.sh` BUCKET_SIZE=768000000, pretrain.py `grad_reduce_in_fp32=False`,
  FP8_PARAM_GATHER=True: 2-byte gradients, 1-byte gathers; Megatron-Core fills buckets in reverse
  parameter order, so the input embedding closes the last one) queued behind the backward with
  Seer's bandwidth, and the same with NCCL's own ring latency model added per bucket
  (`src/graph/tuning.cc` @b647562: Simple baseLat 8.4 us + (nsteps - nInterSteps) x 3.4 us +
  nInterSteps x 14 us): the reduce-scatter tail past the backward plus the first bucket's
  parameter all-gather.

    python scripts/seer_tiny_work.py [ROW_ID ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from starfabric.astral.seer.comm import nvlink_domain
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fp8_amax_reduction import AMAX_BYTES, layout_reduces_amax
from starfabric.astral.seer.ops import COMM
from starfabric.astral.seer.validate import read_rows, validate_row
from starfabric.errors import StarfabricError

CSV = Path("tests/data/published_runs/mlperf_llama31_8b_runs.csv")
"""The outside rows this analysis is about (session 22c)."""
AMAX_REDUCTIONS_PER_LAYER = 4
"""QKV and FC1 inputs (forward), proj and FC2 output gradients (backward) of a dense layer
(seer/fp8_amax_reduction.py)."""
CONFIG_BUCKET_PARAMS = 768_000_000
"""MLPerf v5.1 llama31_8b `config_common_8b.sh` BUCKET_SIZE (NVIDIA, and the templates the
other submitters copy)."""
CONFIG_GRAD_BYTES = 2.0
"""pretrain.py DistributedDataParallelConfig(grad_reduce_in_fp32=False): BF16 gradient buckets."""
CONFIG_GATHER_BYTES = 1.0
"""FP8_PARAM_GATHER=True (config_common.sh): FP8 parameter all-gather."""
NCCL_RING_SIMPLE_BASE_US = 8.4
NCCL_RING_SIMPLE_INTRA_US = 3.4
NCCL_RING_SIMPLE_INTER_US = 14.0
"""NCCL tuning.cc (NVIDIA/nccl @b6475625) Ring/Simple baseLat, NVLink hwLat and NET hwLat; the
intra step is max(3.4, 3 x netOverhead 1.0) on x86-Intel / Arm hosts."""


def _nccl_ring_latency_s(ranks: int, nodes: int) -> float:
    """NCCL's modelled latency of one ring reduce-scatter / all-gather (Simple protocol)."""
    steps, inter = ranks - 1, max(0, nodes - 1)
    us = NCCL_RING_SIMPLE_BASE_US + (steps - inter) * NCCL_RING_SIMPLE_INTRA_US
    return (us + inter * NCCL_RING_SIMPLE_INTER_US) * 1e-6


def _row(row: dict[str, str]) -> str:
    res = validate_row(row)
    pred = res.prediction
    job, lay, tl = pred.job, pred.layout, pred.timeline
    model, ex = job.model, job.execution
    ctx = make_context(ex, lay, efficiency_for(lay.gpu, job.system.efficiency), job.system, model)
    layers = model.layers
    m = ex.global_batch / (lay.dp * ex.micro_batch)
    gap = res.published_iter_s - res.predicted_iter_s
    per_layer = gap / (layers * m)
    pc = tl.pieces["dense"]
    kernels = sum(k != COMM for k in pc.fwd_table.kind) + sum(k != COMM for k in pc.bwd_table.kind)
    floor = ctx.eff.kernel_overhead_s
    # FP8 current scaling's amax all-reduces over TP (sequence parallel only).
    amax = 0.0
    if layout_reduces_amax(ex, lay):
        amax = (
            AMAX_REDUCTIONS_PER_LAYER * layers * m * ctx.comm.time("all_reduce", AMAX_BYTES, "tp")
        )
    # DP buckets as the configuration fills them (reverse order: head, layers, embedding).
    kvd = model.kv_heads * (model.hidden // model.heads)
    layer_p = (model.hidden * (model.hidden + 2 * kvd) + model.hidden**2) / lay.tp
    layer_p += 3 * model.hidden * model.ffn_hidden / lay.tp
    emb = model.vocab * model.hidden / lay.tp
    order = [emb] + [layer_p] * layers + [emb]  # backward order; index = layers done
    buckets: list[tuple[float, int]] = []
    cur = 0.0
    for i, p in enumerate(order):
        cur += p
        if cur >= CONFIG_BUCKET_PARAMS or i == len(order) - 1:
            buckets.append((cur, min(i, layers)))
            cur = 0.0
    grp = "dp_cp" if lay.cp > 1 else "dp"
    ranks = lay.dp * lay.cp
    # NCCL's nodes: hosts the group spans, or one inside one NVLink domain (MNNVL clique).
    gpn = job.system.gpus_per_node
    per_host = max(1, min(ranks, gpn // lay.tp)) if lay.tp < gpn else 1
    one_domain = ranks * lay.tp <= nvlink_domain(gpn, lay.gpu, job.system.gpus)
    nodes = 1 if one_domain else -(-ranks // per_host)
    bwd_layer = float(tl.chunk_bwd[0, 0]) * m / layers
    tails = []
    for lat in (0.0, _nccl_ring_latency_s(ranks, nodes)):
        free = 0.0
        for size, done in buckets:
            t = ctx.comm.time("reduce_scatter", size * CONFIG_GRAD_BYTES, grp) + lat
            free = max(done * bwd_layer, free) + t
        ag1 = ctx.comm.time("all_gather", buckets[-1][0] * CONFIG_GATHER_BYTES, grp) + lat
        tails.append(max(0.0, free - layers * bwd_layer) + ag1)
    return (
        f"{res.row_id:22s} {res.gpus:5d} {res.published_iter_s * 1e3:6.1f} "
        f"{res.predicted_iter_s * 1e3:6.1f} {gap * 1e3:+6.1f} {per_layer * 1e6:7.0f} "
        f"{kernels:4d} {kernels * floor * 1e6:5.0f} {per_layer / floor:6.0f} "
        f"{amax * 1e3:5.2f} {pred.breakdown['dp'] * 1e3:5.1f} {len(buckets):3d} "
        f"{tails[0] * 1e3:5.1f} {tails[1] * 1e3:5.1f} {ranks:4d}/{nodes:<3d}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("rows", nargs="*", help="row ids (default: every row of the 8B CSV)")
    ap.add_argument("--csv", default=str(CSV), help="published-runs CSV")
    args = ap.parse_args(argv)
    rows = [r for r in read_rows(args.csv) if not args.rows or r["row_id"] in args.rows]
    print(
        "row                     gpus    pub   seer    gap us/layr kern  k.us   need  amax"
        "    dp  nb cfgdp +nccl ranks/nodes"
    )
    for row in rows:
        try:
            print(_row(row))
        except StarfabricError as err:
            print(f"{row['row_id']:22s} not predicted: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
