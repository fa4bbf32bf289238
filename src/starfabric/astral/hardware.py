"""Hardware catalog: GPUs, NICs, switch ASICs, optics and cables, every number with its source.

The built-in entries live in `hardware_data/*.yaml` next to this module; a user extends the
catalog with `load_catalog(path)` (same YAML layout) or the `register_*` functions. Names are
case-insensitive and each entry may carry aliases ("H100" finds "H100-SXM"). A `source` field
either cites a datasheet/paper or starts with "assumption:".
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import Field, field_validator

from starfabric.config import Spec, parse_spec, read_mapping
from starfabric.errors import ConfigError

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
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


T = TypeVar("T", bound=Spec)


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


class Catalog(Generic[T]):
    """Name → spec registry with case-insensitive lookup and aliases."""

    def __init__(self, kind: str, model: type[T]) -> None:
        self.kind = kind
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
            raise ConfigError(f"{source}: '{self.kind}s' must be a list", fix="write '- name: ...'")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise ConfigError(f"{source}: {self.kind}s[{i}] must be a mapping", fix="fix it")
            self.register(
                parse_spec(self.model, entry, f"{source}: {self.kind}s[{i}]"), replace=replace
            )


GPUS: Catalog[GPUSpec] = Catalog("gpu", GPUSpec)


def _catalogs() -> dict[str, Catalog[Any]]:
    return {"gpus": GPUS}


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
    for name in ("gpus.yaml",):
        with resources.as_file(base / name) as p:
            load_catalog(p)


def get_gpu(name: str) -> GPUSpec:
    """The GPU named `name` (case-insensitive, aliases allowed, e.g. "H100" → H100-SXM)."""
    return GPUS.get(name)


def list_gpus() -> list[GPUSpec]:
    """Every catalogued GPU, built-ins first."""
    return GPUS.all()


def register_gpu(spec: GPUSpec, *, replace: bool = False) -> GPUSpec:
    """Add a GPU to the catalog (replace=True overrides a built-in)."""
    return GPUS.register(spec, replace=replace)


_load_builtin()
