import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.seer import load_job, make_job, predict
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.validate import row_setup, validate_row
from starfabric.cli import app
from starfabric.errors import ConfigError

CMD = """torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel \\
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\
  --seq-length 4096 --micro-batch-size 1 --global-batch-size 128 --swiglu \\
  --normalization RMSNorm --disable-bias-linear --untie-embeddings-and-output-weights \\
  --position-embedding-type rope --bf16 --use-distributed-optimizer --overlap-grad-reduce \\
  --vocab-size 32000 --lr 3e-4 --train-iters 1000 --data-path /data/x --attention-dropout 0.0 \\
  --recompute-granularity selective --recompute-modules core_attn layernorm
"""


def test_command_line_becomes_model_execution_and_gpus() -> None:
    spec = parse_megatron_command(CMD)
    m, ex, sy = spec["model"], spec["execution"], spec["system"]
    assert (m["layers"], m["hidden"], m["ffn_hidden"], m["heads"], m["kv_heads"]) == (
        32, 4096, 11008, 32, 32,
    )  # fmt: skip
    assert m["activation"] == "swiglu" and m["norm"] == "rmsnorm" and not m["linear_bias"]
    assert not m["tied_embeddings"] and not m["learned_pos_emb"] and not m["attention_dropout"]
    assert (ex["tp"], ex["pp"], ex["sp"], ex["zero"], ex["precision"]) == (2, 2, True, 1, "bf16")
    assert ex["recompute"] == "selective" and ex["recompute_modules"] == ("core_attn", "layernorm")
    assert ex["overlap_grad_reduce"] and not ex["overlap_param_gather"]
    assert sy == {"gpus_per_node": 8, "gpus": 16}


