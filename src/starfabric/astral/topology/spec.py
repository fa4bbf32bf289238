"""ClusterSpec: the validated, frozen description of a cluster that a builder compiles to arrays."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from starfabric.astral.power.ratings import PowerSpec
from starfabric.config import Spec
from starfabric.units import parse_bandwidth, parse_count, parse_duration

LIGHT_S_PER_M = 5e-9
"""Propagation delay of fiber/copper, ~5 ns per metre (light at ~2e8 m/s in glass)."""


class ClusterSpec(Spec):
    """A cluster: topology builder, parts from the hardware catalog, sizes, cable lengths, power.

    Sizes: `pods` for astral and dual-plane, `gpus` for any builder (checked against pods when
    both are given). Cable lengths and the NVLink latency are assumptions with defaults.
    """

    name: str = "cluster"
    topology: str = "astral"
    gpu: str = "H800"
    switch: str = "51.2T"
    port_speed: float = Field(200e9, description="switch port speed, bit/s ('200G')")
    nic: str = "2x200G"
    gpus_per_host: int = Field(8, ge=1, le=1024, description="GPUs per host = rails (HB domain)")
    pods: int | None = Field(None, ge=1)
    gpus: int | None = Field(None, ge=1)
    dual_tor: bool = Field(True, description="each NIC port to a different ToR (Astral)")
    layout: Literal["host", "rail"] = Field(
        "host", description="fat-tree: fill ToRs host by host, or rail by rail (rail-optimized)"
    )
    nic_cable_m: float = Field(10.0, gt=0, description="assumption: NIC-ToR cable length")
    tor_agg_cable_m: float = Field(50.0, gt=0, description="assumption: ToR-Agg cable length")
    agg_core_cable_m: float = Field(500.0, gt=0, description="assumption: Agg-Core cable length")
    nvlink_latency_s: float = Field(1e-6, ge=0, description="assumption: NVLink hop latency")
    nic_rate: float | None = Field(
        None,
        description="NIC link rate per GPU, bit/s, when it differs from the port speed (a NIC "
        "shared by two GPUs: '50G'); default: port_speed",
    )
    transport: Literal["roce", "ib", "efa", "tcpxo", "tcpx"] = Field(
        "roce", description="RDMA transport of the network (netsim flow control and routing)"
    )
    in_network_reduction: bool = Field(
        False, description="switches reduce in-network (SHARP), which enables NCCL's CollNet"
    )
    media: dict[Literal["nic-tor", "tor-agg", "agg-core"], str] = Field(
        default_factory=dict, description="optic/cable per link kind (default: cheapest fit)"
    )
    power: PowerSpec = Field(default_factory=PowerSpec)

    @field_validator("port_speed", mode="before")
    @classmethod
    def _speed(cls, v: object) -> float:
        return parse_bandwidth(v if isinstance(v, str | int | float) else str(v), "port_speed")

    @field_validator("nic_rate", mode="before")
    @classmethod
    def _nic_rate(cls, v: object) -> float | None:
        if v is None:
            return None
        return parse_bandwidth(v if isinstance(v, str | int | float) else str(v), "nic_rate")

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, v: object) -> int | None:
        if v is None:
            return None
        return parse_count(v if isinstance(v, str | int | float) else str(v), "gpus")

    @field_validator("nvlink_latency_s", mode="before")
    @classmethod
    def _lat(cls, v: object) -> float:
        return parse_duration(v if isinstance(v, str | int | float) else str(v), "nvlink_latency_s")
