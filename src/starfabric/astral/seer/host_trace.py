"""Host seconds per launched GPU kernel, measured from a PyTorch profiler (Kineto) trace.

Where the GPU waits for the host, the time between two consecutive kernel launches of one CPU
thread is what that thread spent on the second kernel: Python, the PyTorch dispatcher, autograd
bookkeeping, allocator calls and `cudaLaunchKernel` itself. A kernel that starts within
`STARVED_QUEUE_S` of the end of its launch call found the GPU idle (nothing queued ahead of it),
so the interval that ends at its launch was host-bound; intervals longer than `IDLE_GAP_S` are
the thread doing something else (data loading, waiting) and are left out.

Launches inside an `autograd::engine::evaluate_function` op are backward launches (the autograd
engine's C++ thread); the rest are forward (the Python thread). The median of each is the host
time per launch of eager PyTorch on that host (`host_ops.HOST_S_PER_LAUNCH_FWD` / `_BWD`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.astral.kineto import read_kineto

STARVED_QUEUE_S = 20e-6
"""A kernel that starts this soon after its launch call returns had nothing queued ahead of it
(the GPU was idle, waiting for the host) — assumption: a few times the ~5 us launch latency."""
IDLE_GAP_S = 200e-6
"""Launch intervals longer than this are the host doing other work, not issuing the next op
(assumption: the slowest single eager op of the traces is below it)."""
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel")
"""CUDA runtime/driver calls that enqueue a kernel."""
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
"""Kineto's name prefix of the autograd engine's per-node ops."""


@dataclass(frozen=True)
class LaunchIntervals:
    """Host-bound launch intervals (seconds) of one trace, split by pass."""

    forward: np.ndarray[Any, np.dtype[np.float64]]
    backward: np.ndarray[Any, np.dtype[np.float64]]

    def median(self, which: str) -> float:
        """Median host seconds per launch of `which` ("forward" or "backward")."""
        arr = self.forward if which == "forward" else self.backward
        return float(np.median(arr)) if arr.size else float("nan")


def load_events(path: Path) -> list[dict[str, Any]]:
    """`traceEvents` of a Kineto Chrome-trace JSON file (gzip or plain), read and checked by
    the project's Kineto reader (size guards, finite times: `astral.kineto.read_kineto`)."""
    return read_kineto(path, need_kernels=False).events


def launch_intervals(events: list[dict[str, Any]]) -> LaunchIntervals:
    """Host-bound launch-to-launch intervals per thread, forward and backward apart."""
    kernel_start = {
        e["args"]["correlation"]: float(e["ts"])
        for e in events
        if e.get("cat") == "kernel" and "correlation" in e.get("args", {})
    }
    bwd_spans: dict[tuple[Any, Any], list[tuple[float, float]]] = {}
    launches: dict[tuple[Any, Any], list[tuple[float, float, int]]] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        key = (e.get("pid"), e.get("tid"))
        if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith(BACKWARD_PREFIX):
            bwd_spans.setdefault(key, []).append((float(e["ts"]), float(e["ts"] + e["dur"])))
        elif e.get("name") in LAUNCH_CALLS:
            corr = e.get("args", {}).get("correlation")
            if corr in kernel_start:
                wait = kernel_start[corr] - float(e["ts"] + e["dur"])
                launches.setdefault(key, []).append((float(e["ts"]), wait, 1))
    fwd: list[float] = []
    bwd: list[float] = []
    for key, rows in launches.items():
        arr = np.array(sorted(rows))
        ts, queue = arr[:, 0], arr[:, 1]
        spans = np.array(sorted(bwd_spans.get(key, [])) or np.zeros((0, 2)))
        in_bwd = np.zeros(len(ts), dtype=bool)
        if len(spans):
            i = np.searchsorted(spans[:, 0], ts, side="right") - 1
            ok = i >= 0
            in_bwd[ok] = ts[ok] < spans[i[ok], 1]
        gap = np.diff(ts) * 1e-6
        sel = (queue[1:] * 1e-6 < STARVED_QUEUE_S) & (gap < IDLE_GAP_S)
        fwd.extend(gap[sel & ~in_bwd[1:]])
        bwd.extend(gap[sel & in_bwd[1:]])
    return LaunchIntervals(np.asarray(fwd, dtype=float), np.asarray(bwd, dtype=float))


def host_per_launch(path: Path) -> tuple[float, float]:
    """(forward, backward) median host seconds per launched kernel of one trace file."""
    li = launch_intervals(load_events(path))
    return li.median("forward"), li.median("backward")


__all__ = [
    "BACKWARD_PREFIX",
    "IDLE_GAP_S",
    "LAUNCH_CALLS",
    "STARVED_QUEUE_S",
    "LaunchIntervals",
    "host_per_launch",
    "launch_intervals",
    "load_events",
]
