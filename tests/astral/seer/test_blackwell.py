import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import make_job, predict

EX = {"global_batch": 64, "seq_len": 4096, "tp": 8, "micro_batch": 1}


@pytest.mark.parametrize("name", ["H800", "H200", "B200", "B300", "GB200", "GB300"])
def test_catalog_has_peaks_memory_and_links(name: str) -> None:
    g = get_gpu(name)
    assert g.tflops("bf16") > 0 and g.tflops("fp8") == pytest.approx(2 * g.tflops("bf16"), rel=1e-3)
    assert g.hbm_gib >= 80 and g.hbm_gbps > 3000 and g.nvlink_gbps > 0 and g.nic_gbps
    if name.startswith(("B", "GB")):
        assert g.tflops("mxfp8") == g.tflops("fp8")


def test_nvl72_keeps_tp8_on_nvlink_with_4_gpu_trays() -> None:
    """GB200 trays hold 4 GPUs but NVLink joins 72: TP = 8 does not cross the NICs there,
    while B200 nodes of 4 would."""
    rack = predict(make_job("llama-3.1-70b", EX, {"gpu": "GB200", "gpus": 64, "gpus_per_node": 4}))
    trays = predict(make_job("llama-3.1-70b", EX, {"gpu": "B200", "gpus": 64, "gpus_per_node": 4}))
    assert get_gpu("GB200").nvlink_domain == 72
    assert rack.breakdown["tp"] < 0.5 * trays.breakdown["tp"]


def test_blackwell_efficiency_is_labelled_an_estimate() -> None:
    """No measured Blackwell training run calibrates its GEMM fractions: Seer says so, while
    Hopper and Ampere name the published rows they are calibrated on."""
    from starfabric.astral.seer.efficiency import efficiency_for

    for name in ("B200", "B300", "GB200", "GB300"):
        eff = efficiency_for(get_gpu(name))
        assert eff.is_estimate and "Blackwell" in eff.basis
    for name in ("H100", "H800", "A100"):
        assert not efficiency_for(get_gpu(name)).is_estimate
    pred = predict(make_job("llama-3.1-70b", EX, {"gpu": "B200", "gpus": 64}))
    assert pred.summary()["efficiency_basis"].startswith("estimate")


def test_grace_memory_is_a_second_tier_only_on_superchips() -> None:
    assert get_gpu("H100").offload_gib is None and get_gpu("B200").offload_gib is None
    for name in ("GH200", "GB200", "GB300"):
        g = get_gpu(name)
        assert g.offload_gib and g.offload_gbps and "Grace" in g.source
