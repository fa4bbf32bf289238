"""TorchTitan's DeepEP unpermute: PyTorch's BF16 atomic scatters at their measured B200 rate.

**What runs** (pytorch/torchtitan @5d4bdd0, NousResearch's DeepEP branch the TTDEEPEP rows ran,
`torchtitan/distributed/deepep/utils.py`; the same two calls upstream @36a4b6942 (2025-12-17)
`_permute_tokens` / `_unpermute_tokens` and @b5bcd76 (2026-08) `deepep.py` 416 / 434). After
DeepEP's dispatch a rank holds D received tokens and sorts their R = tokens x top-k (token,
expert) rows by expert:

- permute: `tokens.index_select(0, sorted_indices)`, a gather (streaming). Its backward is
  `index_add_` of the R rows into the D tokens: an atomic scatter, ATen's
  `indexFuncLargeIndex<c10::BFloat16, ...>` (Seer's `moe.permute.bwd`).
- unpermute: `zeros(D, hidden).scatter_add_(0, idx.expand(-1, hidden), permuted)` in BF16, an
  atomic scatter (Seer's `moe.unpermute`, forward; full activation checkpointing runs it again).
  It is `@torch.compile`d, but PyTorch 2.9's Inductor sends a BF16 scatter_add to ATen in OSS
  builds (`needs_fallback_due_to_atomic_add_limitations`), so the kernel is ATen's
  `_scatter_gather_elementwise_kernel`. Its gradient with respect to the source is a gather
  (`moe.unpermute.bwd`, streaming).

**The measured rate.** Phuc Nguyen's worklog (xrsrke.github.io `moe-worklogs.html`; the author of
the 5d4bdd0 branch; B200, PyTorch 2.9, Qwen3-30B-A3B, EP 8 in a host, eager unpermute):

- "November 18": `indexFuncLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>`,
  GPU time 419.0 ms over 96 invocations, avg 4,364.7 us (`WORKLOG_INDEX_ADD_US`).
- "November 14" Nsight top-15 tables: the forward scatter kernels' total time over the index_add
  kernels' total time is 3.583 / 4.289 s = 0.835 (EP 4) and 1.843 / 1.742 s = 1.058 (EP 2).

The profile does not state its shape. Read as the branch README's documented configuration
(local batch 8 x 4,096 tokens, EP 8, hidden 2,048, top-8: one call adds R x hidden =
536,870,912 elements), the index_add adds `INDEX_ADD_ELEMENTS_PER_S` = 123.0 G elements/s
(local batch 6, the worklog's earlier "unblock lbs=6" commit: 92.3 G/s). The forward scatter
takes `SCATTER_TO_INDEX_ADD` = the two tables' mean ratio (0.947) / 2 of an index_add call's
time per call: the tables count both forward runs (full recompute) against one index_add. Both
are kernel measurements, not a row's published step time; the profile is a development profile
of the runs, not the published runs themselves (the coordinator's decision to adopt it).

**Where it applies** (`ExecutionSpec.moe_atomic_unpermute`, read from a row whose framework cell
names TorchTitan and whose MoE dispatcher is DeepEP's own, not the fused DistMoE backend): every
TorchTitan tree with a DeepEP path read has these two calls (the branch from its first DeepEP
commit f9e5ad698, 2025-11-03, to upstream b5bcd76, 2026-08-21), so no release bound is read. The
rate is applied on Blackwell (an `mxfp8` peak in the catalog: the worklog's B200); on Hopper no
measurement at this shape exists (FoundationTS's H100 "~10 ms", about 54 G elements/s, is
approximate and of another shape), so there the streaming price stays. The rows are those of
Seer's `moe.permute` / `moe.unpermute` times the busiest rank's share (`ops.moe_imbalance`): the
DeepEP path permutes what the rank received.
"""

from __future__ import annotations

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer.fp8_recipe import native_mx
from starfabric.astral.seer.torchtitan_pp import is_torchtitan

WORKLOG_INDEX_ADD_US = 4364.7
"""Phuc Nguyen's worklog, "November 18": avg GPU time of one `indexFuncLargeIndex<c10::BFloat16,
...>` call (under `ScatterAddBackward0`), B200, PyTorch 2.9."""
WORKLOG_INDEX_ADD_CALLS = 96
"""The same table: invocations."""
WORKLOG_INDEX_ADD_TOTAL_MS = 419.0
"""The same table: total GPU time."""
WORKLOG_NSYS_SCATTER_S = {"EP4": 3.583, "EP2": 1.843}
"""Worklog "November 14" Nsight top-15 tables: `_scatter_gather_elementwise_kernel<128, 8, ...>`
total seconds."""
WORKLOG_NSYS_INDEX_ADD_S = {"EP4": 4.289, "EP2": 1.742}
"""The same tables' `indexFuncLargeIndex<c10::BFloat16, ...>` total seconds."""
WORKLOG_LOCAL_BATCH = 8
"""Sequences a rank runs in the profile, read as the branch README's documented configuration
(the rows' toml); the profile does not state it (assumption). The alternative reading is 6 (the worklog's
'unblock lbs=6' commit of 2025-11-14 that precedes it): `worklog_index_add_rate(6)`."""
WORKLOG_SEQ_LEN = 4096
"""Tokens a sequence in the profile: the branch README's sequence length (the rows' toml)."""
WORKLOG_HIDDEN = 2048
"""Qwen3-30B-A3B's hidden size (its HF config.json): the width of one permuted row."""
WORKLOG_TOPK = 8
"""Qwen3-30B-A3B's top-k (its HF config.json, num_experts_per_tok): permuted rows a token."""
WORKLOG_FORWARD_CALLS = 2
"""Forward scatter runs per index_add in the Nsight tables: the forward and its full-recompute
re-run (the README's configuration runs full activation checkpointing; assumption: the
profile does not state it — read as one forward run, a call would take twice the time)."""


