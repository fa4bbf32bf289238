"""A results row that names Megatron-Bridge runs the shipped performance configuration it matches.

A results table of Megatron-Bridge runs states GPUs, precision, global and micro batch, sequence
length, TP/PP/CP/VP/EP and a throughput, not the settings the run used besides: the MoE token
dispatcher (alltoall, or the flex dispatcher's DeepEP/HybridEP backend), EP all-to-all overlap,
CUDA graphs, recompute, the optimizer moments' dtype, the MTP depth, the pipeline layout,
forced load balancing, the FP8 recipe. Megatron-Bridge's performance scripts ship those settings
per workload (`scripts/performance/configs/{deepseek,qwen}/*_workload_base_configs.py` with the
pretrain functions, recipes and precision configs they apply; v0.5.0, fcbb603; transcribed in
`published_runs/megatron_bridge_moe_perf_v050.csv`, a copy of
tests/data/shipped_configs/megatron_bridge_moe_perf.csv, whose .md gives provenance).

**Rule.** A row that names Megatron-Bridge (framework cell or citation:
`bridge_layout.names_bridge`) is compared with the configurations of its model (by shape:
layers, hidden, heads, experts, top-k, expert FFN) on its GPU (catalog name) on every key field
— precision (BF16, FP8 by recipe, NVFP4), GPU count, TP, PP, VPP, CP, EP, micro-batch, global
batch, sequence length. A field the row states must equal the configuration's. A field the row
leaves unstated (empty or UNVERIFIED, a hint such as "~1024") matches only when every
configuration of that model on that GPU has one value for it (the configuration set offers a
single candidate: e.g. sequence 4,096 and CP 1 everywhere), otherwise the row matches nothing.
An FP8 cell naming no recipe matches the FP8 configurations: where that model's FP8
configurations on that GPU use one recipe, as if it were named; where they use several, the
FP8 configurations left by the other fields give their settings only if they differ in nothing
but the recipe and the FP8 parameter gather (`RECIPE_ONLY_COLUMNS`; DeepSeek-V3 H100 FP8_CS_V1
and FP8_SC_V1), and the recipe is not taken (the row's FP8 is timed as an FP8 cell naming no
recipe is). When exactly one configuration remains, every setting the row does not mention (a
mention, even negated — "CUDA graphs off" — is the row's own statement) is taken from it, as
the configuration's own cell text (so Seer reads it exactly as it reads the configuration
row), and the row's choices print
"from Megatron-Bridge v0.5.0 performance config <name>". What the row states always wins; no
match, or several: the row is read as before (Seer's fastest setting that fits).

**What an exact match limits.** The configurations are v0.5.0's; a row of another release may
have run other settings under the same name. Requiring every stated layout field to equal a
v0.5.0 workload (not the nearest one) takes settings only for layouts that release ships; a
layout that changed between releases (another PP, VPP, EP, micro-batch or batch) matches
nothing and keeps Seer's own search. A release that kept a layout and changed, say, its
dispatcher or recompute is not caught: that risk remains.

Not taken, because Seer has no setting for them: FP8/FP4 parameter all-gather, the CuTe DSL fused
grouped MLP, `grad_reduce_in_fp32`, the CUDA-graph scope beyond "graphs on".
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from starfabric.astral.seer import cells, fp8_recipe, overlap_words
from starfabric.astral.seer.bridge_layout import names_bridge
from starfabric.astral.seer.fp4_format import stated_fp4
from starfabric.astral.seer.model import ModelSpec

RELEASE = "v0.5.0"
"""The Megatron-Bridge release whose performance configurations are bundled (fcbb603)."""
CONFIG_FILE = "megatron_bridge_moe_perf_v050.csv"

KEY_FIELDS = (
    "precision", "num_gpus", "tp", "pp", "vpp", "cp", "ep",
    "micro_batch", "global_batch_seqs", "seq_len",
)  # fmt: skip
"""The fields a results table states and the match compares (besides model and GPU)."""
FILLABLE_KEYS = ("vpp", "cp", "micro_batch", "seq_len")
"""Key fields a row may leave unstated and still match (when the configuration set has one
value for them): taken from the configuration then."""


def precision_class(raw: str | None) -> str | None:
    """'bf16', 'fp16', 'fp8:<recipe>', 'fp8' (FP8 naming no recipe), 'nvfp4'/'mxfp4', or None
    when the cell states none (`cells.no_value`: empty, UNVERIFIED, "n/a", "-")."""
    if cells.no_value(raw):  # empty, UNVERIFIED, "n/a", "-": unstated, not BF16
        return None
    text = raw or ""
    fp4 = stated_fp4(text)  # negated FP4 mentions state nothing ("FP8, no FP4")
    if fp4 is not None:
        return fp4
    kind = cells.precision(text)
    if kind != "fp8":
        return kind
    # Megatron-Bridge's own names (FP8-CS / FP8-MX / FP8-SC, the `*_FP8_CS_*` workloads) are
    # read by fp8_recipe, negations honoured ("FP8, not CS").
    recipe = fp8_recipe.stated_recipe(text)
    return f"fp8:{recipe}" if recipe else "fp8"


def _cell_int(row: dict[str, str], key: str) -> int | None:
    raw = (row.get(key) or "").strip()
    if key in ("cp", "ep") and (not raw or cells.says_off(raw)):
        return 1  # an empty cp/ep column: not split (validate._degree)
    if key == "vpp" and raw and cells.says_off(raw):
        return 1  # "none", "-": no interleaving
    if cells.unverified(raw) or cells.is_hint(raw):
        return None
    val = cells.number(raw, binary=key == "seq_len")
    return None if val is None else int(val)


def row_key(row: dict[str, str]) -> dict[str, object | None]:
    """The key fields a row states (None where it leaves one unstated)."""
    key: dict[str, object | None] = {k: _cell_int(row, k) for k in KEY_FIELDS if k != "precision"}
    key["precision"] = precision_class(row.get("precision"))
    return key


def _shape(model: ModelSpec) -> tuple[int, ...]:
    return (model.layers, model.hidden, model.heads, model.moe_experts, model.moe_topk,
            model.moe_ffn_hidden)  # fmt: skip


@dataclass(frozen=True)
class ShippedConfig:
    """One shipped performance configuration: its name, cells, GPU and model shape."""

    name: str
    row: dict[str, str]
    gpu: str
    shape: tuple[int, ...]
    key: dict[str, object | None]


def _config_shape(row: dict[str, str]) -> tuple[int, ...]:
    return tuple(int(row[k]) for k in ("layers", "hidden", "heads", "moe_experts", "moe_topk",
                                       "moe_ffn_hidden"))  # fmt: skip


def config_csv() -> Path:
    """The bundled configurations (Megatron-Bridge v0.5.0 MoE performance scripts)."""
    with resources.as_file(
        resources.files("starfabric.astral.seer") / "published_runs" / CONFIG_FILE
    ) as p:
        return Path(p)


@lru_cache(maxsize=1)
def configurations() -> tuple[ShippedConfig, ...]:
    """Every bundled configuration, read once."""
    with config_csv().open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return tuple(
        ShippedConfig(
            name=r["mb_config"],
            row=r,
            gpu=cells.match_gpu(r["gpu"])[0].name,
            shape=_config_shape(r),
            key=row_key(r),
        )
        for r in rows
    )


@dataclass(frozen=True)
class Match:
    """The configuration a row matches (None: no match, or several) and why."""

    config: ShippedConfig | None
    reason: str
    recipe_open: tuple[str, ...] = ()
    """Names of the configurations an FP8 row naming no recipe matches when they differ only in
    their recipe (`RECIPE_ONLY_COLUMNS`): `config` is the first, whose settings they share;
    the recipe is not taken."""


RECIPE_ONLY_COLUMNS = frozenset({"row_id", "citation", "mb_config", "precision", "param_gather"})
"""Columns in which configurations of one layout may differ and still give an FP8 row that
names no recipe one set of settings: the recipe itself (left unstated) and the FP8 parameter
all-gather (not taken). E.g. DeepSeek-V3 on H100: FP8_CS_V1 and FP8_SC_V1."""


def _same_but_recipe(configs: list[ShippedConfig]) -> bool:
    rows = [{k: v for k, v in c.row.items() if k not in RECIPE_ONLY_COLUMNS} for c in configs]
    return all(r == rows[0] for r in rows[1:])


def _fp8_unstated_recipe(value: object, pool: Iterable[ShippedConfig]) -> bool:
    """An FP8 cell naming no recipe matches when the pool's FP8 configurations use one."""
    recipes = {c.key["precision"] for c in pool if str(c.key["precision"]).startswith("fp8")}
    return value == "fp8" and len(recipes) == 1


