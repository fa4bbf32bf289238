"""SoftwareCentricConfig: the knobs that turn the one controller family into Fornax, an
OVS-like or a DOCA-like software-centric manager, or a one-knob ablation of Fornax.

Facts cite /work/shared/reference/fornax.md (OVS `ofproto-dpif-upcall.c` defaults and the
`other_config` options of ovs-vswitchd.conf.db(5)); everything else says "assumption".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from starfabric.config import Spec, parse_spec
from starfabric.errors import ConfigError

#: OVS `other_config:max-revalidator` default (ms -> s): the revalidators' longest sleep [fact].
OVS_MAX_REVALIDATOR_S = 0.5
#: OVS `other_config:max-idle` default (ms -> s): a datapath flow idle this long is deleted [fact].
OVS_MAX_IDLE_S = 10.0
#: OVS `other_config:offloaded-stats-delay` default (s): hardware counters reach software late.
OVS_OFFLOADED_STATS_DELAY_S = 2.0
#: Flows one revalidator thread re-evaluates per second after a policy change (assumption:
#: ~20 us per flow for the ukey lookup, xlate of the flow's OpenFlow pipeline, comparing the
#: actions and the modify; reference/fornax.md gives no figure). With RESCAN_THREADS it makes
#: 200k flows/s, the dump rate FlowLimitConfig.dump_ns_per_flow already assumes.
RESCAN_FLOWS_PER_THREAD_S = 50000.0
#: Revalidator threads (assumption: a 12-core host; OVS's default n-revalidator-threads is
#: cores / 4 + 1 = 4 there, ovs-vswitchd.conf.db(5)).
RESCAN_THREADS = 4

#: The OVS release the OVS-like preset's calibration was measured on (benchmarks/ovs_real.py:
#: Debian's openvswitch-switch, userspace datapath, `upcall/disable-megaflows` so every
#: datapath flow is exact-match as the model's per-direction flows are; docs/fornax-experiments.md).
OVS_CALIBRATION_VERSION = (
    "Open vSwitch 3.1.0 (Debian 3.1.0-2+deb12u1), netdev datapath, exact-match flows"
)
#: Datapath flows a real exact-match OVS holds per model flow (one direction of a connection):
#: one before and one after the ct() recirculation (their recirc_id and ct_state differ) [fact
#: of the pipeline; measured: 4.00 datapath flows per connection held].
OVS_DP_FLOWS_PER_MODEL_FLOW = 2
#: The calibration run [OVS_CALIBRATION_VERSION], 2026-12-01 16:34 UTC: scenario.run at N = 10k,
#: 25k, 50k, 100k, 200k (docs/results/ovs-real-calibration.json; `benchmarks/ovs_real.py --mode
#: exact --levels 10000,25000,50000,100000,200000 --no-uncalibrated` runs the same), 1,000 CPS,
#: max-idle 20 s, keep-alives every 8 s, 2 revalidator threads, flow-limit 4M, the daemons'
#: autogroup at nice -10 and 8 MiB port-socket buffers (ovs_real/instance.py), the shared
#: 2-core VM at load 7.5-11. Every level held (100% of the keep-alives delivered, no port-socket
#: drops, 4.00 datapath flows per connection, the flow limit never shrank). Every constant below
#: is a least-squares fit (ovs_cost.fit) over 10k, 50k and 200k, never one level; 25k and 100k
#: are held out: model/real there 0.96 / 0.98 (bytes) and 1.11 / 1.10 (revalidator CPU).
#: (The first calibration, on the same VM before the autogroup and buffer fixes, had the
#: daemons starved: dumps 2.7x slower, 75k-100k not held.)
#: Host bytes per live model flow: the slope of ovs-vswitchd's RSS growth (over its RSS with zero
#: flows) on the model's flows (2 per connection held). It covers 2 datapath flows: their
#: udpif_keys, dp_netdev_flows and dpcls rules, the conntrack entry's half, glibc's overhead.
#: Fit residual at most 22% (10k, where the base dominates).
OVS_HOST_BYTES_PER_FLOW = 7501.0
#: Host bytes charged once any flow is live: the intercept of the same fit. RSS keeps the
#: high-water of the setup's short-lived exact-match flows (SYN, SYN-ACK, data: 10 datapath
#: flows per TCP setup, 8 of them gone after max-idle; measured flows_max - flows: 6.2 per
#: connection of the 3:1 TCP:UDP mix), so the base follows the setup rate x max-idle (1,000 CPS
#: x 20 s here; another rate moves it, which the model does not follow).
OVS_HOST_BASE_BYTES = 295.0e6
#: Revalidator thread CPU per model flow and pass: the fit (through zero) of revalidator CPU/s x
#: the pass interval, max(500 ms, dump duration), on the measured datapath flows / 2; fit
#: residual at most 3% (0.70 us per datapath flow).
OVS_REVALIDATE_NS_PER_FLOW = 1432.0
#: Wall time of a dump per model flow: the fit (through zero) of the median dump duration (2
#: revalidator threads; residual up to 10%). It sets the preset's FlowLimitConfig.dump_ns_per_flow,
#: so the pass interval and the dynamic flow limit follow it (a 200k-connection table, 400k
#: model flows, dumps in 0.57 s: below the 1.3 s at which OVS shrinks the limit).
OVS_DUMP_NS_PER_FLOW = 1424.0


class OvsConstants(Spec):
    """The four constants the OVS-like preset takes from a real ovs-vswitchd (ovs_cost.fit over
    the levels of a benchmarks/ovs_real.py run): per model flow, on the machine measured. The
    built-in ones are OVS_HOST_BASE_BYTES, OVS_HOST_BYTES_PER_FLOW, OVS_REVALIDATE_NS_PER_FLOW
    and OVS_DUMP_NS_PER_FLOW; `--ovs-calibration FILE` gives another machine's
    (baselines/ovs_calibration.py)."""

    host_base_bytes: float = Field(
        ge=0,
        le=2.0**40,
        description="host bytes charged once any flow is live (the RSS fit's intercept); "
        "at most 1 TiB (a larger one is no measurement of one process)",
    )
    host_bytes_per_flow: float = Field(
        gt=0, le=2.0**30, description="host bytes per live model flow; at most 1 GiB"
    )
    revalidate_ns_per_flow: float = Field(
        gt=0, le=1e9, description="revalidator thread CPU per model flow and pass, ns; at most 1 s"
    )
    dump_ns_per_flow: float = Field(
        gt=0, le=1e9, description="a dump's wall time per model flow, ns; at most 1 s"
    )


BUILTIN_OVS_CONSTANTS = OvsConstants(
    host_base_bytes=OVS_HOST_BASE_BYTES,
    host_bytes_per_flow=OVS_HOST_BYTES_PER_FLOW,
    revalidate_ns_per_flow=OVS_REVALIDATE_NS_PER_FLOW,
    dump_ns_per_flow=OVS_DUMP_NS_PER_FLOW,
)
"""The OVS-like preset's calibration measured on the project's machine (OVS_CALIBRATION_VERSION)."""


class FlowLimitConfig(Spec):
    """OVS's dynamic datapath flow limit (udpif_revalidator in ofproto-dpif-upcall.c) [facts],
    with the dump duration taken on the simulated clock (`dump_ns_per_flow`, assumption)."""

    start: int = Field(10000, ge=1, description="initial dynamic limit (OVS: 10000) [fact]")
    maximum: int = Field(
        200000, ge=1, description="ceiling, OVS other_config:flow-limit default 200000 [fact]"
    )
    minimum: int = Field(1000, ge=1, description="floor of the dynamic limit (OVS: 1000) [fact]")
    grow: int = Field(1000, ge=1, description="growth after a fast dump (OVS: +1000) [fact]")
    slow_dump_s: float = Field(
        2.0, gt=0, description="dump slower than this: limit /= duration in s (OVS: 2 s) [fact]"
    )
    shrink_dump_s: float = Field(
        1.3, gt=0, description="dump slower than this: limit *= 3/4 (OVS: 1.3 s) [fact]"
    )
    fast_dump_s: float = Field(
        1.0, gt=0, description="dump faster than this may grow the limit (OVS: 1 s) [fact]"
    )
    idle_above_limit_s: float = Field(
        0.1, gt=0, description="idle timeout while flows exceed the limit (OVS: 100 ms) [fact]"
    )
    flush_factor: float = Field(
        2.0, gt=1, description="flows above factor x limit: flush all flows (OVS: 2) [fact]"
    )
    dump_ns_per_flow: float = Field(
        5000.0,
        gt=0,
        description="simulated dump time per datapath flow (assumption: ~200k offloaded flows "
        "dumped per second by the revalidator threads, so a 200k table dumps in ~1 s)",
    )

    @model_validator(mode="after")
    def _order(self) -> FlowLimitConfig:
        if not self.minimum <= self.start <= self.maximum:
            raise ValueError(
                f"need minimum <= start <= maximum, got {self.minimum}, {self.start}, "
                f"{self.maximum}"
            )
        if not self.fast_dump_s <= self.shrink_dump_s <= self.slow_dump_s:
            raise ValueError("need fast_dump_s <= shrink_dump_s <= slow_dump_s")
        return self


class SoftwareCentricConfig(Spec):
    """How the controller manages sessions (see the module docstring); defaults are Fornax."""

    entries: Literal["bidirectional", "per_direction"] = Field(
        "bidirectional",
        description="one engine entry per connection (Fornax, DOCA CT) or one per direction "
        "(OVS datapath flows: two per connection) [fact, reference/fornax.md]",
    )
    aging: Literal["events", "poll", "revalidate"] = Field(
        "events",
        description="hardware ages and raises AGED/CLOSED events (Fornax); a software thread "
        "polls every connection's counters (DOCA-like); revalidators dump every flow (OVS)",
    )
    policy: Literal["versions", "rescan"] = Field(
        "versions",
        description="O(1) scope-version bumps (Fornax) or software re-evaluates every flow of "
        "an affected scope and modifies/deletes entries (software-centric)",
    )
    mirror: Literal["none", "full"] = Field(
        "none", description="no per-flow software state (Fornax) or an OVS udpif_key mirror"
    )
    flow_limit: FlowLimitConfig | None = Field(
        None, description="OVS dynamic flow limit; None: no limit beyond the table itself"
    )
    stats_lag_s: float = Field(
        0.0,
        ge=0,
        description="hardware counters visible to software only at this period (OVS "
        "offloaded-stats-delay: 2 s) [fact]; 0: current counters",
    )
    poll_period_s: float = Field(
        1.0,
        gt=0,
        description="period of the DOCA-like aging thread's pass over every connection "
        "(assumption: 1 s, the granularity of DOCA Flow aging timeouts)",
    )
    revalidate_period_s: float | None = Field(
        None,
        gt=0,
        description="period of the revalidators' full dump; None: min(idle timeout, "
        "max-revalidator 0.5 s) as OVS [fact]",
    )
    idle_timeout_s: float | None = Field(
        None,
        gt=0,
        description="software aging's idle timeout; None: the engine's timeout classes (TCP "
        "state, UDP, ICMP, other) as hardware aging uses; OVS: max-idle 10 s [fact]",
    )
    chunk: int = Field(
        65536, ge=1, description="entries per dump call of a software pass (assumption)"
    )
    host_bytes_per_flow: float | None = Field(
        None,
        gt=0,
        description="software bytes charged per live mirrored flow (a calibration to a "
        "measured ovs-vswitchd: OVS_HOST_BYTES_PER_FLOW); None: the mirror's measured numpy "
        "bytes (records and index)",
    )
    host_base_bytes: float = Field(
        0.0,
        ge=0,
        description="software bytes charged once any mirrored flow is live, with "
        "host_bytes_per_flow (a calibration: OVS_HOST_BASE_BYTES, the setup's high-water)",
    )
    revalidate_ns_per_flow: float | None = Field(
        None,
        gt=0,
        description="management CPU charged per dumped flow of a revalidator pass in place of "
        "the pass's measured thread time (a calibration: OVS_REVALIDATE_NS_PER_FLOW); None: "
        "the measured thread time",
    )
    rescan_flows_per_thread_s: float = Field(
        RESCAN_FLOWS_PER_THREAD_S,
        gt=0,
        description="flows (hardware entries) one thread re-evaluates per simulated second "
        "after a policy change with policy=rescan (assumption, see RESCAN_FLOWS_PER_THREAD_S); "
        "entries not reached yet keep forwarding with their old actions; inf: instantaneous",
    )
    rescan_threads: int = Field(
        RESCAN_THREADS,
        ge=1,
        description="threads re-evaluating in parallel (assumption: OVS n-revalidator-threads "
        "on a 12-core host)",
    )
    rescan_chunk: int = Field(
        1024,
        ge=1,
        description="flows re-evaluated per step of the simulated rescan (assumption: a "
        "simulation granularity; each chunk is applied at the simulated time its first flow "
        "is reached, so an entry is fixed up to rescan_chunk / rate early, in the baseline's "
        "favour)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SoftwareCentricConfig:
        if self.stats_lag_s > 0 and self.mirror != "full":
            raise ValueError(
                f"stats_lag_s = {self.stats_lag_s} needs mirror = 'full' (lagged counters are "
                "kept in the mirror's stats); set stats_lag_s: 0 or mirror: full"
            )
        if self.stats_lag_s > 0 and self.aging != "revalidate":
            raise ValueError(
                f"stats_lag_s = {self.stats_lag_s} is read by revalidators only; use "
                "aging: revalidate or stats_lag_s: 0"
            )
        if self.host_base_bytes and self.host_bytes_per_flow is None:
            raise ValueError(
                "host_base_bytes is charged with host_bytes_per_flow; set both or neither"
            )
        if self.host_bytes_per_flow is not None and self.mirror != "full":
            raise ValueError(
                "host_bytes_per_flow charges the mirror's flows; use mirror: full or "
                "host_bytes_per_flow: null"
            )
        if self.revalidate_ns_per_flow is not None and self.aging != "revalidate":
            raise ValueError(
                "revalidate_ns_per_flow charges revalidator passes; use aging: revalidate or "
                "revalidate_ns_per_flow: null"
            )
        if self.flow_limit is not None and self.aging != "revalidate":
            raise ValueError(
                "flow_limit is enforced by revalidators (dump duration, idle timeout, flush); "
                "use aging: revalidate or flow_limit: null"
            )
        return self

    @property
    def entries_per_connection(self) -> int:
        return 2 if self.entries == "per_direction" else 1

    def rescan_flows_per_s(self) -> float:
        """Flows re-evaluated per simulated second by a rescan: per thread x threads."""
        return self.rescan_flows_per_thread_s * self.rescan_threads

    def period_s(self) -> float:
        """Seconds between two software aging passes (poll or revalidate)."""
        if self.aging == "poll":
            return self.poll_period_s
        if self.revalidate_period_s is not None:
            return self.revalidate_period_s
        idle = self.idle_timeout_s if self.idle_timeout_s is not None else OVS_MAX_IDLE_S
        return min(idle, OVS_MAX_REVALIDATOR_S)


def software_centric_config(
    data: dict[str, Any], source: str = "baseline"
) -> SoftwareCentricConfig:
    """Validate a mapping; a bad field is a one-line ConfigError naming it."""
    return parse_spec(SoftwareCentricConfig, data, source=source)


def fornax() -> SoftwareCentricConfig:
    """Fornax: bidirectional entries, hardware events, O(1) versions, no per-flow mirror."""
    return SoftwareCentricConfig()


def ovs_like(
    calibrated: bool = True, constants: OvsConstants | None = None
) -> SoftwareCentricConfig:
    """Open vSwitch with hardware offload: per-direction flows, udpif_key mirror, revalidators
    every min(max-idle, 500 ms) or back to back when a dump takes longer, dynamic flow limit,
    2 s offloaded-stats delay, rescan; with `calibrated`, host bytes (base + per flow),
    revalidator CPU per flow and pass and the dump time per flow as fitted to a real
    ovs-vswitchd: `constants` (another machine's, ovs_calibration.py) or the built-in ones
    (BUILTIN_OVS_CONSTANTS, OVS_CALIBRATION_VERSION); else the mirror's numpy bytes, its
    measured thread time and the assumed dump_ns_per_flow."""
    cal: dict[str, Any] = {}
    limit = FlowLimitConfig()
    if calibrated:
        c = constants if constants is not None else BUILTIN_OVS_CONSTANTS
        cal = {"host_bytes_per_flow": c.host_bytes_per_flow,
               "host_base_bytes": c.host_base_bytes,
               "revalidate_ns_per_flow": c.revalidate_ns_per_flow}  # fmt: skip
        limit = FlowLimitConfig(dump_ns_per_flow=c.dump_ns_per_flow)
    elif constants is not None:
        raise ConfigError(
            "ovs_like(calibrated=False) takes no calibration constants",
            fix="drop the constants or use calibrated=True",
        )
    return SoftwareCentricConfig(
        **cal,
        entries="per_direction",
        aging="revalidate",
        policy="rescan",
        mirror="full",
        flow_limit=limit,
        stats_lag_s=OVS_OFFLOADED_STATS_DELAY_S,
        idle_timeout_s=OVS_MAX_IDLE_S,
    )


def doca_like() -> SoftwareCentricConfig:
    """NVIDIA DOCA Flow CT-like: bidirectional entries, a software aging thread polling every
    connection's counters, software-driven policy re-evaluation; no per-flow mirror."""
    return SoftwareCentricConfig(aging="poll", policy="rescan")


def ablation(knob: str) -> SoftwareCentricConfig:
    """Fornax with one knob flipped: per_direction | no_events | no_versions | full_mirror."""
    flips: dict[str, dict[str, Any]] = {
        "per_direction": {"entries": "per_direction"},
        "no_events": {"aging": "poll"},
        "no_versions": {"policy": "rescan"},
        "full_mirror": {"mirror": "full"},
    }
    if knob not in flips:
        raise ConfigError(
            f"ablation = {knob!r} is not a knob of Fornax", fix=f"use one of {sorted(flips)}"
        )
    return SoftwareCentricConfig(**flips[knob])


ABLATIONS = ("per_direction", "no_events", "no_versions", "full_mirror")

#: What the baselines model, by preset (for docs and experiment reports).
MODELLED = {
    "ovs_like": (
        "two exact-match hardware entries per connection (one datapath flow per direction)",
        "a udpif_key-like software record per flow: ufid, netlink key and mask, actions, "
        "stats, policy reference, dump sequence, state (mirror.py); software bytes charged at "
        "OVS_HOST_BASE_BYTES + OVS_HOST_BYTES_PER_FLOW per flow and revalidator CPU at "
        "OVS_REVALIDATE_NS_PER_FLOW per flow and pass, fitted to a real ovs-vswitchd "
        "(ovs_cost.py; ovs_like(calibrated=False): the records' numpy bytes and the passes' "
        "thread time)",
        "revalidators dumping every flow each min(max-idle, 500 ms), or back to back when a "
        "dump (OVS_DUMP_NS_PER_FLOW per flow) takes longer, comparing counters, "
        "deleting idle flows, creating missing ukeys and sweeping ukeys of vanished flows",
        "the dynamic flow limit (start 10k, max 200k, shrink on slow dumps, +1000 on fast "
        "ones, 100 ms idle above the limit, flush above 2x); refused flows forwarded in software",
        "offloaded-stats-delay: counters reach software at most every 2 s",
        "policy change: every flow of the affected scopes re-evaluated, then modify/delete, "
        "at 4 threads x 50k flows/s on the simulated clock: flows not reached yet keep "
        "forwarding with their old actions (the stale window)",
    ),
    "doca_like": (
        "one bidirectional hardware entry per connection",
        "a software aging thread reading every connection's counters each poll period",
        "policy change: software re-evaluates every connection of the affected scopes at the "
        "same rescan rate; connections not reached yet forward with their old actions",
    ),
}

#: What the family does NOT model (each a simplification, stated so results are read right).
NOT_MODELLED = (
    "megaflow wildcarding: OVS flows here are exact-match, one per direction of a connection",
    "a conntrack table apart from the flows: each per-direction entry tracks TCP state as if "
    "its direction were ORIGINAL, so a REPLY-direction SYN on a CLOSE/TIME_WAIT connection "
    "reopens it (nf_conntrack calls it invalid and keeps the actions); random-flag traffic "
    "hits this, generated workloads do not (the per-direction differential tests use them)",
    "upcall handlers and OpenFlow translation (xlate): every contender uses Fornax's batched "
    "miss path and policy evaluation, so only the management differences are measured",
    "the load of the host's cores: the calibrated dump time per flow (OVS_DUMP_NS_PER_FLOW) "
    "is the wall time measured on a shared 2-core VM, and the pass interval and the dynamic "
    "flow limit follow it",
    "OVS's recirculation after ct(): a real exact-match OVS holds 4 datapath flows per "
    "connection (OVS_DP_FLOWS_PER_MODEL_FLOW x 2), the model 2; the calibrated constants are "
    "per model flow",
    "the setup rate's effect on RSS: OVS_HOST_BASE_BYTES is the high-water the setup's "
    "short-lived flows leave at 1,000 CPS; another rate moves it (about rate x max-idle x 6 "
    "datapath flows)",
    "the driver's stats sync costs nothing to management (first tick after each lag boundary)",
    "DOCA polling reads counters by dump chunks, not per-connection queries",
    "rescan operations are never deferred by the setup budget (the rescan's own rate, "
    "rescan_flows_per_thread_s x rescan_threads, makes the stale window), and their "
    "per-direction conversions count as engine emulation: both in the baselines' favour",
    "a policy change during a rescan queues its flows behind the rest (OVS restarts a "
    "revalidation round); the rescan rate does not slow down under setup load",
    "software-resident sessions (above the flow limit, table full) age by the engine's "
    "timeout classes in every preset",
    "with software aging the engine's scrub does not run, so its ECC checks and watchdog "
    "ticks do not either (fault tolerance is Fornax's, not the baselines')",
)
PRESETS = {"fornax": fornax, "ovs_like": ovs_like, "doca_like": doca_like}
