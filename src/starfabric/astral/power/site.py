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


def facility_figures(
    spec: ClusterSpec, it_design_w: float, gpus: int, weather: str = "chicago"
) -> dict[str, float]:
    """Annual PUE, job stop/start swing and deployable GPUs per MW of a built cluster.

    The IT load is the training campaign profile of the EnergyPlus cross-check (about 85 % of
    nameplate, restarts and a maintenance day a month) on the cluster's plant in `weather`;
    the swing is every GPU and host stepping from idle to training peak (a job's start or a
    checkpoint's end) at the feed; GPUs per MW divide the GPUs by the nameplate IT times the
    plant's design-day peak PUE.
    """
    from starfabric.astral.hardware import get_gpu
    from starfabric.astral.power.energyplus import default_it_profile
    from starfabric.astral.power.plant import simulate_year
    from starfabric.astral.power.timeline import GpuPowerModel
    from starfabric.astral.power.weather import load_weather

    plant = site_plant(spec)
    yr = simulate_year(plant, load_weather(weather), default_it_profile(it_design_w), it_design_w)
    m = GpuPowerModel()
    g = get_gpu(spec.gpu)
    host = spec.power.host_overhead_w * gpus / 8.0
    step_it = gpus * g.tdp_w * (1 - m.idle_fraction) + host * (
        m.host_train_fraction - m.host_idle_fraction
    )
    peak_pue = yr.design_day()["peak_pue"]
    return {
        "annual_pue": yr.pue,
        "swing_mw": step_it / float(yr.chain.efficiency.mean()) / 1e6,
        "gpus_per_mw": gpus / (it_design_w * peak_pue / 1e6),
        "peak_pue": peak_pue,
    }