def match(row: dict[str, str], model: ModelSpec, gpu: str) -> Match:
    """The one configuration whose key a row names (the module's rule), if any."""
    if not names_bridge(row.get("framework"), row.get("citation")):
        return Match(None, "the row does not name Megatron-Bridge")
    pool = [c for c in configurations() if c.gpu == gpu and c.shape == _shape(model)]
    if not pool:
        return Match(None, f"no shipped configuration of this model on {gpu}")
    key = row_key(row)
    left = list(pool)
    recipe_open = False
    for field in KEY_FIELDS:
        value = key[field]
        if field == "precision" and value == "fp8":
            recipe_open = not _fp8_unstated_recipe(value, pool)
            left = [c for c in left if str(c.key["precision"]).startswith("fp8")]
        elif value is None:
            if len({c.key[field] for c in pool}) != 1:
                return Match(None, f"{field} unstated and the configurations differ in it")
        else:
            left = [c for c in left if c.key[field] == value]
    if recipe_open:
        # FP8 naming no recipe: whichever FP8 recipe the row ran, its configuration at this
        # layout is one of `left` (they cover every FP8 recipe of the pool) and they agree
        recipes = {c.key["precision"] for c in pool if str(c.key["precision"]).startswith("fp8")}
        if left and {c.key["precision"] for c in left} == recipes and _same_but_recipe(left):
            return Match(left[0], "", tuple(c.name for c in left))
        return Match(None, "FP8 naming no recipe, and the recipes' configurations differ")
    if len(left) != 1:
        return Match(None, "no configuration has this layout" if not left else
                     f"{len(left)} configurations have this layout")  # fmt: skip
    return Match(left[0], "")


