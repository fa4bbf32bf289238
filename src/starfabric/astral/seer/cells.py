"""Read the free-text cells of published-run tables as a user of those tables would.

Sources write numbers as "~50K", "128000 (paper Table 3; HF config 128256)" or
"UNVERIFIED(1 in Table 5)", GPUs as "NVIDIA Ampere (A100-class; MFU basis 312)" and FLOP
conventions as prose. These readers turn one cell into a value and say what they read, so
the choice can be printed next to the prediction; a cell that holds no value returns None.
"""

from __future__ import annotations

import math
import re

from starfabric.astral.hardware import GPUSpec, get_gpu, list_gpus
from starfabric.astral.seer import releases
from starfabric.astral.seer.fp4_format import stated_fp4
from starfabric.astral.seer.statements import negated_at, stated
from starfabric.errors import ConfigError, DataError

_DIGITS = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(\.\d+)?")
"""A number as sources print it: plain ("4096", "0.5") or with thousands separators ("4,096",
"1,048,576": groups of exactly three digits)."""
_SUFFIX = re.compile(r"\s*([KMB])(?![A-Za-z])", re.IGNORECASE)
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000, "b": 1_000_000_000}
BINARY_SCALE = {"": 1, "k": 1024, "m": 1024**2, "b": 1024**3}
"""K/M as sequence lengths use them: powers of two ("4K context" = 4,096 tokens, "128K" =
131,072, "1M" = 1,048,576: the lengths the models train at; Llama 3 section 3.4)."""

FAMILY_GPU = {
    "ampere": "A100",
    "hopper": "H100",
    "blackwell": "B200",
}
"""Architecture family → the catalog GPU its data-centre part is (NVIDIA naming: the SXM
A100/H100/B200 are the training parts of Ampere/Hopper/Blackwell); memory picks the SKU."""


def unverified(raw: str | None) -> bool:
    """True when the cell is empty or says UNVERIFIED (with or without a hint)."""
    text = (raw or "").strip().upper()
    return not text or "UNVERIFIED" in text


_POWER = re.compile(r"(?<![\d.])(\d{1,2})\s*(?:\^|\*\*)\s*(\d{1,2})(?![\d.])")
"""A power written out ("2^20", "2**17": sequence lengths as long-context tables print them)."""


def _powers(text: str) -> str:
    """`text` with every power (`_POWER`) replaced by its value ("2^20" → "1048576")."""
    return _POWER.sub(lambda m: str(int(m.group(1)) ** int(m.group(2))), text)


def _numbers(raw: str | None, binary: bool = False) -> list[tuple[float, bool]]:
    """Every number of a cell with its K/M/B suffix applied, and whether it had one. A number
    glued to letters on its left ("TP8", "VPP=4" is not glued) takes no suffix, and one glued
    to letters on its right that are no suffix is a name, not a value ("1F1B", "2x"). A power
    ("2^20") is its value."""
    text = _powers(raw or "")
    out: list[tuple[float, bool]] = []
    for m in _DIGITS.finditer(text):
        val = float(m.group(1).replace(",", "") + (m.group(2) or ""))
        glued = m.start() > 0 and text[m.start() - 1].isalpha()
        rest = text[m.end() :]
        suf = None if glued else _SUFFIX.match(rest)
        if suf:
            scale = (BINARY_SCALE if binary else _SCALE)[suf.group(1).lower()]
            out.append((val * scale, True))
        elif not rest[:1].isalpha():
            out.append((val, False))
    return out


def overflows(raw: str | None) -> bool:
    """True when a number in the cell is past a double's range (309 digits or more read as
    inf): no count or figure can be taken from it."""
    return any(not math.isfinite(v) for v, _ in _numbers(raw))


MAX_COUNT = 2**53
"""The largest integer a cell may state (a size, a degree, a GPU count, a batch): `number`
reads into an IEEE 754 double, which holds every integer up to 2^53 exactly and none above it
[fact], so a larger count is not read as written."""

