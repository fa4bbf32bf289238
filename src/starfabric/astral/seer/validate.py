"""Validate Seer against published, measured training runs (CSV with the published_runs columns).

Each row becomes a job; fields the source does not state (marked UNVERIFIED: micro-batch,
interleaving, recompute) are chosen as Megatron's authors would — the fastest setting that fits
in memory — and the choice is reported. The published iteration time is the row's derived one,
or the published TFLOP/s converted back with the source's own FLOP formula.
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from starfabric.astral import bounds
from starfabric.astral.hardware import get_gpu, list_gpus
from starfabric.astral.seer import (
    async_grad_input,
    bridge_recipe,
    cells,
    cpu_optimizer_offload,
    cudnn_release,
    flash_generation,
    fp8_attention,
    fp8_recipe,
    fused_grouped_mlp,
    goodput,
    host_ops,
    legacy_overlap,
    mcore_release,
    nic_count,
    optimizer_state,
    overlap_words,
    releases,
    round_robin_routing,
    router_launches,
    row_forms,
    scatter_unpermute,
    shipped_defaults,
    te_cp_step,
    te_mxfp8_host,
    torch_grouped_mm,
    torchtitan_eager,
    torchtitan_memory,
    torchtitan_pp,
    torchtitan_sdpa,
    tuned_at,
    xtuner_throughput,
)
from starfabric.astral.seer.attention_backend import kernel_of, stated_backend
from starfabric.astral.seer.bridge_layout import layout_recipe, names_bridge, recipe_split
from starfabric.astral.seer.classes import classes_of, per_class
from starfabric.astral.seer.cp_comm import ALGORITHM as CP_ALGORITHM
from starfabric.astral.seer.cp_comm import host_a2a_size, stated_a2a_size, stated_cp_comm_type
from starfabric.astral.seer.deepep_sm_budget import stated_num_sms
from starfabric.astral.seer.deepspeed_bf16_pipe import runs_bf16_pipe_path
from starfabric.astral.seer.deepspeed_flat_gather import gathers_per_tensor
from starfabric.astral.seer.degrees import DEGREES, degree_combos, unverified_degrees
from starfabric.astral.seer.dist_opt_gather import row_gather_dtype
from starfabric.astral.seer.efa import efa_bus_fraction
from starfabric.astral.seer.efa_alltoall import efa_alltoall_alpha
from starfabric.astral.seer.efa_training_rate import efa_a2a_training_fraction
from starfabric.astral.seer.fine_grained_offload import stated_offload_modules
from starfabric.astral.seer.fp4_format import stated_fp4
from starfabric.astral.seer.fsdp_side_window import states_megatron_fsdp
from starfabric.astral.seer.hybridep_sms import hybridep_num_sms
from starfabric.astral.seer.model import ModelSpec, bundled_models, load_model
from starfabric.astral.seer.moe_probs_a2a import sends_probs_all_to_all
from starfabric.astral.seer.ops import (
    flops_per_token_6nd,
    megatron_model_flops,
    narayanan_hardware_flops,
)
from starfabric.astral.seer.overlap_words import DELAY_WGRAD, OverlapKind, Said
from starfabric.astral.seer.parallel import uneven_pipeline_layers
from starfabric.astral.seer.predict import Prediction, make_job, predict
from starfabric.astral.seer.statements import negated_at, stated, stated_for_run
from starfabric.astral.seer.ulysses import names_ulysses, repeats_kv
from starfabric.config import parse_spec
from starfabric.errors import ConfigError, DataError, StarfabricError

DEFAULT_NIC_PER_GPU = {
    "A100": "200G",
    "H100": "400G",
    "H800": "400G",
    "H200": "400G",
    "B200": "400G",
}
"""Scale-out bandwidth per GPU when a row does not state it: the DGX SuperPOD reference designs
(A100: HDR 200 Gb/s per GPU; Hopper/Blackwell: NDR 400 Gb/s per GPU) — assumption."""
UNDEFINED = "the run is undefined"
"""Start of the reason for a row that is refused because the source does not define the run
(such a refusal is reported, not a validation failure)."""
MICRO_BATCH_CANDIDATES = (1, 2, 4, 8)
"""Micro-batch sizes Megatron users try when tuning (assumption)."""
REQUIRED = (
    "row_id", "model", "layers", "hidden", "heads", "vocab", "seq_len", "gpu", "num_gpus",
    "tp", "pp",
)  # fmt: skip
"""Columns every row must fill; the published figure comes from iter_time_s,
derived_iter_time_s, tokens_per_sec_per_gpu, or tflops_per_gpu with tflops_flop_convention;
the batch from global_batch_seqs or tokens_per_batch."""

EXCLUDED = "EXCLUDED"
"""Marker opening a row's `verification` cell ("EXCLUDED: <reason>") when its source cannot
support a steady-state comparison (a published configuration that cannot run as written, a
figure that is not steady-state throughput). Such a row is not predicted and not in the error
figures, but every report lists it with its reason and counts it."""
EXCLUDED_PREFIX = "excluded: "
"""How an excluded row's reason starts in the (row_id, reason) list of rows not predicted."""


CUDA_GRAPHS = re.compile(r"cuda[-_ ]?graphs?", re.I)
"""A framework or notes cell naming CUDA graphs ("CUDA graphs (--cuda-graph-impl ...)"); a
negated mention ("CUDA graphs off", "no CUDA graph") is read by statements.stated."""
FULL_ITERATION_GRAPHS = re.compile(
    r"cuda[-_ ]?graphs?(?:[-_ ]scope)?[^;,]{0,24}?\b(?P<at>full[-_ ]iteration)\b"
    r"|\bfull[-_ ]iteration[-_ ]cuda[-_ ]?graphs?",
    re.I,
)
"""A framework or notes cell stating CUDA graphs over the whole training step ("CUDA graphs over
the full iteration", "CUDA_GRAPH_SCOPE=full_iteration", "CUDA graphs full_iteration";
Megatron-Core's `CudaGraphScope.full_iteration`, the MLPerf Training v6.0 DeepSeek-V3 configs'
`CUDA_GRAPH_IMPLEMENTATION=local CUDA_GRAPH_SCOPE=full_iteration`); not the inference scope
(`full_iteration_inference`: no word boundary after "iteration"). `states_full_iteration_graphs`
reads it: negated, or named as the reference of a comparison ("CUDA graphs per layer rather
than full iteration", "vs. full-iteration CUDA graphs"), it is not the run's scope."""


def states_full_iteration_graphs(*cells: str | None) -> bool:
    """Whether a row's cells state full-iteration CUDA graphs (`FULL_ITERATION_GRAPHS`): an
    affirmed mention whose full-iteration scope is not what the run is compared with
    (`statements.stated_for_run`, compared at the scope's words)."""
    return bool(stated_for_run(FULL_ITERATION_GRAPHS, *cells))


ROUTER_FUSION = re.compile(r"--moe-router-fusion|\brouter fusion\b", re.I)
"""Megatron-Core's fused MoE router (TE PR 1883), as a row's framework cell states it."""


def excluded_reason(row: dict[str, str]) -> str | None:
    """The reason a row is EXCLUDED from comparison (verification cell), else None."""
    cell = (row.get("verification") or "").strip()
    if not cell.upper().startswith(EXCLUDED):
        return None
    reason = cell[len(EXCLUDED) :].strip(" :-")
    if not reason:
        raise DataError(
            f"row {row.get('row_id', '?')}: verification = {cell!r} gives no reason",
            fix="write 'EXCLUDED: <why the source cannot support a steady-state comparison>'",
        )
    return reason


def bundled_csv() -> Path:
    """The published-runs CSV shipped with Seer (Megatron-LM weak scaling, 19 rows)."""
    with resources.as_file(
        resources.files("starfabric.astral.seer") / "published_runs" / "megatron_weak_scaling.csv"
    ) as p:
        return Path(p)


BINARY_COLUMNS = ("seq_len",)
"""Columns whose K/M suffix is a power of two ("4K" = 4,096 tokens: cells.BINARY_SCALE)."""
POSITIVE_COLUMNS = frozenset(
    ("layers", "hidden", "ffn_hidden", "heads", "head_dim", "vocab", "seq_len", "tp", "pp",
     "vpp", "dp", "cp", "ep", "etp", "micro_batch")
)  # fmt: skip
"""Columns whose stated value must be 1 or more (a model size, a parallel degree, the
micro-batch): 0 is a DataError naming the column, not a division by zero further on."""


def _int(row: dict[str, str], key: str, default: int | None = None) -> int:
    """An integer cell; approximate or hinted numbers ("~50K", "UNVERIFIED(1 in Table 5)")
    are read as numbers, a cell without one takes `default` or is a DataError."""
    raw = (row.get(key) or "").strip()
    val = cells.number(raw, binary=key in BINARY_COLUMNS)
    if key == "num_gpus":  # "128 nodes x 8 GPUs", "128x8", "16K" (row_forms.gpu_count)
        if cells.is_hint(raw):  # "~1024 UNVERIFIED": the hint's number, as any column
            count = None if val is None else int(round(cells.number(raw, binary=True) or 0))
        else:
            rid, per_node = row.get("row_id", "?"), row_forms.stated_gpus_per_node(row)
            count = row_forms.gpu_count(raw, rid, per_node)
        val = None if count is None else float(count)
    if val is None:
        if default is not None:
            return default
        raise DataError(
            f"row {row.get('row_id', '?')}: column {key!r} = {cells.quoted(raw)} is not a number",
            fix="give an integer",
        )
    if not abs(val) <= cells.MAX_COUNT:
        raise DataError(
            f"row {row.get('row_id', '?')}: column {key!r} = {cells.quoted(raw)} is above "
            f"{cells.MAX_COUNT} (cells.MAX_COUNT)",
            fix="give the count the source prints",
        )
    if key in POSITIVE_COLUMNS and int(round(val)) < 1:
        raise DataError(
            f"row {row.get('row_id', '?')}: column {key!r} = {cells.quoted(raw)} is not 1 or more",
            fix="give a positive integer (or leave the cell empty where it may be open)",
        )
    return int(round(val))


def _gpus_per_node(row: dict[str, str]) -> int:
    """GPUs per host (`default_gpus_per_node` when the cell is empty, or when it states the
    rack's NVLink domain: `row_forms.states_nvlink_domain`, printed); zero or negative is a
    DataError."""
    n = _int(row, "gpus_per_node", row_forms.default_gpus_per_node(row))
    if row_forms.states_nvlink_domain(row, n):
        return row_forms.default_gpus_per_node(row)
    if n < 1:
        raise DataError(
            f"row {row.get('row_id', '?')}: column 'gpus_per_node' = {row.get('gpus_per_node')!r}"
            " is not a positive number of GPUs",
            fix="give the GPUs per host (e.g. 8) or leave the cell empty",
        )
    return n


def global_batch_seqs(row: dict[str, str]) -> int:
    """Sequences per iteration: the column (a hint such as "~1024 UNVERIFIED" counts), or
    tokens_per_batch / seq_len; a row with neither defines no run."""
    raw_tokens = row.get("tokens_per_batch")
    gbs = row.get("global_batch_seqs") or ""
    if re.match(r"\s*~?\s*[\d.,]+\s*[KMB]?\s*tokens\b", gbs, re.I):
        raw_tokens = gbs  # "4M tokens" written in the batch column is a token count
    elif cells.number(gbs) is not None:
        return _int(row, "global_batch_seqs")
    seq = _int(row, "seq_len")
    tokens = int(round(cells.number(raw_tokens) or 0))
    if cells.has_suffix(raw_tokens) and tokens % seq:
        # "4M tokens" at a power-of-two sequence length is 4 x 2^20 (Llama 2: "4M tokens" =
        # 1,024 x 4,096); the decimal reading is kept when it is the one seq_len divides.
        tokens = int(round(cells.number(raw_tokens, binary=True) or 0))
    if tokens <= 0:
        raise DataError(
            f"row {row.get('row_id', '?')}: {UNDEFINED}: no global batch "
            f"(global_batch_seqs = {cells.quoted(row.get('global_batch_seqs'))}, no tokens_per_batch)",
            fix="fill global_batch_seqs or tokens_per_batch",
        )
    if tokens % seq:
        raise DataError(
            f"row {row.get('row_id', '?')}: no global_batch_seqs and tokens_per_batch "
            f"{tokens} is not a multiple of seq_len {seq}",
            fix="fill global_batch_seqs",
        )
    return tokens // seq


def _unverified(val: str) -> bool:
    return cells.unverified(val)


def _bundled_name(row: dict[str, str]) -> str | None:
    """The bundled HF config named like the row's model ("DeepSeek-V3 (671B ...)" →
    deepseek-v3), for rows whose shapes the columns cannot express (MLA attention)."""
    key = re.sub(r"[\s_]+", "-", row["model"].split("(")[0].strip().lower())
    names = bundled_models()
    if key in names:
        return key
    joined = {n.replace("-", ""): n for n in names}  # "DeepSeekV3" → deepseek-v3
    if key.replace("-", "") in joined:
        return joined[key.replace("-", "")]
    # "DeepSeek-V3 671B", "DeepSeek-V3-Base": a bundled name followed by a size or variant,
    # taken only when the row's own layer count and width (if stated) are the config's.
    flat = key.replace("-", "")
    prefixed = (n for n in names if key.startswith(n + "-") or flat.startswith(n.replace("-", "")))
    for name in sorted(prefixed, key=len, reverse=True):
        cfg = load_model(name)
        stated = {"layers": cfg.layers, "hidden": cfg.hidden}
        if all(cells.number(row.get(k)) in (None, v) for k, v in stated.items()):
            return name
    return None


