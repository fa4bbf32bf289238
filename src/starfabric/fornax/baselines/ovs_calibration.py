"""Whose OVS calibration the OVS-like preset runs with: the built-in one (the four constants in
config.py, measured on the project's machine) or a file `benchmarks/ovs_real.py --calibrate
FILE` wrote on the user's machine, which `fornax experiment --ovs-calibration FILE` reads.

The file is JSON (format CALIBRATION_FORMAT): the fitted constants, the machine they were
measured on (host, CPU model, CPUs, kernel), the Open vSwitch release, when, the levels of the
fit and its worst residuals. A malformed file (not JSON, a missing or unknown field, a constant
<= 0 or not finite, another format) is one ConfigError naming the file and the field.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from starfabric.config import Spec, load_spec, parse_spec
from starfabric.fornax.baselines.config import (
    BUILTIN_OVS_CONSTANTS,
    OVS_CALIBRATION_VERSION,
    OvsConstants,
)
from starfabric.fornax.baselines.ovs_cost import Calibration

CALIBRATION_FORMAT = "starfabric-ovs-calibration/1"
"""The `format` field of a calibration file; another value is refused (a future layout)."""


class Machine(Spec):
    """The machine a calibration was measured on, as the benchmark saw it."""

    hostname: str = Field(min_length=1)
    cpu_model: str = Field(min_length=1)
    cpus: int = Field(ge=1, le=65536, description="logical CPUs (os.cpu_count)")
    kernel: str = Field(min_length=1)

    def describe(self) -> str:
        return f"{self.hostname} ({self.cpu_model}, {self.cpus} CPUs, Linux {self.kernel})"


class OvsCalibration(Spec):
    """A calibration of the OVS-like preset and where it comes from."""

    format: Literal["starfabric-ovs-calibration/1"]
    constants: OvsConstants
    machine: Machine
    ovs_version: str = Field(min_length=1)
    measured_at: str = Field(min_length=1, description="UTC, ISO 8601")
    levels: tuple[int, ...] = Field(min_length=2, description="connections of each fitted level")
    worst_residual: dict[str, float] = Field(
        default_factory=dict, description="max |fit / measured - 1| over the levels, per figure"
    )
    source: str = Field(
        "file", description="'built-in' or the file it was read from (set when loaded)"
    )

    def describe(self) -> str:
        """One line for reports: which calibration, measured on which machine, with what."""
        where = (
            "built-in calibration" if self.source == "built-in" else f"calibration {self.source}"
        )
        return (
            f"{where}: measured on {self.machine.describe()} with {self.ovs_version} at "
            f"{self.measured_at} over {', '.join(f'{n:,}' for n in self.levels)} connections"
        )

    def report(self) -> dict[str, Any]:
        """What an experiment's JSON records about the calibration that ran."""
        return {"source": self.source, "describe": self.describe(),
                "machine": self.machine.model_dump(), "ovs_version": self.ovs_version,
                "measured_at": self.measured_at, "levels": list(self.levels),
                "constants": self.constants.model_dump()}  # fmt: skip


BUILTIN_CALIBRATION = OvsCalibration(
    format=CALIBRATION_FORMAT,
    constants=BUILTIN_OVS_CONSTANTS,
    machine=Machine(
        hostname="the project's shared 2-core VM",
        cpu_model="not recorded (2 shared vCPUs, load 7.5-11 during the run)",
        cpus=2,
        kernel="not recorded",
    ),
    ovs_version=OVS_CALIBRATION_VERSION,
    measured_at="2026-12-01T16:34Z",
    levels=(10_000, 50_000, 200_000),
    source="built-in",
)
"""The preset's default (config.py OVS_* and their comments: the run it was fitted on)."""


def this_machine() -> Machine:
    """The machine this process runs on: host name, CPU model (/proc/cpuinfo), CPUs, kernel."""
    model = platform.processor() or platform.machine() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return Machine(
        hostname=platform.node() or "unknown host",
        cpu_model=model or "unknown CPU",
        cpus=os.cpu_count() or 1,
        kernel=platform.release() or "unknown",
    )


def from_fit(fit: Calibration, ovs_version: str, machine: Machine | None = None) -> OvsCalibration:
    """The calibration a benchmark run fitted (ovs_cost.fit), stamped with this machine and now;
    a fit whose constants are not positive (levels too small or too noisy for RSS and CPU to
    grow) is a ConfigError naming the constant."""
    data = {
        "format": CALIBRATION_FORMAT,
        "constants": {
            "host_base_bytes": max(fit.host_base_bytes, 0.0),  # an intercept below 0 is noise
            "host_bytes_per_flow": fit.host_bytes_per_flow,
            "revalidate_ns_per_flow": fit.revalidate_ns_per_flow,
            "dump_ns_per_flow": fit.dump_ns_per_flow,
        },
        "machine": (machine or this_machine()).model_dump(),
        "ovs_version": ovs_version,
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "levels": list(fit.levels),
        "worst_residual": fit.worst_residual,
    }
    return parse_spec(OvsCalibration, data, source="the fit of this run's levels")


def load_ovs_calibration(path: str | Path) -> OvsCalibration:
    """Read and validate a calibration file; `source` becomes the path."""
    cal = load_spec(OvsCalibration, path)
    return cal.model_copy(update={"source": str(path)})


def calibration_document(cal: OvsCalibration) -> dict[str, Any]:
    """The JSON a calibration file holds (everything but `source`, which is where it lies)."""
    return cal.model_dump(mode="json", exclude={"source"})


__all__ = [
    "BUILTIN_CALIBRATION",
    "CALIBRATION_FORMAT",
    "Machine",
    "OvsCalibration",
    "calibration_document",
    "from_fit",
    "load_ovs_calibration",
    "this_machine",
]
