"""Megatron-Core's unfused RoPE / SwiGLU paths and the other recounted launches (host_ops),
and which runs take them (bridge_recipe): counts itemized from the core_v0.17.1 code paths."""

from __future__ import annotations

import csv
import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.bridge_recipe import recipe_fusions, recipe_name
from starfabric.astral.seer.host_ops import LAUNCHES, LayerLaunchSpec, layer_launches
from starfabric.astral.seer.host_segments import launches_by_module
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.validate import bundled_csv, row_setup

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"

# rope_utils._apply_rotary_pos_emb_bshd, one tensor, rotary_percent 1, mscale 1.0
ROPE_FWD = ("cos", "cos*mscale", "cos.to", "sin", "sin*mscale", "sin.to", "t*cos", "neg",
            "cat(-x2,x1)", "*sin", "add", "cat(t,t_pass)")  # fmt: skip
# t[..., :rot_dim] at full width is the tensor itself (PyTorch applySlice), no slice node
ROPE_BWD = ("grad*sin", "neg", "chunk cat", "grad*cos", "grad add",
            "t_pass slice_backward zeros", "slice grads add")  # fmt: skip
# TEGroupedMLP.bias_act_func without bias_activation_fusion
SWIGLU_FWD = ("silu", "x_linear + glu_linear_offset", "glu mul", "* permuted_probs")
SWIGLU_BWD = ("grad*probs", "grad*act", "sum to probs shape", "glu mul a", "glu mul b",
              "silu_backward", "chunk cat")  # fmt: skip
WEIGHTED_SWIGLU_FUSED = (1, 2)  # weighted_bias_swiglu_impl: one kernel; backward input + probs
MLP_SWIGLU_FWD = ("silu", "x_linear + glu_linear_offset", "glu mul")
MLP_SWIGLU_BWD = ("glu mul a", "glu mul b", "silu_backward", "chunk cat")
QKV_GATHER_FWD = ("all_gather_into_tensor", "cat along last dim")
QKV_GATHER_BWD = ("cat of last-dim splits", "reduce_scatter", "query slice zeros",
                  "query slice copy", "mixed_qkv slice zeros", "mixed_qkv slice copy")  # fmt: skip


def test_table_entries_are_the_itemized_code_paths() -> None:
    assert LAUNCHES["rope_unfused"].fwd == 2 * (len(ROPE_FWD) - 1)  # q and k, minus TE's kernel
    assert LAUNCHES["rope_unfused"].bwd == 2 * (len(ROPE_BWD) - 1)
    # MLA de-interleaves each part first: cat(t[..., 0::2], t[..., 1::2]); backward two strided
    # slice_backward (zeros + copy each) and their add
    assert LAUNCHES["mla_rope_unfused"].fwd == 2 * (len(ROPE_FWD) + 1 - 1)
    assert LAUNCHES["mla_rope_unfused"].bwd == 2 * (len(ROPE_BWD) + 5 - 1)
    assert LAUNCHES["swiglu_unfused"].fwd == len(SWIGLU_FWD) - WEIGHTED_SWIGLU_FUSED[0]
    assert LAUNCHES["swiglu_unfused"].bwd == len(SWIGLU_BWD) - WEIGHTED_SWIGLU_FUSED[1]
    assert LAUNCHES["mlp_swiglu_unfused"].fwd == len(MLP_SWIGLU_FWD) - 1
    assert LAUNCHES["mlp_swiglu_unfused"].bwd == len(MLP_SWIGLU_BWD) - 1
    assert (LAUNCHES["qkv_gather"].fwd, LAUNCHES["qkv_gather"].bwd) == (
        len(QKV_GATHER_FWD), len(QKV_GATHER_BWD)
    )  # fmt: skip
    # the DDP hook's main_grad.add_: input + pre-MLP norm, q + k norm, router weight
    assert [LAUNCHES[k].bwd for k in ("grad_adds_attention", "grad_adds_qk_norm",
                                      "grad_adds_router")] == [2, 2, 1]  # fmt: skip
    assert all(LAUNCHES[k].fwd == 0 for k in LAUNCHES if k.startswith("grad_adds"))


