"""Export a Topology: JSON inventory, node/link CSV, networkx graph and GraphML (small ones)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from starfabric import outputs
from starfabric.astral.topology.model import LINK_KIND_NAMES, TIER_NAMES, Topology
from starfabric.errors import ConfigError

NETWORKX_MAX_LINKS = 2_000_000
"""Refuse networkx/GraphML export above this many directed links (dict-of-dict graphs get huge)."""


def write_json(data: dict[str, Any], path: str | Path) -> Path:
    """Write a JSON document (inventory, power report) with sorted keys."""
    return outputs.write_json(path, data, indent=2, sort_keys=True, default=float)


def write_csv(topo: Topology, folder: str | Path) -> tuple[Path, Path]:
    """nodes.csv (id, tier, label) and links.csv (id, src, dst, kind, capacity_bps, latency_s)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    nodes = out / "nodes.csv"
    tiers = np.asarray(TIER_NAMES)[topo.node_tier]
    local = np.arange(topo.n_nodes) - topo.tier_base[topo.node_tier]
    with outputs.atomic_path(nodes) as tmp, tmp.open("w") as fh:
        fh.write("id,tier,label\n")
        for i0 in range(0, topo.n_nodes, 1 << 20):
            i1 = min(i0 + (1 << 20), topo.n_nodes)
            ids = np.arange(i0, i1)
            rows = np.char.add(np.char.add(ids.astype(str), ","), tiers[i0:i1])
            label = np.char.add(tiers[i0:i1], local[i0:i1].astype(str))
            rows = np.char.add(np.char.add(rows, ","), label)
            fh.write("\n".join(rows.tolist()) + "\n")
    links = out / "links.csv"
    kinds = np.asarray(LINK_KIND_NAMES)[topo.link_kind]
    with outputs.atomic_path(links) as tmp, tmp.open("w") as fh:
        fh.write("id,src,dst,kind,capacity_bps,latency_s\n")
        for i0 in range(0, topo.n_links, 1 << 20):
            i1 = min(i0 + (1 << 20), topo.n_links)
            cols = [
                np.arange(i0, i1).astype(str),
                topo.link_src[i0:i1].astype(str),
                topo.link_dst[i0:i1].astype(str),
                kinds[i0:i1],
                np.char.mod("%.6g", topo.link_capacity_bps[i0:i1]),
                np.char.mod("%.6g", topo.link_latency_s[i0:i1]),
            ]
            row = cols[0]
            for c in cols[1:]:
                row = np.char.add(np.char.add(row, ","), c)
            fh.write("\n".join(row.tolist()) + "\n")
    return nodes, links


def to_networkx(topo: Topology) -> nx.MultiDiGraph:
    """The topology as a networkx MultiDiGraph (parallel links kept), for small topologies."""
    if topo.n_links > NETWORKX_MAX_LINKS:
        raise ConfigError(
            f"{topo.n_links:,} links are too many for networkx (limit {NETWORKX_MAX_LINKS:,})",
            fix="export CSV instead, or build a smaller cluster",
        )
    g = nx.MultiDiGraph(name=topo.name, kind=topo.kind)
    tiers = np.asarray(TIER_NAMES)[topo.node_tier].tolist()
    g.add_nodes_from((i, {"tier": t}) for i, t in enumerate(tiers))
    kinds = np.asarray(LINK_KIND_NAMES)[topo.link_kind].tolist()
    g.add_edges_from(
        (s, d, e, {"kind": k, "capacity_bps": c, "latency_s": lat})
        for e, (s, d, k, c, lat) in enumerate(
            zip(
                topo.link_src.tolist(),
                topo.link_dst.tolist(),
                kinds,
                topo.link_capacity_bps.tolist(),
                topo.link_latency_s.tolist(),
                strict=True,
            )
        )
    )
    return g


def write_graphml(topo: Topology, path: str | Path) -> Path:
    """GraphML of a small topology (via networkx)."""
    g = to_networkx(topo)  # a topology too large fails before the file is touched
    with outputs.atomic_path(path) as tmp:
        nx.write_graphml(g, tmp)
    return Path(path)
