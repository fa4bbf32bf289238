"""Astral monitor: four-layer telemetry (DuckDB), fault synthesis, cross-layer localization.

synth writes what each layer would see of a training job with faults in its physics; ingest
reads real formats; localize finds root causes from the store alone; evaluate scores it.
"""

from starfabric.astral.monitor.cluster import build_cluster, cluster_for, seer_baseline
from starfabric.astral.monitor.evaluate import (
    Scenario,
    ScenarioResult,
    evaluate,
    run_scenario,
    scenarios,
)
from starfabric.astral.monitor.faults import FAULT_KINDS, Fault, read_truth, write_truth
from starfabric.astral.monitor.ingest import INGEST_KINDS, detect_kind, ingest_path
from starfabric.astral.monitor.localize import Cause, Diagnosis, diagnose
from starfabric.astral.monitor.schema import LAYER_OF, TABLES
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.monitor.synth import SynthSpec, synth_to_file, synthesize

__all__ = [
    "FAULT_KINDS",
    "INGEST_KINDS",
    "LAYER_OF",
    "TABLES",
    "Cause",
    "Diagnosis",
    "Fault",
    "Scenario",
    "ScenarioResult",
    "SynthSpec",
    "TelemetryStore",
    "build_cluster",
    "cluster_for",
    "detect_kind",
    "diagnose",
    "evaluate",
    "ingest_path",
    "read_truth",
    "run_scenario",
    "scenarios",
    "seer_baseline",
    "synth_to_file",
    "synthesize",
    "write_truth",
]