@dataclass(frozen=True)
class Setting:
    """A setting a row may state in its text cells, and how the configuration's is taken."""

    name: str
    mention: Callable[[str], object]
    """Truthy when a text mentions the setting: any mention (stated or negated) in `cells`
    counts as the row stating the setting (a pattern's `search`, or a reader)."""
    cells: tuple[str, ...]
    """The row cells searched for a mention."""
    fact: str
    """The configuration's fact column printed with the choice."""
    not_a_mention: re.Pattern[str] | None = None
    """Text removed from the row's cells before `mention` is searched: words that look like
    the setting but describe something else (the model's own balancing loss or bias)."""


def _mentions_ep_overlap(text: str) -> bool:
    """Whether a text states EP all-to-all overlap, on or off (overlap_words), or names
    `--delay-wgrad-compute`."""
    said = overlap_words.read_overlap(text).said(overlap_words.OverlapKind.EP_A2A)
    return said is not overlap_words.Said.UNSTATED or bool(overlap_words.DELAY_WGRAD.search(text))


_TEXT_SETTINGS = (
    Setting("dispatcher",
            re.compile(r"dispatcher|deep[-_ ]?ep|hybrid[-_ ]?ep|\bflex\b", re.I).search,
            ("framework", "notes", "model_notes"), "dispatcher"),
    Setting("EP overlap", _mentions_ep_overlap, ("framework", "notes"), "ep_a2a_overlap"),
    Setting("CUDA graphs", re.compile(r"cuda[-_ ]?graph", re.I).search, ("framework", "notes"),
            "cuda_graph_impl"),
    Setting("optimizer moments",
            re.compile(r"optimi[sz]er[- ]states?|\bmoments?\b|precision[- ]aware|exp[-_]avg|"
                       r"main[- ]grads?", re.I).search,
            ("framework", "notes", "precision"), "optimizer_moments"),
    Setting("pipeline layout",
            re.compile(r"pipeline[-_ ](?:model[-_ ]parallel[-_ ])?layout|layers per (?:virtual )?"
                       r"(?:pipeline )?stage", re.I).search,
            ("notes", "pp", "vpp"), "pp_layout"),
    Setting("routing balance",
            re.compile(r"balanc|round[- ]robin|dropless|capacity[- ]factor|token[- ]drop",
                       re.I).search,
            ("model", "model_notes", "framework", "notes"), "notes",
            re.compile(r"aux(?:iliary)?[- ]loss[- ]free(?:\s+(?:load[- ])?balanc\w*)?|"
                       r"(?:load[- ])?balanc\w*[- ](?:loss|bias)|"
                       r"(?:seq(?:uence)?[-_ ]?(?:wise|level)?[-_ ])?aux(?:iliary)?[-_ ]loss", re.I)),
)  # fmt: skip
"""Settings the configurations state in their framework and notes cells; the configuration's
segments (framework: after the first comma; notes: ';'-separated) that mention a setting the
row does not are appended to the row's same cell. The model's own balancing (DeepSeek-V3's
auxiliary-loss-free bias, a sequence-wise balance loss, an aux loss) is not the run's routing
balance: Megatron-Core computes the loss and applies the bias under
--moe-router-force-load-balancing too, so a row describing them still takes the
configuration's forced balancing."""

