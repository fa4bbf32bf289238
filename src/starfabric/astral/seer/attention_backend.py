"""Which TransformerEngine attention backend a Megatron-Core / NeMo run chose, as its launch
flags or environment state it (issue 32, long-context class).

TransformerEngine's `DotProductAttention` picks among FlashAttention, FusedAttention (cuDNN)
and its unfused path by opt-out environment variables, `NVTE_FLASH_ATTN`, `NVTE_FUSED_ATTN`,
`NVTE_UNFUSED_ATTN` (all on unless set to 0), and on Hopper prefers FusedAttention when both
fused kernels are eligible — context parallelism included (TE v1.6
`transformer_engine/pytorch/attention.py` L3522-3526 keeps FusedAttention with CP on the
F16_arbitrary_seqlen backend, L3551-3557 drops FlashAttention on sm90; v1.9+ in
`get_attention_backend`). So a run that leaves the variables alone runs cuDNN on H100, which is
Seer's default (`ExecutionSpec.flash_kernel = "cudnn"`).

Two ways a run leaves that default, both read here:

- Megatron-Core's `--attention-backend` (added in Megatron-LM fa0dcc4872, 2024-12-07;
  `AttnBackend` flash / fused / unfused / local / auto, core_v0.17.1 `transformer/enums.py`
  L51-58) sets the variables itself (`LanguageModule._set_attention_backend`, core_v0.17.1
  `language_module.py` L108-127): `flash` sets NVTE_FUSED_ATTN=0 and NVTE_UNFUSED_ATTN=0, so
  TE runs FlashAttention; `fused` the reverse; `unfused` TE's unfused path; `local`
  Megatron's own; `auto` (the default) leaves TE's preference.
- The variable itself in a launch environment: NeMo 2.0's example executors set
  `"NVTE_FUSED_ATTN": "0"` from d12fbbd3db (2024-09-08, `scripts/llm/llama3_pretraining.py`,
  `examples/llm/pretrain/default_executor.py`) until e1e8b107bc ("allow cudnn fa", 2024-10-11);
  its Gemma recipes set it in the recipe (c20e8922c4, 2024-10-22).

FlashAttention under TE is FlashAttention-2 (`flash_kernel = "fa2"`, priced at
`cost.fa2_rate` x `cost.FA2_PATH_IN_TRAINING`) unless FlashAttention-3 was installed
separately — TE v2.8 prints its own build steps for it (`dot_product_attention/utils.py`
L136-141: clone flash-attention, build `hopper/`, copy `flash_attn_interface.py`), and TE
v1.11 drops FA3 under CP outright.
`FLASH_BACKEND_KERNEL` (an assumption): the flash backend without a named FlashAttention-3 ran FA2.
A run that names FA3 is left at cuDNN's rate (the FA3 paper puts FA3 at or above cuDNN on H100;
no separate FA3 curve here).
"""

from __future__ import annotations

import re

from starfabric.astral.seer.statements import NEGATION_BEFORE

BACKENDS = ("flash", "fused", "unfused", "local", "auto")
"""Megatron-Core's `AttnBackend` members (core_v0.17.1 `transformer/enums.py` L51-58), the
choices of `--attention-backend`."""
FLASH_BACKEND_KERNEL = "fa2"
"""`ExecutionSpec.flash_kernel` of TE's FlashAttention backend (assumption: FlashAttention-2, the flash-attn package TE imports by default, since FA3 is a separate build)."""

_FLAG = re.compile(r"(?:--attention[-_]backend|\battention_backend)\s*[:= ]\s*['\"]?(\w+)", re.I)
_ENV_OFF = re.compile(r"\bNVTE_(FUSED|FLASH|UNFUSED)_ATTN['\"]?\s*[:=]\s*['\"]?0\b", re.I)
_FA3 = re.compile(r"flash[-_ ]?attn[-_ ]?3|flash[-_ ]?attention[-_ ]?(?:v|version\s*)?3\b|\bFA3\b",
                  re.I)  # fmt: skip


def _negated(text: str, start: int) -> bool:
    """A negating word up to two words before a setting ("not NVTE_FUSED_ATTN=0", "without
    --attention-backend flash"). What follows is the setting's own value ("=0" states the
    variable off), so statements.negated_at's after-the-mention reading does not apply."""
    return bool(NEGATION_BEFORE.search(text[:start]))


def kernel_of(backend: str) -> dict[str, str]:
    """The ExecutionSpec attention fields Megatron-Core's `--attention-backend backend` sets:
    flash -> FlashAttention-2, fused -> cuDNN, unfused / local -> unfused attention, auto ->
    nothing (TE's own preference: cuDNN on Hopper and later). A value Megatron does not
    accept raises ValueError naming the choices."""
    b = backend.strip().lower()
    if b not in BACKENDS:
        raise ValueError(f"attention backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if b == "flash":
        return {"attention": "flash", "flash_kernel": FLASH_BACKEND_KERNEL}
    if b == "fused":
        return {"attention": "flash", "flash_kernel": "cudnn"}
    if b in ("unfused", "local"):
        return {"attention": "unfused"}
    return {}


def stated_backend(*cells: str | None) -> str | None:
    """The backend a row's cells state, or None: an `--attention-backend X` /
    `attention_backend: X` setting, else TE's opt-out variables — `NVTE_FUSED_ATTN=0` alone is
    the flash backend, with `NVTE_FLASH_ATTN=0` too it is the unfused path, `NVTE_FLASH_ATTN=0`
    alone is the fused one. Negated mentions are skipped ("not NVTE_FUSED_ATTN=0"). A flash
    backend in a cell that also names FlashAttention-3 reads None (left at cuDNN's rate)."""
    text = " ; ".join(c for c in cells if c)
    backend = None
    for m in _FLAG.finditer(text):
        if m.group(1).lower() in BACKENDS and not _negated(text, m.start()):
            backend = m.group(1).lower()
            break
    if backend is None:
        off = {m.group(1).upper() for m in _ENV_OFF.finditer(text)
               if not _negated(text, m.start())}  # fmt: skip
        if "FUSED" in off:
            backend = "unfused" if "FLASH" in off else "flash"
        elif "FLASH" in off:
            backend = "fused"
    if backend == "flash" and _FA3.search(text):
        return None
    return backend


__all__ = ["BACKENDS", "FLASH_BACKEND_KERNEL", "kernel_of", "stated_backend"]
