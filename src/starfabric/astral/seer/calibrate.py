"""Calibrate Seer's collective model from measured nccl-tests logs.

For each collective and tier (NVLink inside a node, NICs across nodes) a latency (alpha) and
the achievable bus-bandwidth fraction (beta) are fitted so that Seer's predicted times match
the measured ones for messages of at least `min_bytes` (relative least squares). The result is a
profile — efficiency overrides a job applies through `system.efficiency` — and the error of
every log before and after, so a user sees what calibration bought.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.astral.hardware import get_gpu
from starfabric.astral.nccltests import NcclRun, busbw_factor, parse_nccl_tests
from starfabric.astral.seer.comm import Group, collective_time, make_fabric
from starfabric.astral.seer.efficiency import Efficiency, efficiency_for
from starfabric.astral.seer.parallel import MAX_GPUS
from starfabric.astral.seer.predict import Job
from starfabric.config import read_mapping
from starfabric.errors import ConfigError, DataError
from starfabric.units import parse_bandwidth

MIN_BYTES = 1 << 20
"""Messages below 1 MiB are latency-bound; the bandwidth fit ignores them."""
FRACTION_MAX = 2.0
"""Largest fitted fraction (busbw / link rate); above 1 is possible with in-network reduction
(NVLink SHARP, InfiniBand SHARP) and tree algorithms across few nodes."""
_KIND = {"alltoall": "all_to_all", "sendrecv": "p2p"}


@dataclass(frozen=True)
class LogFit:
    """One log's error before and after calibration (mean |log(pred/measured)| as a ratio)."""

    path: str
    collective: str
    ranks: int
    tier: str
    rows: int
    error_before: float
    error_after: float


@dataclass(frozen=True)
class Calibration:
    """Fitted fractions per collective and tier, as an efficiency-override profile."""

    gpu: str
    fractions: dict[str, dict[str, float]]
    logs: tuple[LogFit, ...]

    def profile(self) -> dict[str, Any]:
        """The `system.efficiency` overrides (and provenance) to save as YAML."""
        return {
            "gpu": self.gpu,
            "efficiency": {"collective_bus_fractions": self.fractions},
            "fitted_from": [f.path for f in self.logs],
        }


def _kind(run: NcclRun) -> str:
    return _KIND.get(run.collective, run.collective)


def _errors(
    run: NcclRun, group: Group, eff: Efficiency, nvl: float, nic: float
) -> np.ndarray[Any, Any]:
    fabric = make_fabric(nvl, nic, eff)
    kind = _kind(run)
    pred = np.array([collective_time(kind, float(b), group, fabric) for b in run.size_bytes])  # type: ignore[arg-type]
    meas = run.time_us * 1e-6
    out: np.ndarray[Any, Any] = np.abs(np.log(pred / meas))
    return out


def calibrate_nccl(
    paths: Sequence[str | Path],
    gpu: str,
    nic_bandwidth: str | float,
    gpus_per_node: int = 8,
    min_bytes: int = MIN_BYTES,
) -> Calibration:
    """Fit bus-bandwidth fractions per (collective, tier) from nccl-tests logs of one GPU type
    and NIC rate; each log's ranks and per-node count decide its tier."""
    spec = get_gpu(gpu)
    base = efficiency_for(spec)
    nvl = spec.nvlink_gbps * 1e9
    nic = parse_bandwidth(nic_bandwidth, "nic_bandwidth") / 8.0
    if nic <= 0:
        raise ConfigError(f"nic_bandwidth {nic_bandwidth!r} is 0 bit/s", fix="give e.g. 400G")
    if not 1 <= gpus_per_node <= MAX_GPUS:
        raise ConfigError(
            f"gpus_per_node = {gpus_per_node} is outside 1..{MAX_GPUS}", fix="give e.g. 8"
        )
    runs: list[tuple[str, NcclRun, Group, str]] = []
    for p in paths:
        run = parse_nccl_tests(p).at_least(min_bytes)
        run = NcclRun(
            run.path, run.collective, run.ranks, run.ranks_inferred,
            run.size_bytes[np.isfinite(run.time_us)], run.time_us[np.isfinite(run.time_us)],
            run.algbw_gbps, run.busbw_gbps, run.time_us_inplace, run.busbw_gbps_inplace, run.dtype,
        )  # fmt: skip
        if len(run) == 0:
            raise DataError(
                f"{p}: no rows of at least {min_bytes:,} bytes",
                fix="give a log whose sweep reaches that size (nccl-tests -e 8G)",
            )
        g = min(run.ranks, gpus_per_node)
        tier = "nvlink" if run.ranks <= gpus_per_node else "nic"
        runs.append((str(p), run, Group(run.ranks, g), tier))
    fractions: dict[str, dict[str, float]] = {}
    for tier in ("nvlink", "nic"):
        for kind in sorted({_kind(r) for _, r, _, t in runs if t == tier}):
            chosen = [(r, g) for _, r, g, t in runs if t == tier and _kind(r) == kind]
            alpha, frac = _fit(chosen, tier, nvl, nic)
            entry = fractions.setdefault(kind, {})
            entry[tier] = round(frac, 4)
            entry[f"{tier}_alpha_s"] = float(f"{alpha:.4g}")
    fitted = _with_all(base, fractions)
    logs = tuple(
        LogFit(
            path,
            run.collective,
            run.ranks,
            tier,
            len(run),
            float(np.mean(_errors(run, g, base, nvl, nic))),
            float(np.mean(_errors(run, g, fitted, nvl, nic))),
        )
        for path, run, g, tier in runs
    )
    return Calibration(spec.name, fractions, logs)


