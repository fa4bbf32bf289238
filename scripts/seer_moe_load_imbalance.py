"""Dropless routing's busiest expert-parallel rank, from outside load statistics (issue 32).

Reads tests/data/published_runs/moe_load_imbalance.csv (measured per-expert and per-rank token
loads of trained routers, notes in its .md) and prints, for each row, the per-expert coefficient
of variation `cv` it implies, then what the model below gives for the busiest EP rank's load /
mean at Seer's granularity (one MoE layer, one micro-batch) for a range of shapes.

It is a finding, not a mechanism: Seer keeps `ops.MOE_IMBALANCE` = 1.1. Wired into
`ops.moe_imbalance` the model moves development set 2's mean past the regression bound
(docs/astral.md, "Dropless routing's rank imbalance from outside load statistics").

The model (`rank_load_imbalance`), per MoE layer and micro-batch:

- each routed expert's share of the assignments deviates from the mean by a relative amount
  with coefficient of variation `cv` across experts (the router's preference on the data);
- an EP rank holds m = E / EP experts and receives the sum of their loads: m of E experts drawn
  without replacement, its relative deviation has variance cv^2 (E - m) / (m (E - 1));
- on top, the micro-batch's tok x k assignments per rank are a multinomial sample: relative
  variance (1 - 1/EP) / (tok k);
- the busiest of EP ranks sits z(EP) standard deviations above the mean, z(n) the expected
  maximum of n independent standard normals (`expected_max_normal`).

    busiest / mean = 1 + z(EP) sqrt(cv^2 (E - m) / (m (E - 1)) + (1 - 1/EP) / (tok k))

With EP = 1 a rank holds every expert and the ratio is 1. `cv` is read from a per-expert MaxVio
((max - mean) / mean over E experts) as MaxVio / z(E) (`cv_from_maxvio`), from a per-rank
max / mean by inverting the formula without the sampling term (`cv_from_rank_ratio`, an upper
bound), or directly from a vector of expert counts.

    python scripts/seer_moe_load_imbalance.py
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.special import ndtr

EXPERT_LOAD_CV = 0.30
"""Coefficient of variation of routed experts' load under a learned router (assumption read
from two outside measurements, moe_load_imbalance.md): DeepSeek's Loss-Free Balancing paper
(arXiv:2408.15664 Table 2: 1B DeepSeekMoE, 64 routed experts, top-6, auxiliary loss
alpha = 0.001, MaxVio_global 0.72 -> cv = 0.72 / z(64) = 0.307; the 3B model's 0.52 -> 0.222)
and vLLM PR #50647 (Kimi K3, 896 routed experts, top-16, EP 16, no EPLB: median busiest rank
1.069 x the mean -> cv = 0.302, an upper bound: that figure includes the decode batch's
sampling noise)."""

_GRID = np.linspace(-12.0, 12.0, 24001)


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] by quadrature of n x phi(x) Phi(x)^(n-1)."""
    if n < 1:
        raise ValueError(f"expected_max_normal: n = {n}; need n >= 1")
    if n == 1:
        return 0.0
    pdf = np.exp(-0.5 * _GRID**2) / math.sqrt(2.0 * math.pi)
    f = _GRID * n * pdf * ndtr(_GRID) ** (n - 1)
    return float(np.sum(f) * (_GRID[1] - _GRID[0]))


def rank_spread(experts: int, ep: int, cv: float) -> float:
    """Relative standard deviation of one EP rank's summed load (m = E / EP of E experts drawn
    without replacement, each with load coefficient of variation `cv`)."""
    if ep <= 1 or experts <= 1:
        return 0.0
    m = experts / ep
    return cv * math.sqrt((experts - m) / (m * (experts - 1)))


def rank_load_imbalance(
    experts: int, ep: int, tokens_per_rank: float, topk: int, cv: float = EXPERT_LOAD_CV
) -> float:
    """Busiest EP rank's routed assignments / mean, per layer and micro-batch (module doc)."""
    if ep <= 1:
        return 1.0
    sampling = (1.0 - 1.0 / ep) / max(tokens_per_rank * topk, 1.0)
    spread = math.sqrt(rank_spread(experts, ep, cv) ** 2 + sampling)
    return 1.0 + expected_max_normal(ep) * spread


