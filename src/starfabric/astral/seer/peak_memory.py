"""Published peak memory of real training runs, and Seer's memory report for the same runs.

`tests/data/published_memory/peak_memory.csv` holds three kinds of rows:

- `max_reserved`: a framework's logged peak of the PyTorch caching allocator
  (`torch.cuda.memory_stats()["reserved_bytes.all.peak"]`; TorchTitan's `metrics.py` logs it
  as "memory"), in GiB. It counts what the allocator took from the driver, fragmentation
  included, and not the CUDA context or NCCL's own buffers, which are allocated outside it.
- `runs`: a configuration its publisher ran (a step time or a tuned recipe): its peak fits in
  the GPU, whatever it was.
- `oom`: a configuration its publisher reports as out of memory.

A row either names a performance row (`runs_csv`, `row_id`) whose configuration `seer validate`
reads, with this file's micro_batch / global_batch cells overriding that row's (any other
configuration cell beside a row_id is refused), or states the
configuration in its own columns (model, GPU, degrees, micro-batch, recompute ...).
"""

from __future__ import annotations

import csv
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starfabric.astral.seer import cells
from starfabric.astral.seer.memory import MemoryReport
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.predict import make_job, predict
from starfabric.errors import DataError

KINDS = ("max_reserved", "runs", "oom")
"""What a row's figure is (module docstring)."""

_OVERRIDES = {"micro_batch": "micro_batch", "global_batch": "global_batch_seqs"}
"""Configuration columns of this file that replace a named performance row's cells."""
_ROW_KEYS = {"kind", "published_gib", "capacity_gib_stated", "runs_csv", "row_id"}
"""Columns of a row that names a performance row which are not configuration."""


@dataclass(frozen=True)
class PeakRow:
    """One published memory figure and the run it belongs to."""

    memory_id: str
    source_id: str
    kind: str
    published_gib: float | None
    capacity_gib: float | None
    runs_csv: str
    row_id: str
    config: dict[str, str] = field(default_factory=dict)
    notes: str = ""


def _float(row: dict[str, str], key: str, path: Path) -> float | None:
    raw = (row.get(key) or "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise DataError(
            f"{path}: row {row.get('memory_id')}: {key} = {raw!r} is not a number",
            fix=f"write {key} in GiB, e.g. 82.4",
        ) from None


STATED_REQUIRED = ("model", "gpu", "num_gpus", "micro_batch", "global_batch", "seq_len")
"""Columns a row that states its own configuration (no `row_id`) must give."""
_STATED_INTS = ("mtp_layers", "num_gpus", "gpus_per_node", "tp", "pp", "vpp", "ep", "cp",
                "micro_batch", "global_batch", "seq_len")  # fmt: skip


def _check_stated(cfg: dict[str, str], memory_id: str | None, path: Path) -> None:
    """A stated configuration's cells: the required ones present, the counts whole numbers."""
    lacking = [k for k in STATED_REQUIRED if k not in cfg]
    if lacking:
        raise DataError(
            f"{path}: row {memory_id}: no row_id and no {', '.join(lacking)}",
            fix="name the performance row (runs_csv, row_id) or state the whole configuration",
        )
    ints = [(k, cfg[k]) for k in _STATED_INTS if k in cfg]
    if "pipeline_layers" in cfg:
        ints += [("pipeline_layers", x) for x in cfg["pipeline_layers"].strip("[]").split(",")]
    raw_overlap = cfg.get("ep_comm_overlap")
    if raw_overlap is not None and cells.flag(raw_overlap) is None:
        raise DataError(
            f"{path}: row {memory_id}: ep_comm_overlap = {raw_overlap!r} says neither on nor off",
            fix="write true or false",
        )
    for key, raw in ints:
        if not raw.strip().isdigit():
            raise DataError(
                f"{path}: row {memory_id}: {key} = {raw!r} is not a whole number",
                fix=f"write {key} as a count, e.g. 8"
                + (" (pipeline_layers: [a,b,...])" if key == "pipeline_layers" else ""),
            )


