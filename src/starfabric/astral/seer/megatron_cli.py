"""Read a Megatron-LM launch command (`pretrain_gpt.py --tensor-model-parallel-size ...`) as
Seer's model + execution (+ GPU count from torchrun) — the job description users already have.

Flags that shape the iteration map onto `ModelSpec` / `ExecutionSpec` fields; flags that do not
change one iteration's time or memory (paths, learning rate, logging, checkpointing) are known
and ignored; any other flag is an error that names it, so a silently mis-read run cannot happen.
Flag names follow megatron/training/arguments.py (Megatron-Core r0.8–0.12) and, for the MoE
dispatcher, CUDA graph, FP8/FP4 and precision-aware-optimizer flags, megatron/training/arguments.py
and megatron/core/transformer/transformer_config.py at core_v0.17.1 (266f1c9). Those flags set
the same `ExecutionSpec` mechanisms `seer validate` sets from a published row (validate.py
`_framework`): host launches, CUDA graphs, dispatcher, capacity and padding, Adam moment storage,
hybrid optimizer sharding; a combination Megatron rejects, or one Seer cannot represent, is an
error naming the flags.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

from starfabric import ranges
from starfabric.astral.seer.attention_backend import BACKENDS as ATTN_BACKENDS
from starfabric.astral.seer.attention_backend import kernel_of as attention_kernel_of
from starfabric.astral.seer.cp_comm import ALGORITHM, CP_COMM_TYPES
from starfabric.astral.seer.fine_grained_offload import EXPERT_MODULES
from starfabric.astral.seer.hybridep_sms import HYBRIDEP_DEFAULT_NUM_SMS
from starfabric.astral.seer.model import LAYER_RANGE
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
    "--qk-head-dim": ("model", "_qk_head_dim", "int"),
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
    "--cp-comm-type": ("execution", "_cp_comm_type", "list"),
    "--hierarchical-context-parallel-sizes": ("execution", "_hcp_sizes", "list"),
    "--expert-model-parallel-size": ("execution", "ep", "int"),
    "--expert-tensor-parallel-size": ("execution", "etp", "int"),
    "--recompute-granularity": ("execution", "recompute", "str"),
    "--recompute-method": ("execution", "_recompute_method", "str"),
    "--recompute-num-layers": ("execution", "_recompute_layers", "int"),
    "--recompute-modules": ("execution", "_recompute_modules", "list"),
    "--fp8-format": ("execution", "_fp8", "str"),
    "--optimizer-offload-fraction": ("execution", "_offload_fraction", "float"),
    "--fp8-recipe": ("execution", "_fp8_recipe", "str"),
    "--fp4-format": ("execution", "_fp4", "str"),
    "--fp4-recipe": ("execution", "_fp4_recipe", "str"),
    "--moe-token-dispatcher-type": ("execution", "_dispatcher", "str"),
    "--moe-flex-dispatcher-backend": ("execution", "_flex_backend", "str"),
    "--moe-deepep-num-sms": ("execution", "_deepep_sms", "int"),
    "--moe-hybridep-num-sms": ("execution", "_hybridep_sms", "int"),
    "--offload-modules": ("execution", "_offload_modules", "list"),
    "--moe-expert-capacity-factor": ("execution", "_capacity", "float"),
    "--cuda-graph-impl": ("execution", "_graph_impl", "str"),
    "--cuda-graph-scope": ("execution", "_graph_scope", "list"),
    "--num-distributed-optimizer-instances": ("execution", "_optimizer_instances", "int"),
    "--exp-avg-dtype": ("execution", "_exp_avg_dtype", "str"),
    "--exp-avg-sq-dtype": ("execution", "_exp_avg_sq_dtype", "str"),
    "--attention-backend": ("execution", "_attention_backend", "str"),
    "--transformer-impl": ("execution", "_transformer_impl", "str"),
    "--data-parallel-sharding-strategy": ("execution", "_fsdp_strategy", "str"),
    # The router's scoring and balancing decide its unfused launches (router_launches).
    "--moe-router-score-function": ("model", "moe_router_score", "str"),
    "--moe-router-num-groups": ("model", "moe_router_groups", "int"),
    "--moe-router-group-topk": ("model", "moe_router_group_topk", "int"),
    "--moe-router-load-balancing-type": ("model", "_lb_type", "str"),
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
    "--multi-latent-attention": ("model", "_mla", True),
    "--untie-embeddings-and-output-weights": ("model", "tied_embeddings", False),
    "--sequence-parallel": ("execution", "sp", True),
    "--bf16": ("execution", "precision", "bf16"),
    "--fp16": ("execution", "precision", "fp16"),
    "--use-distributed-optimizer": ("execution", "zero", 1),
    "--use-torch-fsdp2": ("execution", "zero", 3),
    "--use-custom-fsdp": ("execution", "_megatron_fsdp", True),
    "--use-megatron-fsdp": ("execution", "_megatron_fsdp", True),
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
    "--moe-enable-deepep": ("execution", "_deepep", True),
    "--moe-pad-expert-input-to-capacity": ("execution", "_pad", True),
    "--moe-router-force-load-balancing": ("execution", "moe_load_balance", "forced"),
    "--overlap-moe-expert-parallel-comm": ("execution", "ep_comm_overlap", True),
    "--delay-wgrad-compute": ("execution", "ep_delay_wgrad", True),
    # Megatron-Core's unfused RoPE / SwiGLU paths launch more kernels (host_ops, bridge_recipe).
    "--no-rope-fusion": ("execution", "rope_fusion", False),
    "--no-bias-swiglu-fusion": ("execution", "swiglu_fusion", False),
    # TE's fused router kernels (PR 1883): fewer router launches (host_ops "router_fused").
    "--moe-router-fusion": ("execution", "moe_router_fusion", True),
    "--moe-router-enable-expert-bias": ("model", "moe_router_expert_bias", True),
    "--enable-cuda-graph": ("execution", "_enable_graph", True),
    "--fine-grained-activation-offloading": ("execution", "_fg_offload", True),
    "--external-cuda-graph": ("execution", "_external_graph", True),
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
    "--make-vocab-size-divisible-by", "--moe-aux-loss-coeff",
    "--distributed-timeout-minutes", "--log-throughput",
    "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--data-cache-path", "--rdzv-backend",
    "--rdzv-endpoint", "--rdzv_backend", "--rdzv_endpoint", "--num-workers", "--optimizer",
})  # fmt: skip
"""Flags with a value that do not change one iteration's time or memory."""
IGNORED_SWITCHES = frozenset({
    "--use-mcore-models", "--no-masked-softmax-fusion", "--no-bias-gelu-fusion",
    "--no-bias-dropout-fusion", "--use-rotary-position-embeddings",
    "--no-position-embedding", "--log-timers-to-tensorboard", "--log-memory-to-tensorboard",
    "--log-validation-ppl-to-tensorboard", "--mock-data", "--no-load-optim", "--no-load-rng",
    "--use-checkpoint-args", "--ckpt-format", "--manual-gc", "--moe-router-pre-softmax",
    "--untie-embeddings", "--standalone", "--no-gradient-accumulation-fusion",
    # Adam's CPU/GPU classes are set after this flag is read (optimizer/__init__.py @d98e8a64),
    # and pinning is the default: neither changes an iteration.
    "--use-torch-optimizer-for-cpu-offload", "--no-pin-cpu-grads", "--no-pin-cpu-params",
    # When a fine-grained offload copy starts under CUDA graphs (its bytes are the same), and
    # PP send/recv on separate communicators (Seer prices PP P2P as overlapped already).
    "--delay-offload-until-cuda-graph", "--use-separate-send-recv-groups",
    # "DEPRECATED. This flag is ignored." (arguments.py core_v0.7.0-core_v0.15.0; gone in
    # core_v0.16.0): the grad-input collective stays async (async_grad_input.py).
    "--no-async-tensor-model-parallel-allreduce",
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
    # the model's layer limit in the launch line's terms (ModelSpec would name 'layers')
    ranges.check_int("--num-layers", m["layers"], LAYER_RANGE)
    m.setdefault("name", "megatron-gpt")
    m.setdefault("vocab", 50304)  # GPT-2 BPE padded to 128 (Megatron's default tokenizer)
    m.setdefault("max_seq_len", ex["seq_len"])
    m.setdefault("ffn_hidden", 4 * m["hidden"])
    _mla(m)
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
    if m.pop("_lb_type", "aux_loss") == "seq_aux_loss":
        m["moe_router_aux_loss"] = "seq_aux_loss"
    if m.get("moe_experts"):
        m.setdefault("moe_topk", 2)  # Megatron default --moe-router-topk
        m.setdefault("moe_ffn_hidden", m["ffn_hidden"])
        if shared:
            m["moe_shared_experts"] = max(1, shared // m["moe_ffn_hidden"])
    fp8, fp4 = ex.pop("_fp8", None), ex.pop("_fp4", None)
    _low_precision(ex, fp8, fp4, ex.pop("_fp8_recipe", None), ex.pop("_fp4_recipe", None))
    if "precision" not in ex:
        raise ConfigError(
            "the command trains in fp32 (no --bf16, --fp16 or --fp8-format); Seer models "
            "mixed precision only",
            fix="add --bf16 (or --fp16 / --fp8-format hybrid)",
        )
    if "zero" not in ex:
        ex["zero"] = 0  # Megatron's default DDP: all-reduced gradients, unsharded optimizer
    if ex.pop("_megatron_fsdp", False):
        ex["zero"] = 3  # Megatron-Core's own FSDP (fsdp_side_window), whatever the flag order
        ex["megatron_fsdp"] = True
    if ex.pop("_fsdp_strategy", "") in ("optim_grads_params",):
        ex["zero"] = 3
    ex.setdefault("sp", False)
    for key in ("overlap_grad_reduce", "overlap_param_gather", "overlap_p2p"):
        ex.setdefault(key, False)  # opt-in flags in Megatron
    backend = ex.pop("_attention_backend", "")
    impl = ex.pop("_transformer_impl", "transformer_engine")
    if impl not in ("transformer_engine", "local"):
        raise ConfigError(
            f"--transformer-impl {impl}: Seer models training with transformer_engine or local",
            fix="give --transformer-impl transformer_engine (or local)",
        )
    if backend:
        # --attention-backend sets TE's opt-out variables (attention_backend): flash runs
        # FlashAttention-2, fused cuDNN, unfused/local the unfused path, auto TE's preference.
        _one_of("--attention-backend", backend, ATTN_BACKENDS)
        ex.update(attention_kernel_of(backend))
    if impl == "local":
        # Megatron-Core's local DotProductAttention: unfused softmax between batched GEMMs
        ex["attention"] = "unfused"
    per_vstage = ex.pop("_layers_per_vstage", None)
    if per_vstage:
        pp = ex.get("pp", 1)
        ex["vpp"] = m["layers"] // (pp * per_vstage)
    method = ex.pop("_recompute_method", None)
    n_layers = ex.pop("_recompute_layers", None)
    mods = ex.pop("_recompute_modules", None)
    if mods:
        ex["recompute_modules"] = tuple(mods)
    if method is not None and ex.get("recompute") != "full":
        raise ConfigError(
            f"--recompute-method {method} without --recompute-granularity full",
            fix="add --recompute-granularity full or drop --recompute-method",
        )
    _partial_recompute(ex, method, n_layers)
    ex.pop("_grouped_gemm", None)
    aware = bool(ex.get("_precision_aware", False))
    _optimizer_moments(ex)
    _cpu_offload(ex, aware)
    nodes = sy.pop("_nodes", None)
    if nodes is not None:
        sy["gpus"] = nodes * int(sy.get("gpus_per_node", 8))
    _optimizer_instances(ex, sy)
    _cp_comm(ex, bool(m.get("kv_lora_rank")))
    # Megatron-Core's layers run in eager PyTorch: every kernel is launched from the host
    # (host_ops), as validate counts them for a Megatron-Core/NeMo row.
    ex["host_launches"] = True
    ex["cuda_graphs"] = _cuda_graphs(ex, bool(m.get("moe_experts")))
    _moe_dispatch(ex, bool(m.get("moe_experts")))
    _fine_grained_offload(ex)
    # The flags are core_v0.17.1's, whose alltoall dispatcher sends the router probabilities
    # in an all-to-all of their own (moe_probs_a2a), as validate reads for a release >= 0.13.
    if m.get("moe_experts"):
        ex["moe_probs_all_to_all"] = True
    return out


MLA_DEFAULTS = {"kv_lora_rank": 32, "head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
"""arguments.py's defaults (core_v0.17.1) of --kv-lora-rank, --qk-head-dim (Seer's head_dim: the
query/key part without RoPE), --qk-pos-emb-head-dim and --v-head-dim; --q-lora-rank None: no
query compression."""
MLA_FIELDS = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim")


def _mla(m: dict[str, Any]) -> None:
    """Multi-latent attention as Megatron builds it: only under --multi-latent-attention
    (TransformerConfig.multi_latent_attention, core_v0.17.1: the GPT spec picks MLASelfAttention
    from it), with arguments.py's defaults for the dimensions not given; without the switch the
    LoRA-rank and head-dim flags configure nothing, so they are dropped."""
    qk = m.pop("_qk_head_dim", None)
    if not m.pop("_mla", False):
        for key in MLA_FIELDS:
            m.pop(key, None)
        return
    # MLA's query/key width is --qk-head-dim, not --kv-channels (MLATransformerConfig)
    m["head_dim"] = MLA_DEFAULTS["head_dim"] if qk is None else qk
    for key, val in MLA_DEFAULTS.items():
        m.setdefault(key, val)


def _partial_recompute(ex: dict[str, Any], method: str | None, n_layers: int | None) -> None:
    """--recompute-method/--recompute-num-layers as ExecutionSpec's recompute_method and
    recompute_num_layers (partial_recompute). Megatron's TransformerConfig refuses full
    granularity without both (transformer_config.py __post_init__); a count without a method
    is refused the same way, and a count with selective granularity is unused there."""
    _one_of("--recompute-method", method, ("uniform", "block"))
    if ex.get("recompute") != "full":
        return
    if method is None or n_layers is None:
        raise ConfigError(
            "--recompute-granularity full needs --recompute-method and --recompute-num-layers "
            f"(given: method {method!r}, num-layers {n_layers!r})",
            fix="add --recompute-method uniform --recompute-num-layers 1 (every layer) or the "
            "block method with its layer count",
        )
    ex["recompute_method"], ex["recompute_num_layers"] = method, n_layers


def _one_of(flag: str, val: str | None, choices: tuple[str, ...]) -> None:
    """A valued Megatron flag's value must be one of Megatron's own `choices` (None: not
    given); else the one-line error naming the flag, the value and the choices."""
    if val is not None and val not in choices:
        raise ConfigError(
            f"Megatron flag {flag} {val!r} is not one of {', '.join(choices)}",
            fix=f"give {flag} one of {', '.join(choices)}",
        )


def _low_precision(
    ex: dict[str, Any], fp8: str | None, fp4: str | None, fp8_recipe: str | None,
    fp4_recipe: str | None,
) -> None:  # fmt: skip
    """--fp8-format / --fp4-format (TransformerConfig.fp8 / fp4 and their recipes, core_v0.17.1):
    FP8 GEMMs; FP4 (recipe nvfp4, Megatron's default) runs them as NVFP4 (seer/nvfp4.py), a
    custom FP4 quantizer factory is not known and keeps the FP8 rate."""
    for flag, val, ok in (("--fp8-format", fp8, FP8_FORMATS), ("--fp8-recipe", fp8_recipe,
                          FP8_RECIPES), ("--fp4-format", fp4, FP4_FORMATS),
                          ("--fp4-recipe", fp4_recipe, FP4_RECIPES)):  # fmt: skip
        _one_of(flag, val, ok)
    if fp8 and fp4:
        raise ConfigError(
            "--fp8-format and --fp4-format together (Megatron rejects the pair)",
            fix="keep one of them",
        )
    for flag, recipe, fmt, fmt_flag in (("--fp8-recipe", fp8_recipe, fp8, "--fp8-format"),
                                        ("--fp4-recipe", fp4_recipe, fp4, "--fp4-format")):  # fmt: skip
        if recipe is not None and fmt is None:
            raise ConfigError(
                f"{flag} {recipe} without {fmt_flag}: Megatron trains without it",
                fix=f"add {fmt_flag} or drop {flag}",
            )
    if fp8 or fp4:
        ex["precision"] = "fp8"
    if fp8 and fp8_recipe != "custom":
        # Megatron-Core's default recipe is delayed scaling (TransformerConfig.fp8_recipe);
        # a custom quantizer factory is not known, so it keeps the delayed reference.
        ex["fp8_recipe"] = fp8_recipe or "delayed"
    if fp4 and fp4_recipe != "custom":
        ex["fp4_recipe"] = "nvfp4"


def _cpu_offload(ex: dict[str, Any], aware: bool) -> None:
    """--optimizer-cpu-offload and its fraction / overlap flags (cpu_optimizer_offload.py)."""
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


FP8_FORMATS = ("e4m3", "hybrid")
"""`TransformerConfig.fp8` choices (core_v0.17.1)."""
FP8_RECIPES = ("tensorwise", "delayed", "mxfp8", "blockwise", "custom")
"""`TransformerConfig.fp8_recipe` choices (core_v0.17.1); each sets `ExecutionSpec.fp8_recipe`
(GEMM rate and cast per recipe, seer/fp8_recipe.py), `custom` the delayed reference."""
FP4_FORMATS = ("e2m1",)
"""`TransformerConfig.fp4` choices (core_v0.17.1)."""
FP4_RECIPES = ("nvfp4", "custom")
"""`TransformerConfig.fp4_recipe` choices (core_v0.17.1)."""
MOMENT_DTYPES = ("fp32", "fp16", "bf16", "fp8")
"""--exp-avg-dtype / --exp-avg-sq-dtype choices (arguments.py, core_v0.17.1)."""


def _optimizer_moments(ex: dict[str, Any]) -> None:
    """Precision-aware optimizer (--use-precision-aware-optimizer) with both Adam moments in
    BF16 (optimizer_state.py); the dtypes default to fp32 and apply only with the flag."""
    aware = ex.pop("_precision_aware", False)
    given = {k: ex.pop(k) for k in ("_exp_avg_dtype", "_exp_avg_sq_dtype") if k in ex}
    for key, val in given.items():
        flag = "--" + key.strip("_").replace("_", "-")
        _one_of(flag, val, MOMENT_DTYPES)
        if not aware and val != "fp32":
            raise ConfigError(
                f"{flag} {val} without --use-precision-aware-optimizer: Megatron keeps the "
                "moments in fp32",
                fix=f"add --use-precision-aware-optimizer or drop {flag}",
            )
    moments = (given.get("_exp_avg_dtype", "fp32"), given.get("_exp_avg_sq_dtype", "fp32"))
    if moments == ("bf16", "bf16"):
        ex["optimizer_moments"] = "bf16"
    elif moments != ("fp32", "fp32"):
        raise ConfigError(
            f"Adam moments {moments[0]}/{moments[1]} (--exp-avg-dtype/--exp-avg-sq-dtype): "
            "Seer models both in fp32 or both in bf16",
            fix="give both flags fp32 or both bf16",
        )


def _optimizer_instances(ex: dict[str, Any], sy: dict[str, Any]) -> None:
    """--num-distributed-optimizer-instances N: the distributed optimizer shards over DP / N
    ranks and is replicated N times (arguments.py, core_v0.17.1) = `zero_shard_ranks`."""
    n = ex.pop("_optimizer_instances", 1)
    if n == 1:
        return
    if n < 1 or not ex.get("zero"):
        raise ConfigError(
            f"--num-distributed-optimizer-instances {n} needs --use-distributed-optimizer "
            "and a count of at least 1",
            fix="add --use-distributed-optimizer or drop the flag",
        )
    if "gpus" not in sy:
        raise ConfigError(
            "--num-distributed-optimizer-instances needs the GPU count to size the shard group",
            fix="launch with torchrun --nnodes N --nproc-per-node G in the command",
        )
    dp = ex.get("dp") or sy["gpus"] // (ex.get("tp", 1) * ex.get("pp", 1) * ex.get("cp", 1))
    if dp % n:
        raise ConfigError(
            f"--num-distributed-optimizer-instances {n} does not divide the {dp} DP ranks",
            fix="give a divisor of the data-parallel size",
        )
    ex["zero_shard_ranks"] = dp // n


def _cp_comm(ex: dict[str, Any], mla: bool) -> None:
    """--cp-comm-type (default ["p2p"]; one value for every layer, or one per layer) and
    --hierarchical-context-parallel-sizes (arguments.py, core_v0.17.1) as `cp_algorithm` /
    `cp_a2a_size` (cp_comm.py): TransformerEngine's p2p ring, all_gather, a2a (Ulysses) or
    a2a+p2p (an all-to-all over the first level's ranks, the ring over the second)."""
    types = ex.pop("_cp_comm_type", None) or ["p2p"]
    sizes_raw = ex.pop("_hcp_sizes", None)
    for t in types:
        # Megatron's help text says "allgather"; TransformerEngine accepts only "all_gather"
        # (attn_forward_func_with_cp raises on anything else).
        _one_of("--cp-comm-type", t, CP_COMM_TYPES)
    if len(set(types)) > 1:
        raise ConfigError(
            f"--cp-comm-type {' '.join(types)}: Seer models one CP implementation for every layer",
            fix="give one --cp-comm-type value",
        )
    kind = types[0]
    sizes = [_convert("--hierarchical-context-parallel-sizes", v, "int") for v in sizes_raw or []]
    cp = int(ex.get("cp", 1))
    if sizes and math.prod(sizes) != cp:
        raise ConfigError(
            f"--hierarchical-context-parallel-sizes {' '.join(map(str, sizes))}: their product "
            f"is not --context-parallel-size {cp} (Megatron asserts it)",
            fix="give sizes whose product is the CP size",
        )
    if kind == "a2a+p2p":
        if not sizes:
            raise ConfigError(
                "--cp-comm-type a2a+p2p without --hierarchical-context-parallel-sizes "
                "(Megatron asserts they go together)",
                fix="add --hierarchical-context-parallel-sizes A B (A * B = CP size)",
            )
        if len(sizes) != 2:
            raise ConfigError(
                f"--hierarchical-context-parallel-sizes {' '.join(map(str, sizes))}: "
                "TransformerEngine's a2a+p2p takes two levels (an a2a and a p2p group)",
                fix="give two sizes, A (all-to-all) and B (ring)",
            )
        ex["cp_a2a_size"] = sizes[0]
    if mla and int(ex.get("cp", 1)) > 1 and kind in ("a2a", "all_gather"):
        raise ConfigError(
            f"--cp-comm-type {kind} with multi-latent attention: TransformerEngine supports "
            "MLA under context parallelism with p2p or a2a+p2p only",
            fix="give --cp-comm-type p2p (or a2a+p2p)",
        )
    ex["cp_algorithm"] = ALGORITHM[kind]


CUDA_GRAPH_IMPLS = ("none", "local", "transformer_engine")
"""--cuda-graph-impl choices (TransformerConfig.cuda_graph_impl, core_v0.17.1)."""
CUDA_GRAPH_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba",
                     "full_iteration", "full_iteration_inference", "full")  # fmt: skip
"""--cuda-graph-scope choices (`CudaGraphScope`, plus the legacy "full")."""


def _cuda_graphs(ex: dict[str, Any], moe: bool) -> bool:
    """Whether the run captures what `host_ops.CUDA_GRAPH_MODULES` models: attention (and, in
    MoE layers, the router) in CUDA graphs. --enable-cuda-graph / --external-cuda-graph are
    the deprecated spellings of --cuda-graph-impl local / transformer_engine (arguments.py);
    the default scope (none given) captures the whole layer. Scopes Seer cannot represent (the
    whole layer, the MLP or MoE block, a full iteration) are errors, not a silent guess."""
    local, external = ex.pop("_enable_graph", False), ex.pop("_external_graph", False)
    impl, scope = ex.pop("_graph_impl", None), ex.pop("_graph_scope", None)
    if local and external:
        raise ConfigError(
            "--enable-cuda-graph and --external-cuda-graph together (Megatron rejects the pair)",
            fix="keep one of them (or use --cuda-graph-impl)",
        )
    if (local or external) and impl is not None:
        raise ConfigError(
            "--enable-cuda-graph/--external-cuda-graph with --cuda-graph-impl (Megatron "
            "rejects the pair)",
            fix="use --cuda-graph-impl alone",
        )
    _one_of("--cuda-graph-impl", impl, CUDA_GRAPH_IMPLS)
    impl = "local" if local else "transformer_engine" if external else impl or "none"
    bad = [s for s in scope or () if s not in CUDA_GRAPH_SCOPES]
    if bad:
        raise ConfigError(
            f"Megatron flag --cuda-graph-scope {' '.join(bad)} is not one of "
            f"{', '.join(CUDA_GRAPH_SCOPES)}",
            fix="give --cuda-graph-scope names from that list",
        )
    if impl == "none":
        if scope:
            raise ConfigError(
                f"--cuda-graph-scope {' '.join(scope)} without --cuda-graph-impl: Megatron "
                "captures nothing",
                fix="add --cuda-graph-impl transformer_engine or drop --cuda-graph-scope",
            )
        return False
    want = {"attn", "moe_router"} if moe else {"attn"}
    # moe_preprocess (with moe_router) also captures the dispatcher's preprocess kernels;
    # Seer still counts their launches (an upper bound on the host's time).
    given = set(scope or ()) - ({"moe_preprocess"} if moe else set())
    if given != want:
        named = " ".join(scope) if scope and scope != ["full"] else "(whole layer)"
        raise ConfigError(
            f"--cuda-graph-scope {named}: Seer models CUDA graphs of attention"
            f"{' and the MoE router' if moe else ''} only",
            fix=f"give --cuda-graph-scope {' '.join(sorted(want))}, or drop the CUDA graph flags",
        )
    return True


MEGATRON_DISPATCHERS = ("allgather", "alltoall", "flex")
"""--moe-token-dispatcher-type choices; Megatron's default is allgather (core_v0.17.1)."""
FLEX_BACKENDS = ("deepep", "hybridep")
"""--moe-flex-dispatcher-backend choices; default deepep (core_v0.17.1)."""


def _moe_dispatch(ex: dict[str, Any], moe: bool) -> None:
    """The expert dispatcher, capacity and padding of a MoE run, with the checks
    `TransformerConfig.__post_init__` (core_v0.17.1) makes: DeepEP only with the flex
    dispatcher, padding only with a capacity factor and not with DeepEP. alltoall -> Seer's
    alltoall; flex (DeepEP or HybridEP backend: one copy per remote node) -> deepep, as
    validate reads a row naming the flex dispatcher; allgather (the default) has no model in
    Seer, so a MoE run with EP > 1 must name another."""
    kind = ex.pop("_dispatcher", "allgather")
    backend = ex.pop("_flex_backend", None)
    deepep = ex.pop("_deepep", False)
    cap = ex.pop("_capacity", None)
    pad = ex.pop("_pad", False)
    for flag, val, ok in (("--moe-token-dispatcher-type", kind, MEGATRON_DISPATCHERS),
                          ("--moe-flex-dispatcher-backend", backend, FLEX_BACKENDS)):  # fmt: skip
        _one_of(flag, val, ok)
    if deepep and kind != "flex":
        raise ConfigError(
            f"--moe-enable-deepep with --moe-token-dispatcher-type {kind} (Megatron: DeepEP "
            "only with the flex dispatcher)",
            fix="add --moe-token-dispatcher-type flex",
        )
    if deepep and backend == "hybridep":
        raise ConfigError(
            "--moe-enable-deepep with --moe-flex-dispatcher-backend hybridep (one backend only)",
            fix="drop one of them",
        )
    if backend is not None and kind != "flex":
        raise ConfigError(
            f"--moe-flex-dispatcher-backend {backend} with --moe-token-dispatcher-type {kind}: "
            "the backend applies to the flex dispatcher only",
            fix="add --moe-token-dispatcher-type flex or drop the backend",
        )
    if cap is not None and cap < 0:
        cap = None  # Megatron: a negative capacity factor means dropless
    if pad and cap is None:
        raise ConfigError(
            "--moe-pad-expert-input-to-capacity without --moe-expert-capacity-factor (Megatron "
            "rejects it)",
            fix="add --moe-expert-capacity-factor F or drop the padding flag",
        )
    if pad and kind == "flex" and (backend or "deepep") == "deepep":
        raise ConfigError(
            "--moe-pad-expert-input-to-capacity with the flex/DeepEP dispatcher (Megatron "
            "rejects it)",
            fix="use --moe-token-dispatcher-type alltoall or drop the padding flag",
        )
    if kind == "allgather" and moe and ex.get("ep", 1) > 1:
        raise ConfigError(
            "MoE with EP > 1 on Megatron's allgather token dispatcher (the default when "
            "--moe-token-dispatcher-type is not given): Seer models alltoall and flex only",
            fix="add --moe-token-dispatcher-type alltoall (or flex)",
        )
    ex["moe_dispatcher"] = "deepep" if kind == "flex" else "alltoall"
    # Each flex backend runs its own SM budget (hybridep_sms): HybridEP's flag, default 16.
    deepep_sms, hybrid_sms = ex.pop("_deepep_sms", None), ex.pop("_hybridep_sms", None)
    if kind == "flex" and backend == "hybridep":
        ex["deepep_num_sms"] = HYBRIDEP_DEFAULT_NUM_SMS if hybrid_sms is None else hybrid_sms
        ex["moe_flex_backend"] = "hybridep"  # its measured NVLink rate (hybridep_rate)
    elif deepep_sms is not None:
        ex["deepep_num_sms"] = deepep_sms
    if cap is not None:
        ex["moe_capacity_factor"] = cap
        ex["moe_pad_to_capacity"] = pad


def _fine_grained_offload(ex: dict[str, Any]) -> None:
    """--fine-grained-activation-offloading with its --offload-modules (fine_grained_offload):
    Megatron rejects the feature without modules; the list means nothing without the feature.
    Seer prices the MoE experts' modules only, so another module is refused, not ignored."""
    mods = ex.pop("_offload_modules", None)
    if not ex.pop("_fg_offload", False):
        return
    if not mods:
        raise ConfigError(
            "--fine-grained-activation-offloading without --offload-modules (Megatron rejects it)",
            fix="add --offload-modules expert_fc1 moe_act (the modules whose input to offload)",
        )
    other = [m for m in mods if m not in EXPERT_MODULES]
    if other:
        raise ConfigError(
            f"--offload-modules {' '.join(other)}: Seer models offloading the MoE experts' "
            f"inputs only ({', '.join(EXPERT_MODULES)})",
            fix=f"keep --offload-modules to {' '.join(EXPERT_MODULES)} or describe the job as YAML",
        )
    ex["offload_modules"] = tuple(m for m in EXPERT_MODULES if m in mods)


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
