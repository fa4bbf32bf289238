"""Analytical backend: alpha-beta timing of the same flows, blind to congestion dynamics.

Each flow runs at a static rate: the smallest, over the links of its path, of the link's
capacity divided equally among the flows of the same batch that cross it (beta), after its
path latency plus any per-message overhead (alpha). Rates never change as flows finish, and
ECMP collisions only count where they split a link evenly. It is what bus-bandwidth formulas
compute, and the reference the flow-level backend is compared with: both agree wherever no
two flows share a link.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.astral.netsim import _kernels as K
from starfabric.astral.netsim.backend import CheckedFlows, FlowResults, Flows, IntArray
from starfabric.astral.netsim.flowsim import _group
from starfabric.errors import ConfigError


class Analytical:
    """The alpha-beta backend: same `submit`/`advance`/`results` as FlowSim."""

    def __init__(
        self,
        capacity_bps: npt.ArrayLike,
        latency_s: npt.ArrayLike | None = None,
        *,
        rel_tol: float = 0.0,  # the factory signature every backend takes; closed form is exact
    ) -> None:
        self.cap = np.asarray(capacity_bps, np.float64).copy()
        self.link_latency = (
            np.zeros_like(self.cap) if latency_s is None else np.asarray(latency_s, np.float64)
        )
        self._batches: list[CheckedFlows] = []
        self.t = 0.0

    def submit(self, flows: Flows) -> IntArray:
        base = sum(len(b) for b in self._batches)
        self._batches.append(flows.validated(len(self.cap)))
        return np.arange(base, base + len(flows), dtype=np.int64)

    def set_capacity(self, links: npt.ArrayLike, capacity_bps: npt.ArrayLike) -> None:
        idx = np.asarray(links, np.int64)
        self.cap[idx] = np.broadcast_to(np.asarray(capacity_bps, np.float64), idx.shape)

    def advance(self, until_s: float = float("inf")) -> float:
        res = self.results()
        self.t = res.makespan_s if until_s == float("inf") else until_s
        return self.t

    def rates_bps(self) -> npt.NDArray[np.float64]:
        """Each flow's static bottleneck rate (bit/s) while it transmits; 0 once finished."""
        rates = []
        for f in self._batches:
            n = len(f)
            owner = np.repeat(np.arange(n), np.diff(f.path_ptr))
            sharing = np.bincount(f.path_links, minlength=len(self.cap))
            r = np.full(n, np.inf)
            np.minimum.at(r, owner, self.cap[f.path_links] / np.maximum(sharing[f.path_links], 1))
            rates.append(np.where(np.isfinite(r), r, 0.0))
        if not rates:
            return np.zeros(0)
        out = np.concatenate(rates)
        if self.t > 0:
            out[self.results().finish_s <= self.t] = 0.0
        return out

    def results(self) -> FlowResults:
        sizes, starts, rates, lats, pre, wait = [], [], [], [], [], []
        link_bytes = np.zeros(len(self.cap))
        base = 0
        for f in self._batches:
            n = len(f)
            hops = np.diff(f.path_ptr)
            owner = np.repeat(np.arange(n), hops)
            sharing = np.bincount(f.path_links, minlength=len(self.cap))
            bottleneck = np.full(n, np.inf)
            np.minimum.at(bottleneck, owner, self.cap[f.path_links] / sharing[f.path_links])
            if (bottleneck <= 0).any():
                raise ConfigError(
                    "analytical: a flow crosses a failed link", fix="reroute it first"
                )
            lat = np.zeros(n)
            np.add.at(lat, owner, self.link_latency[f.path_links])
            np.add.at(link_bytes, f.path_links, f.size_bytes[owner])
            sizes.append(f.size_bytes)
            starts.append(f.start_s.copy())
            rates.append(bottleneck)
            lats.append(lat + f.extra_latency_s)
            pre.append(f.dep_ids + base)
            wait.append(np.repeat(np.arange(n, dtype=np.int64), np.diff(f.dep_ptr)) + base)
            base += n
        if base == 0:
            empty = np.zeros(0)
            return FlowResults(empty, empty, empty, link_bytes, float("nan"))
        size = np.concatenate(sizes)
        start = np.concatenate(starts)
        pre_a, wait_a = np.concatenate(pre), np.concatenate(wait)
        dep_ptr, dep_flows = _group(pre_a, wait_a, base)
        n_waiting = np.bincount(wait_a, minlength=base).astype(np.int64)
        finish = np.full(base, np.nan)
        done = K.analytical_times(
            size,
            np.concatenate(rates),
            np.concatenate(lats),
            start,
            dep_ptr,
            dep_flows,
            n_waiting,
            finish,
        )
        if done < base:
            raise ConfigError("flows: dependency cycle", fix="dependencies must form a DAG")
        return FlowResults(start, finish, size, link_bytes, float(np.nanmax(finish)))