def test_command_file_predicts_like_the_same_yaml_job(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\n# a launch script\n" + CMD)
    job = load_job(script, {"gpu": "H100"})
    spec = parse_megatron_command(CMD)
    same = make_job(spec["model"], spec["execution"], {"gpu": "H100", "gpus": 16})
    assert predict(job).iteration_s == pytest.approx(predict(same).iteration_s)


@pytest.mark.parametrize(
    ("cmd", "why"),
    [
        (CMD + " --frobnicate 3 --wat", "unknown Megatron flags: --frobnicate --wat"),
        (CMD.replace("--num-layers 32", ""), "lacks --num-layers"),
        (CMD.replace("--bf16", ""), "fp32"),
        ("python train_other.py --num-layers 2", "no Megatron training script"),
        (CMD.replace("--micro-batch-size 1", "--micro-batch-size one"), "--micro-batch-size"),
    ],
)
def test_bad_command_lines_name_the_flag(cmd: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_megatron_command(cmd)


def test_command_without_gpu_count_asks_for_it(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(CMD.replace("--nproc_per_node 8 --nnodes 2 ", ""))
    with pytest.raises(ConfigError, match="--gpus"):
        load_job(script)
    assert load_job(script, {"gpus": 16}).system.gpus == 16


def test_mtp_layers_flag_is_read() -> None:
    spec = parse_megatron_command(CMD.replace("--bf16", "--bf16 --mtp-num-layers 1"))
    assert spec["model"]["mtp_layers"] == 1


# --- Megatron-Core mechanisms from flags (core_v0.17.1 arguments.py / transformer_config.py) ---

MOE = """torchrun --nproc-per-node 8 --nnodes 4 pretrain_gpt.py \\
  --num-layers 8 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16 \\
  --group-query-attention --num-query-groups 4 --kv-channels 128 --vocab-size 32000 \\
  --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 \\
  --global-batch-size 64 --swiglu --normalization RMSNorm --disable-bias-linear \\
  --untie-embeddings-and-output-weights --position-embedding-type rope \\
  --attention-dropout 0.0 --hidden-dropout 0.0 --bf16 --use-distributed-optimizer \\
  --overlap-grad-reduce --overlap-param-gather --overlap-p2p-communication \\
  --num-experts 64 --moe-router-topk 4 --moe-ffn-hidden-size 1024 \\
  --expert-model-parallel-size 16 --moe-grouped-gemm \\
  --moe-token-dispatcher-type alltoall
"""


def _ex(extra: str = "", base: str = MOE) -> dict[str, object]:
    return parse_megatron_command(base + " " + extra)["execution"]


def test_megatron_core_launches_from_the_host_without_graphs() -> None:
    ex = _ex()
    assert ex["host_launches"] is True and ex["cuda_graphs"] is False
    assert ex["moe_dispatcher"] == "alltoall" and "moe_capacity_factor" not in ex
    assert parse_megatron_command(CMD)["execution"]["host_launches"] is True  # dense too


@pytest.mark.parametrize(
    ("flags", "graphs"),
    [
        ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router", True),
        ("--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router attn "
         "moe_preprocess", True),
        ("--external-cuda-graph --cuda-graph-scope attn moe_router", True),
        ("--cuda-graph-impl none", False),
    ],
)  # fmt: skip
def test_cuda_graph_flags(flags: str, graphs: bool) -> None:
    assert _ex(flags)["cuda_graphs"] is graphs


def test_dense_model_graphs_attention_only() -> None:
    dense = CMD + " --cuda-graph-impl transformer_engine --cuda-graph-scope attn"
    assert parse_megatron_command(dense)["execution"]["cuda_graphs"] is True


@pytest.mark.parametrize(
    ("flags", "field", "value"),
    [
        ("--moe-token-dispatcher-type flex", "moe_dispatcher", "deepep"),
        ("--moe-token-dispatcher-type flex --moe-enable-deepep", "moe_dispatcher", "deepep"),
        ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
         "moe_dispatcher", "deepep"),
        ("--moe-expert-capacity-factor 1.25", "moe_capacity_factor", 1.25),
        ("--moe-expert-capacity-factor 1.25", "moe_pad_to_capacity", False),
        ("--moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity",
         "moe_pad_to_capacity", True),
        ("--moe-router-force-load-balancing", "moe_load_balance", "forced"),
        ("--moe-router-fusion", "moe_router_fusion", True),
        ("--overlap-moe-expert-parallel-comm", "ep_comm_overlap", True),
        ("--moe-token-dispatcher-type flex --moe-deepep-num-sms 28", "deepep_num_sms", 28),
        ("--transformer-impl local", "attention", "unfused"),
        ("--fp8-format hybrid --fp8-recipe mxfp8", "precision", "fp8"),
        ("--fp4-format e2m1 --fp4-recipe nvfp4", "precision", "fp8"),
        ("--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16",
         "optimizer_moments", "bf16"),
        ("--num-distributed-optimizer-instances 2", "zero_shard_ranks", 16),
    ],
)  # fmt: skip
def test_mechanism_flags_set_execution_fields(flags: str, field: str, value: object) -> None:
    assert _ex(flags)[field] == value


def test_negative_capacity_factor_is_dropless() -> None:
    assert "moe_capacity_factor" not in _ex("--moe-expert-capacity-factor -1")


def test_unpadded_capacity_waits_for_the_host_padded_does_not() -> None:
    # core_v0.17.1 MoEAlltoAllTokenDispatcher.preprocess: a capacity factor without padding
    # still copies the token counts to the host and waits; drop-and-pad makes them static.
    # A short sequence makes the layers host-bound (3 ms of launches per MoE layer).
    short = MOE.replace("4096", "1024")
    cap = "--moe-expert-capacity-factor 1"
    sy = {"gpu": "H100", "gpus": 32}

    def iteration(flags: str, host: bool = True) -> float:
        spec = parse_megatron_command(short + " " + flags)
        ex = dict(spec["execution"], host_launches=host)
        return predict(make_job(spec["model"], ex, sy)).iteration_s

    padded = iteration(cap + " --moe-pad-expert-input-to-capacity")
    unpadded = iteration(cap)
    assert padded < unpadded
    # the GPU does the same work either way: only the host wait differs
    assert iteration(cap, host=False) == pytest.approx(
        iteration(cap + " --moe-pad-expert-input-to-capacity", host=False), rel=1e-12
    )


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        ("--enable-cuda-graph --external-cuda-graph", "together"),
        ("--enable-cuda-graph --cuda-graph-impl local", "--cuda-graph-impl"),
        ("--cuda-graph-impl magic", "--cuda-graph-impl 'magic' is not one of"),
        ("--cuda-graph-scope attn moe_router", "without --cuda-graph-impl"),
        ("--cuda-graph-impl local --cuda-graph-scope attn moe_router wat", "wat"),
        ("--cuda-graph-impl transformer_engine", r"\(whole layer\)"),
        ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn", "MoE router"),
        ("--cuda-graph-impl local --cuda-graph-scope full_iteration", "full_iteration"),
        ("--moe-token-dispatcher-type scatter", "'scatter' is not one of"),
        ("--moe-enable-deepep", "only with the flex dispatcher"),
        ("--moe-flex-dispatcher-backend deepep", "flex dispatcher only"),
        ("--moe-token-dispatcher-type flex --moe-enable-deepep "
         "--moe-flex-dispatcher-backend hybridep", "one backend"),
        ("--moe-pad-expert-input-to-capacity", "without --moe-expert-capacity-factor"),
        ("--moe-token-dispatcher-type flex --moe-expert-capacity-factor 1 "
         "--moe-pad-expert-input-to-capacity", "flex/DeepEP"),
        ("--fp8-format e5m2", "'e5m2' is not one of"),
        ("--fp8-recipe mxfp8", "without --fp8-format"),
        ("--fp8-format hybrid --fp4-format e2m1", "together"),
        ("--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16", "without --use-precision-aware"),
        ("--use-precision-aware-optimizer --exp-avg-dtype bf16", "bf16/fp32"),
        ("--use-precision-aware-optimizer --exp-avg-dtype fp64", "'fp64' is not one of"),
        ("--num-distributed-optimizer-instances 3", "does not divide"),
        ("--main-grads-dtype bf16", "unknown Megatron flags"),
        ("--transformer-impl inference_optimized", "transformer_engine or local"),
    ],
)  # fmt: skip
def test_contradictory_or_unmodelled_flags_are_errors(flags: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_megatron_command(MOE + " " + flags)


def test_moe_on_the_default_allgather_dispatcher_is_an_error() -> None:
    with pytest.raises(ConfigError, match="allgather"):
        parse_megatron_command(MOE.replace("--moe-token-dispatcher-type alltoall", ""))
    no_ep = MOE.replace("--moe-token-dispatcher-type alltoall", "").replace(
        "--expert-model-parallel-size 16", ""
    )
    assert parse_megatron_command(no_ep)["execution"]["moe_dispatcher"] == "alltoall"


def test_optimizer_instances_need_the_gpu_count() -> None:
    cmd = MOE.replace("--nproc-per-node 8 --nnodes 4 ", "")
    with pytest.raises(ConfigError, match="GPU count"):
        parse_megatron_command(cmd + " --num-distributed-optimizer-instances 2")


def test_bad_flag_exits_2_with_one_line(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(MOE + " --enable-cuda-graph --external-cuda-graph\n")
    res = CliRunner().invoke(app, ["astral", "seer", "predict", str(script), "--gpu", "H100"])
    assert res.exit_code == 2
    assert res.output.startswith("error: --enable-cuda-graph and --external-cuda-graph")
    assert res.output.count("\n") == 1


# --- the same job through `seer validate`'s row path (validate.row_setup / validate_row) ---

ROW = {
    "row_id": "DIFF-01", "source_id": "DIFF", "model": "Toy-MoE-64x1B", "arch": "moe",
    "layers": "8", "hidden": "2048", "ffn_hidden": "8192", "heads": "16", "kv_heads": "4",
    "head_dim": "128", "vocab": "32000", "seq_len": "1024", "moe_experts": "64",
    "moe_topk": "4", "moe_shared_experts": "0", "moe_ffn_hidden": "1024",
    "moe_dense_layers": "0", "activation": "swiglu", "gpu": "H100-SXM5 80GB",
    "num_gpus": "32", "gpus_per_node": "8", "interconnect": "InfiniBand NDR 400 Gb/s per GPU",
    "tp": "1", "pp": "1", "vpp": "", "dp": "32", "cp": "1", "ep": "16", "etp": "1", "sp": "no",
    "zero_or_fsdp": "distributed optimizer (ZeRO-1)", "recompute": "none",
    "global_batch_seqs": "64", "micro_batch": "1", "precision": "BF16",
    "framework": "Megatron-Core 0.17 (alltoall dispatcher)", "iter_time_s": "1.0", "notes": "",
}  # fmt: skip
"""A Megatron-Core MoE run as a published row states it (short sequences: host-bound layers,
so the host mechanisms decide the time)."""


@pytest.mark.parametrize(
    ("cells", "flags"),
    [
        ({}, ""),
        ({"notes": "CUDA graphs (attn, moe_router); capacity factor 1.0, padded to capacity; "
                   "forced load balancing"},
         "--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router "
         "--moe-expert-capacity-factor 1.0 --moe-pad-expert-input-to-capacity "
         "--moe-router-force-load-balancing"),
        ({"notes": "token dropping, capacity factor 1.25"}, "--moe-expert-capacity-factor 1.25"),
        ({"framework": "Megatron-Core 0.17 (flex dispatcher, DeepEP)"},
         "--moe-token-dispatcher-type flex --moe-enable-deepep"),
        ({"notes": "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16",
          "zero_or_fsdp": "distributed optimizer sharded within each 8-GPU node"},
         "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 "
         "--num-distributed-optimizer-instances 4"),
    ],
)  # fmt: skip
def test_flags_predict_like_the_same_row(cells: dict[str, str], flags: str) -> None:
    row = {**ROW, **cells}
    res = validate_row(row)
    cmd = MOE.replace("--seq-length 4096 --max-position-embeddings 4096",
                      "--seq-length 1024 --max-position-embeddings 1024")  # fmt: skip
    if "flex" in flags:
        cmd = cmd.replace("--moe-token-dispatcher-type alltoall", "")
    spec = parse_megatron_command(cmd + " " + flags)
    job = make_job(spec["model"], spec["execution"], row_setup(row).system)
    pred = predict(job)
    assert pred.iteration_s == pytest.approx(res.predicted_iter_s, rel=0, abs=1e-9)
    assert pred.breakdown.get("host", 0.0) > 0  # the host mechanisms are in play
    # every mechanism field is the same, not just the total
    a, b = res.prediction.job.execution, job.execution
    assert a.model_dump(exclude={"dp", "etp"}) == b.model_dump(exclude={"dp", "etp"})
    assert job.model.model_dump(exclude={"name"}) == res.prediction.job.model.model_dump(
        exclude={"name"}
    )


def test_a_job_file_sets_the_same_mechanisms(tmp_path: Path) -> None:
    # `seer predict job.yaml` reaches host_launches, cuda_graphs and the MoE fields as
    # execution keys (docs/formats.md), so a YAML job written from the flags predicts alike.
    flags = ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router "
             "--moe-expert-capacity-factor 1.0")  # fmt: skip
    spec = parse_megatron_command(MOE.replace("4096", "1024") + " " + flags)
    assert spec["execution"]["host_launches"] and spec["execution"]["cuda_graphs"]
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps(spec))
    script = tmp_path / "train.sh"
    script.write_text(MOE.replace("4096", "1024") + " " + flags + "\n")
    sy = {"gpu": "H100"}
    assert predict(load_job(job, sy)).iteration_s == predict(load_job(script, sy)).iteration_s
    assert load_job(job, sy).execution.moe_pad_to_capacity is False


