"""A cluster spec as a site: its racks for the timeline, its plant for the year, both together.

The cluster YAML's `power:` block names the cooling type and the power chain; the site's
plant is the named preset for that cooling (`air` → an air-economized CRAH plant on
air-cooled chillers, `air-liquid` → 85 % of the heat to W32 facility water on towers, the rest
on air, `liquid` → all to facility water), with the chain the block names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starfabric.astral.power.ashrae import check_rack
from starfabric.astral.power.plant import PlantSpec, preset
from starfabric.astral.power.timeline import ClusterShape, cluster_shape

if TYPE_CHECKING:
    from starfabric.astral.topology.spec import ClusterSpec

COOLING_PLANT = {
    "air": ("air-econ", {}),
    "air-liquid": ("liquid", {"liquid": {"fraction": 0.85}}),
    "liquid": ("liquid", {"liquid": {"fraction": 1.0}}),
}
CHAIN = {"hvdc": "hvdc", "ac-ups": "double-conversion-modern"}
RACK_COOLING = {"air": "air", "air-liquid": "air-liquid", "liquid": "liquid"}


def site_plant(spec: ClusterSpec) -> PlantSpec:
    """The plant of the cluster's cooling type and power chain."""
    name, over = COOLING_PLANT[spec.power.cooling]
    doc: dict[str, Any] = {k: dict(v) for k, v in over.items()}
    doc["chain"] = {"kind": CHAIN[spec.power.power_chain]}
    return preset(name, name=f"{spec.name} ({spec.power.cooling}, {spec.power.power_chain})", **doc)


def site_shape(spec: ClusterSpec, stages: int, gpus: int | None = None) -> ClusterShape:
    """Racks of the cluster (rack budget of its cooling type; refused over the type's limit)."""
    from starfabric.astral.hardware import get_nic
    from starfabric.astral.power.ratings import RACK_KW

    rack_kw = spec.power.rack_kw if spec.power.rack_kw is not None else RACK_KW[spec.power.cooling]
    check_rack(rack_kw, RACK_COOLING[spec.power.cooling])
    n = gpus if gpus is not None else cluster_gpus(spec)
    nic = get_nic(spec.nic)
    return cluster_shape(
        gpus=n,
        stages=stages,
        gpu=spec.gpu,
        gpus_per_host=spec.gpus_per_host,
        host_overhead_w=spec.power.host_overhead_w * spec.gpus_per_host / 8.0,
        nic_w_per_gpu=nic.power_w,
        rack_kw=rack_kw,
        hosts_per_pod=None,
    )


def cluster_gpus(spec: ClusterSpec) -> int:
    """GPUs the cluster holds (the builder's count)."""
    if spec.gpus is not None:
        return int(spec.gpus)
    from starfabric.astral.topology import build
    from starfabric.astral.topology.inventory import inventory

    return int(inventory(build(spec), spec).gpus)
