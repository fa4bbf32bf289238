"""Software-centric baselines of Fornax, built from the same manager with different knobs.

`SoftwareCentric(engine, policy, ovs_like())` is an OVS-like controller, `doca_like()` a
DOCA-Flow-CT-like one, `fornax()` the Fornax manager's behaviour and `ablation(knob)` Fornax
with one knob flipped; all satisfy `ControlPlane`.
"""

from starfabric.fornax.baselines.config import (
    ABLATIONS,
    BUILTIN_OVS_CONSTANTS,
    MODELLED,
    NOT_MODELLED,
    OVS_CALIBRATION_VERSION,
    OVS_DP_FLOWS_PER_MODEL_FLOW,
    OVS_DUMP_NS_PER_FLOW,
    OVS_HOST_BASE_BYTES,
    OVS_HOST_BYTES_PER_FLOW,
    OVS_MAX_IDLE_S,
    OVS_MAX_REVALIDATOR_S,
    OVS_OFFLOADED_STATS_DELAY_S,
    OVS_REVALIDATE_NS_PER_FLOW,
    PRESETS,
    RESCAN_FLOWS_PER_THREAD_S,
    RESCAN_THREADS,
    FlowLimitConfig,
    OvsConstants,
    SoftwareCentricConfig,
    ablation,
    doca_like,
    fornax,
    ovs_like,
    software_centric_config,
)
from starfabric.fornax.baselines.controller import (
    BASELINE_ACTIVITIES,
    SoftwareCentric,
    make_control_plane,
)
from starfabric.fornax.baselines.engines import DelegatingEngine, PerDirectionEngine
from starfabric.fornax.baselines.flowlimit import DynamicFlowLimit
from starfabric.fornax.baselines.mirror import (
    OVS_UKEY_BYTES,
    UKEY_DTYPE,
    FlowMirror,
    MirroredEngine,
)
from starfabric.fornax.baselines.ovs_calibration import (
    BUILTIN_CALIBRATION,
    CALIBRATION_FORMAT,
    OvsCalibration,
    load_ovs_calibration,
)
from starfabric.fornax.baselines.protocol import ControlPlane

__all__ = [
    "ABLATIONS",
    "BASELINE_ACTIVITIES",
    "BUILTIN_CALIBRATION",
    "BUILTIN_OVS_CONSTANTS",
    "CALIBRATION_FORMAT",
    "MODELLED",
    "NOT_MODELLED",
    "OVS_CALIBRATION_VERSION",
    "OVS_DP_FLOWS_PER_MODEL_FLOW",
    "OVS_DUMP_NS_PER_FLOW",
    "OVS_HOST_BASE_BYTES",
    "OVS_HOST_BYTES_PER_FLOW",
    "OVS_MAX_IDLE_S",
    "OVS_MAX_REVALIDATOR_S",
    "OVS_OFFLOADED_STATS_DELAY_S",
    "OVS_REVALIDATE_NS_PER_FLOW",
    "OVS_UKEY_BYTES",
    "PRESETS",
    "RESCAN_FLOWS_PER_THREAD_S",
    "RESCAN_THREADS",
    "UKEY_DTYPE",
    "ControlPlane",
    "DelegatingEngine",
    "DynamicFlowLimit",
    "FlowLimitConfig",
    "FlowMirror",
    "MirroredEngine",
    "OvsCalibration",
    "OvsConstants",
    "PerDirectionEngine",
    "SoftwareCentric",
    "SoftwareCentricConfig",
    "ablation",
    "doca_like",
    "fornax",
    "load_ovs_calibration",
    "make_control_plane",
    "ovs_like",
    "software_centric_config",
]
