"""The router probabilities' own all-to-all in Megatron-Core's `alltoall` token dispatcher.

Commit 2659630721 ("Memory efficient token permutation", NVIDIA/Megatron-LM, first tagged in
core_v0.13.0; absent from core_v0.12.0) moved the multiplication by the router probabilities
from the source rank's unpermutation into the expert activation, so the probabilities travel
with the tokens. Read at core_v0.17.1 (266f1c9), `megatron/core/transformer/moe/
token_dispatcher.py`, `MoEAlltoAllTokenDispatcher.token_dispatch` (lines 671-676): after the
tokens' `all_to_all(self.ep_group, permutated_local_input_tokens, ...)` a second
`all_to_all(self.ep_group, permuted_probs, self.output_splits, self.input_splits)` sends one
probability per (token, expert) copy; with expert-TP both are all-gathered over the ETP group
(`dispatch_postprocess`, 702-706). The probabilities carry the router's gradient, so autograd's
`_AllToAll.backward` sends their gradient back: one more all-to-all in each backward (and in a
full-recompute replay, one more forward). The combine (`token_combine`, 815) sends tokens only.

The bytes are negligible (4 per copy against 2 x hidden for the token); what the call costs is
its fixed time: on p5/p6 EFA 0.25 ms per cross-host all-to-all (`efa_alltoall`), i.e. per MoE
layer and micro-batch two more such calls (three with full recompute) next to Seer's four
(six) token all-to-alls. On InfiniBand the call is the step latency (tens of us).

Not modelled: the all-gather of the token counts over the EP x ETP group in `preprocess`
(line 541, `gather_from_sequence_parallel_region(num_local_tokens_per_expert,
group=self.tp_ep_group)`, forward only, 8 bytes per expert and rank): forward-only collectives
have no place in Seer's operator table, which mirrors every forward collective in the
backward; it is the host wait's round trip that `host_segments` places.
"""

from __future__ import annotations

PROBS_ALL_TO_ALL_SINCE: tuple[int, int] = (0, 13)
"""First Megatron-Core release whose alltoall dispatcher sends the probabilities (2659630721)."""

PROB_BYTES = 4.0
"""Bytes per (token, expert) probability: fp32, the dtype Megatron-Core's router returns with
`moe_router_dtype = "fp32"` (the Megatron-Bridge MoE recipes' setting); 2 in BF16 without it."""


def sends_probs_all_to_all(release: tuple[int, int] | None) -> bool:
    """Whether a Megatron-Core release's alltoall dispatcher sends the probabilities in their
    own all-to-all; an unknown release (None): no, the caller keeps the older behaviour."""
    return release is not None and release >= PROBS_ALL_TO_ALL_SINCE


__all__ = ["PROBS_ALL_TO_ALL_SINCE", "PROB_BYTES", "sends_probs_all_to_all"]