_DIGIT_RUN = re.compile(r"\d[\d,]*")


def overlong_count(raw: str | None) -> str | None:
    """The first digit run of the cell (thousands commas ignored) with more digits than
    MAX_COUNT has: no count can be that large ("1,1,1,..." pasted from a list, a log's hash)."""
    limit = len(str(MAX_COUNT))
    return next(
        (
            m.group(0)
            for m in _DIGIT_RUN.finditer(raw or "")
            if len(m.group(0).replace(",", "")) > limit
        ),
        None,
    )


QUOTE_CHARS = 80
"""Characters of a cell an error message quotes: enough to find the cell, one line however
long the cell (a pasted log)."""


def quoted(raw: str | None) -> str:
    """The cell as an error message quotes it: repr, cut to QUOTE_CHARS with its length."""
    text = raw or ""
    if len(text) <= QUOTE_CHARS:
        return repr(text)
    return f"{text[:QUOTE_CHARS]!r}... ({len(text)} characters)"


def number(raw: str | None, binary: bool = False) -> float | None:
    """The first number in a cell with its K/M/B suffix ("~50K" → 50000, "128000 (paper)" →
    128000, "4,096" → 4096, "TP8" → 8, "UNVERIFIED(3 in Table 5)" → 3; `binary`: K = 1024,
    M = 1024², for sequence lengths); None when the cell holds no number."""
    found = _numbers(raw, binary)
    return found[0][0] if found else None


def has_suffix(raw: str | None) -> bool:
    """True when the cell's first number carries a K/M/B suffix ("4M tokens")."""
    found = _numbers(raw)
    return bool(found) and found[0][1]


OFF_WORDS = (
    "none",
    "no",
    "n",
    "off",
    "false",
    "disabled",
    "n/a",
    "na",
    "not used",
    "unused",
    "-",
    "—",
    "✗",
    "✘",
    "❌",
)
"""Cell phrasings of a feature that is not used (a parallel degree of 1, SP off...; the
cross marks of a results table's feature columns)."""
ON_WORDS = ("yes", "y", "on", "true", "enabled", "used", "✓", "✔", "✅")
"""Cell phrasings of a feature that is used (with a results table's check marks)."""


def _lead(raw: str | None, names: str = "") -> str:
    """The cell's text lower-cased, without a leading feature name ("SP on" → "on" for
    `names`; any "key: value" or "key=value" → the value)."""
    text = (raw or "").strip().lower()
    if names:
        text = re.sub(rf"^(?:{names})\s*[:=]?\s*", "", text)
    return re.sub(r"^[a-z][\w -]{0,30}?\s*[:=]\s*", "", text)  # "VPP=None", "sp: on"


def _first_word(text: str) -> str:
    m = re.match(r"(n/a|not used|[a-z]+|[-—](?![-\w])|[✓✔✅✗✘❌])", text)
    return m.group(1) if m else ""


def says_off(raw: str | None) -> bool:
    """True when a cell holds no number and says the feature is not used ("none", "no",
    "off", "n/a", "-", "disabled (no CP)")."""
    if number(raw) is not None or unverified(raw):
        return False
    return _first_word(_lead(raw)) in OFF_WORDS


def flag(raw: str | None, names: str = "") -> bool | None:
    """A yes/no cell ("yes (required with TP)", "SP on", "true", "disabled"); None when it
    says neither (empty, UNVERIFIED, "n/a")."""
    if unverified(raw):
        return None
    word = _first_word(_lead(raw, names))
    if word in ON_WORDS:
        return True
    if word in OFF_WORDS and word not in ("n/a", "na", "-", "—"):
        return False
    return None


def is_hint(raw: str | None) -> bool:
    """True when the number in the cell is approximate or a hint ("~", "UNVERIFIED(...)")."""
    text = raw or ""
    return "~" in text or "UNVERIFIED" in text.upper()


