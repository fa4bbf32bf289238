"""The network-simulation contract: what every backend (flow-level, analytical) offers.

Terms
- A *link* is one direction of a cable or NVLink: capacity in bit/s and a propagation +
  switching latency in seconds. Links are numbered 0..L-1 by the topology that owns them.
- A *flow* moves `size_bytes` from a source to a destination along a fixed path (a list of link
  ids chosen by routing: ECMP hash of its 5-tuple/QP). It may not start before `start_s`, nor
  before every flow it depends on has completed (dependencies make collectives' steps).
- A flow *completes* when its last byte has crossed its path: transmission end + path latency.

Guarantees (flow-level backend)
- Rates are max-min fair over the links (TCP/RDMA congestion control at steady state), and are
  recomputed at every event (a flow starts or ends, a capacity changes).
- Bytes are conserved: each link carries exactly the bytes of the flows that crossed it.
- Time only moves forward; `advance(t)` never passes an event of a later `set_capacity(t', …)`
  because the caller calls `advance(t')` first.
- A link set to capacity 0 (failed) strands the flows that cross it: they are reported by
  `stranded()` and keep their remaining bytes until `reroute` gives them a new path.

Batching: `submit` takes arrays of flows at once (no Python object per flow); ids are dense
integers in submission order. Ownership: the backend owns flow state; callers read it through
`results()` (copies).

Backends are built by name in registry.py (`make_backend`), which imports them; they import
only this module, so the contract and the backends form no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Flows:
    """A batch of flows to submit: sizes, earliest starts, paths (CSR) and dependencies (CSR).

    `path_ptr[i]:path_ptr[i+1]` indexes `path_links` for flow i; `dep_ptr`/`dep_ids` list, for
    flow i, ids of flows (within this batch, 0-based) that must complete before it starts.
    `src`/`dst` are endpoint labels (GPU ids) kept for reporting.
    """

    size_bytes: FloatArray
    path_ptr: IntArray
    path_links: IntArray
    start_s: FloatArray | None = None
    dep_ptr: IntArray | None = None
    dep_ids: IntArray | None = None
    src: IntArray | None = None
    dst: IntArray | None = None
    extra_latency_s: FloatArray | None = None

    def __len__(self) -> int:
        return int(self.size_bytes.shape[0])

    def validated(self, n_links: int) -> CheckedFlows:
        """Check shapes and ranges once, at the boundary; return arrays in canonical dtypes."""
        n = len(self)
        size = np.asarray(self.size_bytes, dtype=np.float64)
        ptr = np.asarray(self.path_ptr, dtype=np.int64)
        links = np.asarray(self.path_links, dtype=np.int64)
        if size.ndim != 1 or (size < 0).any() or not np.isfinite(size).all():
            raise ConfigError("flows.size_bytes: need finite sizes >= 0", fix="check flow sizes")
        if (
            ptr.shape != (n + 1,)
            or ptr[0] != 0
            or (np.diff(ptr) < 0).any()
            or ptr[-1] != len(links)
        ):
            raise ConfigError(
                "flows.path_ptr: not a CSR offset array for the flows",
                fix="give n+1 non-decreasing offsets starting at 0 and ending at len(path_links)",
            )
        if len(links) and (links.min() < 0 or links.max() >= n_links):
            raise ConfigError(
                f"flows.path_links: link id outside 0..{n_links - 1}", fix="route on this topology"
            )
        start = np.zeros(n) if self.start_s is None else np.asarray(self.start_s, np.float64)
        if start.shape != (n,) or (start < 0).any():
            raise ConfigError(
                "flows.start_s: need one start time >= 0 per flow", fix="check starts"
            )
        if self.dep_ptr is None:
            dptr, dids = np.zeros(n + 1, np.int64), np.zeros(0, np.int64)
        else:
            dptr = np.asarray(self.dep_ptr, np.int64)
            dids = np.asarray(self.dep_ids, np.int64)
            if (
                dptr.shape != (n + 1,)
                or dptr[-1] != len(dids)
                or (len(dids) and (dids.min() < 0 or dids.max() >= n))
            ):
                raise ConfigError(
                    "flows.dep_ptr/dep_ids: not a CSR of flow ids", fix="check dependencies"
                )
        extra = (
            np.zeros(n)
            if self.extra_latency_s is None
            else np.asarray(self.extra_latency_s, np.float64)
        )
        return CheckedFlows(size, ptr, links, start, dptr, dids, extra)


@dataclass(frozen=True)
class CheckedFlows:
    """`Flows` after validation: every array present, in canonical dtypes."""

    size_bytes: FloatArray
    path_ptr: IntArray
    path_links: IntArray
    start_s: FloatArray
    dep_ptr: IntArray
    dep_ids: IntArray
    extra_latency_s: FloatArray

    def __len__(self) -> int:
        return int(self.size_bytes.shape[0])


@dataclass(frozen=True)
class FlowResults:
    """Per-flow outcome and per-link totals after a run."""

    start_s: FloatArray  # when transmission began
    finish_s: FloatArray  # completion (last byte delivered); nan if not completed
    size_bytes: FloatArray
    link_bytes: FloatArray  # bytes carried per link
    makespan_s: float  # last completion time

    @property
    def completed(self) -> npt.NDArray[np.bool_]:
        return ~np.isnan(self.finish_s)

    def fct_s(self) -> FloatArray:
        """Flow completion times (finish − start)."""
        return self.finish_s - self.start_s


class NetworkBackend(Protocol):
    """What Astral's collectives and Seer call: submit flows, advance time, read completions."""

    def submit(self, flows: Flows) -> IntArray: ...

    def set_capacity(self, links: npt.ArrayLike, capacity_bps: npt.ArrayLike) -> None: ...

    def advance(self, until_s: float = float("inf")) -> float: ...

    def results(self) -> FlowResults: ...

    def rates_bps(self) -> FloatArray:
        """Rate (bit/s) each submitted flow transmits at now; 0 for flows not transmitting."""
        ...


def steady_rates(
    backend: NetworkBackend, path_ptr: npt.ArrayLike, path_links: npt.ArrayLike
) -> FloatArray:
    """Rates (bit/s) of long-lived flows on fixed paths, all started at once, on `backend`.

    Submits one batch of unbounded-size flows, lets time start them, and reads their rates:
    the max-min fair share on the flow backend, the equal-share bottleneck on the analytical one.
    """
    ptr = np.asarray(path_ptr, np.int64)
    n = ptr.shape[0] - 1
    ids = backend.submit(Flows(np.full(n, 1e30), ptr, np.asarray(path_links, np.int64)))
    backend.advance(0.0)
    return np.asarray(backend.rates_bps(), np.float64)[ids]
