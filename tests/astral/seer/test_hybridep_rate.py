"""HybridEP's measured rate: the GB200 kernel-only table of DeepEP's docs/README_Hybrid-EP.md
@5fbafce (tests/data/hybridep/) prices HybridEP inside one NVLink-5 domain, in BF16 (Megatron-
Core's HybridEP path never dispatches FP8); DeepEP's V1 model keeps every other case."""

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.comm import formula_comm
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.deepep_kernels import rank_copy_fraction
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.expert_comm import DEEPEP_FP8_BYTES_PER_ELEM
from starfabric.astral.seer.fabric import COLLECTIVE_LAUNCH_S, NVLINK_STEP_LATENCY_S
from starfabric.astral.seer.hybridep_rate import (
    HYBRIDEP_FP8_DISPATCH,
    HYBRIDEP_RANKS,
    HYBRIDEP_SMS,
    IN_TRAINING_MEASURE,
    dispatches_fp8,
    hybridep_bytes_per_s,
    hybridep_rates,
)
from starfabric.astral.seer.ops import OpTable
from starfabric.errors import InvariantError

DATA = Path(__file__).parents[2] / "data" / "hybridep" / "gb200_hybridep_bandwidth.csv"
OPS = {"dispatch_fp8": "dispatch_fp8_gbps", "dispatch_bf16": "dispatch_bf16_gbps",
       "combine": "combine_gbps"}  # fmt: skip
MEASURES = ("torch_api", "kernel_only")
TOKENS, HIDDEN, TOPK, LOCAL_EXPERTS = 4096, 7168, 8, 8
"""The table's test configuration (README_Hybrid-EP.md @5fbafce, GB200)."""


def _rows(platform: str, measure: str) -> list[dict[str, str]]:
    with DATA.open(newline="") as f:
        return [r for r in csv.DictReader(f) if r["platform"] == platform
                and r["measure"] == measure]  # fmt: skip


@pytest.mark.parametrize("measure", MEASURES)
def test_the_module_reproduces_every_gb200_point(measure: str) -> None:
    rows = _rows("GB200", measure)
    assert len(rows) == len(HYBRIDEP_RANKS) * len(HYBRIDEP_SMS)
    for r in rows:
        for op, col in OPS.items():
            got = hybridep_bytes_per_s(op, int(r["ranks"]), int(r["sms"]), measure)  # type: ignore[arg-type]
            assert got == pytest.approx(float(r[col]) * 1e9, rel=1e-9), (r, op)


def test_training_uses_the_kernel_only_bf16_column() -> None:
    assert IN_TRAINING_MEASURE == "kernel_only"
    assert HYBRIDEP_FP8_DISPATCH is False
    for ranks in HYBRIDEP_RANKS:
        for sms in HYBRIDEP_SMS:
            assert hybridep_rates(ranks, sms) == (
                hybridep_bytes_per_s("dispatch_bf16", ranks, sms, "kernel_only"),
                hybridep_bytes_per_s("combine", ranks, sms, "kernel_only"),
            )


@pytest.mark.parametrize("measure", MEASURES)
def test_the_b200_point_lies_on_the_gb200_table(measure: str) -> None:
    """One table for every NVLink-5 GPU: B200's 8-rank, 16-SM point within 4% of GB200's."""
    (b200,) = _rows("B200", measure)
    for op, col in OPS.items():
        gb200 = hybridep_bytes_per_s(op, 8, 16, measure)  # type: ignore[arg-type]
        assert float(b200[col]) * 1e9 == pytest.approx(gb200, rel=0.04)


def _received_bytes(ranks: int) -> float:
    """BF16 bytes a rank receives in the benchmark (`dispatched_hidden.numel() * 2`): each
    token once per rank holding one of its top-8 experts (8 local experts per rank, uniform
    routing), which by symmetry is what a rank receives — Seer's per-rank deduplication."""
    experts = LOCAL_EXPERTS * ranks
    return TOKENS * TOPK * rank_copy_fraction(experts, TOPK, ranks) * HIDDEN * 2.0