def test_aws_qwen3_layer_by_hand() -> None:
    """Qwen3-30B-A3B at TP 8 (4 KV heads), EP 16 (8 local experts), a Bridge recipe run."""
    qwen3 = LayerLaunchSpec(True, dispatcher="alltoall", local_experts=8, qk_norm=True)
    before = layer_launches(qwen3)
    after = layer_launches(replace(qwen3, rope_fused=False, swiglu_fused=False, qkv_gather=True))
    assert (after.fwd - before.fwd, after.bwd - before.bwd) == (22 + 3 + 2, 12 + 5 + 6)
    assert (after.fwd, after.bwd) == (126, 119)


_AXES = (("alltoall", "deepep"), (1, 8), (0, 1), *([(False, True)] * 6))


@pytest.mark.parametrize(
    ("dispatcher", "local", "shared", "graphs", "mla", "qk", "rope", "swiglu", "gather"),
    [c for c in itertools.product(*_AXES) if not (c[4] and c[5])],  # MLA has its own norms
)
def test_segment_modules_sum_to_the_layer(
    dispatcher: str, local: int, shared: int, graphs: bool, mla: bool, qk: bool,
    rope: bool, swiglu: bool, gather: bool,
) -> None:  # fmt: skip
    base_spec = LayerLaunchSpec(
        True, dispatcher=dispatcher, local_experts=local, shared_experts=shared,
        cuda_graphs=graphs, mla=mla, qk_norm=qk,
    )  # fmt: skip
    spec = replace(base_spec, rope_fused=rope, swiglu_fused=swiglu, qkv_gather=gather)
    n = layer_launches(spec)
    by = launches_by_module(spec)
    assert sum(by.values()) == n.fwd
    if graphs:  # attention's extras are captured with it
        base = launches_by_module(base_spec)
        assert by["attention"] == base["attention"]


AWS_FW = (
    "Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1 (NeMo 26.04.01 image), MoE dispatcher alltoall"
)


@pytest.mark.parametrize(
    ("framework", "texts", "expect"),
    [
        (
            AWS_FW,
            ["HF config; Megatron-Bridge recipe qwen3_30b_a3b_pretrain_config"],
            (False, False),
        ),
        (AWS_FW, ["MLA: q_lora 1536; Megatron-Bridge deepseek_v3 recipe (L=61)"], (False, True)),
        (AWS_FW, ["qwen3_30b_a3b_pretrain_config_h100 via scripts/performance"], (True, True)),
        (AWS_FW, ["no recipe named here"], (True, True)),
        # Megatron-Bridge v0.4.2's llama_bridge.py sets both fusions; kimi_bridge.py SwiGLU's
        (AWS_FW, ["llama3_70b_pretrain_config"], (True, True)),
        (AWS_FW, ["Megatron-Bridge llama31_405b recipe"], (True, True)),
        (AWS_FW, ["kimi_k2_pretrain_config"], (False, True)),
        (AWS_FW, ["moonlight_16b recipe"], (False, True)),
        # a numeric-format recipe is not a model recipe
        (AWS_FW, ["Llama3 8B with the MXFP8 recipe"], (True, True)),
        (AWS_FW, ["fp8 recipe: blockwise; nvfp4 recipe in the second arm"], (True, True)),
        (AWS_FW, ["qwen3_30b_a3b_pretrain_config, FP8 recipe tensorwise"], (False, False)),
        # negated mentions (statements.negated_at)
        (
            AWS_FW,
            ["qwen3_30b_a3b_pretrain_config, not the scripts/performance configs"],
            (False, False),
        ),
        (AWS_FW, ["qwen3_30b_a3b recipe; without performance scripts"], (False, False)),
        ("NeMo 2.0 (not Megatron-Bridge)", ["qwen3_30b_a3b_pretrain_config"], (True, True)),
        (AWS_FW, ["own config, not the deepseek_v3 recipe"], (True, True)),
        (
            "Megatron-Bridge 25.09",
            ["deepseek_v3 recipe", "docs: Megatron-Bridge performance summary, H100 table"],
            (True, True),
        ),
        ("Megatron-Bridge", ["qwen3_235b_a22b recipe; performance-summary.html"], (True, True)),
        ("Megatron-Core 0.14 (Megatron-LM)", ["qwen3_30b_a3b_pretrain_config"], (True, True)),
        ("NeMo 2.0", [None, ""], (True, True)),
    ],
)
def test_which_runs_keep_the_fusions_off(
    framework: str, texts: list[str | None], expect: tuple[bool, bool]
) -> None:
    assert recipe_fusions(framework, texts) == expect


