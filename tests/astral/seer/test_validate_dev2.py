"""Seer on the second development set (tests/data/published_runs/development_runs_2.csv: long
context with CP, MoE with cross-host EP on Hopper/Blackwell, large A100 3D-parallel runs),
the error per mechanism class, unverified parallel degrees, and the mechanism models."""

from pathlib import Path

import pytest

from starfabric.astral.seer.classes import classes_of, generation, per_class, scale_bucket
from starfabric.astral.seer.comm import place_group
from starfabric.astral.seer.degrees import degree_combos
from starfabric.astral.seer.validate import read_rows, summary, validate_all, validate_row

DATA = Path(__file__).parents[2] / "data" / "published_runs"
DEV1 = DATA / "development_runs.csv"
DEV2 = DATA / "development_runs_2.csv"


@pytest.fixture(scope="module")
def dev1_rows() -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in read_rows(DEV1)}


@pytest.fixture(scope="module")
def dev2_rows() -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in read_rows(DEV2)}


# ---- error per mechanism class -------------------------------------------------------------


def test_generation_and_scale_buckets() -> None:
    assert generation("A100-SXM-80GB") == "Ampere"
    assert generation("H800") == "Hopper"
    assert generation("GB200") == "Blackwell"
    assert generation("MI300X") == "other"
    assert [scale_bucket(g) for g in (8, 64, 65, 512, 2048, 2049)] == [
        "<=64 GPUs", "<=64 GPUs", "65-512 GPUs", "65-512 GPUs", "513-2048 GPUs", ">2048 GPUs",
    ]  # fmt: skip


def test_classes_are_read_from_the_predicted_layout(dev1_rows) -> None:
    ds = validate_row(dev1_rows["DSV3-01"])  # EP 64 over 8-GPU hosts
    assert classes_of(ds.prediction) == {
        "arch": "MoE", "context_parallel": "no CP", "expert_parallel": "EP across hosts",
        "gpu_generation": "Hopper", "scale": "513-2048 GPUs",
    }  # fmt: skip
    l3 = validate_row(dev1_rows["L3-T4-3"])  # CP 16 at 128K
    assert classes_of(l3.prediction)["context_parallel"] == "CP>1"


def test_ep_over_nvl72_trays_is_its_own_class(dev2_rows) -> None:
    # MCGB-L12: DeepSeek-V3 EP 32 on GB200 NVL72 (4-GPU trays, one 72-GPU NVLink domain): the
    # all-to-all crosses trays but never the scale-out NICs; on 8-GPU HGX hosts the same EP
    # leaves over InfiniBand.
    gb = validate_row(dev2_rows["MCGB-L12"])
    assert gb.prediction.layout.gpus_per_node == 4
    assert classes_of(gb.prediction)["expert_parallel"] == "EP across hosts in one NVLink domain"
    aws = validate_row(dev2_rows["AWSDSV3-MB1"])  # EP over EFA between p5 hosts
    assert classes_of(aws.prediction)["expert_parallel"] == "EP across hosts"


def test_per_class_errors_partition_the_rows(dev1_rows) -> None:
    res = [validate_row(dev1_rows[k]) for k in ("DSV3-01", "N21-T2-01", "NEMO2407-11")]
    per = per_class(res)
    for by in per.values():  # every dimension counts every row once
        assert sum(st["rows"] for st in by.values()) == 3
    assert per["arch"]["MoE"]["rows"] == 1
    assert per["gpu_generation"]["Ampere"]["max_abs_error"] == pytest.approx(abs(res[1].error))
    s = summary(res)
    assert s["per_class"] == per and s["rows"][0]["classes"]["arch"] == "MoE"