def _fit(
    chosen: list[tuple[NcclRun, Group]], tier: str, nvl: float, nic: float
) -> tuple[float, float]:
    """Weighted least squares of t = alpha + bytes_moved / (fraction * tier bandwidth) over
    every row (relative error), alpha >= 0. Returns (alpha_s, fraction)."""
    u_all, t_all = [], []
    for run, g in chosen:
        factor = busbw_factor(run.collective, run.ranks)
        raw = nvl if tier == "nvlink" else g.per_node * nic
        u_all.append(factor * run.size_bytes.astype(np.float64) / raw)
        t_all.append(run.time_us * 1e-6)
    u, t = np.concatenate(u_all), np.concatenate(t_all)
    a = np.stack([1.0 / t, u / t], axis=1)
    (alpha, c), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if alpha < 0 or c <= 0:
        alpha = 0.0
        c = float(np.sum(u / t) / np.sum((u / t) ** 2))
    if c <= 0:
        raise DataError(f"{tier} fit: times do not grow with size", fix="check the logs")
    return float(alpha), float(min(FRACTION_MAX, 1.0 / c))


def _with_all(base: Efficiency, fractions: dict[str, dict[str, float]]) -> Efficiency:
    from dataclasses import replace

    rows = tuple(
        (
            k,
            v.get("nvlink", 0.0),
            v.get("nic", 0.0),
            v.get("nvlink_alpha_s", -1.0),
            v.get("nic_alpha_s", -1.0),
        )
        for k, v in sorted(fractions.items())
    )
    return replace(base, collective_bus_fractions=rows)


def apply_profile(job: Job, path: str | Path) -> Job:
    """The job with a calibrated profile's efficiency overrides merged into its system; a
    profile fitted on another GPU is refused."""
    data = read_mapping(path)
    eff = data.get("efficiency")
    if not isinstance(eff, dict):
        raise ConfigError(f"{path}: no 'efficiency' mapping", fix="use a 'seer calibrate' profile")
    gpu = str(data.get("gpu", ""))
    if gpu and get_gpu(gpu).name != get_gpu(job.system.gpu).name:
        raise ConfigError(
            f"{path}: profile is for {gpu}, the job runs on {job.system.gpu}",
            fix="calibrate on logs from the job's GPU type",
        )
    merged = {**job.system.efficiency, **eff}
    return Job(job.model, job.execution, job.system.model_copy(update={"efficiency": merged}))


KINETO_GEMM_OPS = ("aten::mm", "aten::addmm")
"""CPU ops whose recorded input shapes give a GEMM's (M, N, K)."""


@dataclass(frozen=True)
class GemmFit:
    """GEMM efficiency fitted from a Kineto trace: measured kernels vs the shape model."""

    path: str
    dtype: str
    gemms: int
    gemm_peak_fraction_before: float
    gemm_peak_fraction: float
    error_before: float
    error_after: float