def cv_from_maxvio(maxvio: float, experts: int) -> float:
    """Per-expert coefficient of variation that puts the busiest of `experts` at 1 + maxvio."""
    return maxvio / expected_max_normal(experts)


def cv_from_rank_ratio(ratio: float, experts: int, ep: int) -> float:
    """Per-expert coefficient of variation that puts the busiest of `ep` ranks (E / EP experts
    each) at `ratio` x the mean, sampling noise ignored (so an upper bound)."""
    return (ratio - 1.0) / (expected_max_normal(ep) * rank_spread(experts, ep, 1.0))


def cv_of_counts(counts: list[float]) -> float:
    """Population standard deviation / mean of a vector of expert token counts."""
    a = np.asarray(counts, dtype=float)
    return float(a.std() / a.mean())


ROOT = Path(__file__).parents[1]
CSV = ROOT / "tests" / "data" / "published_runs" / "moe_load_imbalance.csv"

SHAPES = (
    ("Qwen3-235B-A22B EP8", 128, 8, 8),
    ("Qwen3-235B-A22B EP16", 128, 16, 8),
    ("Qwen3-235B-A22B EP32", 128, 32, 8),
    ("DeepSeek-V3 EP8", 256, 8, 8),
    ("DeepSeek-V3 EP16", 256, 16, 8),
    ("DeepSeek-V3 EP32", 256, 32, 8),
    ("DeepSeek-V3 EP64", 256, 64, 8),
    ("Mixtral-8x7B EP8", 8, 8, 2),
    ("Kimi K3 EP16", 896, 16, 16),
)
"""(name, routed experts, EP, top-k) of the shapes the dropless rows of the three sets run."""
TOKENS_PER_RANK = 4096.0
"""Tokens one EP rank dispatches per micro-batch in the printed table (sequence 4096, one
sequence): the sampling term is then at most 0.2% of the mean."""


def implied_cv(row: dict[str, str]) -> float | None:
    """The per-expert cv a row of moe_load_imbalance.csv implies (None: a whole-step bound or a
    duplicate statistic)."""
    stat, value = row["statistic"], float(row["value"])
    experts = int(row["routed_experts"]) if row["routed_experts"] else 0
    if stat.startswith("MaxVio_global"):
        return cv_from_maxvio(value, experts)
    if stat == "median max/mean rank load" and row["row_id"].endswith("CTRL"):
        return cv_from_rank_ratio(value, experts, int(row["ep"]))
    if row["granularity"].startswith("per expert (the 16"):
        return cv_of_counts(counts_in(row["notes"]))
    return None


def counts_in(notes: str) -> list[float]:
    """The expert counts a row's notes list after 'counts:'."""
    words = notes.split("counts:", 1)[1].split("(", 1)[0].split()
    return [float(w) for w in words]


def read_rows(path: Path = CSV) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--tokens", type=float, default=TOKENS_PER_RANK, help="tokens per EP rank")
    args = ap.parse_args(argv)
    rows = read_rows(args.csv)
    print("row                  statistic value   implied cv  used")
    cvs = []
    for r in rows:
        cv = implied_cv(r)
        shown = f"{cv:.4f}" if cv is not None else "-"
        print(f"{r['row_id']:20s} {float(r['value']):>15.4f} {shown:>11s}  {r['used_for_cv']}")
        if cv is not None and r["used_for_cv"] == "yes":
            cvs.append(cv)
    grid = sorted({round(c, 3) for c in cvs} | {EXPERT_LOAD_CV})
    print(f"\nbusiest EP rank / mean at {args.tokens:.0f} tokens per rank, by cv:")
    print(f"{'shape':24s} {'m':>5s} " + " ".join(f"{c:>7.3f}" for c in grid))
    for name, e, ep, k in SHAPES:
        vals = " ".join(f"{rank_load_imbalance(e, ep, args.tokens, k, c):7.3f}" for c in grid)
        print(f"{name:24s} {e / ep:5.0f} {vals}")
    need = cv_from_rank_ratio(1.8, 128, 8)
    print(f"\ncv that would put Qwen3-235B's busiest EP8 rank at 1.8x the mean: {need:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
