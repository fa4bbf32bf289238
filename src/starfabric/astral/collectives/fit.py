"""Fit a fabric on one nccl-tests log (all_reduce), then predict the other collectives.

Model of one collective call (times in seconds):

    t(op, S) = launch_s + fill_s[pipeline] + T_flow(op, S; nvlink_eff, nic_eff)

* `T_flow` is the flow simulator on a small topology of the hardware (rail-matched NICs, one
  NVSwitch per node) whose NVLink and NIC capacities are the catalog rates times an achievable
  fraction. NCCL pipelines its steps (slices flow through every stage at once), so the plan's
  steps are run as one concurrent step carrying each pair's total bytes.
* `launch_s` is the latency floor measured on the log's small sizes (kernel launch, LL protocol).
* `fill_s` is the pipeline fill and drain of the large-message protocol, fitted on the large
  sizes. It belongs to a pipeline: everything inside one node shares the NVLink copy pipeline;
  across nodes each algorithm (tree, ring, p2p) has its own, and a pipeline the fit never saw
  gets no fill (assumption: its fill is small against the bandwidth time at >= 64 MiB).

Below ~1 MiB NCCL switches to its LL/LL128 protocols, which have no large-slice fill; the model
charges the fill at every size, so it overestimates small-message times (its accuracy claims
are at >= 64 MiB). Only the bottleneck's fraction is identifiable from an all_reduce: NVLink
inside one node, the NIC across nodes (the other keeps its named default). Nothing is fitted
per row or per size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from pydantic import Field
from scipy.optimize import least_squares

from starfabric.astral.collectives.algorithms import alltoall, hierarchical, ring
from starfabric.astral.collectives.plan import IntArray, Plan, Step
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.nccltests import NcclRun, busbw_factor
from starfabric.astral.topology import LINK_NIC, LINK_NVLINK, ClusterSpec, Topology, build
from starfabric.config import Spec
from starfabric.errors import ConfigError, DataError

FIT_MIN_BYTES = 64 * 2**20
"""The fit and the accuracy claims use sizes >= 64 MiB (issue 5)."""

LAUNCH_MAX_BYTES = 64 * 2**10
"""Rows at or below 64 KiB measure the latency floor: bandwidth time is < 1 µs there."""

NVLINK_EFF = 0.8
"""Assumption: achievable fraction of NVLink when it is not the fitted bottleneck (8xA100
nccl-tests reach ~235 of 300 GB/s, 0.78)."""

NIC_EFF = 0.9
"""Assumption: achievable fraction of the NIC line rate when the fit cannot see the NIC."""

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")


class FabricSpec(Spec):
    """The hardware a log ran on: GPU, node count and the two rates that bound collectives."""

    name: str
    gpu: str = Field(description="GPU model, as a label (catalog name where it has one)")
    gpus_per_node: int = Field(8, ge=1, le=72)
    nodes: int = Field(1, ge=1, le=1024)
    nvlink_gbyte_s: float = Field(
        gt=0, description="NVLink per GPU per direction, GB/s (catalog nvlink_gbps)"
    )
    nic_gbit_s: float = Field(gt=0, description="NIC line rate per GPU, Gb/s")

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True)
class FabricParams:
    """The physical parameters of a fabric (fitted or assumed), printed with `describe`."""

    nvlink_eff: float = NVLINK_EFF
    nic_eff: float = NIC_EFF
    launch_s: float = 0.0
    fill_s: float = 0.0
    fill_pipeline: str = ""

    def describe(self) -> str:
        pipe = self.fill_pipeline or "none"
        return (
            f"nvlink_eff={self.nvlink_eff:.3f} nic_eff={self.nic_eff:.3f} "
            f"launch={self.launch_s * 1e6:.1f}us fill={self.fill_s * 1e6:.1f}us ({pipe})"
        )


@dataclass(frozen=True)
class FabricFit:
    """A fit: its parameters, what was fitted, and the fitted curve's worst error."""

    spec: FabricSpec
    params: FabricParams
    fitted: tuple[str, ...]
    max_rel_err: float


