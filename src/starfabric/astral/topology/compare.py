"""The designs side by side at equal GPU count: switches, optics, cost, power, bisection, hops."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.astral.topology.builders import build
from starfabric.astral.topology.inventory import inventory
from starfabric.astral.topology.model import TIER_CORE, TIER_TOR, Topology
from starfabric.astral.topology.spec import ClusterSpec
from starfabric.errors import InfeasibleError

DESIGNS = ("astral", "fat-tree", "rail-only", "dual-plane")
"""The designs `compare` builds, in table order."""


@dataclass(frozen=True)
class DesignRow:
    """One design at the common GPU count (feasible=False rows carry the builder's reason)."""

    design: str
    gpus: int
    feasible: bool
    note: str = ""
    switches: int = 0
    tor: int = 0
    agg: int = 0
    core: int = 0
    optics_units: int = 0
    network_cost_usd: float = 0.0
    network_w: float = 0.0
    bisection_bps: float = 0.0
    network_bisection_bps: float = 0.0
    mean_switch_hops: float = 0.0
    max_switch_hops: int = 0
    same_rail_switch_hops: float = 0.0
    annual_pue: float = 0.0
    swing_mw: float = 0.0
    gpus_per_mw: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def switch_hops(topo: Topology, offsets: np.ndarray, links: np.ndarray) -> np.ndarray:
    """Switches each path crosses (ToR, Agg, Core), NVLink hops excluded."""
    tier = topo.node_tier[topo.link_dst[links]]
    is_sw = ((tier >= TIER_TOR) & (tier <= TIER_CORE)).astype(np.int64)
    csum = np.concatenate([[0], np.cumsum(is_sw)])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def compare(
    spec: ClusterSpec,
    *,
    designs: tuple[str, ...] = DESIGNS,
    sample_pairs: int = 20_000,
    seed: int = 0,
) -> list[DesignRow]:
    """Build every design with the spec's parts at the spec's GPU count and tabulate them."""
    from starfabric.astral.power import power_report
    from starfabric.astral.power.site import facility_figures
    from starfabric.astral.routing import route_flows

    n = build(spec).n_gpus
    rows: list[DesignRow] = []
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, sample_pairs)
    dst = rng.integers(0, n, sample_pairs)
    fh = rng.integers(0, 2**63, sample_pairs, dtype=np.int64).astype(np.uint64)
    rails = spec.gpus_per_host
    # same-rail pairs: the traffic of data/pipeline parallel rings in rail-optimized placement
    rail_dst = rng.integers(0, n // rails, sample_pairs) * rails + src % rails
    for design in designs:
        update: dict[str, Any] = {"topology": design, "name": f"{spec.name}-{design}"}
        if design != spec.topology:
            update.update(gpus=n, pods=None, layout="host")
        d_spec = spec.model_copy(update=update)
        try:
            topo = build(d_spec)
        except InfeasibleError as exc:
            rows.append(DesignRow(design=design, gpus=n, feasible=False, note=exc.one_line()))
            continue
        inv = inventory(topo, d_spec)
        pr = power_report(inv, d_spec.power)
        r = route_flows(topo, src, dst, fh)
        hops = switch_hops(topo, r.offsets, r.links)
        r2 = route_flows(topo, src, rail_dst, fh)
        rail_hops = switch_hops(topo, r2.offsets, r2.links)
        fac = facility_figures(d_spec, pr.it_w, inv.gpus)
        rows.append(
            DesignRow(
                design=design,
                gpus=n,
                feasible=True,
                switches=sum(inv.switches.values()),
                tor=inv.switches["tor"],
                agg=inv.switches["agg"],
                core=inv.switches["core"],
                optics_units=sum(inv.optics.values()),
                network_cost_usd=pr.network_cost_usd,
                network_w=pr.network_w,
                bisection_bps=inv.bisection_bps,
                network_bisection_bps=inv.network_bisection_bps,
                mean_switch_hops=float(hops.mean()) if hops.size else 0.0,
                max_switch_hops=int(hops.max()) if hops.size else 0,
                same_rail_switch_hops=float(rail_hops.mean()) if rail_hops.size else 0.0,
                annual_pue=fac["annual_pue"],
                swing_mw=fac["swing_mw"],
                gpus_per_mw=fac["gpus_per_mw"],
            )
        )
        del topo
    return rows


def plot_compare(rows: list[DesignRow], path: str | Path) -> Path:
    """Bar charts of the feasible designs: switches, optics, cost, power, bisection, hops."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.feasible]
    names = [r.design for r in ok]
    panels = [
        ("switches", [r.switches for r in ok]),
        ("optics + cables (units)", [r.optics_units for r in ok]),
        ("network cost (M$)", [r.network_cost_usd / 1e6 for r in ok]),
        ("network power (MW)", [r.network_w / 1e6 for r in ok]),
        ("network bisection (Pb/s)", [r.network_bisection_bps / 1e15 for r in ok]),
        ("mean switch hops (random pairs)", [r.mean_switch_hops for r in ok]),
        ("mean switch hops (same rail)", [r.same_rail_switch_hops for r in ok]),
        ("deployable GPUs per MW", [r.gpus_per_mw for r in ok]),
    ]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    for ax, (title, vals) in zip(axes.ravel(), panels, strict=False):
        ax.bar(names, vals, color=["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"][: len(names)])
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=20)
    gpus = rows[0].gpus if rows else 0
    fig.suptitle(f"Designs at {gpus:,} GPUs (equal parts)")
    fig.tight_layout()
    from starfabric.outputs import save_figure

    p = save_figure(fig, path, dpi=110)
    plt.close(fig)
    return p
