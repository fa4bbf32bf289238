"""Hardware catalog: GPUs, NICs, switch ASICs, optics and cables, every number with its source.

The built-in entries live in `hardware_data/*.yaml` next to this module; a user extends the
catalog with `load_catalog(path)` (same YAML layout) or `register_nic`/`register_switch`. Names are
case-insensitive and each entry may carry aliases ("H100" finds "H100-SXM"). A `source` field
either cites a datasheet/paper or starts with "assumption:".
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import Field, field_validator

from starfabric.config import Spec, parse_spec, read_mapping
from starfabric.errors import ConfigError

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "mxfp8", "nvfp4")
"""Dtypes a GPUSpec may quote dense TFLOP/s for."""


class GPUSpec(Spec):
    """One GPU model: dense peak TFLOP/s per dtype, HBM, NVLink per direction, TDP."""

    name: str = Field(min_length=1)
    dense_tflops: dict[str, float]
    hbm_gib: float = Field(gt=0)
    hbm_gbps: float = Field(gt=0)
    nvlink_gbps: float = Field(ge=0)
    tdp_w: float = Field(gt=0)
    source: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    nic_gbps: float | None = Field(
        default=None, gt=0, description="scale-out NIC line rate per GPU in the reference design"
    )
    offload_gib: float | None = Field(
        default=None,
        gt=0,
        description="second memory tier per GPU (Grace LPDDR5X on GH200/GB200); None: none",
    )
    offload_gbps: float | None = Field(
        default=None, gt=0, description="GB/s per direction from the GPU to that tier"
    )
    host_link_gbps: float | None = Field(
        default=None,
        gt=0,
        description="GB/s per direction between the GPU and its host CPU's memory in the "
        "reference node (PCIe x16 on HGX/DGX, NVLink-C2C on Grace superchips); None: unknown",
    )
    host_cores: int | None = Field(
        default=None, gt=0, description="host CPU cores per GPU in the reference node"
    )
    host_mem_gbps: float | None = Field(
        default=None, gt=0, description="host DRAM bandwidth per GPU (node peak / GPUs)"
    )
    host_mem_gib: float | None = Field(
        default=None, gt=0, description="host DRAM per GPU in the reference node"
    )
    hbm_variants: dict[float, float] = Field(
        default_factory=dict,
        description="other memory SKUs of the same chip: GiB -> HBM GB/s (A100 40GB: 1,555 "
        "GB/s HBM2 against the 80GB's 2,039 GB/s HBM2e)",
    )
    nvlink_domain: int | None = Field(
        default=None,
        ge=1,
        description="GPUs one NVLink switch fabric joins when it spans nodes (72 on GB200 "
        "NVL72); None: the node",
    )
    gpus_per_node_default: int | None = Field(
        default=None,
        ge=1,
        description="GPUs of one host in the vendor's reference system, where it is not 8 "
        "(GB200/GB300 NVL72 compute tray: 4); None: 8. A row that leaves gpus_per_node empty "
        "takes it",
    )
    nic_attach: Literal["pcie_switch", "cpu"] = Field(
        default="pcie_switch",
        description="where the scale-out NIC attaches: a PCIe switch it shares with its GPU "
        "(HGX boards; NCCL path PXB), or the CPU's PCIe, the GPU reaching it over NVLink-C2C "
        "(GB200 compute trays; NCCL path PHB before 2.27, P2C after)",
    )

    @field_validator("dense_tflops")
    @classmethod
    def _known_dtypes(cls, v: dict[str, float]) -> dict[str, float]:
        for key, val in v.items():
            if key not in DTYPES:
                raise ValueError(f"unknown dtype {key!r}; use one of {', '.join(DTYPES)}")
            if val < 0:
                raise ValueError(f"dense_tflops[{key}] = {val} must be >= 0")
        return v

    def tflops(self, dtype: str) -> float:
        """Dense peak TFLOP/s for `dtype`; a dtype the GPU lacks (fp8 on A100) is an error."""
        val = self.dense_tflops.get(dtype.lower(), 0.0)
        if val <= 0:
            have = ", ".join(k for k, x in self.dense_tflops.items() if x > 0)
            raise ConfigError(
                f"GPU {self.name} has no {dtype!r} tensor throughput", fix=f"use one of: {have}"
            )
        return val


class NICSpec(Spec):
    """A host NIC: `ports` ports of `port_gbps` each (2x200G for Astral's dual-ToR)."""

    name: str = Field(min_length=1)
    ports: int = Field(ge=1, le=8)
    port_gbps: float = Field(gt=0)
    power_w: float = Field(ge=0)
    cost_usd: float = Field(ge=0)
    source: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()

    @property
    def total_gbps(self) -> float:
        """Bandwidth of all ports together, Gbit/s."""
        return self.ports * self.port_gbps


class SwitchSpec(Spec):
    """A switch system by ASIC class: capacity, port-speed splits (Gbit/s → radix), power, cost."""

    name: str = Field(min_length=1)
    capacity_gbps: float = Field(gt=0)
    port_modes: dict[int, int]
    power_w: float = Field(ge=0)
    cost_usd: float = Field(ge=0)
    latency_ns: float = Field(ge=0)
    source: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()

    @field_validator("port_modes")
    @classmethod
    def _modes_fit(cls, v: dict[int, int]) -> dict[int, int]:
        if not v:
            raise ValueError("port_modes needs at least one 'speed_gbps: radix' pair")
        for speed, radix in v.items():
            if speed <= 0 or radix < 2:
                raise ValueError(f"port mode {speed}G x {radix} is not a valid split")
        return v

    def radix(self, port_gbps: float) -> int:
        """Ports at `port_gbps`; a speed the ASIC cannot split into names the valid ones."""
        radix = self.port_modes.get(int(port_gbps))
        if radix is None or int(port_gbps) != port_gbps:
            speeds = ", ".join(f"{s}G" for s in sorted(self.port_modes))
            raise ConfigError(
                f"switch {self.name} has no {port_gbps:g}G port mode",
                fix=f"use one of: {speeds}",
            )
        return radix


class OpticSpec(Spec):
    """A transceiver (one per link end) or a cable (one per link, ends included)."""

    name: str = Field(min_length=1)
    kind: Literal["transceiver", "cable"]
    gbps: float = Field(gt=0)
    reach_m: float = Field(gt=0)
    power_w: float = Field(ge=0)
    cost_usd: float = Field(ge=0)
    source: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()

    @property
    def per_link(self) -> int:
        """Units needed per link: 2 transceivers, or 1 cable."""
        return 2 if self.kind == "transceiver" else 1


T = TypeVar("T", bound=Spec)


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


class Catalog(Generic[T]):
    """Name → spec registry with case-insensitive lookup and aliases."""

    def __init__(self, kind: str, model: type[T], section: str) -> None:
        self.kind = kind
        self.section = section
        self.model = model
        self._items: dict[str, T] = {}
        self._index: dict[str, str] = {}

    def register(self, spec: T, *, replace: bool = False) -> T:
        """Add `spec`; an existing name or alias is an error unless `replace`."""
        name: str = spec.name  # type: ignore[attr-defined]
        keys = [_key(name), *(_key(a) for a in getattr(spec, "aliases", ()))]
        for k in keys:
            owner = self._index.get(k)
            if owner is not None and owner != name and not replace:
                raise ConfigError(
                    f"{self.kind} name {k!r} already names {owner!r}",
                    fix="pick another name or alias",
                )
        if name in self._items and not replace:
            raise ConfigError(
                f"{self.kind} {name!r} is already in the catalog", fix="pick another name"
            )
        self._items[name] = spec
        for k in keys:
            self._index[k] = name
        return spec

    def get(self, name: str) -> T:
        """Look up by name or alias, case-insensitively; unknown → ConfigError listing names."""
        owner = self._index.get(_key(str(name)))
        if owner is None:
            raise ConfigError(
                f"unknown {self.kind} {name!r}",
                fix=f"use one of: {', '.join(self.names())}",
            )
        return self._items[owner]

    def names(self) -> list[str]:
        """Canonical names in registration order."""
        return list(self._items)

    def all(self) -> list[T]:
        """Every spec in registration order."""
        return list(self._items.values())

    def load_entries(self, entries: Iterable[Any], source: str, *, replace: bool) -> None:
        """Validate and register a list of mappings read from YAML."""
        if not isinstance(entries, list):
            raise ConfigError(
                f"{source}: '{self.section}' must be a list", fix="write '- name: ...'"
            )
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise ConfigError(f"{source}: {self.section}[{i}] must be a mapping", fix="fix it")
            self.register(
                parse_spec(self.model, entry, f"{source}: {self.section}[{i}]"), replace=replace
            )


GPUS: Catalog[GPUSpec] = Catalog("gpu", GPUSpec, "gpus")
NICS: Catalog[NICSpec] = Catalog("nic", NICSpec, "nics")
SWITCHES: Catalog[SwitchSpec] = Catalog("switch", SwitchSpec, "switches")
OPTICS: Catalog[OpticSpec] = Catalog("optic", OpticSpec, "optics")


def _catalogs() -> dict[str, Catalog[Any]]:
    return {c.section: c for c in (GPUS, NICS, SWITCHES, OPTICS)}


def load_catalog(path: str | Path, *, replace: bool = False) -> None:
    """Extend the catalog from a YAML/JSON file with top-level lists (gpus, nics, ...)."""
    data = read_mapping(path)
    cats = _catalogs()
    for key, entries in data.items():
        cat = cats.get(key)
        if cat is None:
            raise ConfigError(
                f"{path}: unknown catalog section {key!r}", fix=f"use one of: {', '.join(cats)}"
            )
        cat.load_entries(entries, str(path), replace=replace)


def _load_builtin() -> None:
    base = resources.files("starfabric.astral") / "hardware_data"
    for name in ("gpus.yaml", "network.yaml"):
        with resources.as_file(base / name) as p:
            load_catalog(p)


def get_gpu(name: str) -> GPUSpec:
    """The GPU named `name` (case-insensitive, aliases allowed, e.g. "H100" → H100-SXM)."""
    return GPUS.get(name)


def list_gpus() -> list[GPUSpec]:
    """Every catalogued GPU, built-ins first."""
    return GPUS.all()


def get_nic(name: str) -> NICSpec:
    """The NIC named `name` ("2x200G" → CX7-2x200G)."""
    return NICS.get(name)


def list_nics() -> list[NICSpec]:
    """Every catalogued NIC."""
    return NICS.all()


def get_switch(name: str) -> SwitchSpec:
    """The switch system named `name` ("51.2T", "TH5")."""
    return SWITCHES.get(name)


def list_switches() -> list[SwitchSpec]:
    """Every catalogued switch system."""
    return SWITCHES.all()


def get_optic(name: str) -> OpticSpec:
    """The transceiver or cable named `name` ("400G-DR4", "DAC-200G")."""
    return OPTICS.get(name)


def list_optics() -> list[OpticSpec]:
    """Every catalogued transceiver and cable."""
    return OPTICS.all()


def register_switch(spec: SwitchSpec, *, replace: bool = False) -> SwitchSpec:
    """Add a switch system to the catalog."""
    return SWITCHES.register(spec, replace=replace)


def register_nic(spec: NICSpec, *, replace: bool = False) -> NICSpec:
    """Add a NIC to the catalog."""
    return NICS.register(spec, replace=replace)


_load_builtin()
