"""A step time never grows when a kernel gets faster (seer/fsdp_cp_window.py): the CP ring's KV
exchange and the ZeRO-3/FSDP prefetch share one layer's wall-clock window, so faster attention
can expose at most what it saved, never more."""

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import make_job
from starfabric.astral.seer.cost import DP_OVERLAP_RESIDUAL, make_context
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fsdp_cp_window import fsdp_window, ring_shares_fsdp_link
from starfabric.astral.seer.fsdp_side_window import split_exposure
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


def test_window_same_link_takes_the_ring_time() -> None:
    """Same link: 10 s of compute, a 4 s ring of which 1 s stalls: the FSDP transfer has
    10 - 3 = 7 s of free link under compute and nothing during the stall."""
    assert fsdp_window(10.0, 4.0, 1.0, shared_link=True, counted_as_side=False) == (7.0, 0.0)
    assert fsdp_window(2.0, 4.0, 1.0, shared_link=True, counted_as_side=False) == (0.0, 0.0)


def test_window_other_link_gains_the_stall() -> None:
    """Other link: the compute stream's 1 s stall on the ring is free FSDP time, once."""
    assert fsdp_window(10.0, 4.0, 1.0, shared_link=False, counted_as_side=False) == (10.0, 1.0)
    assert fsdp_window(10.0, 4.0, 1.0, shared_link=False, counted_as_side=True) == (10.0, 0.0)
    assert fsdp_window(10.0, 0.0, 0.0, shared_link=True, counted_as_side=False) == (10.0, 0.0)


@given(st.floats(0.0, 50.0), st.floats(0.0, 20.0), st.floats(0.0, 1.0), st.floats(0.0, 30.0),
       st.booleans(), st.floats(0.0, 5.0))  # fmt: skip
def test_layer_time_monotone_in_compute(
    c: float, ring: float, frac: float, fsdp: float, shared: bool, saved: float
) -> None:
    """compute + stall + FSDP exposure never grows when the compute shrinks by `saved` and the
    ring's stall grows by at most that (cp_comm.ring_exposed's slope is (ring-1)/ring < 1)."""

    def layer(compute: float, stall: float) -> float:
        w, side = fsdp_window(compute, ring, stall, shared, False)
        return compute + stall + split_exposure(fsdp, w, side, DP_OVERLAP_RESIDUAL)

    stall = frac * ring
    faster = max(0.0, c - saved)
    more_stall = min(ring, stall + (c - faster) * frac)
    assert layer(faster, more_stall) <= layer(c, stall) + 1e-9


def test_links_of_the_reviewer_layouts() -> None:
    """TP 8 x CP 4: the ring crosses hosts as the DP x CP FSDP group does (same NICs); TP 2 x
    CP 4 on 8 GPUs: the ring stays on NVLink, ZeRO-3 over 8 GPUs too (same link); TP 2 x CP 4
    on 16 GPUs: the ring on NVLink, FSDP over DP x CP across hosts (other links)."""

    def shared(gpus: int, tp: int) -> bool:
        job = make_job("llama-3.1-8b", {"global_batch": 8, "seq_len": 32768, "tp": tp, "cp": 4,
                                         "zero": 3}, {"gpu": "H100", "gpus": gpus})  # fmt: skip
        return ring_shares_fsdp_link(job.execution, resolve_layout(job.model, job.execution,
                                                                   job.system))  # fmt: skip

    assert shared(32, 8) and shared(8, 2) and not shared(16, 2)
