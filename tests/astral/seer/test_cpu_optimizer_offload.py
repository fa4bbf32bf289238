"""Megatron-Core's optimizer CPU offload (seer/cpu_optimizer_offload.py) against its sources.

Sources: Megatron-LM @d98e8a64 hybrid_optimizer.py / optimizer/__init__.py / arguments.py
(what moves, which CPU optimizer, the flags; first in core_v0.12.0), PyTorch's
FusedAdamKernel.cpp (the CPU AdamW's tensors) and cuda/Copy.cu (which dtype crosses the link),
the DGX H100 / GB200 host figures in the hardware catalog.
"""

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import cpu_optimizer_offload as cpo
from starfabric.astral.seer import load_model, make_job, offload, predict
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.memory import MemoryReport
from starfabric.astral.seer.optimizer_state import optimizer_bytes
from starfabric.astral.seer.parallel import SystemSpec, uneven_pipeline_layers
from starfabric.astral.seer.search import search
from starfabric.astral.seer.validate import validate_row
from starfabric.errors import StarfabricError

H100 = get_gpu("H100")
DSV3 = load_model("deepseek-v3")
DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
EX: dict[str, Any] = {
    "global_batch": 1024, "micro_batch": 1, "seq_len": 4096, "precision": "fp8", "tp": 1,
    "pp": 8, "vpp": 4, "ep": 16, "pipeline_layers": uneven_pipeline_layers(61, 32),
    "recompute": "selective", "recompute_modules": ("layernorm", "moe", "mla_up_proj", "mlp"),
}  # fmt: skip
SYS = {"gpu": "H100", "gpus": 256}
CMD = (
    "pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
    "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
    "--global-batch-size 8 --use-distributed-optimizer --bf16 "
)


def test_bytes_follow_the_kernels_tensors() -> None:
    # FusedAdamKernel.cpp: loads param, grad, exp_avg, exp_avg_sq; stores exp_avg,
    # exp_avg_sq, param — fp32 each (torch AdamW's state takes the fp32 parameter's dtype).
    assert cpo.CPU_ADAM_DRAM_BYTES_PER_PARAM == (4 + 3) * 4
    assert cpo.HOST_BYTES_PER_PARAM == 4 * 4  # param, grad buffer, two moments
    # non-blocking copies convert on the GPU: fp32 grads out, fp32 params in.
    assert cpo.D2H_BYTES_PER_PARAM == cpo.H2D_BYTES_PER_PARAM == 4.0


def test_cpu_adam_rate_is_the_gpus_share_of_dgx_h100_dram() -> None:
    # DGX H100: 2 x 8 channels DDR5-4800 = 614.4 GB/s over 8 GPUs; 14 cores per GPU.
    assert H100.host_mem_gbps == pytest.approx(2 * 8 * 4.8 * 8 / 8)
    assert H100.host_cores == 112 // 8
    rate = cpo.cpu_adam_params_per_s(H100)
    assert rate == pytest.approx(76.8e9 * cpo.DRAM_FRACTION / 36.0)
    assert 1.5e9 < rate < 2.0e9  # ~1.7 G parameters/s per GPU
    # One thread (torchrun's OMP_NUM_THREADS=1 default) is bound by its own streaming rate.
    assert cpo.cpu_adam_params_per_s(H100, threads=1) == pytest.approx(
        cpo.CORE_STREAM_GBPS * 1e9 / 36.0
    )
    assert cpo.cpu_adam_params_per_s(H100, threads=1) < rate


def test_step_time_overlapped_and_serial() -> None:
    n, gpu_s = 1e9, 0.01
    link = 64e9 * offload.LINK_FRACTION
    d2h = h2d = n * 4.0 / link
    cpu = n / cpo.cpu_adam_params_per_s(H100)
    assert cpo.step_s(n, 1.0, gpu_s, H100, overlap=True) == pytest.approx(max(d2h, cpu, h2d))
    assert cpo.step_s(n, 1.0, gpu_s, H100, overlap=False) == pytest.approx(d2h + cpu + h2d)
    assert cpo.step_s(n, 0.0, gpu_s, H100, overlap=True) == gpu_s
    # Half offloaded: the GPU Adam on the other half runs beside it; the H2D waits for it.
    half = cpo.step_s(n, 0.5, 10.0, H100, overlap=True)
    assert half == pytest.approx(5.0 + h2d / 2)
    # Offloading more of a CPU-bound step takes longer; overlap never loses.
    steps = [cpo.step_s(n, f, gpu_s, H100, overlap=True) for f in (0.25, 0.5, 1.0)]
    assert steps == sorted(steps)
    for f in (0.25, 0.5, 1.0):
        assert cpo.step_s(n, f, gpu_s, H100, True) <= cpo.step_s(n, f, gpu_s, H100, False)


