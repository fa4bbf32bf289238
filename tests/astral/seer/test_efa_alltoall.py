"""NCCL all-to-all over p5/p6 EFA (efa_alltoall.py): the fixed time per call against AWS's own
alltoall_perf tables and against an independent p5 sweep, not against a development row's
error; and the recompute cells of the AWS rows read as what the source's scripts ran."""

import csv
import statistics
from pathlib import Path

import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.cells import recompute_kind
from starfabric.astral.seer.comm import collective_time, make_fabric
from starfabric.astral.seer.efa_alltoall import (
    CRAZYGUITAR_P5_SWEEP,
    EFA_ALLTOALL_FIXED_S,
    EFA_ALLTOALL_PAIRS,
    EFA_ALLTOALL_PAYLOAD_BYTES,
    MIB,
    algbw_fixed_time_s,
    efa_alltoall_alpha,
    fixed_time_s,
    pair_fixed_times_s,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fabric import Fabric, Group

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
NIC_PER_GPU = {"H100": 400e9 / 8, "B300": 800e9 / 8}
"""p5.48xlarge: 32 x 100 Gb/s EFA per 8 GPUs; p6-b300.48xlarge: 16 x 400 Gb/s per 8 GPUs."""


def _efa_fabric(gpu: str, alpha: bool = True) -> Fabric:
    spec = get_gpu(gpu)
    over = {"collective_bus_fractions": {"all_to_all": {"nic_alpha_s": EFA_ALLTOALL_FIXED_S}}}
    eff = efficiency_for(spec, over if alpha else {})
    return make_fabric(spec.nvlink_gbps * 1e9, NIC_PER_GPU[gpu], eff)


def test_fixed_time_is_the_median_of_the_aws_pairs() -> None:
    times = pair_fixed_times_s()
    assert len(times) == len(EFA_ALLTOALL_PAIRS) == 9
    assert min(times) > 0.10e-3 and max(times) < 0.35e-3
    assert abs(EFA_ALLTOALL_FIXED_S - statistics.median(times)) < 5e-6
    assert abs(EFA_ALLTOALL_FIXED_S - 0.25e-3) < 5e-6


def test_intercept_arithmetic_on_one_pair() -> None:
    """p5, 4 nodes: 45.1 GB/s at 64 MiB, 53.9 peak -> 64 MiB x 31/32 x (1/45.1 - 1/53.9)."""
    t0 = fixed_time_s(EFA_ALLTOALL_PAYLOAD_BYTES, 32, 45.1, 53.9)
    assert t0 == pytest.approx(67108864 * 31 / 32 * (1 / 45.1 - 1 / 53.9) / 1e9)
    assert t0 == pytest.approx(0.235e-3, abs=1e-6)


@pytest.mark.parametrize(("nodes", "ranks", "mib", "algbw", "peak"), CRAZYGUITAR_P5_SWEEP)
def test_independent_p5_sweep_gives_the_same_intercept(
    nodes: int, ranks: int, mib: int, algbw: float, peak: float
) -> None:
    """crazyguitar/aws-gpu-communication-benchmark (HyperPod p5, 32-64 MiB against 2 GiB):
    0.31-0.34 ms at 2-4 nodes, within 40% of the AWS median it was not calibrated on."""
    t0 = algbw_fixed_time_s(mib * MIB, algbw, peak)
    assert 0.28e-3 < t0 < 0.35e-3
    assert abs(t0 / EFA_ALLTOALL_FIXED_S - 1) < 0.4


@pytest.mark.parametrize(
    ("mib", "nodes", "algbw"),
    [(32, 2, 47.78), (64, 2, 66.30), (128, 2, 73.38), (32, 4, 35.56), (64, 4, 44.53),
     (128, 4, 54.26)],
)  # fmt: skip
def test_formula_reproduces_the_p5_sweep_times(mib: int, nodes: int, algbw: float) -> None:
    """Differential: Seer's all-to-all formula on nodes x 8 H100 at 400 Gb/s per GPU, with the
    EFA fixed time, gives the out-of-place times of the independent p5 sweep (algbw at each
    size, data/nccl_alltoall.csv) within 15%; without it the 32 MiB points are > 25% fast."""
    size = mib * MIB
    measured = size / (algbw * 1e9)
    group = Group(8 * nodes, 8)
    with_fixed = collective_time("all_to_all", size, group, _efa_fabric("H100"))
    assert abs(with_fixed / measured - 1) < 0.15
    if mib == 32:
        ib_latency = collective_time("all_to_all", size, group, _efa_fabric("H100", alpha=False))
        assert ib_latency / measured - 1 < -0.25


@pytest.mark.parametrize(("platform", "nodes", "ranks", "busbw", "peak"), EFA_ALLTOALL_PAIRS)
def test_formula_reproduces_the_aws_matched_size_times(
    platform: str, nodes: int, ranks: int, busbw: float, peak: float
) -> None:
    """Seer's bandwidth term (0.88 of each GPU's NIC rate) plus the median fixed time gives the
    64 MiB time of every AWS pair (t = S (n-1)/n / busbw) within 20% (p5 within 5%); the IB
    step latency alone is 12-36% fast on every pair."""
    gpu = "H100" if platform.startswith("p5") else "B300"
    size = EFA_ALLTOALL_PAYLOAD_BYTES
    measured = size * (ranks - 1) / ranks / (busbw * 1e9)
    t = collective_time("all_to_all", size, Group(ranks, 8), _efa_fabric(gpu))
    assert abs(t / measured - 1) < (0.05 if gpu == "H100" else 0.20)
    ib = collective_time("all_to_all", size, Group(ranks, 8), _efa_fabric(gpu, alpha=False))
    assert ib / measured - 1 < -0.12


def test_only_p5_p6_efa_cells_get_the_fixed_time() -> None:
    p5 = "NVLink4/NVSwitch intra-node; 32x EFA per node (3.2 Tb/s, 400 Gb/s per GPU)"
    assert efa_alltoall_alpha(p5, "H100") == EFA_ALLTOALL_FIXED_S
    assert efa_alltoall_alpha("16x 400G EFA per node (6.4 Tb/s)", "B300") == EFA_ALLTOALL_FIXED_S
    assert efa_alltoall_alpha("4x 100 Gb/s EFA per node", "A100") is None  # p4d: efa.py
    assert efa_alltoall_alpha("8x 400 Gb/s InfiniBand NDR", "H100") is None
    assert efa_alltoall_alpha(None, "H100") is None


def test_intra_host_all_to_all_is_unchanged() -> None:
    size = 16 * MIB
    with_fixed = collective_time("all_to_all", size, Group(8, 8), _efa_fabric("H100"))
    without = collective_time("all_to_all", size, Group(8, 8), _efa_fabric("H100", alpha=False))
    assert with_fixed == without


def test_aws_overlap_off_rows_read_full_recompute_as_their_scripts_ran() -> None:
    """bench_dsv3_pretrain.py keeps deepseek_v3_pretrain_config_32nodes' full recompute with
    overlap off; bench_qwen3_pretrain.py keeps qwen3_30b_a3b_pretrain_config's (full, uniform,
    1 layer) when RECOMPUTE is empty; overlap=on clears it; Qwen3-235B states selective."""
    with DEV2.open(newline="") as fh:
        rows = {r["row_id"]: r for r in csv.DictReader(fh) if r["row_id"].startswith("AWS")}
    assert len(rows) == 15
    for rid, row in rows.items():
        kind = recompute_kind(row["recompute"], legacy=False)
        if rid.endswith("-OV"):
            assert kind == "none", rid
        elif rid.startswith("AWSQ235"):
            assert kind == "selective", rid
        else:
            assert kind == "full", rid
