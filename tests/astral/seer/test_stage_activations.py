"""Seer's per-stage memory against Megatron-LM's own formulas and NVIDIA's DeepSeek-V3 estimator.

References (code read, not copied):
- Megatron-LM `megatron/core/pipeline_parallel/schedules.py`: interleaved warm-up of rank r is
  `(pp - r - 1) * 2 + (vpp - 1) * pp` forwards, all of them when the micro-batches equal pp;
  `pp - r` for 1F1B.
- Megatron-LM `megatron/training/theoretical_memory_usage.py` @d98e8a6: interleaving raises
  the first stage's activations by `1 + (pp - 1) / (pp * vpp)`; weights and optimizer cost
  `6 + 12 / dp` bytes per parameter under the distributed optimizer, the routed experts over
  the expert-data-parallel size.
- Megatron-MoE-ModelZoo `misc/tools/deepseek_mem_estimate.py` @e865051: DeepSeek-V3's MLA
  latents per layer and micro-batch at 4K tokens (TP1 BF16: q_down_out 12 MB, q_norm_out
  12 MB, kv_compressed 4 MB, kv_norm_out 4 MB; TP2: 6, 6, 2, 4; TP1 FP8: 12, 6, 4, 2).
"""

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.activations import activation_bytes_per_layer
from starfabric.astral.seer.mla_activations import norm_input_bytes, up_gemm_input_bytes
from starfabric.astral.seer.parallel import uneven_pipeline_layers
from starfabric.astral.seer.schedule import schedule_order
from starfabric.astral.seer.stage_activations import (
    chunk_activation_bytes,
    dualpipe_rank_bytes,
    loss_chunk_inflight,
    stage_peak_bytes,
)

MB = 2**20
DSV3 = load_model("deepseek-v3")


def _megatron_inflight_chunks(p: int, v: int, m: int, r: int) -> int:
    if v == 1:
        return min(m, p - r)
    if m == p:
        return m * v  # Megatron runs every forward first when micro-batches == pp
    return min(m * v, (p - r - 1) * 2 + (v - 1) * p + 1)


@pytest.mark.parametrize(
    ("p", "v", "m"), [(8, 4, 64), (8, 1, 64), (16, 1, 32), (4, 4, 16), (2, 8, 32), (8, 2, 8)]
)
def test_peak_chunks_in_flight_follow_megatrons_warmup(p: int, v: int, m: int) -> None:
    is_fwd, _, chunk = schedule_order(p, v, m, 0)
    peak = stage_peak_bytes(is_fwd, chunk, np.ones((p, v)))
    assert peak.tolist() == [_megatron_inflight_chunks(p, v, m, r) for r in range(p)]


@pytest.mark.parametrize(("p", "v"), [(8, 4), (4, 2), (16, 2)])
def test_first_stage_matches_megatrons_interleaving_penalty(p: int, v: int) -> None:
    """theoretical_memory_usage.py: the first stage holds pp micro-batches of its L/pp
    layers, i.e. L layer-activations, times 1 + (pp-1)/(pp*vpp) under interleaving."""
    layers, m = 8 * p * v, 8 * p
    is_fwd, _, chunk = schedule_order(p, v, m, 0)
    per_chunk = np.full((p, v), layers / (p * v))
    first = stage_peak_bytes(is_fwd, chunk, per_chunk)[0]
    assert first == pytest.approx(layers * (1 + (p - 1) / (p * v)))


@pytest.mark.parametrize(
    ("p", "v", "m", "extra", "held"),
    [(8, 1, 64, 0, 1), (8, 4, 64, 0, 1), (4, 2, 16, 0, 1), (8, 4, 64, 1, 2), (4, 2, 16, 1, 2),
     (8, 2, 8, 0, 8)],
)  # fmt: skip
def test_loss_chunk_micro_batches(p: int, v: int, m: int, extra: int, held: int) -> None:
    """One micro-batch holds the logits under 1F1B and interleaving; the EP overlap's extra
    interleaved warm-up forward makes it two; Megatron's all-forward-first case (m == pp)
    holds every micro-batch's."""
    is_fwd, _, chunk = schedule_order(p, v, m, extra)
    assert loss_chunk_inflight(is_fwd, chunk) == held


def test_dense_first_layers_are_charged_as_dense() -> None:
    ex = {"global_batch": 1024, "micro_batch": 1, "seq_len": 4096, "tp": 1, "pp": 4, "vpp": 4,
          "ep": 64, "pipeline_layers": uneven_pipeline_layers(61, 16)}  # fmt: skip
    p = predict(make_job(DSV3, ex, {"gpu": "GB200", "gpus": 256}))
    dense = activation_bytes_per_layer(DSV3, p.job.execution, p.layout, moe=False)
    moe = activation_bytes_per_layer(DSV3, p.job.execution, p.layout, moe=True)
    cb = chunk_activation_bytes(DSV3, p.layout, dense, moe)
    assert p.layout.stage_layers[0][0] == 3 and DSV3.moe_dense_layers == 3
    assert cb[0, 0] == pytest.approx(3 * dense)  # layers 0-2: DeepSeek-V3's dense layers
    assert cb[1, 0] == pytest.approx(3 * moe) and cb[0, 1] == pytest.approx(4 * moe)
    assert dense < moe