def test_offload_moves_the_optimizer_shard_to_host_memory() -> None:
    base = predict(make_job(DSV3, EX, SYS))
    off = predict(make_job(DSV3, {**EX, "optimizer_offload_fraction": 1.0}, SYS))
    half = predict(make_job(DSV3, {**EX, "optimizer_offload_fraction": 0.5}, SYS))
    assert off.memory.optimizer == 0.0 and base.memory.optimizer > 10 * 2**30
    assert half.memory.optimizer == pytest.approx(base.memory.optimizer / 2, rel=1e-9)
    local = base.memory.optimizer / optimizer_bytes("fp32")
    assert off.memory.host == pytest.approx(local * 16.0, rel=1e-9)
    assert off.memory.total == pytest.approx(base.memory.total - base.memory.optimizer)
    assert off.memory.host <= (H100.host_mem_gib or 0.0) * 2**30  # DGX H100: 2 TB / 8 GPUs
    # The step is slower: CPU Adam at ~1.7 G params/s instead of HBM-bound GPU Adam.
    assert off.timeline.breakdown["optimizer"] > 10 * base.timeline.breakdown["optimizer"]
    assert off.iteration_s > base.iteration_s


def test_grace_superchips_count_the_host_share_in_their_tier() -> None:
    off = predict(
        make_job(DSV3, {**EX, "optimizer_offload_fraction": 1.0}, {**SYS, "gpu": "GB200"})
    )
    assert off.memory.host == 0.0 and off.memory.offloaded > 0.0


def test_host_memory_short_is_out_of_memory() -> None:
    rep = MemoryReport(1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 10.0, 0, 0.0, 0.0, 300.0, 256.0)
    assert rep.oom


def test_execution_refuses_offload_without_a_known_host_or_with_weight_offload() -> None:
    with pytest.raises(StarfabricError, match="host"):
        predict(make_job(DSV3, {**EX, "optimizer_offload_fraction": 1.0}, {**SYS, "gpu": "H20"}))
    with pytest.raises(StarfabricError, match="offload_weights"):
        predict(make_job(DSV3, {**EX, "optimizer_offload_fraction": 1.0,
                                "offload_weights": True}, {**SYS, "gpu": "GB200"}))  # fmt: skip


def test_megatron_flags() -> None:
    ex = parse_megatron_command(
        CMD + "--use-precision-aware-optimizer --optimizer-cpu-offload "
        "--overlap-cpu-optimizer-d2h-h2d --use-torch-optimizer-for-cpu-offload"
    )["execution"]
    assert ex["optimizer_offload_fraction"] == 1.0  # the CLI default
    assert ex["overlap_cpu_optimizer"] is True
    ex = parse_megatron_command(
        CMD + "--use-precision-aware-optimizer --optimizer-cpu-offload "
        "--optimizer-offload-fraction 0.25"
    )["execution"]
    assert ex["optimizer_offload_fraction"] == 0.25 and ex["overlap_cpu_optimizer"] is False
    ex = parse_megatron_command(CMD + "--optimizer-offload-fraction 0.5")["execution"]
    assert "optimizer_offload_fraction" not in ex  # the fraction alone offloads nothing
    with pytest.raises(StarfabricError, match="precision-aware"):
        parse_megatron_command(CMD + "--optimizer-cpu-offload")
    with pytest.raises(StarfabricError, match="between 0 and 1"):
        parse_megatron_command(
            CMD + "--use-precision-aware-optimizer --optimizer-cpu-offload "
            "--optimizer-offload-fraction 1.5"
        )


def test_releases_that_ship_it() -> None:
    assert not cpo.offered("Megatron-Core 0.11.0")
    assert cpo.offered("Megatron-Core 0.12.0") and cpo.offered("Megatron-Bridge 0.4.2")
    assert not cpo.offered("NeMo 25.04") and cpo.offered("NeMo 25.07")
    assert not cpo.offered("Megatron-LM (2021)")
    assert cpo.stated("Megatron-Core with --optimizer-cpu-offload")


def _dsv3_row(gpu: str, **kw: str) -> dict[str, str]:
    rows = list(csv.DictReader(DEV2.open()))
    r = dict(next(r for r in rows if r["row_id"] == "AWSDSV3-MB1"))
    r.update(row_id="X-1", gpu=gpu, num_gpus="256", tp="1", pp="8", vpp="UNVERIFIED",
             dp="32", ep="16", etp="1", recompute="UNVERIFIED", micro_batch="1",
             global_batch_seqs="8192", precision="FP8", notes="",
             zero_or_fsdp="distributed optimizer",
             framework="Megatron-Core 0.13 (flex dispatcher, DeepEP)",
             interconnect="8x 400G InfiniBand per node")  # fmt: skip
    r.update(kw)
    return r


