"""Input layer for Hugging Face `config.json`: read, then validate every field Seer uses before
the model builder sees it (`model.from_hf_config`).

A config that is not a JSON object, has a string or a float where a count belongs, a value out
of range, or describes an encoder (BERT-style, encoder-decoder) model is a one-line ConfigError
naming the file, the field, the value and the fix.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from starfabric.errors import ConfigError

MAX_CONFIG_BYTES = 4 * 2**20
"""A real config.json is a few KB; refuse anything above 4 MiB before parsing it."""

#: Count fields (name -> (minimum, maximum)); absent or null means "use the default".
COUNTS: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 1_000_000),
    "n_embd": (1, 1_000_000),
    "num_hidden_layers": (1, 100_000),
    "n_layer": (1, 100_000),
    "num_attention_heads": (1, 100_000),
    "n_head": (1, 100_000),
    "num_key_value_heads": (1, 100_000),
    "head_dim": (1, 100_000),
    "vocab_size": (1, 100_000_000),
    "max_position_embeddings": (1, 1 << 30),
    "n_positions": (1, 1 << 30),
    "intermediate_size": (1, 10_000_000),
    "n_inner": (1, 10_000_000),
    "num_local_experts": (1, 1_000_000),
    "num_experts": (1, 1_000_000),
    "num_experts_per_tok": (1, 1_000_000),
    "moe_intermediate_size": (1, 10_000_000),
    "shared_expert_intermediate_size": (0, 10_000_000),
    "n_routed_experts": (1, 1_000_000),
    "n_shared_experts": (0, 1_000_000),
    "first_k_dense_replace": (0, 100_000),
    "topk_group": (0, 1_000_000),
    "n_group": (0, 1_000_000),
    "q_lora_rank": (0, 1_000_000),
    "kv_lora_rank": (1, 1_000_000),
    "qk_rope_head_dim": (1, 100_000),
    "qk_nope_head_dim": (1, 100_000),
    "v_head_dim": (1, 100_000),
    "num_nextn_predict_layers": (0, 1_000),
    "sliding_window": (1, 1 << 30),
    "max_window_layers": (0, 100_000),
    "sliding_window_pattern": (1, 100_000),
}
PROBABILITIES = ("attn_pdrop",)
BOOLEANS = ("tie_word_embeddings", "attention_bias", "use_sliding_window")

#: Required fields of the MoE families the builder reads with `cfg[...]`.
FAMILY_FIELDS = {
    "mixtral": ("num_local_experts", "num_experts_per_tok", "intermediate_size"),
    "qwen2_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
    "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
    "deepseek_v2": ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                    "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim"),
    "deepseek_v3": ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                    "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim"),
}  # fmt: skip

ENCODER_TYPES = frozenset(
    {"bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta",
     "deberta-v2", "camembert", "mpnet", "ernie", "nomic_bert", "modernbert", "t5", "mt5",
     "bart", "mbart", "marian", "pegasus", "whisper", "vit", "clip", "wav2vec2"}
)  # fmt: skip
"""model_type values of encoder-only or encoder-decoder models: Seer models decoder-only
(causal LM) training, so these are refused rather than predicted as decoders."""

_ENCODER_ARCH = ("ForMaskedLM", "ForSequenceClassification", "ForTokenClassification",
                 "ForQuestionAnswering", "ForConditionalGeneration", "BertModel")  # fmt: skip


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """Read and validate a config.json file; returns the mapping."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{p}: {size:,} bytes is too large for a config.json (limit "
                f"{MAX_CONFIG_BYTES // 2**20} MiB)",
                fix="give the model's config.json",
            )
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{p}: cannot read ({exc.__class__.__name__})", fix="check the path and the file"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{p}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})",
            fix="repair the file or download config.json again",
        ) from None
    return validate_hf_config(data, str(p))


