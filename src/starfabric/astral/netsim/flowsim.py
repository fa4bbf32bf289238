"""Flow-level, max-min fair, event-driven network simulator (the congestion-aware backend).

Between packet-level simulators (ns-3: hours for 64 GPUs in SimAI) and congestion-blind
formulas: every flow gets its max-min fair share of each link of its ECMP path, rates are
recomputed at each start/finish/capacity change, and per-link bytes are accumulated.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.astral.netsim import _kernels as K
from starfabric.astral.netsim.backend import FloatArray, FlowResults, Flows, IntArray
from starfabric.errors import ConfigError

_PENDING, _TX, _DRAIN, _DONE = 0, 1, 2, 3


def _group(keys: IntArray, values: IntArray, n_keys: int) -> tuple[IntArray, IntArray]:
    """CSR of `values` grouped by `keys` in 0..n_keys-1 (stable within a key)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n_keys + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=ptr[1:])
    return ptr, values[order].astype(np.int64)


def _transpose(ptr: IntArray, idx: IntArray, n_cols: int) -> tuple[IntArray, IntArray]:
    """CSR rows→cols into cols→rows (link → flows crossing it)."""
    rows = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    return _group(idx, rows, n_cols)


class FlowSim:
    """The flow-level backend: `submit` flows, `advance` time, read `results()`."""

    def __init__(
        self,
        capacity_bps: npt.ArrayLike,
        latency_s: npt.ArrayLike | None = None,
        *,
        rel_tol: float = 0.0,
    ) -> None:
        if not 0.0 <= rel_tol < 1.0:
            raise ConfigError(f"netsim.rel_tol = {rel_tol}", fix="use 0 (exact) up to e.g. 0.02")
        self.rel_tol = rel_tol
        cap = np.asarray(capacity_bps, dtype=np.float64).copy()
        if cap.ndim != 1 or (cap < 0).any():
            raise ConfigError(
                "links.capacity_bps: need one capacity >= 0 per link", fix="check links"
            )
        self.cap = cap
        self.link_latency = (
            np.zeros_like(cap) if latency_s is None else np.asarray(latency_s, np.float64).copy()
        )
        self.t = 0.0
        self.events = 0
        n = 0
        self._ptr = np.zeros(1, np.int64)
        self._links = np.zeros(0, np.int64)
        self._size = np.zeros(n)
        self._remaining = np.zeros(n)
        self._start = np.zeros(n)
        self._tx_start = np.full(n, np.nan)
        self._latency = np.zeros(n)
        self._state = np.zeros(n, np.int8)
        self._waiting = np.zeros(n, np.int64)
        self._dependents: list[tuple[IntArray, IntArray]] = []
        self._finish = np.full(n, np.nan)
        self._tx_done = np.full(n, np.nan)
        self._rate = np.zeros(n)
        self.link_bytes = np.zeros(len(cap))
        self._pre = np.zeros(0, np.int64)
        self._wait = np.zeros(0, np.int64)
        self._dep_ptr = np.zeros(1, np.int64)
        self._dep_flows = np.zeros(0, np.int64)

    @property
    def n_flows(self) -> int:
        return int(self._size.shape[0])

    def submit(self, flows: Flows) -> IntArray:
        """Add a batch of flows; their dependency ids are local to the batch."""
        f = flows.validated(len(self.cap))
        base = self.n_flows
        n = len(f)
        self._ptr = np.concatenate([self._ptr[:-1], f.path_ptr + len(self._links)])
        self._links = np.concatenate([self._links, f.path_links])
        hops = np.diff(f.path_ptr)
        path_latency = np.zeros(n)
        if len(f.path_links):
            sums = np.add.reduceat(
                self.link_latency[f.path_links], np.minimum(f.path_ptr[:-1], len(f.path_links) - 1)
            )
            path_latency = np.where(hops > 0, sums, 0.0)
        self._size = np.concatenate([self._size, f.size_bytes])
        self._remaining = np.concatenate([self._remaining, f.size_bytes])
        self._start = np.concatenate([self._start, np.maximum(f.start_s, self.t)])
        self._tx_start = np.concatenate([self._tx_start, np.full(n, np.nan)])
        self._latency = np.concatenate([self._latency, path_latency + f.extra_latency_s])
        self._state = np.concatenate([self._state, np.zeros(n, np.int8)])
        self._waiting = np.concatenate([self._waiting, np.diff(f.dep_ptr)])
        self._finish = np.concatenate([self._finish, np.full(n, np.nan)])
        self._tx_done = np.concatenate([self._tx_done, np.full(n, np.nan)])
        self._rate = np.concatenate([self._rate, np.zeros(n)])
        # dependencies as prerequisite → waiting flow, in global ids, grouped by prerequisite
        self._pre = np.concatenate([self._pre, f.dep_ids + base])
        self._wait = np.concatenate(
            [self._wait, np.repeat(np.arange(n, dtype=np.int64), np.diff(f.dep_ptr)) + base]
        )
        self._dep_ptr, self._dep_flows = _group(self._pre, self._wait, self.n_flows)
        return np.arange(base, base + n, dtype=np.int64)

    def set_capacity(self, links: npt.ArrayLike, capacity_bps: npt.ArrayLike) -> None:
        """Change capacities now (degradation; 0 = failed link, which strands its flows)."""
        idx = np.asarray(links, np.int64)
        self.cap[idx] = np.broadcast_to(np.asarray(capacity_bps, np.float64), idx.shape)

    def stranded(self) -> IntArray:
        """Unfinished flows whose path crosses a link of capacity 0."""
        dead = self.cap[self._links] <= 0.0
        per_flow = np.add.reduceat(np.concatenate([dead, [False]]).astype(np.int64), self._ptr[:-1])
        per_flow = np.where(np.diff(self._ptr) > 0, per_flow, 0)
        return np.flatnonzero((per_flow > 0) & (self._state < _DRAIN)).astype(np.int64)

    def reroute(self, flow_ids: npt.ArrayLike, path_ptr: IntArray, path_links: IntArray) -> None:
        """Give unfinished flows new paths (their remaining bytes continue on the new path)."""
        ids = np.asarray(flow_ids, np.int64)
        if len(np.unique(ids)) != len(ids) or np.diff(path_ptr).shape != ids.shape:
            raise ConfigError("reroute: need one new path per distinct flow id", fix="dedupe ids")
        n = self.n_flows
        lengths = np.diff(self._ptr)
        keep = np.ones(n, np.bool_)
        keep[ids] = False
        new_lengths = lengths.copy()
        new_lengths[ids] = np.diff(path_ptr)
        new_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(new_lengths, out=new_ptr[1:])
        new_links = np.empty(int(new_ptr[-1]), np.int64)
        owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
        offset = np.arange(len(self._links), dtype=np.int64) - self._ptr[owner]
        kept = keep[owner]
        new_links[new_ptr[owner[kept]] + offset[kept]] = self._links[kept]
        owner_new = np.repeat(ids, np.diff(path_ptr))
        offset_new = np.arange(len(path_links), dtype=np.int64) - np.repeat(
            path_ptr[:-1], np.diff(path_ptr)
        )
        new_links[new_ptr[owner_new] + offset_new] = path_links
        self._ptr, self._links = new_ptr, new_links

    def advance(self, until_s: float = float("inf"), max_events: int = 10_000_000) -> float:
        """Run events up to `until_s` (or to completion); return the new time."""
        before = self._state.copy()
        self.t, ev = K.run_until(
            self.t,
            until_s,
            self._ptr,
            self._links,
            self.cap,
            self._latency,
            self._start,
            self._remaining,
            self._state,
            self._waiting,
            self._dep_ptr,
            self._dep_flows,
            self._finish,
            self._tx_done,
            self.link_bytes,
            self._rate,
            max_events,
            self.rel_tol,
        )
        self.events += int(ev)
        started = (before == _PENDING) & (self._state != _PENDING)
        self._tx_start[started] = self._start[started]
        return float(self.t)

    def rates_bps(self) -> FloatArray:
        """Current max-min rates of the flows (bit/s), 0 for flows not transmitting."""
        return np.where(self._state == _TX, self._rate, 0.0)

    def results(self) -> FlowResults:
        fin = self._finish.copy()
        done = ~np.isnan(fin)
        return FlowResults(
            start_s=self._tx_start.copy(),
            finish_s=fin,
            size_bytes=self._size.copy(),
            link_bytes=self.link_bytes.copy(),
            makespan_s=float(fin[done].max()) if done.any() else float("nan"),
        )


def maxmin(
    path_ptr: IntArray,
    path_links: IntArray,
    capacity_bps: npt.ArrayLike,
    active: npt.ArrayLike | None = None,
) -> FloatArray:
    """Max-min fair rates (bit/s) of flows on fixed paths: one solve, no time."""
    cap = np.asarray(capacity_bps, np.float64)
    ptr = np.asarray(path_ptr, np.int64)
    links = np.asarray(path_links, np.int64)
    n = len(ptr) - 1
    act = np.ones(n, np.bool_) if active is None else np.asarray(active, np.bool_)
    lp, lf = _transpose(ptr, links, len(cap))
    rate = np.zeros(n)
    K.maxmin_rates(ptr, links, lp, lf, cap, act, rate)
    return rate
