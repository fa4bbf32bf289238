"""seer.goodput: the effective training time ratio of a whole run against its sources' own
numbers (Kokolis et al. 2024; Llama 3 section 3.3.4), Young's optimum, and that `seer
validate` applies it only to rows whose cells state a whole-run production average."""

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from starfabric.astral.seer import goodput as g
from starfabric.cli import app

DATA = Path(__file__).parents[2] / "data" / "published_runs"
BUNDLED = (
    Path(__file__).parents[3] / "src" / "starfabric" / "astral" / "seer" / "published_runs"
    / "megatron_weak_scaling.csv"
)  # fmt: skip
EXAMPLES = Path(__file__).parents[3] / "examples" / "jobs"


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as fh:
        return {r["row_id"]: r for r in csv.DictReader(fh)}


def test_kokolis_projection_of_a_16k_a100_job() -> None:
    # Kokolis et al.: RSC-1's 6.50 failures per 1,000 node-days project an MTTF of 1.8 h
    # for a 16,384-GPU job (2,048 nodes of 8 A100).
    assert g.mttf_hours(16384, g.failures_per_node_day("A100")) == pytest.approx(1.8, abs=0.01)
    # RSC-2's lower rate gives a proportionally longer MTTF at the same size.
    rsc2 = g.KOKOLIS_RSC2_FAILURES_PER_1000_NODE_DAYS / 1000
    assert g.mttf_hours(16384, rsc2) == pytest.approx(1.8 * 6.50 / 2.34, rel=0.01)


def test_llama3_run_reproduced() -> None:
    # Llama 3 405B: 466 interruptions in 54 days on 16,384 H100 ("one every ~3 hours") at
    # 90% effective training time.
    gp = g.goodput(16384, "H100")
    assert gp.mttf_h == pytest.approx(54 * 24 / 466, rel=1e-9)
    assert 2.5 < gp.mttf_h < 3.0
    assert gp.ettr == pytest.approx(0.90, abs=1e-9)
    assert gp.lost_h_per_interruption == pytest.approx(0.278, abs=0.001)


def test_ettr_falls_with_job_size_and_older_generation() -> None:
    sizes = [64, 512, 2048, 8192, 16384]
    for gpu in ("A100", "H100"):
        ettrs = [g.goodput(n, gpu).ettr for n in sizes]
        assert ettrs == sorted(ettrs, reverse=True)
    # A100 fleets (RSC-1) fail more often per node-day than Llama 3's H100 run.
    assert g.goodput(4096, "A100").ettr < g.goodput(4096, "H100").ettr
    # Blackwell has no published rate: Hopper's; Volta takes Ampere's.
    assert g.failures_per_node_day("B200") == g.failures_per_node_day("H100")
    assert g.failures_per_node_day("V100") == g.failures_per_node_day("A100")


@given(
    c=st.floats(min_value=1e-3, max_value=0.5),
    m=st.floats(min_value=2.0, max_value=500.0),
    r=st.floats(min_value=0.0, max_value=1.0),
)
def test_young_interval_is_the_optimum(c: float, m: float, r: float) -> None:
    tau = g.young_interval_h(c, m)
    best = g.young_daly_ettr(c, r, m)
    for factor in (0.5, 0.8, 1.25, 2.0):
        assert g.young_daly_ettr(c, r, m, tau * factor) <= best + 1e-12
    # At the optimum the loss is sqrt(2C/M) + R/M (Young 1974).
    if best > g.MIN_ETTR:
        assert 1 - best == pytest.approx((2 * c / m) ** 0.5 + r / m, rel=1e-9)


def test_only_stated_production_averages() -> None:
    d1, d2, vis = _rows(DATA / "development_runs.csv"), _rows(DATA / "development_runs_2.csv"), (
        _rows(BUNDLED))  # fmt: skip
    hits = {rid for rows in (d1, d2, vis) for rid, r in rows.items()
            if g.states_production_average(r)}  # fmt: skip
    # GPU-hours of a whole pre-training (cells say so); none of the steady-state rows.
    assert hits == {"DSV3-01", "FALCON180B-01", "STARCODER-01"}
    # A steady-state rate whose notes add the days it implies is not one.
    assert "days" in d1["N21-T2-01"]["notes"] and "days" in d2["LLAMA1-01"]["notes"]
    row = dict(d2["FALCON180B-01"], notes="not a production average: iteration 900")
    assert not g.states_production_average(row)
    row = dict(d2["LLAMA1-01"], metric_primary="GPU-hours for 1.4T tokens")
    assert g.states_production_average(row)


def test_training_days() -> None:
    # 1.4T tokens at 380 tokens/s/GPU on 2,048 GPUs is the ~21 days Llama 1's paper states
    # (at ETTR 1); a lower ETTR stretches it in proportion.
    assert g.training_days(1.4e12, 380 * 2048, 1.0) == pytest.approx(20.8, abs=0.1)
    assert g.training_days(1.4e12, 380 * 2048, 0.8) == pytest.approx(20.8 / 0.8, abs=0.1)


def test_predict_production_cli() -> None:
    res = CliRunner().invoke(
        app, ["astral", "seer", "predict", str(EXAMPLES / "llama31_70b_dense.yaml"), "--json",
              "--train-tokens", "15e12"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    prod = out["production"]
    want = g.goodput(1024, "H100")
    assert prod["ettr"] == pytest.approx(want.ettr)
    assert prod["iteration_s"] == pytest.approx(out["iteration_s"] / want.ettr)
    assert prod["training_days"] == pytest.approx(15e12 / out["tokens_per_s"] / want.ettr / 86400)
    res = CliRunner().invoke(
        app, ["astral", "seer", "predict", str(EXAMPLES / "llama31_70b_dense.yaml"),
              "--production"],
    )  # fmt: skip
    assert res.exit_code == 0 and "ETTR" in res.output
    res = CliRunner().invoke(
        app, ["astral", "seer", "predict", str(EXAMPLES / "llama31_70b_dense.yaml"),
              "--train-tokens", "0"],
    )  # fmt: skip
    assert res.exit_code == 2
