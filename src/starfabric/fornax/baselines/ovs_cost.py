"""What the OVS-like baseline charges for its flows, as functions of the table, calibrated to a
real ovs-vswitchd (issue 20; constants in config.py, OVS_CALIBRATION_VERSION):

- host bytes = base + bytes per flow x flows (once any flow is live): ovs-vswitchd's RSS grows
  affinely with the live table; the base is what the setup leaves behind (glibc keeps the
  high-water of the setup's short-lived exact-match flows, rate x max-idle of them);
- dump duration = ns per flow x flows (the revalidators' wall time for one dump);
- revalidator passes per second = 1 / max(max-revalidator, dump duration): OVS's leader starts
  the next dump max-revalidator (500 ms) after the last one started, or at once if that one took
  longer (udpif_revalidator, ofproto-dpif-upcall.c) [fact];
- revalidator CPU per second = passes per second x ns per flow x flows.

"Flows" are the model's (one per direction of a connection); a real exact-match OVS holds
OVS_DP_FLOWS_PER_MODEL_FLOW datapath flows for each (before and after the ct() recirculation),
so every per-flow constant is per model flow. `fit` derives the constants from the levels of a
benchmarks/ovs_real.py run (least squares over every level that held, never one level).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from starfabric.fornax.baselines.config import OVS_MAX_REVALIDATOR_S, SoftwareCentricConfig


def host_bytes(cfg: SoftwareCentricConfig, flows: int) -> float | None:
    """Host bytes of `flows` live model flows; None where the baseline is not calibrated."""
    if cfg.host_bytes_per_flow is None:
        return None
    return 0.0 if flows <= 0 else cfg.host_base_bytes + cfg.host_bytes_per_flow * flows


def dump_s(cfg: SoftwareCentricConfig, flows: int) -> float:
    """Wall time of one revalidator dump of `flows` model flows (FlowLimitConfig's rate)."""
    per = cfg.flow_limit.dump_ns_per_flow if cfg.flow_limit is not None else 0.0
    return flows * per / 1e9


def pass_interval_s(cfg: SoftwareCentricConfig, flows: int) -> float:
    """Seconds from one revalidator pass's start to the next: the period, or the dump if longer."""
    return max(cfg.period_s(), dump_s(cfg, flows))


def revalidator_cpu_per_s(cfg: SoftwareCentricConfig, flows: int) -> float | None:
    """Revalidator CPU seconds per second with `flows` live model flows (closed form)."""
    if cfg.revalidate_ns_per_flow is None:
        return None
    return flows * cfg.revalidate_ns_per_flow / 1e9 / pass_interval_s(cfg, flows)


@dataclass(frozen=True)
class LevelFigures:
    """One measured level of a real OVS run, as `fit` needs it."""

    connections: int  # held (conntrack entries of the level's connections)
    dp_flows: int  # datapath flows in the measured window
    rss_growth_bytes: int  # RSS over the zero-flow RSS
    revalidator_cpu_per_s: float
    dump_ms: float  # median dump duration in the window


@dataclass(frozen=True)
class Calibration:
    """Per model flow constants fitted over several levels, and how well they fit."""

    host_base_bytes: float
    host_bytes_per_flow: float
    revalidate_ns_per_flow: float
    dump_ns_per_flow: float
    levels: tuple[int, ...]
    worst_residual: dict[str, float]  # max |fit / measured - 1| over the levels


def fit(levels: Sequence[LevelFigures], dp_flows_per_model_flow: float) -> Calibration:
    """Least squares over every level (at least two): bytes on model flows (2 per connection
    held: RSS keeps its high-water, so flows a lost keep-alive let idle out still count), with
    an intercept; dump time and CPU per pass on the measured flows, through the origin."""
    if len(levels) < 2:
        raise ValueError(f"fit needs at least two levels, got {len(levels)}")
    mflows = np.array([2.0 * lv.connections for lv in levels])
    rss = np.array([float(lv.rss_growth_bytes) for lv in levels])
    slope, base = np.polyfit(mflows, rss, 1)
    f = np.array([lv.dp_flows / dp_flows_per_model_flow for lv in levels])
    dump_s_ = np.array([lv.dump_ms / 1e3 for lv in levels])
    dump_per = float(f @ dump_s_ / (f @ f))
    interval = np.maximum(OVS_MAX_REVALIDATOR_S, dump_s_)
    per_pass = np.array([lv.revalidator_cpu_per_s for lv in levels]) * interval
    cpu_per = float(f @ per_pass / (f @ f))
    worst = {
        "host_bytes": float(np.max(np.abs((base + slope * mflows) / rss - 1))),
        "dump": float(np.max(np.abs(dump_per * f / np.maximum(dump_s_, 1e-9) - 1))),
        "revalidator_cpu_per_pass": float(np.max(np.abs(cpu_per * f / per_pass - 1))),
    }
    return Calibration(float(base), float(slope), cpu_per * 1e9, dump_per * 1e9,
                       tuple(lv.connections for lv in levels), worst)  # fmt: skip


__all__ = ["Calibration", "LevelFigures", "dump_s", "fit", "host_bytes", "pass_interval_s",
           "revalidator_cpu_per_s"]  # fmt: skip
