"""Named mechanisms of issue 15: sliding-window attention, multi-token prediction, DualPipe."""

import numpy as np
import pytest

from starfabric.astral.seer import from_hf_config, load_model, make_job, param_counts, predict
from starfabric.astral.seer.model import mtp_params
from starfabric.astral.seer.ops import flops_per_token_6nd
from starfabric.astral.seer.schedule import dualpipe_bubble
from starfabric.errors import InfeasibleError

MISTRAL = {
    "model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 32000, "hidden_act": "silu",
    "max_position_embeddings": 32768, "sliding_window": 4096,
}  # fmt: skip


@pytest.mark.parametrize(("seq", "window"), [(8192, 4096), (4096, 512), (2048, 4096), (100, 7)])
def test_attended_keys_match_a_brute_force_count(seq: int, window: int) -> None:
    m = from_hf_config(dict(MISTRAL, sliding_window=window))
    brute = np.minimum(np.arange(seq), window).mean()  # query i sees min(i, w) earlier keys
    assert m.attended_keys(seq) == pytest.approx(brute, rel=0.02, abs=0.5)


def test_sliding_window_is_read_from_config_json() -> None:
    assert from_hf_config(MISTRAL).sliding_window == 4096
    assert from_hf_config(dict(MISTRAL, sliding_window=None)).sliding_window == 0
    # Qwen2 ships a window with use_sliding_window false: full attention.
    assert load_model("qwen2.5-32b-instruct").sliding_window == 0
    gemma2 = from_hf_config(dict(MISTRAL, model_type="gemma2"))
    assert gemma2.sliding_window_layers == 16
    types = ["sliding_attention"] * 5 + ["full_attention"]
    g3 = from_hf_config(dict(MISTRAL, num_hidden_layers=6, layer_types=types))
    assert g3.sliding_window_layers == 5
    qwen = dict(MISTRAL, use_sliding_window=True, max_window_layers=28)
    assert from_hf_config(qwen).sliding_window_layers == 4


def test_sliding_window_cuts_attention_flops_and_time() -> None:
    full = from_hf_config(dict(MISTRAL, sliding_window=None))
    swa = from_hf_config(MISTRAL)
    assert flops_per_token_6nd(swa, 32768) < flops_per_token_6nd(full, 32768)
    assert flops_per_token_6nd(swa, 4096) == flops_per_token_6nd(full, 4096)
    ex = {"global_batch": 8, "seq_len": 32768, "tp": 8, "cp": 1, "recompute": "full"}
    sys = {"gpu": "H100", "gpus": 8}
    t_full = predict(make_job(full, ex, sys))
    t_swa = predict(make_job(swa, ex, sys))
    assert t_swa.iteration_s < 0.8 * t_full.iteration_s
    assert t_swa.hardware_flops < t_full.hardware_flops


def test_mtp_module_is_counted_apart_from_the_published_total() -> None:
    m = load_model("deepseek-v3")
    assert m.mtp_layers == 1
    assert param_counts(m).total / 1e9 == pytest.approx(671.03, rel=2e-3)
    dense, experts = mtp_params(m)
    # DeepSeek-V3 section 4.2 / HF card: the MTP module adds about 14B parameters (its
    # embedding and head are shared with the main model).
    assert (dense + experts) / 1e9 == pytest.approx(11.7, rel=0.05)
    assert mtp_params(m.model_copy(update={"mtp_layers": 0})) == (0, 0)


def test_mtp_runs_on_the_last_stage() -> None:
    m = load_model("mixtral-8x7b-v0.1")
    ex = {"global_batch": 64, "seq_len": 4096, "tp": 2, "pp": 4, "ep": 8}
    sys = {"gpu": "H100", "gpus": 64}
    base = predict(make_job(m, ex, sys))
    mtp = predict(make_job(m.model_copy(update={"mtp_layers": 1}), ex, sys))
    assert mtp.hardware_flops > base.hardware_flops
    assert mtp.timeline.chunk_fwd[-1, 0] > base.timeline.chunk_fwd[-1, 0]
    np.testing.assert_allclose(mtp.timeline.chunk_fwd[:-1], base.timeline.chunk_fwd[:-1])
    assert mtp.iteration_s > base.iteration_s


def test_dualpipe_bubble_formula() -> None:
    # DeepSeek-V3 Table 2: (PP/2 - 1)(F&B + B - 3W).
    assert dualpipe_bubble(1.0, 2.0, 1.0, 8) == pytest.approx(3 * (3.0 + 2.0 - 3.0))
    assert dualpipe_bubble(1.0, 2.0, 1.0, 2) == 0.0


def test_dualpipe_shrinks_the_bubble_and_hides_all_to_all() -> None:
    m = load_model("mixtral-8x7b-v0.1")
    ex = {"global_batch": 64, "seq_len": 4096, "tp": 1, "pp": 4, "ep": 8,
          "ep_comm_overlap": True}  # fmt: skip
    sys = {"gpu": "H800", "gpus": 64}
    one = predict(make_job(m, ex, sys))
    dual = predict(make_job(m, dict(ex, pipeline_schedule="dualpipe"), sys))
    assert dual.breakdown["bubble"] < 0.6 * one.breakdown["bubble"]
    assert dual.breakdown["ep"] <= one.breakdown["ep"] + 1e-12
    assert dual.iteration_s < one.iteration_s
    # Two stages per rank: the parameters of both directions are resident.
    assert dual.memory.weights > 1.5 * one.memory.weights
    with pytest.raises(InfeasibleError, match="dualpipe needs an even pp"):
        predict(make_job(m, dict(ex, pp=1, pipeline_schedule="dualpipe"), sys))
