"""DeepEP's SM budget as a run states it, and what the V1 intranode kernels reach on NVLink 5
(DeepEP SM budget and NVLink-5 ceiling).

`deepep_kernels` prices DeepEP's NVLink copies at min(NVLink, what its SMs copy) with the
library's default of 20 SMs. A framework may set another budget: TorchTitan's DeepEP branch of
2025-11 (pytorch/torchtitan 5d4bdd0, `torchtitan/distributed/deepep/utils.py`,
`DeepEPTokenDispatcher.turbo_deepep_num_cus` = 128, applied with `Buffer.set_num_sms` when the
dispatcher is built) runs 128 of the B200's 148 SMs, tuned on B200 for Qwen3-30B-A3B at EP 8
(its `tune_num_sms.py`, 2025-11-13). A row says so in its framework cell ("num_sms 128",
"128 SMs"); nothing is assumed from the framework's name, since TorchTitan's main-line DeepEP
integration (#2107) keeps DeepEP's default.

With that many SMs the copy rate no longer binds, and neither does NVLink 5 at Seer's
achievable 720 GB/s: the same tuning measured the V1 intranode kernels on B200 at 128 SMs
(received bytes / time, DeepEP's test convention, 4,096 tokens per rank, hidden 2,048, top-8 of
128 experts): EP 8 dispatch 516.71 / combine 485.75 GB/s, EP 4 496.28 / 476.36 GB/s — flat in
the rank count, i.e. a ceiling of the kernels on that link, not of the SMs. Their mean is the
ceiling below, used for NVLink-5 GPUs (the same kernel on the same link: B200, GB200, B300,
GB300). Data and the check: tests/data/deepep/torchtitan_b200_num_sms.csv,
tests/astral/seer/test_deepep_sm_budget.py.
"""

from __future__ import annotations

import re

DEEPEP_NVL5_CEILING_BYTES_PER_S = (516.71e9 + 485.75e9 + 496.28e9 + 476.36e9) / 4
"""Highest rate DeepEP V1's intranode kernels reach on an NVLink-5 GPU whatever their SM
budget: the mean of TorchTitan's four B200 measurements at 128 SMs (EP 8 and EP 4, dispatch and
combine; pytorch/torchtitan 5d4bdd0 `deepep/utils.py` comments, 2025-11-13 tuning)."""
NVLINK5_GBPS = 900.0
"""Per-direction NVLink bandwidth of NVLink 5 (B200/GB200/B300/GB300, the catalog's
`nvlink_gbps`); GPUs at or above it take the ceiling."""

_NUM_SMS_FLAG = re.compile(
    r"(?<!hybridep[-_ ])(?<!hybrid[-_ ]ep[-_ ])num[-_ ]?sms\s*(?:=|:)?\s*(\d{1,3})\b", re.I
)
"""DeepEP's own parameter ("num_sms 128", "num-sms=24", "--num-sms 24", "num_sms: 24"); not
HybridEP's ("--moe-hybridep-num-sms 32", hybridep_sms)."""
_N_SMS = re.compile(r"(?<!of )\b(\d{1,3})\s*SMs?\b(?!\s*(?:per|/|of)\b)", re.I)
"""A count of SMs ("24 SMs"), read only in a clause that names DeepEP ("DeepEP with 24 SMs");
"20 of 132 SMs" or a GPU's SM count in another clause is not a budget."""
_DEEPEP = re.compile(r"deep[-_ ]?ep", re.I)


def stated_num_sms(framework: str | None, notes: str | None = None) -> int | None:
    """SMs a row says DeepEP ran on ("num_sms 128", "num-sms=24", "--num-sms 24", "DeepEP with
    24 SMs"), read from the framework or notes cell of a row that names DeepEP in either, or
    None when it says nothing (DeepEP's default then applies)."""
    if not any(_DEEPEP.search(c or "") for c in (framework, notes)):
        return None
    for cell in (framework, notes):
        m = _NUM_SMS_FLAG.search(cell or "")
        if m is not None:
            return int(m.group(1))
    for cell in (framework, notes):
        for clause in (cell or "").split(";"):
            m = _N_SMS.search(clause) if _DEEPEP.search(clause) else None
            if m is not None:
                return int(m.group(1))
    return None


def nvlink_ceiling(nvlink_gbps: float) -> float | None:
    """The V1 intranode kernels' own ceiling on this GPU's NVLink (bytes/s), None where no
    measurement sets one (before NVLink 5 DeepEP reaches the link: 153-158 of ~160 GB/s on
    H800, DeepEP's README)."""
    return DEEPEP_NVL5_CEILING_BYTES_PER_S if nvlink_gbps >= NVLINK5_GBPS else None


__all__ = [
    "DEEPEP_NVL5_CEILING_BYTES_PER_S",
    "NVLINK5_GBPS",
    "nvlink_ceiling",
    "stated_num_sms",
]
