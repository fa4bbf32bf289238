"""Mechanism classes of a validated run, and Seer's error per class.

A user decides whether to trust Seer on *their* run by how it does on runs that exercise the
same mechanisms: dense or mixture-of-experts layers, context parallelism or not, expert
parallelism inside one host, across hosts joined by one NVLink domain (an NVL72 rack's 4-GPU trays)
or across hosts over the scale-out network, the GPU generation (its kernels and era of
software), and the scale of the job. Each class below is read from the predicted layout, not
from the row's text, so it names what Seer actually modelled.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from starfabric.astral.seer.comm import nvlink_domain, place_group
from starfabric.astral.seer.predict import Prediction

GENERATIONS = (
    ("Blackwell", ("B200", "GB200", "B300", "GB300")),
    ("Hopper", ("H100", "H800", "H200", "GH200", "H20")),
    ("Ampere", ("A100", "A800", "A30", "A10")),
    ("Volta", ("V100",)),
)
"""GPU generation by catalog name prefix (NVIDIA architecture whitepapers)."""
SCALE_BUCKETS = ((64, "<=64 GPUs"), (512, "65-512 GPUs"), (2048, "513-2048 GPUs"))
"""Job-size buckets: one DGX SuperPOD scalable unit is 256-512 GPUs; above 2,048 GPUs a job
spans several SUs and a three-tier fabric (NVIDIA DGX SuperPOD reference architecture)."""
LARGEST_BUCKET = ">2048 GPUs"
EP_NVLINK_HOSTS = "EP across hosts in one NVLink domain"
"""EP over several hosts whose GPUs one NVLink switch fabric joins (GB200/GB300 NVL72: 4-GPU
trays, 72-GPU domain; `comm.nvlink_domain`): its all-to-all never reaches the scale-out NICs, so it
is not the issue's "expert parallelism that leaves the host" over InfiniBand or EFA."""
DIMENSIONS = ("arch", "context_parallel", "expert_parallel", "gpu_generation", "scale")
"""The class dimensions reported, in print order."""


class _Result(Protocol):
    """What a class needs from a validated row (validate.RowResult)."""

    @property
    def prediction(self) -> Prediction: ...

    @property
    def error(self) -> float: ...


def generation(gpu_name: str) -> str:
    """GPU generation of a catalog name ("H100-SXM" → Hopper); "other" when unknown."""
    up = gpu_name.upper()
    for gen, prefixes in GENERATIONS:
        if any(up.startswith(p) for p in prefixes):
            return gen
    return "other"


def scale_bucket(gpus: int) -> str:
    """The job-size bucket of `gpus`."""
    for top, label in SCALE_BUCKETS:
        if gpus <= top:
            return label
    return LARGEST_BUCKET


def classes_of(pred: Prediction) -> dict[str, str]:
    """The mechanism class of one prediction along every dimension."""
    lay, model = pred.layout, pred.job.model
    # The expert-parallel group as the cost model places it (comm.layout_groups: EP members ETP
    # ranks apart), so the class names the placement Seer priced.
    group = place_group(lay.ep, lay.etp, lay.gpus_per_node)
    span = lay.ep * lay.etp  # consecutive ranks the group reaches over
    if not model.is_moe or lay.ep == 1:
        ep = "no EP"
    elif group.nodes == 1:
        ep = "EP within a host"
    elif span <= nvlink_domain(lay.gpus_per_node, lay.gpu, lay.gpus):
        ep = EP_NVLINK_HOSTS
    else:
        ep = "EP across hosts"
    return {
        "arch": "MoE" if model.is_moe else "dense",
        "context_parallel": "CP>1" if lay.cp > 1 else "no CP",
        "expert_parallel": ep,
        "gpu_generation": generation(lay.gpu.name),
        "scale": scale_bucket(lay.gpus),
    }


def class_order(label: str) -> tuple[int, str]:
    """Scale buckets by size, every other class by name."""
    sizes = [lab for _, lab in SCALE_BUCKETS] + [LARGEST_BUCKET]
    return (sizes.index(label) if label in sizes else -1, label)


def errors_by_class(results: Iterable[_Result]) -> dict[str, dict[str, list[float]]]:
    """{dimension: {class: signed errors of its rows}}, classes in print order."""
    groups: dict[str, dict[str, list[float]]] = {d: {} for d in DIMENSIONS}
    for r in results:
        cls = classes_of(r.prediction)
        for dim in DIMENSIONS:
            groups[dim].setdefault(cls[dim], []).append(r.error)
    return {
        dim: dict(sorted(by.items(), key=lambda kv: class_order(kv[0])))
        for dim, by in groups.items()
    }


def per_class(results: Iterable[_Result]) -> dict[str, dict[str, dict[str, float]]]:
    """{dimension: {class: {rows, mean_abs_error, max_abs_error}}} over the results."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for dim, by in errors_by_class(results).items():
        out[dim] = {}
        for c, signed in by.items():
            e = [abs(x) for x in signed]
            out[dim][c] = {
                "rows": len(e),
                "mean_abs_error": sum(e) / len(e),
                "max_abs_error": max(e),
            }
    return out


def class_rows(per: dict[str, dict[str, dict[str, float]]]) -> list[tuple[str, str, Any]]:
    """(dimension, class, stats) in print order."""
    return [(dim, c, st) for dim in DIMENSIONS for c, st in per.get(dim, {}).items()]


__all__ = [
    "DIMENSIONS",
    "GENERATIONS",
    "SCALE_BUCKETS",
    "class_order",
    "class_rows",
    "classes_of",
    "errors_by_class",
    "generation",
    "per_class",
    "scale_bucket",
]
