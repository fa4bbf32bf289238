"""Activation bytes a pipeline stage holds at its peak, read from the simulated schedule.

Megatron-Core's 1F1B schedules (`pipeline_parallel/schedules.py`) keep one micro-batch's
saved tensors per virtual chunk from its forward to its backward. `schedule.build_timeline`
replays that order (warm-up `(pp - rank - 1) * 2 + (vpp - 1) * pp` forwards under
interleaving, `pp - rank` without; one more under the combined-1F1B EP overlap), so the peak
a stage reaches is a walk over its op list. Two things the memory report used to take as
constants are read from the same walk:

- **Which layers are in flight.** A chunk's saved tensors are those of *its* layers: the
  dense layers of a model whose first layers are dense (DeepSeek-V3's three, `first_k_dense`)
  sit on the first stage, which holds the most micro-batches. Charging every stage the
  model-wide mix of dense and MoE layers (what `memory.py` did) gave the first stage MoE-sized
  activations for dense layers. Each chunk is now charged its own layers' bytes and the peak
  is taken over the walk (`_kernels.peak_inflight` with bytes per chunk instead of layers).
- **How many micro-batches hold the loss.** The output head's logits and the MTP modules'
  tensors live on the last virtual chunk (`--pipeline-model-parallel-layout ...mL`). With
  plain or interleaved 1F1B its backward follows each forward, so one micro-batch holds them;
  Megatron's EP overlap adds a warm-up forward under interleaving (`ep_overlap`), and the last
  rank then runs two last-chunk forwards before the first backward, holding two. The count is
  read from the walk rather than assumed to be one.

- **DualPipe ranks.** A DualPipe rank holds stage s of one direction and stage PP-1-s of the
  other and runs each as a 1F1B pipeline from its own end: PP - s micro-batches of the first,
  s + 1 of the second, PP + 1 on every rank (DeepSeek-V3 technical report, Table 2), each
  charged its own stage's layers (`dualpipe_rank_bytes`).

No new constant: all three follow from the schedules Seer already simulates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from starfabric.astral.seer import _kernels
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import Layout, chunk_moe_layers


def chunk_activation_bytes(
    model: ModelSpec, lay: Layout, per_dense: float, per_moe: float
) -> np.ndarray[Any, Any]:
    """Bytes one micro-batch leaves saved in each (stage, virtual chunk): its dense layers at
    `per_dense` and its MoE layers at `per_moe` (the model's first `moe_dense_layers` are
    dense)."""
    out = np.zeros((lay.pp, lay.vpp))
    for s in range(lay.pp):
        for c, nl in enumerate(lay.stage_layers[s]):
            n_moe = chunk_moe_layers(model, lay, s, c)
            out[s, c] = (nl - n_moe) * per_dense + n_moe * per_moe
    return out


def dualpipe_rank_bytes(chunk_bytes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Peak activation bytes of each DualPipe rank. Rank s holds stage s of one direction and
    stage PP-1-s of the other (DeepSeek-V3 technical report, section 3.2.1: two copies of the
    parameters) and runs each direction as a 1F1B pipeline fed from its own end, so it holds
    PP - s micro-batches of stage s and s + 1 of stage PP-1-s: PP + 1 in all on every rank,
    the report's Table 2 figure. `chunk_bytes`: (PP, 1) bytes per micro-batch per stage."""
    per_stage = chunk_bytes[:, 0]
    p = per_stage.shape[0]
    s = np.arange(p)
    return (p - s) * per_stage + (s + 1) * per_stage[::-1]


def stage_peak_bytes(
    is_fwd: np.ndarray[Any, Any], chunk: np.ndarray[Any, Any], chunk_bytes: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Per stage, the most activation bytes held at once over the (interleaved) 1F1B schedule:
    + a chunk's bytes at its forward, - at its backward."""
    return np.asarray(_kernels.peak_inflight(is_fwd, chunk, chunk_bytes), dtype=float)


def loss_chunk_inflight(is_fwd: np.ndarray[Any, Any], chunk: np.ndarray[Any, Any]) -> int:
    """Micro-batches whose last-virtual-chunk tensors (logits, MTP) the last stage holds at
    once: the peak of (+1 at that chunk's forward, -1 at its backward) on the last stage
    (`_kernels.peak_inflight` with one unit on that chunk)."""
    last = is_fwd[-1:]
    ch = chunk[-1:]
    unit = np.zeros((1, int(ch.max()) + 1 if ch.size else 1))
    unit[0, -1] = 1.0
    return max(1, int(_kernels.peak_inflight(last, ch, unit)[0]))


__all__ = [
    "chunk_activation_bytes",
    "dualpipe_rank_bytes",
    "loss_chunk_inflight",
    "stage_peak_bytes",
]
