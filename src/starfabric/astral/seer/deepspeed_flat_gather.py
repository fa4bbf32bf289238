"""DeepSpeed ZeRO-3's parameter all-gather: one collective per tensor before v0.6.0, one flat
buffer per fetch from v0.6.0 on.

Seer prices ZeRO-3 gathers that run one collective per parameter tensor at one NIC per GPU
(`comm.PER_PARAMETER_RAILS`, `ExecutionSpec.fsdp_collectives = "parameter"`) and flat-buffer
gathers at the node's aggregate NIC rate. Which of the two a DeepSpeed run used is a property of
its release, read in DeepSpeed's own history (github.com/deepspeedai/DeepSpeed):

- Before commit 4912e0ad7 (PR #1453, "Various ZeRO Stage3 Optimizations + Improvements", merged
  2022-01-20): `Init._allgather_params_coalesced` in deepspeed/runtime/zero/partition_parameters.py
  allocates one output tensor per parameter and launches one `_all_gather_base` (or list
  `all_gather`) per parameter over the whole data-parallel group, then `torch.cuda.synchronize()`.
- From that commit on: `all_gather_coalesced` concatenates the partitions of every parameter
  of a fetch into one flat tensor and gathers it in a single `_all_gather_base` call; the
  commit message: "batching allgather calls to amortize fixed overhead and improve bandwidth
  utilization", likewise for the gradients' reduce-scatter. It is first released in v0.6.0
  (`git describe --contains 4912e0ad7` = v0.6.0~37; tag v0.6.0 2022-03-07,
  `releases.DEEPSPEED`).

The same PR measured the change on AWS p4d (8 A100-40GB, 400 Gb/s EFA per node), ZeRO-3 without
offload, per-GPU batch 16 x 512 tokens, layer-wise activation checkpointing, BF16, a 52B
Hugging Face RoBERTa: 67.61 -> 116.06 TFLOPS/GPU on 64 GPUs, 108 on 256 (model FLOPs, recompute
not counted; PR description, issues corpus). The parameter count alone bounds the gathers:
`PR1453_*` below, tested in tests/astral/seer/test_deepspeed_flat_gather.py.
"""

from __future__ import annotations

from starfabric.astral.seer.releases import DEEPSPEED, YearMonth, named_deepspeed, stated_month

FLAT_GATHER_RELEASE: tuple[int, int] = (0, 6)
"""First DeepSpeed release whose ZeRO-3 gathers each fetch as one flat buffer (commit
4912e0ad7, PR #1453, first tagged in v0.6.0)."""
FLAT_GATHER_SINCE: YearMonth = DEEPSPEED[FLAT_GATHER_RELEASE]
"""(year, month) of the v0.6.0 tag: a stack dated before it gathered per tensor."""

PR1453_PARAMS = 52e9
"""Parameters of the RoBERTa of PR #1453's 50B measurements ("52B parameter Roberta model")."""
PR1453_GPUS = (64, 256)
"""GPUs of the two post-change measurements: 8 and 32 p4d.24xlarge."""
PR1453_TOKENS_PER_GPU = 16 * 512
"""Tokens each GPU processes per step: "batch size/GPU of 16", "sequence length 512"."""
PR1453_TFLOPS_AFTER = {64: 116.06, 256: 108.0}
"""Measured TFLOPS/GPU of the 52B model with the flat gather (model FLOPs: "these TFLOPS/GPU
calculations ignore gradient checkpointing")."""
PR1453_TFLOPS_BEFORE_64 = 67.61
"""The same model on 64 GPUs with DeepSpeed before the PR (per-tensor gathers)."""


def gathers_per_tensor(framework: str | None, year: int | None) -> bool:
    """Whether a DeepSpeed ZeRO-3 run gathered its parameters one tensor at a time: a DeepSpeed
    release named in the framework cell decides (< 0.6); else a YYYY-MM date the cell writes
    (before FLAT_GATHER_SINCE); else the row's year (`validate._year`: a year in the framework
    cell, the newest release it names, or the citation's arXiv identifier): before 2022.
    Assumption: a 2022 run that states no month is taken as flat (v0.6.0 was tagged in March
    2022, so most of that year's runs had it); no date at all: flat, as DeepSpeed is today."""
    text = framework or ""
    named = named_deepspeed(text)
    if named is not None:
        return named < FLAT_GATHER_RELEASE
    month = stated_month(text)
    if month is not None:
        return month < FLAT_GATHER_SINCE
    return year is not None and year < FLAT_GATHER_SINCE[0]


__all__ = [
    "FLAT_GATHER_RELEASE",
    "FLAT_GATHER_SINCE",
    "PR1453_GPUS",
    "PR1453_PARAMS",
    "PR1453_TFLOPS_AFTER",
    "PR1453_TFLOPS_BEFORE_64",
    "PR1453_TOKENS_PER_GPU",
    "gathers_per_tensor",
]
