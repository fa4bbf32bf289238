"""The job's power timeline: energy conserved, synchrony, grouping at 512K GPUs, smoothing, provisioning."""

import time
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.power.provision import HierarchySpec, LevelSpec, provision
from starfabric.astral.power.smoothing import (
    LIMIT_PROFILES,
    SmoothingSpec,
    StorageSpec,
    band_share,
    check_limits,
    compare,
    limit_profile,
    parse_smoothing,
    windowed_ramp,
)
from starfabric.astral.power.timeline import GpuPowerModel, cluster_shape, job_timeline
from starfabric.astral.seer import load_job, predict
from starfabric.errors import ConfigError, InfeasibleError

EX = Path(__file__).resolve().parents[3] / "examples" / "jobs"


@pytest.fixture(scope="module")
def pred70():  # type: ignore[no-untyped-def]
    return predict(load_job(EX / "llama31_70b_dense.yaml"))


@pytest.fixture(scope="module")
def tl70(pred70):  # type: ignore[no-untyped-def]
    return job_timeline(pred70, cluster_shape(1024, pred70.layout.pp, "H100", 8, 4000, 25, 50))


def test_energy_is_the_operators_energy(pred70, tl70) -> None:  # type: ignore[no-untyped-def]
    # resampling keeps each stage's energy: mean GPU power over the iteration equals the
    # time-weighted power of the passes' operators, bubbles and tail
    m = GpuPowerModel()
    idle, tdp = m.idle_fraction * 700, 700.0
    g = tl70.gpu_w
    assert g.min() >= idle - 1e-6 and g.max() <= tdp + 1e-6
    busy = pred70.breakdown["compute"] + pred70.breakdown["recompute"]
    # at least the GEMM-heavy compute time runs near TDP
    assert (g > 0.9 * tdp).mean() > 0.3 * busy / pred70.iteration_s
    # stages are offset by the schedule: the first stage starts computing first
    first = [int(np.argmax(g[s] > idle + 1)) for s in range(g.shape[0])]
    assert first == sorted(first) and first[-1] > first[0]


def test_sum_over_levels(tl70) -> None:  # type: ignore[no-untyped-def]
    sh = tl70.shape
    site = (tl70.rack_w * tl70.racks_per_stage[:, None]).sum(axis=0)
    assert np.allclose(site, tl70.site_w)
    s = tl70.summary()
    assert s["node_peak_w"] <= s["node_nameplate_w"]
    assert s["site"]["band_energy"]["0.1-20Hz"] > 0.5  # the iteration's swing is utility-band
    assert sh.gpus_per_rack * tl70.racks_per_stage.sum() == pytest.approx(1024)


def test_512k_gpus_in_well_under_30_s() -> None:
    pred = predict(load_job(EX / "llama31_405b_512k.yaml"))
    sh = cluster_shape(524_288, pred.layout.pp, "H800", 8, 4000, 25, 140)
    t0 = time.perf_counter()
    tl = job_timeline(pred, sh, dt_s=1e-3)
    assert time.perf_counter() - t0 < 30
    assert tl.site_w.size == int(np.ceil(pred.iteration_s / 1e-3))
    s = tl.summary()
    assert 250e6 < s["site"]["peak_w"] < 700e6  # 524K GPUs near 1 kW each at their peak


def test_smoothing_costs(tl70) -> None:  # type: ignore[no-untyped-def]
    rows = {r.name.split()[0]: r for r in compare(
        tl70, SmoothingSpec(floor_fraction=0.7, ramp_w_per_s=2e4,
                            storage=StorageSpec(kwh=50, kw=1000)))}  # fmt: skip
    none, fl, rp, st = rows["none"], rows["power"], rows["ramp"], rows["storage"]
    assert fl.stats["swing_w"] < none.stats["swing_w"] and fl.energy_cost > 0
    assert fl.throughput_cost == 0
    assert rp.throughput_cost > 0 and rp.stats["max_step_w"] < 0.5 * none.stats["max_step_w"]
    assert st.stats["swing_w"] < 0.05 * none.stats["swing_w"] and 0 < st.energy_cost < 0.02
    assert parse_smoothing("floor=0.5,storage=10kWh/100kW").storage.kw == 100  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="unknown"):
        parse_smoothing("wobble=1")