def _count(cfg: dict[str, Any], key: str, where: str) -> None:
    v = cfg.get(key)
    if v is None:
        return
    lo, hi = COUNTS[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ConfigError(
            f"{where}: {key} {v!r} is a {type(v).__name__}, not a number",
            fix=f"write {key} as a whole number without quotes",
        )
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        raise ConfigError(
            f"{where}: {key} {v!r} is not a whole number", fix=f"write {key} as a whole number"
        )
    if not lo <= v <= hi:
        raise ConfigError(
            f"{where}: {key} {v!r} is out of range", fix=f"give {key} in {lo}..{hi:,}"
        )
    cfg[key] = int(v)


def validate_hf_config(data: Any, where: str = "config.json") -> dict[str, Any]:
    """Check a decoded config.json: an object, a decoder-only model, every count a whole number
    in range, consistent heads and hidden size, the fields its model family needs. Returns a
    copy with whole-number floats made ints."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: the top level is a JSON {type(data).__name__}, not an object",
            fix="give a Hugging Face config.json ({...} with hidden_size, num_hidden_layers, ...)",
        )
    cfg = dict(data)
    mt = cfg.get("model_type", "")
    if not isinstance(mt, str):
        raise ConfigError(f"{where}: model_type {mt!r} is not a string", fix='e.g. "llama"')
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ConfigError(
            f"{where}: architectures {archs!r} is not a list of names",
            fix='e.g. "architectures": ["LlamaForCausalLM"]',
        )
    causal = any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)
    encoder = (
        mt.lower() in ENCODER_TYPES
        or bool(cfg.get("is_encoder_decoder"))
        or (not causal and any(a.endswith(_ENCODER_ARCH) for a in archs))
    )
    if encoder:
        what = mt or ", ".join(archs)
        raise ConfigError(
            f"{where}: {what!r} is an encoder (BERT-style or encoder-decoder) model; Seer "
            "predicts decoder-only (causal LM) training",
            fix="give a causal-LM config.json (Llama, Qwen, Mixtral, DeepSeek, GPT-2)",
        )
    for key in COUNTS:
        _count(cfg, key, where)
    for key in PROBABILITIES:
        v = cfg.get(key)
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0
        ):
            raise ConfigError(
                f"{where}: {key} {v!r} is not a probability", fix=f"give {key} in 0..1"
            )
    for key in BOOLEANS:
        v = cfg.get(key)
        if v is not None and not isinstance(v, bool):
            raise ConfigError(
                f"{where}: {key} {v!r} is not true/false", fix=f"write {key}: true or false"
            )
    act = cfg.get("hidden_act", cfg.get("activation_function"))
    if act is not None and not isinstance(act, str):
        raise ConfigError(f"{where}: hidden_act {act!r} is not a name", fix='e.g. "silu"')
    h = cfg.get("hidden_size", cfg.get("n_embd"))
    heads = cfg.get("num_attention_heads", cfg.get("n_head"))
    kv = cfg.get("num_key_value_heads")
    if h is not None and heads is not None and cfg.get("head_dim") is None and h % heads:
        raise ConfigError(
            f"{where}: hidden_size {h} is not a multiple of num_attention_heads {heads}",
            fix="give head_dim, or a hidden_size divisible by the head count",
        )
    if heads is not None and kv is not None and heads % kv:
        raise ConfigError(
            f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}",
            fix="each KV head serves a whole group of query heads",
        )
    for key in FAMILY_FIELDS.get(mt.lower(), ()):
        if cfg.get(key) is None:
            raise ConfigError(
                f"{where}: a {mt} config needs {key}", fix=f"add {key} from the model's config.json"
            )
    topk, experts = (
        cfg.get("num_experts_per_tok"),
        _first(cfg, "num_local_experts", "num_experts", "n_routed_experts"),
    )
    if topk is not None and experts is not None and topk > experts:
        raise ConfigError(
            f"{where}: num_experts_per_tok {topk} is more than the {experts} experts",
            fix="give num_experts_per_tok <= the expert count",
        )
    return cfg


def _first(cfg: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return None


SEQ_LEN_FACTOR_MAX = 32
"""Assumption: a RoPE model is trained at most 32x beyond its max_position_embeddings
(long-context recipes such as YaRN extend 4-32x); a model with learned position embeddings
(GPT-2) has no position beyond its table at all."""


def check_seq_len(model: Any, seq_len: int, option: str = "seq_len") -> None:
    """Refuse a sequence length the model cannot take (ConfigError naming both numbers)."""
    limit = model.max_seq_len if model.learned_pos_emb else model.max_seq_len * SEQ_LEN_FACTOR_MAX
    if seq_len > limit:
        why = (
            "its learned position table ends there"
            if model.learned_pos_emb
            else f"more than {SEQ_LEN_FACTOR_MAX}x its maximum is not a trained context"
        )
        raise ConfigError(
            f"{option} {seq_len:,} is beyond {model.name}'s max_position_embeddings "
            f"{model.max_seq_len:,} ({why})",
            fix=f"give {option} <= {limit:,}",
        )
