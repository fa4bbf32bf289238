"""Goodput: the share of a pre-training's wall-clock that is steady-state training.

Seer predicts a steady-state iteration. A run's *production average* — its total GPU-hours (or
wall-clock days) divided by its iterations — also holds the time lost to interruptions: the
restart after each failure (detection, rescheduling, process start, checkpoint load), the work
done since the last checkpoint and lost, and planned maintenance stops. The ratio of the two is
the effective training time ratio (ETTR, Kokolis et al. 2024, "Revisiting Reliability in
Large-Scale Machine Learning Research Clusters", arXiv 2410.21680; Meta calls the same figure
"effective training time" in the Llama 3 paper, arXiv 2407.21783 section 3.3.4).

The model (first order, interruptions arrive as a Poisson process, Kokolis et al. section V):

    interruptions per hour  = nodes x rate per node-day / 24
    ETTR                    = 1 - interruptions per hour x hours lost per interruption

with the rate per node-day by GPU generation (`FAILURES_PER_NODE_DAY`) and the hours lost per
interruption measured on Llama 3's 16K-GPU run (`LOST_HOURS_PER_INTERRUPTION`). A user who
knows their own checkpoint write and restart costs gets the Young/Daly alternative
(`young_daly_ettr`). `seer validate` divides the predicted steady-state time by the ETTR only
for rows whose cells state a whole-run average (`states_production_average`); `seer predict
--production` prints it with the run's wall-clock days.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from starfabric.astral.seer.classes import generation
from starfabric.astral.seer.statements import stated

KOKOLIS_RSC1_FAILURES_PER_1000_NODE_DAYS = 6.50
"""Job-interrupting failures per 1,000 node-days on Meta's RSC-1 (16K A100, 8 per node,
11 months of 2023-2024), Kokolis et al. 2024 (arXiv 2410.21680) section IV; their projection
from it: mean time to failure 1.8 h for a 16,384-GPU job."""

KOKOLIS_RSC2_FAILURES_PER_1000_NODE_DAYS = 2.34
"""The same on RSC-2 (8K A100), Kokolis et al. 2024 — the less loaded of the two clusters;
listed for a user, not used by default (RSC-1 ran the large pre-training jobs)."""

LLAMA3_INTERRUPTIONS = 466
"""Job interruptions in Llama 3 405B's 54-day pre-training snapshot (419 unexpected, 47 planned
maintenance), Llama 3 paper (arXiv 2407.21783) section 3.3.4 / Table 5."""

LLAMA3_DAYS = 54.0
"""Length of that snapshot, days (same source)."""

LLAMA3_GPUS = 16384
"""H100 GPUs of that run, 8 per server (same source, section 3.3.1)."""

LLAMA3_ETTR = 0.90
"""'higher than 90% effective training time' over that snapshot (same source, section 3.3.4).
Assumption: taken as 0.90, so the lost hours per interruption below are an upper bound."""

GPUS_PER_NODE_DEFAULT = 8


def llama3_failures_per_node_day() -> float:
    """Interruptions per node-day on Llama 3's H100 run: 466 / (54 days x 2,048 nodes)."""
    return LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * LLAMA3_GPUS / GPUS_PER_NODE_DEFAULT)


def llama3_lost_hours_per_interruption() -> float:
    """Hours of training lost per interruption on Llama 3's run: (1 - ETTR) x 54 x 24 / 466
    (0.278 h: restart, lost work since the checkpoint, amortised checkpoint stalls)."""
    return (1.0 - LLAMA3_ETTR) * LLAMA3_DAYS * 24.0 / LLAMA3_INTERRUPTIONS


FAILURES_PER_NODE_DAY: dict[str, float] = {
    "Ampere": KOKOLIS_RSC1_FAILURES_PER_1000_NODE_DAYS / 1000.0,
    "Hopper": llama3_failures_per_node_day(),
}
"""Interruptions per node-day by GPU generation (`classes.generation`): A100 fleets from
Kokolis et al. (RSC-1), H100 from Llama 3's run. Assumption: a later generation (Blackwell) has
no published figure and takes Hopper's; an earlier one takes Ampere's (`failures_per_node_day`)."""

LOST_HOURS_PER_INTERRUPTION = llama3_lost_hours_per_interruption()
"""Hours lost per interruption (Llama 3, see `llama3_lost_hours_per_interruption`); the one
published figure that gives it at production scale. Assumption: it holds for every generation;
A100-era runs with slower restarts lose
more, so the ETTR of an older run is, if anything, overstated (less correction)."""

_LATER = ("Blackwell", "Hopper")


def failures_per_node_day(gpu_name: str) -> float:
    """Interruption rate per node-day for a catalog GPU name (`FAILURES_PER_NODE_DAY`)."""
    gen = generation(gpu_name)
    if gen in FAILURES_PER_NODE_DAY:
        return FAILURES_PER_NODE_DAY[gen]
    return FAILURES_PER_NODE_DAY["Hopper" if gen in _LATER else "Ampere"]


