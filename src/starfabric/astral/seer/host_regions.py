"""Host seconds per launched kernel over a pass, from the annotated regions of a Kineto trace.

The host time of a pass is the sum of the intervals between its launches: the wall time the
CPU spends in the pass, minus the calls in which it waits for the GPU, divided by the kernels
it launched there — a launch-weighted mean. `host_trace.host_per_launch` takes instead the
median of the intervals that ended with an idle GPU (a "starved" kernel) and were shorter than
`host_trace.IDLE_GAP_S`; that sample leaves out the longer Python stretches between launches
(module boundaries, hooks, autograd bookkeeping), which every pass pays, and finds almost
nothing in a trace whose GPU is kept busy by overlap (13 intervals in DeepSeek's DualPipe
trace below). Here a region is a `user_annotation` span (`record_function`) of the trace; its
launches are those issued, on any thread, while it is open (the autograd engine's thread
launches a backward region's kernels).

Measured (`region_per_launch`; the traces' own region names):

| trace | host | forward | backward |
|---|---|---|---|
| HolisticTraceAnalysis `tests/data/trace_diff/control/control.json.gz` (`## forward ##`, `## backward ##`, 6 steps) | Meta A100 node | 47.5 us (2,532 launches) | 37.2 us (5,562) |
| deepseek-ai/profile-data `train.json` @ its first commit (DeepSeek-V3 MoE layers, EP64, DualPipe; `attn(F)`, `mlp(F)`, `combine(F)` / `attn(B)`, `mlp(B)`, `mlp(W)`, `attn(W)`, `combine(B)`, `dispatch(B)`) | DeepSeek H800 node | 47.0 us (347) | 43.4 us (604) |

The two hosts (2022 A100, 2025 H800; both under the profiler) agree within 0-17%, so no
per-host-generation scaling is taken from them; `host_ops.HOST_S_PER_LAUNCH_*` are the A100
trace's (bundled, recomputed in `tests/astral/seer/test_host_regions.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from starfabric.astral.seer.host_trace import LAUNCH_CALLS

BLOCKING_CALLS = (
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaDeviceSynchronize",
    "cudaMemcpy",
)
"""CUDA runtime calls in which the host waits for the GPU; their time is not host work."""
REGION_CAT = "user_annotation"
"""Kineto category of `torch.profiler.record_function` spans."""


def region_per_launch(events: list[dict[str, Any]], names: Iterable[str]) -> tuple[float, int]:
    """(host seconds per launch, launches) over every annotated region named in `names`:
    sum(region wall time - blocking calls in it) / launches issued in it (any thread)."""
    wanted = set(names)
    regions = np.array(
        [
            (float(e["ts"]), float(e["ts"] + e["dur"]))
            for e in events
            if e.get("cat") == REGION_CAT and e.get("ph") == "X" and e.get("name") in wanted
        ]
    ).reshape(-1, 2)
    if not len(regions):
        return float("nan"), 0
    calls = [e for e in events if e.get("ph") == "X" and e.get("name") in LAUNCH_CALLS]
    waits = [e for e in events if e.get("ph") == "X" and e.get("name") in BLOCKING_CALLS]
    lts = np.sort(np.array([float(e["ts"]) for e in calls]))
    wts = np.array([float(e["ts"]) for e in waits])
    wdur = np.array([float(e["dur"]) for e in waits])
    n = int(sum(np.searchsorted(lts, b) - np.searchsorted(lts, a) for a, b in regions))
    busy = float((regions[:, 1] - regions[:, 0]).sum())
    for a, b in regions:
        busy -= float(wdur[(wts >= a) & (wts < b)].sum())
    return (busy * 1e-6 / n if n else float("nan")), n


__all__ = ["BLOCKING_CALLS", "REGION_CAT", "region_per_launch"]
