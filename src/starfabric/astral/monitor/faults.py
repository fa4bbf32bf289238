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
# gray classes: slow components that no error counter names
LINK_DEGRADED = "link_degraded"
GPU_SLOW = "gpu_slow"
LINK_FLAPPING = "link_flapping"
NVLINK_SLOW_PEER = "nvlink_slow_peer"
PORT_CONGESTED = "port_congested"
# confounders: slowdowns that are not hardware faults
DATALOADER_STALL = "dataloader_stall"
CHECKPOINT_PAUSE = "checkpoint_pause"
CONFIG_SLOWDOWN = "config_slowdown"
MOE_IMBALANCE = "moe_imbalance"

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

GRAY_KINDS: tuple[str, ...] = (
    LINK_DEGRADED,
    GPU_SLOW,
    LINK_FLAPPING,
    NVLINK_SLOW_PEER,
    PORT_CONGESTED,
)
"""Gray failures fleets report (issue 18): a link or NIC port losing bandwidth without errors, a
GPU slow from HBM or clock without a throttle bit, a flapping link, a slow NVLink peer, a switch
port congested by a neighbouring job's traffic."""

CONFOUNDER_KINDS: tuple[str, ...] = (
    DATALOADER_STALL,
    CHECKPOINT_PAUSE,
    CONFIG_SLOWDOWN,
    MOE_IMBALANCE,
)
"""Slowdowns with no hardware cause: a data-loader stall on one rank, a checkpoint pause on all
ranks, a job-wide slowdown from a configuration change, stragglers from uneven MoE routing."""

ALL_KINDS: tuple[str, ...] = FAULT_KINDS + GRAY_KINDS + CONFOUNDER_KINDS

SIGNATURES: tuple[str, ...] = ("on", "partial", "off")
"""How much of a fault's physical signature its counters show: all of it, some, none."""
SIGNATURE_SCALE: dict[str, float] = {"on": 1.0, "partial": 0.3, "off": 0.0}
"""Assumption: share of each continuous physical signature (counter excess over the fleet-typical
rate, DDM/clock/temperature/CPU deviation) a fault shows. Binary signatures (throttle bits, Xid
lines, link state, NIC configuration) show only when the share is at least BINARY_SHOWN."""
BINARY_SHOWN = 0.5
"""Assumption: binary signatures appear at signature 'on' only ('partial' keeps them hidden)."""

HARDWARE = frozenset({"gpu", "cable", "nic", "host"})
"""Component kinds that are hardware (a cause elsewhere — 'rank', 'job' — is not)."""

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
    LINK_DEGRADED: "cable",
    GPU_SLOW: "gpu",
    LINK_FLAPPING: "cable",
    NVLINK_SLOW_PEER: "gpu",
    PORT_CONGESTED: "cable",
    DATALOADER_STALL: "rank",
    CHECKPOINT_PAUSE: "job",
    CONFIG_SLOWDOWN: "job",
    MOE_IMBALANCE: "job",
}
"""What a fault's component id counts: a GPU, a cable (directed link id // 2), a NIC (by its
GPU id), a host, a rank (application process) or the whole job."""


def component_name(kind: str, ident: int) -> str:
    """Canonical component name shared by injection records and diagnoses ('cable:17')."""
    return f"{TARGET_KIND[kind]}:{ident}"


@dataclass(frozen=True)
class Fault:
    """One injected fault: class, component id (see TARGET_KIND), severity in (0, 1], onset,
    and how much of its physical signature the counters show ('on', 'partial', 'off')."""

    kind: str
    target: int
    severity: float = 0.5
    onset_iter: int = 2
    signature: str = "on"

    def __post_init__(self) -> None:
        if self.kind not in ALL_KINDS:
            raise ConfigError(
                f"fault kind {self.kind!r} is unknown", fix=f"use one of {', '.join(ALL_KINDS)}"
            )
        if self.signature not in SIGNATURES:
            raise ConfigError(
                f"fault {self.kind}: signature {self.signature!r} is unknown",
                fix=f"use one of {', '.join(SIGNATURES)}",
            )
        if not 0.0 < self.severity <= 1.0:
            raise ConfigError(f"fault severity {self.severity} is outside (0, 1]", fix="use 0.5")
        if self.target < 0 or self.onset_iter < 0:
            raise ConfigError(f"fault {self.kind}: target/onset must be >= 0", fix="check ids")

    @property
    def component(self) -> str:
        """Canonical component name ('gpu:12', 'cable:40', 'nic:3', 'host:7', 'job:0')."""
        return component_name(self.kind, self.target)

    @property
    def hardware(self) -> bool:
        """Whether the fault is in hardware (confounders are not)."""
        return TARGET_KIND[self.kind] in HARDWARE

    @property
    def shown(self) -> float:
        """Share of the physical signature the counters show (SIGNATURE_SCALE)."""
        return SIGNATURE_SCALE[self.signature]

    @property
    def binary_shown(self) -> bool:
        """Whether binary signatures (bits, Xid lines, link state, config) are shown."""
        return self.shown >= BINARY_SHOWN


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
    """Parse 'KIND:TARGET[:SEVERITY[:ONSET_ITER[:SIGNATURE]]]' (e.g. 'link_crc:1234:0.7:2:off')."""
    parts = text.split(":")
    if len(parts) < 2 or len(parts) > 5:
        raise ConfigError(
            f"--fault {text!r} is not KIND:TARGET[:SEVERITY[:ONSET[:SIGNATURE]]]",
            fix="e.g. gpu_throttle:17:0.6 or link_crc:40:0.7:2:off",
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
    return Fault(parts[0], target, sev, onset, parts[4] if len(parts) > 4 else "on")
