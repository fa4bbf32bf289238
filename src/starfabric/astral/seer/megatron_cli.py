"""Read a Megatron-LM launch command (`pretrain_gpt.py --tensor-model-parallel-size ...`) as
Seer's model + execution (+ GPU count from torchrun) — the job description users already have.

Flags that shape the iteration map onto `ModelSpec` / `ExecutionSpec` fields; flags that do not
change one iteration's time or memory (paths, learning rate, logging, checkpointing) are known
and ignored; any other flag is an error that names it, so a silently mis-read run cannot happen.
Flag names follow megatron/training/arguments.py (Megatron-Core r0.8–0.12).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from starfabric.errors import ConfigError

# flag -> (section, field, kind): kind "int", "float", "str" or a constant set when present.
_VALUED: dict[str, tuple[str, str, str]] = {
    "--num-layers": ("model", "layers", "int"),
    "--hidden-size": ("model", "hidden", "int"),
    "--ffn-hidden-size": ("model", "ffn_hidden", "int"),
    "--num-attention-heads": ("model", "heads", "int"),
    "--num-query-groups": ("model", "kv_heads", "int"),
    "--kv-channels": ("model", "head_dim", "int"),
    "--vocab-size": ("model", "vocab", "int"),
    "--padded-vocab-size": ("model", "vocab", "int"),
    "--max-position-embeddings": ("model", "max_seq_len", "int"),
    "--normalization": ("model", "norm", "str"),
    "--position-embedding-type": ("model", "_pos", "str"),
    "--num-experts": ("model", "moe_experts", "int"),
    "--moe-router-topk": ("model", "moe_topk", "int"),
    "--moe-ffn-hidden-size": ("model", "moe_ffn_hidden", "int"),
    "--moe-shared-expert-intermediate-size": ("model", "_shared_ffn", "int"),
    "--q-lora-rank": ("model", "q_lora_rank", "int"),
    "--kv-lora-rank": ("model", "kv_lora_rank", "int"),
    "--qk-pos-emb-head-dim": ("model", "qk_rope_head_dim", "int"),
    "--v-head-dim": ("model", "v_head_dim", "int"),
    "--mtp-num-layers": ("model", "mtp_layers", "int"),
    "--attention-dropout": ("model", "_attn_dropout", "float"),
    "--hidden-dropout": ("model", "_hidden_dropout", "float"),
    "--seq-length": ("execution", "seq_len", "int"),
    "--micro-batch-size": ("execution", "micro_batch", "int"),
    "--global-batch-size": ("execution", "global_batch", "int"),
    "--tensor-model-parallel-size": ("execution", "tp", "int"),
    "--pipeline-model-parallel-size": ("execution", "pp", "int"),
    "--virtual-pipeline-model-parallel-size": ("execution", "vpp", "int"),
    "--num-layers-per-virtual-pipeline-stage": ("execution", "_layers_per_vstage", "int"),
    "--context-parallel-size": ("execution", "cp", "int"),
    "--expert-model-parallel-size": ("execution", "ep", "int"),
    "--expert-tensor-parallel-size": ("execution", "etp", "int"),
    "--recompute-granularity": ("execution", "recompute", "str"),
    "--recompute-method": ("execution", "_recompute_method", "str"),
    "--recompute-num-layers": ("execution", "_recompute_layers", "int"),
    "--recompute-modules": ("execution", "_recompute_modules", "list"),
    "--fp8-format": ("execution", "_fp8", "str"),
    "--optimizer-offload-fraction": ("execution", "_offload_fraction", "float"),
    "--exp-avg-dtype": ("execution", "_exp_avg_dtype", "str"),
    "--exp-avg-sq-dtype": ("execution", "_exp_avg_sq_dtype", "str"),
    "--attention-backend": ("execution", "_attention_backend", "str"),
    "--data-parallel-sharding-strategy": ("execution", "_fsdp_strategy", "str"),
    "--nproc-per-node": ("system", "gpus_per_node", "int"),
    "--nproc_per_node": ("system", "gpus_per_node", "int"),
    "--nnodes": ("system", "_nodes", "int"),
}
_SWITCHES: dict[str, tuple[str, str, Any]] = {
    "--swiglu": ("model", "activation", "swiglu"),
    "--group-query-attention": ("model", "_gqa", True),
    "--disable-bias-linear": ("model", "linear_bias", False),
    "--add-qkv-bias": ("model", "qkv_bias", True),
    "--qk-layernorm": ("model", "qk_norm", True),
    "--untie-embeddings-and-output-weights": ("model", "tied_embeddings", False),
    "--sequence-parallel": ("execution", "sp", True),
    "--bf16": ("execution", "precision", "bf16"),
    "--fp16": ("execution", "precision", "fp16"),
    "--use-distributed-optimizer": ("execution", "zero", 1),
    "--use-torch-fsdp2": ("execution", "zero", 3),
    "--use-custom-fsdp": ("execution", "zero", 3),
    "--recompute-activations": ("execution", "recompute", "selective"),
    "--overlap-grad-reduce": ("execution", "overlap_grad_reduce", True),
    "--overlap-param-gather": ("execution", "overlap_param_gather", True),
    "--tp-comm-overlap": ("execution", "tp_comm_overlap", True),
    "--overlap-p2p-communication": ("execution", "overlap_p2p", True),
    "--use-flash-attn": ("execution", "attention", "flash"),
    "--accumulate-allreduce-grads-in-fp32": ("execution", "grad_reduce_fp32", True),
    "--moe-grouped-gemm": ("execution", "_grouped_gemm", True),
    "--use-precision-aware-optimizer": ("execution", "_precision_aware", True),
    "--optimizer-cpu-offload": ("execution", "_cpu_offload", True),
    "--overlap-cpu-optimizer-d2h-h2d": ("execution", "_overlap_cpu_opt", True),
}
IGNORED_VALUED = frozenset({
    "--lr", "--min-lr", "--lr-decay-style", "--lr-warmup-iters", "--lr-warmup-fraction",
    "--lr-decay-iters", "--train-iters", "--train-samples", "--weight-decay", "--clip-grad",
    "--adam-beta1", "--adam-beta2", "--adam-eps", "--init-method-std", "--seed", "--save",
    "--load", "--save-interval", "--eval-interval", "--eval-iters", "--log-interval",
    "--data-path", "--split", "--tokenizer-type", "--tokenizer-model", "--vocab-file",
    "--merge-file", "--tensorboard-dir", "--wandb-project", "--exit-duration-in-mins",
    "--distributed-backend", "--master_addr", "--master-addr", "--master_port",
    "--master-port", "--node_rank", "--node-rank", "--rotary-base", "--norm-epsilon",
    "--make-vocab-size-divisible-by", "--moe-router-load-balancing-type", "--moe-aux-loss-coeff",
    "--moe-token-dispatcher-type", "--distributed-timeout-minutes", "--log-throughput",
    "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--data-cache-path", "--rdzv-backend",
    "--rdzv-endpoint", "--rdzv_backend", "--rdzv_endpoint", "--num-workers", "--optimizer",
})  # fmt: skip
"""Flags with a value that do not change one iteration's time or memory."""
IGNORED_SWITCHES = frozenset({
    "--use-mcore-models", "--no-masked-softmax-fusion", "--no-bias-gelu-fusion",
    "--no-bias-dropout-fusion", "--no-rope-fusion", "--use-rotary-position-embeddings",
    "--no-position-embedding", "--log-timers-to-tensorboard", "--log-memory-to-tensorboard",
    "--log-validation-ppl-to-tensorboard", "--mock-data", "--no-load-optim", "--no-load-rng",
    "--use-checkpoint-args", "--ckpt-format", "--manual-gc", "--moe-router-pre-softmax",
    "--transformer-impl", "--untie-embeddings", "--standalone", "--no-gradient-accumulation-fusion",
    # Adam's CPU/GPU classes are set after this flag is read (optimizer/__init__.py @d98e8a64),
    # and pinning is the default: neither changes an iteration.
    "--use-torch-optimizer-for-cpu-offload", "--no-pin-cpu-grads", "--no-pin-cpu-params",
})  # fmt: skip
"""Switches that do not change one iteration's time or memory."""


