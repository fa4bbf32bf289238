"""Launches of Megatron-Core's MoE router by routing configuration (DeepSeek-V3's routing).

`host_ops.LAUNCHES` counts the router for Mixtral/Qwen-style routing: softmax scores, plain
top-k, the micro-batch `aux_loss` (`"router"` 28 / 13, `"router_fused"` 12 / 13). DeepSeek-V3
routes differently (Megatron-LM `--moe-router-score-function sigmoid
--moe-router-enable-expert-bias --moe-router-num-groups 8 --moe-router-group-topk 4
--moe-router-load-balancing-type seq_aux_loss`, the GB200 reproduce guide @32ea0af and
Megatron-Bridge v0.4.2 `deepseek_v3_bridge.py` 63-66 + `model_bridge.py` 370-371), and each of
those settings runs more kernels in the unfused path. Counted from NVIDIA/Megatron-LM
core_v0.14.0 (the first release with `--moe-router-fusion`; `router.py` `TopKRouter.routing`,
`moe_utils.py` `topk_routing_with_score_function`, `group_limited_topk`,
`compute_routing_scores_for_aux_loss`, `_apply_seq_aux_loss`; unchanged in effebd81, the
0.15 dev commit of the ladder's final state, except deterministic-mode branches) and
NVIDIA/TransformerEngine PR 1883 (62acae0, `pytorch/router.py` + `csrc/extensions/router.cpp`:
one kernel per fused function and direction, outputs `at::empty`). Extra launches per MoE
layer and micro-batch over the table's router, forward / backward (the table's convention:
16-bit logits, so a cast wherever the code calls `.float()` / `.type_as`):

| setting | unfused fwd / bwd | fused fwd / bwd | code |
|---|---|---|---|
| `sigmoid` scores | +7 / +13 | 0 / 0 | top-k path: `logits.float()`, sigmoid, `type_as`, top-k, `sum`, `+ 1e-20`, div (7) in place of top-k, softmax, cast (3); aux scores: sigmoid, sum, add, div (4) in place of softmax (1); backward: div (1 for the numerator, 4 for the denominator: `-grad * self / other / other`), the grad accumulation of `scores`, sigmoid and the two casts (+7 over cast + softmax); aux: div 5, accumulation, sigmoid (+6 over softmax) |
| expert bias | +4 / 0 | +2 / 0 | `scores + expert_bias`, `torch.gather` of the unbiased scores at the chosen experts; `local_tokens_per_expert += routing_map.sum(0)` (sum, add) after routing, in both paths; the bias takes no gradient, gather's backward (zeros + scatter_add) replaces top-k's (zeros + scatter) |
| group-limited top-k | +9 / +1 (0 with expert bias) | 0 / 0 | `group_limited_topk` in place of one `torch.topk`: top-2 per group, sum, top-k of groups, `zeros_like`, `scatter_`, the expanded mask's reshape (a copy), `.bool()`, `~`, `masked_fill`, top-k (10); backward: `masked_fill`'s (only when the selected scores carry the gradient, i.e. without expert bias) |
| `seq_aux_loss` | +1 / +1 | +1 / +1 | `_apply_seq_aux_loss`: the loss divided by the batch size; its backward (token counts per sequence come from a view of the routing map: same `sum`) |

DeepSeek-V3 (all four): unfused 49 / 27, fused 15 / 14 (fused backward: the table's 13 kept,
an upper bound — each TE fused function launches one backward kernel in place of at least one,
but the table gives no per-function split of the unfused backward to subtract; `host_ops`).
NVIDIA's GB200 write-up (Megatron-LM `docs/discussions/deepseek-v3-gb200-optimization` @1d9edcf)
counts "the router part" 72 kernels unfused and 31 with `--moe-router-fusion` (2.1.4, "for
calculating the routing map ... and for calculating and counting the aux loss") and 17 for
"the router and preprocess parts" under DeepEP (2.2.1), without saying which passes: the code's
forward + backward is 76 -> 29; forward alone 49 -> 15, or 67 -> 33 with the alltoall dispatcher's
18 launches before its host wait; under DeepEP the router's 15 forward launches plus 2 to 5 of the
dispatcher's before the wait (layout and notify; the multihot map 3) make 17-20. The router's
top-k scaling factor (`--moe-router-topk-scaling-factor 2.5`: one `mul` each way) and the
dispatcher's `--moe-router-padding-for-quantization` (stated only for the final state, whose
preprocess is captured in a CUDA graph) are not counted.

A model states its routing in `ModelSpec` (`moe_router_score`, `moe_router_groups` +
`moe_router_group_topk`, `moe_router_expert_bias`, `moe_router_aux_loss`): from a Hugging Face
DeepSeek config (`scoring_func`, `n_group` / `topk_group`, `topk_method: noaux_tc`, `seq_aux`),
Megatron-LM flags, a row's model notes, or a Megatron-Bridge `deepseek_v3` recipe; a model that
states none keeps the table's count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starfabric.astral.seer.statements import stated

UNFUSED: dict[str, tuple[int, int]] = {
    "router_sigmoid": (7, 13),
    "router_expert_bias": (4, 0),
    "router_group_limited": (9, 0),
    "router_group_limited_grad": (0, 1),
    "router_seq_aux": (1, 1),
}
"""(forward, backward) launches over `host_ops.LAUNCHES["router"]` per setting (module
docstring's table; Megatron-LM core_v0.14.0)."""
FUSED: dict[str, tuple[int, int]] = {
    "router_fused_expert_bias": (2, 0),
    "router_fused_seq_aux": (1, 1),
}
"""(forward, backward) launches over `host_ops.LAUNCHES["router_fused"]` (TE PR 1883 fuses the
score function, bias and group selection into one kernel; the bias update and the batch-size
division stay in Python)."""
DEEPSEEK_V3_RECIPES = ("deepseek_v3",)
"""Megatron-Bridge recipes whose model bridge sets DeepSeek-V3's routing (v0.4.2
`deepseek_v3_bridge.py` 63-66: `seq_aux_loss`, `sigmoid`, expert bias; `model_bridge.py`
370-371 maps the Hugging Face `n_group` 8 / `topk_group` 4 onto the group flags)."""
DEEPSEEK_V3_ROUTING = {
    "moe_router_score": "sigmoid",
    "moe_router_groups": 8,
    "moe_router_group_topk": 4,
    "moe_router_expert_bias": True,
    "moe_router_aux_loss": "seq_aux_loss",
}
"""DeepSeek-V3's routing as its Hugging Face config states it (`scoring_func: sigmoid`,
`n_group: 8`, `topk_group: 4`, `topk_method: noaux_tc`, `seq_aux: true`)."""


def router_modules(
    fused: bool, score: str, groups: int, group_topk: int, expert_bias: bool, aux_loss: str
) -> tuple[str, ...]:
    """The router's extra launch modules (`UNFUSED` / `FUSED` keys) for a routing config; ()
    for softmax, plain top-k and `aux_loss` (the table's count). Group-limited top-k runs when
    both the group count and the groups per token are set (`if group_topk:` in
    `topk_routing_with_score_function`, core_v0.14.0)."""
    grouped = groups > 0 and group_topk > 0
    if fused:
        mods = ["router_fused_expert_bias"] if expert_bias else []
        return tuple(mods + (["router_fused_seq_aux"] if aux_loss == "seq_aux_loss" else []))
    out: list[str] = []
    if score == "sigmoid":
        out.append("router_sigmoid")
    if expert_bias:
        out.append("router_expert_bias")
    if grouped:
        out.append("router_group_limited")
        if not expert_bias:
            out.append("router_group_limited_grad")
    if aux_loss == "seq_aux_loss":
        out.append("router_seq_aux")
    return tuple(out)


_FLAG_GROUPS = re.compile(r"--moe-router-num-groups[ =](\d+)", re.I)
_FLAG_GROUP_TOPK = re.compile(r"--moe-router-group-topk[ =](\d+)", re.I)
_SIGMOID = re.compile(
    r"--moe-router-score-function[ =]sigmoid|\bsigmoid (?:router|routing|gat(?:e|ing) scores?|"
    r"scores?|affinit(?:y|ies))\b(?! of the shared)",
    re.I,
)
_BIAS = re.compile(r"--moe-router-enable-expert-bias|\bexpert[- ]bias\b|aux(?:iliary)?-loss-free",
                   re.I)  # fmt: skip
_SEQ_AUX = re.compile(
    r"--moe-router-load-balancing-type[ =]seq_aux_loss|\bseq(?:uence)?[-_ ](?:level )?aux", re.I
)


def row_routing(texts: Iterable[str | None], recipe: str | None) -> dict[str, object]:
    """`ModelSpec` routing fields a row states: Megatron-LM's router flags (or their words) in
    its cells, or a Megatron-Bridge recipe whose bridge sets DeepSeek-V3's routing; {} when it
    states none."""
    out: dict[str, object] = dict(DEEPSEEK_V3_ROUTING) if recipe in DEEPSEEK_V3_RECIPES else {}
    text = " ; ".join(t for t in texts if t)
    groups, gtopk = _FLAG_GROUPS.search(text), _FLAG_GROUP_TOPK.search(text)
    if groups and gtopk:
        out["moe_router_groups"] = int(groups.group(1))
        out["moe_router_group_topk"] = int(gtopk.group(1))
    if stated(_SIGMOID, text):
        out["moe_router_score"] = "sigmoid"
    if stated(_BIAS, text):
        out["moe_router_expert_bias"] = True
    if stated(_SEQ_AUX, text):
        out["moe_router_aux_loss"] = "seq_aux_loss"
    return out


__all__ = [
    "DEEPSEEK_V3_RECIPES",
    "DEEPSEEK_V3_ROUTING",
    "FUSED",
    "UNFUSED",
    "router_modules",
    "row_routing",
]