@pytest.mark.parametrize(
    ("tp", "g", "norm_mb", "gemm_mb"), [(1, 2.0, 12 + 4, 12 + 4), (2, 2.0, 6 + 2, 6 + 4),
                                        (1, 1.0, 12 + 4, 6 + 2)],
)  # fmt: skip
def test_mla_latents_match_nvidias_estimator(
    tp: int, g: float, norm_mb: float, gemm_mb: float
) -> None:
    tok = 4096
    assert norm_input_bytes(DSV3, 2.0, tp) * tok / MB == pytest.approx(norm_mb)
    assert up_gemm_input_bytes(DSV3, g, tp) * tok / MB == pytest.approx(gemm_mb)


def _megatron_weights_and_optimizer(model: Any, tp: int, ep: int, dp: int, edp: int) -> float:
    """theoretical_memory_usage.compute_weight_and_optimizer_memory for a PP-1 MoE model with
    untied embeddings and the distributed optimizer (bf16 params, fp32 grads and Adam)."""
    h, f, n = model.hidden, model.moe_ffn_hidden, model.moe_experts
    attn = 2 * h * h * (1 + model.kv_heads / model.heads) * (model.heads * model.head_dim / h)
    routed = 2 * h * f * n * 1.5
    norms, router = 2 * h, h * n
    tp_sharded = attn * model.layers + 2 * h * model.vocab
    replicated = (norms + router) * model.layers + h
    expert = routed * model.layers / ep
    return (tp_sharded / tp + replicated) * (6 + 12 / dp) + expert * (6 + 12 / edp)


def test_expert_weights_grads_optimizer_match_megatrons_estimator() -> None:
    mix = load_model("mixtral-8x7b-v0.1")
    ex = {"global_batch": 256, "micro_batch": 1, "seq_len": 4096, "tp": 2, "ep": 8, "zero": 1}
    p = predict(make_job(mix, ex, {"gpu": "H100", "gpus": 64}))
    lay, m = p.layout, p.memory
    assert (lay.dp, lay.edp) == (32, 8)
    want = _megatron_weights_and_optimizer(mix, 2, 8, lay.dp, lay.edp)
    assert m.weights + m.grads + m.optimizer == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_dualpipe_holds_pp_plus_one_micro_batches_on_every_rank(p: int) -> None:
    """DeepSeek-V3 technical report Table 2: DualPipe's activation memory is PP + 1 (1F1B's
    first stage: PP); each rank holds PP - s of its own stage and s + 1 of the mirrored one."""
    per_stage = np.arange(1.0, p + 1.0).reshape(p, 1)
    ranks = dualpipe_rank_bytes(np.ones((p, 1)))
    assert ranks.tolist() == [p + 1.0] * p
    mixed = dualpipe_rank_bytes(per_stage)
    assert mixed[0] == pytest.approx(p * 1.0 + 1 * p)  # stage 0 x PP, stage PP-1 x 1


def _loss_inflight_by_hand(is_fwd: np.ndarray, chunk: np.ndarray) -> int:
    """The walk spelled out: +1 at each last-chunk forward of the last stage, -1 at its
    backward, the peak (at least one)."""
    last = int(chunk[-1].max())
    cur = peak = 0
    for f, c in zip(is_fwd[-1], chunk[-1], strict=True):
        if int(c) == last:
            cur += 1 if int(f) == 1 else -1
            peak = max(peak, cur)
    return max(1, peak)


@pytest.mark.parametrize("extra", [0, 1])
@pytest.mark.parametrize(("p", "v", "m"), [(1, 1, 4), (4, 1, 8), (4, 2, 8), (8, 4, 32)])
def test_loss_chunk_inflight_is_the_walk(p: int, v: int, m: int, extra: int) -> None:
    """Differential: the numba walk (`_kernels.peak_inflight`) equals the op-by-op count on
    Megatron's schedules, with and without the EP overlap's extra warm-up forward."""
    is_fwd, _mbs, chs = schedule_order(p, v, m, extra if v > 1 else 0)
    assert loss_chunk_inflight(is_fwd, chs) == _loss_inflight_by_hand(is_fwd, chs)


@given(dense=st.integers(0, 8), first=st.integers(0, 40), nl=st.integers(0, 12), moe=st.booleans())
def test_chunk_moe_layers_counts_the_layers_past_the_dense_prefix(
    dense: int, first: int, nl: int, moe: bool
) -> None:
    from types import SimpleNamespace

    from starfabric.astral.seer.parallel import chunk_moe_layers

    model = SimpleNamespace(is_moe=moe, moe_dense_layers=dense)
    lay = SimpleNamespace(chunk_first_layer=((first,),), stage_layers=((nl,),))
    expect = sum(1 for i in range(first, first + nl) if i >= dense) if moe else 0
    assert chunk_moe_layers(model, lay, 0, 0) == expect  # type: ignore[arg-type]
