"""Seer: operator-level training performance prediction (Astral, SIGCOMM 2025).

Describe a job (model, execution, system), `predict` it, and read the iteration time, its
breakdown, throughput, memory and a Chrome-trace timeline; `validate` compares against
published measured runs, `search` ranks every parallel layout, `calibrate_*` fit efficiencies
from nccl-tests logs and Kineto traces.
"""

from starfabric.astral.seer.calibrate import apply_profile, calibrate_kineto, calibrate_nccl
from starfabric.astral.seer.classes import classes_of, per_class
from starfabric.astral.seer.comm import CommModel, FormulaComm
from starfabric.astral.seer.model import (
    ModelSpec,
    ParamCounts,
    bundled_models,
    from_hf_config,
    load_model,
    param_counts,
)
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, SystemSpec, resolve_layout
from starfabric.astral.seer.peak_memory import PeakRow, read_peaks, seer_memory
from starfabric.astral.seer.predict import Job, JobSpec, Prediction, load_job, make_job, predict
from starfabric.astral.seer.search import SearchResult, search
from starfabric.astral.seer.shipped_configs import ShippedCheck
from starfabric.astral.seer.shipped_configs import check as check_shipped
from starfabric.astral.seer.shipped_defaults import ShippedConfig
from starfabric.astral.seer.shipped_defaults import match as match_shipped_config
from starfabric.astral.seer.simcomm import GroupShape, SimulatedComm, comm_model, megatron_shapes
from starfabric.astral.seer.trace import build_trace, write_trace
from starfabric.astral.seer.validate import validate, validate_all

__all__ = [
    "CommModel",
    "ExecutionSpec",
    "FormulaComm",
    "GroupShape",
    "Job",
    "JobSpec",
    "Layout",
    "ModelSpec",
    "ParamCounts",
    "PeakRow",
    "Prediction",
    "SearchResult",
    "ShippedCheck",
    "ShippedConfig",
    "SimulatedComm",
    "SystemSpec",
    "apply_profile",
    "build_trace",
    "bundled_models",
    "calibrate_kineto",
    "calibrate_nccl",
    "check_shipped",
    "classes_of",
    "comm_model",
    "from_hf_config",
    "load_job",
    "load_model",
    "make_job",
    "match_shipped_config",
    "megatron_shapes",
    "param_counts",
    "per_class",
    "predict",
    "read_peaks",
    "resolve_layout",
    "search",
    "seer_memory",
    "validate",
    "validate_all",
    "write_trace",
]