def test_validate_cli_prints_the_class_table(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from starfabric.cli import app

    out = tmp_path / "v.json"
    res = CliRunner().invoke(app, ["astral", "seer", "validate", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "error per mechanism class" in res.output and "gpu_generation" in res.output
    assert set(json.loads(out.read_text())["per_class"]) >= {"arch", "scale", "context_parallel"}


# ---- unverified parallel degrees -----------------------------------------------------------


def test_unverified_degrees_are_chosen_and_printed(dev1_rows) -> None:
    row = dict(dev1_rows["DSV3-01"], pp="UNVERIFIED", ep="UNVERIFIED (EP across nodes)")
    res = validate_row(row)
    assert res.choices["pp"].startswith("16 (unverified")  # the published layout is fastest
    assert res.choices["ep"].startswith("64 (unverified")
    assert not res.prediction.memory.oom
    row = dict(dev1_rows["N21-T2-04"], pp="UNVERIFIED")
    res = validate_row(row)
    assert "pp" in res.choices and 560 % int(res.choices["pp"].split()[0]) == 0


def test_stated_degrees_are_not_searched(dev1_rows) -> None:
    res = validate_row(dev1_rows["NEMO2407-12"])
    assert not {"tp", "pp", "cp", "ep"} & set(res.choices)


def test_degree_combos_respect_megatron_constraints(dev1_rows) -> None:
    from starfabric.astral.seer.validate import row_model

    model = row_model(dev1_rows["DSV3-01"])
    ex = {"tp": None, "pp": 16, "cp": 1, "ep": None, "seq_len": 4096, "global_batch": 15360}
    combos = degree_combos(model, ex, 2048, 8, batch_exact=True)
    assert combos
    for c in combos:
        dp = 2048 // (c["tp"] * c["pp"] * c["cp"])
        assert c["pp"] == 16 and 2048 % (c["tp"] * 16) == 0 and 15360 % dp == 0
        assert model.moe_experts % c["ep"] == 0 and (c["tp"] * dp) % c["ep"] == 0


# ---- the second development set ------------------------------------------------------------

DEV2_MEAN_TARGET = 0.10
"""The issue's mean |error| target on the second development set."""
DEV2_MAX_TARGET = 0.25
"""The issue's max |error| target on the second development set."""


@pytest.fixture(scope="module")
def dev2():
    if not DEV2.exists():
        pytest.skip("development_runs_2.csv is being gathered (issue 32, helper 32d)")
    return validate_all(DEV2)


def test_dev2_rows_read_and_refusals_name_why(dev2) -> None:
    done, failed = dev2
    rows = read_rows(DEV2)
    assert len(rows) >= 60
    assert len(done) >= len(rows) - 2, failed
    for rid, why in failed:
        assert "undefined" in why or why.startswith("excluded: "), (rid, why)
    excluded = summary(*dev2)["excluded"]
    # Llama-4-Scout on GB200 (TorchTitan docs/mxfp8.md): the configuration as published cannot
    # run (local batch 10 x 8K without checkpointing on 186 GB; 512 vs 256 GPUs).
    assert [e["row_id"] for e in excluded] == ["TTSCOUT-01", "TTSCOUT-02"]
    assert all("186 GB" in e["reason"] for e in excluded)
    assert not summary(*dev2)["not_predicted"]


def test_an_excluded_row_needs_a_reason_and_is_listed_not_predicted(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from starfabric.astral.seer.validate import excluded_reason
    from starfabric.cli import app
    from starfabric.errors import DataError

    assert excluded_reason({"verification": "VERIFIED_PRIMARY(table)"}) is None
    assert excluded_reason({"verification": "EXCLUDED: not steady state"}) == "not steady state"
    with pytest.raises(DataError, match="gives no reason"):
        excluded_reason({"row_id": "X", "verification": "EXCLUDED"})
    rows = read_rows(DEV2)[:3]
    rows[1] = dict(rows[1], verification="EXCLUDED: a warm-up step, not steady state")
    src = tmp_path / "runs.csv"
    import csv

    with src.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "v.json"
    res = CliRunner().invoke(app, ["astral", "seer", "validate", "--csv", str(src),
                                   "--json", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "EXCLUDED" in res.output and "a warm-up step" in res.output
    assert "predicted 2 of 3 rows (1 EXCLUDED" in res.output
    doc = json.loads(out.read_text())
    assert doc["excluded"] == [{"row_id": rows[1]["row_id"],
                                "reason": "a warm-up step, not steady state"}]  # fmt: skip
    assert len(doc["rows"]) == 2 and doc["not_predicted"] == []


DEV2_MEAN_NOW = 0.0985
"""What this revision reaches on the 131 compared rows of the second development set (9.79%;
2 Llama-4-Scout rows EXCLUDED): sessions 13-20's mechanisms. Session 16 added six states of
Megatron-Core's DeepSeek-V3 GB200 optimization ladder (its five host-bound early states are 27-33%
too fast); session 17 added five Model Zoo Qwen3-235B rows on GB200/GB300; session 18 priced
FlashAttention-2 on Blackwell from a measured training loop (10.62% -> 10.48%); session 19 priced
cuDNN's fused attention at its measured in-training rate, HybridEP at its kernel-only rate,
TorchTitan's per-op selective recompute, its own SDPA order and its grouped expert GEMMs
(10.49%); session 20 transcribed the EFA fabric StarCoder's launch script and Falcon-180B's card
state (10.56%), priced Megatron's pre-2022-10 FP32 parameter gather (StarCoder), TransformerEngine's
CP ring merges (10.48%) and ATen's BF16 atomic scatters of TorchTitan's DeepEP unpermute at their
B200-measured rate (9.79%). A regression bound; the margin to the issue's 10% is thin."""
DEV2_CP_MEAN_NOW = 0.124
"""This revision's mean on the CP>1 rows (12.3% over 31; 12.6% before session 20): a regression
bound."""
DEV2_MAX_NOW = 0.39
"""This revision's max (38.6%, XTSP-10: XTuner's Llama-2-70B at 32 A100s, contradicted by its own
twins; then MPF-T5-04 -35%, the MoE Parallel Folding paper's 128K context-scaling row, whose FLOP
formula is not stated): a regression bound."""


def test_dev2_error_figures_do_not_regress(dev2) -> None:
    s = summary(*dev2)
    assert s["mean_abs_error"] <= DEV2_MEAN_NOW
    assert s["max_abs_error"] <= DEV2_MAX_NOW
    assert s["per_class"]["context_parallel"]["CP>1"]["mean_abs_error"] <= DEV2_CP_MEAN_NOW


def test_dev2_mean_error_meets_the_issue_target(dev2) -> None:
    assert summary(*dev2)["mean_abs_error"] <= DEV2_MEAN_TARGET


@pytest.mark.xfail(
    strict=True, reason="issue 32 target not met yet: max 38.6% (13 rows > 25%, sessions 20-23)"
)
def test_dev2_max_error_meets_the_issue_target(dev2) -> None:
    assert summary(*dev2)["max_abs_error"] <= DEV2_MAX_TARGET


def test_the_dispatcher_the_framework_field_names_wins_over_arms_the_notes_mention() -> None:
    from starfabric.astral.seer.validate import _dispatchers

    fw = "Megatron-Core 0.17.1, MoE dispatcher alltoall (NCCL all-to-all over EFA)"
    notes = "the same table has DeepEP+UCCL and DeepEP+NVSHMEM arms (slower, not used)"
    assert _dispatchers({"framework": fw, "notes": notes}, {}) == ["alltoall"]
    # a row that names DeepEP (framework or notes) and no dispatcher in its framework field
    assert _dispatchers({"framework": "TorchTitan; DeepEP dispatcher"}, {}) == ["deepep"]
    assert _dispatchers({"framework": "Megatron-Core", "notes": "flex dispatcher"}, {}) == [
        "deepep"
    ]


def test_ep_class_is_the_placement_the_cost_model_priced(dev2) -> None:
    # The class names what Seer modelled: "EP within a host" exactly when comm.layout_groups
    # puts the expert-parallel group (members ETP ranks apart) on one host. With ETP 1 and
    # TP 2, EP 8 is 8 consecutive ranks, one 8-GPU host (MoE Parallel Folding's MPF-T4-04),
    # although EP x ETP x TP would reach 16 GPUs.
    results, _ = dev2
    within = 0
    for r in results:
        lay = r.prediction.layout
        if not r.prediction.job.model.is_moe or lay.ep == 1:
            continue
        one_host = place_group(lay.ep, lay.etp, lay.gpus_per_node).nodes == 1
        label = classes_of(r.prediction)["expert_parallel"]
        assert (label == "EP within a host") == one_host, (r.row_id, label)
        within += one_host
    mpf = next(r for r in results if r.row_id == "MPF-T4-04")
    assert (mpf.prediction.layout.tp, mpf.prediction.layout.ep) == (2, 8)
    assert classes_of(mpf.prediction)["expert_parallel"] == "EP within a host"
    assert within >= 20


def test_dev2_covers_the_three_mechanisms(dev2) -> None:
    per = summary(*dev2)["per_class"]
    assert per["context_parallel"]["CP>1"]["rows"] >= 10
    assert per["expert_parallel"]["EP across hosts"]["rows"] >= 10
    assert per["gpu_generation"]["Ampere"]["rows"] >= 10
    # 26.4% with the AWS EFA rows (NCCL all-to-all over EFA runs ~8x below Seer's formula)
    assert per["expert_parallel"]["EP across hosts"]["mean_abs_error"] <= 0.27
    # Blackwell: GEMM fraction from measured B200 GEMMs, cuDNN attention from PyTorch 2.11
    # (35.3% over 18 rows, 12 of them the AWS EFA rows; the 6 TorchTitan B200 rows ~9%)
    assert per["gpu_generation"]["Blackwell"]["mean_abs_error"] <= 0.36
    done, _ = dev2
    # No published run is called out of memory (the Llama-4-Scout rows whose published
    # configuration cannot fit are EXCLUDED with that reason).
    assert not {r.row_id for r in done if "note" in r.choices}


# ---- long context: fused attention vs sequence length, the CP ring ---------------------------


@pytest.mark.parametrize(
    ("seq", "fwd_causal", "bwd"),
    [(1024, 410, 408), (2048, 484, 465), (4096, 518, 499), (8192, 529, 518),
     (16384, 539, 516)],
)  # fmt: skip
def test_flash_time_follows_the_published_cudnn_curves(seq: int, fwd_causal: float, bwd: float):
    """H100 cuDNN fused attention, head dim 128 (FlashAttention-3 paper, Figures 5-6)."""
    import numpy as np

    from starfabric.astral.hardware import get_gpu
    from starfabric.astral.seer.efficiency import efficiency_for, flash_time

    gpu = get_gpu("H100")
    eff, peak = efficiency_for(gpu), gpu.tflops("bf16") * 1e12
    flops = np.array([1e13])

    def rate(keys: float, backward: bool) -> float:
        return float(flops[0] / flash_time(flops, np.array([keys]), peak, eff, backward)[0])

    # The shape follows the benchmark (relative to 16k); the level is the measured in-training
    # factor (cost.FUSED_ATTENTION_IN_TRAINING of the isolated kernel).
    from starfabric.astral.seer.cost import FUSED_ATTENTION_IN_TRAINING

    assert rate(seq / 2, False) / rate(8192, False) == pytest.approx(fwd_causal / 539, rel=0.05)
    assert rate(seq, True) / rate(16384, True) == pytest.approx(bwd / 516, rel=0.05)
    assert rate(8192, False) / 1e12 == pytest.approx(FUSED_ATTENTION_IN_TRAINING * 539, rel=0.05)


def _long_context(seq: int, cp: int, tp: int, gpus: int, nic: str = "400G"):
    from starfabric.astral.seer import load_model, make_job, predict

    ex = {"global_batch": 4 * 2**20 // seq, "seq_len": seq, "precision": "bf16", "tp": tp,
          "pp": 1, "cp": cp, "micro_batch": 1, "recompute": "none", "sp": True, "zero": 1}  # fmt: skip
    sysm = {"gpu": "H100", "gpus": gpus, "gpus_per_node": 8, "nic_bandwidth": nic}
    return predict(make_job(load_model("llama-3.1-8b"), ex, sysm))


def test_attention_throughput_holds_up_at_long_context() -> None:
    """Llama-3.1-8B at 4M tokens per batch: from 16K to 1M tokens per sequence the attention
    kernels run longer key blocks, so per-GPU throughput (model FLOPs) stays within the
    kernels' saturated rate instead of collapsing; the CP ring hides behind attention."""
    short, long_ = _long_context(16384, 1, 2, 16), _long_context(2**20, 32, 8, 1024)
    # At 1M tokens attention is ~97% of the work: throughput falls to the attention kernels'
    # rate (below the GEMMs'), not further; the CP ring hides behind attention.
    assert long_.tflops_per_gpu("hardware") > 0.75 * short.tflops_per_gpu("hardware")
    assert long_.breakdown["cp"] < 0.03 * long_.iteration_s
    assert long_.breakdown["compute"] > 0.95 * long_.iteration_s


def test_cp_ring_is_exposed_when_a_step_outruns_its_attention() -> None:
    """At a short sequence per rank, the per-step KV exchange over a slow NIC exceeds the
    per-step block attention and shows in the breakdown; at long sequences it does not."""
    slow = _long_context(32768, 8, 8, 512, nic="25G")
    fast = _long_context(32768, 8, 8, 512)
    assert slow.breakdown["cp"] > 5 * fast.breakdown["cp"]


# ---- MoE with EP across hosts ----------------------------------------------------------------


def test_distinct_nodes_is_the_hypergeometric_expectation_and_respects_the_node_limit() -> None:
    import random

    from starfabric.astral.seer.expert_comm import distinct_nodes, remote_copy_fraction

    rng = random.Random(7)
    experts, k, nodes = 256, 8, 8
    sims = [len({e // (experts // nodes) for e in rng.sample(range(experts), k)})
            for _ in range(20000)]  # fmt: skip
    assert distinct_nodes(experts, k, nodes) == pytest.approx(sum(sims) / len(sims), rel=0.01)
    assert distinct_nodes(experts, k, nodes, max_nodes=4) == 4.0  # DeepSeek-V3 routing
    assert remote_copy_fraction(experts, k, nodes, 4) == pytest.approx(0.5)
    assert remote_copy_fraction(experts, k, 1) == 1.0  # one node: nothing crosses IB


def _dsv3(dispatcher: str, gpu: str = "H100"):
    from starfabric.astral.seer import load_model, make_job, predict
    from starfabric.astral.seer.parallel import uneven_pipeline_layers

    m = load_model("deepseek-v3")
    ex = {"global_batch": 8192, "seq_len": 4096, "precision": "fp8", "tp": 2, "pp": 16,
          "ep": 64, "micro_batch": 1, "recompute": "none", "moe_dispatcher": dispatcher,
          "pipeline_layers": list(uneven_pipeline_layers(m.layers, 16))}  # fmt: skip
    return predict(make_job(m, ex, {"gpu": gpu, "gpus": 1024, "gpus_per_node": 8}))


def test_deepep_sends_fewer_bytes_over_ib_than_nccl_all_to_all() -> None:
    nccl, deepep = _dsv3("alltoall"), _dsv3("deepep")
    # 8 nodes, top-8 of 256 experts capped at 4 nodes: half the inter-host copies.
    assert deepep.breakdown["ep"] < 0.6 * nccl.breakdown["ep"]
    # The NCCL dispatcher also copies what it receives into local-expert order and back
    # (expert_sort: 4 experts per rank here); DeepEP delivers tokens grouped. Nothing else moves.
    assert deepep.breakdown["compute"] < nccl.breakdown["compute"]
    assert nccl.breakdown["compute"] < 1.05 * deepep.breakdown["compute"]


def test_a_deepseek_run_that_fit_is_not_pushed_to_full_recompute(dev1_rows) -> None:
    """DeepSeek-V3 on 1,024 H100s, PP16 EP64, recompute unstated: Seer tries Megatron-Core's
    recompute-module sets before full recompute, and one of them fits."""
    row = dict(dev1_rows["DSV3-01"], gpu="H100", num_gpus="1024", dp="64",
               recompute="UNVERIFIED", framework="Megatron-Core (2025)", vpp="UNVERIFIED")  # fmt: skip
    res = validate_row(row)
    assert res.choices["recompute"].startswith("selective")
    assert "moe_act" in res.choices["recompute_modules"]
    assert not res.prediction.memory.oom and "note" not in res.choices


def test_overlapped_all_to_all_costs_the_sms_it_occupies(dev1_rows) -> None:
    """DualPipe hides the all-to-all, but the compute under it runs on 112 of 132 SMs."""
    res = validate_row(dev1_rows["DSV3-01"])
    assert res.choices["moe_dispatcher"] == "deepep"
    assert 0 < res.prediction.breakdown["ep"] < 0.1 * res.prediction.breakdown["compute"]


# ---- A100-era clusters ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "per_gpu"),
    [("4 NICs (200 Gb/s each) per node", "100G"), ("4x HDR 200Gb/s per node", "100G"),
     ("4 Omni-Path adapters at 100 Gbps", "50G"), ("8x HDR 200Gb/s", "200G"),
     ("InfiniBand 8x50 GB/s per node (400 Gb/s per GPU)", "400G"),
     ("InfiniBand ~50 GB/s per GPU cross-node", "400G"), ("3.2 Tbps per node", "400G"),
     ("EFA 4x100 Gb/s per node (400 Gb/s per node)", "50G")],
)  # fmt: skip
def test_fewer_nics_than_gpus_share_the_node_rate(text: str, per_gpu: str) -> None:
    from starfabric.astral.seer.validate import _nic

    assert _nic({"interconnect": text, "gpus_per_node": "8"}, "A100-SXM-80GB") == per_gpu


def test_half_the_nics_slow_a_cross_node_pipeline_and_dp(dev1_rows) -> None:
    """A 2021 PTD-P row on 4 instead of 8 HDR NICs per node: PP hand-offs and the DP
    all-reduce (not overlapped in that era's Megatron-LM) take longer; compute does not."""
    row = dev1_rows["N21-T2-06"]
    full = validate_row(row)
    half = validate_row(dict(row, interconnect="4x HDR 200Gb/s per node"))
    assert half.prediction.breakdown["compute"] == pytest.approx(
        full.prediction.breakdown["compute"]
    )
    assert half.prediction.breakdown["dp"] > 1.5 * full.prediction.breakdown["dp"]
    assert half.predicted_iter_s > full.predicted_iter_s


def test_forced_balance_routes_evenly_and_is_read_from_the_row(dev1_rows) -> None:
    from starfabric.astral.seer.validate import row_setup

    row = dict(dev1_rows["DSV3-01"], notes="benchmark with force load balancing")
    assert row_setup(row).execution["moe_load_balance"] == "forced"
    assert "moe_load_balance" not in row_setup(dev1_rows["DSV3-01"]).execution
    drop, forced = _dsv3("deepep"), _dsv3_forced()
    assert forced.breakdown["compute"] < drop.breakdown["compute"]
    assert forced.breakdown["ep"] < drop.breakdown["ep"]


def _dsv3_forced():
    from starfabric.astral.seer import load_model, make_job, predict
    from starfabric.astral.seer.parallel import uneven_pipeline_layers

    m = load_model("deepseek-v3")
    ex = {"global_batch": 8192, "seq_len": 4096, "precision": "fp8", "tp": 2, "pp": 16,
          "ep": 64, "micro_batch": 1, "recompute": "none", "moe_dispatcher": "deepep",
          "moe_load_balance": "forced",
          "pipeline_layers": list(uneven_pipeline_layers(m.layers, 16))}  # fmt: skip
    return predict(make_job(m, ex, {"gpu": "H100", "gpus": 1024, "gpus_per_node": 8}))


def test_that_eras_software_is_what_the_framework_shipped(dev1_rows) -> None:
    """Plain Megatron-LM (2023) ran FlashAttention only behind --use-flash-attn; stacks
    before 2023 checkpointed whole layers or nothing."""
    from starfabric.astral.seer.validate import row_setup

    ms = row_setup(dev1_rows["MS-T2-01"])  # "Megatron-LM" baseline of MegaScale
    assert ms.execution["attention"] == "unfused"
    assert row_setup(dev1_rows["MS-T2-05"]).execution["attention"] == "flash"  # MegaScale
    opt = row_setup(dev1_rows["OPT-01"])  # metaseq 2022, recompute unstated
    assert {tuple(o["recompute"]) for _, o in opt.options} == {("none", "full")}


def test_framework_attention_kernel_and_power_cap_are_read_from_the_row() -> None:
    """TorchTitan runs SDPA's FlashAttention-2 (0.62 of cuDNN on Hopper, FA3 paper); a 500 W
    cap on a 700 W H100 slows compute-bound kernels by (500/700)^(1/3)."""
    from starfabric.astral.seer.validate import row_setup

    rows = {r["row_id"]: r for r in read_rows(DEV2)} if DEV2.exists() else {}
    if "TT24-T13-01" not in rows:
        pytest.skip("development_runs_2.csv is being gathered")
    st = row_setup(rows["TT24-T13-01"])
    assert st.execution["flash_kernel"] == "fa2"
    assert st.system["power_limit_w"] == 500.0
    capped = validate_row(rows["TT24-T13-01"])
    uncapped = validate_row(dict(rows["TT24-T13-01"], gpu="H100-SXM5-80GB"))
    ratio = capped.prediction.breakdown["compute"] / uncapped.prediction.breakdown["compute"]
    assert 1.0 < ratio <= (700 / 500) ** (1 / 3) + 1e-9


def test_nemo_tflops_are_read_with_its_non_causal_formula(dev1_rows) -> None:
    """NeMo's model TFLOP/s count attention as 12*s^2*h per layer (flops_formulas.py): a NeMo
    row given only TFLOP/s converts back to time with that formula, which at long sequence is
    ~2x the causal count."""
    from starfabric.astral.seer import cells
    from starfabric.astral.seer.validate import _convention

    assert cells.flop_convention("NeMo 'Model TFLOP/sec/GPU' (model FLOPs)") == "megatron"
    row = dict(dev1_rows["NEMO2407-11"], tflops_flop_convention="TFLOP/s per GPU as published")
    assert _convention(row) == "megatron"
    assert _convention(dict(row, tflops_flop_convention="6N + causal attention")) == "model"
    long = dict(row, seq_len="131072", global_batch_seqs="32", iter_time_s="",
                derived_iter_time_s="", tokens_per_sec_per_gpu="", tflops_per_gpu="500")  # fmt: skip
    from starfabric.astral.seer.validate import published_iteration_s, row_model

    m = row_model(long)
    t_nemo = published_iteration_s(long, m)
    t_causal = published_iteration_s(dict(long, tflops_flop_convention="6N + causal"), m)
    assert t_nemo > 1.5 * t_causal


def test_a_smaller_memory_sku_has_its_own_hbm_bandwidth() -> None:
    """A100 40GB (HBM2, 1,555 GB/s) is not the 80GB's 2,039 GB/s HBM2e: memory-bound kernels
    of the 2021-22 A100-40GB runs (GLM-130B, BloombergGPT, Falcon-180B) run slower."""
    from starfabric.astral.hardware import get_gpu
    from starfabric.astral.seer.validate import read_rows as rr

    rows = {r["row_id"]: r for r in rr(DEV2)}
    lay = validate_row(rows["GLM130B-01"]).prediction.layout
    assert (lay.gpu.hbm_gib, lay.gpu.hbm_gbps) == (40.0, 1555.0)
    assert get_gpu("A100-SXM-80GB").hbm_gbps == 2039.0  # the catalog row itself is unchanged


@pytest.mark.parametrize(
    ("framework", "cudnn", "kernel"),
    [("TorchTitan (PyTorch nightly 2024-12, FSDP2, torch.compile)", False, "fa2"),
     # PyTorch 2.9 keeps FA2 first, but TorchTitan's own wrapper puts cuDNN first on Blackwell
     # from 2025-05 (torchtitan_sdpa); the row is GB300.
     ("TorchTitan (2025-10; PyTorch 2.9.0, torch.compile; DeepEP dispatcher)", False, "cudnn"),
     ("TorchTitan (2025-26; torch.compile, torchao MXFP8 MoE)", False, "fa2"),  # a span
     ("TorchTitan DistMoE (2026-10; CuTe DSL dist_moe kernels)", True, "cudnn"),
     ("HF accelerate, PyTorch 2.11.0", True, "cudnn")],
)  # fmt: skip
def test_sdpa_defaults_to_cudnn_from_pytorch_2_11(framework: str, cudnn: bool, kernel: str) -> None:
    """SDPA prefers cuDNN on sm90/sm100/sm103 only once the bundled cuDNN passes 9.15 (2.11):
    earlier PyTorch-native rows run FlashAttention-2, later ones cuDNN's kernel — unless the
    stack sets the order itself (TorchTitan's wrapper, torchtitan_sdpa)."""
    from starfabric.astral.seer.validate import row_setup, sdpa_runs_cudnn

    assert sdpa_runs_cudnn(framework) is cudnn
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    st = row_setup(dict(rows["TTDSV3-01"], framework=framework))
    assert st.execution["flash_kernel"] == kernel


def test_hybrid_zero_rows_of_internlm_follow_the_replica_all_reduce(dev2) -> None:
    """InternLM's 1,024-A100 rows shard ZeRO-1 inside each node (zero1=8) on 4 NICs per 8
    GPUs: their gradient shards cross the nodes as all-reduces (parallel.zero_shard). With
    it the source is 7.4% mean (18.0% before), the Ampere class 12.8% (16.7% before)."""
    s = summary(*dev2)
    assert s["per_source"]["INTERNLM_PERF23"]["mean_abs_error"] <= 0.08
    assert s["per_source"]["INTERNLM_PERF23"]["max_abs_error"] <= 0.14
    assert s["per_class"]["gpu_generation"]["Ampere"]["mean_abs_error"] <= 0.13


@pytest.mark.parametrize(
    ("cell", "modules"),
    [
        (
            "selective (layernorm, moe, mla_up_proj, mlp)",
            ("layernorm", "moe", "mla_up_proj", "mlp"),
        ),
        ("selective (core_attn)", ("core_attn",)),
        (
            "modules: layernorm + moe act (--recompute-modules layernorm moe_act)",
            ("layernorm", "moe_act"),
        ),
        ("RMSNorm + MLA up-projections recomputed", ("layernorm", "mla_up_proj")),
        ("selective (attention only)", ("core_attn",)),
    ],
)
def test_recompute_modules_read_from_a_list_of_megatron_names_flag_or_prose(cell, modules) -> None:
    """A bracketed list of Megatron's own module names is read as written (before, its 'moe' and
    'mlp' were dropped and the word 'selective' added core_attn); prose still maps to names."""
    from starfabric.astral.seer.validate import recompute_modules

    assert recompute_modules(cell) == modules