def test_a_row_citing_a_performance_summary_keeps_the_fusions_on() -> None:
    """validate reads the citation cell too: a row whose notes name its recipe but whose source
    is a Megatron-Bridge performance summary ran the performance scripts (bridge_recipe)."""
    rows = {r["row_id"]: r for r in _rows(DATA / "development_runs_2.csv")}
    row = dict(rows["AWSDSV3-MB1"])
    assert row_setup(row).execution["rope_fusion"] is False
    row["citation"] = "Megatron-Bridge performance summary (docs, H100 table, DeepSeek-V3 row)"
    assert row_setup(row).execution["rope_fusion"] is True


def test_recipe_name_reads_both_spellings() -> None:
    assert recipe_name(["Megatron-Bridge recipe qwen3_235b_a22b_pretrain_config"]) == (
        "qwen3_235b_a22b"
    )  # fmt: skip
    assert recipe_name(["the deepseek_v3 recipe"]) == "deepseek_v3"
    assert recipe_name(["ZeRO stage (recipe default)", None]) is None
    # the performance scripts' configs (`<recipe>_pretrain_config_<gpu>`) are not recipes
    assert recipe_name(["qwen3_30b_a3b_pretrain_config_h100"]) is None


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


TEXTS = ("model_notes", "notes", "citation")  # the cells validate hands bridge_recipe


def test_only_the_bridge_recipe_rows_read_unfused() -> None:
    """Of the three sets, the 15 AWS Megatron-Bridge rows (which name their recipe) are the
    only ones read with the fusions off; every other row keeps Megatron-LM's defaults."""
    off = []
    for path in (bundled_csv(), DATA / "development_runs.csv", DATA / "development_runs_2.csv"):
        for row in _rows(path):
            if row.get("row_id", "").startswith("#"):
                continue
            if not recipe_fusions(row.get("framework"), (row.get(k) for k in TEXTS))[0]:
                off.append(row["row_id"])
    assert len(off) == 15 and all(r.startswith("AWS") for r in off)
    aws = {r["row_id"]: r for r in _rows(DATA / "development_runs_2.csv") if r["row_id"] in off}
    ex = row_setup(aws["AWSQ30-EP16-MB1"]).execution
    assert ex["rope_fusion"] is False and ex["swiglu_fusion"] is False
    ex = row_setup(aws["AWSDSV3-MB1"]).execution
    assert ex["rope_fusion"] is False and ex["swiglu_fusion"] is True


def test_qwen3_rows_carry_their_qk_norm() -> None:
    """Qwen3's attention normalizes q and k (HF model_type qwen3_moe, as hf_config reads the
    bundled config): rows naming Qwen3 are read with it, Qwen2.5 / Qwen3.5 rows are not."""
    from starfabric.astral.seer.model import load_model
    from starfabric.astral.seer.validate import QK_NORM_FAMILY

    assert load_model("qwen3-235b-a22b").qk_norm
    rows = {r["row_id"]: r for r in _rows(DATA / "development_runs_2.csv")}
    assert row_setup(rows["AWSQ30-EP16-MB1"]).model.qk_norm
    assert row_setup(rows["MZQ3-05"]).model.qk_norm
    assert [bool(QK_NORM_FAMILY.match(n)) for n in ("Qwen3-30B-A3B", "Qwen2.5-32B", "Qwen3.5-27B")] == [
        True, False, False
    ]  # fmt: skip