def _convert(flag: str, raw: str, kind: str) -> Any:
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigError(
            f"Megatron flag {flag} {raw!r} is not a number", fix=f"give {flag} a number"
        ) from None
    return raw


def parse_megatron_command(cmd: str | list[str]) -> dict[str, dict[str, Any]]:
    """{'model': ModelSpec fields, 'execution': ExecutionSpec fields, 'system': SystemSpec
    fields} from a Megatron-LM launch command (shell quoting and line continuations allowed)."""
    argv = shlex.split(cmd.replace("\\\n", " ")) if isinstance(cmd, str) else list(cmd)
    start = next((i for i, a in enumerate(argv) if a.endswith(".py")), None)
    if start is None or not Path(argv[start]).name.startswith("pretrain_"):
        raise ConfigError(
            "no Megatron training script (pretrain_gpt.py, pretrain_mamba.py, ...) in the command",
            fix="give the full launch line, e.g. 'torchrun ... pretrain_gpt.py --num-layers 32 ...'",
        )
    out: dict[str, dict[str, Any]] = {"model": {}, "execution": {}, "system": {}}
    unknown: list[str] = []
    items = argv[:start] + argv[start + 1 :]
    i = 0
    while i < len(items):
        tok = items[i]
        i += 1
        if not tok.startswith("--"):
            continue  # launcher words and positional values of ignored flags
        flag, _, inline = tok.partition("=")
        if flag in _VALUED or flag in IGNORED_VALUED:
            if inline:
                raw = inline
            elif i < len(items):
                raw = items[i]
                i += 1
            else:
                raise ConfigError(f"Megatron flag {flag} has no value", fix=f"give {flag} VALUE")
            if flag in _VALUED:
                sec, key, kind = _VALUED[flag]
                if kind == "list":
                    vals = [raw]
                    while i < len(items) and not items[i].startswith("--"):
                        vals.append(items[i])
                        i += 1
                    out[sec][key] = vals
                else:
                    out[sec][key] = _convert(flag, raw, kind)
        elif flag in _SWITCHES:
            sec, key, val = _SWITCHES[flag]
            out[sec][key] = val
        elif flag not in IGNORED_SWITCHES:
            unknown.append(flag)
    if unknown:
        raise ConfigError(
            f"unknown Megatron flags: {' '.join(sorted(set(unknown)))}",
            fix="remove them or describe the job as YAML (model/execution/system)",
        )
    return _finish(out)


