"""TorchTitan's pipeline-parallel defaults by release: how many micro-batches a step is split
into, and how many virtual stages an interleaved schedule puts on a rank, when the run's
configuration does not say.

Read from pytorch/torchtitan's history (each rule cited to the commit that introduced it):

- until 90567fc (2025-01-07, "fix num_microbatches input for PP"): with
  `experimental.pipeline_parallel_microbatches` unset, `build_pipeline_schedule` used
  `n_microbatches = pipeline_parallel_degree` (torchtitan 9dec370, 2024-12-26,
  `parallelisms/pipelining_utils.py`): the local batch is cut into PP-degree micro-batches,
  whatever its size;
- from 90567fc: `n_microbatches = pipeline_parallel_degree x stages per rank` (the total
  number of stages);
- from 5e2033c (2025-04-07, "[PP] Add microbatch_size and remove num_microbatches config"):
  `parallelism.pipeline_parallel_microbatch_size`, default 1: the local batch is cut into
  micro-batches of one sequence.

Multi-stage (interleaved) schedules without split points or layers per stage get 2 stages per
rank (`generate_split_points`: "Multi-stage schedules support more than 2 stages per rank,
but this is the default if no pipeline split is specified", 9dec370; kept by 8b737fe,
2025-04-07).

The release is read from the YYYY-MM date the row's framework cell names ("TorchTitan
(PyTorch nightly 2024-12, ...)"), to the month (`MICROBATCHES_EQUAL_TOTAL_STAGES_SINCE`).
"""

from __future__ import annotations

from starfabric.astral.seer import releases

MICROBATCHES_EQUAL_TOTAL_STAGES_SINCE = (2025, 1)
"""torchtitan 90567fc (2025-01-07): the default micro-batch count became PP x stages per rank.
A run dated in the month of a change is taken to run the newer code (assumption)."""
MICROBATCH_SIZE_ONE_SINCE = (2025, 4)
"""torchtitan 5e2033c (2025-04-07): the default became micro-batches of one sequence."""
DEFAULT_STAGES_PER_RANK = 2
"""torchtitan `generate_split_points`: stages per rank of a multi-stage schedule when no split
is given."""


def is_torchtitan(framework: str | None) -> bool:
    """Whether a row's framework cell names TorchTitan."""
    return "torchtitan" in (framework or "").lower()


def release_month(framework: str | None) -> tuple[int, int] | None:
    """The (year, month) a framework cell names ("nightly 2024-12"), else None; a span such
    as "2025-26" is not a month."""
    return releases.stated_month(framework)


def default_microbatches(
    month: tuple[int, int] | None, pp: int, stages_per_rank: int, local_batch: int
) -> int:
    """Micro-batches per step TorchTitan of that month ran with its default settings; a run
    without a date takes the current rule (micro-batches of one sequence)."""
    if month is not None and month < MICROBATCHES_EQUAL_TOTAL_STAGES_SINCE:
        return pp
    if month is not None and month < MICROBATCH_SIZE_ONE_SINCE:
        return pp * stages_per_rank
    return local_batch


def default_micro_batch(
    framework: str | None, pp: int, stages_per_rank: int, local_batch: int
) -> int | None:
    """Sequences per micro-batch of a TorchTitan PP run that leaves the micro-batching at its
    default; None when the row is not TorchTitan with PP or the local batch does not divide
    (TorchTitan then refuses to run, so the default cannot be what it ran)."""
    if not is_torchtitan(framework) or pp <= 1 or local_batch < 1:
        return None
    n = default_microbatches(release_month(framework), pp, stages_per_rank, local_batch)
    if n < 1 or local_batch % n:
        return None
    return local_batch // n


__all__ = [
    "DEFAULT_STAGES_PER_RANK",
    "MICROBATCHES_EQUAL_TOTAL_STAGES_SINCE",
    "MICROBATCH_SIZE_ONE_SINCE",
    "default_micro_batch",
    "default_microbatches",
    "is_torchtitan",
    "release_month",
]
