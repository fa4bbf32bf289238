"""The software stack a layout search prices every layout with.

ExecutionSpec's fields fall in three groups. LAYOUT_FIELDS are what the search varies (or
derives from what it varies); JOB_FIELDS are the search's own arguments; every other field is
the user's STACK (dispatcher, attention kernel, CP algorithm, fusions, FP8 copies, MoE routing,
optimizer state dtype, ...). Stack fields that act inside a layer reach the search's layer
costs through the ExecutionSpec `evaluate.layer_costs` builds from the base
(`base.model_copy(update=<layout>)`); those the vectorized evaluator prices at the schedule
level (gradient dtype, optimizer moments, the CPU optimizer's overlap and threads) are read by
`evaluate.evaluate`. UNMODELLED lists the settings whose schedule-level effect the evaluator
does not model: a base that sets one is refused rather than priced as something else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starfabric.astral.seer import async_grad_input
from starfabric.astral.seer.megatron_cli import looks_like_megatron
from starfabric.astral.seer.parallel import ExecutionSpec
from starfabric.config import parse_spec, read_mapping
from starfabric.errors import ConfigError

LAYOUT_FIELDS = frozenset({
    "tp", "cp", "pp", "vpp", "dp", "ep", "etp", "micro_batch", "recompute", "tp_comm_overlap",
    "overlap_grad_reduce", "overlap_param_gather", "zero", "offload_activations",
    "offload_weights", "optimizer_offload_fraction", "pipeline_layers",
})  # fmt: skip
"""Fields each layout sets (pipeline_layers: the search's own uneven split)."""
JOB_FIELDS = frozenset({"global_batch", "seq_len", "precision"})
"""Fields the search takes as arguments."""
STACK_FIELDS = frozenset(ExecutionSpec.model_fields) - LAYOUT_FIELDS - JOB_FIELDS
"""Everything else: the software stack every layout is priced with."""

UNMODELLED: dict[str, tuple[Any, str]] = {
    "ep_comm_overlap": (
        False,
        "the EP overlap pairs micro-batches across the pipeline schedule (warm-up and "
        "cool-down passes keep their all-to-all), which the search's closed form does not model",
    ),
    "pipeline_schedule": ("1f1b", "the search prices (interleaved) 1F1B pipelines only"),
    "host_launches": (
        False,
        "host launch segments and the host floor are timed by the full schedule only",
    ),
    "overlap_p2p": (True, "the search prices overlapped PP send/recv only"),
    "sp": (True, "the search prices sequence parallelism on (with tp > 1)"),
    "zero_shard_ranks": (None, "the search shards ZeRO over the whole DP group only"),
    "torchtitan_memory": (
        False,
        "TorchTitan's fp32 loss and FSDP2 buffers are in predict's memory, not the search's",
    ),
    "torchtitan_op_sac": (
        False,
        "per-op SAC's saved tensors are in predict's memory, not the search's",
    ),
    "offload_modules": (
        (),
        "fine-grained activation offload's copies and host memory are in predict's schedule "
        "and memory, not the search's",
    ),
    "recompute_method": (
        None,
        "the search varies recompute over none/selective/full with every layer checkpointed; "
        "Megatron's partial full recompute (uniform groups, block's first N layers per "
        "chunk, partial_recompute) is priced by predict only",
    ),
    "recompute_num_layers": (
        None,
        "Megatron's --recompute-num-layers (partial_recompute) is priced by predict only",
    ),
}
"""Stack settings the search refuses unless at their default: (default, why)."""


def search_base(
    stack: ExecutionSpec | None, global_batch: int, seq_len: int, precision: str
) -> ExecutionSpec:
    """The base execution every layout is priced with: `stack`'s stack fields (defaults when
    None) and the search's job fields. A job field that disagrees with the search's, or a
    setting in UNMODELLED, is a ConfigError; layout fields of `stack` are replaced per layout."""
    job = {"global_batch": global_batch, "seq_len": seq_len, "precision": precision}
    if stack is None:
        return ExecutionSpec.model_validate(job)
    for key, val in job.items():
        if getattr(stack, key) != val:
            raise ConfigError(
                f"execution.{key} = {getattr(stack, key)!r} but the search runs {key} = {val!r}",
                fix=f"give the search {key} {getattr(stack, key)!r} or drop it from the execution",
            )
    for key, (default, why) in UNMODELLED.items():
        if getattr(stack, key) != default:
            raise ConfigError(
                f"execution.{key} = {getattr(stack, key)!r}: search does not model it ({why})",
                fix=f"use seer predict for this job, or search with {key} = {default!r}",
            )
    return stack


def load_stack(path: str | Path, global_batch: int, seq_len: int, precision: str) -> ExecutionSpec:
    """The execution section of a job YAML/JSON as a search's stack: the search's job fields
    fill what the file leaves out; an unknown field or a job field that disagrees is a
    ConfigError. A Megatron-LM launch command is refused: `seer predict` prices it with the
    host's launches (host_launches), which the search does not model."""
    if looks_like_megatron(path):
        raise ConfigError(
            f"{path}: a Megatron-LM launch command is priced with its host launches "
            "(host_launches), which search does not model",
            fix="use seer predict for this job, or give --stack a job YAML with an execution "
            "section",
        )
    ex: Any = read_mapping(path).get("execution")
    if not isinstance(ex, dict):
        raise ConfigError(
            f"{path}: no execution mapping to take the software stack from",
            fix="give a job file with an execution section (as seer predict reads)",
        )
    job = {"global_batch": global_batch, "seq_len": seq_len, "precision": precision}
    spec = parse_spec(ExecutionSpec, {**job, **ex}, source=f"{path}: execution")
    return search_base(spec, global_batch, seq_len, precision)


def stack_settings(base: ExecutionSpec) -> dict[str, Any]:
    """The stack fields of `base` that differ from ExecutionSpec's defaults, JSON-ready, and
    tp_async_backward where it differs from the default its other settings give (a stated
    True on a DeepSpeed or TorchTitan stack: async_grad_input.job_default)."""
    dumped = base.model_dump(mode="json")
    default = ExecutionSpec(global_batch=1, seq_len=1).model_dump(mode="json")
    out = {k: dumped[k] for k in sorted(STACK_FIELDS) if dumped[k] != default[k]}
    if base.tp_async_backward != async_grad_input.job_default(dumped):
        out["tp_async_backward"] = base.tp_async_backward
    return out


__all__ = [
    "JOB_FIELDS",
    "LAYOUT_FIELDS",
    "STACK_FIELDS",
    "UNMODELLED",
    "load_stack",
    "search_base",
    "stack_settings",
]