MTP = re.compile(r"\bMTP\b|mtp[_-]num[_-]layers|multi[- ]token[- ]prediction", re.I)
"""A mention of multi-token prediction (validate._mtp_layers reads its depth)."""


def _segments(text: str, sep: str) -> list[str]:
    return [s.strip() for s in text.split(sep) if s.strip()]


@dataclass(frozen=True)
class Applied:
    """What was taken from the configuration."""

    config: str
    taken: tuple[str, ...]
    """'setting: value' for every setting taken."""

    def note(self) -> str:
        what = "; ".join(self.taken) if self.taken else "nothing left unstated"
        return f"{what} (from Megatron-Bridge {RELEASE} performance config {self.config})"


def _states_split(row: dict[str, str], config: ShippedConfig) -> bool:
    """Whether the row's notes/pp/vpp state a per-stage layer split Seer reads
    (`cells.row_layer_split` over the configuration's layers and PP x VPP stages, as validate reads
    it). A bare slash list that is no such split ("TP/PP/CP/EP = 1/4/1/64", a date
    "2025/11/03") is not a layout."""
    vpp = config.key["vpp"] if isinstance(config.key["vpp"], int) else 1
    pp = config.key["pp"] if isinstance(config.key["pp"], int) else 1
    return cells.row_layer_split(row, config.shape[0], pp * vpp) is not None


def _mentions(row: dict[str, str], setting: Setting, config: ShippedConfig | None = None) -> bool:
    def text(cell: str) -> str:
        raw = row.get(cell) or ""
        return setting.not_a_mention.sub(" ", raw) if setting.not_a_mention else raw

    if any(setting.mention(text(c)) for c in setting.cells):
        return True
    return setting.fact == "pp_layout" and config is not None and _states_split(row, config)


def _append(cell: str, parts: list[str], sep: str) -> str:
    return sep.join([cell.strip(), *parts]) if cell.strip() else sep.join(parts)


