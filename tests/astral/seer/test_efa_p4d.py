"""First-generation EFA on p4d (efa.py), the FP32 output layer (cost.LOGITS_FP32_RATE) and
Megatron's fused-softmax attention read from a framework cell (validate.SOFTMAX_KERNEL): each
checked against its source's numbers, not against a development row's error."""

import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.comm import collective_time, make_fabric
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.efa import (
    EFA_P4D_ALLREDUCE_BUSBW_GBS,
    EFA_P4D_BUS_FRACTION,
    P4D_NODE_LINE_RATE_GBS,
    efa_bus_fraction,
)
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fabric import Group
from starfabric.astral.seer.ops import backward_of, logits_ops
from starfabric.astral.seer.validate import LOGITS_FP32, _framework

GIB = 2**30


def test_fraction_is_the_mean_of_the_multi_node_measurements() -> None:
    lo, hi = (x / P4D_NODE_LINE_RATE_GBS for x in sorted(EFA_P4D_ALLREDUCE_BUSBW_GBS))
    assert lo <= EFA_P4D_BUS_FRACTION <= hi
    assert abs(EFA_P4D_BUS_FRACTION - 0.614) < 1e-3


@pytest.mark.parametrize("nodes", [3, 4])
def test_formula_all_reduce_on_p4d_reproduces_nccl_tests_busbw(nodes: int) -> None:
    """Differential: the bus-bandwidth formula with the EFA fraction, on nodes x 8 A100 with
    4 x 100 Gb/s per node (50 Gb/s per GPU), gives the busbw nccl-tests measured at 1 GiB
    (NVIDIA/nccl#527: 31.77 GB/s on 3 nodes, 29.61 on 4) within 5%."""
    a100 = efficiency_for(get_gpu("A100"), {})
    efa = efficiency_for(get_gpu("A100"), {"nic_bus_fraction": EFA_P4D_BUS_FRACTION})
    fab = make_fabric(300e9, 50e9 / 8, efa)
    n = 8 * nodes
    t = collective_time("all_reduce", GIB, Group(n, 8), fab)
    busbw = 2 * (n - 1) / n * GIB / t / 1e9
    measured = dict(zip((3, 4), EFA_P4D_ALLREDUCE_BUSBW_GBS, strict=True))[nodes]
    assert busbw == pytest.approx(measured, rel=0.05)
    # The InfiniBand-calibrated default would have claimed ~44 GB/s on the same fabric.
    ib = collective_time("all_reduce", GIB, Group(n, 8), make_fabric(300e9, 50e9 / 8, a100))
    assert 2 * (n - 1) / n * GIB / ib / 1e9 > 1.35 * measured


@pytest.mark.parametrize(
    ("cell", "gpu", "want"),
    [
        ("NVSwitch 600 GB/s intra-node; EFA 4x100 Gb/s per node (400 Gb/s per node)", "A100", True),
        ("32x EFA per node (3.2 Tb/s, 400 Gb/s per GPU)", "H100", False),  # EFA gen 2 on p5
        ("8x HDR 200Gb/s InfiniBand", "A100", False),
        ("default fabric", "A100", False),  # 'efa' inside a word is no EFA
    ],
)
def test_efa_fraction_applies_to_a100_efa_only(cell: str, gpu: str, want: bool) -> None:
    assert (efa_bus_fraction(cell, gpu) is not None) == want