def _finish(out: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    m, ex, sy = out["model"], out["execution"], out["system"]
    for need, flag in (("layers", "--num-layers"), ("hidden", "--hidden-size"),
                       ("heads", "--num-attention-heads")):  # fmt: skip
        if need not in m:
            raise ConfigError(f"the command lacks {flag}", fix=f"add {flag}")
    for need, flag in (("seq_len", "--seq-length"), ("global_batch", "--global-batch-size")):
        if need not in ex:
            raise ConfigError(f"the command lacks {flag}", fix=f"add {flag}")
    m.setdefault("name", "megatron-gpt")
    m.setdefault("vocab", 50304)  # GPT-2 BPE padded to 128 (Megatron's default tokenizer)
    m.setdefault("max_seq_len", ex["seq_len"])
    m.setdefault("ffn_hidden", 4 * m["hidden"])
    m.setdefault("head_dim", m["hidden"] // m["heads"])
    gqa = m.pop("_gqa", False)
    if not gqa:
        m.pop("kv_heads", None)
    m.setdefault("kv_heads", m["heads"])
    m.setdefault("activation", "gelu")
    m.setdefault("linear_bias", True)
    m.setdefault("tied_embeddings", True)
    norm = str(m.pop("norm", "LayerNorm")).lower()
    m["norm"] = "rmsnorm" if "rms" in norm else "layernorm"
    m["learned_pos_emb"] = str(m.pop("_pos", "learned_absolute")) == "learned_absolute"
    m["attention_dropout"] = float(m.pop("_attn_dropout", 0.1)) > 0  # Megatron default 0.1
    m.pop("_hidden_dropout", None)
    shared = m.pop("_shared_ffn", 0)
    if m.get("moe_experts"):
        m.setdefault("moe_topk", 2)  # Megatron default --moe-router-topk
        m.setdefault("moe_ffn_hidden", m["ffn_hidden"])
        if shared:
            m["moe_shared_experts"] = max(1, shared // m["moe_ffn_hidden"])
    if "_fp8" in ex:
        ex["precision"] = "fp8"
    ex.pop("_fp8", None)
    if "precision" not in ex:
        raise ConfigError(
            "the command trains in fp32 (no --bf16, --fp16 or --fp8-format); Seer models "
            "mixed precision only",
            fix="add --bf16 (or --fp16 / --fp8-format hybrid)",
        )
    if "zero" not in ex:
        ex["zero"] = 0  # Megatron's default DDP: all-reduced gradients, unsharded optimizer
    if ex.pop("_fsdp_strategy", "") in ("optim_grads_params",):
        ex["zero"] = 3
    ex.setdefault("sp", False)
    for key in ("overlap_grad_reduce", "overlap_param_gather", "overlap_p2p"):
        ex.setdefault(key, False)  # opt-in flags in Megatron
    backend = ex.pop("_attention_backend", "")
    if backend in ("unfused", "local"):
        ex["attention"] = "unfused"
    per_vstage = ex.pop("_layers_per_vstage", None)
    if per_vstage:
        pp = ex.get("pp", 1)
        ex["vpp"] = m["layers"] // (pp * per_vstage)
    method = ex.pop("_recompute_method", None)
    ex.pop("_recompute_layers", None)
    mods = ex.pop("_recompute_modules", None)
    if mods:
        ex["recompute_modules"] = tuple(mods)
    if method is not None and ex.get("recompute") != "full":
        raise ConfigError(
            f"--recompute-method {method} without --recompute-granularity full",
            fix="add --recompute-granularity full or drop --recompute-method",
        )
    ex.pop("_grouped_gemm", None)
    # Precision-aware optimizer with both Adam moments in BF16 (optimizer_state.py); the
    # dtypes default to fp32 in Megatron-Core, so the flag alone changes nothing.
    aware = ex.pop("_precision_aware", False)
    moments = (ex.pop("_exp_avg_dtype", "fp32"), ex.pop("_exp_avg_sq_dtype", "fp32"))
    if aware and moments == ("bf16", "bf16"):
        ex["optimizer_moments"] = "bf16"
    # Optimizer CPU offload (cpu_optimizer_offload.py): --optimizer-offload-fraction defaults
    # to 1.0 on the command line and means nothing without --optimizer-cpu-offload, which
    # Megatron accepts only with --use-precision-aware-optimizer (arguments.py).
    fraction = ex.pop("_offload_fraction", None)
    overlap = ex.pop("_overlap_cpu_opt", False)
    if ex.pop("_cpu_offload", False):
        if not aware:
            raise ConfigError(
                "--optimizer-cpu-offload without --use-precision-aware-optimizer (Megatron "
                "asserts the two go together)",
                fix="add --use-precision-aware-optimizer",
            )
        if fraction is not None and not 0.0 <= fraction <= 1.0:
            raise ConfigError(
                f"--optimizer-offload-fraction {fraction} is not between 0 and 1",
                fix="give a fraction in [0, 1]",
            )
        ex["optimizer_offload_fraction"] = 1.0 if fraction is None else fraction
        ex["overlap_cpu_optimizer"] = overlap
        # HybridDeviceOptimizer's Adams are built without --exp-avg-dtype/--exp-avg-sq-dtype
        # (optimizer/__init__.py @d98e8a64): the moments stay fp32 on both devices.
        ex.pop("optimizer_moments", None)
    nodes = sy.pop("_nodes", None)
    if nodes is not None:
        sy["gpus"] = nodes * int(sy.get("gpus_per_node", 8))
    return out


def read_megatron_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """`parse_megatron_command` of a launch script's text (comments and blank lines skipped)."""
    text = Path(path).read_text()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    return parse_megatron_command("\n".join(lines))


def looks_like_megatron(path: str | Path) -> bool:
    """True when the file holds a Megatron training command rather than a YAML/JSON job."""
    p = Path(path)
    if p.suffix in (".yaml", ".yml", ".json") or not p.is_file():
        return False
    return "pretrain_" in p.read_text(errors="replace")


__all__ = ["looks_like_megatron", "parse_megatron_command", "read_megatron_file"]