def worklog_scatter_ratio(ep: str) -> float:
    """Forward scatter kernels' time over the index_add kernels' time in one worklog table
    (both forward runs of the scatter against the one backward index_add)."""
    return WORKLOG_NSYS_SCATTER_S[ep] / WORKLOG_NSYS_INDEX_ADD_S[ep]


def worklog_index_add_rate(local_batch: int) -> float:
    """Elements per second of the worklog's index_add if each call were one EP-8 rank's permute
    backward at `local_batch` x 4,096 tokens (R = tokens x 8 rows of 2,048 elements)."""
    elements = local_batch * WORKLOG_SEQ_LEN * WORKLOG_TOPK * WORKLOG_HIDDEN
    return elements / (WORKLOG_INDEX_ADD_US * 1e-6)


def scatter_to_index_add(ratio: float) -> float:
    """Time of one forward `scatter_add_` call over one `index_add_` call of the same elements,
    from a table's forward-over-backward ratio (WORKLOG_FORWARD_CALLS forward runs in it)."""
    return ratio / WORKLOG_FORWARD_CALLS


INDEX_ADD_ELEMENTS_PER_S = worklog_index_add_rate(WORKLOG_LOCAL_BATCH)
"""ATen's BF16 `index_add_` on Blackwell at TorchTitan's DeepEP shape (8 adds a destination row,
2,048-wide rows): 536,870,912 elements in 4,364.7 us = 123.0 G elements/s."""
SCATTER_TO_INDEX_ADD = scatter_to_index_add(
    sum(worklog_scatter_ratio(ep) for ep in WORKLOG_NSYS_SCATTER_S) / len(WORKLOG_NSYS_SCATTER_S)
)
"""One forward BF16 `scatter_add_` call's time over one `index_add_` call's (0.473): the mean of
the two Nsight tables' ratios (0.835, 1.058), halved for the two forward runs they hold. Bounds:
0.418 (EP 4) and 0.529 (EP 2). Kept for PyTorch >= 2.10 too, whose Inductor may compile the
BF16 scatter_add to its own Triton atomic kernel (pytorch#167380, 2025-11-07): no measurement of
that kernel was found (assumption)."""
SCATTER_ELEMENTS_PER_S = INDEX_ADD_ELEMENTS_PER_S / SCATTER_TO_INDEX_ADD
"""The forward scatter's rate that follows (259.9 G elements/s)."""
ATOMIC_OPS = ("moe.unpermute", "moe.permute.bwd")
"""Seer's operators these kernels are: the unpermute's forward (and its recompute re-run) and
the permute's backward."""


def runs_deepep_unpermute(framework: str | None, dispatcher: str, fused_dispatch: bool) -> bool:
    """Whether a row runs TorchTitan's DeepEP permute / unpermute: a framework cell naming
    TorchTitan, DeepEP's own dispatch, not the fused DistMoE backend (which has no unpermute)."""
    return is_torchtitan(framework) and dispatcher == "deepep" and not fused_dispatch


def atomic_rates(gpu: GPUSpec, atomic_unpermute: bool) -> tuple[float, float]:
    """(index_add, forward scatter) elements per second where the measured rate applies: the
    DeepEP unpermute on Blackwell, every Blackwell GPU at the B200's rate (assumption: the
    only measurement is B200's); (0, 0) elsewhere (the streaming price stays)."""
    if atomic_unpermute and native_mx(gpu):
        return INDEX_ADD_ELEMENTS_PER_S, SCATTER_ELEMENTS_PER_S
    return 0.0, 0.0


__all__ = [
    "ATOMIC_OPS",
    "INDEX_ADD_ELEMENTS_PER_S",
    "SCATTER_ELEMENTS_PER_S",
    "SCATTER_TO_INDEX_ADD",
    "WORKLOG_FORWARD_CALLS",
    "WORKLOG_HIDDEN",
    "WORKLOG_INDEX_ADD_CALLS",
    "WORKLOG_INDEX_ADD_TOTAL_MS",
    "WORKLOG_INDEX_ADD_US",
    "WORKLOG_LOCAL_BATCH",
    "WORKLOG_NSYS_INDEX_ADD_S",
    "WORKLOG_NSYS_SCATTER_S",
    "WORKLOG_SEQ_LEN",
    "WORKLOG_TOPK",
    "atomic_rates",
    "runs_deepep_unpermute",
    "scatter_to_index_add",
    "worklog_index_add_rate",
    "worklog_scatter_ratio",
]