@pytest.mark.parametrize(
    "flag", ["--fp8-dot-product-attention", "--use-transformer-engine-op-fuser"]
)
def test_fp8_attention_and_op_fuser_flags_are_not_megatron_lm_flags(flag: str) -> None:
    """Megatron-LM's arguments.py has no --fp8-dot-product-attention at core_v0.17.1 or later
    (TransformerConfig.fp8_dot_product_attention is in the generated arguments' exclude list,
    "no CLI argument exists"; the flag is a fork's), and use_transformer_engine_op_fuser first
    exists in core_v0.18.0 (6815c0fefe), past the flags this reader follows. A launch line
    with either is refused by name, not read silently; a job states them as
    execution.fp8_attention / moe_fused_grouped_mlp (test_mxfp8_attention)."""
    cmd = CMD.replace("--bf16", "--bf16 --fp8-format hybrid --fp8-recipe mxfp8 " + flag)
    with pytest.raises(ConfigError, match=f"unknown Megatron flags: {flag}"):
        parse_megatron_command(cmd)


MLA_FLAGS = "--kv-lora-rank 512 --q-lora-rank 1536 --qk-pos-emb-head-dim 64 --v-head-dim 128"


def test_multi_latent_attention_follows_megatrons_switch() -> None:
    """Megatron builds MLA only under --multi-latent-attention (TransformerConfig field,
    core_v0.17.1); without it the LoRA-rank flags are ignored. With it the defaults are
    arguments.py's (--kv-lora-rank 32, --qk-head-dim 128, --qk-pos-emb-head-dim 64,
    --v-head-dim 128). MLA decides attention cost and, under MXFP8 attention, its rate curve
    (mxfp8_attention.curves), so a launch line must not turn it on or off by itself."""
    on = parse_megatron_command(
        CMD.replace("--bf16", f"--bf16 --multi-latent-attention {MLA_FLAGS} --qk-head-dim 128")
    )["model"]
    assert (on["kv_lora_rank"], on["q_lora_rank"], on["head_dim"]) == (512, 1536, 128)
    assert (on["qk_rope_head_dim"], on["v_head_dim"]) == (64, 128)
    off = parse_megatron_command(CMD.replace("--bf16", f"--bf16 {MLA_FLAGS}"))["model"]
    assert not off.get("kv_lora_rank") and not off.get("q_lora_rank")
    assert off["head_dim"] == 4096 // 32
    bare = parse_megatron_command(
        CMD.replace("--bf16", "--bf16 --multi-latent-attention --kv-channels 96")
    )
    m = bare["model"]
    assert (m["kv_lora_rank"], m["head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]) == (
        32, 128, 64, 128,
    )  # fmt: skip


def test_the_deprecated_async_allreduce_switch_is_read_as_megatron_ignores_it() -> None:
    """`--no-async-tensor-model-parallel-allreduce` is 'DEPRECATED. This flag is ignored.' in
    megatron/training/arguments.py core_v0.7.0-core_v0.15.0 (gone in core_v0.16.0): the
    launch line is read, and the column-parallel grad-input collective stays asynchronous."""
    no_sp = CMD.replace(" --sequence-parallel", "")
    spec = parse_megatron_command(no_sp + " --no-async-tensor-model-parallel-allreduce")
    assert spec == parse_megatron_command(no_sp)
    job = make_job(spec["model"], spec["execution"], {"gpu": "H100", **spec["system"]})
    assert job.execution.tp_async_backward is True


@pytest.mark.parametrize("layers", ["100000", "0"])
def test_a_layer_count_past_the_model_limit_names_the_flag(layers: str) -> None:
    """model.MAX_LAYERS refused in the launch line's own terms: the flag and its range."""
    cmd = CMD.replace("--num-layers 32", f"--num-layers {layers}")
    with pytest.raises(ConfigError, match=rf"--num-layers={layers} is outside 1\.\.16384") as exc:
        parse_megatron_command(cmd)
    assert "give --num-layers a whole number in 1..16384" in exc.value.one_line()
