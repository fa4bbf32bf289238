"""The paper's network claims side by side: same-rail 3-tier vs fat-tree vs rail-only vs
dual-plane (the four designs `astral topo compare` builds).

At equal GPU count, each design runs (1) a data-parallel all-reduce (NCCL-style hierarchical:
NVLink inside the host, one ring per rail across hosts), (2) an all-to-all such as MoE
expert parallelism produces (PXN: cross-rail bytes hop over NVLink first, as NCCL does on
rail-optimized fabrics; rail-only forwards the same way by construction), each with per-switch
ECMP hashing and with polarized hashing (the same hash at every tier). Reported: time, bus
bandwidth, and the load imbalance (max / mean bytes over the network links used).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.progress import Progress

from starfabric.astral.collectives.algorithms import alltoall, hierarchical
from starfabric.astral.collectives.run import run_plan
from starfabric.astral.topology import ClusterSpec, build
from starfabric.errors import InfeasibleError

DESIGNS = ("astral", "fat-tree", "rail-only", "dual-plane")
A2A_FLOWS = 65_536
"""Assumption: flows simulated per all-to-all (a sample of its shifts, scaled to the whole)."""
REL_TOL = 0.02
"""Assumption: FlowSim completion tolerance for the large all-to-all steps (time error < 2%)."""


@dataclass(frozen=True)
class CompareRow:
    design: str
    workload: str  # "dp-allreduce" or "alltoall"
    polarized: bool
    gpus: int
    time_ms: float
    busbw_gbps: float
    imbalance: float  # max / mean bytes over used network links, worst step
    feasible: bool = True
    reason: str = ""


def compare_designs(
    spec: ClusterSpec,
    *,
    allreduce_bytes: float = 2**30,
    alltoall_bytes: float = 2**30,
    designs: tuple[str, ...] = DESIGNS,
    seed: int = 0,
    progress: bool = False,
) -> list[CompareRow]:
    """Run both workloads on every design at the spec's GPU count (built per design)."""
    base = spec.model_dump()
    rows: list[CompareRow] = []
    with Progress(disable=not progress) as bar:
        task = bar.add_task("designs", total=len(designs) * 4)
        gpus = 0
        for design in designs:
            want = dict(base, topology=design)
            if design != spec.topology or spec.pods is None:
                want["pods"] = None
            try:
                if gpus == 0:
                    topo = build(ClusterSpec(**want))
                    gpus = topo.n_gpus
                else:
                    want["gpus"] = gpus
                    want["pods"] = None
                    topo = build(ClusterSpec(**want))
            except InfeasibleError as exc:
                for wl in ("dp-allreduce", "alltoall"):
                    for pol in (False, True):
                        rows.append(
                            CompareRow(
                                design,
                                wl,
                                pol,
                                gpus,
                                float("nan"),
                                float("nan"),
                                float("nan"),
                                False,
                                exc.one_line(),
                            )
                        )
                bar.advance(task, 4)
                continue
            local = topo.structure.gpus_per_host if topo.structure is not None else 8
            n = topo.n_gpus
            for pol in (False, True):
                ar = run_plan(
                    topo,
                    hierarchical("all_reduce", n, allreduce_bytes, local),
                    seed=seed,
                    polarized=pol,
                )
                rows.append(
                    CompareRow(
                        design,
                        "dp-allreduce",
                        pol,
                        n,
                        ar.time_s * 1e3,
                        ar.busbw_gbps,
                        max(s.imbalance for s in ar.steps),
                    )
                )
                bar.advance(task)
                plan = alltoall(
                    n, alltoall_bytes, local=local, pxn=True, max_flows=A2A_FLOWS, seed=seed
                )
                a2a = run_plan(topo, plan, seed=seed, polarized=pol, rel_tol=REL_TOL)
                rows.append(
                    CompareRow(
                        design,
                        "alltoall",
                        pol,
                        n,
                        a2a.time_s * 1e3,
                        a2a.busbw_gbps,
                        max(s.imbalance for s in a2a.steps),
                    )
                )
                bar.advance(task)
    return rows


def plot_compare(rows: list[CompareRow]):
    """Bar chart: time per workload and design, ECMP vs polarized (a matplotlib Figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    designs = sorted({r.design for r in rows}, key=DESIGNS.index)
    for ax, wl in zip(axes, ("dp-allreduce", "alltoall"), strict=True):
        x = np.arange(len(designs))
        for k, pol in enumerate((False, True)):
            vals = [
                next(
                    (
                        r.time_ms
                        for r in rows
                        if r.design == d and r.workload == wl and r.polarized == pol
                    ),
                    np.nan,
                )
                for d in designs
            ]
            bars = ax.bar(
                x + (k - 0.5) * 0.38, vals, 0.38, label="polarized ECMP" if pol else "ECMP"
            )
            ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
        ax.set_xticks(x, designs)
        ax.set_ylabel("time (ms)")
        ax.set_title(f"{wl} on {rows[0].gpus:,} GPUs")
        ax.margins(y=0.12)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
