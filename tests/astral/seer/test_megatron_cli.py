from pathlib import Path

import pytest

from starfabric.astral.seer import load_job, make_job, predict
from starfabric.astral.seer.megatron_cli import parse_megatron_command
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
