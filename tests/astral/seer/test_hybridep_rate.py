"""HybridEP's measured rate: the GB200 Torch-API table of DeepEP's docs/README_Hybrid-EP.md
@5fbafce (tests/data/hybridep/) prices HybridEP inside one NVLink-5 domain; DeepEP's V1 model
keeps every other case."""

import csv
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.comm import formula_comm
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.expert_comm import DEEPEP_FP8_BYTES_PER_ELEM
from starfabric.astral.seer.hybridep_rate import (
    HYBRIDEP_RANKS,
    HYBRIDEP_SMS,
    hybridep_bytes_per_s,
    hybridep_rates,
)

DATA = Path(__file__).parents[2] / "data" / "hybridep" / "gb200_hybridep_bandwidth.csv"
OPS = {"dispatch_fp8": "dispatch_fp8_gbps", "dispatch_bf16": "dispatch_bf16_gbps",
       "combine": "combine_gbps"}  # fmt: skip


def _rows(platform: str, measure: str = "torch_api") -> list[dict[str, str]]:
    with DATA.open(newline="") as f:
        return [r for r in csv.DictReader(f) if r["platform"] == platform
                and r["measure"] == measure]  # fmt: skip


def test_the_module_reproduces_every_gb200_torch_api_point() -> None:
    rows = _rows("GB200")
    assert len(rows) == len(HYBRIDEP_RANKS) * len(HYBRIDEP_SMS)
    for r in rows:
        for op, col in OPS.items():
            got = hybridep_bytes_per_s(op, int(r["ranks"]), int(r["sms"]))  # type: ignore[arg-type]
            assert got == pytest.approx(float(r[col]) * 1e9, rel=1e-9), (r, op)


def test_the_b200_point_lies_on_the_gb200_table() -> None:
    """One table for every NVLink-5 GPU: B200's 8-rank, 16-SM point is within 3% of GB200's."""
    (b200,) = _rows("B200")
    for op, col in OPS.items():
        gb200 = hybridep_bytes_per_s(op, 8, 16)  # type: ignore[arg-type]
        assert float(b200[col]) * 1e9 == pytest.approx(gb200, rel=0.03)


def test_fp8_bytes_follow_the_benchmark_convention() -> None:
    """tests/test_hybrid_ep.py @5eb0722: FP8 bytes = BF16 bytes x (1 + 4/128) / 2, Seer's factor."""
    assert pytest.approx((1 + 4 / 128) / 2) == DEEPEP_FP8_BYTES_PER_ELEM / 2.0


@settings(max_examples=200, deadline=None)
@given(ranks=st.integers(1, 200), sms=st.integers(1, 132),
       op=st.sampled_from(sorted(OPS)))  # fmt: skip
def test_interpolation_stays_between_the_measured_neighbours(ranks: int, sms: int, op: str) -> None:
    """Linear between points, the edge value outside: the rate lies between the four measured
    points around (ranks, sms), clamped to the table's range."""
    r = min(max(ranks, HYBRIDEP_RANKS[0]), HYBRIDEP_RANKS[-1])
    s = min(max(sms, HYBRIDEP_SMS[0]), HYBRIDEP_SMS[-1])
    lo_r = max(x for x in HYBRIDEP_RANKS if x <= r)
    hi_r = min(x for x in HYBRIDEP_RANKS if x >= r)
    corners = [hybridep_bytes_per_s(op, a, b) for a in (lo_r, hi_r) for b in HYBRIDEP_SMS]  # type: ignore[arg-type]
    got = hybridep_bytes_per_s(op, ranks, sms)  # type: ignore[arg-type]
    assert min(corners) - 1.0 <= got <= max(corners) + 1.0
    assert got == hybridep_bytes_per_s(op, r, s)  # type: ignore[arg-type]


QWEN = load_model("qwen3-235b-a22b")
EX: dict[str, Any] = {
    "global_batch": 1024, "micro_batch": 1, "seq_len": 4096, "precision": "bf16", "tp": 1,
    "pp": 2, "ep": 32, "etp": 1, "recompute": "selective", "moe_dispatcher": "deepep",
    "deepep_num_sms": 32,
}  # fmt: skip


def _comm(backend: str, gpu: str, gpus_per_node: int) -> Any:
    p = predict(make_job(QWEN, {**EX, "moe_flex_backend": backend},
                         {"gpu": gpu, "gpus": 256, "gpus_per_node": gpus_per_node}))  # fmt: skip
    return formula_comm(p.job.execution, p.layout, efficiency_for(p.layout.gpu, {}), QWEN)


def test_only_hybridep_inside_an_nvlink5_domain_takes_the_measured_rate() -> None:
    assert _comm("hybridep", "GB200", 4).ep_hybridep_rates == hybridep_rates(32, 32)
    assert _comm("deepep", "GB200", 4).ep_hybridep_rates is None
    assert _comm("hybridep", "H100", 8).ep_hybridep_rates is None  # EP across nodes, NVLink 4


def test_the_rate_sets_the_intranode_time_per_phase() -> None:
    hyb, deep = _comm("hybridep", "GB200", 4), _comm("deepep", "GB200", 4)
    nbytes = 4096 * 8 * 4096 * 2.0
    bf16, fp8, combine = hybridep_rates(32, 32)
    for phase, fp8_on, rate in (("dispatch", False, bf16), ("dispatch", True, fp8),
                                ("combine", False, combine)):  # fmt: skip
        t_h = hyb.time("all_to_all", nbytes, "ep", phase=phase, fp8=fp8_on)
        t_d = deep.time("all_to_all", nbytes, "ep", phase=phase, fp8=fp8_on)
        # same bytes and latency, only the rate differs
        assert (t_h - t_d) == pytest.approx(
            nbytes * hyb.ep_rank_fraction * (DEEPEP_FP8_BYTES_PER_ELEM / 2 if fp8_on else 1.0)
            * (1 / rate - 1 / deep.ep_nvlink_bytes_per_s), rel=1e-9)  # fmt: skip
