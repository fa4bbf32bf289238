"""Topology builders (a registry): astral, fat-tree, rail-only, dual-plane — all Clos families.

Notation: R = switch radix at the port speed (51.2T → 256 x 200G), p = NIC ports per GPU,
q = ToRs a GPU's ports spread over (q = p with dual-ToR, else 1), rails = GPUs per host.

astral — same-rail 3-tier (Astral SIGCOMM'25, section 3). A *group* is one rail of one pod.
  * ToR: R/2 ports down, R/2 up (1:1). A group has T = R/2 ToRs, in sets of q; the q ToRs of
    a set serve the same R/2·q/p hosts, port k of each host's NIC going to ToR k of the set,
    so a NIC's two ports land on two different ToRs (dual-ToR).
  * Agg: R/2 down, R/2 up; a group has A = R/2 Aggs; ToR uplink u goes to Agg u of its own
    group, so every ToR meets every Agg of its rail exactly once and an Agg only ever sees
    ToRs of one rail (same-rail aggregation at tier 2). Hosts per pod = T·R/(2p) (8,192 at
    R = 256, p = 2), GPUs per pod = rails·R²/(4p) = R² for 8 rails and 2 ports: 65,536 at 256,
    16,384 at 128 (25.6T).
  * Core: G = pods·rails groups; each Core has R ports down and meets m = R/G Aggs of every
    group. Aggs a of all groups with a // m = P form core plane P (A/m planes); Agg uplink j
    goes to Core j of its plane (R/2 Cores per plane). Cores = G·R/4 = 4,096 for 8 pods at
    R = 256, and every tier is 1:1. Feasible iff G divides R and m divides R/2.
fat-tree — the same 3-tier Clos but not rail-optimized: a group (pod) holds R²/(4p) GPUs taken
  host by host (layout "host") or rail by rail (layout "rail", each ToR one rail); same Core
  wiring with G = gpus / (R²/(4p)) groups; no Core when G = 1.
rail-only — Wang et al.: one Clos per rail and no spine. A rail of H hosts fits one switch set
  when H·p/q <= R, else a 2-tier Clos of ToRs (R/2 down) and A Aggs (A the smallest divisor
  of R/2 with A >= T/2, L = R/(2A) parallel links per ToR-Agg pair). Cross-rail traffic goes
  over NVLink to the source host's GPU on the destination's rail first.
dual-plane — HPN-like: NIC port k is plane k; each plane a rail-optimized network of its own.
  One pod: T = R ToRs per plane (R/rails per rail), R/2 Aggs with all R ports down, so 2 tiers
  and R²/2 GPUs. More pods: T = R/2, Aggs half up, a Core tier per plane (domain).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from starfabric.astral.hardware import get_gpu, get_nic, get_switch
from starfabric.astral.topology.model import Structure, Topology, make_topology
from starfabric.astral.topology.spec import LIGHT_S_PER_M, ClusterSpec
from starfabric.errors import ConfigError, InfeasibleError

MAX_GPUS = 1 << 24
"""Refuse clusters above 16M GPUs: arrays would not fit a workstation's memory."""


@dataclass(frozen=True)
class _Parts:
    radix: int
    ports: int
    q: int
    rails: int
    port_bps: float
    nvlink_bps: float
    switch_latency_s: float
    nic_bps: float


@dataclass(frozen=True)
class _Plan:
    n_gpus: int
    gpu_tor: np.ndarray
    groups: int
    tors_per_group: int
    aggs_per_group: int
    parallel: int
    has_core: bool
    groups_per_domain: int
    aggs_per_core: int
    agg_uplinks: int
    forwarding: bool
    pods: int
    meta: dict[str, Any]


def _nearest(valid: list[int], want: int) -> str:
    if not valid:
        return "none"
    below = [v for v in valid if v <= want]
    above = [v for v in valid if v >= want]
    picks = sorted({*(below[-1:]), *(above[:1])})
    return " or ".join(f"{v:,}" for v in picks)


