"""The static ledger: power, racks, PUE and cost of a built cluster from device counts.

IT power is the sum of devices (GPU TDP, host overhead, NICs, switches, optics). The facility
draws IT / power-chain efficiency (HVDC vs AC UPS) plus cooling and other overheads, so PUE is
computed, not assumed. Racks follow from the rack power budget of the cooling type; Astral
pairs HVDC with air-liquid cooling to make its density deployable (Astral SIGCOMM'25, section
on power and cooling). Every number below that is not cited is an assumption.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starfabric.astral.hardware import get_gpu, get_nic, get_optic, get_switch
from starfabric.astral.power.ratings import CHAIN_EFFICIENCY, COOLING_OVERHEAD, RACK_KW, PowerSpec

if TYPE_CHECKING:
    from starfabric.astral.topology.inventory import Inventory


@dataclass(frozen=True)
class PowerReport:
    """Power (W), cost (USD) and space of a cluster and of one pod of it."""

    gpu_w: float
    host_w: float
    nic_w: float
    switch_w: float
    optics_w: float
    it_w: float
    facility_w: float
    pue: float
    network_w: float
    network_cost_usd: float
    switch_cost_usd: float
    optics_cost_usd: float
    nic_cost_usd: float
    compute_cost_usd: float
    total_cost_usd: float
    rack_kw: float
    server_racks: int
    network_racks: int
    host_kw: float
    rack_density_kw: float
    energy_usd_per_year: float
    pods: int

    def per_pod(self) -> dict[str, float]:
        """Totals divided by the number of pods (a pod's share of the core included)."""
        n = max(self.pods, 1)
        return {
            "it_w": self.it_w / n,
            "facility_w": self.facility_w / n,
            "network_w": self.network_w / n,
            "network_cost_usd": self.network_cost_usd / n,
            "total_cost_usd": self.total_cost_usd / n,
            "server_racks": self.server_racks / n,
        }

    def as_dict(self) -> dict[str, float | int | dict[str, float]]:
        """Plain dict for JSON."""
        out: dict[str, float | int | dict[str, float]] = dict(self.__dict__)
        out["per_pod"] = self.per_pod()
        return out


def power_report(inv: Inventory, spec: PowerSpec | None = None) -> PowerReport:
    """Power, cost and racks of a cluster from its inventory and the named assumptions."""
    spec = spec or PowerSpec()
    gpu = get_gpu(inv.gpu)
    nic = get_nic(inv.nic)
    sw = get_switch(inv.switch)
    n_switches = sum(inv.switches.values())
    gpu_w = inv.gpus * gpu.tdp_w
    host_w = inv.hosts * spec.host_overhead_w * inv.gpus_per_host / 8.0
    nic_w = inv.nics * nic.power_w
    switch_w = n_switches * sw.power_w
    optics_w = 0.0
    optics_cost = 0.0
    for name, units in inv.optics.items():
        o = get_optic(name)
        optics_w += units * o.power_w
        optics_cost += units * o.cost_usd
    it_w = gpu_w + host_w + nic_w + switch_w + optics_w
    chain = CHAIN_EFFICIENCY[spec.power_chain]
    facility_w = it_w / chain + it_w * (COOLING_OVERHEAD[spec.cooling] + spec.other_overhead)
    nic_cost = inv.nics * nic.cost_usd
    switch_cost = n_switches * sw.cost_usd
    network_w = switch_w + optics_w + (nic_w if spec.include_nics_in_network else 0.0)
    network_cost = switch_cost + optics_cost + (nic_cost if spec.include_nics_in_network else 0.0)
    compute_cost = inv.gpus * spec.gpu_cost_usd + inv.hosts * spec.host_cost_usd + nic_cost
    rack_kw = spec.rack_kw if spec.rack_kw is not None else RACK_KW[spec.cooling]
    host_kw = (inv.gpus_per_host * gpu.tdp_w + inv.gpus_per_host * nic.power_w) / 1e3 + (
        spec.host_overhead_w * inv.gpus_per_host / 8.0
    ) / 1e3
    hosts_per_rack = int(rack_kw // host_kw)
    if hosts_per_rack:
        server_racks = math.ceil(inv.hosts / hosts_per_rack)
    else:  # a host (e.g. a 256-GPU NVLink domain) spans several racks
        server_racks = inv.hosts * math.ceil(host_kw / rack_kw)
    server_kw = inv.hosts * host_kw
    network_racks = math.ceil((switch_w + optics_w) / (rack_kw * 1e3))
    return PowerReport(
        gpu_w=gpu_w,
        host_w=host_w,
        nic_w=nic_w,
        switch_w=switch_w,
        optics_w=optics_w,
        it_w=it_w,
        facility_w=facility_w,
        pue=facility_w / it_w if it_w else 0.0,
        network_w=network_w,
        network_cost_usd=network_cost,
        switch_cost_usd=switch_cost,
        optics_cost_usd=optics_cost,
        nic_cost_usd=nic_cost,
        compute_cost_usd=compute_cost,
        total_cost_usd=compute_cost + switch_cost + optics_cost,
        rack_kw=rack_kw,
        server_racks=server_racks,
        network_racks=network_racks,
        host_kw=host_kw,
        rack_density_kw=server_kw / server_racks if server_racks else 0.0,
        energy_usd_per_year=facility_w / 1e3 * 24 * 365 * spec.usd_per_kwh,
        pods=inv.pods,
    )


WANG_GPUS = 32_768
"""Assumption (our reading of Wang et al., 'Rail-only', arXiv 2307.12169): a 32K-GPU cluster."""

WANG_HB_DOMAIN = 256
"""Wang et al.: GH200-class NVLink (HB) domains of 256 GPUs; each GPU one 400G NIC."""

WANG_SWITCHES = ("25.6T", "51.2T")
"""Assumption: 64- and 128-port 400G switches span the published savings range."""


@dataclass(frozen=True)
class Savings:
    """Rail-only against the rail-optimized any-to-any Clos at one setting."""

    switch: str
    radix: int
    gpus: int
    hb_domain: int
    rail_optimized_cost_usd: float
    rail_only_cost_usd: float
    rail_optimized_w: float
    rail_only_w: float
    rail_optimized_switches: int
    rail_only_switches: int

    @property
    def cost_change(self) -> float:
        """Relative network-cost change of rail-only (negative = cheaper)."""
        return self.rail_only_cost_usd / self.rail_optimized_cost_usd - 1.0

    @property
    def power_change(self) -> float:
        """Relative network-power change of rail-only (negative = less power)."""
        return self.rail_only_w / self.rail_optimized_w - 1.0


def rail_only_savings(
    *,
    gpus: int = WANG_GPUS,
    hb_domain: int = WANG_HB_DOMAIN,
    switches: tuple[str, ...] = WANG_SWITCHES,
    port_speed: str = "400G",
    nic: str = "CX7-400G",
    gpu: str = "H100",
) -> list[Savings]:
    """Build both networks with the builders and price them from the catalog (first principles).

    Rail-optimized = the `fat-tree` builder with a rail layout (each leaf one rail, 1:1 up to
    a Core); rail-only = the `rail-only` builder. Network = switches + optics (NICs equal).
    """
    from starfabric.astral.topology.builders import build
    from starfabric.astral.topology.inventory import inventory
    from starfabric.astral.topology.spec import ClusterSpec

    out: list[Savings] = []
    for sw in switches:
        reports: dict[str, tuple[PowerReport, int, int]] = {}
        for kind in ("fat-tree", "rail-only"):
            spec = ClusterSpec(
                name=f"wang-{kind}-{sw}",
                topology=kind,
                layout="rail",
                switch=sw,
                port_speed=port_speed,
                nic=nic,
                gpu=gpu,
                gpus_per_host=hb_domain,
                gpus=gpus,
            )
            inv = inventory(build(spec), spec)
            reports[kind] = (power_report(inv, spec.power), sum(inv.switches.values()), inv.radix)
        ro, rs, radix = reports["fat-tree"]
        lo, ls, _ = reports["rail-only"]
        out.append(
            Savings(
                switch=sw,
                radix=radix,
                gpus=gpus,
                hb_domain=hb_domain,
                rail_optimized_cost_usd=ro.network_cost_usd,
                rail_only_cost_usd=lo.network_cost_usd,
                rail_optimized_w=ro.network_w,
                rail_only_w=lo.network_w,
                rail_optimized_switches=rs,
                rail_only_switches=ls,
            )
        )
    return out
