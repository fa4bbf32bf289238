"""NeMo's 2024 long-context recipes read from code, and what Seer predicts under their settings
(issue 32, long-context class; docs/astral.md "NeMo's 2024 long-context recipes, read from
code"). The facts below are NeMo's, Megatron-LM's and TransformerEngine's source at named
commits; the tests that read those commits skip where the local mirror is absent (CI)."""

import subprocess
from pathlib import Path

import pytest

from starfabric.astral.seer.attention_backend import BACKENDS, kernel_of, stated_backend
from starfabric.astral.seer.cost import FA2_ON_HOPPER, FA2_PATH_IN_TRAINING
from starfabric.astral.seer.cost import FUSED_ATTENTION_IN_TRAINING as FUSED
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.model import ModelSpec, load_model
from starfabric.astral.seer.ops import megatron_model_flops
from starfabric.astral.seer.predict import Prediction, make_job, predict
from starfabric.astral.seer.validate import _framework
from starfabric.errors import ConfigError, InfeasibleError

MIRRORS = Path("/work/.mirror")


def _show(repo: str, rev: str, path: str) -> str:
    git = MIRRORS / repo / "repo"
    if not git.is_dir():
        pytest.skip(f"needs the local mirror {git} (not in CI)")
    out = subprocess.run(["git", "--git-dir", str(git), "show", f"{rev}:{path}"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if out.returncode:
        pytest.skip(f"{repo} {rev}:{path} not in the local mirror")
    return out.stdout


def _llama2_7b() -> ModelSpec:
    return ModelSpec(name="llama-2-7b-shape", layers=32, hidden=4096, ffn_hidden=11008, heads=32,
                     kv_heads=32, head_dim=128, vocab=32000, max_seq_len=2**20,
                     activation="swiglu", norm="rmsnorm")  # fmt: skip


# ---- the FLOP count NeMo prints ------------------------------------------------------------


def _nemo_llama(m: ModelSpec, gbs: float, s: int, causal: bool) -> float:
    """NeMo's llama formula as `flops_formulas.llama2/llama3` states it (f0bf77bcf7,
    2025-01-22; the same expression as the Dec-2024 FLOPs callback 90f29646dc `_llama2`), with
    6251117f4c's `(0.5 if causal_self_attn else 1)` on the attention term (2025-08-09)."""
    h, L = m.hidden, m.layers
    attn = 12 * s / h * (0.5 if causal else 1.0)
    return gbs * s * L * h * h * (12 + 12 * m.kv_heads / m.heads + 18 * m.ffn_hidden / h + attn
                                  + 6 * m.vocab / (L * h))  # fmt: skip


@pytest.mark.parametrize("seq", [4096, 16384, 65536, 131072, 2**20])
@pytest.mark.parametrize("name", ["llama2-7b", "llama-3-8b"])
def test_nemos_llama_formula_is_seers_megatron_count(seq: int, name: str) -> None:
    """Through NeMo 2.4 the formula counts the full s x s score matrix: Seer's `megatron`
    convention; from 2.5 (6251117) the causal half: `megatron_causal`."""
    m = _llama2_7b() if name == "llama2-7b" else load_model("llama-3-8b")
    gbs = 4 * 2**20 / seq
    tokens = gbs * seq
    assert megatron_model_flops(m, tokens, seq) == pytest.approx(_nemo_llama(m, gbs, seq, False))
    assert megatron_model_flops(m, tokens, seq, causal=True) == pytest.approx(
        _nemo_llama(m, gbs, seq, True)
    )


def test_nemo_counted_full_attention_until_6251117() -> None:
    def llama2(rev: str) -> str:
        src = _show("NVIDIA+NeMo", rev, "nemo/utils/flops_formulas.py")
        return src.split("def llama2(", 1)[1].split("\ndef ", 1)[0]

    before, after = llama2("6251117f4c~1"), llama2("6251117f4c")
    assert "+ (12 * config.enc_seq_len / config.hs)\n" in before
    assert "causal_self_attn" not in before
    assert "(12 * config.enc_seq_len / config.hs) * (0.5 if causal_self_attn else 1)" in after
    cb = _show("NVIDIA+NeMo", "90f29646dc", "nemo/lightning/pytorch/callbacks/flops_callback.py")
    assert "+ (12 * self.enc_seq_len / self.hs)" in cb


# ---- what the recipes set -------------------------------------------------------------------

RECIPES = [  # (file, commit, seq, cp, default nodes): the layouts from f4d1c5d441 (2024-10-18)
    ("llama3_8b_16k", "25445927d7", 16384, 2, 2),
    ("llama3_8b_64k", "25445927d7", 65536, 4, 4),
    ("llama3_8b_128k", "616cb443f4", 131072, 8, 8),
]


@pytest.mark.parametrize(("name", "rev", "seq", "cp", "nodes"), RECIPES)
def test_the_long_context_recipes_state_tp4_pp2_cp_and_no_recompute(name, rev, seq, cp, nodes):
    src = _show("NVIDIA+NeMo", rev, f"nemo/collections/llm/recipes/{name}.py")
    for text in ("tensor_parallelism=4", "pipeline_parallelism=2", f"context_parallelism={cp}",
                 "sequence_parallelism=True", f"seq_length = {seq}",
                 f"seq_length={seq}, global_batch_size=512, micro_batch_size=1",
                 f"num_nodes: int = {nodes}"):  # fmt: skip
        assert text in src, text
    assert "recompute" not in src and "fp8" not in src and "cp_comm_type" not in src
    base = _show("NVIDIA+NeMo", rev, "nemo/collections/llm/recipes/llama3_8b.py")
    assert "plugins=bf16_mixed()" in base  # BF16, no FP8 plugin
    assert "recompute" not in base and "cp_comm_type" not in base and "fp8" not in base


@pytest.mark.parametrize(("name", "cp"), [("llama3_8b_16k", 2), ("llama3_8b_64k", 4)])
def test_the_aug_oct_2024_layout_could_not_split_32_layers(name: str, cp: int) -> None:
    """From 70cc9cb95b (2024-08-16) to f4d1c5d441 (2024-10-18, "Fix nemo 2.0 recipes") the
    recipes asked TP 2, PP 4, VPP 5: 20 model chunks for Llama-3-8B's 32 layers, which do not
    split evenly; Seer refuses it and asks for the per-stage layer counts (what NeMo 2.0 built
    from it is not settled here), so those weeks' layout is not predicted."""
    src = _show("NVIDIA+NeMo", "3d1b2c7fb0", f"nemo/collections/llm/recipes/{name}.py")
    for text in ("tensor_parallelism=2", "pipeline_parallelism=4",
                 "virtual_pipeline_parallelism=5", f"context_parallelism={cp}"):  # fmt: skip
        assert text in src, text
    assert load_model("llama-3-8b").layers % (4 * 5)
    ex = {"global_batch": 512, "seq_len": 16384, "precision": "bf16", "tp": 2, "pp": 4,
          "vpp": 5, "cp": cp, "micro_batch": 1, "sp": True}  # fmt: skip
    with pytest.raises(InfeasibleError, match="not divisible by pp\\*vpp = 20"):
        predict(make_job(load_model("llama-3-8b"), ex, {"gpu": "H100", "gpus": 64 * cp}))


def test_nemo_examples_turned_cudnn_attention_off_for_five_weeks_of_2024() -> None:
    """d12fbbd3db (2024-09-08) set NVTE_FUSED_ATTN=0 in the example Slurm executors (so TE ran
    FlashAttention-2); e1e8b107bc ("allow cudnn fa", 2024-10-11) removed it there."""
    path = "scripts/llm/llama3_pretraining.py"

    def slurm_env(rev: str) -> str:
        src = _show("NVIDIA+NeMo", rev, path)
        return src.split("def slurm_executor(", 1)[1].split("executor = run.SlurmExecutor", 1)[0]

    assert '"NVTE_FUSED_ATTN": "0"' in slurm_env("d12fbbd3db")
    assert "NVTE_FUSED_ATTN" not in slurm_env("e1e8b107bc")


def test_megatron_core_attention_backend_sets_tes_opt_out_variables() -> None:
    src = _show("NVIDIA+Megatron-LM", "core_v0.17.1",
                "megatron/core/models/common/language_module/language_module.py")  # fmt: skip
    flash = src.split("AttnBackend.flash:", 1)[1].split("elif", 1)[0]
    assert 'check_and_set_env_variable("NVTE_FUSED_ATTN", 0, AttnBackend.flash)' in flash
    assert 'check_and_set_env_variable("NVTE_FLASH_ATTN", 1, AttnBackend.flash)' in flash
    enums = _show("NVIDIA+Megatron-LM", "core_v0.17.1", "megatron/core/transformer/enums.py")
    members = enums.split("class AttnBackend", 1)[1].split("class ", 1)[0]
    assert tuple(b for b in BACKENDS if f"    {b} = " in members) == BACKENDS


def test_te_keeps_cudnn_under_cp_on_hopper_since_2024() -> None:
    """TE v1.6: FusedAttention stays eligible with CP on the arbitrary-seqlen backend and is
    preferred over FlashAttention on sm90 — what Seer's default `flash_kernel = cudnn` is."""
    src = _show("NVIDIA+TransformerEngine", "v1.6", "transformer_engine/pytorch/attention.py")
    assert 'fused_attention_backend == FusedAttnBackend["F16_arbitrary_seqlen"]))' in src
    assert "# Select FusedAttention on sm90 and FlashAttention on others for performance" in src


# ---- the reader --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "backend"),
    [
        ("--attention-backend flash", "flash"),
        ("attention_backend: fused", "fused"),
        ('env {"NVTE_FUSED_ATTN": "0"}', "flash"),
        ("NVTE_FLASH_ATTN=0 NVTE_FUSED_ATTN=0", "unfused"),
        ("NVTE_FLASH_ATTN=0", "fused"),
        ("not NVTE_FUSED_ATTN=0", None),
        ("NVTE_FUSED_ATTN=1", None),
        ("without --attention-backend flash", None),
        ("--attention-backend flash with FlashAttention-3 installed", None),
        ("NeMo 24.07 container (NeMo 1.x/Megatron-Core)", None),
    ],
)
def test_stated_backend(text: str, backend: str | None) -> None:
    assert stated_backend(text) == backend


def test_backend_kernels() -> None:
    assert kernel_of("flash") == {"attention": "flash", "flash_kernel": "fa2"}
    assert kernel_of("fused") == {"attention": "flash", "flash_kernel": "cudnn"}
    assert kernel_of("local") == kernel_of("unfused") == {"attention": "unfused"}
    assert kernel_of("auto") == {}
    with pytest.raises(ValueError, match="flash, fused"):
        kernel_of("flashinfer")


CMD = """torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\
  --tensor-model-parallel-size 4 --context-parallel-size 4 --sequence-parallel \\
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\
  --seq-length 65536 --micro-batch-size 1 --global-batch-size 8 --swiglu \\
  --normalization RMSNorm --disable-bias-linear --untie-embeddings-and-output-weights \\
  --position-embedding-type rope --bf16 --use-distributed-optimizer --vocab-size 32000
"""


@pytest.mark.parametrize(("flag", "kernel"), [("flash", "fa2"), ("fused", "cudnn"), ("auto", None)])
def test_launch_line_attention_backend(flag: str, kernel: str | None) -> None:
    ex = parse_megatron_command(CMD + f" --attention-backend {flag}")["execution"]
    assert ex.get("flash_kernel") == kernel


def test_launch_line_unknown_backend_is_one_line_error() -> None:
    with pytest.raises(ConfigError, match="--attention-backend 'flashinfer'"):
        parse_megatron_command(CMD + " --attention-backend flashinfer")


def test_flash_backend_runs_slower_than_cudnn_at_64k() -> None:
    spec = parse_megatron_command(CMD + " --attention-backend flash")
    fused = parse_megatron_command(CMD + " --attention-backend fused")
    t = [predict(make_job(s["model"], s["execution"], {"gpu": "H100", "gpus": 16})).iteration_s
         for s in (spec, fused)]  # fmt: skip
    assert t[0] > 1.3 * t[1]


def test_a_rows_cells_choose_the_backend_on_te_stacks_only() -> None:
    nemo = "NeMo 24.07 container (NeMo 1.x/Megatron-Core)"
    assert _framework({"framework": nemo, "notes": "NVTE_FUSED_ATTN=0"})["flash_kernel"] == "fa2"
    assert _framework({"framework": nemo, "notes": ""})["flash_kernel"] == "cudnn"
    row = {"framework": "Megatron-Core 0.12.0", "notes": "--attention-backend unfused"}
    assert _framework(row)["attention"] == "unfused"


# ---- Seer under the recipes' settings, and the held-out sweep's layouts by backend ---------


@pytest.mark.parametrize(("name", "rev", "seq", "cp", "nodes"), RECIPES)
def test_seer_runs_the_recipes_as_shipped(name, rev, seq, cp, nodes) -> None:
    """The recipes set no recompute: Seer must fit them in 80 GB as written, with the ring
    (p2p, TE's default) a small part of the step."""
    ex = {"global_batch": 512, "seq_len": seq, "precision": "bf16", "tp": 4, "pp": 2, "cp": cp,
          "micro_batch": 1, "recompute": "none", "sp": True}  # fmt: skip
    p = predict(make_job(load_model("llama-3-8b"), ex, {"gpu": "H100", "gpus": 8 * nodes}))
    assert not p.memory.oom
    assert p.breakdown["recompute"] == 0.0
    assert p.breakdown["cp"] < 0.05 * p.iteration_s


def _sweep_point(seq: int, tp: int, cp: int, kernel: str) -> Prediction:
    ex = {"global_batch": 4 * 2**20 // seq, "seq_len": seq, "precision": "fp8", "tp": tp,
          "cp": cp, "micro_batch": 1, "recompute": "none", "tp_comm_overlap": tp > 1,
          "flash_kernel": kernel}  # fmt: skip
    return predict(make_job(_llama2_7b(), ex, {"gpu": "H100", "gpus": 4 * seq // 4096}))


def test_at_1m_the_backend_decides_the_rate_by_the_kernels_ratio() -> None:
    """At 1M tokens attention is ~98% of the work, so the step time ratio FA2 : cuDNN tends to
    the kernels' in-training ratio, 1 / (FA2_ON_HOPPER x FA2_PATH_IN_TRAINING / FUSED)."""
    cudnn = _sweep_point(2**20, 8, 32, "cudnn").iteration_s
    fa2 = _sweep_point(2**20, 8, 32, "fa2").iteration_s
    kernels = 1.0 / (FA2_ON_HOPPER * FA2_PATH_IN_TRAINING / FUSED)
    assert 0.85 * kernels <= fa2 / cudnn <= kernels
