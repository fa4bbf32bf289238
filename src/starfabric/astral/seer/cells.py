"""Read the free-text cells of published-run tables as a user of those tables would.

Sources write numbers as "~50K", "128000 (paper Table 3; HF config 128256)" or
"UNVERIFIED(1 in Table 5)", GPUs as "NVIDIA Ampere (A100-class; MFU basis 312)" and FLOP
conventions as prose. These readers turn one cell into a value and say what they read, so
the choice can be printed next to the prediction; a cell that holds no value returns None.
"""

from __future__ import annotations

import re

from starfabric.astral.hardware import GPUSpec, get_gpu, list_gpus
from starfabric.errors import ConfigError

_NUM = re.compile(r"(\d+(?:\.\d+)?)\s*([KMB])?(?![A-Za-z])", re.IGNORECASE)
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000, "b": 1_000_000_000}

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


def number(raw: str | None) -> float | None:
    """The first number in a cell with its K/M/B suffix ("~50K" → 50000, "128000 (paper)" →
    128000, "UNVERIFIED(3 in Table 5)" → 3); None when the cell holds no number."""
    m = _NUM.search(raw or "")
    if not m:
        return None
    return float(m.group(1)) * _SCALE[(m.group(2) or "").lower()]


def is_hint(raw: str | None) -> bool:
    """True when the number in the cell is approximate or a hint ("~", "UNVERIFIED(...)")."""
    text = raw or ""
    return "~" in text or "UNVERIFIED" in text.upper()


def match_gpu(raw: str) -> tuple[GPUSpec, float | None]:
    """Catalog GPU for a free-text GPU cell and an HBM override (GiB) when the text names a
    memory size the catalog entry lacks. Tried in order: a catalog name or alias inside the
    text ("A100-SXM4-80GB (Selene)", "A100-class"), then the architecture family ("NVIDIA
    Ampere" → A100); among entries of the same chip the one whose memory the text names wins."""
    text = raw.strip()
    mem_m = re.search(r"(\d+)\s*GB", text, re.IGNORECASE)
    mem = float(mem_m.group(1)) if mem_m else None
    tokens = re.findall(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*", text)
    found: GPUSpec | None = None
    for tok in tokens:
        parts = tok.split("-")
        for n in range(len(parts), 0, -1):
            try:
                found = get_gpu("-".join(parts[:n]))
            except ConfigError:
                continue
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
            f"unknown gpu {raw!r}: no catalog GPU matches its name or family",
            fix=f"name one of: {names} (or an architecture family: {', '.join(FAMILY_GPU)})",
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
    core = re.search(r"(?:megatron[- ]core|mcore|core_)\s*[rv]?(\d+)\.(\d+)", text)
    if core:
        found.append((int(core[1]), int(core[2])) >= MEGATRON_CAUSAL_SINCE["megatron-core"])
    nemo = re.search(r"nemo\s*v?(\d+)\.(\d+)", text)
    if nemo:
        ver = (int(nemo[1]), int(nemo[2]))
        key = "nemo-container" if ver[0] >= 20 else "nemo"  # 24.07: a container's YY.MM
        found.append(ver >= MEGATRON_CAUSAL_SINCE[key])
    return any(found) if found else None


def zero_stage(raw: str | None, legacy: bool) -> int | None:
    """ZeRO stage from a data-parallel cell: 'distributed optimizer'/'ZeRO-1' → 1, 'ZeRO-2' or
    'weights not resharded' → 2, 'ZeRO-3'/FSDP → 3, 'none' → 0; None when not stated."""
    text = (raw or "").lower().replace(" ", "")
    if unverified(raw):
        return None
    if re.search(r"zero-?2|notresharded|shard(s|ing)?optimizer\+grads", text):
        return 2
    if re.search(r"zero-?3|fsdp", text):
        return 3
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


__all__ = [
    "FAMILY_GPU",
    "MEGATRON_CAUSAL_SINCE",
    "flop_convention",
    "is_hint",
    "match_gpu",
    "megatron_formula_is_causal",
    "number",
    "unverified",
    "zero_shard_ranks",
    "zero_stage",
]
