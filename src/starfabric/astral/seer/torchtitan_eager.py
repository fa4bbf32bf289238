"""TorchTitan's Llama run eagerly (no `torch.compile`): the HBM traffic of its unfused
elementwise code.

Seer's layer table prices the norms and the SwiGLU activation as one fused kernel each (what
Transformer Engine, Apex or Inductor run) and has no RoPE kernel. TorchTitan's Llama of
2024-12 (pytorch/torchtitan 9dec370, `torchtitan/models/norms.py` and
`torchtitan/models/llama/model.py`) writes them as plain PyTorch; without `torch.compile`
(TorchTitan's default then: `training.compile = false` in `train_configs/llama3_8b.toml`) every
operator is its own kernel and re-reads its input from HBM. Bytes per element, read + write,
counted from that code for a BF16 activation:

- `RMSNorm.forward`: `x.float()` 2 + 4, `x.pow(2)` 4 + 4, `.mean(-1)` 4, `x * rsqrt(...)` 4 + 4,
  `.type_as(x)` 4 + 2, `output * self.weight` 2 + 2 = 36, against the 4 of one fused kernel.
- `apply_rotary_emb` on every query and key element: `xq.float()` 2 + 4, the complex product
  with `freqs_cis` 4 + 4 (the table of one position is shared by all heads and stays in cache),
  `type_as` 4 + 2 = 20 (a fused kernel would move 4; Seer counts none, so all 20 are added).
- `FeedForward.forward`: `F.silu(w1(x))` 2 + 2 and `* w3(x)` 2 + 2 + 2 = 10 per hidden element,
  against the 6 of a fused SwiGLU.

The backward takes the project's factors (`ops.NORM_BWD_BYTES_FACTOR` for the norm,
`ops.ELEMENTWISE_BWD_BYTES_FACTOR` for the rest), as for the fused kernels. TorchTitan's
op-level selective checkpointing (`_apply_ac_to_transformer_block`, 9dec370) saves only the
outputs of every other `mm`, of SDPA and of the reductions in `_save_list`: every elementwise
operator is re-run in the backward, so these bytes are also recompute when recompute is
selective (the re-run GEMMs are left to the selective set Seer already prices).

What stays out: `repeat_kv`'s copy of K and V to the query heads and the copy that makes the
attention output contiguous run in compiled code too (SDPA needs materialized operands), so
they do not separate eager from compiled; the loss (compiled per block only, eager either
way). From torchtitan 3b39d7a (2025-03-19, "Switch RMSNorm implementation to native PyTorch
version") the norm is `nn.RMSNorm`, whose eager kernels were not counted here: the mechanism
applies to releases before that (`EAGER_COUNTED_UNTIL`).

Check (not a fit; `tests/astral/seer/test_torchtitan_eager.py`): TorchTitan's 2024-12 H100
benchmark publishes BF16 runs of the same Llama 3.1 8B jobs with and without `torch.compile`
(Tables 1 and 3: 6,667 / 5,762 and 6,514 / 5,605 tokens/s per GPU, ratios 1.157 and 1.162);
the compiled BF16 runs are not development rows.
"""

from __future__ import annotations

import re

from starfabric.astral.seer import releases, torchtitan_pp
from starfabric.astral.seer.statements import stated

EAGER_NORM_BYTES = 36.0
"""HBM bytes per element of TorchTitan's eager `RMSNorm.forward` (module docstring)."""
FUSED_NORM_BYTES = 4.0
"""HBM bytes per element of a fused norm kernel (read 2, write 2), what `ops` already counts."""
EAGER_ROPE_BYTES = 20.0
"""HBM bytes per query/key element of TorchTitan's eager complex-number RoPE."""
EAGER_SWIGLU_BYTES = 10.0
"""HBM bytes per hidden element of the eager `silu(w1 x) * (w3 x)` (two kernels)."""
FUSED_SWIGLU_BYTES = 6.0
"""HBM bytes per hidden element of a fused SwiGLU (read 2 x 2, write 2), what `ops` counts."""
EAGER_COUNTED_UNTIL = (2025, 3)
"""torchtitan 3b39d7a (2025-03-19) replaced the counted `RMSNorm` by `nn.RMSNorm`: runs dated
from that month on are not given these bytes."""

_EAGER = re.compile(r"\beager(?:[- ]mode)?\b", re.I)
"""A cell naming eager execution ("eager", "eager mode")."""
_COMPILE = re.compile(r"torch[._]?compile|\bcompile\b", re.I)
"""A cell naming `torch.compile` (or TorchTitan's `compile = false` switch; a negated mention
such as "no torch.compile" or "torch.compile off" is read by statements.stated)."""


def runs_eager(framework: str | None, notes: str | None = None) -> bool:
    """Whether a row's framework or notes cell states a TorchTitan run without `torch.compile`
    ("eager", "no torch.compile", "torch.compile off", "compile = false") of a release whose
    eager Llama code is counted here (dated before `EAGER_COUNTED_UNTIL`, by the framework
    cell). A cell that states compile on ("torch.compile") is not eager."""
    if not torchtitan_pp.is_torchtitan(framework):
        return False
    compiled = stated(_COMPILE, framework, notes)
    eager = stated(_EAGER, framework, notes) or compiled is False
    if not eager or compiled:
        return False
    month = releases.stated_month(framework)
    return month is not None and month < EAGER_COUNTED_UNTIL


def norm_extra_bytes(tokens: float, hidden: int) -> float:
    """Forward bytes one eager RMSNorm moves beyond a fused one."""
    return (EAGER_NORM_BYTES - FUSED_NORM_BYTES) * tokens * hidden


def rope_bytes(tokens: float, qk_width: float) -> float:
    """Forward bytes of the eager RoPE on `qk_width` query + key elements per token."""
    return EAGER_ROPE_BYTES * tokens * qk_width


def swiglu_extra_bytes(tokens: float, ffn_local: float) -> float:
    """Forward bytes the eager SwiGLU moves beyond a fused one."""
    return (EAGER_SWIGLU_BYTES - FUSED_SWIGLU_BYTES) * tokens * ffn_local


__all__ = [
    "EAGER_COUNTED_UNTIL",
    "EAGER_NORM_BYTES",
    "EAGER_ROPE_BYTES",
    "EAGER_SWIGLU_BYTES",
    "FUSED_NORM_BYTES",
    "FUSED_SWIGLU_BYTES",
    "norm_extra_bytes",
    "rope_bytes",
    "runs_eager",
    "swiglu_extra_bytes",
]