def read_peaks(path: str | Path) -> list[PeakRow]:
    """The rows of a published-peak-memory CSV; a bad cell is a DataError naming it."""
    p = Path(path)
    with p.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out: list[PeakRow] = []
    for r in rows:
        kind = (r.get("kind") or "").strip()
        if kind not in KINDS:
            raise DataError(
                f"{p}: row {r.get('memory_id')}: kind = {kind!r}",
                fix=f"use one of {', '.join(KINDS)}",
            )
        pub = _float(r, "published_gib", p)
        if kind == "max_reserved" and pub is None:
            raise DataError(
                f"{p}: row {r.get('memory_id')}: a max_reserved row without published_gib",
                fix="give the published peak in GiB",
            )
        if not (r.get("row_id") or r.get("model")):
            raise DataError(
                f"{p}: row {r.get('memory_id')}: neither row_id nor model is given",
                fix="name the performance row (runs_csv, row_id) or state the model",
            )
        cfg_keys = [k for k in r if k not in ("memory_id", "source_id", "citation", "notes")]
        config = {k: r[k].strip() for k in cfg_keys if (r.get(k) or "").strip()}
        if not (r.get("row_id") or "").strip():
            _check_stated(config, r.get("memory_id"), p)
        else:
            ignored = sorted(set(config) - set(_OVERRIDES) - _ROW_KEYS)
            if ignored:
                raise DataError(
                    f"{p}: row {r.get('memory_id')}: {', '.join(ignored)} given for the named "
                    f"performance row {r['row_id'].strip()}, which only "
                    f"{' and '.join(_OVERRIDES)} override",
                    fix="drop those cells, or state the whole configuration without row_id",
                )
        out.append(
            PeakRow(
                memory_id=r["memory_id"],
                source_id=r.get("source_id") or "",
                kind=kind,
                published_gib=pub,
                capacity_gib=_float(r, "capacity_gib_stated", p),
                runs_csv=(r.get("runs_csv") or "").strip(),
                row_id=(r.get("row_id") or "").strip(),
                config=config,
                notes=r.get("notes") or "",
            )
        )
    return out


def _stated_job(cfg: dict[str, str]) -> MemoryReport:
    """Seer's memory report for a configuration stated in the row's own columns."""
    model = load_model(cfg["model"])
    if "mtp_layers" in cfg:
        model = model.model_copy(update={"mtp_layers": int(cfg["mtp_layers"])})
    mods = tuple(cfg.get("recompute_modules", "").split())
    ex: dict[str, Any] = {
        "global_batch": int(cfg["global_batch"]),
        "micro_batch": int(cfg["micro_batch"]),
        "seq_len": int(cfg["seq_len"]),
        "precision": cfg.get("precision", "bf16"),
        "tp": int(cfg.get("tp", "1")),
        "pp": int(cfg.get("pp", "1")),
        "vpp": int(cfg.get("vpp", "1")),
        "cp": int(cfg.get("cp", "1")),
        "ep": int(cfg.get("ep", "1")),
        "zero": 1,  # Megatron's distributed optimizer
        "recompute": cfg.get("recompute", "none"),
        "recompute_modules": mods,
        "optimizer_moments": cfg.get("optimizer_moments", "fp32"),
    }
    if model.is_moe:
        ex["moe_dispatcher"] = cfg.get("moe_dispatcher", "alltoall")
        ex["ep_comm_overlap"] = bool(cells.flag(cfg.get("ep_comm_overlap")))
    if "pipeline_layers" in cfg:
        ex["pipeline_layers"] = [int(x) for x in cfg["pipeline_layers"].strip("[]").split(",")]
    system = {
        "gpu": cfg["gpu"],
        "gpus": int(cfg["num_gpus"]),
        "gpus_per_node": int(cfg.get("gpus_per_node", "8")),
    }
    return predict(make_job(model, ex, system)).memory


def seer_memory(row: PeakRow, runs_dir: str | Path) -> MemoryReport:
    """Seer's memory report for the row's run: the named performance row as `seer validate`
    reads it (its UNVERIFIED settings chosen the same way), or the stated configuration."""
    if not row.row_id:
        return _stated_job(row.config)
    validate = importlib.import_module("starfabric.astral.seer.validate")
    path = Path(runs_dir) / row.runs_csv
    runs = {r["row_id"]: r for r in validate.read_rows(path)}
    if row.row_id not in runs:
        raise DataError(f"{path}: no row {row.row_id!r}", fix="check row_id in the memory CSV")
    run = dict(runs[row.row_id])
    for key, cell in _OVERRIDES.items():
        if key in row.config:
            run[cell] = row.config[key]
    return validate.validate_row(run).prediction.memory


__all__ = ["KINDS", "STATED_REQUIRED", "PeakRow", "read_peaks", "seer_memory"]