def match_gpu(raw: str) -> tuple[GPUSpec, float | None]:
    """Catalog GPU for a free-text GPU cell and an HBM override (GiB) when the text names a
    memory size the catalog entry lacks. Tried in order: a catalog name or alias inside the
    text ("A100-SXM4-80GB (Selene)", "A100-class"), then the architecture family ("NVIDIA
    Ampere" → A100); among entries of the same chip the one whose memory the text names wins.
    A PCIe card is refused when the catalog holds only the SXM part (a different part)."""
    text = raw.strip()
    mem_m = re.search(r"(\d+)\s*Gi?B\b(?!/)", text, re.IGNORECASE)
    mem = float(mem_m.group(1)) if mem_m else None
    # A count beside the name ("8xH100", "H100x8", "4x GB200") is not part of it.
    tokens = [re.sub(r"^\d+x(?=[a-z])|(?<=\d)x\d+$", "", t, flags=re.I)
              for t in re.findall(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*", text)]  # fmt: skip
    found: GPUSpec | None = None
    for tok in tokens:
        parts = tok.split("-")
        for i in range(len(parts)):  # "DGX-B200", "NVIDIA-H100-SXM5-80GB": a prefix word
            for n in range(len(parts), i, -1):
                try:
                    found = get_gpu("-".join(parts[i:n]))
                except ConfigError:
                    continue
                break
            if found is not None:
                break
        if found is not None:
            break
    if found is None:
        low = text.lower()
        for fam, name in FAMILY_GPU.items():
            if fam in low:
                found = get_gpu(name)
                break
    if found is None:
        names = ", ".join(g.name for g in list_gpus())
        raise ConfigError(
            f"unknown gpu {quoted(raw)}: no catalog GPU matches its name or family",
            fix=f"name one of: {names} (or an architecture family: {', '.join(FAMILY_GPU)})",
        )
    if re.search(r"\bPCI-?e\b", text, re.IGNORECASE) and "PCIE" not in found.name.upper():
        raise ConfigError(
            f"gpu {quoted(raw)} is a PCIe card; the catalog holds only the {found.name} (SXM/board) "
            "part, whose clocks and power differ",
            fix="add the PCIe part to the GPU catalog, or name the SXM part if the run used it",
        )
    if mem is not None:
        chip = found.name.split("-")[0]
        for g in list_gpus():
            if g.name.split("-")[0] == chip and abs(g.hbm_gib - mem) < 1e-9:
                return g, None
        if abs(found.hbm_gib - mem) > 1e-9:
            return found, mem
    return found, None


def flop_convention(raw: str | None) -> str:
    """Closest known FLOP formula to a free-text convention: 'narayanan' (SC'21 Eq. 3, counts
    the recompute forward), 'megatron' (Megatron-LM `num_floating_point_operations`, also
    written 72·B·s·l·h²(1 + s/6h + V/12hl)), else 'model' (6N + causal attention: what
    "model FLOPs" means in PaLM's MFU definition)."""
    text = (raw or "").lower().replace(" ", "")
    if "narayanan" in text or "eq.3" in text or "96*b" in text:
        return "narayanan"
    if "megatron" in text or "72*b" in text or "nemo" in text:
        # NeMo's "model TFLOP/s" (nemo/utils/flops_formulas.py, gpt3/llama/mixtral) counts
        # attention as 12*s^2*h per layer: non-causal, the same terms as Megatron's formula —
        # until both halved it for the causal mask (`MEGATRON_CAUSAL_SINCE`); a cell that says
        # its formula counts causal attention names the later one.
        causal = "causal" in text and not re.search(r"non-?causal", text)
        return "megatron_causal" if causal else "megatron"
    return "model"


MEGATRON_CAUSAL_SINCE = {"megatron-core": (0, 12), "nemo": (2, 5), "nemo-container": (25, 9)}
"""First releases whose printed TFLOP/s count causal attention (half the s x s scores):
Megatron-LM commit 8873b55 (2025-03-06, `num_floating_point_operations`: "only half of the
attention matrix is non-zero"), first tagged in core_v0.12.0; NeMo commit 6251117 (2025-08-09,
flops_formulas.py `causal_self_attn`), first tagged in v2.5.0 = the 25.09 container. Earlier
releases count the full s x s matrix."""


def megatron_formula_is_causal(framework: str | None) -> bool | None:
    """Whether the Megatron-LM / NeMo release a framework cell names prints causal-attention
    TFLOP/s (`MEGATRON_CAUSAL_SINCE`); None when the cell names no such release."""
    text = (framework or "").lower()
    found: list[bool] = []
    core = releases.named_megatron_core(text)
    if core:
        found.append(core >= MEGATRON_CAUSAL_SINCE["megatron-core"])
    nemo = re.search(r"nemo\s*v?(\d+)\.(\d+)", text)
    if nemo:
        ver = (int(nemo[1]), int(nemo[2]))
        key = "nemo-container" if ver[0] >= 20 else "nemo"  # 24.07: a container's YY.MM
        found.append(ver >= MEGATRON_CAUSAL_SINCE[key])
    return any(found) if found else None


_ZERO3 = re.compile(r"zero[- ]?3|fsdp", re.I)
_ZERO_NUMBERED = re.compile(r"(?:\bzero[-_ ]*stage|\bstage|\bz)[-_=: ]*([0-3])(?![\d.])", re.I)
"""A ZeRO stage by number: "ZeRO stage 2", "zero_stage=1", "Z1", "stage 3"."""


def zero_stage(raw: str | None, legacy: bool) -> int | None:
    """ZeRO stage from a data-parallel cell: 'distributed optimizer'/'ZeRO-1' → 1, 'ZeRO-2' or
    'weights not resharded' → 2, 'ZeRO-3'/FSDP → 3 (not negated: "no FSDP" is not FSDP), 'none' → 0; None when not stated."""
    text = (raw or "").lower().replace(" ", "")
    if unverified(raw):
        return None
    # "ZeRO stage 2", "ZeRO-stage-1", "Z1", "stage 3": the stage by number (this column's
    # only "stage" is ZeRO's), read before the spellings below unless negated ("no ZeRO
    # stage 3").
    for m in _ZERO_NUMBERED.finditer(raw or ""):
        if not negated_at(raw or "", m.start(), m.end()):
            return int(m.group(1))
    if re.search(r"zero-?2|notresharded|shard(s|ing)?optimizer\+grads", text):
        return 2
    if re.search(r"zero-?3|fsdp", text) and stated(_ZERO3, raw) is not False:
        return 3  # not when every mention is negated ("no FSDP", "FSDP: off")
    if re.search(r"zero-?1|distributed", text):
        return 1
    if text.startswith("none"):
        return 0
    return 0 if legacy else 1


def zero_shard_ranks(raw: str | None, gpus_per_node: int) -> int | None:
    """Ranks of a hybrid ZeRO shard group stated in a data-parallel cell: 'zero1=8',
    'sharded over 128 GPUs', 'sharded within each 8-GPU node' (or 'within a node' →
    `gpus_per_node`); None when the cell shards over the whole DP group or says nothing."""
    text = (raw or "").lower()
    if unverified(raw):
        return None
    m = re.search(r"zero[123]?\s*=\s*(\d+)", text) or re.search(
        r"shard(?:ed|s|ing)?\b[^;()]*?\b(?:over|within|across)\s+(?:each\s+|an?\s+)?(\d+)[- ]gpus?\b",
        text,
    )
    if m:
        return int(m.group(1))
    if re.search(r"shard(?:ed|s|ing)?\b[^;()]*?\bwithin\s+(?:each|a|one)\s+node", text):
        return gpus_per_node
    return None


RECOMPUTE_ON = "on"
"""What `recompute_kind` returns for a cell that says recompute was on without saying which
(Seer then chooses among the recomputing settings)."""


def recompute_kind(raw: str | None, legacy: bool) -> str | None:
    """Recompute granularity a cell states: 'none' ("none", "no", "off", "disabled", "no
    activation checkpointing"), 'full' ("full, uniform, 1 layer", "activation checkpointing
    (full)", "--recompute-method uniform"), 'selective' ("selective (core_attn)", modules
    named), `RECOMPUTE_ON` ("yes", "activation checkpointing" without a granularity: before
    2023 (`legacy`) only full existed, so 'full'); None when UNVERIFIED or empty."""
    if unverified(raw):
        return None
    text = _lead(raw, r"recompute|(?:activation|gradient) (?:checkpointing|recompute)")
    word = _first_word(text) if text else "yes"  # the cell only names the feature
    negated = re.search(
        r"^(?:no|without)\s+(?:activation\s+)?(?:recompute|checkpoint|re-?mat)", text
    )
    if word in ("n/a", "na", "-", "—"):
        return None  # a dash or n/a in a recompute column does not say which: chosen
    if word in OFF_WORDS or negated or re.fullmatch(r"0(?:\s*layers?)?", text.strip()):
        # "0" / "0 layers": no layer recomputed (a results table's recompute-layers column)
        return "none"
    if text.startswith("full"):
        return "full"
    if re.search(r"selective|partial|modules?|recomputed|core_attn|op-level", text):
        return "selective"
    if recompute_layers(raw) is not None:
        return "full"  # "recompute 10 layers": Megatron's --recompute-num-layers is full's
    if re.search(r"\bfull\b|uniform|\bblock\b|every (?:decoder |transformer )?layer", text):
        return "full"
    if word in ON_WORDS:
        return "full" if legacy else RECOMPUTE_ON
    return "selective"


_RECOMPUTE_N = (
    re.compile(r"(?:--recompute-num-layers|recompute_num_layers)\s*[=:]?\s*(\d+)"),
    re.compile(r"\b(\d+)\s*(?:decoder |transformer )?layers?\b"),
)
_RECOMPUTE_METHOD = re.compile(r"\b(uniform|block)\b")


def recompute_layers(raw: str | None) -> tuple[str, int] | None:
    """(method, N) of Megatron-Core's partial full recompute a recompute cell states:
    "full (block, 10 layers)" → ('block', 10), "uniform, 1 layer" → ('uniform', 1),
    "--recompute-method uniform --recompute-num-layers 2" → ('uniform', 2). A layer count
    without a method ("recompute 10 layers") is block's: N layers recomputed, the others not
    (uniform re-runs every layer whatever N). None when no positive count is stated (plain
    full recompute, or "0 layers": none). The text before a parenthesis is read, and the
    parenthesis itself only when that text is a bare granularity and the parenthesis opens
    with the setting ("full (block, 4 layers)"), so a source note in parentheses ("full
    (script: ... 32 layers)") is not read as a setting."""
    if unverified(raw):
        return None
    text = (raw or "").strip().lower()
    head, _, rest = text.partition("(")
    parts = [head]
    paren = rest.partition(")")[0]
    bare = re.fullmatch(r"\s*(?:full|recompute|activation (?:checkpointing|recompute))?\s*", head)
    if bare and re.match(r"\s*(?:uniform|block|\d+\s*(?:\w+ )?layers?\b|--recompute)", paren):
        parts.append(paren)
    for part in parts:
        n = next((int(m.group(1)) for r in _RECOMPUTE_N if (m := r.search(part))), None)
        if n is None:
            continue
        if n == 0:
            return None
        meth = _RECOMPUTE_METHOD.search(part)
        return (meth.group(1) if meth else "block", n)
    return None


PRECISIONS = (
    ("fp8", r"fp8|float8|e4m3|e5m2"),
    ("bf16", r"bf-?16|bfloat-?16|brain[- ]?float"),
)
"""Compute precision named by a precision cell, first one stated (not negated) wins; anything
else 16-bit is FP16 ("mixed 16-bit", "FP16 mixed", "half"). FP4 is not matched here: an FP4
mention is read by `fp4_format.stated_fp4` (which knows "FP4 (E2M1) disabled" denies FP4), so
the two readers of one cell cannot disagree."""


_PRECISION_RES = tuple((name, re.compile(pat, re.I)) for name, pat in PRECISIONS)


FP16_SPELLINGS = re.compile(
    r"fp-?16|float-?16|\bhalf\b|16[- ]?bit|\bmixed\b|\bamp\b|\bapex\b", re.I
)
"""A 16-bit precision that is not BF16: "FP16 mixed", "float16", "half precision", "mixed
16-bit", and "mixed precision" / "AMP" / "apex" that name no format (the A100-era papers'
wording: FP16, the only 16-bit mixed precision of their frameworks; read as FP16 before the
malformed-cell check existed, and kept so)."""


_NOT_STATED = re.compile(
    r"\s*(?:[-–—]+|n/?a|none|null|unknown|unstated|not (?:stated|given|reported)|\?+)\s*",
    re.I,
)
"""A cell whose whole text says the source gives no value ("-", "n/a", "None", "unknown",
"not stated"): read as an empty cell, not as a value."""


def no_value(raw: str | None) -> bool:
    """True for an empty or UNVERIFIED cell and one that only says the source gives no value
    (`_NOT_STATED`)."""
    return unverified(raw) or bool(_NOT_STATED.fullmatch(raw or ""))


def precision(raw: str | None, where: str = "precision cell") -> str:
    """'fp8' (FP8/FP4 GEMMs: "FP8 hybrid", "fp8 (E4M3 fwd, E5M2 bwd)", "float8"), 'bf16'
    ("BF16 mixed", "bfloat16"; also an empty, UNVERIFIED or not-stated cell: "-", "n/a",
    "unknown"), 'fp16' (`FP16_SPELLINGS`).
    A precision named only negated (`statements.stated`: "BF16 (MXFP8 disabled)", "FP16 mixed
    (not BF16)") is not the run's. A cell naming none of them ("FP9 weird", "TF32") is a
    DataError prefixed with `where` (the row), not a silent FP16.
    FP4 ("NVFP4", "FP4 (E2M1)") is read by `fp4_format.stated_fp4`, the same reader the FP4
    format uses, and counts as 'fp8' (a low-precision GEMM run) ahead of BF16, as an FP8
    mention does; a denied FP4 ("BF16; FP4 (E2M1) disabled") is not the run's."""
    for name, pat in _PRECISION_RES:
        if stated(pat, raw) or (name == "fp8" and stated_fp4(raw) is not None):
            return name
    if no_value(raw):
        return "bf16"
    if stated(FP16_SPELLINGS, raw):
        return "fp16"
    raise DataError(
        f"{where}: column 'precision' = {quoted(raw)} names no precision Seer times "
        "(FP8/FP4, BF16, FP16)",
        fix="write the run's precision (e.g. 'BF16 mixed', 'FP16 mixed', 'FP8'), "
        "or UNVERIFIED when the source does not state it",
    )


_FRAMEWORK_SPELLINGS = (
    (r"megatron[\s_]+bridge|megatronbridge", "Megatron-Bridge"),
    (r"megatron[\s_]+core|\bm-?core\b", "Megatron-Core"),
    (r"megatron[\s_]+deepspeed", "Megatron-DeepSpeed"),
    (r"megatron[\s_]+lm\b", "Megatron-LM"),
    (r"torch[\s_]+titan", "TorchTitan"),
    (r"deep[\s_]+speed", "DeepSpeed"),
    (r"\bcore_[rv]?(?=\d)", "Megatron-Core "),
    (r"(nemo)\b\s*(?:framework|container|image|docker)?\s*[:v]?\s*(?=\d\d\.\d\d)", r"\1 "),
)
"""Spellings of the same framework release ("Megatron Bridge", "MCore", "core_r0.12.0" = the
Megatron-Core tag, "NeMo container 25.02" = "nemo:25.02" = NeMo 25.02) → one form."""


def framework(raw: str | None) -> str:
    """A framework cell with its framework names spelled one way (`_FRAMEWORK_SPELLINGS`)."""
    text = raw or ""
    for pat, rep in _FRAMEWORK_SPELLINGS:
        text = re.sub(pat, rep, text, flags=re.IGNORECASE)
    return text


__all__ = [
    "BINARY_SCALE",
    "FAMILY_GPU",
    "FP16_SPELLINGS",
    "MEGATRON_CAUSAL_SINCE",
    "OFF_WORDS",
    "ON_WORDS",
    "PRECISIONS",
    "RECOMPUTE_ON",
    "flag",
    "flop_convention",
    "framework",
    "has_suffix",
    "is_hint",
    "match_gpu",
    "megatron_formula_is_causal",
    "no_value",
    "number",
    "precision",
    "recompute_kind",
    "recompute_layers",
    "says_off",
    "unverified",
    "zero_shard_ranks",
    "zero_stage",
]


_SPLIT = re.compile(r"(?<![\d/.])(\d+(?:/\d+)+)(?:/(?:\.\.\.|…)/(\d+(?:/\d+)*))?(?![\d/])")


_COMMA_LIST = re.compile(r"(?<![\d.,])\d+(?:\s*[,;]\s*(?:\d+|\.\.\.|…))+(?![\d,])")
"""A comma-separated list of layer counts ("4,4,4,...,1", "[4, 4, ..., 4, 1]")."""
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+")


def _as_slashes(m: re.Match[str]) -> str:
    """A comma list written as a slash split; a number with thousands separators ("1,024")
    is left alone."""
    if _THOUSANDS.fullmatch(m.group(0)):
        return m.group(0)
    return "/".join(p.strip() for p in re.split(r"[,;]", m.group(0)))


SPLIT_CELLS = ("notes", "pp", "vpp")
"""The cells a layer split is stated in: the notes, or beside the degree ("16 (layout
4/4/.../4/1)")."""


def row_layer_split(row: dict[str, str], layers: int, stages: int) -> tuple[int, ...] | None:
    """`layer_split` over a row's `SPLIT_CELLS`, each read apart: joined with ';' the comma-list
    reader took a split at the end of the notes and the PP and VPP degrees after it as one list
    ("4/4/.../4/1 ; 2 ; 8" read "4/4/.../4/1/2/8", no split)."""
    for key in SPLIT_CELLS:
        split = layer_split(row.get(key), layers, stages)
        if split is not None:
            return split
    return None


def layer_split(text: str | None, layers: int, stages: int) -> tuple[int, ...] | None:
    """Per-(virtual-)stage layer counts a cell states as a split, first stage first:
    "4/4/.../4/1" (the element before the ellipsis repeats; TorchTitan's DeepSeek-V3 report
    writes its asymmetric split so) or a full list "7/8/8/7", also with commas ("4,4,...,4,1",
    "[7, 8, 8, 7]"). Only a split naming `layers`
    layers over `stages` stages counts; anything else is None."""
    for m in _SPLIT.finditer(_COMMA_LIST.sub(_as_slashes, text or "")):
        head = [int(x) for x in m.group(1).split("/")]
        tail = [int(x) for x in m.group(2).split("/")] if m.group(2) else []
        if m.group(2):
            fill = stages - len(head) - len(tail)
            if fill < 0:
                continue
            out = head + [head[-1]] * fill + tail
        else:
            out = head
        if len(out) == stages and sum(out) == layers and min(out) >= 0:
            return tuple(out)
    return None