MOE_CMD = """torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py \\
  --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --sequence-parallel \\
  --expert-model-parallel-size 16 --num-experts 128 --moe-router-topk 8 \\
  --moe-ffn-hidden-size 768 --moe-token-dispatcher-type alltoall --moe-grouped-gemm \\
  --num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 \\
  --group-query-attention --num-query-groups 4 --kv-channels 128 --qk-layernorm \\
  --seq-length 4096 --micro-batch-size 1 --global-batch-size 256 --swiglu \\
  --normalization RMSNorm --disable-bias-linear --position-embedding-type rope --bf16 \\
  --use-distributed-optimizer --vocab-size 151936 --recompute-granularity full \\
  --recompute-method uniform --recompute-num-layers 1
"""


def test_launcher_flags_turn_the_fusions_off_and_cost_host_time() -> None:
    fused = parse_megatron_command(MOE_CMD)
    unfused = parse_megatron_command(MOE_CMD + " --no-rope-fusion --no-bias-swiglu-fusion")
    assert "rope_fusion" not in fused["execution"]
    assert unfused["execution"]["rope_fusion"] is False
    assert unfused["execution"]["swiglu_fusion"] is False
    sy = {"gpu": "H100", "gpus": 64, "gpus_per_node": 8}
    t0 = predict(make_job(fused["model"], fused["execution"], sy)).iteration_s
    t1 = predict(make_job(unfused["model"], unfused["execution"], sy)).iteration_s
    assert t1 > t0  # micro-batch 1 at TP 8: the MoE layers wait for a host-bound forward


GPT_CMD = """torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \\
  --tensor-model-parallel-size 8 --num-layers 24 --hidden-size 2048 \\
  --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 \\
  --micro-batch-size 1 --global-batch-size 8 --bf16 --vocab-size 50304
"""


def test_no_rope_fusion_costs_nothing_without_rope() -> None:
    """GPT-3 launch lines pass --no-rope-fusion with learned absolute positions
    (--position-embedding-type learned_absolute, Megatron's default): no RoPE runs, so the
    unfused RoPE launches are not counted."""
    from starfabric.astral.seer.parallel import resolve_layout
    from starfabric.astral.seer.schedule import piece_host_s

    hosts = []
    for extra in ("", " --no-rope-fusion"):
        cmd = parse_megatron_command(GPT_CMD + extra)
        job = make_job(cmd["model"], cmd["execution"], {"gpu": "H100", "gpus": 8})
        assert job.model.learned_pos_emb
        lay = resolve_layout(job.model, job.execution, job.system)
        hosts.append(piece_host_s(job.model, job.execution, lay, False))
    assert hosts[0] == hosts[1]
    # with RoPE the same flag does cost launches
    rope = parse_megatron_command(GPT_CMD + " --position-embedding-type rope --no-rope-fusion")
    job = make_job(rope["model"], rope["execution"], {"gpu": "H100", "gpus": 8})
    lay = resolve_layout(job.model, job.execution, job.system)
    assert piece_host_s(job.model, job.execution, lay, False)[0] > hosts[0][0]


def test_no_bias_swiglu_fusion_costs_nothing_on_a_gelu_mlp() -> None:
    """Megatron-LM's arguments.py sets bias_activation_fusion from --no-bias-swiglu-fusion only
    with --swiglu (from --no-bias-gelu-fusion otherwise): on a GELU model the flag changes no
    launch."""
    from starfabric.astral.seer.parallel import resolve_layout
    from starfabric.astral.seer.schedule import piece_host_s

    hosts = []
    for extra in ("", " --no-bias-swiglu-fusion"):
        cmd = parse_megatron_command(GPT_CMD + extra)
        job = make_job(cmd["model"], cmd["execution"], {"gpu": "H100", "gpus": 8})
        assert job.model.activation == "gelu"
        lay = resolve_layout(job.model, job.execution, job.system)
        hosts.append(piece_host_s(job.model, job.execution, lay, False))
    assert hosts[0] == hosts[1]
