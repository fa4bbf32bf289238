"""Megatron-Core's partial full recompute: `--recompute-granularity full --recompute-method
{uniform,block} --recompute-num-layers N` (Megatron-Bridge / NeMo: recompute_granularity,
recompute_method, recompute_num_layers).

What the code does (NVIDIA/Megatron-LM megatron/core/transformer/transformer_block.py,
`TransformerBlock._checkpointed_forward`, core_v0.14.0; the same loop since core_r0.5):
- `forward` calls `_checkpointed_forward` only when the granularity is 'full'; the loop runs
  over `num_layers_per_pipeline_rank = len(self.layers)`, the layers of this TransformerBlock.
  Under interleaving every virtual-pipeline model chunk builds its own TransformerBlock, so
  N counts per (stage, virtual chunk).
- uniform: `checkpoint_handler(custom(l, l + N))` for l = 0, N, 2N, ...: groups of N
  consecutive layers, each group's input the only tensor kept; the backward re-runs the whole
  group (every layer's forward once more) and holds the group's full activations meanwhile.
- block: layers 0..N-1 are checkpointed one by one (`custom(l, l + 1)`: input kept, forward
  re-run), layers N.. run plainly (`custom(l, l + 1)(...)` outside the checkpoint): they keep
  every activation and re-run nothing. Selective recompute does not apply to them: the
  TransformerLayer / attention modules switch their checkpoints on only when the granularity
  is 'selective' (`recompute_granularity == 'selective'` in transformer_layer.py and
  attention.py), and the granularity is 'full' here.
- FP8 shift: under FP8 a layer whose input needs no gradient (the first pipeline stage's
  first layer) is skipped and the window moves by one. Seer does not model the shift (the
  same count of layers is re-run).

MTP modules are outside the TransformerBlock and keep the granularity's full recompute.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, chunk_moe_layers

Method = str
"""'uniform' or 'block' (ExecutionSpec.recompute_method)."""


def recomputed_layers(method: Method | None, n: int | None, layers: int) -> int:
    """Layers of one model chunk of `layers` layers whose forward full recompute re-runs:
    every layer without a method or under uniform, the first min(N, layers) under block."""
    if method == "block":
        return min(int(n or 0), layers)
    return layers


def kept_inputs(method: Method | None, n: int | None, layers: int) -> int:
    """Checkpointed inputs (one hidden-state tensor each) one micro-batch keeps in a chunk:
    one per layer (no method, block's first N), one per group of N layers (uniform)."""
    if method == "uniform":
        return math.ceil(layers / max(int(n or 1), 1))
    return recomputed_layers(method, n, layers)


def replay_layers(method: Method | None, n: int | None, layers: int) -> int:
    """Layers whose full activations one uniform group's replay holds at once in the
    backward, beyond the one layer a per-layer checkpoint replays (Seer's memory counts
    no replay transient for per-layer full recompute): N - 1 under uniform, else 0."""
    if method == "uniform" and layers:
        return min(int(n or 1), layers) - 1
    return 0


def recomputed_split(n_dense: int, n_moe: int, rec: int) -> tuple[int, int]:
    """(dense, MoE) layers among a chunk's first `rec`: a chunk's dense layers (the model's
    first `moe_dense_layers`) precede its MoE layers."""
    rd = min(rec, n_dense)
    return rd, min(rec - rd, n_moe)


def plain_execution(ex: ExecutionSpec) -> ExecutionSpec:
    """`ex` with no recompute of any kind: how block's layers past a chunk's first N run, and
    what they (and uniform's replayed group) keep."""
    return ex.model_copy(
        update={"recompute": "none", "recompute_method": None, "recompute_num_layers": None}
    )


def chunk_bytes(
    model: ModelSpec,
    ex: ExecutionSpec,
    lay: Layout,
    full: tuple[float, float],
    plain: tuple[float, float],
) -> np.ndarray[Any, Any]:
    """Bytes one micro-batch leaves saved in each (stage, virtual chunk) under
    `ex.recompute_method`: `full` = (dense, MoE) bytes of a checkpointed layer (its input),
    `plain` = those of a layer run without recompute. block: the chunk's first N layers at
    `full`, the rest at `plain`; uniform: one input per group of N layers."""
    m, n = ex.recompute_method, ex.recompute_num_layers
    out = np.zeros((lay.pp, lay.vpp))
    for s in range(lay.pp):
        for c, nl in enumerate(lay.stage_layers[s]):
            n_moe = chunk_moe_layers(model, lay, s, c)
            n_dense = nl - n_moe
            if m == "uniform":
                # a group's input is the hidden state, the same tensor for dense and MoE
                out[s, c] = kept_inputs(m, n, nl) * full[0]
                continue
            rd, rm = recomputed_split(n_dense, n_moe, recomputed_layers(m, n, nl))
            out[s, c] = (
                rd * full[0] + rm * full[1] + (n_dense - rd) * plain[0] + (n_moe - rm) * plain[1]
            )
    return out


def replay_bytes(ex: ExecutionSpec, lay: Layout, s: int, plain: tuple[float, float]) -> float:
    """Bytes a uniform group's replay holds on stage s beyond per-layer checkpointing: N - 1
    more layers' full activations of one micro-batch (the largest layer kind), 0 otherwise."""
    m, n = ex.recompute_method, ex.recompute_num_layers
    extra = max((replay_layers(m, n, nl) for nl in lay.stage_layers[s]), default=0)
    return extra * max(plain)


__all__ = [
    "chunk_bytes",
    "kept_inputs",
    "plain_execution",
    "recomputed_layers",
    "recomputed_split",
    "replay_bytes",
    "replay_layers",
]
