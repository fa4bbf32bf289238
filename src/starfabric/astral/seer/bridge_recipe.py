"""Which of Megatron-Core's optional layer fusions a Megatron-Bridge recipe run leaves off.

Megatron-Core's `TransformerConfig` dataclass defaults `apply_rope_fusion` and
`bias_activation_fusion` to False (NVIDIA/Megatron-LM core_v0.17.1, 266f1c9,
`megatron/core/transformer/transformer_config.py` lines 423 and 440); Megatron-LM's own launcher
turns both on unless `--no-rope-fusion` / `--no-bias-swiglu-fusion` is given
(`megatron/training/arguments.py` 2473-2483). Megatron-Bridge builds its model providers on the
dataclass (NVIDIA-NeMo/Megatron-Bridge v0.4.2, c810129: `models/gpt_provider.py`'s
`GPTModelProvider(TransformerConfig)` sets neither field), so a run of a shipped *recipe*
(`recipes/qwen/qwen3_moe.py` `qwen3_30b_a3b_pretrain_config` / `qwen3_235b_a22b_pretrain_config`,
which set `moe_permute_fusion` and `moe_router_fusion=False` but neither of these) keeps both off,
unless its model bridge sets them: `models/deepseek/deepseek_v3_bridge.py` (and v2, Kimi-K2,
GLM-4.5, GPT-OSS; Moonlight's recipe goes through the DeepSeek-V3 bridge) set
`bias_activation_fusion = True` (DeepSeek, Kimi: `apply_rope_fusion = False`), and
`models/llama/llama_bridge.py` (65-69) sets both to True. The repository's
`scripts/performance` configs are a different path: `utils/overrides.py` sets
`apply_rope_fusion = True` and `configs/qwen/qwen3_llm_pretrain.py` `bias_activation_fusion = True`,
so a row that names those scripts is not read as a recipe run — nor one that cites a Megatron-Bridge
(or NeMo) performance summary: those published tables are what `scripts/performance` prints
(assumption: a summary's runs used the performance configs, not a plain recipe).

What the unfused paths launch is counted in `host_ops.LAUNCHES` ("rope_unfused",
"mla_rope_unfused", "swiglu_unfused", "mlp_swiglu_unfused").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starfabric.astral.seer.statements import negated_at, stated

FUSED_SWIGLU_RECIPES = ("deepseek", "glm", "gpt_oss", "kimi", "llama", "moonlight")
"""Recipe families whose Megatron-Bridge model bridge sets `bias_activation_fusion = True`
(v0.4.2: `deepseek_v2_bridge.py` 66, `deepseek_v3_bridge.py` 73, `glm45_bridge.py` 88,
`gpt_oss_bridge.py` 73, `kimi_bridge.py` 68, `llama_bridge.py` 65; `moonlight_16b.py` 59 builds
its model with the DeepSeek-V3 bridge); every other recipe keeps Megatron-Core's default (off)."""
FUSED_ROPE_RECIPES = ("llama",)
"""Recipe families whose model bridge sets `apply_rope_fusion = True` (v0.4.2:
`llama_bridge.py` 69); every other recipe keeps Megatron-Core's default (off) or sets it off
(`deepseek_v3_bridge.py` 71, `kimi_bridge.py` 66)."""

BRIDGE = re.compile(r"megatron[-_ ]bridge", re.I)
_RECIPE = re.compile(r"\b([a-z][a-z0-9_]*?)_pretrain_config\b|\b([a-z][a-z0-9_]*) recipe\b", re.I)
_PERF_SCRIPTS = re.compile(
    r"scripts/performance|performance[ -](?:script|config|recipe|summar(?:y|ies))s?\b"
    r"|perf(?:ormance)?[ -_]summary",
    re.I,
)
_PRECISION_RECIPE = re.compile(r"(?:mx|nv)?(?:fp|bf|int)\d", re.I)
"""A numeric-format recipe ("FP8 recipe", "MXFP8 recipe", Megatron's `--fp8-recipe`,
Megatron-Bridge's `bf16_with_fp8_..._mixed`): how the GEMMs scale, not a model recipe."""


def recipe_name(texts: Iterable[str | None]) -> str | None:
    """The Megatron-Bridge recipe a row's cells name (`qwen3_30b_a3b_pretrain_config` ->
    "qwen3_30b_a3b", "deepseek_v3 recipe" -> "deepseek_v3"), or None; a negated mention ("not
    the qwen3_30b_a3b recipe") does not count."""
    for t in texts:
        for m in _RECIPE.finditer(t or ""):
            if negated_at(t or "", m.start(), m.end()):
                continue
            name = (m.group(1) or m.group(2) or "").lower()
            # a recipe is an identifier (qwen3_30b_a3b, deepseek_v3), not a word such as
            # "Bridge recipe", "no recipe", "shipped recipe", nor a precision recipe ("FP8 recipe")
            if re.search(r"[_\d]", name) and not _PRECISION_RECIPE.match(name):
                return name
    return None


def recipe_fusions(framework: str | None, texts: Iterable[str | None]) -> tuple[bool, bool]:
    """(rope fused, SwiGLU fused) of a run: False where the row states a Megatron-Bridge recipe
    run (framework names Megatron-Bridge, a cell names the recipe, none names the performance
    scripts) and the recipe's model bridge leaves the fusion at Megatron-Core's default (or
    sets it off), True where the bridge sets it (`FUSED_ROPE_RECIPES`, `FUSED_SWIGLU_RECIPES`); True
    otherwise (Megatron-LM's launcher defaults). Negated mentions ("not Megatron-Bridge", "not
    the scripts/performance configs") do not count (statements.stated)."""
    cells = [framework, *texts]
    if not stated(BRIDGE, framework) or stated(_PERF_SCRIPTS, *cells):
        return True, True
    name = recipe_name(cells)
    if name is None:
        return True, True
    return (
        any(name.startswith(f) for f in FUSED_ROPE_RECIPES),
        any(name.startswith(f) for f in FUSED_SWIGLU_RECIPES),
    )


__all__ = ["BRIDGE", "FUSED_ROPE_RECIPES", "FUSED_SWIGLU_RECIPES", "recipe_fusions", "recipe_name"]