def test_a_row_that_fits_without_offload_does_not_choose_it() -> None:
    res = validate_row(_dsv3_row("B200"))
    assert res.choices["optimizer_offload_fraction"] == 0.0


def test_deepseek_v3_on_256_h100_offloads_instead_of_full_recompute() -> None:
    res = validate_row(_dsv3_row("H100"))
    assert res.choices["optimizer_offload_fraction"] > 0.0
    assert not str(res.choices["recompute"]).startswith("full")
    assert not res.prediction.memory.oom
    # Without the mechanism (a release before Megatron Core 0.12) it recomputes everything.
    old = validate_row(_dsv3_row("H100", framework="Megatron-Core 0.11 (flex dispatcher)"))
    assert "optimizer_offload_fraction" not in old.choices
    assert str(old.choices["recompute"]).startswith("full")
    assert res.predicted_iter_s < old.predicted_iter_s


def test_search_prices_the_offload_as_predict_does() -> None:
    model = load_model("llama-3.1-8b")
    res = search(model, SystemSpec(gpu="H100", gpus=8), 16, 4096)
    c = res.configs
    keys = ("tp", "cp", "pp", "vpp", "dp", "mb", "rec", "tpo", "dpo", "zero")
    base = {tuple(int(c[k][i]) for k in keys): i for i in np.flatnonzero(c["off"] == 0)}
    pairs = [(base[t], i) for i in np.flatnonzero(c["off"] == 4)
             if (t := tuple(int(c[k][i]) for k in keys)) in base]  # fmt: skip
    assert pairs
    for a, b in pairs:  # the optimizer leaves HBM; the step only gets longer
        assert res.memory_bytes[b] < res.memory_bytes[a]
        assert res.iteration_s[b] > res.iteration_s[a]
    for _, b in pairs[:: max(1, len(pairs) // 5)]:
        ex = res.execution(int(b))
        assert ex["optimizer_offload_fraction"] == 1.0
        p = predict(make_job(model, ex, {"gpu": "H100", "gpus": 8}))
        assert p.iteration_s == pytest.approx(float(res.iteration_s[b]), rel=0.01)


def test_stated_settings_that_leave_memory_short_fit_with_the_offload() -> None:
    # Full recompute stated, VPP 4: the fp32 optimizer of 16 experts per layer at expert-DP 2
    # does not fit 80 GB; Megatron Core 0.13 can move it to the host, 0.11 cannot.
    row = _dsv3_row("H100", recompute="full", vpp="4")
    res = validate_row(row)
    assert res.choices["optimizer_offload_fraction"] > 0.0 and "note" not in res.choices
    assert not res.prediction.memory.oom
    old = validate_row(dict(row, framework="Megatron-Core 0.11 (flex dispatcher)"))
    assert "optimizer_offload_fraction" not in old.choices
    assert old.prediction.memory.oom and "note" in old.choices


def test_cli_prints_the_host_share_and_refuses_a_lone_offload_flag(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from starfabric.cli import app

    launch = "torchrun --nproc_per_node 8 --nnodes 2 " + CMD.replace(
        "--global-batch-size 8", "--global-batch-size 64"
    )
    good = tmp_path / "train.sh"
    good.write_text(launch + "--use-precision-aware-optimizer --optimizer-cpu-offload\n")
    run = CliRunner().invoke(app, ["astral", "seer", "predict", str(good), "--gpu", "H100"])
    assert run.exit_code == 0, run.output
    assert "optimizer offloaded to host memory (CPU Adam)" in run.output
    bad = tmp_path / "bad.sh"
    bad.write_text(launch + "--optimizer-cpu-offload\n")
    run = CliRunner().invoke(app, ["astral", "seer", "predict", str(bad), "--gpu", "H100"])
    assert run.exit_code == 2 and "Traceback" not in run.output
    assert "--use-precision-aware-optimizer" in run.output


def test_bf16_moments_do_not_apply_under_the_offload() -> None:
    # The offload branch of Megatron's optimizer factory passes no moment dtypes.
    with pytest.raises(StarfabricError, match="BF16 moments"):
        predict(make_job(DSV3, {**EX, "optimizer_offload_fraction": 0.5,
                                "optimizer_moments": "bf16"}, SYS))  # fmt: skip
    ex = parse_megatron_command(
        CMD + "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 "
        "--optimizer-cpu-offload"
    )["execution"]
    assert "optimizer_moments" not in ex and ex["optimizer_offload_fraction"] == 1.0


def test_a_row_that_states_the_offload_reads_fraction_one_with_fp32_moments() -> None:
    row = _dsv3_row("H100", notes="--optimizer-cpu-offload; BF16 optimizer states")
    res = validate_row(row)
    assert res.choices["optimizer_offload_fraction"] == 1.0
    assert res.prediction.job.execution.optimizer_moments == "fp32"
