"""Seer's one communication contract, `CommModel`, and its formula implementation.

`CommModel.time(kind, nbytes, group)` is the seconds of one collective on a parallel group of
the job's layout ("tp", "cp", "cp_a2a", "cp_p2p", "dp", "dp_cp", "pp", "etp", "ep", "edp", "fsdp_dp", "fsdp_edp",
and under hybrid sharding "dp_shard" / "dp_replica").
`FormulaComm` prices it with hierarchical alpha-beta and NCCL bus-bandwidth factors: a group
inside one node runs at NVLink bus bandwidth; a group that spans nodes is limited by the NICs
(one rail per GPU) of its members on each node. `simcomm.SimulatedComm` runs the same calls on a
built topology; `simcomm.comm_model` picks one of the two for a job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer.deepep_kernels import (
    DEEPEP_NUM_SMS,
    deepep_internode_time,
    deepep_intranode_time,
    deepep_nvlink_bytes_per_s,
    rank_copy_fraction,
)
from starfabric.astral.seer.deepep_sm_budget import nvlink_ceiling
from starfabric.astral.seer.efficiency import Efficiency
from starfabric.astral.seer.expert_comm import remote_copy_fraction
from starfabric.astral.seer.fabric import (
    COLLECTIVE_LAUNCH_S,
    NIC_STEP_LATENCY_S,
    NVLINK_STEP_LATENCY_S,
    Fabric,
    Group,
)
from starfabric.astral.seer.hybridep_rate import hybridep_rates
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, cp_split, zero_shard
from starfabric.astral.seer.round_robin_routing import round_robin_copy_fraction
from starfabric.errors import ConfigError, InvariantError

Kind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]
Phase = Literal["dispatch", "combine"]
"""Which half of an expert all-to-all (DeepEP dispatch or combine) a collective is."""


class CommModel(Protocol):
    """Seconds of one collective of `kind` over `nbytes` (the full buffer: AR buffer, AG output,
    RS input, A2A send buffer, P2P message) on parallel group `group` of the job's layout.
    `phase`/`fp8` describe an expert all-to-all (models that route tokens use them)."""

    def time(
        self, kind: Kind, nbytes: float, group: str, *, phase: Phase | None = None,
        fp8: bool = False,
    ) -> float: ...  # fmt: skip


def place_group(size: int, stride: int, gpus_per_node: int) -> Group:
    """Group of `size` ranks whose members are `stride` ranks apart (Megatron rank order)."""
    if size < 1 or stride < 1:
        raise ConfigError(f"group size {size} / stride {stride} must be >= 1", fix="use >= 1")
    per_node = 1 if stride >= gpus_per_node else max(1, min(size, gpus_per_node // stride))
    return Group(size=size, per_node=per_node)


_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "p2p": lambda n: 1.0,
}


def collective_time(kind: Kind, nbytes: float, group: Group, fabric: Fabric) -> float:
    """Seconds for one collective over `nbytes` (the full buffer: AR buffer, AG output, RS input,
    A2A send buffer, P2P message) on `group`."""
    n = group.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    if kind not in _FACTOR:
        raise ConfigError(f"unknown collective {kind!r}", fix=f"use one of {sorted(_FACTOR)}")
    factor = _FACTOR[kind](n)
    g, nodes = group.per_node, group.nodes
    nvl_bw, nic_bw, a_nvl, a_nic = fabric.tiers(kind)
    if kind == "p2p":
        bw = nvl_bw if nodes == 1 else nic_bw
        lat = NVLINK_STEP_LATENCY_S if nodes == 1 else NIC_STEP_LATENCY_S
        return COLLECTIVE_LAUNCH_S + lat + nbytes / bw
    if nodes == 1:
        steps = (2 if kind == "all_reduce" else 1) * (n - 1)
        lat = steps * NVLINK_STEP_LATENCY_S + COLLECTIVE_LAUNCH_S if a_nvl < 0 else a_nvl
        return lat + factor * nbytes / nvl_bw
    if kind == "all_to_all":
        # Each rank sends (n-g)/n of its buffer over its own NIC and (g-1)/n over NVLink.
        inter = nbytes * (n - g) / n / nic_bw
        intra = nbytes * (g - 1) / n / nvl_bw
        lat = COLLECTIVE_LAUNCH_S + NIC_STEP_LATENCY_S * np.log2(n) if a_nic < 0 else a_nic
        return float(lat + max(inter, intra))
    # Rings cross each node boundary once per channel; a node's g NICs carry the ring traffic.
    bus = min(nvl_bw, g * nic_bw)
    steps = (2 if kind == "all_reduce" else 1) * (nodes - 1)
    lat = steps * NIC_STEP_LATENCY_S + (g - 1) * NVLINK_STEP_LATENCY_S + COLLECTIVE_LAUNCH_S
    return (lat if a_nic < 0 else a_nic) + factor * nbytes / bus


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


PER_PARAMETER_RAILS = 1
"""NICs per GPU that per-parameter ZeRO-3 collectives use (assumption, calibrated on Narayanan
et al. SC'21 Table 2, where ZeRO-3 stops scaling at fixed batch): DeepSpeed 2021 gathered every
rank's slice of every tensor over all DP ranks, so each GPU's 3Ψ stream (Rajbhandari et al.
SC'20 §7) runs at one NIC's rate, not the node-aggregate rate of flat-buffer FSDP and Megatron's
rail-aligned groups."""


def nvlink_domain(gpus_per_node: int, gpu: GPUSpec, gpus: int) -> int:
    """GPUs one NVLink fabric joins: the node, or on NVL72 racks (GB200/GB300) the 72 GPUs
    of the rack although a tray holds 4 — groups are placed on this domain."""
    if gpu.nvlink_domain is None:
        return gpus_per_node
    return max(gpus_per_node, min(gpu.nvlink_domain, gpus))


def layout_groups(ex: ExecutionSpec, lay: Layout) -> dict[str, Group]:
    """Every parallel group of the layout placed in Megatron rank order (TP fastest, then CP,
    DP, PP; experts as ETP, EP, EDP), with ZeRO-3/FSDP parameter groups named apart."""
    gpn = nvlink_domain(lay.gpus_per_node, lay.gpu, lay.gpus)
    groups = {
        "tp": place_group(lay.tp, 1, gpn),
        "cp": place_group(lay.cp, lay.tp, gpn),
        "dp": place_group(lay.dp, lay.tp * lay.cp, gpn),
        "pp": place_group(lay.pp, lay.tp * lay.cp * lay.dp, gpn),
        "etp": place_group(lay.etp, 1, gpn),
        "ep": place_group(lay.ep, lay.etp, gpn),
        "edp": place_group(lay.edp, lay.etp * lay.ep, gpn),
    }
    # Hierarchical CP (TE a2a+p2p, cp_comm.py): the all-to-all level is the first a2a
    # adjacent CP ranks, the ring level the CP ranks a2a apart (Megatron's
    # `create_hierarchical_groups`).
    a2a, ring = cp_split(ex, lay)
    groups["cp_a2a"] = place_group(a2a, lay.tp, gpn)
    groups["cp_p2p"] = place_group(ring, lay.tp * a2a, gpn)
    # Gradients of a CP run reduce over DP x CP: every rank with the same TP index, i.e.
    # gpn / tp of them per node (only the CP ranks of a node when tp * cp >= gpn).
    groups["dp_cp"] = place_group(lay.dp * lay.cp, lay.tp, gpn)
    # Hybrid sharding (parallel.zero_shard): ZeRO's shard group is the k nearest DP ranks,
    # its replicas (the ranks holding the same shard) are k DP ranks apart.
    k = zero_shard(ex, lay)
    groups["dp_shard"] = place_group(k, lay.tp * lay.cp, gpn)
    groups["dp_replica"] = place_group(lay.dp // k, lay.tp * lay.cp * k, gpn)
    # ZeRO-3/FSDP parameter collectives run on the DP (shard) groups (named apart for their
    # overlap); per-parameter gathers carry each GPU's stream at one NIC's rate (see
    # PER_PARAMETER_RAILS). With CP the shard group is DP x CP, as the memory model assumes
    # (`memory.memory_report`): the CP ranks hold different tokens' gradients of the same
    # parameters, so ZeRO-3 partitions and reduce-scatters over both (TorchTitan's FSDP mesh
    # `dp_shard_cp`; DeepSpeed ZeRO-3 over the whole data-parallel world, Ulysses SP ranks
    # included, as XTuner and DeepSpeed-Ulysses run it).
    for name, src in (("dp", "dp_shard" if lay.cp == 1 else "dp_cp"), ("edp", "edp")):
        g = groups[src]
        per_param = ex.fsdp_collectives == "parameter" and g.nodes > 1
        groups[f"fsdp_{name}"] = Group(g.size, PER_PARAMETER_RAILS) if per_param else g
    return groups


@dataclass(frozen=True)
class FormulaComm:
    """`CommModel` from bus-bandwidth formulas on the layout's placed groups."""

    fabric: Fabric
    groups: Mapping[str, Group]
    ep_copy_fraction: float = 0.0
    """With a node-deduplicating dispatcher (DeepEP), the inter-host bytes of an expert
    all-to-all as a fraction of NCCL's (`expert_comm.remote_copy_fraction`); 0: NCCL."""
    ep_rank_fraction: float = 0.0
    """With DeepEP, the bytes of its per-rank deduplicated NVLink copies as a fraction of the
    k (token, expert) copies (`deepep_kernels.rank_copy_fraction`); 0: NCCL."""
    ep_nvlink_bytes_per_s: float = 0.0
    """With DeepEP, the rate its kernels move NVLink bytes (`deepep_kernels.
    deepep_nvlink_bytes_per_s`: NVLink, or what its SM budget copies)."""
    ep_sms: int = DEEPEP_NUM_SMS
    """SMs DeepEP's kernels run on (`ExecutionSpec.deepep_num_sms`)."""
    ep_hybridep_rates: tuple[float, float] | None = None
    """With the HybridEP backend on an EP group inside one NVLink-5 domain, its measured
    in-training (dispatch, combine) rates (`hybridep_rate.hybridep_rates`: kernel only, BF16),
    in place of `ep_nvlink_bytes_per_s`; None: DeepEP V1's rate."""

    def time(
        self, kind: Kind, nbytes: float, group: str, *, phase: Phase | None = None,
        fp8: bool = False,
    ) -> float:  # fmt: skip
        """Seconds of one collective on `group` (see `CommModel`); an expert all-to-all
        (phase given) under DeepEP is deduplicated per node across nodes and per rank on
        NVLink (`deepep_kernels`)."""
        grp = self.groups.get(group)
        if grp is None:
            raise InvariantError(f"no parallel group {group!r}", fix="report a bug")
        if self.ep_copy_fraction > 0 and phase is not None and grp.nodes > 1:
            return deepep_internode_time(nbytes, grp, self.fabric, self.ep_nvlink_bytes_per_s,
                                         self.ep_copy_fraction, self.ep_rank_fraction,
                                         fp8, self.ep_sms)  # fmt: skip
        if self.ep_rank_fraction > 0 and phase is not None and grp.size > 1:
            rate = self.ep_nvlink_bytes_per_s
            if self.ep_hybridep_rates is not None:
                if fp8:
                    raise InvariantError(
                        "HybridEP dispatch priced in FP8", fix="Megatron-Core's HybridEP "
                        "dispatches BF16 (hybridep_rate.HYBRIDEP_FP8_DISPATCH); report a bug"
                    )  # fmt: skip
                dispatch, combine = self.ep_hybridep_rates
                rate = combine if phase == "combine" else dispatch
            return deepep_intranode_time(nbytes, grp, rate, self.ep_rank_fraction, fp8)
        return collective_time(kind, nbytes, grp, self.fabric)


def formula_comm(
    ex: ExecutionSpec, lay: Layout, eff: Efficiency, model: ModelSpec | None = None
) -> FormulaComm:
    """The formula model of one job: its placed groups on the GPU's NVLink and NIC rates
    (and, for an MoE `model` under the DeepEP dispatcher, its per-node deduplication)."""
    fabric = make_fabric(lay.gpu.nvlink_gbps * 1e9, lay.nic_bytes_per_s, eff)
    groups = layout_groups(ex, lay)
    frac = rank_frac = nvl = 0.0
    hybrid: tuple[float, float] | None = None
    if model is not None and model.is_moe and ex.moe_dispatcher == "deepep" and lay.ep > 1:
        nodes = groups["ep"].nodes
        if ex.moe_round_robin_routing:
            # TorchTitan's round-robin forced balance: k neighbouring experts per token.
            frac = round_robin_copy_fraction(model.moe_experts, model.moe_topk, nodes)
            rank_frac = round_robin_copy_fraction(model.moe_experts, model.moe_topk, lay.ep)
        else:
            frac = remote_copy_fraction(model.moe_experts, model.moe_topk, nodes,
                                        model.moe_max_nodes)  # fmt: skip
            rank_frac = rank_copy_fraction(model.moe_experts, model.moe_topk, lay.ep)
        ranks = groups["ep"].per_node  # destination ranks of the NVLink copies
        link = fabric.tiers("all_to_all")[0]
        # DeepEP V1's own kernels on NVLink 5 (deepep_sm_budget); a fused dispatch-compute-
        # combine backend (DistMoE) is another kernel and keeps the link's rate.
        ceiling = nvlink_ceiling(lay.gpu.nvlink_gbps)
        if ceiling is not None and not ex.moe_fused_dispatch:
            link = min(link, ceiling)
        nvl = deepep_nvlink_bytes_per_s(link, ranks, ex.deepep_num_sms)
        if ex.moe_flex_backend == "hybridep" and ceiling is not None and nodes == 1:
            # HybridEP's own kernels, measured on GB200 (hybridep_rate: kernel only, BF16).
            hybrid = hybridep_rates(lay.ep, ex.deepep_num_sms)
    return FormulaComm(fabric, groups, frac, rank_frac, nvl, ex.deepep_num_sms, hybrid)
