"""Time of every operator in an OpTable: roofline compute, HBM-bound kernels, collectives.

Compute kernels are timed with the shape-aware efficiency model; collectives with the
hierarchical model of `comm.py` on the group's placement, or — when the job names a topology —
with the collectives models on the placed ranks (`topocoll.py`). With TP communication overlap
(Megatron `--tp-comm-overlap`) a TP collective hides behind the adjacent GEMM and only the
excess (plus a fixed fraction) is exposed; CP ring traffic hides behind attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from starfabric.astral.seer.comm import Fabric, Group, collective_time, place_group
from starfabric.astral.seer.efficiency import Efficiency, gemm_time, mem_time
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.ops import BMM, COMM, FLASH, GEMM, MEM, OpTable
from starfabric.astral.seer.parallel import ExecutionSpec, Layout
from starfabric.astral.seer.topocoll import GroupShape, TopologyCollectives, megatron_shapes
from starfabric.astral.seer.topocomm import TopologyComm
from starfabric.errors import InvariantError

TP_OVERLAP_RESIDUAL = 0.15
"""With TP comm overlap, this fraction of each TP collective stays exposed (pipeline fill of the
chunked overlap, SMs taken from the GEMM) — assumption."""
FP8_CAST_BYTES = 3.0
"""HBM bytes per element to quantize a GEMM's 16-bit input to FP8 (read 2, write 1); the amax
reduction rides along (Transformer Engine's cast kernels)."""
DP_OVERLAP_RESIDUAL = 0.20
"""Data-parallel collectives overlapped with compute (ZeRO-3/FSDP prefetched gathers, bucketed
gradient reduce-scatters under the backward) still cost this fraction of their hidden time:
NCCL kernels take SMs and HBM bandwidth from the GEMMs they run beside — assumption, one value
for both, calibrated on NARAYANAN21_T2 (ZeRO-3 at 384/640 GPUs, where compute and
communication are of similar size) and consistent with the Megatron-Core rows (MLM24)."""
PER_PARAMETER_RAILS = 1
"""NICs per GPU that per-parameter ZeRO-3 collectives use (assumption, calibrated on Narayanan
et al. SC'21 Table 2, where ZeRO-3 stops scaling at fixed batch): DeepSpeed 2021 gathered every
rank's slice of every tensor over all DP ranks, so each GPU's 3Ψ stream (Rajbhandari et al.
SC'20 §7) runs at one NIC's rate, not the node-aggregate rate of flat-buffer FSDP and Megatron's
rail-aligned groups."""
BF16_GEMMS = (
    "head.logits", "head.logits.dgrad", "head.logits.wgrad",
    "moe.router", "moe.router.dgrad", "moe.router.wgrad",
)  # fmt: skip
"""GEMMs an FP8 (Transformer Engine) run still executes in BF16."""
CP_OVERLAP_RESIDUAL = 0.10
"""Fraction of ring-attention KV exchange not hidden behind attention (assumption)."""


@dataclass(frozen=True)
class CostContext:
    """Everything an operator's time depends on besides its own shape."""

    peak_flops: float
    gemm_peak_flops: float
    gemm_fraction: float
    hbm_bytes_per_s: float
    eff: Efficiency
    fabric: Fabric
    groups: dict[str, Group]
    tp_comm_overlap: bool
    fp8: bool = False
    topo: TopologyComm | None = None
    moe: tuple[int, int, int, int] = (0, 0, 0, 0)
    """(hidden, experts, topk, max_nodes) for topology-simulated expert all-to-all."""
    etp: int = 1
    ep_comm_overlap: bool = False
    net: TopologyCollectives | None = None
    """Times TP/CP/DP/PP collectives on the built cluster (None: `comm.py` formulas)."""
    shapes: dict[str, GroupShape] | None = None
    """Representative placed group per parallel dimension (with `net`)."""


def make_context(
    ex: ExecutionSpec,
    lay: Layout,
    eff: Efficiency,
    topo: TopologyComm | None = None,
    model: ModelSpec | None = None,
    net: TopologyCollectives | None = None,
) -> CostContext:
    """Peaks, efficiencies and group placements for one job (`topo`: simulate the expert
    all-to-all of `model` on a built cluster; `net`: time the other collectives there)."""
    gpu = lay.gpu
    peak = gpu.tflops("bf16" if ex.precision != "fp16" else "fp16") * 1e12
    if ex.precision == "fp8":
        gemm_peak, gemm_frac = gpu.tflops("fp8") * 1e12, eff.fp8_gemm_peak_fraction
    else:
        gemm_peak, gemm_frac = peak, eff.gemm_peak_fraction
    # NVL72 racks (GB200/GB300) join 72 GPUs by NVLink although a tray holds 4: groups are
    # placed on the NVLink domain, not the node.
    gpn = lay.gpus_per_node
    if gpu.nvlink_domain is not None:
        gpn = max(gpn, min(gpu.nvlink_domain, lay.gpus))
    groups = {
        "tp": place_group(lay.tp, 1, gpn),
        "cp": place_group(lay.cp, lay.tp, gpn),
        "dp": place_group(lay.dp, lay.tp * lay.cp, gpn),
        "pp": place_group(lay.pp, lay.tp * lay.cp * lay.dp, gpn),
        "etp": place_group(lay.etp, 1, gpn),
        "ep": place_group(lay.ep, lay.etp, gpn),
        "edp": place_group(lay.edp, lay.etp * lay.ep, gpn),
    }
    # ZeRO-3/FSDP parameter collectives run on the DP groups (named apart for their overlap);
    # per-parameter gathers carry each GPU's stream at one NIC's rate (see PER_PARAMETER_RAILS).
    for name in ("dp", "edp"):
        g = groups[name]
        per_param = ex.fsdp_collectives == "parameter" and g.nodes > 1
        groups[f"fsdp_{name}"] = Group(g.size, PER_PARAMETER_RAILS) if per_param else g
    fabric = make_fabric(gpu.nvlink_gbps * 1e9, lay.nic_bytes_per_s, eff)
    return CostContext(
        peak_flops=peak,
        gemm_peak_flops=gemm_peak,
        gemm_fraction=gemm_frac,
        hbm_bytes_per_s=gpu.hbm_gbps * 1e9,
        eff=eff,
        fabric=fabric,
        groups=groups,
        tp_comm_overlap=ex.tp_comm_overlap,
        fp8=ex.precision == "fp8",
        topo=topo if (model is not None and model.is_moe) else None,
        moe=(
            (model.hidden, model.moe_experts, model.moe_topk, model.moe_max_nodes)
            if model is not None and model.is_moe
            else (0, 0, 0, 0)
        ),
        etp=lay.etp,
        ep_comm_overlap=ex.ep_comm_overlap,
        net=net,
        shapes=(
            megatron_shapes(lay.tp, lay.cp, lay.dp, lay.pp, lay.ep, lay.etp, lay.edp)
            if net is not None
            else None
        ),
    )


def comm_time(
    ctx: CostContext, kind: str, nbytes: float, group: str, fallback: Group | None = None
) -> float:
    """Seconds of one collective on parallel group `group` ("tp", "cp", "dp", "dp_cp", "pp",
    "etp", "ep", "edp"): simulated on the placed ranks when the context has a topology, else
    the bus-bandwidth formula on `fallback` (default: the context's group of that name)."""
    if ctx.net is not None and ctx.shapes is not None and group in ctx.shapes:
        if kind == "p2p" and group != "pp":
            kind = "ring_p2p"  # ring-attention KV exchange among the group's neighbours
        return ctx.net.time(kind, float(nbytes), ctx.shapes[group])
    grp = fallback if fallback is not None else ctx.groups[group]
    return collective_time(kind, nbytes, grp, ctx.fabric)  # type: ignore[arg-type]


def make_fabric(nvlink_bytes_per_s: float, nic_bytes_per_s: float, eff: Efficiency) -> Fabric:
    """Achievable bus bandwidths from link rates and (calibrated) efficiency fractions; a
    calibrated fraction of 0 means "not measured" and keeps the default."""
    per_kind = tuple(
        (
            kind,
            nvlink_bytes_per_s * (nvl or eff.nvlink_bus_fraction),
            nic_bytes_per_s * (nic or eff.nic_bus_fraction),
            a_nvl,
            a_nic,
        )
        for kind, nvl, nic, a_nvl, a_nic in eff.collective_bus_fractions
    )
    return Fabric(
        nvlink_bus_bytes_per_s=nvlink_bytes_per_s * eff.nvlink_bus_fraction,
        nic_bus_bytes_per_s=nic_bytes_per_s * eff.nic_bus_fraction,
        per_kind=per_kind,
    )


@dataclass(frozen=True)
class OpCosts:
    """Per-operator seconds: `time` is the raw duration, `exposed` what lands on the critical
    path (collectives hidden by overlap count less)."""

    time: np.ndarray[Any, np.dtype[np.float64]]
    exposed: np.ndarray[Any, np.dtype[np.float64]]
    kind: np.ndarray[Any, np.dtype[np.int64]]


def op_costs(t: OpTable, ctx: CostContext, backward: bool = False) -> OpCosts:
    """Time every operator of `t`."""
    a = t.arrays()
    kind = a["kind"]
    time = np.zeros(len(t))
    eff = ctx.eff
    g = kind == GEMM
    if ctx.fp8:
        # Transformer Engine runs FP8 only inside the transformer layers' TE linears; the
        # output layer (logits) and the MoE router stay in BF16 (Megatron-Core/NeMo, DeepSeek-V3
        # section 3.3.1), so they take the 16-bit path below.
        bf = g & np.isin(np.asarray(t.name), BF16_GEMMS)
        g = g & ~bf
        if bf.any():
            time[bf] = gemm_time(
                a["m"][bf], a["n"][bf], a["k"][bf], a["batch"][bf], ctx.peak_flops,
                ctx.hbm_bytes_per_s, eff, peak_fraction=eff.gemm_peak_fraction,
            )  # fmt: skip
    if g.any():
        time[g] = gemm_time(
            a["m"][g], a["n"][g], a["k"][g], a["batch"][g], ctx.gemm_peak_flops,
            ctx.hbm_bytes_per_s, eff, peak_fraction=ctx.gemm_fraction,
        )  # fmt: skip
        if ctx.fp8:
            # FP8 GEMMs first quantize their 16-bit activation operand (read 2 B, write 1 B).
            time[g] += mem_time(FP8_CAST_BYTES * a["m"][g] * a["k"][g] * a["batch"][g],
                                ctx.hbm_bytes_per_s, eff)  # fmt: skip
    b = kind == BMM
    if b.any():
        time[b] = gemm_time(
            a["m"][b], a["n"][b], a["k"][b], a["batch"][b], ctx.peak_flops,
            ctx.hbm_bytes_per_s, eff, peak_fraction=eff.bmm_peak_fraction,
        )  # fmt: skip
    f = kind == FLASH
    frac = eff.flash_bwd_fraction if backward else eff.flash_fwd_fraction
    time[f] = a["flops"][f] / (ctx.peak_flops * frac) + eff.kernel_overhead_s
    m = kind == MEM
    time[m] = mem_time(a["nbytes"][m], ctx.hbm_bytes_per_s, eff)
    exposed = time.copy()
    for i in np.flatnonzero(kind == COMM):
        grp = ctx.groups[t.group[i]]
        if ctx.topo is not None and t.group[i] == "ep" and t.coll[i] == "all_to_all":
            dur = _topology_alltoall(ctx, t.name[i], float(a["nbytes"][i]), grp.size)
        else:
            dur = comm_time(ctx, t.coll[i], float(a["nbytes"][i]), t.group[i], grp)
        time[i] = dur
        exposed[i] = dur
        if t.group[i] == "tp" and ctx.tp_comm_overlap:
            partner = _adjacent_gemm(kind, int(i))
            hide = time[partner] if partner >= 0 else 0.0
            exposed[i] = max(0.0, dur - hide) + TP_OVERLAP_RESIDUAL * dur
        elif t.group[i] == "cp":
            attn = _attn_time(t, time)
            exposed[i] = max(0.0, dur - attn) + CP_OVERLAP_RESIDUAL * dur
    grp_names = np.asarray(t.group)
    ep = (kind == COMM) & ((grp_names == "ep") | (grp_names == "etp"))
    if ctx.ep_comm_overlap and ep.any():
        # Two micro-batches interleaved (DualPipe / A2A overlap): one's dispatch/combine runs
        # under the other's attention and expert GEMMs; the excess stays exposed.
        total = float(time[ep].sum())
        compute = float(time[kind != COMM].sum())
        exposed[ep] = time[ep] * (max(0.0, total - compute) / total if total > 0 else 0.0)
    fsdp = (kind == COMM) & ((grp_names == "fsdp_dp") | (grp_names == "fsdp_edp"))
    if fsdp.any():
        # ZeRO-3 gathers/reductions are prefetched on their own stream: together they hide
        # behind the layer's compute; only the excess stays on the critical path.
        total = float(time[fsdp].sum())
        compute = float(time[kind != COMM].sum())
        hidden = min(total, compute)
        excess = total - hidden + DP_OVERLAP_RESIDUAL * hidden
        exposed[fsdp] = time[fsdp] * (excess / total if total > 0 else 0.0)
    return OpCosts(time=time, exposed=exposed, kind=kind)


def _topology_alltoall(ctx: CostContext, name: str, nbytes: float, ranks: int) -> float:
    """Expert dispatch/combine simulated on the cluster; a backward pass moves gradients the
    opposite way (dispatch's backward travels like a combine, in 16 bit)."""
    if ctx.topo is None:
        raise InvariantError("topology all-to-all without a topology", fix="report a bug")
    h, experts, topk, max_nodes = ctx.moe
    tokens = max(1, round(nbytes / (2.0 * topk * h)))
    forward_dispatch = "dispatch" in name and not name.endswith(".bwd")
    phase: Literal["dispatch", "combine"] = (
        "dispatch" if ("dispatch" in name) != name.endswith(".bwd") else "combine"
    )
    return ctx.topo.moe_alltoall_s(
        ranks=ranks, stride=ctx.etp, tokens_per_rank=tokens, hidden=h, experts=experts,
        topk=topk, max_nodes=max_nodes, fp8=ctx.fp8 and forward_dispatch, phase=phase,
    )  # fmt: skip


def _adjacent_gemm(kind: np.ndarray[Any, Any], i: int) -> int:
    """Index of the GEMM next to collective `i` (the one it is fused with under overlap)."""
    for j in (i + 1, i - 1, i + 2, i - 2):
        if 0 <= j < len(kind) and kind[j] == GEMM:
            return j
    return -1


def _attn_time(t: OpTable, time: np.ndarray[Any, Any]) -> float:
    kind = np.asarray(t.kind)
    return float(time[(kind == FLASH) | (kind == BMM)].sum())