def test_windowed_ramp_and_band_share_are_the_definitions() -> None:
    # a 10 s square wave between 0 and 100 MW, 1 ms samples
    dt = 1e-3
    w = np.where(np.arange(10_000) < 5_000, 100e6, 0.0)
    # a 1 s average of a step of 100 MW rises at 100 MW/s; a window of whole periods is flat
    assert windowed_ramp(w, dt, 1.0) == pytest.approx(100e6, rel=1e-9)
    assert windowed_ramp(w, dt, 10.0) == 0.0
    # 60 s = 6 periods: flat; 62 s sees a 2 s remainder, the step spread over 62 s
    assert windowed_ramp(w, dt, 62.0) == pytest.approx(100e6 / 62.0, rel=1e-9)
    # a square wave at 0.1 Hz puts 81 % of its energy in the fundamental (8 / pi^2), below
    # 0.1 Hz nothing, so the 0.1-20 Hz share is all but the harmonics above 20 Hz
    share = band_share(w, dt, 0.1, 20.0)
    assert 0.97 < share < 1.0
    assert band_share(w, dt, 0.0, 0.1) == 0.0
    assert band_share(np.full(100, 5.0), dt, 0.1, 20.0) == 0.0


def test_named_utility_limits_carry_sources(tl70) -> None:  # type: ignore[no-untyped-def]
    for name, lim in LIMIT_PROFILES.items():
        assert lim.name == name and "20" in lim.source  # every profile names its (dated) source
    with pytest.raises(ConfigError, match="unknown"):
        limit_profile("somewhere")
    # the unsmoothed job breaks the band limit; a store that holds the swing meets it
    rows = compare(tl70, SmoothingSpec(storage=StorageSpec(kwh=50, kw=1000)))
    assert not rows[0].meets_limits and rows[0].checks["band_share"] > 0.2
    assert rows[1].meets_limits
    # a per-second ramp limit also judges the job's start: a 1 MW step taken at once is
    # 1 MW/s on 1 s averages; taken at 0.5 MW/s it is 0.5 MW/s
    hawaii = limit_profile("hawaii")
    flat = np.full(1000, 2e6)
    assert check_limits(flat, 1e-3, 1.2e6, float("inf"), hawaii)["start_ramp_ok"] is False
    c = check_limits(flat, 1e-3, 1.2e6, 0.5e6, hawaii)
    assert c["start_ramp_ok"] and c["start_ramp_mw_per_s"] == pytest.approx(0.5)


def test_provision_budgets_from_the_timeline(tl70) -> None:  # type: ignore[no-untyped-def]
    pr = provision(tl70, HierarchySpec(site_mw=50), 1.2)
    assert pr.gpus > pr.gpus_tdp_basis  # measured draw buys GPUs over nameplate
    assert pr.gpus % 8 == 0 and pr.binding in {
        "feed",
        "transformer",
        "UPS/HVDC lineup",
        "row busway",
        "rack",
    }
    tight = HierarchySpec(site_mw=50, levels=[LevelSpec(name="rack", rating_kw=20.0)])
    assert provision(tl70, tight, 1.2).binding == "rack"
    capped = HierarchySpec(
        site_mw=50,
        levels=[LevelSpec(name="rack", rating_kw=20.0, percentile=50, oversubscription=0.1)],
    )
    p2 = provision(tl70, capped, 1.2)
    assert p2.gpus >= provision(tl70, tight, 1.2).gpus and p2.levels[0].capped_fraction >= 0
    with pytest.raises(InfeasibleError, match="cannot carry"):
        provision(tl70, HierarchySpec(levels=[LevelSpec(name="rack", rating_kw=2.0)]), 1.2)
    with pytest.raises(ConfigError, match="redundancy"):
        LevelSpec(name="rack", rating_kw=40, redundancy="N-1")


def test_power_follows_the_operators_roofline(pred70) -> None:  # type: ignore[no-untyped-def]
    # the model's parameters come from the published readings, not from a case
    from starfabric.astral.power.timeline import (
        DECODE_BATCH1_W,
        HOPPER_TDP_W,
        IDLE_MEASURED_W,
        _peaks,
        decode_check_w,
        op_utilisation,
    )
    from starfabric.astral.seer.ops import COMM, FLASH, GEMM, MEM

    m = GpuPowerModel()
    assert m.idle_fraction * HOPPER_TDP_W == pytest.approx(np.mean(IDLE_MEASURED_W), abs=0.1)
    assert decode_check_w(m, 1) == pytest.approx(DECODE_BATCH1_W, rel=0.02)
    # more tokens per streamed weight: more power, never above the limit
    d = [decode_check_w(m, b) for b in (1, 8, 32, 128, 1024)]
    assert d == sorted(d) and d[-1] == pytest.approx(HOPPER_TDP_W)
    pc = next(iter(pred70.timeline.pieces.values()))
    uc, um = op_utilisation(pc.fwd_table, pc.fwd_costs, *_peaks(pred70))
    k = np.asarray(pc.fwd_costs.kind)
    p = m.power_fraction(uc, um)
    assert (uc[k == MEM] == 0).all() and (uc[k == COMM] == 0).all()
    # GEMMs are compute-bound, memory-bound kernels are not: the roofline orders their power
    assert p[k == GEMM].max() > p[k == MEM].max() > 0
    assert p[k == FLASH].max() < p[k == GEMM].max()
    assert ((p >= 0) & (p <= 1)).all()
