"""The immutable array Topology: nodes grouped by tier, directed links, CSR adjacency.

Node ids are contiguous per tier, in this order: GPUs (each with its NIC) [0, N), ToRs, Aggs,
Cores, then one NVSwitch node per host. Every cable or NVLink is two directed links: link
`2*i` goes up (from the lower tier: GPU→ToR, ToR→Agg, Agg→Core, GPU→NVSwitch) and `2*i + 1`
comes back down, so `e ^ 1` is always the reverse of link `e`. Arrays are read-only; a
Topology never changes after its builder returns it. `structure` carries the closed-form
wiring that routing uses instead of graph search (None for an arbitrary graph).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError

TIER_GPU, TIER_TOR, TIER_AGG, TIER_CORE, TIER_NVSWITCH = 0, 1, 2, 3, 4
TIER_NAMES = ("gpu", "tor", "agg", "core", "nvswitch")

LINK_NIC, LINK_TOR_AGG, LINK_AGG_CORE, LINK_NVLINK = 0, 1, 2, 3
LINK_KIND_NAMES = ("nic-tor", "tor-agg", "agg-core", "nvlink")

IntArray = npt.NDArray[np.int64]


def _frozen(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class Structure:
    """Closed-form wiring of the structured builders (all of them are Clos families).

    GPUs are grouped `gpus_per_host` to a host; port k of GPU g attaches to ToR `gpu_tor[g, k]`
    (a 0-based ToR index). ToRs form `groups` groups of `tors_per_group`; each ToR has
    `aggs_per_group * tor_agg_parallel` uplinks, uplink u going to Agg `u % aggs_per_group` of
    its group. With a core tier, Agg a of group g has `agg_uplinks` uplinks; uplink j reaches
    Core `domain(g) * cores_per_domain + (a // aggs_per_core) * agg_uplinks + j`, where a
    domain is `groups_per_domain` consecutive groups and each core meets `aggs_per_core` Aggs
    of every group of its domain. `nvlink_forwarding` (rail-only) sends a flow whose endpoints
    sit in different groups first over NVLink to the source host's GPU in the destination's
    group.
    """

    gpu_tor: IntArray
    gpus_per_host: int
    groups: int
    tors_per_group: int
    aggs_per_group: int
    tor_agg_parallel: int
    has_core: bool
    groups_per_domain: int
    aggs_per_core: int
    agg_uplinks: int
    cores_per_domain: int
    nvlink_forwarding: bool


@dataclass(frozen=True)
class Topology:
    """A built network: node tiers, directed links with capacity and latency, CSR adjacency."""

    name: str
    kind: str
    params: dict[str, Any]
    node_tier: npt.NDArray[np.int8]
    tier_base: IntArray
    link_src: npt.NDArray[np.int32]
    link_dst: npt.NDArray[np.int32]
    link_kind: npt.NDArray[np.int8]
    link_capacity_bps: npt.NDArray[np.float64]
    link_latency_s: npt.NDArray[np.float64]
    link_base: IntArray
    out_ptr: IntArray = field(repr=False)
    out_links: npt.NDArray[np.int32] = field(repr=False)
    structure: Structure | None = field(default=None, repr=False)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        """Number of nodes (GPUs, switches, NVSwitches)."""
        return int(self.node_tier.shape[0])

    @property
    def n_links(self) -> int:
        """Number of directed links (twice the cables and NVLinks)."""
        return int(self.link_src.shape[0])

    @property
    def n_gpus(self) -> int:
        """Number of GPUs (node ids 0..n_gpus-1)."""
        return int(self.tier_base[1] - self.tier_base[0])

    def nodes_of(self, tier: int) -> IntArray:
        """Node ids of one tier (TIER_GPU ... TIER_NVSWITCH)."""
        return np.arange(self.tier_base[tier], self.tier_base[tier + 1], dtype=np.int64)

    def count(self, tier: int) -> int:
        """How many nodes a tier holds."""
        return int(self.tier_base[tier + 1] - self.tier_base[tier])

    def out_links_of(self, node: int) -> npt.NDArray[np.int32]:
        """Directed links leaving `node`."""
        if not 0 <= node < self.n_nodes:
            raise ConfigError(f"node {node} is not in 0..{self.n_nodes - 1}", fix="check the id")
        return self.out_links[self.out_ptr[node] : self.out_ptr[node + 1]]

    def links_of_kind(self, kind: int) -> tuple[int, int]:
        """Directed link id range [lo, hi) of one link kind (links are stored by kind)."""
        return int(self.link_base[kind]), int(self.link_base[kind + 1])

    def node_label(self, node: int) -> str:
        """Human name such as 'tor17' or 'gpu3'."""
        tier = int(self.node_tier[node])
        return f"{TIER_NAMES[tier]}{node - int(self.tier_base[tier])}"


def make_topology(
    *,
    name: str,
    kind: str,
    params: dict[str, Any],
    tier_counts: tuple[int, int, int, int, int],
    sections: list[tuple[npt.NDArray[Any], npt.NDArray[Any], float, float, float]],
    structure: Structure | None,
    meta: dict[str, Any],
) -> Topology:
    """Assemble a Topology from per-kind cable sections (lower, upper, bps, up and down latency).

    Sections come in LINK_* order; each cable i of a section yields links up (lower→upper) and
    down. Link ids are therefore closed-form: base[kind] + 2*i (+1 for down).
    """
    counts = np.asarray(tier_counts, dtype=np.int64)
    tier_base = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    n_nodes = int(tier_base[-1])
    if n_nodes >= 2**31:
        raise ConfigError(f"{n_nodes} nodes exceed 2^31", fix="build a smaller cluster")
    node_tier = np.repeat(np.arange(5, dtype=np.int8), counts)
    sizes = [2 * len(sec[0]) for sec in sections]
    link_base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_links = int(link_base[-1])
    src = np.empty(n_links, dtype=np.int32)
    dst = np.empty(n_links, dtype=np.int32)
    kind_arr = np.empty(n_links, dtype=np.int8)
    cap = np.empty(n_links, dtype=np.float64)
    lat = np.empty(n_links, dtype=np.float64)
    for k, (lo, hi, bps, lat_up, lat_down) in enumerate(sections):
        b, e = int(link_base[k]), int(link_base[k + 1])
        src[b:e:2] = lo
        dst[b:e:2] = hi
        src[b + 1 : e : 2] = hi
        dst[b + 1 : e : 2] = lo
        kind_arr[b:e] = k
        cap[b:e] = bps
        lat[b:e:2] = lat_up
        lat[b + 1 : e : 2] = lat_down
    order = np.argsort(src, kind="stable").astype(np.int32)
    out_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_nodes), out=out_ptr[1:])
    return Topology(
        name=name,
        kind=kind,
        params=params,
        node_tier=_frozen(node_tier),
        tier_base=_frozen(tier_base),
        link_src=_frozen(src),
        link_dst=_frozen(dst),
        link_kind=_frozen(kind_arr),
        link_capacity_bps=_frozen(cap),
        link_latency_s=_frozen(lat),
        link_base=_frozen(link_base),
        out_ptr=_frozen(out_ptr),
        out_links=_frozen(order),
        structure=structure,
        meta=meta,
    )
