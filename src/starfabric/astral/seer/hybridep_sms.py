"""The SM budget of Megatron-Core's HybridEP backend, as a row states it (HybridEP SM budget).

Megatron-Core's flex token dispatcher has two backends (`--moe-flex-dispatcher-backend deepep |
hybridep`, added with HybridEP by NVIDIA/Megatron-LM 3df2009, 2025-11-18, #2176). Each has its
own SM budget: `--moe-deepep-num-sms` (default 20) for DeepEP and `--moe-hybridep-num-sms`
(`TransformerConfig.moe_hybridep_num_sms`, default 16: "In pure NVL scenarios, 16 SMs can
generally achieve good bandwidth"; unchanged through fca1679, 2026-03-09). A row whose framework
cell names the HybridEP backend ran HybridEP's budget: the number it states
(`--moe-hybridep-num-sms 32`, the Model Zoo's `sbatch_benchmarking.sh` for DISPATCHER=hybridep),
or Megatron-Core's default when it states none — not DeepEP's default 20, which is what a row that
does not name DeepEP got before.

The rate: inside one NVLink-5 domain HybridEP's own measured kernel rate at this SM budget
(`hybridep_rate`, DeepEP docs/README_Hybrid-EP.md @5fbafce, GB200, kernel-only column); across
NVLink domains DeepEP V1's model (`deepep_kernels`), no HybridEP internode rate being used. Either
way in BF16: Megatron-Core's HybridEP path does not dispatch FP8 (`hybridep_rate`).
"""

from __future__ import annotations

import re

from starfabric.astral.seer.statements import negated_at, stated

HYBRIDEP_DEFAULT_NUM_SMS = 16
"""Megatron-Core's `--moe-hybridep-num-sms` default (megatron/training/arguments.py and
`TransformerConfig.moe_hybridep_num_sms` at 3df2009, 2025-11-18, and at fca1679, 2026-03-09)."""

_BACKEND_FLAG = r"(?:flex[-_ ]dispatcher[-_ ]backend\s*=?\s*|dispatcher\s*=\s*)"
_BY_FLAG = re.compile(_BACKEND_FLAG + r"hybrid[-_ ]?ep\b", re.I)
"""The backend set to HybridEP by its flag ("--moe-flex-dispatcher-backend hybridep",
"DISPATCHER=hybridep")."""
_OTHER_BY_FLAG = re.compile(_BACKEND_FLAG + r"deep[-_ ]?ep\b", re.I)
"""The backend set to DeepEP by its flag: a prose mention of HybridEP beside it ("will switch
to the HybridEP backend") is not the run's backend."""
_IN_PROSE = re.compile(r"\bhybrid[-_ ]?ep\s+backend\b|\bbackend\s+hybrid[-_ ]?ep\b", re.I)
"""A cell naming HybridEP as the dispatcher backend in words ("the HybridEP
backend"); a mention of HybridEP as a later plan ("Will switch to HybridEP") is not the run's
backend."""
_PLAN = re.compile(r"\b(?:will|plan(?:s|ned)?\s+to|to\s+be)\s+(?:[\w-]+\s+){0,3}$", re.I)
"""Words before a mention that make it a plan ("will switch to the HybridEP backend")."""
_FLAG = re.compile(r"hybrid[-_ ]?ep[-_ ]num[-_ ]sms\s*(?:=|:)?\s*(\d{1,3})\b", re.I)
"""HybridEP's own SM flag ("--moe-hybridep-num-sms 32", "moe_hybridep_num_sms=32")."""


def names_hybridep(*cells: str | None) -> bool:
    """True when a row's cells name HybridEP as the flex dispatcher's backend: by its flag
    (`_BY_FLAG`, not negated), else in words (`_IN_PROSE`) not negated ("not the HybridEP
    backend"), not a plan ("will switch to the HybridEP backend") and with no cell setting
    the backend to DeepEP by its flag."""
    by_flag = stated(_BY_FLAG, *cells)
    if by_flag is not None:
        return by_flag
    if any(_OTHER_BY_FLAG.search(c or "") for c in cells):
        return False
    return any(
        not negated_at(text, m.start(), m.end()) and not _PLAN.search(text[: m.start()])
        for text in (c or "" for c in cells)
        for m in _IN_PROSE.finditer(text)
    )


def hybridep_num_sms(*cells: str | None) -> tuple[int, bool] | None:
    """(SMs, stated) of a row whose framework or notes cell names the HybridEP backend
    (`names_hybridep`): the `--moe-hybridep-num-sms` either cell states, else Megatron-Core's
    default (stated False); None for a row that does not run HybridEP."""
    if not names_hybridep(*cells):
        return None
    for cell in cells:
        m = _FLAG.search(cell or "")
        if m is not None:
            return int(m.group(1)), True
    return HYBRIDEP_DEFAULT_NUM_SMS, False


__all__ = ["HYBRIDEP_DEFAULT_NUM_SMS", "hybridep_num_sms", "names_hybridep"]