def kineto_gemms(path: str | Path) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], str]:
    """(M, N, K) rows and measured GPU seconds of every aten::mm/addmm in a Kineto trace (ops
    recorded with shapes), linked to their kernels through the runtime launch's correlation
    id; plus the input dtype seen most."""
    from starfabric.astral.kineto import read_kineto

    p = Path(path)
    events = read_kineto(p).events  # the input layer: every event's times checked
    ops_by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        named = e.get("cat") == "cpu_op" and e.get("name") in KINETO_GEMM_OPS
        if named and "Input Dims" in e.get("args", {}):
            ops_by_tid.setdefault(e.get("tid"), []).append(e)
    for lst in ops_by_tid.values():
        lst.sort(key=lambda e: e["ts"])
    kernel_time: dict[Any, float] = {}
    for e in events:
        if e.get("cat") == "kernel":
            corr = e.get("args", {}).get("correlation")
            kernel_time[corr] = kernel_time.get(corr, 0.0) + float(e.get("dur", 0.0)) * 1e-6
    per_op: dict[int, float] = {}
    op_index: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.get("cat") != "cuda_runtime" or "Launch" not in str(e.get("name", "")):
            continue
        corr = e.get("args", {}).get("correlation")
        if corr not in kernel_time:
            continue
        ops = ops_by_tid.get(e.get("tid"), [])
        lo, hi = 0, len(ops)
        while lo < hi:  # last op starting at or before the launch
            mid = (lo + hi) // 2
            if ops[mid]["ts"] <= e["ts"]:
                lo = mid + 1
            else:
                hi = mid
        if lo and ops[lo - 1]["ts"] + ops[lo - 1].get("dur", 0) >= e["ts"]:
            op = ops[lo - 1]
            per_op[id(op)] = per_op.get(id(op), 0.0) + kernel_time[corr]
            op_index[id(op)] = op
    rows, times, dtypes = [], [], []
    for key, t in per_op.items():
        op = op_index[key]
        dims = op["args"]["Input Dims"]
        a, b = (dims[1], dims[2]) if op["name"] == "aten::addmm" else (dims[0], dims[1])
        if len(a) != 2 or len(b) != 2 or a[1] != b[0] or t <= 0:
            continue
        rows.append((a[0], b[1], a[1]))
        times.append(t)
        types = op["args"].get("Input type", [])
        dtypes.append(
            str(types[1] if op["name"] == "aten::addmm" and len(types) > 1 else (types or [""])[0])
        )
    if not rows:
        raise DataError(
            f"{p}: no aten::mm/addmm with recorded shapes linked to GPU kernels",
            fix="profile with record_shapes=True",
        )
    dtype = max(set(dtypes), key=dtypes.count)
    return np.asarray(rows, dtype=np.float64), np.asarray(times), dtype


_TORCH_DTYPE = {"float": "tf32", "c10::Half": "fp16", "c10::BFloat16": "bf16", "half": "fp16"}


def calibrate_kineto(path: str | Path, gpu: str, dtype: str | None = None) -> GemmFit:
    """Fit `gemm_peak_fraction` so the shape model (tiles, waves, K) matches the measured GEMM
    kernels of a Kineto trace (fp32 inputs run on TF32 tensor cores unless `dtype` says)."""
    from dataclasses import replace

    from starfabric.astral.seer.efficiency import gemm_time

    spec = get_gpu(gpu)
    base = efficiency_for(spec)
    mnk, meas, seen = kineto_gemms(path)
    kind = dtype or _TORCH_DTYPE.get(seen, "bf16")
    elem = 4.0 if kind in ("tf32", "fp32") else 2.0
    peak = spec.tflops(kind) * 1e12

    def err(frac: float) -> float:
        eff = replace(base, gemm_peak_fraction=frac)
        pred = gemm_time(mnk[:, 0], mnk[:, 1], mnk[:, 2], np.ones(len(mnk)), peak,
                         spec.hbm_gbps * 1e9, eff, elem_bytes=elem, peak_fraction=frac)  # fmt: skip
        return float(np.mean(np.abs(np.log(pred / meas))))

    grid = np.linspace(0.05, 1.0, 191)
    errs = np.array([err(float(f)) for f in grid])
    best = float(grid[int(np.argmin(errs))])
    return GemmFit(str(path), kind, len(meas), base.gemm_peak_fraction, best,
                   err(base.gemm_peak_fraction), float(errs.min()))  # fmt: skip
