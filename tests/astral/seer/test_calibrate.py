from pathlib import Path

import pytest

from starfabric.astral.seer import load_job, predict
from starfabric.astral.seer.calibrate import apply_profile, calibrate_nccl
from starfabric.errors import ConfigError, DataError

NCCL = Path(__file__).parents[2] / "data" / "nccl_tests"
EXAMPLES = Path(__file__).parents[3] / "examples" / "jobs"
A100_1NODE = [
    NCCL / f"superbench_1node_8xa100_40gb_nccl_{c}.log"
    for c in ("allreduce", "allgather", "reducescatter", "alltoall")
]


def test_calibration_on_real_logs_cuts_the_error() -> None:
    cal = calibrate_nccl(
        [*A100_1NODE, NCCL / "aws_p4de_2node_a100_efa_all_reduce.txt"], "A100", "50G"
    )
    assert set(cal.fractions) == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    for fit in cal.logs:
        assert fit.error_after < fit.error_before
        assert fit.error_after < 0.2
    # DGX-A100 NVLink: ring all-gather reaches ~70% of the 300 GB/s per direction.
    assert 0.6 < cal.fractions["all_gather"]["nvlink"] < 0.8
    # 2 nodes, 4x100G EFA per node: the measured 78 GB/s busbw beats a ring over 8x 6.25 GB/s.
    assert cal.fractions["all_reduce"]["nic"] > 1.0
    assert 0 < cal.fractions["all_reduce"]["nic_alpha_s"] < 1e-3


def test_profile_round_trip_changes_predictions(tmp_path: Path) -> None:
    import yaml

    cal = calibrate_nccl(
        [NCCL / "aws_p5_1node_h100_nvswitch_all_reduce_awsbatch.txt",
         NCCL / "aws_p5_2node_h100_efa_all_reduce.txt"], "H100", "400G",
    )  # fmt: skip
    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(cal.profile()))
    job = load_job(EXAMPLES / "llama31_70b_dense.yaml")
    before = predict(job)
    after = predict(apply_profile(job, prof))
    assert after.iteration_s != before.iteration_s
    assert after.breakdown["compute"] == pytest.approx(before.breakdown["compute"])


def test_profile_for_another_gpu_and_bad_logs_are_refused(tmp_path: Path) -> None:
    import yaml

    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump({"gpu": "A100", "efficiency": {}}))
    with pytest.raises(ConfigError, match="profile is for A100"):
        apply_profile(load_job(EXAMPLES / "llama31_70b_dense.yaml"), prof)
    junk = tmp_path / "x_all_reduce.txt"
    junk.write_text("#  size count type redop root time algbw busbw\n")
    with pytest.raises(DataError):
        calibrate_nccl([junk], "A100", "200G")


def test_kineto_gemms_are_linked_and_fitted() -> None:
    from starfabric.astral.seer.calibrate import calibrate_kineto, kineto_gemms

    # Rank 3 of an 8-GPU A100 job, from HolisticTraceAnalysis' tests (MIT; see data/SOURCES.md).
    path = Path(__file__).parent / "data" / "hta_trace_diff_control_a100_ws8_rank3.json.gz"
    mnk, seconds, dtype = kineto_gemms(path)
    assert mnk.shape == (len(seconds), 3) and (mnk > 0).all()
    assert len(seconds) > 1000 and dtype == "float" and (seconds > 0).all()
    fit = calibrate_kineto(path, "A100")
    assert fit.dtype == "tf32" and fit.error_after <= fit.error_before
    assert 0.3 < fit.gemm_peak_fraction <= 1.0
