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

Assumption: HybridEP copies at DeepEP V1's per-SM rate under its NVLink-5 ceiling.
That is the model (`deepep_kernels`, `deepep_sm_budget`: per SM and destination rank) the GB200
DeepSeek-V3 row MCGB-L12 (HybridEP at 32 SMs) already runs with; no HybridEP per-SM rate is
published in a source read here.
"""

from __future__ import annotations

import re

HYBRIDEP_DEFAULT_NUM_SMS = 16
"""Megatron-Core's `--moe-hybridep-num-sms` default (megatron/training/arguments.py and
`TransformerConfig.moe_hybridep_num_sms` at 3df2009, 2025-11-18, and at fca1679, 2026-03-09)."""

_BACKEND = re.compile(
    r"(?:flex[-_ ]dispatcher[-_ ]backend\s*=?\s*|dispatcher\s*=\s*)hybrid[-_ ]?ep\b"
    r"|\bhybrid[-_ ]?ep\s+backend\b|\bbackend\s+hybrid[-_ ]?ep\b",
    re.I,
)
"""The framework cell naming HybridEP as the dispatcher backend ("--moe-flex-dispatcher-backend
hybridep", "DISPATCHER=hybridep", "the HybridEP backend"); a mention of HybridEP as a later
plan ("Will switch to HybridEP") is not the run's backend."""
_FLAG = re.compile(r"hybrid[-_ ]?ep[-_ ]num[-_ ]sms\s*(?:=|:)?\s*(\d{1,3})\b", re.I)
"""HybridEP's own SM flag ("--moe-hybridep-num-sms 32", "moe_hybridep_num_sms=32")."""


def names_hybridep(framework: str | None) -> bool:
    """True when a framework cell names HybridEP as the flex dispatcher's backend."""
    return bool(_BACKEND.search(framework or ""))


def hybridep_num_sms(framework: str | None) -> tuple[int, bool] | None:
    """(SMs, stated) of a row whose framework cell names the HybridEP backend: the
    `--moe-hybridep-num-sms` it states, else Megatron-Core's default (stated False); None for
    a row that does not run HybridEP."""
    if not names_hybridep(framework):
        return None
    m = _FLAG.search(framework or "")
    if m is not None:
        return int(m.group(1)), True
    return HYBRIDEP_DEFAULT_NUM_SMS, False


__all__ = ["HYBRIDEP_DEFAULT_NUM_SMS", "hybridep_num_sms", "names_hybridep"]
