"""Memory TorchTitan holds beyond Megatron's accounting: its fp32 loss and FSDP2's buffers.

Read from pytorch/torchtitan 9dec370 (2024-12-26, the release of its published 2024-12
memory tables) and PyTorch's FSDP2 (`torch.distributed.fsdp.fully_shard`):

- Loss. `train.py` l.131-134: `cross_entropy(pred.flatten(0, 1).float(), labels)` on the
  materialised logits (upstream's own note at l.136-138 leaves the loss uncompiled). `log_softmax` saves
  its fp32 output for the backward; at the backward's start `nll_loss_backward` writes a
  dense fp32 gradient of that output and `log_softmax_backward` a dense fp32 gradient of its
  input, while the saved output is still alive: three fp32 tensors per logit (12 bytes), of
  which Seer's loss term (memory.py) counts the saved one. `del pred` (l.307) frees the bf16
  logits before the backward, and the forward's own peak (2 + 4 + 4 bytes) is lower. With TP,
  loss parallel (default on, `--training.disable_loss_parallel`) keeps the logits sharded on
  the vocabulary, as Seer's term does.
- FSDP2 (`torchtitan/parallelisms/parallelize_llama.py` l.318-339): every transformer block
  and the root module are `fully_shard` units with `MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)` (`config_manager.py` l.378-395: `mixed_precision_reduce` default and only
  choice float32). Without PP, a block's parameters are all-gathered in bf16 before its
  compute and the next block's are prefetched (FSDP2's implicit prefetch), the last block is
  not resharded after forward (l.333), and the root unit (embedding, final norm, output
  projection) is gathered for the forward and again for the loss's backward: at the loss
  backward, the root's and two blocks' unsharded bf16 parameters are alive. With PP
  (`reshard_after_forward=False`, l.329) the stage stays gathered, which Seer already counts
  as its weights. In the backward each block's unsharded bf16 gradients are copied into a
  reduce-scatter input of the reduce dtype (FSDP2 `foreach_reduce`): one block's bf16
  gradients and their fp32 copy are in flight.
"""

from __future__ import annotations

import re

from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, Layout

LOSS_FP32_TENSORS_AT_BACKWARD = 3
"""fp32 tensors per logit alive at the loss backward: log_softmax's saved output, the gradient
of that output, the gradient of its input (torchtitan 9dec370 train.py l.131-134)."""
SEER_LOSS_FP32_TENSORS = 1
"""fp32 tensors per logit memory.py's loss term already counts (the saved output)."""
FP32_BYTES = 4.0
PARAM_DTYPE_BYTES = 2.0
"""FSDP2 `MixedPrecisionPolicy.param_dtype` bf16 (torchtitan `mixed_precision_param`)."""
REDUCE_DTYPE_BYTES = 4.0
"""FSDP2 `reduce_dtype` fp32 (torchtitan `mixed_precision_reduce`, only choice float32)."""
GATHERED_BLOCKS = 2
"""Blocks whose parameters are unsharded at once: the one computing and the prefetched one."""


OP_SAC = re.compile(r"op-level|per-op|op sac|op_sac", re.I)
"""A recompute cell naming TorchTitan's per-op selective AC (`--activation_checkpoint.
selective_ac_option op`, the 9dec370 default) rather than its per-layer variant."""


def states_op_sac(framework: str | None, recompute: str | None) -> bool:
    """Whether a TorchTitan row's recompute cell states per-op selective AC."""
    titan = "torchtitan" in (framework or "").lower()
    return titan and bool(OP_SAC.search(recompute or ""))


def op_sac_bytes_per_token(
    h: float, heads: float, kvh: float, dq: float, dv: float, f: float, t: int, sp_div: float
) -> float:
    """Bytes per token one dense Llama block keeps under TorchTitan's per-op SAC
    (parallelize_llama.py l.214-266 at 9dec370: `_custom_policy` saves the ops of `_save_list`
    except every second `aten.mm`, i.e. mm 1, 3, 5, 7 of wq, wk, wv, wo, w1, w3, w2; the
    checkpointed block's input; SDPA's output and fp32 log-sum-exp; with TP the
    reduce-scatter's output). `heads`, `kvh` and `f` are per TP rank. Float8 linears run
    `_scaled_mm`, not in the list: counted as mm here, an over-count on Float8 rows."""
    e = 2.0
    saved = h / sp_div  # the block's input (checkpoint input)
    saved += heads * dq + kvh * dv  # wq (mm 1) and wv (mm 3) outputs
    saved += heads * dv  # SDPA output
    saved += f  # w1 (mm 5) output
    saved += h  # w2 (mm 7) output: a partial sum of the full hidden size under TP
    if t > 1:
        saved += h / sp_div  # the reduce-scatter's output
    return e * saved + 4.0 * heads


def loss_extra_bytes(model: ModelSpec, ex: ExecutionSpec, lay: Layout) -> float:
    """Bytes per GPU of the loss's fp32 tensors beyond memory.py's one saved tensor, on the
    stage holding the loss (one micro-batch's backward at a time)."""
    tok = ex.micro_batch * ex.seq_len / lay.cp
    extra = LOSS_FP32_TENSORS_AT_BACKWARD - SEER_LOSS_FP32_TENSORS
    return extra * FP32_BYTES * tok * model.vocab / lay.tp * (1 + model.mtp_layers)


def root_params(model: ModelSpec, lay: Layout) -> float:
    """Parameters of FSDP2's root unit per TP rank: embedding, final norm, output projection."""
    head = 0 if model.tied_embeddings else model.vocab * model.hidden
    return (model.vocab * model.hidden + head) / lay.tp + model.hidden


def fsdp2_inflight_bytes(
    ex: ExecutionSpec, lay: Layout, block_params: float, root: float, loss_stage: bool
) -> float:
    """Bytes per GPU of FSDP2's unsharded parameters and reduce-scatter buffers in flight:
    `block_params` is one block's parameters per rank (the largest), `root` the root unit's
    (counted on the stage holding the loss, without PP). Zero without ZeRO-3/FSDP."""
    if ex.zero < 3:
        return 0.0
    gathered = 0.0
    if lay.pp == 1:  # with PP the stage stays gathered (already Seer's weights)
        gathered = PARAM_DTYPE_BYTES * (GATHERED_BLOCKS * block_params)
        if loss_stage:
            gathered += PARAM_DTYPE_BYTES * root
    reduce = (PARAM_DTYPE_BYTES + REDUCE_DTYPE_BYTES) * block_params
    return gathered + reduce


__all__ = [
    "GATHERED_BLOCKS",
    "LOSS_FP32_TENSORS_AT_BACKWARD",
    "OP_SAC",
    "fsdp2_inflight_bytes",
    "loss_extra_bytes",
    "op_sac_bytes_per_token",
    "root_params",
    "states_op_sac",
]
