"""The pipeline layout a Megatron-Bridge MLA-MoE recipe sets when a row states none.

DeepSeek-V3 and Kimi-K2 have 61 decoder layers, which no PP x VPP of interest divides, and
Megatron-Core refuses an uneven split unless a layout is given. Megatron-Bridge's recipes give
one from a (PP, VPP) map (NVIDIA-NeMo/Megatron-Bridge v0.5.0, fcbb603;
`recipes/deepseek/deepseek_v3.py` `set_deepseek_v3_pipeline_model_parallel_layout`, the same
map since v0.2.0; `recipes/kimi/kimi_k2.py` `_get_kimi_k2_pipeline_layout`): every virtual
stage holds ceil(61 / stages) decoder layers except the last, which takes the remainder with the
MTP layers and the loss — (4,1) 16/16/16/13, (8,1) and (4,2) 8 x 7 + 5, (16,1), (8,2), (4,4)
and Kimi's (2,8) 4 x 15 + 1. The performance scripts use the same map (`deepseek_llm_pretrain.py`:
the B200 and B300 functions always, the others when the workload names no `pp_layout`).

Seer's own default for an indivisible split (`parallel.uneven_pipeline_layers`, Llama 3's:
one layer fewer on the first and last stages) leaves the last stage ceil - 1 decoder layers
*plus* the MTP layer and the loss, which on PP 16 makes it about 1.75x a middle stage's work
(DeepSeek-V3: 3 MoE layers + MTP + two vocabulary projections against 4 MoE layers); the
recipe's split leaves it one decoder layer. A row that names Megatron-Bridge and one of these
recipes' models, with a (PP, VPP) in the recipe's map and no split of its own, now gets the
recipe's split; any other row keeps Seer's default.
"""

from __future__ import annotations

import re

from starfabric.astral.seer.bridge_recipe import BRIDGE
from starfabric.astral.seer.statements import stated

RECIPE_LAYOUT_STAGES: dict[str, frozenset[tuple[int, int]]] = {
    "deepseek_v3": frozenset({(4, 1), (8, 1), (4, 2), (16, 1), (8, 2), (4, 4)}),
    "kimi_k2": frozenset({(4, 1), (8, 1), (4, 2), (16, 1), (8, 2), (4, 4), (2, 8)}),
}
"""(PP, VPP) pairs each recipe's layout map covers (v0.5.0 files named in the module
docstring); (1, 1) maps to no layout (nothing to split). Other pairs raise or fall through to
Megatron-Core's even split, so a run there states its own layout."""

RECIPE_LAYERS: dict[str, int] = {"deepseek_v3": 61, "kimi_k2": 61}
"""Decoder layers the recipes' maps are written for (the same v0.5.0 files: the map's lists
hold 61 "decoder" entries); a model of another depth (a shortened proxy) is not split by
them."""

_MODEL_RECIPE = (
    (re.compile(r"deepseek[-_ ]?v3", re.I), "deepseek_v3"),
    (re.compile(r"kimi[-_ ]?k2", re.I), "kimi_k2"),
)


def names_bridge(framework: str | None, citation: str | None = None) -> bool:
    """Whether a row ran Megatron-Bridge: its framework cell (or, when that does not say, its
    citation: a Megatron-Bridge page or file) names it, not negated."""
    if BRIDGE.search(framework or ""):  # the framework cell says: its word (even "not ...")
        return bool(stated(BRIDGE, framework or ""))
    return bool(stated(BRIDGE, citation or ""))


def layout_recipe(
    model_name: str, framework: str | None, citation: str | None = None
) -> str | None:
    """The Megatron-Bridge recipe whose layout map a row runs: the row names Megatron-Bridge
    (`names_bridge`) and its model is one of the mapped recipes' models."""
    if not names_bridge(framework, citation):
        return None
    for pat, recipe in _MODEL_RECIPE:
        if pat.search(model_name):
            return recipe
    return None


def recipe_split(recipe: str, layers: int, pp: int, vpp: int) -> tuple[int, ...] | None:
    """Decoder layers per virtual stage (first stage first) of the recipe's map for (PP, VPP):
    ceil(layers / stages) on every stage but the last, which takes the remainder; None where
    the map has no entry, the model is not the recipe's depth, or the split would leave the
    last stage negative."""
    if (pp, vpp) not in RECIPE_LAYOUT_STAGES.get(recipe, frozenset()):
        return None
    if layers != RECIPE_LAYERS.get(recipe):
        return None  # the map lists 61 layers; another depth keeps Seer's own split
    stages = pp * vpp
    per = -(-layers // stages)
    last = layers - per * (stages - 1)
    if last < 0:
        return None
    return (per,) * (stages - 1) + (last,)


__all__ = ["RECIPE_LAYERS", "RECIPE_LAYOUT_STAGES", "layout_recipe", "names_bridge", "recipe_split"]
