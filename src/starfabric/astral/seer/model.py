"""Transformer model descriptions: from Hugging Face `config.json`, a YAML spec or a name.

A `ModelSpec` is the *application* input of Seer (the shapes a training job computes with):
dense GPT/Llama/Qwen layers, Mixtral/Qwen-MoE/DeepSeek MoE layers (shared + routed experts,
first dense layers) and DeepSeek multi-head latent attention (MLA). Parameter counts follow the
module shapes exactly, so they match the published totals (8.0B, 70.6B, 405B, 46.7B, 671B).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from starfabric import ranges
from starfabric.astral.seer.hf_config import read_hf_config, validate_hf_config
from starfabric.config import Spec, parse_spec, read_mapping
from starfabric.errors import ConfigError

MAX_LAYERS = 1 << 14
"""Assumption: the most transformer layers a model may have, 16,384 — 16x the deepest trained
transformer (DeepNet, 1,000 layers: Wang et al. 2022, arXiv 2203.00555); a deeper one is a typo
("1M" in the layers cell), and the schedule walks every layer (1M: 10 to over 20 s a row)."""

MAX_PARAMS = 1 << 44
"""Assumption: the most parameters a model may have, 2^44 (about 17.6 trillion) — some 11x the
largest trained model Seer knows of (Switch-C, 1.571T: Fedus et al. 2021, arXiv 2101.03961);
a larger one is a typo (a hidden size of 10^12), and the gradient buckets the schedule lays
out (one per schedule.DP_BUCKET_PARAMS) would exhaust memory instead of refusing it."""
LAYER_RANGE = ranges.IntRange(1, MAX_LAYERS, "model.MAX_LAYERS")
"""The layer counts a model may have (the refusal names the bound to give)."""


class ModelSpec(Spec):
    """Shapes of a decoder-only transformer; every size is a count, not bytes."""

    name: str = "model"
    layers: Annotated[int, Field(gt=0), ranges.ranged(LAYER_RANGE)]
    hidden: int = Field(gt=0)
    ffn_hidden: int = Field(gt=0, description="dense MLP intermediate size")
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab: int = Field(gt=0)
    max_seq_len: int = Field(default=4096, gt=0)
    activation: Literal["gelu", "swiglu"] = "swiglu"
    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    linear_bias: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    learned_pos_emb: bool = False
    tied_embeddings: bool = False
    attention_dropout: bool = Field(
        default=False, description="dropout on attention probabilities (GPT-2/Megatron GPT)"
    )
    parallel_block: bool = Field(
        default=False,
        description="attention and MLP side by side on one normed input (GPT-J, PaLM, "
        "MegaScale's PTB) instead of one after the other",
    )
    # Mixture of experts (0 experts = dense everywhere).
    moe_experts: int = Field(default=0, ge=0)
    moe_topk: int = Field(default=0, ge=0)
    moe_shared_experts: int = Field(default=0, ge=0)
    moe_ffn_hidden: int = Field(default=0, ge=0)
    moe_dense_layers: int = Field(default=0, ge=0, description="first N layers stay dense")
    moe_max_nodes: int = Field(
        default=0, ge=0, description="node-limited routing: nodes a token may reach (0 = any)"
    )
    # How the router scores and selects experts (Megatron-Core --moe-router-* flags): what its
    # unfused path launches depends on it (seer/router_launches.py).
    moe_router_score: Literal["softmax", "sigmoid"] = Field(
        default="softmax", description="router score function (DeepSeek-V3: sigmoid)"
    )
    moe_router_groups: int = Field(
        default=0, ge=0, description="expert groups of group-limited routing (0 = none)"
    )
    moe_router_group_topk: int = Field(
        default=0, ge=0, description="groups each token may pick (group-limited routing)"
    )
    moe_router_expert_bias: bool = Field(
        default=False, description="aux-loss-free balancing bias on the routing scores"
    )
    moe_router_aux_loss: Literal["aux_loss", "seq_aux_loss"] = Field(
        default="aux_loss", description="load-balancing loss: per micro-batch or per sequence"
    )
    # Multi-head latent attention (DeepSeek-V2/V3); 0 ranks = ordinary (GQA) attention.
    q_lora_rank: int = Field(default=0, ge=0)
    kv_lora_rank: int = Field(default=0, ge=0)
    qk_rope_head_dim: int = Field(default=0, ge=0)
    v_head_dim: int = Field(default=0, ge=0)
    # Multi-token prediction (DeepSeek-V3 section 2.2): each MTP module is one more transformer
    # block (+ a 2h -> h projection and two norms) sharing the embedding and output head.
    mtp_layers: int = Field(
        default=0, ge=0, description="multi-token-prediction modules (HF num_nextn_predict_layers)"
    )
    # Sliding-window attention (Mistral, Gemma, MegaScale section 3.1): each query attends to at
    # most `sliding_window` previous keys in the layers that use it.
    sliding_window: int = Field(default=0, ge=0, description="attention window (0 = full)")
    sliding_window_layers: int | None = Field(
        default=None, ge=0, description="layers that use the window (default: all)"
    )

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads} "
                "(grouped-query attention shares each KV head by whole groups)"
            )
        if self.moe_experts:
            if not 0 < self.moe_topk <= self.moe_experts:
                raise ValueError(f"moe_topk={self.moe_topk} must be in 1..{self.moe_experts}")
            if self.moe_ffn_hidden <= 0:
                raise ValueError("moe_ffn_hidden must be > 0 when moe_experts > 0")
            if self.moe_dense_layers >= self.layers:
                raise ValueError(f"moe_dense_layers={self.moe_dense_layers} leaves no MoE layer")
            self._check_router_groups()
        total = param_counts(self).total
        if total > MAX_PARAMS:
            raise ValueError(
                f"{total:.3g} parameters (layers={self.layers}, hidden={self.hidden}, "
                f"vocab={self.vocab}) is above {MAX_PARAMS:.3g} (model.MAX_PARAMS): a size is "
                "mistyped; check hidden, ffn_hidden, layers, vocab and the expert sizes"
            )
        if self.sliding_window_layers is not None and self.sliding_window_layers > self.layers:
            raise ValueError(
                f"sliding_window_layers={self.sliding_window_layers} exceeds layers={self.layers}"
            )
        if self.kv_lora_rank and (self.qk_rope_head_dim <= 0 or self.v_head_dim <= 0):
            raise ValueError("MLA (kv_lora_rank > 0) needs qk_rope_head_dim and v_head_dim")
        return self

    def _check_router_groups(self) -> None:
        """Group-limited routing as Megatron-Core's TransformerConfig.__post_init__ accepts it
        (core_v0.14.0): a group top-k needs a group count that divides the experts and is at
        least the group top-k (a group count alone routes without groups)."""
        groups, gtopk = self.moe_router_groups, self.moe_router_group_topk
        if not gtopk:
            return
        if not groups:
            raise ValueError(
                f"moe_router_group_topk={gtopk} needs moe_router_groups > 0 for group-limited "
                "routing (moe_router_group_topk 0: plain top-k)"
            )
        if self.moe_experts % groups:
            raise ValueError(
                f"moe_router_groups={groups} does not divide moe_experts={self.moe_experts}"
            )
        if gtopk > groups:
            raise ValueError(f"moe_router_group_topk={gtopk} exceeds moe_router_groups={groups}")

    @property
    def is_moe(self) -> bool:
        """True when some layers route tokens to experts."""
        return self.moe_experts > 0

    @property
    def is_mla(self) -> bool:
        """True for DeepSeek multi-head latent attention."""
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Number of layers whose MLP is a mixture of experts."""
        return self.layers - self.moe_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        """Number of layers with a dense MLP."""
        return self.layers - self.moe_layers

    def attended_keys(self, seq_len: int) -> float:
        """Keys one query attends to on average over the layers of a causal sequence of
        `seq_len`: s/2 with full attention; w - w^2/(2s) in a layer with a window w < s
        (sum over queries of min(i, w), Beltagy et al. 2020 / Mistral 7B section 2)."""
        s = float(seq_len)
        full = s / 2.0
        w = float(self.sliding_window)
        if w <= 0 or w >= s:
            return full
        windowed = w - w * w / (2.0 * s)
        n = self.layers if self.sliding_window_layers is None else self.sliding_window_layers
        frac = n / self.layers
        return frac * windowed + (1.0 - frac) * full

    @property
    def qk_head_dim(self) -> int:
        """Query/key head width (MLA: no-RoPE part + RoPE part)."""
        return self.head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def vo_head_dim(self) -> int:
        """Value/output head width."""
        return self.v_head_dim if self.is_mla else self.head_dim


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by part; `active` counts only the top-k routed experts per token."""

    embedding: int
    attention_per_layer: int
    dense_mlp_per_layer: int
    moe_mlp_per_layer: int
    expert_params: int
    norms_per_layer: int
    final: int
    total: int
    active: int


def attention_params(m: ModelSpec) -> int:
    """Weights (and biases) of one attention block, projections only (norms excluded)."""
    h, a = m.hidden, m.heads
    if m.is_mla:
        q = (
            h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a * m.qk_head_dim
            if m.q_lora_rank
            else h * a * m.qk_head_dim
        )
        kv = (
            h * (m.kv_lora_rank + m.qk_rope_head_dim)
            + m.kv_lora_rank
            + m.kv_lora_rank * a * (m.head_dim + m.v_head_dim)
        )
        return q + kv + a * m.v_head_dim * h
    qkv_out = (a + 2 * m.kv_heads) * m.head_dim
    p = h * qkv_out + a * m.head_dim * h
    if m.qkv_bias or m.linear_bias:
        p += qkv_out
    if m.linear_bias:
        p += h
    if m.qk_norm:
        p += 2 * m.head_dim
    return p


def mlp_params(m: ModelSpec, ffn: int) -> int:
    """Weights of one MLP (or one expert) with intermediate size `ffn`."""
    gated = m.activation == "swiglu"
    p = (3 if gated else 2) * m.hidden * ffn
    if m.linear_bias:
        p += (2 if gated else 1) * ffn + m.hidden
    return p


def mtp_params(m: ModelSpec) -> tuple[int, int]:
    """(dense, routed-expert) parameters of the multi-token-prediction modules: per module a
    transformer block (MoE when the model is), two norms and the 2h -> h projection
    (DeepSeek-V3 section 2.2; embedding and output head are shared with the main model)."""
    if not m.mtp_layers:
        return 0, 0
    norm_w = 2 if m.norm == "layernorm" else 1
    dense = attention_params(m) + 2 * norm_w * m.hidden + 2 * norm_w * m.hidden
    dense += 2 * m.hidden * m.hidden
    experts = 0
    if m.is_moe:
        expert = mlp_params(m, m.moe_ffn_hidden)
        dense += m.moe_shared_experts * expert + m.moe_experts * m.hidden
        experts = m.moe_experts * expert
    else:
        dense += mlp_params(m, m.ffn_hidden)
    return m.mtp_layers * dense, m.mtp_layers * experts


def param_counts(m: ModelSpec) -> ParamCounts:
    """Exact parameter count of the model (multi-token-prediction modules excluded, as the
    published totals count them: DeepSeek-V3's 671B excludes its 14B MTP module)."""
    norm_w = 2 if m.norm == "layernorm" else 1
    norms = 2 * norm_w * m.hidden
    attn = attention_params(m)
    dense = mlp_params(m, m.ffn_hidden)
    expert = mlp_params(m, m.moe_ffn_hidden) if m.is_moe else 0
    moe = (
        (m.moe_experts + m.moe_shared_experts) * expert + m.moe_experts * m.hidden
        if m.is_moe
        else 0
    )
    emb = m.vocab * m.hidden + (m.max_seq_len * m.hidden if m.learned_pos_emb else 0)
    head = 0 if m.tied_embeddings else m.vocab * m.hidden
    final = norm_w * m.hidden
    total = (
        emb + head + final + m.layers * (attn + norms) + m.dense_layers * dense + m.moe_layers * moe
    )
    inactive = m.moe_layers * (m.moe_experts - m.moe_topk) * expert
    return ParamCounts(
        embedding=emb + head,
        attention_per_layer=attn,
        dense_mlp_per_layer=dense,
        moe_mlp_per_layer=moe,
        expert_params=expert,
        norms_per_layer=norms,
        final=final,
        total=total,
        active=total - inactive,
    )


def _get(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


_ACT = {
    "silu": "swiglu",
    "swiglu": "swiglu",
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
}


def _sliding_window(cfg: dict[str, Any], mt: str, layers: int) -> dict[str, Any]:
    """Window and windowed-layer count from a config.json: `layer_types` when given, else
    Qwen2's `use_sliding_window` / `max_window_layers` (layers from that index on use it),
    Gemma 2's every other layer, Gemma 3's `sliding_window_pattern` (one full in N); a null
    window or use_sliding_window false means full attention."""
    w = cfg.get("sliding_window")
    if not w or cfg.get("use_sliding_window") is False:
        return {}
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        n = sum(1 for t in types if "sliding" in str(t))
    elif cfg.get("use_sliding_window") and cfg.get("max_window_layers") is not None:
        n = max(0, layers - int(cfg["max_window_layers"]))
    elif mt == "gemma2":
        n = layers // 2
    elif cfg.get("sliding_window_pattern"):
        pat = int(cfg["sliding_window_pattern"])
        n = layers - layers // pat
    else:
        n = layers
    return {"sliding_window": int(w), "sliding_window_layers": n} if n else {}


def from_hf_config(cfg: dict[str, Any], name: str = "model") -> ModelSpec:
    """Build a ModelSpec from a Hugging Face `config.json` mapping (Llama, Qwen2/3, Mixtral,
    DeepSeek-V2/V3, GPT-2)."""
    cfg = validate_hf_config(cfg, name)  # the input layer: types, ranges, encoders refused
    mt = str(cfg.get("model_type", "")).lower()
    h = _get(cfg, "hidden_size", "n_embd")
    layers = _get(cfg, "num_hidden_layers", "n_layer")
    heads = _get(cfg, "num_attention_heads", "n_head")
    vocab = _get(cfg, "vocab_size")
    if None in (h, layers, heads, vocab):
        raise ConfigError(
            f"{name}: config.json lacks hidden_size/num_hidden_layers/num_attention_heads/"
            "vocab_size (or their GPT-2 names)",
            fix="give a Hugging Face causal-LM config.json",
        )
    act_name = str(_get(cfg, "hidden_act", "activation_function", default="silu"))
    act = _ACT.get(act_name)
    if act is None:
        raise ConfigError(
            f"{name}: hidden_act {act_name!r} is not supported", fix=f"use one of {sorted(_ACT)}"
        )
    gpt2 = mt == "gpt2"
    spec: dict[str, Any] = {
        "name": name,
        "layers": layers,
        "hidden": h,
        "heads": heads,
        "kv_heads": _get(cfg, "num_key_value_heads", default=heads),
        "head_dim": _get(cfg, "head_dim", default=h // heads),
        "vocab": vocab,
        "max_seq_len": _get(cfg, "max_position_embeddings", "n_positions", default=4096),
        "activation": act,
        "ffn_hidden": _get(cfg, "intermediate_size", "n_inner", default=4 * h),
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", gpt2)),
        "mtp_layers": cfg.get("num_nextn_predict_layers") or 0,
        **_sliding_window(cfg, mt, layers),
    }
    if gpt2:
        spec.update(
            norm="layernorm",
            linear_bias=True,
            learned_pos_emb=True,
            attention_dropout=float(cfg.get("attn_pdrop", 0.0)) > 0,
        )
    if mt.startswith("qwen2"):
        spec["qkv_bias"] = True
    if mt.startswith("qwen3"):
        spec["qk_norm"] = True
    if cfg.get("attention_bias"):
        spec["qkv_bias"] = True
    if mt == "mixtral":
        spec.update(
            moe_experts=cfg["num_local_experts"],
            moe_topk=cfg["num_experts_per_tok"],
            moe_ffn_hidden=cfg["intermediate_size"],
        )
    elif mt == "qwen3_moe" or mt == "qwen2_moe":
        if cfg.get("mlp_only_layers"):
            raise ConfigError(
                f"{name}: mlp_only_layers={cfg['mlp_only_layers']} (dense layers in the middle) "
                "is not supported",
                fix="use a config whose dense layers come first",
            )
        spec.update(
            moe_experts=_get(cfg, "num_experts"),
            moe_topk=cfg["num_experts_per_tok"],
            moe_ffn_hidden=cfg["moe_intermediate_size"],
            moe_shared_experts=1 if cfg.get("shared_expert_intermediate_size") else 0,
        )
    elif mt in ("deepseek_v2", "deepseek_v3"):
        spec.update(
            moe_experts=cfg["n_routed_experts"],
            moe_topk=cfg["num_experts_per_tok"],
            moe_ffn_hidden=cfg["moe_intermediate_size"],
            moe_shared_experts=cfg.get("n_shared_experts") or 0,
            moe_dense_layers=cfg.get("first_k_dense_replace") or 0,
            moe_max_nodes=cfg.get("topk_group") or 0,
            # Megatron-Bridge maps n_group / topk_group onto the group flags (model_bridge.py
            # 370-371, v0.4.2); noaux_tc is the expert-bias (aux-loss-free) method.
            moe_router_score="sigmoid" if cfg.get("scoring_func") == "sigmoid" else "softmax",
            moe_router_groups=(cfg.get("n_group") or 0) if cfg.get("topk_group") else 0,
            moe_router_group_topk=(cfg.get("topk_group") or 0) if cfg.get("n_group") else 0,
            moe_router_expert_bias=cfg.get("topk_method") == "noaux_tc",
            # DeepseekV3Config / DeepseekV2Config (configuration_deepseek.py) default seq_aux=True
            moe_router_aux_loss="seq_aux_loss" if cfg.get("seq_aux", True) else "aux_loss",
            q_lora_rank=cfg.get("q_lora_rank") or 0,
            kv_lora_rank=cfg["kv_lora_rank"],
            qk_rope_head_dim=cfg["qk_rope_head_dim"],
            v_head_dim=cfg["v_head_dim"],
            head_dim=cfg["qk_nope_head_dim"],
            kv_heads=heads,
        )
    return parse_spec(ModelSpec, spec, source=name)


def bundled_models() -> list[str]:
    """Names of the Hugging Face configs shipped with Seer (usable as `model:` in a job)."""
    base = resources.files("starfabric.astral.seer") / "hf_configs"
    return sorted(p.name[:-5] for p in base.iterdir() if p.name.endswith(".json"))


def load_model(ref: str | Path | dict[str, Any], source: str = "model") -> ModelSpec:
    """A model from a mapping (ModelSpec fields or a config.json), a file path or a bundled name;
    `source` names a mapping in its errors (the job file that holds it)."""
    if isinstance(ref, dict):
        if "layers" in ref and "hidden" in ref:
            return parse_spec(ModelSpec, ref, source=source)
        return from_hf_config(ref, name=str(ref.get("name", "model")))
    path = Path(ref)
    if path.is_file():
        data = read_hf_config(path) if path.suffix == ".json" else read_mapping(path)
        if "layers" in data and "hidden" in data:
            return parse_spec(ModelSpec, data, source=str(path))
        return from_hf_config(data, name=path.stem)
    names = bundled_models()
    key = str(ref).lower().removesuffix(".json")
    if key not in names:
        raise ConfigError(
            f"model {str(ref)!r} is neither a file nor a bundled config",
            fix=f"give a config.json path or one of: {', '.join(names)}",
        )
    base = resources.files("starfabric.astral.seer") / "hf_configs"
    return from_hf_config(json.loads((base / f"{key}.json").read_text()), name=key)
