from pathlib import Path

import pytest

from starfabric.astral.seer import bundled_models, from_hf_config, load_model, param_counts
from starfabric.errors import ConfigError

DATA = Path(__file__).parents[2] / "data" / "hf_configs"


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("llama-3-8b", 8.03, 8.03),
        ("llama-3.1-8b", 8.03, 8.03),
        ("llama-3.1-70b", 70.55, 70.55),
        ("llama-3.1-405b", 405.85, 405.85),
        ("mixtral-8x7b-v0.1", 46.70, 12.88),
        ("deepseek-v3", 671.03, 37.55),
        ("qwen3-235b-a22b", 235.09, 22.19),
        ("gpt2", 0.1244, 0.1244),
    ],
)
def test_parameter_counts_match_published_totals(
    name: str, total_b: float, active_b: float
) -> None:
    m = load_model(DATA / f"{name}.json")
    pc = param_counts(m)
    assert pc.total / 1e9 == pytest.approx(total_b, rel=2e-3)
    assert pc.active / 1e9 == pytest.approx(active_b, rel=2e-3)


def test_gpt2_small_is_exactly_124439808() -> None:
    # The well-known count of openai-community/gpt2 (tied embeddings, learned positions).
    assert param_counts(load_model(DATA / "gpt2.json")).total == 124_439_808


def test_bundled_names_resolve_like_files() -> None:
    assert "deepseek-v3" in bundled_models()
    a = load_model("llama-3.1-70b")
    b = load_model(DATA / "llama-3.1-70b.json")
    assert param_counts(a).total == param_counts(b).total


def test_deepseek_mla_and_experts_are_parsed() -> None:
    m = load_model("deepseek-v3")
    assert m.is_mla and m.is_moe
    assert (m.moe_experts, m.moe_topk, m.moe_shared_experts, m.moe_dense_layers) == (256, 8, 1, 3)
    assert m.qk_head_dim == 192 and m.vo_head_dim == 128
    assert m.moe_layers == 58


def test_yaml_spec_model(tmp_path: Path) -> None:
    p = tmp_path / "m.yaml"
    p.write_text(
        "layers: 2\nhidden: 64\nffn_hidden: 256\nheads: 4\nkv_heads: 4\nhead_dim: 16\n"
        "vocab: 100\nactivation: gelu\n"
    )
    m = load_model(p)
    # 2 * (4*64*64 attn + 2*64*256 mlp + 2*64 norms) + 2*100*64 + 64
    assert param_counts(m).total == 2 * (4 * 64 * 64 + 2 * 64 * 256 + 128) + 2 * 100 * 64 + 64


def test_bad_inputs_are_one_line_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither a file nor a bundled config"):
        load_model("llama-9")
    with pytest.raises(ConfigError, match="hidden_act"):
        from_hf_config({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1,
                        "num_attention_heads": 2, "vocab_size": 10, "hidden_act": "relu6"})  # fmt: skip
    with pytest.raises(ConfigError, match="num_key_value_heads"):
        from_hf_config({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
                        "num_attention_heads": 8, "num_key_value_heads": 3, "vocab_size": 10})  # fmt: skip
    p = tmp_path / "m.yaml"
    p.write_text(
        "layers: 2\nhidden: 64\nffn_hiden: 256\nheads: 4\nkv_heads: 4\nhead_dim: 16\nvocab: 9\n"
    )
    with pytest.raises(ConfigError, match="ffn_hid"):
        load_model(p)


def test_a_model_past_max_layers_or_max_params_is_one_config_error() -> None:
    """Absurd sizes are refused before the schedule lays them out (model.MAX_LAYERS: 1M layers
    took minutes a row; model.MAX_PARAMS: a hidden size of 10^12 exhausted memory)."""
    from starfabric.astral.seer.model import MAX_LAYERS, MAX_PARAMS

    base = {"layers": 2, "hidden": 64, "ffn_hidden": 256, "heads": 4, "kv_heads": 4,
            "head_dim": 16, "vocab": 1000}  # fmt: skip
    assert load_model(base).layers == 2
    with pytest.raises(ConfigError, match=r"model\.MAX_LAYERS"):
        load_model({**base, "layers": MAX_LAYERS + 1})
    with pytest.raises(ConfigError, match=r"model\.MAX_PARAMS"):
        load_model({**base, "vocab": MAX_PARAMS // 64 + 1})
    assert all(param_counts(load_model(n)).total < MAX_PARAMS for n in bundled_models())
    assert all(load_model(n).layers <= MAX_LAYERS for n in bundled_models())


def test_the_size_refusals_say_what_to_change() -> None:
    """The one-line errors of MAX_LAYERS and MAX_PARAMS name the field and the fix (the bound
    to give, the size fields to check), not only 'correct the value'."""
    from starfabric.astral.seer.model import MAX_LAYERS, MAX_PARAMS

    base = {"layers": 2, "hidden": 64, "ffn_hidden": 256, "heads": 4, "kv_heads": 4,
            "head_dim": 16, "vocab": 1000}  # fmt: skip
    with pytest.raises(ConfigError) as deep:
        load_model({**base, "layers": MAX_LAYERS + 1})
    assert f"give layers a whole number in 1..{MAX_LAYERS}" in str(deep.value)
    with pytest.raises(ConfigError) as wide:
        load_model({**base, "vocab": MAX_PARAMS // 64 + 1})
    text = str(wide.value)
    assert "\n" not in text and "check hidden, ffn_hidden" in text and "vocab" in text


@pytest.mark.parametrize(
    "sizes",
    [
        {"layers": 160, "hidden": 32768, "heads": 256, "ffn_hidden": 98304},  # ~1.9T dense
        {"layers": 120, "hidden": 12288, "heads": 96, "ffn_hidden": 49152, "moe_experts": 16,
         "moe_topk": 2, "moe_ffn_hidden": 49152},  # ~3.5T MoE (a 1.8T MoE and then some)
        {"layers": 256, "hidden": 8192, "heads": 64, "ffn_hidden": 28672},  # 256 layers
        {"layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 14336, "vocab": 1 << 20},
    ],
)  # fmt: skip
def test_the_size_limits_refuse_no_real_scale_model(sizes: dict[str, int]) -> None:
    """Trillion-parameter dense and MoE shapes, 200+ layers and a 1M vocabulary are read."""
    base = {"kv_heads": 8, "head_dim": 128, "vocab": 128256, "max_seq_len": 8192}
    assert load_model({**base, **sizes}).layers == sizes["layers"]
