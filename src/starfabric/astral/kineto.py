"""Input layer for Kineto (PyTorch profiler) Chrome-trace files, plain or gzip: read, then
validate every event the consumers use (Seer's GEMM calibration, the monitor's ingest).

A truncated gzip, JSON that is not a trace, an event with a non-finite or negative time, or a
trace with no GPU kernel at all (profiled without CUDA activity) is a one-line DataError.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starfabric.errors import DataError

MAX_TRACE_BYTES = 1 << 30
"""Refuse trace files above 1 GiB (compressed size): parsing one takes ~10x that in memory."""

MAX_EXPANDED_BYTES = 4 << 30
"""Refuse a gzip whose JSON would exceed 4 GiB once expanded (checked while reading)."""

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
"""Kineto's categories of events that ran on the GPU."""


@dataclass(frozen=True)
class KinetoTrace:
    """The trace's events (each a dict with a name, a category and finite ts/dur) and its
    distributedInfo (rank, world size) when the profiler recorded one."""

    path: str
    events: list[dict[str, Any]]
    rank: int
    kernels: int


def _read(p: Path) -> str:
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise DataError(f"{p}: cannot read ({exc.strerror})", fix="check the path") from None
    if size > MAX_TRACE_BYTES:
        raise DataError(
            f"{p}: {size:,} bytes is above the {MAX_TRACE_BYTES >> 20} MiB trace limit",
            fix="profile fewer steps (torch.profiler schedule active=1) or one rank per file",
        )
    try:
        with p.open("rb") as fh:
            magic = fh.read(2)
        if p.suffix == ".gz" or magic == b"\x1f\x8b":
            with gzip.open(p, "rb") as fh:
                raw = fh.read(MAX_EXPANDED_BYTES + 1)
            if len(raw) > MAX_EXPANDED_BYTES:
                raise DataError(
                    f"{p}: expands beyond {MAX_EXPANDED_BYTES >> 30} GiB",
                    fix="profile fewer steps or one rank per file",
                )
        else:
            raw = p.read_bytes()
        return raw.decode("utf-8")
    except EOFError:
        raise DataError(
            f"{p}: the gzip stream ends early (the file is truncated)",
            fix="copy the trace again; an interrupted profiler run leaves a partial file",
        ) from None
    except (OSError, zlib.error) as exc:
        raise DataError(
            f"{p}: not a readable gzip/JSON file ({exc})", fix="check the file"
        ) from None
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{p}: byte {exc.start} is not UTF-8 text", fix="give a Kineto JSON trace"
        ) from None


def read_kineto(path: str | Path, *, need_kernels: bool = True) -> KinetoTrace:
    """Read and validate one Kineto trace."""
    p = Path(path)
    text = _read(p)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{p}: not JSON at line {exc.lineno} column {exc.colno} ({exc.msg})",
            fix="give a complete Kineto trace (a cut-short file ends mid-event)",
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise DataError(
            f"{p}: no traceEvents list", fix="give a PyTorch profiler Chrome-trace JSON"
        )
    dist = doc.get("distributedInfo") or {}
    rank = dist.get("rank", -1) if isinstance(dist, dict) else -1
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < -1:
        raise DataError(
            f"{p}: distributedInfo.rank {rank!r} is not a rank number", fix="fix the record"
        )
    events: list[dict[str, Any]] = doc["traceEvents"]
    kernels = 0
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise DataError(f"{p}: traceEvents[{i}] is not an object", fix="fix the record")
        if ev.get("ph") in ("M", "i", "I", "s", "f", "t"):  # metadata, instants, flows
            continue
        name = ev.get("name", "")
        if not isinstance(name, str):
            raise DataError(f"{p}: traceEvents[{i}] name {name!r} is not text", fix="fix it")
        for key in ("ts", "dur"):
            v = ev.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise DataError(
                    f"{p}: traceEvents[{i}] ({name[:40]}) {key}={v!r} is not a finite number",
                    fix="fix or drop the event",
                )
            if key == "dur" and v < 0:
                raise DataError(
                    f"{p}: traceEvents[{i}] ({name[:40]}) dur={v!r} is negative",
                    fix="fix or drop the event",
                )
        args = ev.get("args")
        if args is not None and not isinstance(args, dict):
            raise DataError(f"{p}: traceEvents[{i}] args is not an object", fix="fix the record")
        if ev.get("cat") in GPU_CATEGORIES:
            if ev.get("ts") is None or ev.get("dur") is None:
                raise DataError(
                    f"{p}: traceEvents[{i}] ({name[:40]}) is a GPU event without ts and dur",
                    fix="fix or drop the event",
                )
            kernels += ev.get("cat") == "kernel"
    if need_kernels and kernels == 0:
        raise DataError(
            f"{p}: no GPU kernel events in {len(events):,} trace events",
            fix="profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
        )
    return KinetoTrace(str(p), events, int(rank), kernels)
