"""`predict(job) -> Prediction`: the public entry of Seer.

A job is the three inputs Calculon also separates — application (model), execution (parallel
settings) and system (GPU, cluster) — validated once, compiled into operator tables and
simulated. The Prediction carries iteration time, its breakdown, throughput under the common
FLOP conventions, memory per GPU with an OOM verdict, and the timeline for traces.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.cost import cudnn_release_note as release_note
from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.cudnn_release import parse_release
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.megatron_cli import looks_like_megatron, read_megatron_file
from starfabric.astral.seer.memory import MemoryReport, memory_report
from starfabric.astral.seer.model import ModelSpec, load_model, param_counts
from starfabric.astral.seer.ops import (
    flops_per_token_6nd,
    megatron_model_flops,
    narayanan_hardware_flops,
)
from starfabric.astral.seer.parallel import (
    ExecutionSpec,
    Layout,
    SystemSpec,
    check_system,
    resolve_layout,
)
from starfabric.astral.seer.schedule import Timeline, build_timeline
from starfabric.config import Spec, parse_spec, read_mapping
from starfabric.errors import ConfigError


class JobSpec(Spec):
    """A training job: `model` (bundled name, config path or inline mapping), execution, system."""

    model: str | dict[str, Any]
    execution: ExecutionSpec
    system: SystemSpec = Field(default_factory=lambda: SystemSpec(gpus=8))


@dataclass(frozen=True)
class Job:
    """A validated job with its model resolved."""

    model: ModelSpec
    execution: ExecutionSpec
    system: SystemSpec


def with_cudnn_release(job: Job, text: str) -> Job:
    """`job` with its execution's cudnn_release set to `text` (`seer predict --cudnn`,
    seer/cudnn_release.py); a value that is not MAJOR.MINOR[.PATCH] is refused in one line."""
    try:
        parse_release(text)
    except ValueError as exc:
        raise ConfigError(f"--cudnn {text!r}: {exc}", fix="give --cudnn 9.4 or 9.19.1") from None
    execution = job.execution.model_copy(update={"cudnn_release": text.strip().lstrip("v")})
    return dataclasses.replace(job, execution=execution)


def cudnn_release_note(job: Job) -> str | None:
    """One line saying why the job's cuDNN release (`--cudnn`, execution.cudnn_release) changes
    nothing on its GPU and kernel (cost.cudnn_release_note), else None."""
    return release_note(get_gpu(job.system.gpu), job.execution)


def load_job(path: str | Path, overrides: dict[str, Any] | None = None) -> Job:
    """Read a job YAML/JSON — or a Megatron-LM launch command (a script calling
    pretrain_gpt.py) as model + execution — a relative model path is taken relative to the job
    file; `overrides` (SystemSpec fields) replace or, for a command line, supply the system."""
    if looks_like_megatron(path):
        spec_m = read_megatron_file(path)
        sys_fields = {**spec_m["system"], **(overrides or {})}
        if "gpus" not in sys_fields:
            raise ConfigError(
                f"{path}: the command does not say how many GPUs (no torchrun --nnodes)",
                fix="pass --gpus N (and --gpu NAME) to seer predict",
            )
        return make_job(spec_m["model"], spec_m["execution"], sys_fields)
    data = read_mapping(path)
    if overrides:
        data = {**data, "system": {**(data.get("system") or {}), **overrides}}
    spec = parse_spec(JobSpec, data, source=str(path))
    ref: str | dict[str, Any] = spec.model
    if isinstance(ref, str):
        cand = Path(path).parent / ref
        if cand.is_file():
            ref = str(cand)
    system = spec.system
    if isinstance(system.topology, str) and not Path(system.topology).is_file():
        cand = Path(path).parent / system.topology
        if cand.is_file():
            system = system.model_copy(update={"topology": str(cand)})
    return Job(load_model(ref, source=f"{path}: model"), spec.execution, system)


def make_job(model: ModelSpec | str | dict[str, Any], execution: dict[str, Any] | ExecutionSpec,
             system: dict[str, Any] | SystemSpec) -> Job:  # fmt: skip
    """Build a Job from Python values (mappings are validated like YAML)."""
    m = model if isinstance(model, ModelSpec) else load_model(model)
    ex = (
        execution
        if isinstance(execution, ExecutionSpec)
        else parse_spec(ExecutionSpec, execution, "execution")
    )
    sy = system if isinstance(system, SystemSpec) else parse_spec(SystemSpec, system, "system")
    return Job(m, ex, sy)


@dataclass(frozen=True)
class Prediction:
    """Everything Seer predicts for one iteration of a job."""

    job: Job
    layout: Layout
    iteration_s: float
    breakdown: dict[str, float]
    tokens_per_s: float
    model_flops: float
    hardware_flops: float
    megatron_flops: float
    memory: MemoryReport
    timeline: Timeline
    peak_flops_per_gpu: float
    extra: dict[str, Any] = field(default_factory=dict)

    def tflops_per_gpu(self, convention: str = "model") -> float:
        """Achieved TFLOP/s per GPU: 'model' (6N + causal attention), 'hardware' (executed,
        incl. recompute), 'megatron' (Megatron-LM's formula, full attention), 'megatron_causal'
        (the same halving attention, Megatron-LM >= core_v0.12 / NeMo >= 2.5), 'narayanan'
        (SC'21 Eq. 3)."""
        flops = {
            "model": self.model_flops,
            "hardware": self.hardware_flops,
            "megatron": self.megatron_flops,
            "megatron_causal": self.extra["megatron_causal_flops"],
            "narayanan": self.extra["narayanan_flops"],
        }.get(convention)
        if flops is None:
            raise ConfigError(
                f"unknown FLOP convention {convention!r}",
                fix="use model, hardware, megatron, megatron_causal or narayanan",
            )
        return float(flops) / (self.iteration_s * self.layout.gpus) / 1e12

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization (6N + causal attention convention)."""
        return self.tflops_per_gpu("model") * 1e12 / self.peak_flops_per_gpu

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilization (executed FLOPs incl. recompute)."""
        return self.tflops_per_gpu("hardware") * 1e12 / self.peak_flops_per_gpu

    def summary(self) -> dict[str, Any]:
        """JSON-ready result."""
        pc = param_counts(self.job.model)
        lay = self.layout
        return {
            "model": self.job.model.name,
            "params": pc.total,
            "active_params": pc.active,
            "gpu": lay.gpu.name,
            "gpus": lay.gpus,
            "layout": {
                "tp": lay.tp,
                "pp": lay.pp,
                "vpp": lay.vpp,
                "dp": lay.dp,
                "cp": lay.cp,
                "ep": lay.ep,
                "etp": lay.etp,
                "sp": lay.sp,
                "micro_batches": lay.micro_batches,
            },
            "iteration_s": self.iteration_s,
            "breakdown_s": dict(self.breakdown),
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": {
                c: self.tflops_per_gpu(c) for c in ("model", "hardware", "megatron", "narayanan")
            },
            "mfu": self.mfu,
            "hfu": self.hfu,
            "memory_gib": {
                "weights": self.memory.weights / 2**30,
                "grads": self.memory.grads / 2**30,
                "optimizer": self.memory.optimizer / 2**30,
                "activations": self.memory.activations / 2**30,
                "reserved": self.memory.reserved / 2**30,
                "total": self.memory.total / 2**30,
                "capacity": self.memory.capacity / 2**30,
                "offloaded": self.memory.offloaded / 2**30,
                "host_optimizer": self.memory.host / 2**30,
                "stage": self.memory.stage,
            },
            "oom": self.memory.oom,
            "efficiency_basis": self.extra.get("efficiency_basis", ""),
        }


def predict(job: Job) -> Prediction:
    """Predict one training iteration of `job`."""
    check_system(job.system)
    model, ex = job.model, job.execution
    lay = resolve_layout(model, ex, job.system)
    eff = efficiency_for(lay.gpu, job.system.efficiency)
    ctx = make_context(ex, lay, eff, job.system, model)
    tl = build_timeline(model, ex, lay, ctx)
    tokens = float(ex.global_batch) * ex.seq_len
    mem = memory_report(model, ex, lay, tl)
    return Prediction(
        job=job,
        layout=lay,
        iteration_s=tl.iteration_s,
        breakdown=tl.breakdown,
        tokens_per_s=tokens / tl.iteration_s,
        model_flops=flops_per_token_6nd(model, ex.seq_len) * tokens,
        hardware_flops=tl.hardware_flops,
        megatron_flops=megatron_model_flops(model, tokens, ex.seq_len),
        memory=mem,
        timeline=tl,
        peak_flops_per_gpu=ctx.peak_flops,
        extra={
            "narayanan_flops": narayanan_hardware_flops(model, tokens, ex.seq_len),
            "megatron_causal_flops": megatron_model_flops(model, tokens, ex.seq_len, causal=True),
            "efficiency_basis": eff.basis,
        },
    )