def mttf_hours(gpus: int, rate_per_node_day: float, gpus_per_node: int = 8) -> float:
    """Mean time between job interruptions of a job on `gpus` GPUs: 24 / (nodes x rate)."""
    nodes = max(1.0, gpus / max(1, gpus_per_node))
    return 24.0 / (nodes * rate_per_node_day)


@dataclass(frozen=True)
class Goodput:
    """A run's expected goodput: MTTF, lost hours per interruption and the resulting ETTR."""

    gpus: int
    rate_per_node_day: float
    mttf_h: float
    lost_h_per_interruption: float
    ettr: float

    def wall_clock_s(self, steady_s: float) -> float:
        """Wall-clock time of `steady_s` seconds of steady-state training."""
        return steady_s / self.ettr


MIN_ETTR = 0.05
"""Assumption: floor of the first-order model: where interruptions would eat all the time, the linear
formula goes negative; a run that slow is not a run (and the model no longer holds)."""


def goodput(
    gpus: int,
    gpu_name: str,
    gpus_per_node: int = 8,
    lost_h: float = LOST_HOURS_PER_INTERRUPTION,
    rate_per_node_day: float | None = None,
) -> Goodput:
    """Expected ETTR of a job: 1 - lost hours per interruption / MTTF (first order)."""
    rate = failures_per_node_day(gpu_name) if rate_per_node_day is None else rate_per_node_day
    mttf = mttf_hours(gpus, rate, gpus_per_node)
    ettr = max(MIN_ETTR, 1.0 - lost_h / mttf)
    return Goodput(gpus, rate, mttf, lost_h, ettr)


def young_interval_h(checkpoint_write_h: float, mttf_h: float) -> float:
    """Young's (1974) first-order optimum checkpoint interval: sqrt(2 C M)."""
    return math.sqrt(2.0 * checkpoint_write_h * mttf_h)


def young_daly_ettr(
    checkpoint_write_h: float, restart_h: float, mttf_h: float, interval_h: float | None = None
) -> float:
    """ETTR with blocking checkpoint writes C every interval tau and restart cost R per failure
    (Young 1974; Daly 2006, first order): 1 - C/tau - (R + tau/2)/M; tau defaults to Young's
    optimum, where the loss is sqrt(2C/M) + R/M."""
    tau = young_interval_h(checkpoint_write_h, mttf_h) if interval_h is None else interval_h
    waste = checkpoint_write_h / tau + (restart_h + tau / 2.0) / mttf_h
    return max(MIN_ETTR, 1.0 - waste)


PRODUCTION_METRIC = re.compile(r"(?:gpu|node)[- ·]?h(?:ours?|rs?)?\b|\bdays\b|wall[- ]?clock", re.I)
"""A metric_primary cell whose figure is a total of GPU-hours or days (a whole-run figure)."""

PRODUCTION_TEXT = re.compile(
    r"production average|whole[- ](?:pre-?)?training|whole run|entire (?:pre-?)?training", re.I
)
"""Words in a row's metric, derivation or notes cell stating the figure is a whole-run
average (restarts, checkpoints, evaluation inside)."""

NOT_PRODUCTION = re.compile(
    r"not (?:a |the )?(?:production average|whole[- ]run (?:average|figure))", re.I
)
"""Words stating the opposite ("not a production average")."""


def states_production_average(row: dict[str, str]) -> bool:
    """True when the row's cells state that its published figure is a whole-run production
    average: a metric of GPU-hours/days, or 'production average' / 'whole pre-training' in
    its metric, derivation or notes cell, and no cell saying the opposite. A steady-state rate
    whose notes add the days it implies ('est. 84 days', '~21 days') is not one."""
    metric = row.get("metric_primary") or ""
    text = " ".join(row.get(k) or "" for k in ("metric_primary", "derivation_note", "notes"))
    if NOT_PRODUCTION.search(text):
        return False
    # A mention negated in its own words ("no production average", "not whole-run") is not one.
    return bool(stated(PRODUCTION_METRIC, metric) or stated(PRODUCTION_TEXT, text))


def training_days(tokens: float, tokens_per_s: float, ettr: float) -> float:
    """Wall-clock days to train on `tokens` at a steady `tokens_per_s` (whole job) and ETTR."""
    return tokens / (tokens_per_s * ettr) / 86400.0


def production_summary(
    iteration_s: float,
    tokens_per_s: float,
    gpus: int,
    gpu_name: str,
    gpus_per_node: int = 8,
    train_tokens: float | None = None,
) -> dict[str, float]:
    """What `seer predict --production` prints: the run's ETTR, MTTF, lost hours per
    interruption, the whole-run average iteration time and, given the tokens of the whole
    pre-training, its wall-clock days."""
    gp = goodput(gpus, gpu_name, gpus_per_node)
    out = {
        "ettr": gp.ettr,
        "mttf_h": gp.mttf_h,
        "failures_per_node_day": gp.rate_per_node_day,
        "lost_h_per_interruption": gp.lost_h_per_interruption,
        "iteration_s": gp.wall_clock_s(iteration_s),
    }
    if train_tokens is not None:
        out["train_tokens"] = train_tokens
        out["training_days"] = training_days(train_tokens, tokens_per_s, gp.ettr)
    return out