def fabric_topology(spec: FabricSpec) -> Topology:
    """A small topology of `spec`: rail-matched NICs at the stated rate, one NVSwitch per node."""
    cluster = ClusterSpec(
        name=spec.name,
        topology="rail-only",
        switch="25.6T",
        port_speed="400G",
        nic="CX7-400G",
        dual_tor=False,
        gpus_per_host=spec.gpus_per_node,
        gpus=spec.gpus,
    )
    topo = build(cluster)
    cap = topo.link_capacity_bps.copy()
    lo, hi = topo.links_of_kind(LINK_NIC)
    cap[lo:hi] = spec.nic_gbit_s * 1e9
    lo, hi = topo.links_of_kind(LINK_NVLINK)
    cap[lo:hi] = spec.nvlink_gbyte_s * 8e9
    return _with_capacity(topo, cap)


def _with_capacity(topo: Topology, cap: npt.NDArray[np.float64]) -> Topology:
    cap.flags.writeable = False
    return replace(topo, link_capacity_bps=cap)


def derate(topo: Topology, nvlink_eff: float, nic_eff: float) -> Topology:
    """`topo` with NVLink and NIC links at the given achievable fractions of their rate."""
    for name, v in (("nvlink_eff", nvlink_eff), ("nic_eff", nic_eff)):
        if not 0 < v <= 1:
            raise ConfigError(f"{name} = {v}; must be in (0, 1]", fix="use a fraction like 0.9")
    cap = topo.link_capacity_bps.copy()
    lo, hi = topo.links_of_kind(LINK_NVLINK)
    cap[lo:hi] *= nvlink_eff
    lo, hi = topo.links_of_kind(LINK_NIC)
    cap[lo:hi] *= nic_eff
    return _with_capacity(topo, cap)


def _rail_rings(op: str, n: int, size: float, local: int) -> Plan:
    """NCCL's multi-node ring: one channel per rail, each entering and leaving nodes rail-matched.

    Channel c walks node 0 from local c to c−1, crosses to the same rail of the next node,
    walks it backwards and so on, so every NIC carries exactly one channel per direction and
    busbw reaches the per-node NIC rate (what 2-node all_gather logs show).
    """
    hosts = n // local
    k = np.arange(local, dtype=np.int64)
    srcs, dsts, chans = [], [], []
    for c in range(local):
        order = []
        for h in range(hosts):
            lr = (c + k) % local if h % 2 == 0 else (c + local - 1 - k) % local
            order.append(h * local + lr)
        ring_c = np.concatenate(order)
        srcs.append(ring_c)
        dsts.append(np.roll(ring_c, -1))
        chans.append(np.full(n, c, np.int64))
    per_edge = (n - 1) * size / n / local
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    step = Step(src, dst, np.full(len(src), per_edge), np.concatenate(chans), "rail-rings")
    return Plan(op, "ring", n, size, (step,), busbw_factor(op, n))


def nccl_plan(op: str, n: int, size: float, local: int) -> Plan:
    """The algorithm NCCL picks for large messages, per op and scale.

    One node: ring (all ops but alltoall) over NVLink; alltoall: direct. Across nodes:
    all_reduce as NVLS/tree (intra-node reduce-scatter, double binary tree per rail, intra-node
    all-gather: ~2x the per-node NIC rate at 2 nodes), all_gather/reduce_scatter as rail-matched
    rings (busbw = per-node NIC rate), alltoall with PXN.
    """
    if op not in OPS:
        raise ConfigError(f"op {op!r}", fix=f"use one of: {', '.join(OPS)}")
    if local < 1 or n % local:
        raise ConfigError(f"gpus {n} not a multiple of gpus per node {local}", fix="whole nodes")
    nodes = n // local
    if op == "alltoall":
        return alltoall(n, size, local=local, pxn=nodes > 1)
    if nodes == 1 or local == 1:
        return ring(op, n, size)
    if op == "all_reduce":
        return hierarchical(op, n, size, local, inter="tree")
    return _rail_rings(op, n, size, local)


def pipelined(plan: Plan) -> Plan:
    """All of a plan's steps as one concurrent step with each pair's total bytes (NCCL's pipeline)."""
    if len(plan.steps) == 1 and plan.steps[0].repeat == 1 and plan.steps[0].scale == 1.0:
        return plan
    st = plan.steps

    def via(s: Step) -> IntArray:
        return np.full(len(s), -1, np.int64) if s.via is None else s.via

    step = Step(
        np.concatenate([s.src for s in st]),
        np.concatenate([s.dst for s in st]),
        np.concatenate([s.size_bytes * s.repeat * s.scale for s in st]),
        np.concatenate([s.qp for s in st]),
        "pipelined",
        via=np.concatenate([via(s) for s in st]),
    )
    return Plan(plan.op, plan.algorithm, plan.ranks, plan.size_bytes, (step,), plan.bus_factor)


