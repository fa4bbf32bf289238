"""What attention rate a published run implies: the multiplier on Seer's fused-attention curve
that makes Seer's iteration time equal the published one, every other cost kept as Seer has it.

For each row `seer validate` predicts (its chosen settings fixed), the forward and backward
fused-attention fractions of the row's GPU (`efficiency.yaml`: the isolated-benchmark curve times
the in-training factor) are scaled by one multiplier m, solved by bisection so that the predicted
iteration equals the published one. m = 1: the row agrees with Seer's attention rate; m > 1: the
run's attention kernels ran faster than Seer's curve (or something else is over-charged by the
same seconds). The in-training factor the row implies is m times the one the fractions carry
(0.65 on Hopper). Rows whose attention is under `--min-share` of Seer's step say little and are
skipped; so are rows whose answer leaves the range the fractions allow (printed as a bound).

    python scripts/seer_attention_implied.py --csv tests/data/published_runs/development_runs_2.csv
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import Job, Prediction, predict
from starfabric.astral.seer.validate import as_published, canonical_row, read_rows, validate_all
from starfabric.errors import StarfabricError

FLASH_FIELDS = ("flash_fwd_fraction", "flash_bwd_fraction")
BISECTION_STEPS = 30
MIN_MULTIPLIER = 0.2


@dataclass(frozen=True)
class ImpliedRate:
    """One row: Seer's step, its attention share and the multiplier the published step implies."""

    row_id: str
    kernel: str
    seq_len: int
    cp: int
    published_s: float
    predicted_s: float
    attention_share: float
    multiplier: float
    bound: str = ""
    """"" when solved; ">" or "<" when the published step lies beyond the allowed range."""


def scaled(job: Job, m: float) -> Job:
    """`job` with its GPU's fused-attention fractions multiplied by `m` (system overrides)."""
    eff = efficiency_for(_gpu(job), job.system.efficiency)
    over = dict(job.system.efficiency)
    for f in FLASH_FIELDS:
        over[f] = getattr(eff, f) * m
    return Job(job.model, job.execution, job.system.model_copy(update={"efficiency": over}))


def _gpu(job: Job) -> GPUSpec:
    return resolve_layout(job.model, job.execution, job.system).gpu


def max_multiplier(job: Job) -> float:
    """The largest m the fractions allow (each stays <= 1)."""
    eff = efficiency_for(_gpu(job), job.system.efficiency)
    return min(1.0 / getattr(eff, f) for f in FLASH_FIELDS)


Reading = Callable[[Prediction], float]
"""Seer's prediction as the row's published figure reads it (`validate.as_published`)."""


def _step(p: Prediction) -> float:
    return p.iteration_s


def implied(
    job: Job, published_s: float, reading: Reading = _step
) -> tuple[float, str, float, float]:
    """(m, bound, Seer's step at m = 1, attention share of it) for `job` against `published_s`,
    Seer's step read as the published figure reads it (`reading`; default: the whole step)."""

    def at(m: float) -> float:
        return reading(predict(job if m == 1.0 else scaled(job, m)))

    t1 = at(1.0)
    hi = max_multiplier(job)
    t_hi = at(hi)
    # Attention share: what the step loses if attention ran infinitely fast, estimated from the
    # step at the fastest allowed rate (time ~ a + b/m): b = (t1 - t_hi) / (1 - 1/hi).
    share = (t1 - t_hi) / (1.0 - 1.0 / hi) / t1 if hi > 1 else 0.0
    lo = MIN_MULTIPLIER
    if published_s <= t_hi:
        return hi, ">", t1, share
    if published_s >= at(lo):
        return lo, "<", t1, share
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if at(mid) > published_s:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi), "", t1, share


def _reading_of(row: dict[str, str]) -> Reading:
    """Seer's prediction read as `row`'s published figure (`validate.as_published`)."""

    def read(p: Prediction) -> float:
        return as_published(row, p)[0]

    return read


def rows_implied(csv: Path, min_share: float) -> list[ImpliedRate]:
    """Every predicted row of `csv` whose attention is at least `min_share` of Seer's step,
    Seer's step read as `seer validate` reads it against the row (`as_published`: production
    averages, XTuner's per-micro-step figure)."""
    out: list[ImpliedRate] = []
    rows = {r["row_id"]: canonical_row(r) for r in read_rows(csv)}
    results, _failed = validate_all(csv)  # rows validate cannot predict are skipped, as there
    for res in results:
        job = res.prediction.job
        row = rows[res.row_id]
        m, bound, t1, share = implied(job, res.published_iter_s, _reading_of(row))
        if share < min_share:
            continue
        ex = job.execution
        out.append(ImpliedRate(
            row_id=res.row_id, kernel=ex.flash_kernel, seq_len=ex.seq_len,
            cp=res.prediction.layout.cp, published_s=res.published_iter_s, predicted_s=t1,
            attention_share=share, multiplier=m, bound=bound,
        ))  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, required=True, help="published-runs CSV")
    ap.add_argument("--min-share", type=float, default=0.15,
                    help="skip rows whose attention is under this share of Seer's step")  # fmt: skip
    args = ap.parse_args(argv)
    if not 0.0 <= args.min_share < 1.0:
        print(f"error: --min-share {args.min_share}: a share of the step must be in [0, 1) "
              "(fix: e.g. --min-share 0.15)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        found = rows_implied(args.csv, args.min_share)
    except StarfabricError as exc:  # a missing or malformed CSV: one line, as the CLI says it
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 2
    print("row              kernel     seq   cp  published s  Seer s  attn share  multiplier")
    for r in found:
        print(f"{r.row_id:16s} {r.kernel:6s} {r.seq_len:8d} {r.cp:4d} {r.published_s:11.2f} "
              f"{r.predicted_s:7.2f} {r.attention_share:10.2f}  {r.bound}{r.multiplier:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
