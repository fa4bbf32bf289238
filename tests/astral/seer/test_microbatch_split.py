"""scripts/seer_microbatch_split.py: the 1F1B two-point split of a stage's time per micro-batch
into a part fixed per layer and a part per sequence (the finding on the AWS Megatron-Bridge EFA
rows of development set 2, docs/astral.md)."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from astral.seer.load_script import load_script
from starfabric.astral.seer.validate import stated_iteration_times

ROOT = Path(__file__).parents[3]
DEV2 = ROOT / "tests" / "data" / "published_runs" / "development_runs_2.csv"


ms = load_script("seer_microbatch_split")


@given(
    fixed=st.floats(1e-4, 1.0), per_seq=st.floats(1e-4, 1.0),
    pp=st.integers(1, 16), dp=st.integers(1, 8), mb=st.sampled_from([(1, 2), (1, 4), (2, 8)]),
)  # fmt: skip
def test_split_recovers_the_slot_model(fixed, per_seq, pp, dp, mb) -> None:
    """Iteration times built by the 1F1B formula split back into the fixed and per-sequence
    parts they were built from."""
    gbs = dp * 64
    lo, hi = mb
    it = [(gbs // (dp * b) + pp - 1) * (fixed + per_seq * b) for b in (lo, hi)]
    s_lo = ms.slot_time(it[0], gbs, dp, lo, pp)
    s_hi = ms.slot_time(it[1], gbs, dp, hi, pp)
    f, p = ms.split(s_lo, lo, s_hi, hi)
    assert f == pytest.approx(fixed, rel=1e-9, abs=1e-12)
    assert p == pytest.approx(per_seq, rel=1e-9, abs=1e-12)


def test_split_needs_two_sizes() -> None:
    with pytest.raises(ValueError):
        ms.split(1.0, 2, 1.5, 2)
    with pytest.raises(ValueError):
        ms.slot_time(1.0, 8, 4, 4, 1)


def test_aws_efa_pairs_carry_a_fixed_cost_per_layer(capsys) -> None:
    """The published AWS Megatron-Bridge rows (EFA, Megatron-Core 0.17.1 alltoall): a micro-batch
    costs 8-17 ms per layer whatever its size — Qwen3-30B EP16 212.9 ms per slot at micro-batch
    1, 245.7 ms at 4 (12 layers per stage) — far above the per-sequence part."""
    import csv

    with DEV2.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    got = {s.row_lo: s for s in ms.pairs(rows, stated_iteration_times(rows))}
    assert set(got) == {
        "AWSDSV3-MB1", "AWSQ235-EP16-MB1", "AWSQ235-EP32-MB1", "AWSQ30-EP16-MB1",
        "AWSQ30-EP32-MB1",
    }  # fmt: skip
    q30 = got["AWSQ30-EP16-MB1"]
    assert q30.slot_lo_s == pytest.approx(27.89 / 131)
    assert q30.slot_hi_s == pytest.approx(8.60 / 35)
    assert q30.fixed_per_layer_s == pytest.approx(16.83e-3, abs=0.01e-3)
    assert q30.per_seq_per_layer_s == pytest.approx(0.91e-3, abs=0.01e-3)
    fixed_ms = {k: round(s.fixed_per_layer_s * 1e3, 1) for k, s in got.items()}
    assert fixed_ms == {
        "AWSDSV3-MB1": 11.7, "AWSQ235-EP16-MB1": 9.6, "AWSQ235-EP32-MB1": 8.0,
        "AWSQ30-EP16-MB1": 16.8, "AWSQ30-EP32-MB1": 15.6,
    }  # fmt: skip
    # EP 16 vs 32 (2 vs 4 hosts) barely changes the fixed part: not a per-peer latency.
    assert abs(fixed_ms["AWSQ30-EP16-MB1"] - fixed_ms["AWSQ30-EP32-MB1"]) < 1.5
    assert abs(fixed_ms["AWSQ235-EP16-MB1"] - fixed_ms["AWSQ235-EP32-MB1"]) < 2.0
    assert ms.main(["--csv", str(DEV2)]) == 0
    assert "AWSQ30-EP16-MB1 / AWSQ30-EP16-MB4 (1/4)" in capsys.readouterr().out
