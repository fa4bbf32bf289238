"""The job's power waveform from a Seer prediction: per GPU, per rack, per pod and for the site.

**Power vs utilisation: the roofline-activity model.** A GPU's power is its idle (static and
clock-tree) power plus dynamic power in proportion to the activity of its units, the
decomposition of the architectural power models (GPUWattch, Leng et al. ISCA 2013;
AccelWattch, Kandiah et al. MICRO 2021: P = P_static + P_idle-dynamic + Σ unit activity ×
unit energy) reduced to the two units that dominate training kernels, the tensor cores and
HBM, and capped at the board's power limit (the catalog TDP):

    P = P_idle + (TDP - P_idle) · min(1, w_c · u_c + w_m · u_m)

u_c is the operator's achieved tensor FLOP rate over the peak it runs at and u_m its achieved
HBM traffic over the peak bandwidth, both from Seer's own roofline figures for that operator
(its FLOPs, its bytes, its predicted time): nothing is set per operator class. GEMMs and
fused attention land high in u_c, layer norms, activations and the optimizer high in u_m,
NCCL collectives by the HBM traffic their algorithm moves (`COLL_HBM_TRAFFIC`), pipeline
bubbles at zero. P_idle, w_c and w_m come from published measurements (`GpuPowerModel`,
docs/astral.md "Which data calibrates what"). The host (CPUs, memory, fans, NVSwitches, NICs,
PSU loss: the cluster spec's `host_overhead_w`) draws a fraction of its nameplate that follows
the GPUs' state only slowly (fans, CPU data loading): one fraction while training, another
while idle.

**Synchrony.** Seer's per-stage timeline gives, for every PP stage, the operators of every
pass (forward, backward, recompute) with their exposed times, the exposed gradient buckets,
the tail and the optimizer step. All the DP and TP ranks of a stage run in phase (they are
synchronised by their collectives every layer or every iteration); stages are offset by the
pipeline schedule. So the cluster is a sum over stages: GPUs of stage s × the stage's
waveform, plus the hosts. Racks of the same stage behave identically and are grouped: the
1 ms waveform of one iteration costs O(stages × samples), not O(GPUs).

**Outputs.** The site waveform, its swing (peak - trough) and ramp rates, the share of
energy per frequency band (the iteration repeats, so the spectrum has the iteration
frequency and its harmonics: the 0.1-20 Hz band that utilities watch), a Perfetto counter
track and a PNG.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from starfabric.config import Spec
from starfabric.errors import ConfigError

if TYPE_CHECKING:
    from starfabric.astral.seer.cost import OpCosts
    from starfabric.astral.seer.ops import OpTable
    from starfabric.astral.seer.predict import Prediction

Array = np.ndarray[Any, Any]


IDLE_MEASURED_W = (80.3, 73.65)
"""Idle board power of an H200 SXM (700 W TDP, Hopper silicon as the H100) read by nvidia-smi:
80.3 W (Serial Alice GPU Energy Benchmark, 2026, 'H200 ghost power: 80.3 W idle vs 592.8 W
at load') and 73.65 W averaged over 1 s samples in 31 RunPod regions (ConserveMode, 'H200 GPU
Idle State Validation'). Two vendor-independent readings of the same quantity; their mean
over the 700 W limit gives `GpuPowerModel.idle_fraction`."""

HOPPER_TDP_W = 700.0
"""The power limit of the H100/H200 SXM boards the anchors were measured on (datasheets)."""

DECODE_BATCH1_W = 300.0
"""ML.ENERGY Benchmark v3.0 (Chung et al., the ML.ENERGY initiative), H100-SXM5 LLM decode at
batch 1: about 300 W per GPU (as the vLLM Semantic Router fleet-sim power-model reference
quotes it, one of its 'two empirical calibration anchors'). Decode at batch 1 streams the
weights from HBM every step with the tensor cores nearly idle: it fixes w_m."""

DECODE_BATCH128_W = 600.0
"""The same benchmark at batch 128: about 600 W. Not used to set anything: the model's
prediction for it (`decode_check_w`) is a check of w_c (docs/astral.md)."""

DECODE_HBM_FRACTION = 0.80
"""Fraction of peak HBM bandwidth weight-streaming decode sustains: an assumption the same
reference's derivation makes (mem_bw x 0.80), not a measured figure; w_m scales as its inverse."""

H100_BF16_TFLOPS = 989.4
H100_HBM_GBPS = 3350.0
"""The H100 SXM datasheet figures the decode readings are set against (catalog H100-SXM)."""

POWER_LIMITED_GEMM = (
    "Horace He, 'Strangely, Matrix Multiplications on GPUs Run Faster When Given "
    "\"Predictable\" Data!' (thonking.ai, 2024): 'matmuls on the H100 are primarily not "
    "compute or bandwidth limited, they are power limited'"
)
"""The compute anchor: a large BF16 GEMM on random data holds an H100 at its power limit. So
a GEMM at the utilisation Seer gives a large, well-shaped H100 GEMM (`gemm_peak_fraction` in
seer/efficiency.yaml, calibrated on Megatron's published H100 runs) draws TDP: w_c = 1 /
that fraction (the GEMM's own HBM term neglected, which errs low)."""


def _anchor_weights() -> tuple[float, float, float]:
    """(idle fraction, w_c, w_m) from the published readings above: P/TDP = idle + (1 - idle)
    · (w_c · u_c + w_m · u_m)."""
    from starfabric.astral.hardware import get_gpu
    from starfabric.astral.seer.efficiency import efficiency_for

    idle = float(np.mean(IDLE_MEASURED_W)) / HOPPER_TDP_W
    a1 = (DECODE_BATCH1_W / HOPPER_TDP_W - idle) / (1.0 - idle)
    w_m = a1 / DECODE_HBM_FRACTION
    w_c = 1.0 / efficiency_for(get_gpu("H100")).gemm_peak_fraction
    return idle, w_c, w_m


def decode_check_w(model: GpuPowerModel, batch: int = 128) -> float:
    """The model's H100 power for weight-streaming decode at `batch` (the ML.ENERGY check):
    u_m = DECODE_HBM_FRACTION, u_c = batch · u_m · bandwidth / peak (KV-cache reads neglected,
    which overstates u_c)."""
    um = DECODE_HBM_FRACTION
    uc = batch * um * H100_HBM_GBPS * 1e9 / (H100_BF16_TFLOPS * 1e12)
    idle = model.idle_fraction * HOPPER_TDP_W
    frac = model.power_fraction(np.array([uc]), np.array([um]))
    return float(idle + (HOPPER_TDP_W - idle) * frac[0])


_IDLE, _W_C, _W_M = _anchor_weights()

COLL_HBM_TRAFFIC = {
    "all_reduce": 4.0,
    "reduce_scatter": 3.0,
    "all_gather": 2.0,
    "all_to_all": 2.0,
    "send_recv": 2.0,
    "broadcast": 2.0,
}
"""HBM bytes an NCCL collective moves per byte of its buffer (ring algorithms, large
messages): a copy reads the data and the peer's write lands in HBM (2x); a reduction also
reads the local operand it adds to (3x); an all-reduce is a reduce-scatter then an
all-gather, each touching the whole buffer (≈ 4x). Data movement of the algorithm, not a
measurement (assumption: no in-network reduction, no copy engines); a collective's power
follows from it through w_m."""

DEFAULT_COLL_TRAFFIC = 2.0
"""A collective kind not listed above moves its buffer in and out once (assumption)."""


class GpuPowerModel(Spec):
    """Parameters of the roofline-activity GPU power model and of the host.

    The GPU's three are derived from published measurements (module constants above:
    `IDLE_MEASURED_W`, `DECODE_BATCH1_W`, `DECODE_BATCH128_W`), not from any case in
    `published.py`; the host fractions are assumptions (docs/astral.md, "Which data
    calibrates what"). The three GPU parameters were measured on Hopper boards; applying them
    to other GPUs (A100, Blackwell), scaled by each one's own TDP, peaks and bandwidth, is an
    assumption: no per-architecture readings were at hand."""

    idle_fraction: float = Field(
        round(_IDLE, 4),
        ge=0,
        lt=1,
        description="idle power / TDP: H200 idle 80.3 W and 73.65 W by nvidia-smi (Serial "
        "Alice 2026; ConserveMode on RunPod) of its 700 W limit",
    )
    w_compute: float = Field(
        round(_W_C, 4),
        ge=0,
        description="dynamic power per unit tensor-core utilisation, in (TDP - idle): a large "
        "H100 GEMM is power limited (He 2024), so Seer's large-GEMM utilisation (0.60) reaches "
        "TDP: 1 / 0.60",
    )
    w_memory: float = Field(
        round(_W_M, 4),
        ge=0,
        description="dynamic power per unit HBM-bandwidth utilisation, in (TDP - idle): from "
        "ML.ENERGY v3.0 H100 decode at batch 1 (300 W) streaming weights at 80 % of HBM peak",
    )
    host_train_fraction: float = Field(
        0.65,
        ge=0,
        le=1,
        description="host draw while training / host nameplate (assumption, chosen with "
        "Latif et al.'s 8.4 kW 8xH100 node peak in view)",
    )
    host_idle_fraction: float = Field(
        0.45, ge=0, le=1, description="host draw while idle / host nameplate (assumption)"
    )

    def power_fraction(self, u_compute: Array, u_memory: Array) -> Array:
        """(P - P_idle) / (TDP - P_idle) at these utilisations, capped at the power limit."""
        act = self.w_compute * np.clip(u_compute, 0.0, 1.0) + self.w_memory * np.clip(
            u_memory, 0.0, 1.0
        )
        return np.minimum(act, 1.0)


def op_utilisation(
    table: OpTable, costs: OpCosts, gemm_peak: float, peak16: float, hbm: float, fp8: bool
) -> tuple[Array, Array]:
    """(u_c, u_m) of every operator from Seer's roofline figures: its FLOPs and HBM bytes over
    its predicted time and the GPU's peaks (GEMM bytes: its three operands at the GEMM's
    element size; a collective's: `COLL_HBM_TRAFFIC` times its buffer)."""
    from starfabric.astral.seer.cost import BF16_GEMMS
    from starfabric.astral.seer.ops import BMM, COMM, FLASH, GEMM, MEM

    a = table.arrays()
    kind = np.asarray(a["kind"], dtype=np.int64)
    t = np.asarray(costs.time, dtype=float)
    safe = np.where(t > 0, t, np.inf)
    flops = np.asarray(a["flops"], dtype=float)
    nbytes = np.asarray(a["nbytes"], dtype=float)
    m, n, k, b = (np.asarray(a[c], dtype=float) for c in ("m", "n", "k", "batch"))
    g = kind == GEMM
    bf = np.fromiter((nm.endswith(BF16_GEMMS) for nm in table.name), bool, len(table.name))
    fp8_g = g & (~bf if fp8 else np.zeros_like(g))
    peak = np.where(fp8_g, gemm_peak, peak16)
    uc = np.where((kind == GEMM) | (kind == BMM) | (kind == FLASH), flops / safe / peak, 0.0)
    elem = np.where(fp8_g, 1.0, 2.0)
    mm = (kind == GEMM) | (kind == BMM)
    by = np.where(mm, elem * (m * k + k * n + m * n) * np.maximum(b, 1.0), 0.0)
    by = np.where((kind == MEM) | (kind == FLASH), nbytes, by)
    coll = np.fromiter(
        (COLL_HBM_TRAFFIC.get(c, DEFAULT_COLL_TRAFFIC) for c in table.coll), float, len(table.coll)
    )
    by = np.where(kind == COMM, coll * nbytes, by)
    um = by / safe / hbm
    return np.clip(uc, 0.0, 1.0), np.clip(um, 0.0, 1.0)


class RunSpec(Spec):
    """What happens around iterations: checkpoints and the job's start and stop."""

    checkpoint_every: int = Field(500, ge=1, description="iterations between checkpoints")
    checkpoint_s: float = Field(30.0, ge=0, description="GPUs idle while a checkpoint is written")
    iterations: int = Field(1000, ge=1, description="iterations in the run view")


@dataclass(frozen=True)
class StageWave:
    """One PP stage's per-GPU power (W) sampled every dt over one iteration."""

    power_w: Array  # (stages, samples)
    dt_s: float
    iteration_s: float


def _peaks(pred: Prediction) -> tuple[float, float, float, bool]:
    """(GEMM peak FLOP/s, 16-bit peak FLOP/s, HBM bytes/s, FP8?) of the job's GPU."""
    gpu = pred.layout.gpu
    ex = pred.job.execution
    peak16 = gpu.tflops("bf16" if ex.precision != "fp16" else "fp16") * 1e12
    fp8 = ex.precision == "fp8"
    gemm_peak = gpu.tflops("fp8") * 1e12 if fp8 else peak16
    return gemm_peak, peak16, gpu.hbm_gbps * 1e9, fp8


@dataclass(frozen=True)
class OpPower:
    """Per-operator power (W) templates of each piece's passes, and the job's collective and
    memory-bound power (time-weighted over its operators) for the intervals Seer gives as
    spans rather than operators (exposed gradient buckets, the tail, the optimizer)."""

    tmpl: dict[tuple[str, str], tuple[Array, Array]]
    comm_w: float
    mem_w: float


def _templates(pred: Prediction, model: GpuPowerModel, idle_w: float, tdp_w: float) -> OpPower:
    """(durations, power) of the operators of each piece's forward / backward / recompute."""
    from starfabric.astral.seer.ops import COMM, MEM

    out: dict[tuple[str, str], tuple[Array, Array]] = {}
    span = tdp_w - idle_w
    gemm_peak, peak16, hbm, fp8 = _peaks(pred)
    acc = {COMM: [0.0, 0.0], MEM: [0.0, 0.0]}
    for key, pc in pred.timeline.pieces.items():
        for which, table, costs in (
            ("fwd", pc.fwd_table, pc.fwd_costs),
            ("bwd", pc.bwd_table, pc.bwd_costs),
        ):
            uc, um = op_utilisation(table, costs, gemm_peak, peak16, hbm, fp8)
            pw = idle_w + span * model.power_fraction(uc, um)
            d = np.asarray(costs.exposed, dtype=float)
            k = np.asarray(costs.kind, dtype=np.int64)
            t = np.asarray(costs.time, dtype=float)
            for kk, (w, e) in acc.items():
                sel = k == kk
                acc[kk] = [w + float((pw[sel] * t[sel]).sum()), e + float(t[sel].sum())]
            keep = d > 0
            out[(key, which)] = (d[keep], pw[keep])
            if which == "fwd":
                sel = np.asarray(table.selective, dtype=bool)
                ks = keep & sel
                out[(key, "rec-selective")] = (d[ks], pw[ks])
                out[(key, "rec-full")] = out[(key, "fwd")]

    def mean(kk: int) -> float:
        w, t = acc[kk]
        return w / t if t > 0 else idle_w

    return OpPower(tmpl=out, comm_w=mean(COMM), mem_w=mean(MEM))


def _pass_template(
    pred: Prediction, tmpl: dict[tuple[str, str], tuple[Array, Array]], s: int, c: int, fwd: bool
) -> tuple[Array, Array]:
    from starfabric.astral.seer.trace import _piece_sequence

    seq = _piece_sequence(pred, s, c)
    rec = pred.job.execution.recompute
    parts: list[tuple[Array, Array]] = []
    if fwd:
        parts = [tmpl[(k, "fwd")] for k in seq]
    else:
        for k in reversed(seq):
            if rec != "none" and k in ("dense", "moe"):
                parts.append(tmpl[(k, f"rec-{rec}")])
            parts.append(tmpl[(k, "bwd")])
    if not parts:
        return np.zeros(0), np.zeros(0)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def stage_waveforms(
    pred: Prediction, model: GpuPowerModel, tdp_w: float, dt_s: float = 1e-3
) -> StageWave:
    """Per-GPU power of every PP stage over one iteration, energy-conserving on a dt grid."""
    tl = pred.timeline
    p, n = tl.is_fwd.shape
    idle = model.idle_fraction * tdp_w
    ops = _templates(pred, model, idle, tdp_w)
    tmpl = ops.tmpl
    it_s = float(pred.iteration_s)
    samples = max(1, int(math.ceil(it_s / dt_s)))
    edges = np.arange(samples + 1) * dt_s
    p_wait = idle  # a pipeline bubble: no kernel runs (u_c = u_m = 0)
    p_comm = ops.comm_w  # send/receive waits, exposed gradient buckets, the tail
    p_mem = ops.mem_w  # the optimizer step: memory-bound
    waves = np.empty((p, samples))
    cache: dict[tuple[int, bool], tuple[Array, Array]] = {}
    for s in range(p):
        starts: list[Array] = []
        durs: list[Array] = []
        pows: list[Array] = []
        # background: waiting (bubbles) over the whole iteration, then intervals overwrite it
        # through their energy; we build a list of non-overlapping intervals in time order.
        t0s, t1s = tl.start[s], tl.end[s]
        for i in range(n):
            c, f = int(tl.chunk[s, i]), bool(tl.is_fwd[s, i])
            key = (c, f)
            if key not in cache:
                cache[key] = _pass_template(pred, tmpl, s, c, f)
            d, pw = cache[key]
            a, b = float(t0s[i]), float(t1s[i])
            tot = float(d.sum())
            if tot <= 0 or b <= a:
                continue
            scale = min(1.0, (b - a) / tot)
            dd = d * scale
            st = a + np.concatenate([[0.0], np.cumsum(dd)[:-1]])
            starts.append(st)
            durs.append(dd)
            pows.append(pw)
            rest = (b - a) - dd.sum()
            if rest > 1e-12:  # the rest of the pass: waiting on the pipeline's send/receive
                starts.append(np.array([a + dd.sum()]))
                durs.append(np.array([rest]))
                pows.append(np.array([p_comm]))
        # exposed gradient buckets, the tail and the optimizer step after the last pass
        end = float(tl.stage_end_s[s])
        for a, b in tl.dp_windows[s]:
            if b > end:
                a2 = max(a, end)
                if b > a2:
                    starts.append(np.array([a2]))
                    durs.append(np.array([b - a2]))
                    pows.append(np.array([p_comm]))
        tail = float(tl.tail_s[s])
        opt = float(pred.breakdown.get("optimizer", 0.0))
        if tail > 0:
            starts.append(np.array([end]))
            durs.append(np.array([tail]))
            pows.append(np.array([p_comm]))
        if opt > 0:
            starts.append(np.array([end + tail]))
            durs.append(np.array([opt]))
            pows.append(np.array([p_mem]))
        st = np.concatenate(starts) if starts else np.zeros(0)
        du = np.concatenate(durs) if durs else np.zeros(0)
        pw = np.concatenate(pows) if pows else np.zeros(0)
        order = np.argsort(st, kind="stable")
        st, du, pw = st[order], du[order], pw[order]
        # overlaps (an exposed bucket under the tail) go to the earlier interval
        ends = st + du
        prev = np.concatenate([[-np.inf], np.maximum.accumulate(ends)[:-1]])
        st = np.maximum(st, prev)
        du = np.maximum(ends - st, 0.0)
        # the energy above waiting, integrated piecewise linearly and resampled on the grid
        de = (pw - p_wait) * du
        e_end = np.cumsum(de)
        if st.size:
            t_pts = np.stack([st, st + du], axis=1).ravel()
            e_pts = np.stack([e_end - de, e_end], axis=1).ravel()
            e_at = np.interp(edges, t_pts, e_pts, left=0.0, right=float(e_end[-1]))
        else:
            e_at = np.zeros(edges.size)
        waves[s] = p_wait + np.diff(e_at) / dt_s
    return StageWave(power_w=waves, dt_s=dt_s, iteration_s=it_s)


@dataclass
class ClusterShape:
    """How the job's GPUs sit in racks and pods (from the cluster spec)."""

    gpus: int
    stages: int
    gpus_per_host: int
    hosts_per_rack: int
    racks_per_pod: int
    host_overhead_w: float
    nic_w_per_gpu: float
    tdp_w: float
    gpu: str

    @property
    def gpus_per_rack(self) -> int:
        return self.gpus_per_host * self.hosts_per_rack

    @property
    def racks(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_rack)


@dataclass
class Timeline:
    """The waveform of one iteration at rack, pod and site level, and its statistics."""

    shape: ClusterShape
    dt_s: float
    iteration_s: float
    gpu_w: Array  # (stages, samples) per GPU
    rack_w: Array  # (stages, samples) a rack of each stage (GPUs + hosts + NICs)
    racks_per_stage: Array
    site_w: Array  # (samples,)
    pod_w: Array  # (samples,) the first pod
    host_train_w: float
    host_idle_w: float
    elapsed_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def t_s(self) -> Array:
        return (np.arange(self.site_w.size) + 0.5) * self.dt_s

    def stats(self) -> dict[str, Any]:
        return waveform_stats(self.site_w, self.dt_s)

    def summary(self) -> dict[str, Any]:
        st = self.stats()
        sh = self.shape
        idle_site = (
            sh.gpus * sh.tdp_w * self.extra["idle_fraction"]
            + self.host_idle_w * sh.gpus / sh.gpus_per_host
        )
        return {
            "gpu": sh.gpu,
            "gpus": sh.gpus,
            "stages": sh.stages,
            "racks": sh.racks,
            "gpus_per_rack": sh.gpus_per_rack,
            "iteration_s": self.iteration_s,
            "dt_s": self.dt_s,
            "samples": int(self.site_w.size),
            "site": st,
            "rack_peak_w": float(self.rack_w.max()),
            "rack_mean_w": float(
                (self.rack_w.mean(axis=1) * self.racks_per_stage).sum() / self.racks_per_stage.sum()
            ),
            "gpu_mean_w": float(self.gpu_w.mean()),
            "gpu_peak_w": float(self.gpu_w.max()),
            "node_peak_w": float(
                self.gpu_w.max() * sh.gpus_per_host
                + self.host_train_w
                + sh.nic_w_per_gpu * sh.gpus_per_host
            ),
            "node_mean_w": float(
                self.gpu_w.mean() * sh.gpus_per_host
                + self.host_train_w
                + sh.nic_w_per_gpu * sh.gpus_per_host
            ),
            "node_nameplate_w": float(
                sh.tdp_w * sh.gpus_per_host
                + sh.host_overhead_w
                + sh.nic_w_per_gpu * sh.gpus_per_host
            ),
            "job_start_step_w": float(self.site_w.mean() - idle_site),
            "site_idle_w": float(idle_site),
            "elapsed_s": self.elapsed_s,
        }


BANDS = ((0.0, 0.1), (0.1, 20.0), (20.0, 100.0), (100.0, float("inf")))
"""Frequency bands (Hz) of the swing's energy: below 0.1 Hz the grid follows; 0.1-20 Hz is the
band utilities constrain (turbine-generator torsional modes, sub-synchronous oscillation;
Choukse et al., "Power Stabilization for AI Training Datacenters", 2025)."""


RAMP_WINDOW_S = 0.1
"""Ramp rates are taken on 100 ms averages: the resolution of utility phasor measurements."""


def waveform_stats(w: Array, dt_s: float, periodic: bool = True) -> dict[str, Any]:
    """Peak, trough, swing, ramp rates and the swing's energy per frequency band."""
    w = np.asarray(w, dtype=float)
    mean = float(w.mean())
    ac = w - mean
    spec = np.abs(np.fft.rfft(ac)) ** 2
    freqs = np.fft.rfftfreq(w.size, dt_s)
    tot = float(spec.sum()) or 1.0
    bands = {
        f"{lo:g}-{hi:g}Hz": float(spec[(freqs >= lo) & (freqs < hi)].sum() / tot)
        for lo, hi in BANDS
    }
    # ramp rates as a utility meters them: on 100 ms averages (the 1 ms step is reported too)
    k = max(1, int(round(RAMP_WINDOW_S / dt_s)))
    m = (w.size // k) * k
    blocks = w[:m].reshape(-1, k).mean(axis=1) if m else w
    seq = np.concatenate([blocks, blocks[:1]]) if periodic else blocks
    dp = np.diff(seq) / (k * dt_s) if seq.size > 1 else np.zeros(1)
    step = np.abs(np.diff(np.concatenate([w, w[:1]]) if periodic else w))
    return {
        "mean_w": mean,
        "peak_w": float(w.max()),
        "trough_w": float(w.min()),
        "swing_w": float(w.max() - w.min()),
        "swing_fraction": float((w.max() - w.min()) / max(w.max(), 1e-9)),
        "peak_to_mean": float(w.max() / max(mean, 1e-9)),
        "ramp_up_w_per_s": float(max(dp.max(), 0.0)),
        "ramp_down_w_per_s": float(max(-dp.min(), 0.0)),
        "max_step_w": float(step.max()) if step.size else 0.0,
        "rms_swing_w": float(np.sqrt((ac**2).mean())),
        "band_energy": bands,
        "fundamental_hz": float(1.0 / (w.size * dt_s)),
    }


def cluster_shape(
    gpus: int,
    stages: int,
    gpu: str,
    gpus_per_host: int,
    host_overhead_w: float,
    nic_w_per_gpu: float,
    rack_kw: float,
    hosts_per_pod: int | None = None,
) -> ClusterShape:
    """Racks from the rack power budget (as the static ledger packs them)."""
    from starfabric.astral.hardware import get_gpu

    g = get_gpu(gpu)
    host_w = g.tdp_w * gpus_per_host + host_overhead_w + nic_w_per_gpu * gpus_per_host
    if host_w > rack_kw * 1e3:
        from starfabric.errors import InfeasibleError

        raise InfeasibleError(
            f"a {gpus_per_host}-GPU {g.name} host draws {host_w / 1e3:.1f} kW at nameplate, more "
            f"than the {rack_kw:g} kW rack budget",
            fix="raise power.rack_kw (with a cooling type that removes it) or use fewer GPUs per host",
        )
    hosts_per_rack = max(1, int(rack_kw * 1e3 // host_w))
    racks_pod = max(1, (hosts_per_pod or 1 << 30) // hosts_per_rack)
    return ClusterShape(
        gpus=gpus,
        stages=stages,
        gpus_per_host=gpus_per_host,
        hosts_per_rack=hosts_per_rack,
        racks_per_pod=min(racks_pod, math.ceil(gpus / (gpus_per_host * hosts_per_rack))),
        host_overhead_w=host_overhead_w,
        nic_w_per_gpu=nic_w_per_gpu,
        tdp_w=g.tdp_w,
        gpu=g.name,
    )


def job_timeline(
    pred: Prediction,
    shape: ClusterShape,
    model: GpuPowerModel | None = None,
    dt_s: float = 1e-3,
) -> Timeline:
    """The 1 ms (dt) waveform of one iteration for the whole job, racks of a stage grouped."""
    t0 = time.perf_counter()
    model = model or GpuPowerModel()
    if dt_s <= 0 or not math.isfinite(dt_s):
        raise ConfigError(f"time step {dt_s} s must be positive")
    lay = pred.layout
    if lay.gpus > shape.gpus:
        raise ConfigError(
            f"the job needs {lay.gpus} GPUs, the cluster has {shape.gpus}",
            fix="use a bigger cluster or fewer GPUs in the job",
        )
    sw = stage_waveforms(pred, model, shape.tdp_w, dt_s)
    p = sw.power_w.shape[0]
    # Megatron's rank order puts PP outermost: a stage's GPUs are contiguous, so whole
    # racks belong to one stage (a rack straddling two stages is counted in the first)
    per_stage = lay.gpus // p
    rack_g = shape.gpus_per_rack
    racks_stage = np.full(p, per_stage / rack_g)
    host_train = shape.host_overhead_w * model.host_train_fraction
    host_idle = shape.host_overhead_w * model.host_idle_fraction
    hosts_per_rack = shape.hosts_per_rack
    rack_static = hosts_per_rack * (host_train + shape.nic_w_per_gpu * shape.gpus_per_host)
    rack_w = sw.power_w * rack_g + rack_static
    site = (rack_w * racks_stage[:, None]).sum(axis=0)
    # GPUs of the cluster outside the job idle
    spare = shape.gpus - lay.gpus
    if spare > 0:
        site = (
            site
            + spare * model.idle_fraction * shape.tdp_w
            + spare / shape.gpus_per_host * host_idle
        )
    pod_racks = min(shape.racks_per_pod, shape.racks)
    frac = pod_racks / max(racks_stage.sum(), 1e-9)
    pod = (rack_w * (racks_stage * frac)[:, None]).sum(axis=0)
    return Timeline(
        shape=shape,
        dt_s=dt_s,
        iteration_s=sw.iteration_s,
        gpu_w=sw.power_w,
        rack_w=rack_w,
        racks_per_stage=racks_stage,
        site_w=site,
        pod_w=pod,
        host_train_w=host_train,
        host_idle_w=host_idle,
        elapsed_s=time.perf_counter() - t0,
        extra={"idle_fraction": model.idle_fraction},
    )


def run_waveform(tl: Timeline, run: RunSpec, dt_s: float = 0.1) -> tuple[Array, float]:
    """A coarser view of a run: iterations (their mean and swing resampled at dt), checkpoints
    every `checkpoint_every` iterations with the GPUs idle, job start and stop."""
    k = max(1, int(round(dt_s / tl.dt_s)))
    usable = (tl.site_w.size // k) * k
    it = tl.site_w[:usable].reshape(-1, k).mean(axis=1) if usable else tl.site_w.copy()
    sh = tl.shape
    idle = tl.summary()["site_idle_w"]
    ck = np.full(max(1, int(round(run.checkpoint_s / dt_s))), idle)
    pieces = [np.full(max(1, int(round(10.0 / dt_s))), idle)]  # before the job starts
    for i in range(run.iterations):
        pieces.append(it)
        if (i + 1) % run.checkpoint_every == 0 and run.checkpoint_s > 0:
            pieces.append(ck)
    pieces.append(np.full(max(1, int(round(10.0 / dt_s))), idle))  # after it stops
    del sh
    return np.concatenate(pieces), dt_s


def write_counter_trace(tl: Timeline, path: str, max_points: int = 20000) -> str:
    """A Perfetto counter track per level (site, first pod, a rack of each stage, a GPU)."""
    from starfabric.report.trace import ChromeTrace

    tr = ChromeTrace()
    n = tl.site_w.size
    step = max(1, math.ceil(n / max_points))
    for i in range(0, n, step):
        t = i * tl.dt_s
        tr.counter("site", "site power (MW)", t, {"MW": float(tl.site_w[i] / 1e6)})
        tr.counter("pod 0", "pod power (MW)", t, {"MW": float(tl.pod_w[i] / 1e6)})
        for s in range(tl.rack_w.shape[0]):
            tr.counter(f"stage {s}", "rack power (kW)", t, {"kW": float(tl.rack_w[s, i] / 1e3)})
            tr.counter(f"stage {s}", "GPU power (W)", t, {"W": float(tl.gpu_w[s, i])})
    tr.write(path)
    return path


def write_png(tl: Timeline, path: str, smoothed: dict[str, Array] | None = None) -> str:
    """Site power over one iteration (and after each smoothing option), and one rack per stage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from starfabric.outputs import save_figure

    t = tl.t_s
    fig, (a0, a1) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    a0.plot(t, tl.site_w / 1e6, lw=0.8, label="site (no smoothing)")
    for name, w in (smoothed or {}).items():
        a0.plot(t, w / 1e6, lw=0.8, label=name)
    a0.set_ylabel("site MW")
    a0.legend(loc="lower right", fontsize=7)
    a0.set_title(f"{tl.shape.gpus:,} x {tl.shape.gpu}: one iteration at {tl.dt_s * 1e3:g} ms")
    for s in range(tl.rack_w.shape[0]):
        a1.plot(t, tl.rack_w[s] / 1e3, lw=0.6, label=f"rack of stage {s}")
    a1.set_ylabel("rack kW")
    a1.set_xlabel("s")
    if tl.rack_w.shape[0] <= 8:
        a1.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    out = save_figure(fig, path, dpi=110)
    plt.close(fig)
    return str(out)
