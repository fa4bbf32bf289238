"""Inventory of a built topology: switches, ports, links, optics and cables, bisection, ratios.

Counts come from the link arrays (not from the builder's formulas), so tests that recompute
the paper's figures check the wiring itself. Optics are chosen per link kind as the cheapest
catalogued transceiver/cable of the port speed whose reach covers the cable length, unless the
ClusterSpec names one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from starfabric.astral.hardware import OpticSpec, get_nic, get_optic, get_switch, list_optics
from starfabric.astral.topology.model import (
    LINK_AGG_CORE,
    LINK_KIND_NAMES,
    LINK_NIC,
    LINK_TOR_AGG,
    TIER_AGG,
    TIER_CORE,
    TIER_TOR,
    Topology,
)
from starfabric.astral.topology.spec import ClusterSpec
from starfabric.errors import InfeasibleError


@dataclass(frozen=True)
class Inventory:
    """What a cluster is made of, and what its network can carry."""

    name: str
    topology: str
    gpu: str
    nic: str
    switch: str
    gpus: int
    hosts: int
    gpus_per_host: int
    nics: int
    pods: int
    radix: int
    switches: dict[str, int]
    ports_used: dict[str, int]
    ports_total: int
    links: dict[str, int]
    media: dict[str, str]
    optics: dict[str, int]
    bisection_bps: float
    network_bisection_bps: float
    oversubscription: dict[str, float]
    max_gpus: int

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def choose_media(spec: ClusterSpec, kind: str, length_m: float) -> OpticSpec:
    """The optic/cable for a link kind: the spec's choice, else the cheapest that reaches."""
    name = spec.media.get(kind)  # type: ignore[call-overload]
    gbps = spec.port_speed / 1e9
    if name is not None:
        optic = get_optic(name)
        if optic.gbps != gbps or optic.reach_m < length_m:
            raise InfeasibleError(
                f"media.{kind} = {name} ({optic.gbps:g}G, {optic.reach_m:g} m) does not fit a "
                f"{gbps:g}G link of {length_m:g} m",
                fix="pick an optic of the port speed whose reach covers the cable",
            )
        return optic
    fits = [o for o in list_optics() if o.gbps == gbps and o.reach_m >= length_m]
    if not fits:
        raise InfeasibleError(
            f"no catalogued {gbps:g}G optic or cable reaches {length_m:g} m for {kind}",
            fix="add one with load_catalog or shorten the cable",
        )
    return min(fits, key=lambda o: (o.cost_usd * o.per_link, o.power_w))


def _cap(topo: Topology, kind: int, up: bool) -> float:
    lo, hi = topo.links_of_kind(kind)
    return float(topo.link_capacity_bps[lo + (0 if up else 1) : hi : 2].sum())


def _physical(topo: Topology, kind: int) -> int:
    lo, hi = topo.links_of_kind(kind)
    return (hi - lo) // 2


def max_gpus(spec: ClusterSpec) -> int:
    """Largest GPU count the spec's builder reaches with its switch, NIC and host (1:1)."""
    sw = get_switch(spec.switch)
    nic = get_nic(spec.nic)
    r = sw.radix(spec.port_speed / 1e9)
    p = nic.ports
    q = p if spec.dual_tor else 1
    rails = spec.gpus_per_host
    per_tor_set = (r // 2) * q // p
    if spec.topology in ("astral", "fat-tree"):
        # groups G must divide R: the largest is G = R (astral: pods = R / rails).
        per_group = (r // 2 // q) * per_tor_set
        if spec.topology == "astral":
            return per_group * rails * (r // rails)
        return per_group * r
    if spec.topology == "rail-only":
        return (r // q) * per_tor_set * rails
    if spec.topology == "dual-plane":
        return (r // 2) * (r // 2) * r
    return 0


def inventory(topo: Topology, spec: ClusterSpec) -> Inventory:
    """Count the parts of `topo` (built from `spec`) and compute its bisection and ratios."""
    meta = topo.meta
    radix = int(meta["radix"])
    n_sw = {"tor": topo.count(TIER_TOR), "agg": topo.count(TIER_AGG), "core": topo.count(TIER_CORE)}
    links = {LINK_KIND_NAMES[k]: _physical(topo, k) for k in range(4)}
    ports_used = {
        "tor": links["nic-tor"] + links["tor-agg"],
        "agg": links["tor-agg"] + links["agg-core"],
        "core": links["agg-core"],
    }
    lengths = {
        "nic-tor": spec.nic_cable_m,
        "tor-agg": spec.tor_agg_cable_m,
        "agg-core": spec.agg_core_cable_m,
    }
    media: dict[str, str] = {}
    optics: dict[str, int] = {}
    for kind, length in lengths.items():
        if links[kind] == 0:
            continue
        o = choose_media(spec, kind, length)
        media[kind] = o.name
        optics[o.name] = optics.get(o.name, 0) + links[kind] * o.per_link
    nic_up = _cap(topo, LINK_NIC, True)
    tor_up = _cap(topo, LINK_TOR_AGG, True)
    agg_up = _cap(topo, LINK_AGG_CORE, True)
    over: dict[str, float] = {}
    if tor_up:
        over["tor"] = nic_up / tor_up
    if agg_up:
        over["agg"] = _cap(topo, LINK_TOR_AGG, False) / agg_up
    net_bis = _network_bisection(topo, nic_up, tor_up, agg_up)
    bis = net_bis
    st = topo.structure
    if st is not None and st.nvlink_forwarding and topo.n_gpus > 0:
        # Cut between halves of the rails: NVLink of every host carries the crossing traffic.
        hosts = topo.n_gpus // st.gpus_per_host
        nv = float(meta["nvlink_bps"]) * hosts * (st.gpus_per_host // 2)
        bis = min(nic_up / 2, nv)
    return Inventory(
        name=topo.name,
        topology=topo.kind,
        gpu=spec.gpu,
        nic=spec.nic,
        switch=spec.switch,
        gpus=topo.n_gpus,
        hosts=int(meta["hosts"]),
        gpus_per_host=spec.gpus_per_host,
        nics=topo.n_gpus,
        pods=int(meta["pods"]),
        radix=radix,
        switches=n_sw,
        ports_used=ports_used,
        ports_total=sum(n_sw.values()) * radix,
        links=links,
        media=media,
        optics=optics,
        bisection_bps=bis,
        network_bisection_bps=net_bis,
        oversubscription=over,
        max_gpus=max_gpus(spec),
    )


def _network_bisection(topo: Topology, nic_up: float, tor_up: float, agg_up: float) -> float:
    """Capacity across the worst balanced cut along the hierarchy, switches only (bit/s)."""
    st = topo.structure
    if st is None:
        return 0.0
    if st.has_core:
        return min(nic_up, tor_up, agg_up) / 2
    # dual-plane: every GPU has a port in every group (plane), so each plane is cut in half.
    each_gpu_in_all_groups = len(set((st.gpu_tor[0] // st.tors_per_group).tolist())) == st.groups
    if st.groups == 1 or each_gpu_in_all_groups:
        if st.aggs_per_group == 0:
            return nic_up / 2
        return min(nic_up, tor_up) / 2
    return 0.0


def hop_histogram(path_offsets: np.ndarray) -> dict[int, int]:
    """Count of paths by number of links."""
    lens = np.diff(path_offsets)
    vals, counts = np.unique(lens, return_counts=True)
    return {int(v): int(c) for v, c in zip(vals, counts, strict=True)}