def test_fp32_output_layer_runs_at_the_fp32_rate() -> None:
    """A compute-bound logits GEMM in FP32 takes the BF16/FP32 peak ratio longer on A100
    (312 / 19.5 = 16, datasheet), since PyTorch >= 1.12 does not use TF32 by default."""
    model = load_model("llama-3.1-8b")
    job = {"global_batch": 8, "seq_len": 4096, "tp": 1, "pp": 1, "micro_batch": 1}
    sys_ = {"gpu": "A100", "gpus": 8}
    times = {}
    for prec in ("auto", "fp32"):
        p = predict(make_job("llama-3.1-8b", {**job, "logits_precision": prec}, sys_))
        ex, lay = p.job.execution, p.layout
        ctx = make_context(ex, lay, efficiency_for(lay.gpu, {}))
        fwd = logits_ops(model, ex, lay)
        tabs = (fwd, backward_of(fwd))
        times[prec] = sum(
            float(c.time[[n.startswith("head.logits") for n in t.name]].sum())
            for t, c in ((t, op_costs(t, ctx, backward=i == 1)) for i, t in enumerate(tabs))
        )
    assert times["fp32"] / times["auto"] == pytest.approx(312.0 / 19.5, rel=0.02)
    # Nothing else in the step changes.
    a = predict(make_job("llama-3.1-8b", job, sys_))
    b = predict(make_job("llama-3.1-8b", {**job, "logits_precision": "fp32"}, sys_))
    assert b.iteration_s - a.iteration_s == pytest.approx(times["fp32"] - times["auto"], rel=0.05)


@pytest.mark.parametrize(
    ("cell", "want"),
    [
        ("BF16 mixed (FP32 master weights); LM head (logits before the softmax) in FP32", True),
        ("BF16 mixed (FP32 master weights)", False),
        ("BF16; fp32 softmax in the loss", False),
    ],
)
def test_fp32_output_layer_is_read_only_where_the_precision_cell_states_it(
    cell: str, want: bool
) -> None:
    assert bool(LOGITS_FP32.search(cell)) == want


@pytest.mark.parametrize(
    ("framework", "want"),
    [
        ("AWS SMP + MiCS (2023); attention: Megatron-style masked-causal-softmax fused kernel", "unfused"),
        ("Megatron-DeepSpeed (2023) scale-mask-softmax", "unfused"),
        ("Gigatron (2023; FlashAttention Triton kernels, fused masked softmax elsewhere)", "flash"),
        ("DeepSpeed (2023)", "flash"),
    ],
)  # fmt: skip
def test_fused_softmax_attention_is_read_from_the_framework_cell(framework: str, want: str) -> None:
    assert _framework({"framework": framework})["attention"] == want


def test_a_row_stating_p4d_efa_fp32_head_and_fused_softmax_gets_all_three() -> None:
    """The cells of the BloombergGPT row (transcribed from arXiv 2303.17564 sections 3.3-3.4
    and Training Chronicles C.2) select the three mechanisms; nothing is keyed on the row."""
    from pathlib import Path

    from starfabric.astral.seer.validate import read_rows, row_setup

    csv = Path(__file__).parents[2] / "data/published_runs/development_runs_2.csv"
    row = next(r for r in read_rows(csv) if r["row_id"] == "BBGPT-01")
    st = row_setup(row)
    assert st.system["efficiency"] == {"nic_bus_fraction": EFA_P4D_BUS_FRACTION}
    assert st.execution["logits_precision"] == "fp32"
    assert st.execution["attention"] == "unfused"
    assert st.execution["zero_shard_ranks"] == 128


def test_zero3_with_cp_gathers_over_the_dp_x_cp_group_it_shards_over() -> None:
    """ZeRO-3 with CP (or Ulysses SP) partitions parameters over DP x CP — the memory model's
    shard count — so its gathers and reduce-scatters run on that group, not on DP alone
    (TorchTitan's FSDP mesh dp_shard_cp; DeepSpeed ZeRO-3 over the whole world in XTuner)."""
    from starfabric.astral.seer.comm import layout_groups

    ex = {"global_batch": 8, "seq_len": 32768, "tp": 1, "pp": 1, "cp": 4, "micro_batch": 1,
          "zero": 3, "recompute": "full"}  # fmt: skip
    p = predict(make_job("llama-3.1-8b", ex, {"gpu": "A100", "gpus": 32, "nic_bandwidth": "200G"}))
    g = layout_groups(p.job.execution, p.layout)
    assert (g["fsdp_dp"].size, g["fsdp_dp"].per_node) == (32, 8)  # all 8 GPUs of each node
    assert p.memory.weights == pytest.approx(2.0 * 8.03e9 / 32, rel=0.02)
