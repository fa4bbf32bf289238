"""The chaos run's input: a chaos file's spec (traffic, the controller's settings and the
faults to inject, fault classes in chaos.py's docstring), read by `load_chaos`. Plain data:
it imports neither the injector (inject.py) nor the run (chaos.py) nor its report
(chaos_report.py), which all read it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from starfabric.config import Spec, load_spec
from starfabric.fornax.engine import EngineConfig
from starfabric.fornax.manager.config import ManagerConfig
from starfabric.fornax.manager.health import HealthConfig
from starfabric.fornax.ranges import IngressPort, Seed
from starfabric.fornax.softpath import SoftPathConfig
from starfabric.fornax.workload import SyntheticWorkload, parse_workload
from starfabric.units import parse_duration


def _dur(v: Any) -> Any:
    return parse_duration(v, "duration") if isinstance(v, str) else v


class BitFlips(Spec):
    """Random bit flips in session records over a time window."""

    rate_per_entry_hour: float = Field(gt=0, description="flip events per entry per hour")
    bits: int = Field(1, ge=1, le=8, description="bits flipped per event (1: correctable)")
    start: float = Field(0.0, ge=0, description="seconds")
    end: float | None = Field(None, gt=0, description="seconds (default: end of the run)")
    target: str = Field("occupied", pattern="^(occupied|any)$", description="slots drawn from")
    silent: bool = Field(
        False,
        description="also rewrite the check word so ECC cannot see it (only the patrol can)",
    )

    _d = field_validator("start", "end", mode="before")(_dur)


class Window(Spec):
    """A fault that starts at `at` and lasts `duration`."""

    at: float = Field(ge=0)
    duration: float = Field(gt=0)

    _d = field_validator("at", "duration", mode="before")(_dur)


class PortStall(Window):
    port: IngressPort


class Crash(Spec):
    at: float = Field(ge=0)

    _d = field_validator("at", mode="before")(_dur)


class Faults(Spec):
    """Every fault of a chaos run."""

    bit_flips: tuple[BitFlips, ...] = ()
    stalls: tuple[PortStall, ...] = ()
    ring_overflows: tuple[Window, ...] = ()
    crashes: tuple[Crash, ...] = ()
    engine_failures: tuple[Window, ...] = ()


class ChaosSpec(Spec):
    """What `starfabric fornax chaos` runs; relative paths are relative to the file."""

    vpc: str
    workload: SyntheticWorkload
    #: default engine of a chaos run (assumption: a small table, so a run is seconds)
    engine: EngineConfig = EngineConfig(capacity=65536, ring_capacity=4096, n_ports=8)
    manager: ManagerConfig = ManagerConfig()
    softpath: SoftPathConfig = SoftPathConfig()
    health: HealthConfig = HealthConfig()
    tick: float = Field(0.002, gt=0, description="seconds between manager ticks (assumption)")
    seed: Seed = Field(0, description="seed of the fault draws")
    faults: Faults = Faults()

    _t = field_validator("tick", mode="before")(_dur)

    @model_validator(mode="after")
    def _faults_in_run(self) -> ChaosSpec:
        """A fault must start while traffic runs and name an existing port."""
        end = self.workload.duration
        f = self.faults
        starts = [("bit_flips", b.start) for b in f.bit_flips]
        starts += [(k, w.at) for k in ("stalls", "ring_overflows", "engine_failures", "crashes")
                   for w in getattr(f, k)]  # fmt: skip
        for s in f.stalls:
            if s.port >= self.engine.n_ports:
                raise ValueError(
                    f"faults.stalls: port {s.port} does not exist (engine.n_ports {self.engine.n_ports})"
                )
        for kind, at in starts:
            if at >= end:
                raise ValueError(
                    f"faults.{kind}: a fault at {at:g} s starts after the run ends "
                    f"(workload.duration {end:g} s)"
                )
        for b in f.bit_flips:
            if b.end is not None and b.end <= b.start:
                raise ValueError(
                    f"faults.bit_flips: end {b.end:g} s is not after start {b.start:g} s"
                )
        return self

    @field_validator("workload", mode="before")
    @classmethod
    def _workload(cls, v: Any) -> Any:
        return parse_workload(v, source="workload") if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _ports(self) -> ChaosSpec:
        for s in self.faults.stalls:
            if s.port >= self.engine.n_ports:
                raise ValueError(
                    f"faults.stalls: port {s.port} >= engine.n_ports {self.engine.n_ports}"
                )
        return self


def load_chaos(path: str | Path) -> tuple[ChaosSpec, Path]:
    """Read a chaos file; returns it with its directory (the base of relative paths)."""
    return load_spec(ChaosSpec, path), Path(path).resolve().parent


__all__ = [
    "BitFlips",
    "ChaosSpec",
    "Crash",
    "Faults",
    "PortStall",
    "Window",
    "load_chaos",
]