def _api_overhead_s(op: str, ranks: int, sms: int) -> float:
    """Torch-API time minus kernel time of `op` at a table point (BF16 bytes)."""
    b = _received_bytes(ranks)
    api = hybridep_bytes_per_s(op, ranks, sms, "torch_api")  # type: ignore[arg-type]
    kernel = hybridep_bytes_per_s(op, ranks, sms, "kernel_only")  # type: ignore[arg-type]
    return b / api - b / kernel


def test_the_torch_api_overhead_is_at_least_the_buffer_copy() -> None:
    """At the table's commit the Torch-API call copies the received tokens out of (dispatch)
    or into (combine) the communication buffer, device to device, beside the kernel
    (csrc/hybrid_ep.cu @6ad6896 439-441, 663-667): its extra time is at least that copy's
    HBM traffic (read + write of the bytes) at GB200's peak HBM rate — the extra is the copy
    training replaces by the permute Seer prices on its own."""
    hbm = get_gpu("GB200").hbm_gbps * 1e9
    for ranks in HYBRIDEP_RANKS:
        for sms in HYBRIDEP_SMS:
            copy_floor = 2.0 * _received_bytes(ranks) / hbm
            for op in ("dispatch_bf16", "combine"):
                assert _api_overhead_s(op, ranks, sms) >= copy_floor, (op, ranks, sms)


def test_the_preprocessing_left_out_is_small() -> None:
    """The forward dispatch's routing-map all-gather, preprocessing kernel and host wait are the
    Torch-API dispatch's extra over the combine's (both copy the same bytes once): -27 to +88
    us, +17 us on average, a few percent of the 418-794 us kernels (hybridep_rate docstring)."""
    extra, kernels = [], []
    for ranks in HYBRIDEP_RANKS:
        for sms in HYBRIDEP_SMS:
            extra.append(_api_overhead_s("dispatch_bf16", ranks, sms)
                         - _api_overhead_s("combine", ranks, sms))  # fmt: skip
            b = _received_bytes(ranks)
            kernels += [b / hybridep_bytes_per_s(op, ranks, sms, "kernel_only")
                        for op in ("dispatch_bf16", "combine")]  # fmt: skip
    ex = np.array(extra) * 1e6
    assert ex.min() == pytest.approx(-27.2, abs=0.5)
    assert ex.max() == pytest.approx(88.1, abs=0.5)
    assert ex.mean() == pytest.approx(16.5, abs=0.5)
    assert min(kernels) * 1e6 == pytest.approx(417.5, abs=1.0)
    assert max(kernels) * 1e6 == pytest.approx(793.9, abs=1.0)
    assert ex.mean() / (np.mean(kernels) * 1e6) < 0.05


@settings(max_examples=200, deadline=None)
@given(ranks=st.integers(1, 200), sms=st.integers(1, 132), op=st.sampled_from(sorted(OPS)),
       measure=st.sampled_from(MEASURES))  # fmt: skip
def test_interpolation_stays_between_the_measured_neighbours(
    ranks: int, sms: int, op: str, measure: str
) -> None:
    """Linear between points, the edge value outside: the rate lies between the four measured
    points around (ranks, sms), clamped to the table's range."""
    r = min(max(ranks, HYBRIDEP_RANKS[0]), HYBRIDEP_RANKS[-1])
    s = min(max(sms, HYBRIDEP_SMS[0]), HYBRIDEP_SMS[-1])
    lo_r = max(x for x in HYBRIDEP_RANKS if x <= r)
    hi_r = min(x for x in HYBRIDEP_RANKS if x >= r)
    corners = [hybridep_bytes_per_s(op, a, b, measure)  # type: ignore[arg-type]
               for a in (lo_r, hi_r) for b in HYBRIDEP_SMS]  # fmt: skip
    got = hybridep_bytes_per_s(op, ranks, sms, measure)  # type: ignore[arg-type]
    assert min(corners) - 1.0 <= got <= max(corners) + 1.0
    assert got == hybridep_bytes_per_s(op, r, s, measure)  # type: ignore[arg-type]


QWEN = load_model("qwen3-235b-a22b")
EX: dict[str, Any] = {
    "global_batch": 1024, "micro_batch": 1, "seq_len": 4096, "precision": "bf16", "tp": 1,
    "pp": 2, "ep": 32, "etp": 1, "recompute": "selective", "moe_dispatcher": "deepep",
    "deepep_num_sms": 32,
}  # fmt: skip