def pipeline_of(op: str, n: int, local: int) -> str:
    """Which protocol pipeline an op's algorithm runs on (fill is shared within one)."""
    if n // local <= 1:
        return "nvlink"
    return nccl_plan(op, n, 1.0, local).algorithm


def predict_time_s(
    topo: Topology, op: str, size: float, gpus: int, local: int, params: FabricParams
) -> float:
    """Predicted time of one call on an already derated topology."""
    plan = pipelined(nccl_plan(op, gpus, size, local))
    res = run_plan(topo, plan, step_latency_s=0.0)
    fill = params.fill_s if pipeline_of(op, gpus, local) == params.fill_pipeline else 0.0
    return params.launch_s + fill + res.time_s


@dataclass(frozen=True)
class SweepRow:
    """One nccl-tests-style row: size (B), time (µs), algbw and busbw (GB/s)."""

    size_bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


def sweep(
    topo: Topology,
    op: str,
    gpus: int,
    sizes: npt.ArrayLike,
    params: FabricParams | None = None,
    local: int | None = None,
) -> list[SweepRow]:
    """Predicted nccl-tests table for `op` over `gpus` GPUs (GPU ids 0..gpus−1) of `topo`."""
    p = params or FabricParams()
    loc = int(topo.meta.get("rails", 1)) if local is None else local
    if gpus < 2 or gpus > topo.n_gpus:
        raise ConfigError(
            f"gpus = {gpus}; the topology has {topo.n_gpus}", fix=f"use 2..{topo.n_gpus}"
        )
    loc = loc if gpus % loc == 0 else 1
    t = derate(topo, p.nvlink_eff, p.nic_eff)
    rows = []
    for s in np.asarray(sizes, np.int64).ravel():
        if s <= 0:
            raise ConfigError(f"size = {s}", fix="use positive sizes")
        time_s = predict_time_s(t, op, float(s), gpus, loc, p)
        alg = float(s) / time_s / 1e9
        rows.append(SweepRow(int(s), time_s * 1e6, alg, alg * busbw_factor(op, gpus)))
    return rows


def format_table(rows: list[SweepRow]) -> str:
    """The rows as nccl-tests prints them (size, time, algbw, busbw)."""
    out = [f"{'size':>13} {'time':>11} {'algbw':>8} {'busbw':>8}"]
    out.append(f"{'(B)':>13} {'(us)':>11} {'(GB/s)':>8} {'(GB/s)':>8}")
    out += [
        f"{r.size_bytes:>13} {r.time_us:>11.1f} {r.algbw_gbps:>8.2f} {r.busbw_gbps:>8.2f}"
        for r in rows
    ]
    return "\n".join(out)


def measured_launch_s(run: NcclRun) -> float:
    """Median out-of-place time of the rows <= 64 KiB, or 0 when the log has none."""
    small = run.time_us[run.size_bytes <= LAUNCH_MAX_BYTES]
    return float(np.median(small)) * 1e-6 if len(small) else 0.0


