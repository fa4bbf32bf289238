"""Bytes of optimizer state per parameter, and when a run keeps Adam's moments in BF16.

Megatron mixed precision keeps an fp32 master copy of every parameter and Adam's two
moments in fp32: 12 bytes per parameter, sharded by the distributed optimizer over the
data-parallel group (dense) or the expert-data-parallel group (experts). Megatron-Core's
precision-aware optimizer (`--use-precision-aware-optimizer --exp-avg-dtype bf16
--exp-avg-sq-dtype bf16`, Transformer Engine's FusedAdam; BF16 moment states arrived in
Megatron Core 0.13.0, CHANGELOG.md @0a296d1) stores both moments in BF16 and keeps the fp32
master: 4 + 2 + 2 = 8 bytes. DeepSeek-V3 trained this way (technical report, arXiv
2412.19437, section 3.3.2: "BF16 ... for the first and second moments in the AdamW
optimizer"), and NVIDIA's DeepSeek-V3 recipes enable it ("Enable BF16 optimizer states",
Megatron-MoE-ModelZoo best_practice/DeepSeekV3/readme.md @0467ed3; Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization @1d9edcf, baseline item 7). The step reads
and writes the same tensors either way, so Seer's optimizer time does not change with it.
"""

from __future__ import annotations

import re
from typing import Literal

from starfabric.astral.seer.releases import megatron_core_at_least

MASTER_BYTES = 4.0
"""fp32 master weight per parameter (Megatron keeps it with either moment precision)."""
MOMENT_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0}
"""Bytes of each of Adam's two moments (exp_avg, exp_avg_sq) by storage dtype."""
PRECISION_AWARE_MIN_MCORE = (0, 13)
"""First Megatron Core release with BF16 optimizer states (CHANGELOG.md, 0.13.0: "Support
bf16 dtype for optimizer states to use precision-aware optimizer in TransformerEngine")."""

Moments = Literal["fp32", "bf16"]

_STATED_BF16 = re.compile(
    r"precision[- ]aware[- ]optimizer|bf16 (?:optimizer states|moments|adam)|"
    r"exp[-_]avg[-_](?:sq[-_])?dtype[ =]+bf16|optimizer states? in bf16",
    re.I,
)


def optimizer_bytes(moments: str) -> float:
    """Bytes of optimizer state per parameter before sharding (fp32 master + 2 moments)."""
    return MASTER_BYTES + 2.0 * MOMENT_BYTES[moments]


def stated_bf16_moments(text: str) -> bool:
    """True when a row's cells say the run kept Adam's moments in BF16."""
    return bool(_STATED_BF16.search(text))


def offers_bf16_moments(framework: str) -> bool:
    """True when the framework release a row names ships BF16 optimizer states, so a
    tuning user can turn them on before recomputing more: Megatron Core >= 0.13 named by
    version, any Megatron-Bridge (built on Core 0.14 and later), or a NeMo container of
    25.07 or later (the first built on Core 0.13)."""
    return megatron_core_at_least(framework, PRECISION_AWARE_MIN_MCORE)