def fill(
    row: dict[str, str], config: ShippedConfig, recipe_open: tuple[str, ...] = ()
) -> tuple[dict[str, str], Applied]:
    """The row with every setting it leaves unstated taken from `config` (see the module);
    `recipe_open` (`Match.recipe_open`): the FP8 recipe is not taken, and the note names
    every configuration matched."""
    src = config.row
    out = dict(row)
    taken: list[str] = []
    fw_parts = _segments(src.get("framework") or "", ",")[1:]
    note_parts = _segments(src.get("notes") or "", ";")
    add_fw: list[str] = []
    add_notes: list[str] = []
    for s in _TEXT_SETTINGS:
        if _mentions(row, s, config):
            continue
        add_fw += [p for p in fw_parts if s.mention(p) and p not in add_fw]
        add_notes += [p for p in note_parts if s.mention(p) and p not in add_notes]
        value = src.get(s.fact) or ""
        if s.name == "routing balance":
            value = "forced" if "forced load balancing" in value else "router's own"
        elif s.name == "CUDA graphs" and src.get("cuda_graph_scope"):
            value = f"{value} ({src['cuda_graph_scope']})"
        taken.append(f"{s.name} {value or 'none named'}")
    if add_fw:
        out["framework"] = _append(row.get("framework") or "", add_fw, ", ")
    if add_notes:
        out["notes"] = _append(row.get("notes") or "", add_notes, "; ")
    kind = cells.recompute_kind(row.get("recompute"), legacy=False)
    src_kind = cells.recompute_kind(src.get("recompute"), legacy=False)
    if kind is None or (kind == cells.RECOMPUTE_ON and src_kind in ("selective", "full")):
        out["recompute"] = src["recompute"]
        taken.append(f"recompute {src['recompute']}")
    if not any(MTP.search(row.get(c) or "") for c in ("model_notes", "notes")):
        mtp = [p for p in _segments(src.get("model_notes") or "", ";") if MTP.search(p)]
        if mtp:
            out["model_notes"] = _append(row.get("model_notes") or "", mtp, "; ")
            taken.append(f"MTP {src.get('mtp_layers') or mtp[0]}")
    prec = row_key(row)["precision"]
    if (
        not recipe_open
        and str(prec).startswith("fp8")
        and fp8_recipe.row_recipe(row.get("precision"), row.get("notes"), row.get("framework"))
        is None
    ):
        out["precision"] = src["precision"]  # same class (matched): the recipe spelled out
        taken.append(f"FP8 recipe {src['precision']}")
    key = row_key(row)
    for field in FILLABLE_KEYS:
        if key[field] is None:
            out[field] = src[field]
            taken.append(f"{field} {src[field]}")
    if recipe_open:
        taken.append("FP8 recipe not taken (the row names none)")
    return out, Applied(" / ".join(recipe_open) or config.name, tuple(taken))


def apply(
    row: dict[str, str],
    model_of: Callable[[dict[str, str]], ModelSpec],
    gpu_of: Callable[[dict[str, str]], str],
) -> tuple[dict[str, str], Applied | None]:
    """`row` with the unstated settings of the one shipped configuration it matches, and what
    was taken; the row unchanged and None when it matches none or several (or names no
    Megatron-Bridge). `model_of` and `gpu_of` read the row's model and catalog GPU
    (validate.row_model, validate._gpu), called only for a row that names Megatron-Bridge."""
    if not names_bridge(row.get("framework"), row.get("citation")):
        return row, None
    found = match(row, model_of(row), gpu_of(row))
    if found.config is None:
        return row, None
    return fill(row, found.config, found.recipe_open)


__all__ = [
    "FILLABLE_KEYS",
    "KEY_FIELDS",
    "MTP",
    "RECIPE_ONLY_COLUMNS",
    "RELEASE",
    "Applied",
    "Match",
    "Setting",
    "ShippedConfig",
    "apply",
    "config_csv",
    "configurations",
    "fill",
    "match",
    "precision_class",
    "row_key",
]
