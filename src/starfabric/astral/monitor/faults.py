"""Fault classes the synthesizer can inject and the localizer can name, plus the injection record.

The injection record (`Fault`) is ground truth: the synthesizer writes it to a separate JSON
file next to the telemetry database and only `evaluate` reads it. The localizer never sees it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from starfabric.errors import ConfigError, DataError

GPU_THROTTLE = "gpu_throttle"
GPU_XID = "gpu_xid"
NVLINK_DEGRADED = "nvlink_degraded"
NIC_PORT_DOWN = "nic_port_down"
LINK_CRC = "link_crc"
OPTICAL_FAILING = "optical_failing"
PFC_STORM = "pfc_storm"
ECMP_HOTSPOT = "ecmp_hotspot"
MISCONFIG_MTU = "misconfig_mtu"
MISCONFIG_DCQCN = "misconfig_dcqcn"
CPU_CONTENTION = "cpu_contention"

FAULT_KINDS: tuple[str, ...] = (
    GPU_THROTTLE,
    GPU_XID,
    NVLINK_DEGRADED,
    NIC_PORT_DOWN,
    LINK_CRC,
    OPTICAL_FAILING,
    PFC_STORM,
    ECMP_HOTSPOT,
    MISCONFIG_MTU,
    MISCONFIG_DCQCN,
    CPU_CONTENTION,
)
"""Every fault class, in the order of the issue's list (switch congestion is a PFC storm)."""

TARGET_KIND: dict[str, str] = {
    GPU_THROTTLE: "gpu",
    GPU_XID: "gpu",
    NVLINK_DEGRADED: "gpu",
    NIC_PORT_DOWN: "cable",
    LINK_CRC: "cable",
    OPTICAL_FAILING: "cable",
    PFC_STORM: "cable",
    ECMP_HOTSPOT: "cable",
    MISCONFIG_MTU: "nic",
    MISCONFIG_DCQCN: "nic",
    CPU_CONTENTION: "host",
}
"""What a fault's component id counts: a GPU, a cable (directed link id // 2), a NIC (by its
GPU id) or a host."""


def component_name(kind: str, ident: int) -> str:
    """Canonical component name shared by injection records and diagnoses ('cable:17')."""
    return f"{TARGET_KIND[kind]}:{ident}"


@dataclass(frozen=True)
class Fault:
    """One injected fault: class, component id (see TARGET_KIND), severity in (0, 1], onset."""

    kind: str
    target: int
    severity: float = 0.5
    onset_iter: int = 2

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ConfigError(
                f"fault kind {self.kind!r} is unknown", fix=f"use one of {', '.join(FAULT_KINDS)}"
            )
        if not 0.0 < self.severity <= 1.0:
            raise ConfigError(f"fault severity {self.severity} is outside (0, 1]", fix="use 0.5")
        if self.target < 0 or self.onset_iter < 0:
            raise ConfigError(f"fault {self.kind}: target/onset must be >= 0", fix="check ids")

    @property
    def component(self) -> str:
        """Canonical component name ('gpu:12', 'cable:40', 'nic:3', 'host:7')."""
        return component_name(self.kind, self.target)


def truth_path(db: Path) -> Path:
    """Where the injection record of a telemetry database lives (read only by evaluate)."""
    return db.with_suffix(".truth.json")


def write_truth(db: Path, faults: list[Fault]) -> Path:
    """Write the injection record next to the database; returns its path."""
    p = truth_path(db)
    p.write_text(json.dumps([asdict(f) for f in faults], indent=1))
    return p


def read_truth(db: Path) -> list[Fault]:
    """Read an injection record written by `write_truth`."""
    p = truth_path(db)
    try:
        rows = json.loads(p.read_text())
        return [Fault(**r) for r in rows]
    except (OSError, ValueError, TypeError) as e:
        raise DataError(f"{p}: cannot read the injection record ({e})", fix="re-run synth") from e


def parse_fault(text: str) -> Fault:
    """Parse 'KIND:TARGET[:SEVERITY[:ONSET_ITER]]' (e.g. 'link_crc:1234:0.7:2') into a Fault."""
    parts = text.split(":")
    if len(parts) < 2 or len(parts) > 4:
        raise ConfigError(
            f"--fault {text!r} is not KIND:TARGET[:SEVERITY[:ONSET]]",
            fix="e.g. gpu_throttle:17:0.6",
        )
    try:
        target = int(parts[1])
        sev = float(parts[2]) if len(parts) > 2 else 0.6
        onset = int(parts[3]) if len(parts) > 3 else 2
    except ValueError:
        raise ConfigError(
            f"--fault {text!r}: target and onset must be integers, severity a number",
            fix="e.g. link_crc:1234:0.7:2",
        ) from None
    return Fault(parts[0], target, sev, onset)
