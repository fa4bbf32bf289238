"""Flows on a topology with links failing or degrading mid-run, rerouted by ECMP routing.

At each failure time the simulator stops, the failed links' capacity drops to 0 (or to the
degraded rate), and every unfinished flow whose path crosses a dead link gets a new path from
`route_flows` over what is left; its remaining bytes continue there. Bytes already sent stay
counted on the old links, so per-link totals show where traffic went before and after.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from starfabric.astral.netsim.backend import FlowResults, Flows
from starfabric.astral.netsim.flowsim import FlowSim
from starfabric.astral.routing import failed_link_mask, route_flows
from starfabric.astral.topology import Topology
from starfabric.errors import ConfigError, InfeasibleError


@dataclass(frozen=True)
class LinkEvent:
    """At `time_s`, directed links `links` (both directions fail) drop to `capacity_bps`."""

    time_s: float
    links: tuple[int, ...]
    capacity_bps: float = 0.0


def run_with_failures(
    topo: Topology,
    src: npt.ArrayLike,
    dst: npt.ArrayLike,
    size_bytes: npt.ArrayLike,
    flow_hash: npt.ArrayLike,
    events: list[LinkEvent],
    *,
    seed: int = 0,
) -> tuple[FlowResults, int]:
    """Simulate GPU-to-GPU flows with link events; returns results and flows rerouted."""
    s = np.asarray(src, np.int64)
    d = np.asarray(dst, np.int64)
    h = np.asarray(flow_hash).astype(np.uint64)
    r = route_flows(topo, s, d, h, seed=seed)
    sim = FlowSim(topo.link_capacity_bps, topo.link_latency_s)
    sim.submit(Flows(np.asarray(size_bytes, np.float64), r.offsets, r.links))
    dead = np.zeros(topo.n_links, np.bool_)
    rerouted = 0
    for ev in sorted(events, key=lambda e: e.time_s):
        if ev.time_s < sim.t:
            raise ConfigError(
                f"link event at {ev.time_s} s is in the past", fix="sort events by time"
            )
        sim.advance(ev.time_s)
        both = np.unique(
            np.concatenate([np.asarray(ev.links, np.int64), np.asarray(ev.links, np.int64) ^ 1])
        )
        sim.set_capacity(both, ev.capacity_bps)
        if ev.capacity_bps > 0:
            continue
        dead |= failed_link_mask(topo, links=both)
        stranded = sim.stranded()
        if len(stranded) == 0:
            continue
        nr = route_flows(topo, s[stranded], d[stranded], h[stranded], seed=seed, failed=dead)
        if not nr.reachable.all():
            i = int(stranded[np.flatnonzero(~nr.reachable)[0]])
            raise InfeasibleError(
                f"flow {i} (GPU {s[i]} → {d[i]}) has no path left", fix="fail fewer links"
            )
        sim.reroute(stranded, nr.offsets, nr.links)
        rerouted += len(stranded)
    sim.advance()
    return sim.results(), rerouted
