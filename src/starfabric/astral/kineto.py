"""Input layer for Kineto (PyTorch profiler) Chrome-trace files, plain or gzip: read, then
validate every event the consumers use (Seer's GEMM calibration, the monitor's ingest).

A truncated gzip, JSON that is not a trace, an event with a non-finite or negative time, a
duration or a span of timestamps beyond the physical bound (a year, astral/bounds.py), or a
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

import numpy as np

from starfabric.astral.bounds import MAX_DURATION_S, duration
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


def _finite(v: float) -> bool:
    """A finite number (an integer too large for a float is not: JSON allows 400 digits)."""
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _check_span(p: Path, events: list[dict[str, Any]], stamps: list[tuple[int, float]]) -> None:
    """No timestamp more than MAX_DURATION_S from the trace's median one: a profiler run spans
    seconds, so one that far off is a corrupt cell (the farthest is named)."""
    if not stamps:
        return
    ts = np.fromiter((t for _, t in stamps), np.float64, len(stamps))
    off = np.abs(ts - np.median(ts))
    k = int(np.argmax(off))
    if off[k] > MAX_DURATION_S * 1e6:
        i = stamps[k][0]
        name = str(events[i].get("name", ""))[:40]
        raise DataError(
            f"{p}: traceEvents[{i}] ({name}) ts={ts[k]:g} us is {off[k] / 1e6:.3g} s from the "
            f"trace's median timestamp, above {MAX_DURATION_S:.4g} s (a year, "
            "bounds.MAX_DURATION_S)",
            fix="fix or drop the event: a corrupt time",
        )


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
    dur_bound = duration("us", 1e6)  # Kineto times are microseconds
    stamps: list[tuple[int, float]] = []
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
            if isinstance(v, bool) or not isinstance(v, int | float) or not _finite(v):
                raise DataError(
                    f"{p}: traceEvents[{i}] ({name[:40]}) {key}={v!r} is not a finite number",
                    fix="fix or drop the event",
                )
            if key == "dur" and v < 0:
                raise DataError(
                    f"{p}: traceEvents[{i}] ({name[:40]}) dur={v!r} is negative",
                    fix="fix or drop the event",
                )
            if key == "dur":
                dur_bound.check(float(v), f"{p}: traceEvents[{i}] ({name[:40]})", "dur",
                                "fix or drop the event: a corrupt time")  # fmt: skip
            else:
                stamps.append((i, float(v)))
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
    _check_span(p, events, stamps)
    if need_kernels and kernels == 0:
        raise DataError(
            f"{p}: no GPU kernel events in {len(events):,} trace events",
            fix="profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
        )
    return KinetoTrace(str(p), events, int(rank), kernels)