def _parts(spec: ClusterSpec) -> _Parts:
    sw = get_switch(spec.switch)
    nic = get_nic(spec.nic)
    gpu = get_gpu(spec.gpu)
    gbps = spec.port_speed / 1e9
    radix = sw.radix(gbps)
    if nic.port_gbps != gbps:
        raise InfeasibleError(
            f"nic {nic.name} has {nic.port_gbps:g}G ports but port_speed is {gbps:g}G",
            fix=f"set port_speed: {nic.port_gbps:g}G or pick a {gbps:g}G NIC",
        )
    if radix % 2:
        raise InfeasibleError(f"switch radix {radix} is odd", fix="use an even port split")
    q = nic.ports if spec.dual_tor else 1
    if (radix // 2) % q:
        raise InfeasibleError(
            f"dual_tor with {nic.ports} ports needs R/2 = {radix // 2} divisible by {q}",
            fix="set dual_tor: false or pick another NIC",
        )
    return _Parts(
        radix=radix,
        ports=nic.ports,
        q=q,
        rails=spec.gpus_per_host,
        port_bps=spec.port_speed,
        nvlink_bps=gpu.nvlink_gbps * 8e9,
        switch_latency_s=sw.latency_ns * 1e-9,
        nic_bps=spec.nic_rate if spec.nic_rate is not None else spec.port_speed,
    )


def _core_ok(radix: int, groups: int) -> bool:
    return groups <= radix and radix % groups == 0 and (radix // 2) % (radix // groups) == 0


def _slots_per_set(pt: _Parts, down: int) -> int:
    if (down * pt.q) % pt.ports:
        raise InfeasibleError(
            f"{down} ToR down ports cannot split evenly over {pt.ports} NIC ports",
            fix="pick a NIC whose port count divides the ToR down ports",
        )
    return down * pt.q // pt.ports


def _tor_of(
    pt: _Parts, group: np.ndarray, slot: np.ndarray, tors_per_group: int, sset: int
) -> np.ndarray:
    """ToR index of every (GPU, port): set = slot // sset, ToR = set*q + port % q in its group."""
    sets = slot // sset
    k = np.arange(pt.ports, dtype=np.int64)
    base = group * tors_per_group + sets * pt.q
    return base[:, None] + (k % pt.q)[None, :]


def _pods_from(
    spec: ClusterSpec, per_pod: int, what: str, valid_pods: list[int] | None = None
) -> int:
    pods = spec.pods
    if spec.gpus is not None:
        if spec.gpus % per_pod or (valid_pods and spec.gpus // per_pod not in valid_pods):
            lo = max(spec.gpus // per_pod, 1)
            ok = [x * per_pod for x in (valid_pods or [lo, lo + 1])]
            raise InfeasibleError(
                f"gpus = {spec.gpus:,} is not a valid number of {what} pods of {per_pod:,}",
                fix=f"use gpus: {_nearest(ok, spec.gpus)}",
            )
        if pods is not None and pods * per_pod != spec.gpus:
            raise InfeasibleError(
                f"pods = {pods} gives {pods * per_pod:,} GPUs but gpus = {spec.gpus:,}",
                fix=f"drop one of them or set gpus: {pods * per_pod:,}",
            )
        pods = spec.gpus // per_pod
    return pods if pods is not None else 1


def _astral(spec: ClusterSpec, pt: _Parts) -> _Plan:
    r = pt.radix
    tors = r // 2
    if tors % pt.q:
        raise InfeasibleError(f"R/2 = {tors} ToRs cannot form sets of {pt.q}", fix="dual_tor")
    sset = _slots_per_set(pt, r // 2)
    hosts = (tors // pt.q) * sset
    per_pod = hosts * pt.rails
    valid = [x for x in range(1, r + 1) if _core_ok(r, x * pt.rails)]
    pods = _pods_from(spec, per_pod, "astral", valid)
    if not _core_ok(r, pods * pt.rails):
        raise InfeasibleError(
            f"astral: pods = {pods} with {pt.rails} rails gives {pods * pt.rails} groups; the "
            f"Core (R = {r}) is 1:1 only when pods*rails divides R and R/(pods*rails) "
            "divides R/2",
            fix=f"use pods: {_nearest(valid, pods)}",
        )
    n = pods * per_pod
    g = np.arange(n, dtype=np.int64)
    host, rail = g // pt.rails, g % pt.rails
    pod, h = host // hosts, host % hosts
    group = pod * pt.rails + rail
    gpu_tor = _tor_of(pt, group, h, tors, sset)
    return _Plan(
        n_gpus=n,
        gpu_tor=gpu_tor,
        groups=pods * pt.rails,
        tors_per_group=tors,
        aggs_per_group=r // 2,
        parallel=1,
        has_core=True,
        groups_per_domain=pods * pt.rails,
        aggs_per_core=r // (pods * pt.rails),
        agg_uplinks=r // 2,
        forwarding=False,
        pods=pods,
        meta={"gpus_per_pod": per_pod, "max_pods": max(valid) if valid else 0},
    )


def _fat_tree(spec: ClusterSpec, pt: _Parts) -> _Plan:
    r = pt.radix
    tors = r // 2
    sset = _slots_per_set(pt, r // 2)
    per_group = (tors // pt.q) * sset
    n = spec.gpus if spec.gpus is not None else (spec.pods or 1) * per_group
    if n % pt.rails:
        raise InfeasibleError(
            f"fat-tree: gpus = {n:,} is not a whole number of {pt.rails}-GPU hosts",
            fix=f"use gpus: {_nearest([n // pt.rails * pt.rails], n)}",
        )
    groups = -(-n // per_group)
    valid = [x * per_group for x in range(1, r + 1) if x == 1 or _core_ok(r, x)]
    if n % per_group or not (groups == 1 or _core_ok(r, groups)):
        raise InfeasibleError(
            f"fat-tree: gpus = {n:,} is not a 1:1 3-tier Clos of {per_group:,}-GPU pods at R = {r}",
            fix=f"use gpus: {_nearest(valid, n)}",
        )
    g = np.arange(n, dtype=np.int64)
    if spec.layout == "rail":
        hosts = n // pt.rails
        order = (g % pt.rails) * hosts + g // pt.rails
    else:
        order = g
    gpu_tor = _tor_of(pt, order // per_group, order % per_group, tors, sset)
    return _Plan(
        n_gpus=n,
        gpu_tor=gpu_tor,
        groups=groups,
        tors_per_group=tors,
        aggs_per_group=r // 2,
        parallel=1,
        has_core=groups > 1,
        groups_per_domain=groups,
        aggs_per_core=r // groups if groups > 1 else 1,
        agg_uplinks=r // 2,
        forwarding=False,
        pods=groups,
        meta={"gpus_per_pod": per_group, "max_gpus_3tier": r * per_group},
    )


def _rail_only(spec: ClusterSpec, pt: _Parts) -> _Plan:
    r = pt.radix
    if spec.gpus is None:
        raise InfeasibleError("rail-only: the cluster size is not given", fix="set gpus: N")
    n = spec.gpus
    if n % pt.rails:
        raise InfeasibleError(
            f"rail-only: gpus = {n:,} is not a whole number of {pt.rails}-GPU hosts",
            fix=f"use gpus: {n // pt.rails * pt.rails:,}",
        )
    hosts = n // pt.rails
    one_tier = _slots_per_set(pt, r)
    if hosts <= one_tier:
        tors, aggs, par, sset = pt.q, 0, 1, one_tier
    else:
        sset = _slots_per_set(pt, r // 2)
        tors = -(-hosts // sset) * pt.q
        max_hosts = (r // pt.q) * sset
        if tors > r:
            raise InfeasibleError(
                f"rail-only: {hosts:,} hosts per rail need {tors} ToRs; a 2-tier rail Clos at "
                f"R = {r} holds at most {max_hosts:,} hosts",
                fix=f"use gpus <= {max_hosts * pt.rails:,} or a bigger switch",
            )
        half = r // 2
        aggs = min(a for a in range(1, half + 1) if half % a == 0 and 2 * a >= tors)
        par = half // aggs
    h = np.arange(n, dtype=np.int64) // pt.rails
    rail = np.arange(n, dtype=np.int64) % pt.rails
    gpu_tor = _tor_of(pt, rail, h, tors, sset)
    return _Plan(
        n_gpus=n,
        gpu_tor=gpu_tor,
        groups=pt.rails,
        tors_per_group=tors,
        aggs_per_group=aggs,
        parallel=par,
        has_core=False,
        groups_per_domain=1,
        aggs_per_core=1,
        agg_uplinks=0,
        forwarding=True,
        pods=1,
        meta={"hosts_per_rail": hosts, "rail_tiers": 1 if aggs == 0 else 2},
    )


def _dual_plane(spec: ClusterSpec, pt: _Parts) -> _Plan:
    r = pt.radix
    planes = pt.ports
    if pt.q != pt.ports and planes > 1:
        raise InfeasibleError("dual-plane puts NIC port k on plane k", fix="set dual_tor: true")
    one_pod = r * (r // 2)
    multi_pod = (r // 2) * (r // 2)
    valid = [1, *(x for x in range(2, r + 1) if _core_ok(r, x))]
    sizes = {x: one_pod if x == 1 else x * multi_pod for x in valid}
    if spec.gpus is not None:
        by_size = {v: k for k, v in sorted(sizes.items(), reverse=True)}  # fewest pods win
        if spec.gpus not in by_size or (spec.pods is not None and spec.pods != by_size[spec.gpus]):
            raise InfeasibleError(
                f"dual-plane: gpus = {spec.gpus:,} is not a 1:1 dual-plane size at R = {r}"
                + (f" with pods = {spec.pods}" if spec.pods is not None else ""),
                fix=f"use gpus: {_nearest(sorted(by_size), spec.gpus)}",
            )
        pods = by_size[spec.gpus]
    else:
        pods = spec.pods or 1
    if pods not in sizes:
        raise InfeasibleError(
            f"dual-plane: pods = {pods} cannot be wired 1:1 at R = {r}",
            fix=f"use pods: {_nearest(valid, pods)}",
        )
    tors = r if pods == 1 else r // 2
    if tors % pt.rails:
        raise InfeasibleError(
            f"dual-plane: {tors} ToRs per plane cannot split over {pt.rails} rails",
            fix="use a number of GPUs per host that divides the ToR count",
        )
    down = r // 2
    per_rail = tors // pt.rails
    hosts = per_rail * down
    n = pods * hosts * pt.rails
    g = np.arange(n, dtype=np.int64)
    host, rail = g // pt.rails, g % pt.rails
    pod, h = host // hosts, host % hosts
    slot = rail * per_rail * down + h
    k = np.arange(planes, dtype=np.int64)
    group = k[None, :] * pods + pod[:, None]
    gpu_tor = group * tors + (slot // down)[:, None]
    return _Plan(
        n_gpus=n,
        gpu_tor=gpu_tor,
        groups=planes * pods,
        tors_per_group=tors,
        aggs_per_group=r // 2,
        parallel=1,
        has_core=pods > 1,
        groups_per_domain=pods,
        aggs_per_core=r // pods if pods > 1 else 1,
        agg_uplinks=r // 2 if pods > 1 else 0,
        forwarding=False,
        pods=pods,
        meta={"planes": planes, "gpus_per_pod": hosts * pt.rails},
    )


@dataclass(frozen=True)
class Builder:
    """A registered builder: name, one-line description, plan function."""

    name: str
    help: str
    plan: Callable[[ClusterSpec, _Parts], _Plan]


BUILDERS: dict[str, Builder] = {
    b.name: b
    for b in (
        Builder("astral", "same-rail 3-tier, dual-ToR, 1:1 (Astral)", _astral),
        Builder("fat-tree", "classic 3-tier Clos, not rail-optimized", _fat_tree),
        Builder("rail-only", "one Clos per rail, no spine, NVLink forwarding", _rail_only),
        Builder(
            "dual-plane", "2-tier rail-optimized, one plane per NIC port (HPN-like)", _dual_plane
        ),
    )
}


def builder_names() -> list[str]:
    """Names of the registered topology builders."""
    return list(BUILDERS)


def build(spec: ClusterSpec) -> Topology:
    """Compile a ClusterSpec into an array Topology with its builder."""
    b = BUILDERS.get(spec.topology)
    if b is None:
        raise ConfigError(
            f"unknown topology {spec.topology!r}", fix=f"use one of: {', '.join(BUILDERS)}"
        )
    pt = _parts(spec)
    plan = b.plan(spec, pt)
    if plan.n_gpus > MAX_GPUS:
        raise InfeasibleError(
            f"{plan.n_gpus:,} GPUs exceed the {MAX_GPUS:,} this tool builds", fix="fewer pods"
        )
    return _assemble(spec, pt, plan)


def _assemble(spec: ClusterSpec, pt: _Parts, plan: _Plan) -> Topology:
    n, p = plan.n_gpus, pt.ports
    hosts = n // pt.rails
    n_tor = plan.groups * plan.tors_per_group
    a_g = plan.aggs_per_group
    n_agg = plan.groups * a_g
    domains = plan.groups // plan.groups_per_domain
    cores_per_domain = (a_g // plan.aggs_per_core) * plan.agg_uplinks if plan.has_core else 0
    n_core = domains * cores_per_domain
    n_nvs = hosts if pt.rails > 1 else 0
    tor0 = n
    agg0 = tor0 + n_tor
    core0 = agg0 + n_agg
    nvs0 = core0 + n_core

    sl = pt.switch_latency_s
    nic_lo = np.repeat(np.arange(n, dtype=np.int64), p)
    nic_hi = tor0 + plan.gpu_tor.reshape(-1)
    nic_lat = spec.nic_cable_m * LIGHT_S_PER_M
    up = a_g * plan.parallel
    ta_lo = tor0 + np.repeat(np.arange(n_tor, dtype=np.int64), up)
    ta_group = (ta_lo - tor0) // plan.tors_per_group
    ta_hi = agg0 + ta_group * a_g + np.tile(np.arange(up, dtype=np.int64) % max(a_g, 1), n_tor)
    ta_lat = spec.tor_agg_cable_m * LIGHT_S_PER_M
    if plan.has_core:
        u = plan.agg_uplinks
        ac_agg = np.repeat(np.arange(n_agg, dtype=np.int64), u)
        grp, a = ac_agg // a_g, ac_agg % a_g
        j = np.tile(np.arange(u, dtype=np.int64), n_agg)
        dom = grp // plan.groups_per_domain
        ac_hi = core0 + dom * cores_per_domain + (a // plan.aggs_per_core) * u + j
        ac_lo = agg0 + ac_agg
    else:
        ac_lo = ac_hi = np.zeros(0, dtype=np.int64)
    ac_lat = spec.agg_core_cable_m * LIGHT_S_PER_M
    if n_nvs:
        nv_lo = np.arange(n, dtype=np.int64)
        nv_hi = nvs0 + nv_lo // pt.rails
    else:
        nv_lo = nv_hi = np.zeros(0, dtype=np.int64)
    sections = [
        (nic_lo, nic_hi, pt.nic_bps, nic_lat + sl, nic_lat),
        (ta_lo, ta_hi, pt.port_bps, ta_lat + sl, ta_lat + sl),
        (ac_lo, ac_hi, pt.port_bps, ac_lat + sl, ac_lat + sl),
        (nv_lo, nv_hi, pt.nvlink_bps, spec.nvlink_latency_s, spec.nvlink_latency_s),
    ]
    structure = Structure(
        gpu_tor=plan.gpu_tor,
        gpus_per_host=pt.rails,
        groups=plan.groups,
        tors_per_group=plan.tors_per_group,
        aggs_per_group=a_g,
        tor_agg_parallel=plan.parallel,
        has_core=plan.has_core,
        groups_per_domain=plan.groups_per_domain,
        aggs_per_core=plan.aggs_per_core,
        agg_uplinks=plan.agg_uplinks,
        cores_per_domain=cores_per_domain,
        nvlink_forwarding=plan.forwarding,
    )
    plan.gpu_tor.flags.writeable = False
    meta = dict(plan.meta)
    meta.update(
        pods=plan.pods,
        radix=pt.radix,
        nic_ports=p,
        hosts=hosts,
        rails=pt.rails,
        port_bps=pt.port_bps,
        nic_bps=pt.nic_bps,
        nvlink_bps=pt.nvlink_bps,
        dual_tor=pt.q == p and p > 1,
    )
    return make_topology(
        name=spec.name,
        kind=spec.topology,
        params=spec.model_dump(mode="json"),
        tier_counts=(n, n_tor, n_agg, n_core, n_nvs),
        sections=sections,
        structure=structure,
        meta=meta,
    )