def fit_fabric(spec: FabricSpec, run: NcclRun, min_bytes: int = FIT_MIN_BYTES) -> FabricFit:
    """Least squares on busbw (relative) at sizes >= min_bytes of an all_reduce log.

    Fits the bottleneck's achievable fraction (NVLink in one node, NIC across nodes) and the
    pipeline fill; the launch latency comes from the small sizes.
    """
    if run.collective != "all_reduce":
        raise DataError(f"fit: {run.path} is {run.collective}", fix="fit on an all_reduce log")
    if run.ranks != spec.gpus:
        raise DataError(
            f"fit: {run.path} has {run.ranks} ranks but {spec.name} has {spec.gpus} GPUs",
            fix="describe the hardware the log ran on",
        )
    big = run.at_least(min_bytes)
    if len(big) < 2:
        raise DataError(f"fit: {run.path} has < 2 rows >= {min_bytes} B", fix="use a full log")
    topo = fabric_topology(spec)
    local = spec.gpus_per_node
    multi = spec.nodes > 1
    launch = measured_launch_s(run)
    pipe = pipeline_of("all_reduce", spec.gpus, local)
    sizes = big.size_bytes.astype(np.float64)
    meas = big.busbw_mean_gbps  # both columns, as nccl-tests' average

    def params_of(x: npt.NDArray[np.float64]) -> FabricParams:
        eff, fill_us = float(x[0]), float(x[1])
        if multi:
            return FabricParams(NVLINK_EFF, eff, launch, fill_us * 1e-6, pipe)
        return FabricParams(eff, NIC_EFF, launch, fill_us * 1e-6, pipe)

    def predict(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        p = params_of(x)
        t = derate(topo, p.nvlink_eff, p.nic_eff)
        ts = np.array([predict_time_s(t, "all_reduce", s, spec.gpus, local, p) for s in sizes])
        return sizes / ts / 1e9 * busbw_factor("all_reduce", spec.gpus)

    sol = least_squares(
        lambda x: (predict(x) - meas) / meas,
        x0=np.array([0.8, 10.0]),
        bounds=([1e-3, 0.0], [1.0, 1e6]),
        diff_step=1e-3,
    )
    rel = float((np.abs(predict(sol.x) - meas) / meas).max())
    fitted = ("nic_eff" if multi else "nvlink_eff", "fill_s")
    return FabricFit(spec, params_of(sol.x), fitted, rel)


#: Predicted-vs-measured busbw error beyond which a log is called anomalous (issue 5's bound).
ANOMALY_REL_ERR = 0.15


def fit_verdict(signed_err: npt.ArrayLike) -> str:
    """'ok' when every row is within ANOMALY_REL_ERR of the fitted fabric; otherwise which way
    it misses: measured far below the model is the signature of a degraded collective (a
    fault the physics of a healthy fabric does not have, e.g. nccl-tests#78's alltoall)."""
    e = np.asarray(signed_err, np.float64)
    if not len(e) or np.abs(e).max() <= ANOMALY_REL_ERR:
        return "ok"
    worst = float(e[np.argmax(np.abs(e))])
    side = "below" if worst > 0 else "above"
    return f"anomaly: measured {side} the fitted fabric (model {worst:+.0%})"


def predict_run(fit: FabricFit, op: str, sizes: npt.ArrayLike) -> list[SweepRow]:
    """Predicted table of `op` on the fitted hardware at `sizes`."""
    spec = fit.spec
    return sweep(fabric_topology(spec), op, spec.gpus, sizes, fit.params, local=spec.gpus_per_node)


KNOWN_FABRICS: dict[str, FabricSpec] = {
    "superbench_1node_8xa100": FabricSpec(
        name="superbench-8xA100",
        gpu="A100-SXM4-40GB",
        nodes=1,
        nvlink_gbyte_s=300.0,
        nic_gbit_s=200.0,
    ),
    "gcp_a3mega_2node_h100": FabricSpec(
        name="gcp-a3-mega", gpu="H100-SXM", nodes=2, nvlink_gbyte_s=450.0, nic_gbit_s=200.0
    ),
    "nccl-tests_issue78_8node_v100": FabricSpec(
        name="v100-issue78", gpu="V100-SXM2", nodes=8, nvlink_gbyte_s=150.0, nic_gbit_s=12.5
    ),
}
"""Hardware of the nccl-tests logs with more than one collective (tests/data/nccl_tests/
SOURCES.md), keyed by file-name prefix. A100 and H100 NVLink rates are the catalog's (300 and
450 GB/s per direction); A3 Mega has 8x200 Gb/s NICs per node (GCP docs). V100 SXM2 NVLink2 is
150 GB/s per direction; assumption: #78's "IB 100G" is one 100 Gb/s NIC per node, shared by
its 8 GPUs (12.5 Gb/s each); assumption: its hybrid-cube-mesh NVLink is modelled as a switch."""


def fabric_for(path: str) -> FabricSpec:
    """The known hardware of a log file (by its name), or a DataError naming the choices."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    for prefix, spec in KNOWN_FABRICS.items():
        if name.startswith(prefix):
            return spec
    raise DataError(f"no known hardware for {name}", fix=f"name one of: {', '.join(KNOWN_FABRICS)}")
