"""A step time never grows when a kernel gets faster (seer/fsdp_cp_window.py): the CP ring's KV
exchange and the ZeRO-3/FSDP prefetch share one layer's wall-clock window, so faster attention
can expose at most what it saved, never more."""

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import make_job
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.schedule import build_timeline

# Layouts with a CP ring and/or in-layer ZeRO-3 gathers, inside and across hosts.
LAYOUTS = st.sampled_from(
    [
        # (model, gpus, tp, cp, zero, seq, nic, recompute, megatron_fsdp)
        ("llama-3.1-8b", 32, 8, 4, 3, 32768, "100G", "full", False),
        ("llama-3.1-8b", 64, 8, 4, 3, 32768, "100G", "full", True),
        ("llama-3.1-70b", 32, 8, 4, 3, 16384, "100G", "full", False),
        ("llama-3.1-70b", 64, 8, 4, 3, 16384, "100G", "selective", True),
        ("llama-3.1-8b", 16, 2, 4, 3, 65536, "400G", "selective", False),
        ("llama-3.1-8b", 8, 2, 4, 3, 131072, "100G", "full", False),
        ("llama-3.1-8b", 16, 1, 4, 3, 32768, "100G", "selective", False),
        ("llama-3.1-8b", 32, 4, 2, 3, 32768, "100G", "full", False),
        ("llama-3.1-8b", 32, 8, 4, 1, 32768, "100G", "full", False),
        ("llama-3.1-70b", 64, 8, 2, 3, 65536, "400G", "full", False),
        ("llama-3.1-8b", 16, 2, 1, 3, 8192, "100G", "selective", False),
    ]
)


def _step(layout: tuple[Any, ...], attn: float = 1.0, gemm: float = 1.0) -> float:
    """Predicted step of `layout` with the attention rate x `attn`, the GEMM fraction x `gemm`."""
    model, gpus, tp, cp, zero, seq, nic, recompute, mfsdp = layout
    dp = gpus // (tp * cp)
    ex = {"global_batch": 2 * dp, "micro_batch": 1, "seq_len": seq, "precision": "bf16",
          "tp": tp, "sp": tp > 1, "cp": cp, "zero": zero, "recompute": recompute,
          "attention": "flash", "overlap_grad_reduce": True, "overlap_param_gather": True,
          "megatron_fsdp": mfsdp}  # fmt: skip
    job = make_job(model, ex, {"gpu": "H100", "gpus": gpus, "gpus_per_node": 8,
                               "nic_bandwidth": nic})  # fmt: skip
    lay = resolve_layout(job.model, job.execution, job.system)
    ctx = make_context(job.execution, lay, efficiency_for(lay.gpu, {}), job.system, job.model)
    ctx = dataclasses.replace(
        ctx,
        flash_rate=ctx.flash_rate * attn,
        flash_rate_bwd=ctx.flash_rate_bwd * attn,
        gemm_fraction=min(1.0, ctx.gemm_fraction * gemm),
    )
    return build_timeline(job.model, job.execution, lay, ctx).iteration_s


SLACK = 1e-9


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LAYOUTS, st.floats(1.0, 1.6), st.floats(1.0, 1.6))
def test_faster_attention_never_slows_the_step(layout: tuple[Any, ...], a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert _step(layout, attn=hi) <= _step(layout, attn=lo) * (1 + SLACK)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LAYOUTS, st.floats(0.8, 1.2), st.floats(0.8, 1.2))
def test_faster_gemms_never_slow_the_step(layout: tuple[Any, ...], a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert _step(layout, gemm=hi) <= _step(layout, gemm=lo) * (1 + SLACK)


def test_reviewer_case_cudnn_919_is_not_slower() -> None:
    """The reviewer's layout: Llama-3.1-70B, 64 H100, TP 8, CP 4 across hosts, ZeRO-3, 16K
    tokens, 100G NICs: cuDNN 9.19's faster attention (x1.03-1.06 here) must not cost time."""
    layout = ("llama-3.1-70b", 64, 8, 4, 3, 16384, "100G", "full", False)
    assert _step(layout, attn=1.06) <= _step(layout)