def _pred(backend: str, gpu: str, gpus_per_node: int, precision: str = "bf16",
          dispatch_dtype: str | None = None) -> Any:  # fmt: skip
    ex = {**EX, "moe_flex_backend": backend, "precision": precision}
    if precision == "fp8":
        ex["fp8_recipe"] = "mxfp8"
    if dispatch_dtype is not None:
        ex["ep_dispatch_dtype"] = dispatch_dtype
    return predict(make_job(QWEN, ex, {"gpu": gpu, "gpus": 256, "gpus_per_node": gpus_per_node}))


def _comm(backend: str, gpu: str, gpus_per_node: int) -> Any:
    p = _pred(backend, gpu, gpus_per_node)
    return formula_comm(p.job.execution, p.layout, efficiency_for(p.layout.gpu, {}), QWEN)


def test_only_hybridep_inside_an_nvlink5_domain_takes_the_measured_rate() -> None:
    assert _comm("hybridep", "GB200", 4).ep_hybridep_rates == hybridep_rates(32, 32)
    assert _comm("deepep", "GB200", 4).ep_hybridep_rates is None
    assert _comm("hybridep", "H100", 8).ep_hybridep_rates is None  # EP across nodes, NVLink 4


def test_the_rate_sets_the_intranode_time_per_phase() -> None:
    hyb, deep = _comm("hybridep", "GB200", 4), _comm("deepep", "GB200", 4)
    nbytes = 4096 * 8 * 4096 * 2.0
    dispatch, combine = hybridep_rates(32, 32)
    for phase, rate in (("dispatch", dispatch), ("combine", combine)):
        t_h = hyb.time("all_to_all", nbytes, "ep", phase=phase)
        t_d = deep.time("all_to_all", nbytes, "ep", phase=phase)
        # same bytes and latency, only the rate differs
        assert (t_h - t_d) == pytest.approx(
            nbytes * hyb.ep_rank_fraction * (1 / rate - 1 / deep.ep_nvlink_bytes_per_s),
            rel=1e-9)  # fmt: skip
    with pytest.raises(InvariantError):
        hyb.time("all_to_all", nbytes, "ep", phase="dispatch", fp8=True)


def _dispatch_s(backend: str, precision: str, dispatch_dtype: str | None = None) -> float:
    """Seconds Seer's cost model gives one forward expert dispatch of 64 MiB (16-bit copies)."""
    p = _pred(backend, "GB200", 4, precision, dispatch_dtype)
    ctx = make_context(p.job.execution, p.layout, efficiency_for(p.layout.gpu, {}), None, QWEN)
    t = OpTable()
    t.comm("moe.ep_dispatch", "all_to_all", "ep", 64 * 2.0**20)
    return float(op_costs(t, ctx).time[0])


def test_an_fp8_run_dispatches_bf16_through_hybridep_only() -> None:
    """Megatron-Core's HybridEP path asserts `not fp8_dispatch` (fused_a2a.py 3df2009 through
    d98e8a6): an MXFP8 run's HybridEP dispatch moves BF16 bytes, as a BF16 run's; DeepEP can
    carry FP8 (fewer bytes) where the framework quantizes first (a stated `ep_dispatch_dtype:
    fp8`; Megatron-Core's own DeepEP path does not: ep_dispatch_dtype.py)."""
    assert dispatches_fp8("hybridep") is False and dispatches_fp8("deepep") is True
    assert _dispatch_s("hybridep", "fp8") == pytest.approx(_dispatch_s("hybridep", "bf16"))
    deep_fp8, deep_bf16 = _dispatch_s("deepep", "fp8", "fp8"), _dispatch_s("deepep", "bf16")
    assert deep_fp8 < deep_bf16
    # DeepEP's FP8 bytes are (1 + 4/128) / 2 of BF16's at the same rate, over the same latency.
    lat = COLLECTIVE_LAUNCH_S + NVLINK_STEP_LATENCY_S
    assert deep_fp8 - lat == pytest.approx((deep_bf16 - lat) * DEEPEP_FP8_BYTES_PER_ELEM / 2.0)
