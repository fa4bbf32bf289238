"""Megatron-Core's second token permutation: sorting received tokens by local expert.

Megatron-Core's `alltoall` token dispatcher permutes a rank's token-expert copies by
destination rank before the all-to-all ("Permutation 1", `moe.permute`). What arrives is
ordered by source rank, then by expert; the grouped GEMM needs it by expert, so when a rank
holds more than one expert the dispatcher copies the received buffer once more ("Permutation 2:
Sort tokens by local expert" — `sort_chunks_by_idxs`, or with capacity padding a
`view(...).transpose(0, 1).contiguous()`), after the expert-TP all-gather, and copies the
experts' output back into source order before the combine ("Unpermutation 2"). Source:
NVIDIA/Megatron-LM `megatron/core/transformer/moe/token_dispatcher.py`,
`MoEAlltoAllTokenDispatcher.token_permutation` / `token_unpermutation` at core_v0.11.0 (the
same two copies in every release since core_r0.8). The DeepEP (`flex`) dispatcher delivers
tokens already grouped for one permutation on the receiving side, so it has no second copy.

Each copy is a memory-bound gather: it reads and writes every received copy once; its backward
is the inverse gather, the same bytes.
"""

from __future__ import annotations

LOCAL_SORT_DISPATCHERS = ("alltoall",)
"""Dispatchers that sort received tokens by local expert (Megatron-Core's NCCL all-to-all)."""
PERMUTATION_BWD_BYTES_FACTOR = 1.0
"""The backward of a pure permutation copy is the inverse permutation: the same bytes."""
SORT_SUFFIX = "sort_chunks"
"""Operator names ending with this are the local-expert sorts (backward_of times them by
PERMUTATION_BWD_BYTES_FACTOR)."""


def local_sort_bytes(
    dispatcher: str, local_experts: float, received_copies: float, hidden: int, elem: float
) -> float:
    """HBM bytes of one local-expert sort on a rank that received `received_copies` token-expert
    copies of `hidden` values (after the expert-TP gather): read + write each copy; 0 when the
    dispatcher does not sort or the rank holds a single expert."""
    if dispatcher not in LOCAL_SORT_DISPATCHERS or local_experts <= 1:
        return 0.0
    return 2.0 * elem * received_copies * hidden


__all__ = [
    "LOCAL_SORT_DISPATCHERS",
    "PERMUTATION_BWD_BYTES_FACTOR",
    "SORT_SUFFIX",
    "local_sort_bytes",
]