def _mla_fields(row: dict[str, str], heads: int) -> dict[str, Any]:
    """Multi-head latent attention shapes from a row's notes ("MLA: q_lora 1536, kv_lora 512")
    and head_dim ("128 (+64 decoupled RoPE)"), for MLA models without a bundled config."""
    notes = (row.get("model_notes") or "") + " ; " + (row.get("kv_heads") or "")
    kv = re.search(r"kv_lora\D{0,12}(\d+)", notes, re.I)
    if kv is None:
        raise DataError(
            f"row {row['row_id']}: MLA attention but model_notes give no kv_lora rank "
            f"and model {row['model']!r} names no bundled MLA config",
            fix="write e.g. 'MLA: q_lora 1536, kv_lora 512' in model_notes, or name the "
            "model as its bundled config (e.g. 'DeepSeek-V3')",
        )
    q = re.search(r"q_lora\D{0,12}(\d+)", notes, re.I)
    rope = re.search(r"\+\s*(\d+)", row.get("head_dim") or "")
    hd = _int(row, "head_dim", _int(row, "hidden") // heads)
    return {
        "kv_heads": heads,
        "kv_lora_rank": int(kv.group(1)),
        "q_lora_rank": int(q.group(1)) if q else 0,
        "qk_rope_head_dim": int(rope.group(1)) if rope else 64,  # DeepSeek-V2/V3's RoPE part
        "v_head_dim": hd,
    }


def _model_text(row: dict[str, str]) -> str:
    return " ".join(
        (row.get(k) or "") for k in ("model", "model_notes", "unverified_fields")
    ).lower()


_MTP = r"(?:\bMTP\b|mtp[_-]num[_-]layers|multi[- ]token[- ]prediction)"


def _row_mtp_layers(row: dict[str, str]) -> int | None:
    """The MTP depth a row states (`_mtp_layers`): in its model notes, else beside the model's
    name ("DeepSeek-V3 (no MTP)"), else in its notes ("MTP disabled"); None when none does."""
    for key in ("model_notes", "model", "notes"):
        depth = _mtp_layers(row.get(key) or "")
        if depth is not None:
            return depth
    return None


def _mtp_layers(notes: str) -> int | None:
    """Multi-token-prediction modules a model_notes cell states: "MTP depth 1", "MTP=1",
    "mtp_num_layers 2", "multi-token prediction (1 module)", "1 MTP layer" → the number;
    "no MTP", "MTP disabled/off/none" → 0; None when it states no depth."""
    if re.search(rf"(?:\bno|without|w/o)\s+{_MTP}|{_MTP}\s*[:=(]?\s*(?:disabled|off|none)\b", notes,
                 re.I):  # fmt: skip
        return 0
    m = re.search(rf"{_MTP}\D{{0,12}}?(\d+)", notes, re.I) or re.search(
        rf"\b(\d+)\s*(?:-?\s*layer|-?\s*module|-?\s*depth)?\s*{_MTP}", notes, re.I
    )
    return int(m.group(1)) if m else None


_MLA_CELL = re.compile(r"\bMLA\b|\blatent\b", re.I)
"""A kv_heads cell naming multi-head latent attention ("MLA", "128 (MLA)", "latent")."""


def names_mla(kv_raw: str) -> bool:
    """True when a kv_heads cell names MLA (`_MLA_CELL`), not negated ("no MLA")."""
    return bool(stated(_MLA_CELL, kv_raw))


def kv_heads_unstated(kv_raw: str) -> bool:
    """True when a kv_heads cell states no value: empty, UNVERIFIED without a number, or a
    no-value mark ("-", "n/a"; cells.no_value) — and does not name MLA."""
    return cells.no_value(kv_raw) and cells.number(kv_raw) is None and not names_mla(kv_raw)


def _unstated_kv_heads(row: dict[str, str], heads: int) -> int:
    """KV heads of a row whose cell states none (`kv_heads_unstated`: empty, UNVERIFIED, "-"):
    the bundled config of the same model name when there is one ("Llama-3.1-8B" → 8; an
    empty cell is a transcriber's omission, not a statement of multi-head attention), else
    one per query head (multi-head attention)."""
    name = _bundled_name(row)
    return load_model(name).kv_heads if name is not None else heads


QK_NORM_FAMILY = re.compile(r"\s*qwen[- ]?3(?![.\d])", re.I)
"""Model names of a family whose attention has QK-norm (Qwen3; not Qwen2.5 / Qwen3.5...)."""

GPT_OPT_FAMILY = re.compile(r"gpt(?![-_ ]?(?:oss|neo[-_ ]?x))|opt", re.I)
"""Model names of the GPT-2/3 / OPT family (LayerNorm, biases, learned positions, tied
embeddings, attention dropout), matched anywhere in the name ("MegaScale GPT-175B",
"Megatron-GPT", "OPT-175B"). OpenAI's gpt-oss is not of that family: RMSNorm, RoPE (YaRN),
untied embeddings, no dropout (OpenAI "gpt-oss-120b & gpt-oss-20b Model Card", 2025, architecture;
the MLPerf Training v6.0 reference `pretrain.py` builds it with normalization="RMSNorm",
share_embeddings_and_output_weights=False, dropout 0)."""

NEOX_FAMILY = re.compile(r"gpt[-_ ]?neo[-_ ]?x|pythia", re.I)
"""GPT-NeoX-architecture models (GPT-NeoX-20B, Pythia), not of the GPT-2/3 family although the
name says GPT: LayerNorm and biases like GPT-3, but rotary positions, untied input and output
embeddings and no dropout (EleutherAI/gpt-neox `configs/20B.yml`: "pos_emb": "rotary",
"no_weight_tying": true, hidden/attention dropout 0; EleutherAI/pythia `models/*/pythia-*.yml`:
the same keys). Their parallel attention + MLP block (`gpt_j_residual`) is read from the row's
model text as for any model ("parallel transformer block")."""

SWA_NAME = re.compile(r"sliding[- ]window|\bSWA\b", re.I)
"""A model-notes cell naming sliding-window attention, with or without its size."""
SLIDING_WINDOW_LAYERS = re.compile(
    rf"(?:{SWA_NAME.pattern})[^;]*?\bon\s+(\d+)\s+of\s+(\d+)\s+layers", re.I
)
"""A model-notes clause stating how many layers use the window ("sliding-window attention 128
on 12 of 24 layers": gpt-oss alternates windowed and full layers, Megatron-Core
window_attn_skip_freq 2; Gemma 2 likewise). Without it the window applies to every layer
(`ModelSpec.sliding_window_layers` None)."""


def _row_routing(row: dict[str, str]) -> dict[str, Any]:
    """The router settings a row states (`router_launches.row_routing`): Megatron-LM router
    flags in its cells, or a Megatron-Bridge recipe whose model bridge sets them."""
    texts = [row.get(k) for k in ("model_notes", "framework", "notes")]
    recipe = bridge_recipe.recipe_name(texts) if names_bridge(row.get("framework")) else None
    return dict(router_launches.row_routing(texts, recipe))


def row_model(row: dict[str, str]) -> ModelSpec:
    """The model of one CSV row (GPT rows: LayerNorm, biases, learned positions, tied heads);
    a row whose attention the columns cannot describe (kv_heads = "MLA") takes the bundled
    Hugging Face config of the same name (with the MTP depth the row's notes state)."""
    kv_raw = row.get("kv_heads") or ""
    kv_open = kv_heads_unstated(kv_raw)
    # A cell that names MLA is MLA whatever number it also holds ("128 (MLA)", "MLA
    # (kv_lora 512)"); other text without a number is too ("latent").
    mla = names_mla(kv_raw) or (
        cells.number(kv_raw) is None and bool(kv_raw.strip()) and not cells.says_off(kv_raw)
    )
    if kv_open:  # unstated: MLA only when the bundled config of that name is MLA
        name = _bundled_name(row)
        mla = name is not None and load_model(name).is_mla
    if mla:
        name = _bundled_name(row)
        if name is not None:
            bundled = load_model(name)
            mtp = _row_mtp_layers(row)
            # The routing the row's cells state (router_launches), over the config's.
            update: dict[str, Any] = _row_routing(row)
            if mtp is not None and mtp != bundled.mtp_layers:
                # The run's own MTP depth ("MTP disabled"): the HF config's
                # num_nextn_predict_layers is the released checkpoint's, not every run's.
                update["mtp_layers"] = mtp
            return bundled.model_copy(update=update) if update else bundled
        if "mla" not in (row.get("kv_heads") or "").lower():
            raise DataError(
                f"row {row['row_id']}: kv_heads = {row['kv_heads']!r} and no bundled config "
                f"named like {row['model']!r}",
                fix="give kv_heads as a number or add the model's config.json",
            )
    arch = (row.get("arch") or "dense").strip().lower()
    h = _int(row, "hidden")
    heads = _int(row, "heads")
    act_raw = (row.get("activation") or "").lower()
    gated = ("silu", "swiglu", "geglu", "glu")
    act = "swiglu" if any(g in act_raw for g in gated) else "gelu"  # same FLOPs for any GLU
    gpt = GPT_OPT_FAMILY.search(row["model"]) is not None
    neox = NEOX_FAMILY.search(row["model"]) is not None
    spec: dict[str, Any] = {
        "name": row["model"],
        "layers": _int(row, "layers"),
        "hidden": h,
        "ffn_hidden": _int(row, "ffn_hidden", 4 * h),
        "heads": heads,
        "kv_heads": _int(row, "kv_heads", _unstated_kv_heads(row, heads)),
        "head_dim": _int(row, "head_dim", h // heads),
        "vocab": _int(row, "vocab"),
        "max_seq_len": _int(row, "seq_len"),
        "activation": act,
        "norm": "layernorm" if gpt or neox else "rmsnorm",
        "linear_bias": gpt or neox,
        "learned_pos_emb": gpt,
        "tied_embeddings": gpt,
        "attention_dropout": gpt,
        "parallel_block": "parallel transformer block" in _model_text(row)
        or "ptb" in _model_text(row),
    }
    if mla:
        spec.update(_mla_fields(row, heads))
    if QK_NORM_FAMILY.match(row["model"]):
        # Qwen3's attention normalizes q and k per head (HF model_type qwen3 / qwen3_moe, which
        # hf_config reads as qk_norm; Megatron-Bridge qwen3_moe_bridge.py: qk_layernorm = True;
        # Model Zoo Qwen3 configs: --qk-layernorm); the columns have no cell for it.
        spec["qk_norm"] = True
    notes = row.get("model_notes") or ""
    swa = re.search(
        r"(?:sliding[- ]window(?: attention)?|\bSWA\b)\s*(?:window|size)?\s*[=:(]?\s*(\d{3,})",
        notes, re.I,
    )  # fmt: skip
    if swa and not negated_at(notes, swa.start(), swa.end()):
        # "sliding-window attention 4096": the window; a bare "SWA" states no size, a negated
        # one ("no sliding-window attention 4096", "SWA 4096: off") no window
        spec["sliding_window"] = int(swa.group(1))
        some = SLIDING_WINDOW_LAYERS.search(notes)
        if some:  # "... on 12 of 24 layers": the layers that use the window
            n, of = int(some.group(1)), int(some.group(2))
            if of != spec["layers"]:
                raise DataError(
                    f"row {row['row_id']}: model_notes say the window is used on {n} of {of} "
                    f"layers, but column 'layers' = {spec['layers']}",
                    fix="make the notes' layer count match the layers cell",
                )
            spec["sliding_window_layers"] = n
    mtp = _row_mtp_layers(row)
    if mtp is not None:  # "MTP depth 1": multi-token-prediction modules (DeepSeek-V3 section 2.2)
        spec["mtp_layers"] = mtp
    experts = row.get("moe_experts") or ""
    if arch == "moe" or (experts.strip() and not cells.says_off(experts) and cells.number(experts)):
        spec.update(
            moe_experts=_int(row, "moe_experts"),
            moe_topk=_int(row, "moe_topk"),
            moe_shared_experts=_int(row, "moe_shared_experts", 0),
            moe_ffn_hidden=_int(row, "moe_ffn_hidden"),
            moe_dense_layers=_int(row, "moe_dense_layers", 0),
        )
        nodes = re.search(r"<=?\s*(\d+)\s*nodes", row.get("model_notes") or "")
        if nodes:  # node-limited routing (DeepSeek-V3: each token reaches at most 4 nodes)
            spec["moe_max_nodes"] = int(nodes.group(1))
        spec.update(_row_routing(row))
    return parse_spec(ModelSpec, spec, source=f"row {row['row_id']}")


def _gpu(row: dict[str, str]) -> tuple[str, float | None]:
    """Catalog name for the row's GPU (by name, alias or architecture family) and an HBM
    override when the row names another size (e.g. 'A100-SXM4-40GB' → A100 with 40 GiB)."""
    try:
        gpu, hbm = cells.match_gpu(row["gpu"])
    except ConfigError as exc:
        raise DataError(f"row {row.get('row_id', '?')}: {exc.message}", fix=exc.fix) from None
    return gpu.name, hbm


_SPEED = r"(\d+(?:\.\d+)?)\s*(G|T)(?:b/?s|bps|bit/s|b\b|\b(?!/))"
"""A line rate in bits: "400 Gb/s", "400Gbps", "3.2 Tb/s", "400G" ("GB/s" is bytes: `_BYTES`)."""
IB_GENERATION_GBPS = {"XDR": 800.0, "NDR": 400.0, "HDR": 200.0, "EDR": 100.0}
"""InfiniBand port rates by generation name (IBTA: EDR 100, HDR 200, NDR 400, XDR 800 Gb/s at
4x width), for a cell that names links by generation only ("8x NDR400", "8x HDR per node")."""


def _nic(row: dict[str, str], gpu: str) -> str:
    """Scale-out bandwidth per GPU from the interconnect text ('8x HDR 200Gb/s', '3.2 Tbps per
    node', '400 Gb/s per GPU'), else the reference-design default for the GPU."""
    # "Slingshot 11", "ConnectX 7", "NDR 400": a name or a rate, never a count (nic_count)
    text = nic_count.joined_names(row.get("interconnect") or "")
    per_node = _gpus_per_node(row)
    ratio = None if _unverified(text) else nic_count.stated_nics_per_gpu(text, per_node)
    if ratio == 0:
        raise DataError(
            f"row {row.get('row_id', '?')}: column 'interconnect' = {row.get('interconnect')!r} "
            "states 0 scale-out adapters",
            fix="write the node's NIC count and rate (e.g. '8x400 Gb/s per node'), or leave "
            "the cell empty for the GPU's reference design",
        )
    if not _unverified(text):
        gbps = _nic_gbps(text, per_node)
        if gbps is not None:
            return f"{gbps:g}G"
    default = _default_nic(gpu)
    if ratio is not None:  # "4 EFA NICs per 8 GPUs": a count without a rate
        # p4d's adapters when the row names EFA on an A100 (as `efa_bus_fraction` reads it)
        efa_text = " ; ".join((text, row.get("gpu") or "", row.get("notes") or ""))
        efa_a100 = efa_bus_fraction(efa_text, gpu.split("-")[0]) is not None
        per_nic = nic_count.nic_rate_for_count(efa_a100, float(default.rstrip("G")))
        return f"{ratio * per_nic:g}G"
    return default


def _default_nic(gpu: str) -> str:
    """The GPU's catalogued scale-out rate per GPU, else its reference design's."""
    spec = cells.match_gpu(gpu)[0]
    if spec.nic_gbps is not None:
        return f"{spec.nic_gbps:g}G"
    for key, val in DEFAULT_NIC_PER_GPU.items():
        if key in gpu.upper():
            return val
    return "400G"


_BYTES = r"(\d+(?:\.\d+)?)\s*([GT])B/s"


def _nic_gbps(text: str, per_node: int) -> float | None:
    """Gb/s per GPU stated by an interconnect cell, most explicit statement first: a rate per
    GPU ('400 Gb/s per GPU', '50 GB/s per GPU'), NICs per GPUs or per node beside a rate of one
    ('4 NICs per 8 GPUs, 100 Gb/s each': `nic_count.stated_nics_per_gpu`), N links of a rate
    ('8x HDR 200Gb/s', '8x50 GB/s'), N NICs of a rate ('4 NICs (200 Gb/s each)'), a rate per
    node."""

    def scale(unit: str) -> float:
        return 1000.0 if unit.upper() == "T" else 1.0

    ib = _with_ib_rates(text)
    m = re.search(r"(?:(\d+)\s*[x×]\s*)?" + _SPEED + r"\s*(?:per|/)\s*(?:GPU|gpu)", ib)
    if m:  # b = bits, B = bytes; "2x200 Gb/s per GPU": two links per GPU
        return int(m.group(1) or 1) * float(m.group(2)) * scale(m.group(3))
    m = re.search(_BYTES + r"\s*(?:per|/)\s*GPU", ib)
    if m:
        return 8 * float(m.group(1)) * scale(m.group(2))
    ratio = nic_count.stated_nics_per_gpu(text, per_node)
    rate = re.search(_SPEED + r"(\s*(?i:per|/)\s*(?i:node|server|host)\b)?", text)
    links = re.search(r"(\d+)\s*[x×]\s*$", text[: rate.start()]) if rate else None
    if ratio is not None and rate and rate.group(3) and links:
        # "4 HCAs per 8 GPUs (4x200 Gb/s per node)": N links of a rate make the node's rate
        return int(links.group(1)) * float(rate.group(1)) * scale(rate.group(2)) / per_node
    if ratio is not None and rate and rate.group(3):  # "8 NICs per node, 3.2 Tb/s per node"
        return float(rate.group(1)) * scale(rate.group(2)) / per_node  # the node's rate, shared
    if ratio is not None and rate:  # "4 NICs per 8 GPUs, 100 Gb/s each": a rate per NIC
        return ratio * float(rate.group(1)) * scale(rate.group(2))
    text = ib
    m = re.search(r"(\d+)\s*[x×]\s*(?:[A-Za-z][\w-]*\s+)*?" + _SPEED, text)
    if m:
        return int(m.group(1)) * float(m.group(2)) * scale(m.group(3)) / per_node
    m = re.search(_SPEED + r"\s*[x×]\s*(\d+)\b", text)
    if m:  # "100 Gbps x 4 per node", "ConnectX-7 400Gb/s x8"
        return int(m.group(3)) * float(m.group(1)) * scale(m.group(2)) / per_node
    m = re.search(r"(\d+)\s*[x×]\s*" + _BYTES, text)
    if m:  # "8x50 GB/s per node": N links of a rate in bytes
        return 8 * int(m.group(1)) * float(m.group(2)) * scale(m.group(3)) / per_node
    m = re.search(
        r"(\d+)\s*(?:[A-Za-z-]+\s+)?(?:NICs?|HCAs?|adapters?|ports?)\b\D{0,40}?" + _SPEED,
        text, re.IGNORECASE,
    )  # fmt: skip
    if m:  # "4 NICs (200 Gb/s each) per node": fewer NICs than GPUs share the node's rate
        return int(m.group(1)) * float(m.group(2)) * scale(m.group(3)) / per_node
    counted = nic_count.count_rate_gbps(text, per_node)
    if counted is not None:  # "4 Omni-Path 100 Gb/s NICs per node", "100 Gb/s, 4 per node"
        return counted
    m = re.search(_BYTES + r"\s*(?:per|/)\s*node", text)
    if m:
        return 8 * float(m.group(1)) * scale(m.group(2)) / per_node
    m = re.search(_SPEED + r"\s*(?:per|/)\s*node", text)
    if m:
        return float(m.group(1)) * scale(m.group(2)) / per_node
    m = re.search(_SPEED + r"\s*(?:[A-Za-z][\w-]*\s+){0,2}?(?:NICs?|HCAs?|adapters?)\b", text)
    if m:  # "Slingshot-11 200 Gb/s NICs": NICs of a rate, no count — the reference design's
        return float(m.group(1)) * scale(m.group(2))  # one per GPU (DEFAULT_NIC_PER_GPU)
    return None


def _with_ib_rates(text: str) -> str:
    """An InfiniBand generation named without a rate ("8x NDR400", "8x HDR per node") gets its
    port rate written out (`IB_GENERATION_GBPS`); a cell with a rate of its own is left alone."""
    if re.search(_SPEED, re.sub(r"\b(?:XDR|NDR|HDR|EDR)\d{3}\b", "", text)):
        return text
    pat = r"\b(XDR|NDR|HDR|EDR)(\d{3})?\b"  # "HDR100": the 100 Gb/s split port
    return re.sub(
        pat, lambda m: f"{float(m.group(2) or IB_GENERATION_GBPS[m.group(1)]):g} Gb/s", text
    )


def _year(row: dict[str, str]) -> int | None:
    """Year of the software a row ran: from the framework cell ("Megatron-LM (2021)", a date
    "2025-10"), else the newest of a NeMo container tag ("NeMo 24.07" → 2024) and the releases it
    names ("DeepSpeed v0.6 + Megatron-LM" → 2022, `releases.release_date`), else from the arXiv
    identifier of its citation (arXiv:2104.04473 → 2021). Notes and verification cells are
    transcription dates, not the run's, and are not read."""
    fw = row.get("framework") or ""
    year = re.search(r"(20\d\d)", fw)
    if year:
        return int(year.group(1))
    released = releases.release_date(fw)
    if released is not None:
        return released[0]
    # Any spelling of the identifier: "arXiv:2104.04473", "arxiv.org/abs/2104.04473v2".
    month = mcore_release.published_month(row.get("citation"))
    return month[0] if month else None


SDPA_CUDNN_DEFAULT_TORCH = (2, 11)
"""First PyTorch release whose SDPA picks cuDNN's fused attention by default on datacenter
Hopper and Blackwell: check_prefer_cudnn_attention (aten sdp_utils.cpp) prefers cuDNN on sm90
and sm100 (pytorch/pytorch#162073, for 2.9; sm103 = B300/GB300 since #170800) only when the
linked cuDNN is newer than 9.15.0 (the guard of pytorch/pytorch#169849), which the wheels bundle
from 2.11 on (huggingface/transformers#48163, comment of 2026-08-31). Before, SDPA runs its
flash backend (FlashAttention-2)."""
SDPA_CUDNN_DEFAULT_DATE = (2026, 4)
"""A row that names no PyTorch version but a date (YYYY-MM) from this month on is taken to run
PyTorch >= 2.11 (assumption: 2.11 was released in spring 2026, after 2.10 in January)."""


def sdpa_runs_cudnn(framework: str) -> bool:
    """Whether a PyTorch-native stack's SDPA ran cuDNN's fused attention by default, read from
    the PyTorch version (or, without one, the YYYY-MM date) its framework field names."""
    fw = framework.lower()
    ver = re.search(r"pytorch\s*(\d+)\.(\d+)", fw)
    if ver:
        return (int(ver.group(1)), int(ver.group(2))) >= SDPA_CUDNN_DEFAULT_TORCH
    date = releases.stated_month(fw)  # "2025-26" is a span, not a month
    return date is not None and date >= SDPA_CUDNN_DEFAULT_DATE


def _legacy(row: dict[str, str]) -> bool:
    year = _year(row)
    # FlashAttention (2022) reached Megatron, DeepSpeed and fairseq/metaseq in 2023; so did
    # Megatron's overlapped distributed-optimizer reduce-scatter. Earlier runs are unfused.
    return year is not None and year < 2023


FORCED_BALANCE = re.compile(
    r"force[d]?[-_\s]*(?:load[-_ ])?balanc"
    r"|balanc\w*(?:\s+rout\w*)?\s*[:=(]\s*force[d]?\b",
    re.I,
)
"""Model or notes text naming forced load balancing (Megatron-Core
--moe-router-force-load-balancing / moe_router_force_load_balancing: every expert gets the
same number of tokens), also as a value ("load balancing: force", "balanced routing (forced)")."""


ROUND_ROBIN = re.compile(
    r"round[-_ ]?robin[-_\s]+(?:expert[-_\s]+)?(?:rout|assign|dispatch)"
    r"|rout(?:ing|er)\s*(?:[:=(]|is|was)?\s*(?:deterministic\s+)?round[-_ ]?robin",
    re.I,
)
"""Routing that assigns tokens to experts in turn ("deterministic round-robin routing",
"routing: round robin"; TorchTitan's DeepSeek-V3 report @9739e6e): every expert gets the same
number of tokens, as under forced balancing."""


def states_forced_balance(text: str) -> bool:
    """Whether `text` states forced load balancing (or round-robin routing, which balances
    the same way): a negated mention ("no forced balance stated", "without any forced load
    balancing", "force_load_balancing: false") does not count (statements.stated)."""
    return bool(stated(FORCED_BALANCE, text) or stated(ROUND_ROBIN, text))


SOFTMAX_KERNEL = re.compile(r"(?:scale[- ])?mask(?:ed)?[- ](?:causal[- ])?softmax")
"""A framework cell naming Megatron-LM's fused softmax kernels (FusedScaleMaskSoftmax,
scaled_masked_softmax / scaled_upper_triang_masked_softmax): attention without FlashAttention."""
EAGER_ATTENTION = re.compile(
    r"\beager[- ]attention\b"
    r"|\battn_implementation\s*(?:[=:]\s*|\s+)['\"]?eager\b"
    r"|\battention(?:[- ]implementation)?\s*[=:]\s*['\"]?eager\b",
    re.I,
)
"""A framework cell naming Hugging Face transformers' eager attention (`attn_implementation=
"eager"`, `--attn_implementation eager`, "attention: eager": QK^T and PV as matmuls around a
float32 softmax; the only Llama path by default before transformers 4.36, 2023-12, made SDPA the
default): attention without FlashAttention. A negated mention ("no eager attention") is not one
(statements.stated); "eager" alone ("eager: no torch.compile") is PyTorch's execution mode."""


def _cp_comm_type(row: dict[str, str], ex: dict[str, Any], read: dict[str, Any]) -> None:
    """The TransformerEngine CP implementation a row's cells state (cp_comm.py); unstated, a
    Megatron-Core run keeps its default p2p ring (`cp_algorithm` ring)."""
    cells_ = (row.get("framework"), row.get("cp"), row.get("notes"))
    kind = stated_cp_comm_type(*cells_)
    if kind is None or not ex.get("cp") or int(ex["cp"]) <= 1:
        return
    ex["cp_algorithm"] = CP_ALGORITHM[kind]
    read["cp_comm_type"] = f"{kind} (stated)"
    if kind == "a2a+p2p":
        a2a = stated_a2a_size(*cells_)
        if a2a is None:
            a2a = host_a2a_size(int(ex["cp"]), int(ex.get("tp") or 1), _gpus_per_node(row))
            read["cp_a2a_size"] = f"{a2a} (unstated: the CP ranks that share a host)"
        ex["cp_a2a_size"] = a2a


def _async_grad_input(row: dict[str, str], ex: dict[str, Any], read: dict[str, Any]) -> None:
    """Whether the row's stack runs its column-parallel linears' backward grad-input collective
    beside their weight-gradient GEMM (async_grad_input.py: Megatron-LM, Apex/NeMo, Megatron-Core
    and TE by their code and date); a stack whose code was not read blocks on it."""
    ex["tp_async_backward"] = async_grad_input.async_tp_backward(
        row.get("framework"), row.get("citation"), bool(ex["sp"]), notes=row.get("notes")
    )
    # printed where it is priced: not under userbuffers, TP > 1, no deferred wgrad GEMM
    # (cost.make_context)
    if (
        ex["tp_async_backward"]
        and not ex.get("tp_comm_overlap")
        and not ex.get("ep_delay_wgrad")
        and int(ex.get("tp") or 1) > 1
    ):
        read["tp_async_backward"] = (
            "yes (the stack's column-parallel linears launch their backward grad-input "
            "collective before the weight-gradient GEMM: async_grad_input.py)"
        )


def _legacy_overlap(row: dict[str, str], ex: dict[str, Any], read: dict[str, Any]) -> None:
    """What a pre-2023 row's NeMo (Apex) code overlapped besides the grad-input collective
    (legacy_overlap.py): the asynchronous DP all-reduce without a pipeline."""
    fw = row.get("framework")
    if legacy_overlap.async_dp_grad_reduce(fw, row.get("precision"), ex.get("pp"), bool(ex["sp"])):
        ex["overlap_grad_reduce"] = True
        read["overlap_grad_reduce"] = (
            "yes (NeMo >= 1.10 with O2 and no pipeline: asynchronous gradient all-reduce under "
            "the last backward, legacy_overlap.py)"
        )


def _cudnn_release(row: dict[str, str], ex: dict[str, Any], read: dict[str, Any]) -> None:
    """The cuDNN release of a cuDNN-attention row (cudnn_release.row_release: the cuDNN its
    framework or notes cell states, else its NeMo container's); unknown, Seer keeps its cuDNN
    9.1 curve and the row's choices say so."""
    if ex.get("attention") != "flash" or ex.get("flash_kernel") != "cudnn":
        return
    rel, how = cudnn_release.row_release(row.get("framework"), row.get("notes"))
    read["cudnn_release"] = how
    if rel is not None:
        ex["cudnn_release"] = f"{rel[0]}.{rel[1]}"


def _fp8_attention(
    row: dict[str, str], ex: dict[str, Any], read: dict[str, Any], gemm_recipe: str | None,
    fp4: bool,
) -> None:  # fmt: skip
    """FP8 attention as a row states it (fp8_attention.stated_fp8_attention: its precision
    cell, or the setting by name in its framework/notes cells): TE's cuDNN FP8 fused attention
    under the recipe `fp8_attention.row_dpa_recipe` resolves (MXFP8 GEMMs: MXFP8 attention,
    seer/mxfp8_attention.py). Stated on a row that cannot run it (no FP8 training, not TE's
    cuDNN attention, MXFP8 attention off Blackwell, MXFP8 GEMMs under a Megatron-Core release
    before 0.18: mcore_release.MXFP8_DPA_SINCE), it is not applied and the row's choices say
    so."""
    cells = (row.get("precision"), row.get("framework"), row.get("notes"))
    if not fp8_attention.stated_fp8_attention(*cells):
        return
    if ex["precision"] != "fp8":
        read["fp8_attention"] = (
            "not applied (stated, but the row trains without FP8: TE runs FP8 attention "
            "under an FP8 recipe only)"
        )
        return
    if ex.get("attention", "flash") != "flash" or ex.get("flash_kernel", "cudnn") != "cudnn":
        read["fp8_attention"] = "not applied (stated, but the row's attention is not TE's cuDNN)"
        return
    release = mcore_release.megatron_core_release(row.get("framework"), row.get("citation"))
    if (
        gemm_recipe == "mxfp8"
        and release is not None
        and not mcore_release.mxfp8_runs_fp8_attention(release)
    ):
        # Before core_v0.18 the MXFP8 recipe carries no fp8_dpa (mcore_release), whatever
        # NVTE_DPA_FP8_RECIPE names: TE reads fp8_dpa from the autocast recipe.
        read["fp8_attention"] = (
            f"not applied (stated, but Megatron-Core {release[0]}.{release[1]}'s MXFP8 recipe "
            "does not pass fp8_dpa to Transformer Engine before 0.18: attention ran BF16)"
        )
        return
    recipe = fp8_attention.row_dpa_recipe(gemm_recipe, fp4, *cells)
    if recipe == "mxfp8" and not fp8_recipe.native_mx(get_gpu(_gpu(row)[0])):
        read["fp8_attention"] = (
            "not applied (stated as MXFP8 attention, which Transformer Engine runs on Blackwell "
            "only)"
        )
        return
    ex["fp8_attention"] = recipe
    read["fp8_attention"] = f"{recipe} (stated: cuDNN FP8 fused attention, seer/fp8_attention.py)"


def _fused_grouped_mlp(
    row: dict[str, str], ex: dict[str, Any], read: dict[str, Any], gemm_recipe: str | None,
    model: ModelSpec,
) -> None:  # fmt: skip
    """TE's CuTe-DSL fused grouped MLP as a row states it (fused_grouped_mlp.stated), applied
    where TE runs it: MXFP8 GEMMs, Blackwell (MX) tensor cores, SwiGLU routed experts."""
    cells = (row.get("framework"), row.get("notes"), row.get("precision"))
    if not fused_grouped_mlp.stated(*cells):
        return
    if not (
        ex["precision"] == "fp8"
        and gemm_recipe == "mxfp8"
        and fused_grouped_mlp.unfused(model, get_gpu(_gpu(row)[0])) is None
    ):
        read["moe_fused_grouped_mlp"] = (
            "not applied (stated, but TE fuses the grouped MLP only for SwiGLU experts under "
            "MXFP8 on Blackwell)"
        )
        return
    ex["moe_fused_grouped_mlp"] = True
    read["moe_fused_grouped_mlp"] = (
        "stated (TE CuTe-DSL fused grouped MLP: SwiGLU and two MXFP8 casts in the GEMM "
        "epilogues, seer/fused_grouped_mlp.py)"
    )


def _te_release(row: dict[str, str], ex: dict[str, Any], read: dict[str, Any]) -> None:
    """The TransformerEngine release a cuDNN-attention CP row states (te_cp_step.stated_release:
    "TE 1.11", "Transformer Engine 2.3+"); unstated, the ring's merge work is counted as the
    newest release read does it. A ring on another stack (not Megatron/NeMo) is not TE's.
    An unverified CP degree (None here: the layout options may pick cp > 1) is read as a ring."""
    if ex.get("flash_kernel") != "cudnn" or (ex.get("cp") is not None and int(ex["cp"]) <= 1):
        return
    if not te_cp_step.runs_te_cp(row.get("framework")):
        ex["te_cp_merge"] = False
        read["te_cp_merge"] = "no (not a TransformerEngine stack: its ring's merges are not TE's)"
        return
    rel = te_cp_step.stated_release(row.get("framework"), row.get("notes"))
    if rel is None:
        read["te_release"] = "unstated (TE's p2p merge work as in v2.8)"
        return
    ex["te_release"] = f"{rel[0]}.{rel[1]}"
    read["te_release"] = f"{rel[0]}.{rel[1]} (stated)"


def _first_said(default: bool, *readings: overlap_words.OverlapReading, kind: OverlapKind) -> bool:
    """`kind`'s overlap as the first reading that states it says, else `default`."""
    for reading in readings:
        said = reading.on(kind)
        if said is not None:
            return said
    return default


def _framework(row: dict[str, str]) -> dict[str, Any]:
    fw = (row.get("framework") or "").lower()
    # A fused-attention kernel older than FlashAttention-2 that the framework cell names
    # (FlashAttention 1.x, xformers, Triton FlashAttention; flash_generation).
    old_kernel = flash_generation.pre_fa2_kernel(
        row.get("framework") or "", row.get("citation") or "", row.get("notes") or ""
    )
    if _legacy(row):
        # Megatron-LM 2021: unfused softmax attention (pre-FlashAttention), DP all-reduce after
        # the backward pass (no overlap), no distributed optimizer, blocking PP send/recv —
        # unless the cell names the fused kernel the run used (LLaMA's xformers, 2022-23).
        fused = {"attention": "flash", "flash_kernel": old_kernel} if old_kernel else {}
        return {"attention": "unfused", "overlap_grad_reduce": False,
                "overlap_param_gather": False, "tp_comm_overlap": False,
                "overlap_p2p": False} | fused  # fmt: skip
    # Current stacks (Megatron-Core, NeMo, TorchTitan, DeepSpeed) overlap DP communication by
    # default; TP overlap is opt-in and taken only when the row says so.
    # Every overlap word of the row's cells is read by overlap_words, per kind of traffic.
    fw_said = overlap_words.read_overlap(row.get("framework"))
    # "no overlap" of the whole stack; "EP a2a: no overlap" / "TP no overlap" name one kind.
    no_overlap = fw_said.said(OverlapKind.STACK) is Said.OFF
    # Plain Megatron-LM (not Core/NeMo) ships DP and PP overlap as opt-in flags
    # (--overlap-grad-reduce, --overlap-param-gather, --overlap-p2p-communication): a row that
    # does not state them ran without (the baseline MegaScale section 3.2 improves on).
    plain_megatron = (
        fw.strip().startswith("megatron-lm")
        and not fw_said.on(OverlapKind.DP_GRAD_REDUCE)
        and not fw_said.on(OverlapKind.DP_PARAM_GATHER)
        and "core" not in fw
    )
    dp_overlap = not no_overlap and not plain_megatron
    # The data-parallel cell may state the overlap of each DP collective itself ("ZeRO-1 with
    # the gradient reduce-scatter overlapped with the backward pass", "gradient all-reduce not
    # overlapped"), and so may the framework cell ("--overlap-grad-reduce off"): a collective
    # stated follows the statement, the data-parallel cell's first.
    dp_cell = overlap_words.read_overlap(row.get("zero_or_fsdp"))
    if no_overlap and (
        dp_cell.on(OverlapKind.DP_GRAD_REDUCE) or dp_cell.on(OverlapKind.DP_PARAM_GATHER)
    ):
        raise DataError(
            f"row {row.get('row_id', '?')}: framework = {row.get('framework')!r} states no "
            f"overlap but zero_or_fsdp = {row.get('zero_or_fsdp')!r} states a DP collective "
            "overlapped",
            fix="name the kind of traffic that was not overlapped in the framework cell "
            "('EP a2a: no overlap') or correct the zero_or_fsdp cell",
        )
    grad_overlap = _first_said(dp_overlap, dp_cell, fw_said, kind=OverlapKind.DP_GRAD_REDUCE)
    gather_overlap = _first_said(dp_overlap, dp_cell, fw_said, kind=OverlapKind.DP_PARAM_GATHER)
    # PP send/recv overlap as the framework cell states it ("DP/TP/PP comm overlap on",
    # "--overlap-p2p-communication"), else with DP's.
    p2p_overlap = _first_said(dp_overlap, fw_said, kind=OverlapKind.PP_P2P)
    sp_text = (row.get("sp") or "").lower()
    # MegaScale overlaps TP/SP collectives with the adjacent GEMMs (MegaScale section 3.2).
    notes = row.get("notes") or ""
    tp_overlap = (
        overlap_words.read_overlap(fw, sp_text, notes).on(OverlapKind.TP_COMM) or "megascale" in fw
    )
    # EP all-to-all overlap, stated in the framework or notes cell (the AWS rows write it in
    # their notes: "overlap_moe_expert_parallel_comm on"; "A2A_OVERLAP=0" states it off).
    ep_stated = overlap_words.read_overlap(fw, notes).on(OverlapKind.EP_A2A)
    ep_overlap = "dualpipe" in fw or "dualpipe" in (row.get("vpp") or "").lower() or bool(ep_stated)
    delay_wgrad = bool(stated(DELAY_WGRAD, fw, notes))
    dualpipe = "dualpipe" in fw or "dualpipe" in (row.get("vpp") or "").lower()
    # TorchTitan's DistMoE backend fuses dispatch, expert compute and combine in one kernel
    # (torchtitan models/common/dist_moe.py, DistMoeRoutedExperts).
    fused_moe = "distmoe" in fw.replace("-", "").replace("_", "").replace(" ", "")
    # Plain Megatron-LM (not Core) also ships FlashAttention as opt-in (--use-flash-attn,
    # 2023; the default path is the fused scale-mask-softmax kernel with batched GEMMs).
    flash = flash_generation.names_flash(fw + " ; " + notes)
    attention = "unfused" if plain_megatron and not flash else "flash"
    if (SOFTMAX_KERNEL.search(fw) or stated(EAGER_ATTENTION, fw)) and not flash:
        # A stack that names Megatron's fused (scale-)mask-softmax kernel as its attention
        # runs the unfused path: QK^T and PV as batched GEMMs around that softmax kernel
        # (BloombergGPT section 3.4: SMP's "masked-causal-softmax fused kernel"); Hugging Face's
        # eager attention runs the same unfused path (EAGER_ATTENTION).
        attention = "unfused"
    # PyTorch-native stacks (TorchTitan, HF/accelerate, FSDP2 scripts) run attention through
    # SDPA, whose flash backend is FlashAttention-2 until SDPA defaults to cuDNN
    # (sdpa_runs_cudnn); Megatron-Core/NeMo use TE's cuDNN kernels.
    # Megatron-Core stacks: their layers' host launches are counted (host_ops).
    host = any(k in fw for k in host_ops.HOST_SYNC_FRAMEWORKS)
    # A full-iteration CUDA graph replays the whole step (forward, backward, optimizer) from one
    # launch, its MoE buffers static (a graph cannot hold a host-side token-count sync; the
    # MLPerf v6.0 configs pair it with MOE_PAGED_STASH and MOE_EXPERT_RANK_CAPACITY_FACTOR): no
    # layer launch or per-layer host wait is left to count, so the host_ops launch model does
    # not apply. `cuda_graphs` (attention + router captured) is the narrower case host_ops models.
    if states_full_iteration_graphs(row.get("framework"), row.get("notes")):
        host = False
    native = any(k in fw for k in ("torchtitan", "sdpa", "pytorch fsdp", "huggingface"))
    # A Megatron-Core / NeMo cell that says "SDPA" names the attention core of TE's
    # DotProductAttention (cuDNN), not PyTorch's SDPA (NVIDIA's DeepSeek-V3 GB200 write-up).
    native = native and not host and not sdpa_runs_cudnn(fw)
    # TorchTitan's own wrapper sets SDPA's order (torchtitan_sdpa): cuDNN first on Blackwell
    # from 2025-05, everywhere from 2025-10.
    if native and torchtitan_pp.is_torchtitan(row.get("framework")) and row.get("gpu"):
        blackwell = fp8_recipe.native_mx(get_gpu(_gpu(row)[0]))
        native = not torchtitan_sdpa.prefers_cudnn(row.get("framework"), blackwell)
    # CUDA graphs as stated, not negated ("CUDA graphs off", "no CUDA graphs": statements.stated).
    graphs = bool(stated(CUDA_GRAPHS, row.get("framework"), row.get("notes")))
    # The citation too: a row citing a performance summary ran the performance scripts.
    rope_fused, swiglu_fused = bridge_recipe.recipe_fusions(
        row.get("framework"), (row.get(k) for k in ("model_notes", "notes", "citation"))
    )
    if old_kernel:
        attention = "flash"
    kernel = old_kernel or ("fa2" if native else "cudnn")
    # A TransformerEngine stack's backend as its cells state it (--attention-backend, or
    # TE's NVTE_*_ATTN opt-out variables; seer/attention_backend.py).
    backend = None if native or old_kernel else stated_backend(row.get("framework"), notes)
    if backend is not None:
        chosen = kernel_of(backend)
        attention = chosen.get("attention", attention)
        kernel = chosen.get("flash_kernel", kernel)
    return {"attention": attention, "flash_kernel": kernel,
            "overlap_grad_reduce": grad_overlap,
            "pipeline_schedule": "dualpipe" if dualpipe else "1f1b",
            "overlap_param_gather": gather_overlap,
            "tp_comm_overlap": tp_overlap and not no_overlap,
            "overlap_p2p": p2p_overlap,
            "ep_comm_overlap": ep_overlap,
            "ep_delay_wgrad": ep_overlap and delay_wgrad,
            "moe_fused_dispatch": fused_moe,
            # TorchTitan's GroupedExperts run torch._grouped_mm (torch_grouped_mm).
            "moe_torch_grouped_mm": torch_grouped_mm.runs_torch_grouped_mm(
                row.get("framework"), fused_moe
            ),
            # TorchTitan's 2024-12 Llama without torch.compile (torchtitan_eager).
            "eager_elementwise": torchtitan_eager.runs_eager(row.get("framework"), row.get("notes")),
            # TorchTitan's fp32 loss and FSDP2 buffers (torchtitan_memory).
            "torchtitan_memory": torchtitan_pp.is_torchtitan(row.get("framework")),
            "torchtitan_op_sac": torchtitan_memory.states_op_sac(
                row.get("framework"), row.get("recompute")
            ),
            "host_launches": host, "cuda_graphs": graphs,
            # TE's router fusion and MXFP8 expert path, as the row states them (te_mxfp8_host).
            "moe_router_fusion": host and bool(stated(ROUTER_FUSION, row.get("framework"))),
            "te_mxfp8_stage": te_mxfp8_host.mxfp8_stage(
                row.get("precision"), (row.get("framework"), row.get("notes"))
            ) if host else None,
            # A Megatron-Bridge recipe run keeps Megatron-Core's fusion defaults (bridge_recipe).
            "rope_fusion": rope_fused, "swiglu_fusion": swiglu_fused,
            # DeepSeek's own stack (DualPipe) stores one low-precision copy of the attention
            # output for both backwards (DeepSeek-V3 section 3.3.2; fp8_activations.py).
            "fp8_16bit_copies": not dualpipe}  # fmt: skip


@dataclass(frozen=True)
class Alternative:
    """One memory-feasible value of the settings a row leaves open (those Seer chooses: the
    fastest that fits), predicted and read as the published figure reads Seer's choice."""

    settings: dict[str, Any]
    """The open settings only (stated ones are not varied and not listed)."""
    error: float
    """Signed relative error of this setting's predicted iteration time."""
    chosen: bool
    """True for the setting Seer chose (the row's headline prediction)."""


@dataclass(frozen=True)
class RowResult:
    """One validated row: the prediction, the published figures and the choices made."""

    row_id: str
    model: str
    gpus: int
    published_iter_s: float
    predicted_iter_s: float
    published_tflops: float
    predicted_tflops: float
    convention: str
    choices: dict[str, Any]
    prediction: Prediction
    source: str = ""
    alternatives: tuple[Alternative, ...] = ()
    """With `validate_row(..., alternatives=True)`: every memory-feasible combination of the
    settings the row leaves open, with its error (seer.spread reads them); else empty."""

    @property
    def error(self) -> float:
        """Signed relative error of the predicted iteration time."""
        return self.predicted_iter_s / self.published_iter_s - 1.0


def _convention(row: dict[str, str]) -> str:
    """The FLOP formula that turns the row's TFLOP/s into time (see `cells.flop_convention`);
    rows with a time or tokens/s do not depend on it. A NeMo run whose cell names no formula
    of its own (6N, PaLM's) is NeMo's printed TFLOP/s: its non-causal formula."""
    raw = row.get("tflops_flop_convention") or ""
    conv = cells.flop_convention(raw)
    named = re.search(r"6n|palm|chowdhery|causal", raw, re.I)
    if conv == "model" and not named and "nemo" in (row.get("framework") or "").lower():
        conv = "megatron"
    if conv == "megatron" and cells.megatron_formula_is_causal(row.get("framework")):
        # The release the row names already halves the attention term
        # (cells.MEGATRON_CAUSAL_SINCE).
        return "megatron_causal"
    return conv


NO_FIGURE = re.compile(
    r"(?:[-—–]+|n/?a|none|not (?:reported|given|stated|published)|unverified\b.*|unknown|tbd)",
    re.I,
)
"""Words a transcriber writes in a published-figure cell that holds no figure (read as an
empty cell); any other text without a number stays and is refused as "not a number"."""


def _figure_cell(row: dict[str, str], key: str) -> str:
    """A published-figure cell, or "" when it holds no figure ("-", "n/a", "not reported",
    "UNVERIFIED"), as an empty cell; other text ("abc") is kept, to be refused."""
    raw = (row.get(key) or "").strip()
    return "" if NO_FIGURE.fullmatch(raw) else raw


def _has_time(row: dict[str, str]) -> bool:
    return any(
        _figure_cell(row, k)
        for k in ("iter_time_s", "derived_iter_time_s", "tokens_per_sec_per_gpu")
    )


def _convention_flops(row: dict[str, str], model: ModelSpec, conv: str) -> float:
    # The row's own sequence length: a bundled config's max_seq_len is the model's context
    # window (DeepSeek-V3: 163,840), not what the run trained on.
    seq = _int(row, "seq_len")
    tokens = global_batch_seqs(row) * seq
    if conv == "narayanan":
        return narayanan_hardware_flops(model, tokens, seq)
    if conv in ("megatron", "megatron_causal"):
        return megatron_model_flops(model, tokens, seq, causal=conv == "megatron_causal")
    return flops_per_token_6nd(model, seq) * tokens


def _measured(row: dict[str, str], key: str, raw: str, bound: bounds.Bound) -> float:
    """A published figure: a number above 0 inside its physical bound (astral/bounds.py), else
    a DataError naming the row, the column and the value (the row is then not predicted)."""
    where = f"row {row.get('row_id', '?')}"
    try:
        # In the column's unit: "850 ms", "1.2 min", "0.5 PFLOP/s" (row_forms.figure_scale).
        v = _figure(raw) * row_forms.figure_scale(key, raw)
    except ValueError:
        raise DataError(
            f"{where}: column {key!r} = {cells.quoted(raw)} is not a number",
            fix="give the published figure",
        ) from None
    if v == 0:
        raise DataError(
            f"{where}: column {key!r} = {cells.quoted(raw)} is zero",
            fix="give the published figure",
        )
    return bound.check(v, where, key, "give the published figure (a corrupt cell?)")


_FIGURE = re.compile(
    r"~?\s*(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*([KM](?![A-Za-z]))?\s*"
    r"(?:[A-Za-z%/µ][A-Za-z%/µ.\s-]*)?(?:\([^()\d]*\))?\s*"
)
"""A published figure as sources print it: "3,890", "3890 tokens/s/GPU", "12.3 s", "~540 TFLOP/s",
"3.9K tokens/s" — one number, an optional K/M and unit words; a range or a second number is
not one figure."""


def _figure(raw: str) -> float:
    """The number of a published-figure cell (`_FIGURE`), else ValueError."""
    try:
        return float(raw)
    except ValueError:
        m = _FIGURE.fullmatch(raw.strip())
        if m is None:
            raise
        scale = {"": 1.0, "K": 1e3, "M": 1e6}[(m.group(3) or "").upper()]
        return float(m.group(1).replace(",", "") + (m.group(2) or "")) * scale


def _tflops_bound() -> bounds.Bound:
    """0..the fastest catalogued GPU's dense peak (any dtype) x FLOP_CONVENTION_HEADROOM."""
    top = max(max(g.dense_tflops.values()) for g in list_gpus())
    return bounds.Bound(0.0, top * FLOP_CONVENTION_HEADROOM, "TFLOP/s",
                        f"{FLOP_CONVENTION_HEADROOM:g}x the fastest catalogued GPU's peak, "
                        "validate.FLOP_CONVENTION_HEADROOM")  # fmt: skip


FLOP_CONVENTION_HEADROOM = 2.0
"""Assumption: a published TFLOP/s per GPU may exceed the GPU's dense peak by this factor at
most: sources count FLOPs by their own convention (recompute, 6ND on total MoE parameters), never
by more than 2x the hardware's."""


def stated_iteration_times(rows: Iterable[Mapping[str, str]]) -> dict[str, float]:
    """Row id -> the iteration seconds a row states (`iter_time_s`, else
    `derived_iter_time_s`); rows that state only a rate are left out (the pair scripts'
    published side, read without a model)."""
    out = {}
    for r in rows:
        for key in ("iter_time_s", "derived_iter_time_s"):
            try:
                out[r["row_id"]] = float(r[key])
                break
            except (KeyError, ValueError):
                continue
    return out


def published_iteration_s(row: dict[str, str], model: ModelSpec) -> float:
    """The row's iteration time: measured or derived column, tokens/s per GPU, or TFLOP/s per
    GPU converted back with the source's own FLOP formula."""
    row = canonical_row(row)
    for key in ("iter_time_s", "derived_iter_time_s"):
        raw = _figure_cell(row, key)
        if raw:
            return _measured(row, key, raw, bounds.duration("s", 1.0))
    tokens = global_batch_seqs(row) * _int(row, "seq_len")
    gpus = _int(row, "num_gpus")
    tps = _figure_cell(row, "tokens_per_sec_per_gpu")
    if tps:
        rate = _measured(row, "tokens_per_sec_per_gpu", tps, bounds.counter())
        if row_forms.states_job_total(tps):
            return tokens / rate  # "357,888 tokens/s (total)": the whole job's rate
        return tokens / (rate * gpus)
    tf = _figure_cell(row, "tflops_per_gpu")
    if tf:
        tf = str(_measured(row, "tflops_per_gpu", tf, _tflops_bound()))
    if not tf:
        metric = " ".join(row.get(k) or "" for k in ("metric_primary", "unit_primary"))
        fix = "fill one of them"
        if row_forms.TRAIN_TIME.search(metric):
            fix = (
                "a time-to-train is not a step time: fill derived_iter_time_s with the "
                "train time divided by the iterations it took (or tokens_per_sec_per_gpu)"
            )
        raise DataError(
            f"row {row['row_id']}: no published figure (iter_time_s, derived_iter_time_s, "
            "tokens_per_sec_per_gpu or tflops_per_gpu)",
            fix=fix,
        )
    return _convention_flops(row, model, _convention(row)) / (float(tf) * 1e12 * gpus)


@dataclass(frozen=True)
class RowSetup:
    """What a row fixes (model, execution, system), the settings left to choose and the
    values read from approximate cells, as printed next to the prediction."""

    model: ModelSpec
    execution: dict[str, Any]
    system: dict[str, Any]
    options: list[tuple[dict[str, int], dict[str, list[Any]]]]
    """Per layout to try (its parallel degrees), the candidate values of the other open
    settings (micro-batch, vpp, recompute, ...)."""
    read: dict[str, Any]
    layout_recipe: str | None = None
    """The Megatron-Bridge recipe whose (PP, VPP) layout map splits the layers when the row
    states no split (bridge_layout)."""
    shipped: shipped_defaults.Applied | None = None
    """The Megatron-Bridge performance configuration the row matched, and what it supplied."""


def _interleaving_stated(row: dict[str, str]) -> bool:
    text = ((row.get("vpp") or "") + " " + (row.get("unverified_fields") or "")).lower()
    return "interleav" in text


def _choices(
    row: dict[str, str], model: ModelSpec, ex: dict[str, Any], gpus: int = 0, gpu: str = ""
) -> dict[str, list[Any]]:
    """Candidate values of the settings the source leaves open, as a tuning user of the
    framework tries them; the fastest that fits in memory is taken."""
    pp = ex["pp"]
    out: dict[str, list[Any]] = {}
    fw_cell = row.get("framework")
    titan = torchtitan_pp.is_torchtitan(fw_cell)
    vpp_raw = row.get("vpp", "")
    per = -(-model.layers // pp)  # layers per stage (uneven: the end stages hold fewer)
    if pp == 1 or ex.get("pipeline_schedule") == "dualpipe" or cells.says_off(vpp_raw):
        # "none", "no", "off": no interleaving; DualPipe's two directions take the place of
        # virtual stages.
        out["vpp"] = [1]
    elif cells.number(vpp_raw) is not None and not _unverified(vpp_raw):
        out["vpp"] = [_int(row, "vpp")]
    elif _legacy(row) and not _interleaving_stated(row):
        # Megatron-LM before Core: the interleaved schedule is opt-in
        # (--num-layers-per-virtual-pipeline-stage); a run that does not say so used 1F1B.
        out["vpp"] = [1]
    elif titan and _interleaving_stated(row):
        # TorchTitan splits an interleaved schedule into 2 stages per rank unless told
        # otherwise (torchtitan_pp.DEFAULT_STAGES_PER_RANK).
        out["vpp"] = [torchtitan_pp.DEFAULT_STAGES_PER_RANK]
    else:
        out["vpp"] = [1] + [v for v in range(2, per + 1) if per % v == 0]
    mb_raw = row.get("micro_batch", "")
    titan_mb = None
    if titan and _unverified(mb_raw) and gpus:
        dp = ex.get("dp") or gpus // (ex["tp"] * pp * ex["cp"])
        stages = out["vpp"][0] if len(out["vpp"]) == 1 else torchtitan_pp.DEFAULT_STAGES_PER_RANK
        titan_mb = torchtitan_pp.default_micro_batch(
            fw_cell, pp, stages, int(ex["global_batch"]) // max(1, dp)
        )
    if titan_mb is not None:
        # TorchTitan's default micro-batching of its release (torchtitan_pp), not a hint
        # written from another release.
        out["micro_batch"] = [titan_mb]
    elif _unverified(mb_raw) and cells.number(mb_raw) is None:
        out["micro_batch"] = list(MICRO_BATCH_CANDIDATES)
    elif _unverified(mb_raw):
        out["micro_batch"] = [_int(row, "micro_batch")]  # the source's hint
    else:
        out["micro_batch"] = [_int(row, "micro_batch")]
    rec_raw = (row.get("recompute") or "").lower()
    kind = cells.recompute_kind(rec_raw, _legacy(row))
    if kind is None:
        if _legacy(row):
            # Before 2023 Megatron-LM, Megatron-DeepSpeed and fairseq checkpointed whole
            # layers or nothing (--checkpoint-activations); selective recompute arrived with
            # Korthikanti et al. 2022 and reached those stacks' releases in 2023.
            out["recompute"] = ["none", "full"]
        else:
            out["recompute"] = ["none", "selective", *_module_sets(row, model), "full"]
    elif kind == cells.RECOMPUTE_ON:
        # Recompute stated on, its granularity not: the recomputing settings a tuning user
        # tries, fastest that fits.
        out["recompute"] = ["selective", *_module_sets(row, model), "full"]
    elif kind in ("full", "none"):
        out["recompute"] = [kind]
        partial = cells.recompute_layers(rec_raw) if kind == "full" else None
        # Megatron-Core --recompute-method/--recompute-num-layers; uniform groups of one layer
        # are every layer checkpointed on its own, plain full (partial_recompute).
        if partial is not None and partial != ("uniform", 1):
            out["recompute_method"], out["recompute_num_layers"] = [partial[0]], [partial[1]]
    else:  # "selective", "partial", "RMSNorm + MLA up-projections recomputed"
        out["recompute"] = ["selective"]
        mods = recompute_modules(rec_raw)
        if mods:
            out["recompute_modules"] = [mods]
    fw = (row.get("framework") or "").lower()
    moments = _optimizer_moments(row, rec_raw, mb_raw, ex.get("pipeline_schedule") == "dualpipe")
    if moments != ["fp32"]:
        out["optimizer_moments"] = moments
    fractions = _offload_fractions(row, gpu, ex)
    if fractions != [0.0]:
        out["optimizer_offload_fraction"] = fractions
    if 0.0 not in fractions:
        out.pop("optimizer_moments", None)  # the offload's Adams keep fp32 moments
    if model.is_moe:
        out["moe_dispatcher"] = _dispatchers(row, ex)
    tp_said = overlap_words.read_overlap(fw_cell, row.get("sp"), row.get("notes")).on(
        OverlapKind.TP_COMM
    )
    if (
        not ex["tp_comm_overlap"]
        and tp_said is None
        and ("nemo" in fw or "megatron-core" in fw)
        and ex["sp"]
        and not _legacy(row)
    ):
        # NeMo / Megatron-Core ship userbuffers TP overlap (--tp-comm-overlap) in their
        # performance recipes; a tuning user tries it when the source does not say (a row
        # that states it off, "no --tp-comm-overlap", ran without). A run dated before 2023
        # had none to try: the NeMo launcher's GPT configs first set it in 2023-06
        # (NeMo-Framework-Launcher 3242e002, "update all GPT configs"; none of its 2022 configs
        # has the key), so a 2022 NeMo Megatron row keeps `_framework`'s legacy "off".
        out["tp_comm_overlap"] = [False, True]
    return out


def _optimizer_moments(row: dict[str, str], rec_raw: str, mb_raw: str, dualpipe: bool) -> list[str]:
    """Adam moment storage the run may have used (optimizer_state.py): BF16 when the row
    says so or it ran DeepSeek's own stack; both, fp32 first, when the source leaves recompute or the micro-batch open and
    its framework release ships BF16 optimizer states (a tuning user turns them on before
    recomputing more; the step time is the same, so fp32 is kept whenever it fits);
    otherwise fp32, the framework default."""
    text = " ".join((row.get(k) or "") for k in ("framework", "notes", "precision"))
    if optimizer_state.stated_bf16_moments(text) or dualpipe:
        # DeepSeek's own stack (DualPipe) keeps AdamW's moments in BF16 (DeepSeek-V3
        # technical report section 3.3.2).
        return ["bf16"]
    if (_unverified(rec_raw) or _unverified(mb_raw)) and optimizer_state.offers_bf16_moments(
        row.get("framework") or ""
    ):
        return ["fp32", "bf16"]
    return ["fp32"]


def _offload_fractions(row: dict[str, str], gpu: str, ex: dict[str, Any]) -> list[float]:
    """Optimizer CPU offload fractions the run may have used (cpu_optimizer_offload.py): the
    CLI default 1.0 when the row says it offloaded the optimizer; the candidates, 0 first,
    when its framework release ships HybridDeviceOptimizer (Megatron Core >= 0.12) and the
    catalog knows the GPU's host — no row states that it did not offload, and a tuning user
    tries it before full recompute (with recompute or the micro-batch open) or when the
    stated settings leave memory short. It only adds step time, so it is kept only where
    nothing faster fits; otherwise off."""
    if not gpu or ex.get("pipeline_schedule") == "dualpipe" or ex.get("offload_weights"):
        return [0.0]
    if not cpu_optimizer_offload.available(get_gpu(gpu)):
        return [0.0]
    text = " ".join((row.get(k) or "") for k in ("framework", "notes"))
    if cpu_optimizer_offload.stated(text):
        return [1.0]
    if cpu_optimizer_offload.offered(row.get("framework") or ""):
        return list(cpu_optimizer_offload.FRACTION_CANDIDATES)
    return [0.0]


def _dispatchers(row: dict[str, str], ex: dict[str, Any]) -> list[str]:
    """Expert token dispatchers the run may have used: the one the row names; DeepEP's
    node-deduplicating kernels for DeepSeek's own DualPipe stack (section 3.2.2); none but
    NCCL's all-to-all before 2025 (Megatron-Core's DeepEP/flex dispatcher: core r0.12,
    2025); otherwise both, as a tuning user tries them."""
    text = " ".join((row.get(k) or "") for k in ("framework", "notes", "model_notes")).lower()
    fw = (row.get("framework") or "").lower()
    if "dispatcher alltoall" in fw or "alltoall dispatcher" in fw:
        return ["alltoall"]  # the framework field names the dispatcher the run used
    if "deepep" in text or "flex" in text or ex.get("pipeline_schedule") == "dualpipe":
        return ["deepep"]
    if ex.get("moe_capacity_factor") is not None:
        return ["alltoall"]  # Megatron-Core's DeepEP (flex) dispatcher is dropless only
    year = _year(row)
    if "alltoall dispatcher" in text or _legacy(row) or (year is not None and year < 2025):
        return ["alltoall"]
    return ["alltoall", "deepep"]


def _module_sets(row: dict[str, str], model: ModelSpec) -> list[tuple[str, tuple[str, ...]]]:
    """The selective-recompute sets the row's Megatron-Core release offers: all of
    `selective_module_sets` from core_v0.12 (or when the release is unknown); before it only
    the whole MoE layer (`--moe-layer-recompute`) besides the attention core
    (mcore_release.RECOMPUTE_MODULES_SINCE)."""
    release = mcore_release.megatron_core_release(row.get("framework"), row.get("citation"))
    if mcore_release.offers_recompute_modules(release):
        return selective_module_sets(model)
    return [("selective", ("moe",))] if model.is_moe else []


def selective_module_sets(model: ModelSpec) -> list[tuple[str, tuple[str, ...]]]:
    """Megatron-Core `--recompute-modules` sets a tuning user tries beyond the default
    (core_attn) before full recompute: norms, the MoE expert activation and MLA's
    up-projections — the sets that free the most memory for the least recompute on the model
    (DeepSeek-V3 section 3.2.3; Megatron-Core's MoE guide recommends moe_act/layernorm/
    mla_up_proj for DeepSeek-style models)."""
    mods = ["layernorm"]
    if model.is_moe:
        mods.append("moe_act")
    if model.is_mla:
        mods.append("mla_up_proj")
    sets = [("selective", tuple(mods[:i])) for i in range(1, len(mods) + 1)]
    if model.is_moe:
        sets.insert(0, ("selective", ("moe_act",)))
        # NVIDIA's MoE recipes go further before full recompute: the dense layers' MLP
        # ("mlp": DeepSeek-V3's first three layers) and then the whole MoE layer ("moe"),
        # keeping attention's saved tensors (Megatron-MoE-ModelZoo best_practice/DeepSeekV3/
        # run.sh @c1ad0b5: "mla_up_proj mlp" at 4K, "mla_up_proj moe mlp layernorm" for long
        # context; Megatron-LM deepseek-v3-gb200-optimization @1d9edcf: "mlp moe_act").
        dense = ("mlp",) if model.moe_dense_layers else ()
        if dense:
            sets.append(("selective", (*mods, *dense)))
        whole = tuple("moe" if m == "moe_act" else m for m in mods)
        sets.append(("selective", (*whole, *dense)))
    return sets


MEGATRON_RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "moe_act", "moe", "mlp")
"""Module names Megatron-Core's --recompute-modules accepts that Seer models."""
RECOMPUTE_MODULE_SPELLINGS = {"up_proj": "mla_up_proj"}
"""Other spellings of those names in a flag list: NVIDIA's DeepSeek-V3 GB200 write-up
(Megatron-LM docs/discussions/deepseek-v3-gb200-optimization @1d9edcf, section 1) writes
`--recompute-modules mlp up_proj` for what transformer_config.py (effebd81) calls `mla_up_proj`
("recompute the MLA up projection and RoPE applying parts")."""


def recompute_modules(text: str) -> tuple[str, ...]:
    """Megatron-Core recompute modules named in a recompute cell: the flag's own list
    ("--recompute-modules layernorm moe"), else prose ("RMSNorm + MLA up-projections
    recomputed" → layernorm, mla_up_proj); empty when none is named."""
    low = text.lower()
    flag = re.search(r"--recompute-modules\s+([a-z_ ]+)", low)
    if flag:
        words = [RECOMPUTE_MODULE_SPELLINGS.get(w, w) for w in flag.group(1).split()]
        named_flags = [w for w in words if w in MEGATRON_RECOMPUTE_MODULES]
        if named_flags:
            return tuple(named_flags)
    for group in re.findall(r"\(([^()]*)\)", low):
        # a bracketed list of Megatron's own names: "selective (layernorm, moe, mla_up_proj, mlp)"
        words = [w for w in re.split(r"[\s,+/;]+", group) if w]
        if words and all(w in MEGATRON_RECOMPUTE_MODULES for w in words):
            return tuple(dict.fromkeys(words))
    named = {
        "layernorm": ("norm",),
        "mla_up_proj": ("up-proj", "up proj", "mla"),
        "moe_act": ("swiglu", "moe act", "expert act"),
        "core_attn": ("attention", "core_attn", "selective"),
    }
    return tuple(m for m, keys in named.items() if any(k in low for k in keys))


FP4_AS_FP8 = "fp8 (the row trains in MXFP4; no MXFP4 training recipe is priced, so its GEMMs are timed at the FP8 rate)"
"""How an MXFP4 row is modelled (fp4_format.stated_fp4: MXFP4 named, or an FP4 cell that denies
NVFP4): at the FP8 tensor rate, an upper bound on its GEMM time
(assumption: TE has no MXFP4 training recipe to price; NVFP4 rows take seer/nvfp4.py)."""
NVFP4_READ = (
    "fp8 with NVFP4 GEMMs (the transformer layers' GEMMs at the GPU's FP4 peak, seer/nvfp4.py)"
)
"""How an NVFP4 row (or a bare "FP4" cell, fp4_format.BARE_FP4) is modelled:
ExecutionSpec.fp4_recipe = nvfp4."""


PADDED = re.compile(r"drop[- ]and[- ]pad|pad(?:s|ded|ding)?\b[^;.]{0,30}\bcapacity", re.I)
"""A notes cell stating the experts' inputs were padded to capacity ('drop-and-pad', 'padded
to capacity', '--moe-pad-expert-input-to-capacity')."""


LOGITS_FP32 = re.compile(r"(?:lm[- ]head|logits|output layer)[^;]*?\bfp32\b", re.I)
"""A precision cell stating the output layer ran in FP32 ('LM head (logits) in FP32')."""
FP8_OUTPUT_PROJ = re.compile(r"(?<![\w-])-{0,2}fp8[-_ ]output[-_ ]proj(?:ection)?\b", re.I)
"""A precision cell naming Megatron-Core's `fp8_output_proj` (MLPerf's FP8_OUTPUT_PROJ=True,
`--fp8-output-proj`): the LM head runs under the run's MXFP8 recipe (`cost.fp8_logits`)."""


def states_fp8_output_proj(text: str | None) -> bool:
    """Whether `text` states Megatron-Core's `fp8_output_proj` on: named and not negated, by the
    reader every setting uses (`statements.stated`: "=False", "=0", ": off", "disabled", "no ...",
    "without ...", "not ...")."""
    return bool(stated(FP8_OUTPUT_PROJ, text))


def _precision(row: dict[str, str]) -> str:
    # An unstated mixed precision on Ampere or later: BF16 (same peak as FP16).
    return cells.precision(row.get("precision"), where=f"row {row.get('row_id', '?')}")


def canonical_row(row: dict[str, str]) -> dict[str, str]:
    """The row with its framework cell spelled one way (cells.framework: "Megatron Bridge",
    "core_r0.12.0", "NeMo container 25.02"), and its GPU count and batch cells as plain
    numbers (row_forms.canonical_counts: "128x8", "16K", "MBS/GBS 1/1024"), so every reader
    below (the shipped-configuration match included) sees the same run."""
    for key, raw in row.items():  # a number past float range reads as inf, and no reader
        if cells.overflows(raw):  # can use it
            raise DataError(
                f"row {row.get('row_id', '?')}: column {key!r} = {cells.quoted(raw)} holds "
                "a number too large to read (above 1.8e308)",
                fix="write the figure the source prints",
            )
    counted = row_forms.canonical_counts(row)
    if counted != row:
        row = counted
    fw = row.get("framework")
    if not fw:
        return row
    canon = cells.framework(fw)
    return row if canon == fw else {**row, "framework": canon}


def row_setup(row: dict[str, str], shipped: bool = True) -> RowSetup:
    """Model, fixed execution and system of a row, plus the settings still to choose.
    `shipped`: a Megatron-Bridge row that matches one shipped performance configuration takes
    the settings it leaves unstated from it (shipped_defaults); False reads the row alone."""
    row = canonical_row(row)
    applied = None
    if shipped:
        row, applied = shipped_defaults.apply(row, row_model, lambda r: _gpu(r)[0])
    model = row_model(row)
    gpu, hbm = _gpu(row)
    read: dict[str, Any] = {}
    if applied is not None:
        read["megatron_bridge_config"] = applied.note()
    for key in ("vocab", "global_batch_seqs", "micro_batch"):
        raw = row.get(key) or ""
        if cells.is_hint(raw) and cells.number(raw) is not None:
            read[key] = f"{_int(row, key)} (read from {raw.strip()!r})"
    if model.sliding_window == 0 and SWA_NAME.search(row.get("model_notes") or ""):
        read["sliding_window"] = (
            "not applied (stated off)"
            if stated(SWA_NAME, row.get("model_notes")) is False
            else "not applied (the source names it without a window size)"
        )
    kv_raw = row.get("kv_heads") or ""
    if kv_heads_unstated(kv_raw):
        src = "the bundled config" if _bundled_name(row) else "multi-head attention assumed"
        read["kv_heads"] = f"{model.kv_heads} (unstated: {src})"
    fp4 = stated_fp4(row.get("precision"))
    if fp4 is not None:
        read["precision"] = NVFP4_READ if fp4 == "nvfp4" else FP4_AS_FP8
    zero = cells.zero_stage(row.get("zero_or_fsdp"), _legacy(row))
    zero_open = False
    if zero is None:
        nemo1 = "nemo" in (row.get("framework") or "").lower() and "1.x" in row["framework"]
        # NeMo 1.x recipes train with Apex DistributedFusedAdam, which shards gradients as
        # well as optimizer state (ZeRO-2); Megatron-Core's distributed optimizer is ZeRO-1.
        zero = 0 if _legacy(row) else (2 if nemo1 else 1)
        read["zero"] = f"{zero} (unstated: the framework's default optimizer sharding)"
        zero_open = True  # a user shards more (ZeRO-1..3, DeepSpeed 2020) when it does not fit
    deg = {d: _degree(row, d) for d in DEGREES}
    gpus = _int(row, "num_gpus")
    ex: dict[str, Any] = {
        "global_batch": global_batch_seqs(row),
        "seq_len": _int(row, "seq_len"),
        "precision": _precision(row),
        **({"fp4_recipe": "nvfp4"} if fp4 == "nvfp4" else {}),
        **deg,
        "sp": _sp(row),
        "zero": zero,
        **_framework(row),
    }
    _async_grad_input(row, ex, read)
    if _legacy(row):
        _legacy_overlap(row, ex, read)
    # torch._grouped_mm runs routed experts only (a dense TorchTitan row has none).
    if not model.is_moe:
        ex.pop("moe_torch_grouped_mm", None)
    try:
        ulysses = names_ulysses(
            row.get("framework"), row.get("sp"), row.get("cp"), row.get("notes")
        )
    except ConfigError as exc:
        raise DataError(f"row {row.get('row_id', '?')}: {exc.message}", fix=exc.fix) from None
    if ulysses:
        # DeepSpeed-Ulysses / XTuner sequence parallelism: all-to-alls on heads (ulysses.py).
        ex["cp_algorithm"] = "ulysses"
        ex["ulysses_repeat_kv"] = repeats_kv(row.get("framework"))
    else:
        _cp_comm_type(row, ex, read)
    _cudnn_release(row, ex, read)
    _te_release(row, ex, read)
    if LOGITS_FP32.search(row.get("precision") or ""):
        ex["logits_precision"] = "fp32"  # cost.LOGITS_FP32_RATE
    if states_fp8_output_proj(row.get("precision")):
        if ex["precision"] != "fp8" or fp4 is not None or ex.get("logits_precision") == "fp32":
            raise DataError(
                f"row {row.get('row_id', '?')}: precision = {row.get('precision')!r} states "
                "fp8_output_proj (the LM head under MXFP8) without an MXFP8 run or beside an "
                "FP32 output layer",
                fix="state the FP8 (MXFP8) precision of the run, or drop the FP8 output "
                "projection from the precision cell",
            )
        ex["logits_precision"] = "fp8"  # Megatron-Core fp8_output_proj (cost.fp8_logits)
        read["logits_precision"] = "fp8 (stated: Megatron-Core fp8_output_proj)"
    if runs_bf16_pipe_path(row.get("framework"), ex["precision"]):
        # DeepSpeed's BF16 pipeline engine all-reduces the FP32 gradients (deepspeed_bf16_pipe).
        ex["deepspeed_bf16_pipe"] = True
    gather = row_gather_dtype(row.get("framework"), row.get("zero_or_fsdp"), row.get("notes"))
    if gather is not None and zero in (1, 2):
        # Megatron-LM's distributed optimizer before 57bfa7ca gathers through its FP32 grad
        # buffer (dist_opt_gather.py).
        ex["param_gather_dtype"], read["param_gather"] = gather
    vpp_n = cells.number(row.get("vpp")) if not _unverified(row.get("vpp") or "") else None
    if deg["pp"] and deg["pp"] > 1:
        stages = deg["pp"] * int(vpp_n or 1)
        # Stated in the notes, or beside the degree ("16 (layout 4/4/.../4/1)").
        split = cells.row_layer_split(row, model.layers, stages)
        if split is not None:
            # A layer split the source states (e.g. TorchTitan's "4/4/.../4/1") replaces
            # the uneven default of _search.
            ex["pipeline_layers"] = list(split)
            read["pipeline_layers"] = f"{list(split)} (stated split)"
    scaling = fp8_recipe.row_recipe(row.get("precision"), row.get("notes"), row.get("framework"))
    if ex["precision"] == "fp8" and scaling is not None:
        ex["fp8_recipe"] = scaling  # GEMM rate and cast per recipe (fp8_recipe.py)
        read["fp8_recipe"] = f"{scaling} (stated)"
    _fp8_attention(row, ex, read, scaling, fp4 is not None)
    _fused_grouped_mlp(row, ex, read, scaling, model)
    if scaling != "mxfp8":
        # TE's MXFP8 expert path only under the MXFP8 recipe: a cell whose MXFP8 mention is
        # negated ("FP8 tensorwise, not MXFP8") keeps the BF16 launch count.
        ex.pop("te_mxfp8_stage", None)
    hybrid = hybridep_num_sms(row.get("framework"), row.get("notes"))
    sms = stated_num_sms(row.get("framework"), row.get("notes"))
    if hybrid is not None:
        # The flex dispatcher's HybridEP backend runs its own budget (hybridep_sms).
        ex["deepep_num_sms"] = hybrid[0]
        ex["moe_flex_backend"] = "hybridep"  # its measured NVLink rate (hybridep_rate)
        how = "stated" if hybrid[1] else "Megatron-Core's --moe-hybridep-num-sms default"
        read["deepep_num_sms"] = f"{hybrid[0]} ({how}: HybridEP SM budget)"
    elif sms is not None:
        ex["deepep_num_sms"] = sms  # the DeepEP SM budget the run set (deepep_sm_budget)
        read["deepep_num_sms"] = f"{sms} (stated: DeepEP SM budget)"
    offloaded = stated_offload_modules(row.get("framework"), row.get("notes"))
    if offloaded is not None and model.is_moe:
        # Megatron-Core's fine-grained activation offloading of the experts' inputs.
        ex["offload_modules"] = offloaded[0]
        left = f"; not modelled: {', '.join(offloaded[1])}" if offloaded[1] else ""
        read["offload_modules"] = f"{', '.join(offloaded[0]) or 'none'} (stated{left})"
    balance_text = " ; ".join(
        (_model_text(row), row.get("framework") or "", row.get("notes") or "")
    )
    if states_forced_balance(balance_text):
        ex["moe_load_balance"] = "forced"  # Megatron-Core --moe-router-force-load-balancing
        # TorchTitan's debug router: round-robin expert IDs (round_robin_routing).
        ex["moe_round_robin_routing"] = model.is_moe and round_robin_routing.runs_round_robin(
            row.get("framework"), True, bool(ex.get("moe_fused_dispatch"))
        )
    if model.is_moe and scatter_unpermute.runs_deepep_unpermute(
        row.get("framework"),
        "deepep" if _dispatchers(row, ex) == ["deepep"] else "alltoall",
        bool(ex.get("moe_fused_dispatch")),
    ):
        # TorchTitan's DeepEP permute / unpermute: BF16 atomic scatters (scatter_unpermute).
        ex["moe_atomic_unpermute"] = True
    cap = re.search(r"capacity[- ]factor\D{0,6}(\d+(?:\.\d+)?)", _model_text(row) + " "
                    + (row.get("notes") or ""), re.I)  # fmt: skip
    if cap and "dropless" not in (row.get("notes") or "").lower():
        ex["moe_capacity_factor"] = float(cap.group(1))  # token dropping
        # padded to capacity (--moe-pad-expert-input-to-capacity): static counts, no host wait
        ex["moe_pad_to_capacity"] = bool(PADDED.search(row.get("notes") or ""))
    release = mcore_release.megatron_core_release(row.get("framework"), row.get("citation"))
    if model.is_moe and mcore_release.unpermute_keeps_output(release):
        ex["moe_unpermute_keeps_output"] = True  # Megatron-Core < 0.13 (mcore_release)
    if model.is_moe and sends_probs_all_to_all(release):
        ex["moe_probs_all_to_all"] = True  # Megatron-Core >= 0.13 (moe_probs_a2a)
    shard = cells.zero_shard_ranks(row.get("zero_or_fsdp"), _gpus_per_node(row))
    if shard is not None and zero:
        ex["zero_shard_ranks"] = shard  # hybrid sharding (parallel.zero_shard)
    framework = row.get("framework") or ""
    if zero == 3 and "deepspeed" in framework.lower() and gathers_per_tensor(framework, _year(row)):
        # DeepSpeed ZeRO-3 before v0.6.0 gathered every parameter tensor in its own collective
        # over all DP ranks (deepspeed_flat_gather): comm.PER_PARAMETER_RAILS.
        ex["fsdp_collectives"] = "parameter"
    if zero == 3 and states_megatron_fsdp(row.get("zero_or_fsdp"), row.get("framework")):
        ex["megatron_fsdp"] = True  # Megatron-Core's own FSDP (fsdp_side_window)
    tp, pp, cp = deg["tp"], deg["pp"], deg["cp"]
    if tp and pp and cp and deg["ep"] and not _unverified(row.get("dp", "")):
        ex["dp"] = _int(row, "dp", max(1, gpus // (tp * pp * cp)))
    if (
        (row.get("etp") or "").strip()
        and not _unverified(row["etp"])
        and not cells.says_off(row["etp"])
    ):
        ex["etp"] = _int(row, "etp")
    system: dict[str, Any] = {
        "gpu": gpu,
        "gpus": gpus,
        "gpus_per_node": _gpus_per_node(row),
        "nic_bandwidth": _nic(row, gpu),
    }
    if hbm is not None:
        system["hbm_gib"] = hbm
    gpn_cell = (row.get("gpus_per_node") or "").strip()
    if not gpn_cell:
        read["gpus_per_node"] = f"{system['gpus_per_node']} (unstated: the {gpu} reference host" + (
            ", catalog gpus_per_node_default)"
            if system["gpus_per_node"] != row_forms.DEFAULT_GPUS_PER_NODE
            else ")"
        )
    elif system["gpus_per_node"] != _int(row, "gpus_per_node"):  # the NVLink domain, read as such
        read["gpus_per_node"] = (
            f"{system['gpus_per_node']} (read from {gpn_cell!r}: the rack's NVLink domain, taken "
            f"from the catalog; a {gpu} host is a {system['gpus_per_node']}-GPU compute tray)"
        )
    ic = row.get("interconnect") or ""
    # EFA is read from the interconnect cell, the GPU cell ("p5.48xlarge") and the notes
    # ("EP 16 spans 2 hosts over EFA"); an UNVERIFIED interconnect is not read.
    efa_text = " ; ".join((ic, row.get("gpu") or "", row.get("notes") or ""))
    family = gpu.split("-")[0]
    efa = None if _unverified(ic) else efa_bus_fraction(efa_text, family)
    a2a = None if _unverified(ic) else efa_alltoall_alpha(efa_text, family)
    overrides: dict[str, Any] = {}  # efficiency overrides of the EFA generation the row names
    if efa is not None:
        # First-generation EFA (p4d): NCCL's bus bandwidth across nodes (efa.py).
        overrides["nic_bus_fraction"] = efa
        read["nic_bus_fraction"] = f"{efa:g} (EFA on A100 = p4d/p4de: nccl-tests, efa.py)"
    if a2a is not None:
        # p5/p6 EFA: a fixed time per cross-host NCCL all-to-all (efa_alltoall.py).
        overrides["collective_bus_fractions"] = {"all_to_all": {"nic_alpha_s": a2a}}
        read["all_to_all_fixed"] = (
            f"{a2a * 1e3:g} ms per call (EFA p5/p6: nccl-tests, efa_alltoall.py)"
        )
        frac = efa_a2a_training_fraction(efa_text, family)
        if frac is not None:
            # p5/p6 EFA inside a training step (AWS's Kimi-K2 A/B, efa_training_rate.py).
            overrides["collective_bus_fractions"]["all_to_all"]["nic"] = frac
            read["all_to_all_nic_fraction"] = (
                f"{frac:g} of line rate in training (EFA p5/p6: Kimi-K2 A/B, efa_training_rate.py)"
            )
    if overrides:
        system["efficiency"] = overrides
    cap = re.search(r"(\d{3,4})\s*W\b", row.get("gpu") or "")
    if cap and float(cap.group(1)) < cells.match_gpu(gpu)[0].tdp_w:
        system["power_limit_w"] = float(cap.group(1))
        read["power_limit"] = (
            f"{cap.group(1)} W (below the {cells.match_gpu(gpu)[0].tdp_w:g} W TDP)"
        )
    combos = degree_combos(model, ex, gpus, system["gpus_per_node"],
                           not cells.is_hint(row.get("global_batch_seqs")),
                           etp_open(row, model))  # fmt: skip
    if ex.get("tp") is None and cells.flag(row.get("sp"), r"sp|sequence[- ]parallel(?:ism)?"):
        # Sequence parallelism (Korthikanti et al. 2022, section 4.2.2) splits the sequence
        # over the tensor-parallel group: a row that states it ran TP >= 2.
        combos = [c for c in combos if c["tp"] > 1] or combos
    if not combos:
        open_ = ", ".join(unverified_degrees(ex))
        raise DataError(
            f"row {row['row_id']}: no layout of {gpus} GPUs fits the stated degrees "
            f"(unverified: {open_ or 'none'})",
            fix="check num_gpus, tp, pp, cp, ep and the global batch",
        )
    options = [(c, _choices(row, model, {**ex, **c}, gpus, gpu)) for c in combos]
    mb_raw = row.get("micro_batch") or ""
    if torchtitan_pp.is_torchtitan(row.get("framework")) and _unverified(mb_raw):
        mbs = {m for _, o in options for m in o["micro_batch"]}
        month = torchtitan_pp.release_month(row.get("framework"))
        if len(mbs) == 1 and all(c["pp"] > 1 for c in combos):
            when = f"{month[0]}-{month[1]:02d}" if month else "its release"
            read["micro_batch"] = (
                f"{mbs.pop()} (TorchTitan's default micro-batching as of {when}, torchtitan_pp)"
            )
    if zero_open:
        read.pop("zero")  # printed with the choice
        for _, opts in options:
            opts["zero"] = list(range(zero, 4))
    layout = (
        None
        if "pipeline_layers" in ex
        else layout_recipe(row["model"], row.get("framework"), row.get("citation"))
    )
    return RowSetup(model, ex, system, options, read, layout, applied)


def _sp(row: dict[str, str]) -> bool:
    """Sequence parallelism: the sp cell's yes/no ("yes", "SP on", "true", "disabled"); when
    it says neither, on for current stacks (Megatron-Core requires it with TP) and off before
    2023."""
    stated = cells.flag(row.get("sp"), r"sp|sequence[- ]parallel(?:ism)?")
    return stated if stated is not None else not _legacy(row)


def etp_open(row: dict[str, str], model: ModelSpec) -> bool:
    """Whether an MoE row leaves its expert TP UNVERIFIED: Seer then chooses it with the other
    open degrees (degrees.degree_combos), fastest layout that fits, and prints it. An empty
    cell is Megatron's default (1 with EP), as an empty cp or ep cell is 1."""
    raw = (row.get("etp") or "").strip()
    return model.is_moe and bool(raw) and _unverified(raw)


def _degree(row: dict[str, str], key: str) -> int | None:
    """A parallel degree the row states (empty cp/ep: 1), or None when it is UNVERIFIED
    (with or without a hinted number): Seer then chooses it."""
    raw = (row.get(key) or "").strip()
    if _unverified(raw):
        return None
    if (not raw and key in ("cp", "ep")) or cells.says_off(raw):
        return 1  # "none", "no", "n/a", "-": the dimension is not split
    return _int(row, key)


def row_job_options(row: dict[str, str]) -> tuple[ModelSpec, dict[str, Any], dict[str, Any]]:
    """Model, fixed execution fields and system of a row (UNVERIFIED fields left out)."""
    st = row_setup(row)
    return st.model, st.execution, st.system


def _fit_batch(ex: dict[str, Any], gpus: int, approximate: bool) -> dict[str, Any]:
    """An approximate global batch ("~1024") rounded to a multiple of the data-parallel
    width, as a user launching that layout must (exact batches are left alone)."""
    if not approximate:
        return ex
    dp = ex.get("dp") or gpus // (ex["tp"] * ex["pp"] * ex["cp"])
    step = dp * ex["micro_batch"]
    gb = max(step, int(round(ex["global_batch"] / step)) * step)
    return {**ex, "global_batch": gb}


def _candidates(
    st: RowSetup, approx_batch: bool
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(chosen settings, full execution) for every combination of open settings."""
    for degrees, options in st.options:
        keys = list(options)
        for combo in itertools.product(*(options[k] for k in keys)):
            opts = {**degrees, **dict(zip(keys, combo, strict=True))}
            if isinstance(opts.get("recompute"), tuple):  # ("selective", modules)
                opts["recompute"], opts["recompute_modules"] = opts["recompute"]
            ex = {**st.execution, **opts}
            yield opts, _fit_batch(ex, st.system["gpus"], approx_batch)


def as_published(row: dict[str, str], pred: Prediction) -> tuple[float, float, dict[str, str]]:
    """Seer's step time and TFLOP/s per GPU as the row's published figure reads them, with a
    note per reading applied: a whole-run production average (`goodput`) and XTuner's
    per-micro-step ThroughputHook figure (`xtuner_throughput`); otherwise Seer's step as is.
    `validate_row` compares these; scripts that solve for a published step use them too."""
    conv = _convention(row)
    read: dict[str, str] = {}
    predicted_s, predicted_tf = pred.iteration_s, pred.tflops_per_gpu(conv)
    if goodput.states_production_average(row):
        # A whole-run average (GPU-hours / iterations): steady state over the run's ETTR.
        gp = goodput.goodput(_int(row, "num_gpus"), pred.job.system.gpu,
                             _gpus_per_node(row))  # fmt: skip
        predicted_s, predicted_tf = gp.wall_clock_s(predicted_s), predicted_tf * gp.ettr
        read["goodput"] = (
            f"ETTR {gp.ettr:.3f} (production average; MTTF {gp.mttf_h:.1f} h, "
            f"{gp.lost_h_per_interruption:.2f} h lost per interruption; seer.goodput)"
        )
    accumulation = pred.layout.micro_batches
    if accumulation > 1 and xtuner_throughput.reads_hook_figure(
        row.get("framework"), row.get("metric_primary"), row.get("tflops_flop_convention")
    ):
        # XTuner's ThroughputHook prints one micro-step's time (xtuner_throughput.py).
        step_s = predicted_s
        predicted_s = xtuner_throughput.comparable_step_s(
            step_s, pred.timeline.boundary_s, accumulation
        )
        predicted_tf *= step_s / predicted_s
        read["published_figure"] = (
            f"XTuner ThroughputHook: one micro-step of {accumulation} (without the "
            f"{pred.timeline.boundary_s:.2f} s accumulation-boundary work; xtuner_throughput)"
        )
    return predicted_s, predicted_tf, read


def validate_row(row: dict[str, str], alternatives: bool = False) -> RowResult:
    """Predict one row, choosing its UNVERIFIED settings as a tuning user of its framework
    would: the fastest candidate that fits in memory. `alternatives`: also keep every other
    memory-feasible combination of those settings with its error (`RowResult.alternatives`,
    for seer.spread), read from the same search's predictions; a row whose settings were tuned
    at another scale (tuned_at) takes one more search, over its own scale's candidates."""
    row = canonical_row(row)
    missing = [c for c in REQUIRED if not (row.get(c) or "").strip()]
    if missing:
        raise DataError(f"row {row.get('row_id', '?')}: empty columns {missing}", fix="fill them")
    st = row_setup(row)
    model, ex = st.model, st.execution
    approx_batch = cells.is_hint(row.get("global_batch_seqs"))
    open_degrees = unverified_degrees(ex) + (["etp"] if etp_open(row, model) else [])
    held: dict[str, Any] | None = None
    scale = tuned_at.tuning_scale(row.get("notes"), global_batch_seqs(row))
    if scale is not None and scale != (_int(row, "num_gpus"), global_batch_seqs(row)):
        # Settings tuned at another scale and held fixed (tuned_at): choose them there.
        try:
            ref_best, _, _ = _search(row_setup(tuned_at.reference_row(row, *scale)), False)
        except StarfabricError:
            ref_best = None  # no run of this layout at that scale: choose at the row's own
        if ref_best is not None:
            held = {k: v for k, v in ref_best[2].items() if k not in (*DEGREES, "etp")}
    keys = _open_keys(st)
    found: list[tuple[dict[str, Any], float]] = []

    def seen(cand: Candidate) -> None:
        # Only the open settings and the error are kept, not the Prediction (memory).
        found.append(({k: v for k, v in cand[2].items() if k in keys}, _error(row, model, cand)))

    collect = seen if alternatives else None
    best, fallback, reason = _search(st, approx_batch, held, None if held is not None else collect)
    if best is None and held is not None:
        best, fallback, reason = _search(st, approx_batch, seen=collect)  # held do not fit
        held = None
    elif held is not None and collect is not None:
        _search(st, approx_batch, seen=collect)  # every open setting at the row's own scale
    chosen = best or fallback
    if chosen is None:
        raise DataError(
            f"row {row['row_id']}: cannot be predicted (tp={ex['tp']}, pp={ex['pp']}, "
            f"dp={ex.get('dp')}): {reason}",
            fix="check the row's GPU and parallel columns",
        )
    _, pred, opts, full = chosen
    mine = {k: v for k, v in opts.items() if k in keys}
    alts = tuple(Alternative(a, e, best is not None and a == mine) for a, e in found)
    choices: dict[str, Any] = {
        k: v for k, v in opts.items() if k not in DEGREES or k in open_degrees
    }
    for d in open_degrees:
        choices[d] = f"{opts[d]} (unverified: fastest layout that fits)"
    if held is not None and scale is not None:
        for k in ("vpp", "micro_batch", "recompute"):
            if k in choices:
                choices[k] = f"{choices[k]} (as tuned at {scale[0]} GPUs, global batch {scale[1]})"
    choices.update(st.read)
    if full.get("tp_comm_overlap"):
        choices.pop("tp_async_backward", None)  # userbuffers took every TP collective
    if full["global_batch"] != ex["global_batch"]:
        choices["global_batch"] = f"{full['global_batch']} (approximate batch rounded to dp)"
    if "pipeline_layers" in full:
        choices["pipeline_layers"] = full["pipeline_layers"]
    if best is None:
        choices["note"] = "every candidate exceeds GPU memory; least-memory setting used"
    elif len(_recompute_options(st)) > 1 and opts["recompute"] != "none":
        choices["recompute"] = f"{opts['recompute']} (no faster setting fits in memory)"
    if st.shipped is not None:
        taken = {t.split(" ")[0] for t in st.shipped.taken}
        for key, name in (("recompute", "recompute"), ("moe_dispatcher", "dispatcher")):
            if key in choices and name in taken:
                choices[key] = (f"{choices[key]} (from Megatron-Bridge {shipped_defaults.RELEASE}"
                                f" performance config {st.shipped.config})")  # fmt: skip
    conv = _convention(row)
    predicted_s, predicted_tf, read = as_published(row, pred)
    choices.update(read)
    row_used = dict(row, global_batch_seqs=str(full["global_batch"]))
    published = published_iteration_s(row_used, model)
    tf = _figure_cell(row, "tflops_per_gpu")
    pub_tf = (
        _measured(row, "tflops_per_gpu", tf, _tflops_bound())  # in its unit ("0.5 PFLOP/s")
        if tf
        else _convention_flops(row_used, model, conv) / (published * _int(row, "num_gpus")) / 1e12
    )
    return RowResult(
        row_id=row["row_id"],
        model=row["model"],
        gpus=_int(row, "num_gpus"),
        published_iter_s=published,
        predicted_iter_s=predicted_s,
        published_tflops=pub_tf,
        predicted_tflops=predicted_tf,
        convention=conv,
        choices=choices,
        prediction=pred,
        source=row.get("source_id") or row["row_id"].rsplit("-", 1)[0],
        alternatives=alts,
    )


Candidate = tuple[float, Prediction, dict[str, Any], dict[str, Any]]


def _open_keys(st: RowSetup) -> set[str]:
    """The settings a row leaves open, as `_candidates` varies them: those with more than one
    value across its layouts (unverified parallel degrees included); recompute's module set
    goes with recompute."""
    values: dict[str, set[str]] = {}
    for degrees, options in st.options:
        for k, vals in {**{d: [x] for d, x in degrees.items()}, **options}.items():
            values.setdefault(k, set()).update(map(repr, vals))
    keys = {k for k, v in values.items() if len(v) > 1}
    return keys | {"recompute_modules"} if "recompute" in keys else keys


def _error(row: dict[str, str], model: ModelSpec, cand: Candidate) -> float:
    """A candidate's signed error as `validate_row` computes the chosen one's: Seer's step read
    as the published figure (`as_published`) over the published step at the candidate's batch."""
    _, pred, _, full = cand
    predicted_s = as_published(row, pred)[0]
    used = dict(row, global_batch_seqs=str(full["global_batch"]))
    return predicted_s / published_iteration_s(used, model) - 1.0


def _search(
    st: RowSetup,
    approx_batch: bool,
    held: dict[str, Any] | None = None,
    seen: Callable[[Candidate], None] | None = None,
) -> tuple[Candidate | None, Candidate | None, str]:
    """(fastest candidate that fits, least-memory candidate, first refusal) over the row's
    open settings; `held`: only the candidates with these settings (tuned_at); `seen`: called
    with every candidate that fits in memory (seer.spread)."""
    model, system = st.model, st.system
    best: Candidate | None = None
    fallback: Candidate | None = None
    reason = ""
    for opts, full in _candidates(st, approx_batch):
        if held is not None and any(opts.get(k) != v for k, v in held.items()):
            continue
        chunks = full["pp"] * full.get("vpp", 1)
        if len(full.get("pipeline_layers") or ()) not in (0, chunks):
            full.pop("pipeline_layers")  # a stated split (row_setup) of another layout
        recipe_layers = (
            recipe_split(st.layout_recipe, model.layers, full["pp"], full.get("vpp", 1))
            if st.layout_recipe
            else None
        )
        if "pipeline_layers" in full:
            pass  # the split the row states (row_setup)
        elif recipe_layers is not None:
            # The Megatron-Bridge recipe's own (PP, VPP) layout map (bridge_layout).
            full["pipeline_layers"] = list(recipe_layers)
        elif model.layers % chunks and model.layers >= chunks - 2:
            # Uneven pipelines: the first and last (virtual) stages, which also hold the
            # embedding and the loss, take one layer fewer (Llama 3 section 3.3.2).
            full["pipeline_layers"] = list(uneven_pipeline_layers(model.layers, chunks))
        try:
            pred = predict(make_job(model, full, system))
        except StarfabricError as exc:
            reason = reason or exc.message
            continue
        cand = (pred.iteration_s, pred, opts, full)
        if not pred.memory.oom and seen is not None:
            seen(cand)
        if not pred.memory.oom and (best is None or cand[0] < best[0]):
            best = cand
        if fallback is None or pred.memory.total < fallback[1].memory.total:
            fallback = cand
    return best, fallback, reason


def fastest_fitting(
    row: dict[str, str], shipped: bool = True
) -> tuple[Candidate | None, Candidate | None, str]:
    """(fastest candidate that fits, least-memory candidate, first refusal) over the settings
    a row leaves open, as `validate_row` searches them (without its tuned-at-scale hold);
    a row needs no published figure for this. `shipped`: as `row_setup`'s."""
    row = canonical_row(row)
    return _search(row_setup(row, shipped), cells.is_hint(row.get("global_batch_seqs")))


def _recompute_options(st: RowSetup) -> list[Any]:
    return st.options[0][1]["recompute"]


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """Rows of a published-runs CSV (UTF-8, with or without the byte-order mark spreadsheets
    write); a file without the required columns or without rows, with a column named twice or
    a row of more cells than the header, not UTF-8 text, or not parseable by the csv module (a
    field over its size limit) is a DataError. A row of fewer cells has the rest empty; a column
    with a blank name (a spreadsheet's empty columns) is dropped, and a value under one refused."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: no such file", fix="check the --csv path")
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            names = next(reader, [])
            cols = set(names)
            lacking = [c for c in REQUIRED if c not in cols]
            if lacking:
                raise DataError(
                    f"{p}: missing columns {lacking}", fix="use the published_runs layout"
                )
            # a blank name is no column (a spreadsheet's empty columns past the data)
            blank = [i for i, c in enumerate(names) if not c.strip()]
            twice = sorted({c for c in names if c.strip() and names.count(c) > 1})
            if twice:
                raise DataError(
                    f"{p}: columns {twice} appear more than once in the header",
                    fix="keep one column of each name",
                )
            rows = []
            for line in reader:
                if not line:  # a blank line, skipped as csv.DictReader skips it
                    continue
                full = line + [""] * (len(names) - len(line))  # a short row: the rest empty
                row = dict(zip(names, full, strict=False))
                if len(line) > len(names):
                    raise DataError(
                        f"{p}: line {reader.line_num}: row {cells.quoted(row.get('row_id'))} has "
                        f"{len(line)} cells, the header {len(names)}",
                        fix="quote cells that hold commas, or remove the extra cells",
                    )
                stray = next((full[i] for i in blank if full[i].strip()), None)
                if stray is not None:
                    raise DataError(
                        f"{p}: line {reader.line_num}: row {cells.quoted(row.get('row_id'))} has "
                        f"{cells.quoted(stray)} under a column with no name",
                        fix="name the column in the header, or delete the cell",
                    )
                rows.append({k: v for k, v in row.items() if k.strip()})
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{p}: not UTF-8 text (byte {exc.start}: {exc.reason})",
            fix="save the CSV as UTF-8",
        ) from None
    except csv.Error as exc:
        raise DataError(
            f"{p}: not a readable CSV ({exc})", fix="check the file's quoting and field sizes"
        ) from None
    if not rows:
        raise DataError(
            f"{p}: a header and no rows", fix="add one row per published run under the header"
        )
    return rows


def validate(path: str | Path | None = None) -> list[RowResult]:
    """Predict every row of the CSV (default: the bundled Megatron weak-scaling table)."""
    return [validate_row(r) for r in read_rows(path or bundled_csv())]


def validate_all(
    path: str | Path | None = None, progress: Callable[[], None] | None = None
) -> tuple[list[RowResult], list[tuple[str, str]]]:
    """Like `validate`, but a row Seer cannot predict (unknown GPU, unsupported layout) is
    returned as (row_id, one-line reason) instead of stopping the run; `progress` is called
    once per row read."""
    done: list[RowResult] = []
    failed: list[tuple[str, str]] = []
    for row in read_rows(path or bundled_csv()):
        why = excluded_reason(row)
        if why is not None:
            failed.append((row.get("row_id", "?"), EXCLUDED_PREFIX + why))
        else:
            try:
                done.append(validate_row(row))
            except StarfabricError as exc:
                failed.append((row.get("row_id", "?"), exc.one_line()))
        if progress is not None:
            progress()
    return done, failed


def summary(
    results: list[RowResult], failed: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """JSON-ready per-row errors, the mean/max absolute error, rows not predicted and rows
    EXCLUDED from comparison (each with its reason)."""
    errs = [abs(r.error) for r in results]
    failed = failed or []
    return {
        "not_predicted": [
            {"row_id": rid, "reason": why}
            for rid, why in failed
            if not why.startswith(EXCLUDED_PREFIX)
        ],
        "excluded": [
            {"row_id": rid, "reason": why.removeprefix(EXCLUDED_PREFIX)}
            for rid, why in failed
            if why.startswith(EXCLUDED_PREFIX)
        ],
        "rows": [
            {
                "row_id": r.row_id,
                "model": r.model,
                "gpus": r.gpus,
                "published_iter_s": r.published_iter_s,
                "predicted_iter_s": r.predicted_iter_s,
                "error": r.error,
                "published_tflops_per_gpu": r.published_tflops,
                "predicted_tflops_per_gpu": r.predicted_tflops,
                "flop_convention": r.convention,
                "choices": r.choices,
                "breakdown_s": r.prediction.breakdown,
                "memory_gib": r.prediction.memory.total / 2**30,
                "classes": classes_of(r.prediction),
            }
            for r in results
        ],
        "mean_abs_error": sum(errs) / len(errs) if errs else 0.0,
        "max_abs_error": max(errs) if errs else 0.0,
        "per_source": per_source(results),
        "per_class": per_class(results),
    }


def per_source(results: list[RowResult]) -> dict[str, dict[str, float]]:
    """Rows, mean and max |error| of the iteration time per source (the CSV's source_id)."""
    out: dict[str, dict[str, float]] = {}
    for src in sorted({r.source for r in results}):
        errs = [abs(r.error) for r in results if r.source == src]
        out[src] = {"rows": len(errs), "mean_abs_error": sum(errs) / len(errs),
                    "max_abs_error": max(errs)}  # fmt: skip
    return out


def plot_validation(results: list[RowResult], path: str | Path) -> Path:
    """Predicted vs published iteration time (log-log) with the ±10% band, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pub = [r.published_iter_s for r in results]
    pred = [r.predicted_iter_s for r in results]
    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    lo, hi = min(pub + pred) * 0.8, max(pub + pred) * 1.25
    ax.plot([lo, hi], [lo, hi], color="black", lw=1)
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], alpha=0.15, label="±10%")
    for src in sorted({r.row_id.split("-")[0] for r in results}):
        sel = [r for r in results if r.row_id.split("-")[0] == src]
        ax.scatter(
            [r.published_iter_s for r in sel], [r.predicted_iter_s for r in sel], label=src, s=18
        )
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
           xlabel="published iteration time (s)", ylabel="Seer predicted (s)")  # fmt: skip
    ax.legend()
    ax.set_title("Seer vs published training runs")
    from starfabric.outputs import save_figure

    fig.tight_layout()
    p = save_figure(fig, path, dpi=120)
    plt.close(fig)
    return p


__all__ = [
    "EXCLUDED",
    "UNDEFINED",
    "Alternative",
    "RowResult",
    "RowSetup",
    "as_published",
    "bundled_csv",
    "canonical_row",
    "excluded_reason",
    "fastest_fitting",
    "per_source",
    "plot_validation",
    "published_iteration_s",
    "read_rows",
    "row_model",
    "row_setup",
    "summary",
    "validate",
    "validate_all",
    "validate_row",
]
