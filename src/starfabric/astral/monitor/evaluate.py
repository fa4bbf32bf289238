"""Scenario suite: every fault class x seeds/placements, multi-fault and healthy runs → scores.

Each scenario synthesizes a fresh telemetry store, runs the localizer on it (which sees only
the store) and compares the reported causes with the injection record, kept apart.
Scores: precision, recall, F1 over (component, fault) pairs, top-1 accuracy over faulty
scenarios, false-positive rate over healthy runs, and time to localize.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from starfabric.astral.monitor.cluster import build_cluster, cluster_for
from starfabric.astral.monitor.faults import (
    CPU_CONTENTION,
    ECMP_HOTSPOT,
    FAULT_KINDS,
    GPU_THROTTLE,
    GPU_XID,
    MISCONFIG_DCQCN,
    MISCONFIG_MTU,
    NIC_PORT_DOWN,
    NVLINK_DEGRADED,
    Fault,
)
from starfabric.astral.monitor.localize import WINDOW_ITERS, Diagnosis, diagnose
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.monitor.synth import SynthSpec, compile_job, network_state, synthesize
from starfabric.astral.topology import LINK_NIC, LINK_TOR_AGG
from starfabric.errors import ConfigError


@dataclass(frozen=True)
class Scenario:
    """One run of the suite: a name, the faults to inject, the seeds."""

    name: str
    faults: tuple[Fault, ...]
    seed: int
    placement_seed: int


@dataclass
class ScenarioResult:
    """Scores of one scenario."""

    name: str
    injected: list[str]
    reported: list[str]
    tp: int
    fp: int
    fn: int
    top1: bool | None
    localize_s: float


def job_targets(gpus: int, seed: int) -> dict[str, Any]:
    """Healthy routes of a placement: the links that carry QPs (where link faults can bite)."""
    spec = SynthSpec(gpus=gpus, seed=seed, placement_seed=seed)
    topo = build_cluster(cluster_for(gpus))
    job = compile_job(topo, spec)
    net = network_state(job, [], seed)
    used = net.nq > 0
    nic_lo, nic_hi = topo.links_of_kind(LINK_NIC)
    ta_lo, ta_hi = topo.links_of_kind(LINK_TOR_AGG)
    ids = np.arange(topo.n_links)
    up_used = used & (ids % 2 == 0)
    return {
        "topo": topo,
        "job": job,
        "ports": job.ports,
        "net_up": np.flatnonzero(up_used & (ids < ta_hi)) // 2,
        "tor_up": np.flatnonzero((ids >= ta_lo) & (ids < ta_hi) & (ids % 2 == 0)) // 2,
        "nic_cables": np.arange(nic_lo // 2, nic_hi // 2),
    }


SEVERITY_RANGE = (0.5, 1.0)
"""Assumption: severities the suite draws from (uniform); lower ones may leave no visible impact."""


def random_fault(
    kind: str,
    rng: np.random.Generator,
    t: dict[str, Any],
    exclude: set[int],
    severity: tuple[float, float] = SEVERITY_RANGE,
) -> Fault:
    """A fault of `kind` at a random component the job uses (links that carry its QPs)."""
    job = t["job"]
    sev = float(rng.uniform(*severity))
    onset = int(rng.integers(1, 6 - WINDOW_ITERS + 1))
    if kind in (GPU_THROTTLE, GPU_XID, NVLINK_DEGRADED, MISCONFIG_MTU, MISCONFIG_DCQCN):
        tgt = int(rng.integers(0, job.n))
    elif kind == CPU_CONTENTION:
        tgt = int(rng.integers(0, job.hosts))
    elif kind == NIC_PORT_DOWN:
        tgt = int(rng.choice(t["nic_cables"]))
    elif kind == ECMP_HOTSPOT:
        tgt = int(rng.choice(t["tor_up"]))
    else:
        tgt = int(rng.choice(t["net_up"]))
    if tgt in exclude:
        return random_fault(kind, rng, t, exclude, severity)
    return Fault(kind, tgt, round(sev, 3), onset)


def scenarios(
    gpus: int,
    seeds: int = 3,
    healthy: int = 6,
    multi: int = 4,
    *,
    seed0: int = 0,
    severity: tuple[float, float] = SEVERITY_RANGE,
) -> list[Scenario]:
    """The suite: each fault class x `seeds`, `multi` two/three-fault runs, `healthy` clean runs.

    Seeds (placements, targets, noise) start at `seed0`, so other suites are one argument away.
    """
    if seeds < 1 or healthy < 0 or multi < 0:
        raise ConfigError(
            f"seeds={seeds}, healthy={healthy}, multi={multi}", fix="seeds >= 1, others >= 0"
        )
    if not 0.0 < severity[0] <= severity[1] <= 1.0:
        raise ConfigError(f"severity range {severity}", fix="use 0 < low <= high <= 1")
    out: list[Scenario] = []
    cache: dict[int, dict[str, Any]] = {}

    def tg(s: int) -> dict[str, Any]:
        if s not in cache:
            cache.clear()
            cache[s] = job_targets(gpus, s)
        return cache[s]

    for s in range(seed0, seed0 + seeds):
        t = tg(s)
        for k, kind in enumerate(FAULT_KINDS):
            rng = np.random.default_rng([s, k, gpus])
            out.append(
                Scenario(f"{kind}/{s}", (random_fault(kind, rng, t, set(), severity),), s, s)
            )
    for m in range(multi):
        s = seed0 + seeds + m
        t = tg(s)
        rng = np.random.default_rng([s, 99, gpus])
        kinds = rng.choice(FAULT_KINDS, size=2 + m % 2, replace=False)
        used: set[int] = set()
        fs: list[Fault] = []
        for kind in kinds.tolist():
            if kind == GPU_XID and fs:
                continue
            f = random_fault(kind, rng, t, used, severity)
            used.add(f.target)
            fs.append(f)
        out.append(Scenario("multi/" + "+".join(f.kind for f in fs), tuple(fs), s, s))
    for h in range(healthy):
        out.append(Scenario(f"healthy/{h}", (), 1000 + seed0 + h, 1000 + seed0 + h))
    return out


def occurred(sc: Scenario, summary: dict[str, Any]) -> Scenario:
    """The scenario less faults whose onset came after the job had already hung (never seen)."""
    last = int(summary["iterations"]) - 1
    return Scenario(
        sc.name, tuple(f for f in sc.faults if f.onset_iter <= last), sc.seed, sc.placement_seed
    )


def score(sc: Scenario, d: Diagnosis) -> ScenarioResult:
    """Compare a diagnosis with the injection record of its scenario."""
    truth = {(f.component, f.kind) for f in sc.faults}
    rep = d.reported()
    got = [(c.component, c.fault) for c in rep]
    gs = set(got)
    tp = len(gs & truth)
    top1 = (got[0] in truth) if (truth and got) else (False if truth else None)
    return ScenarioResult(
        name=sc.name,
        injected=[f"{k}@{c}" for c, k in sorted(truth)],
        reported=[f"{k}@{c}" for c, k in got],
        tp=tp,
        fp=len(gs - truth),
        fn=len(truth - gs),
        top1=top1,
        localize_s=d.elapsed_s,
    )


def run_scenario(
    gpus: int,
    sc: Scenario,
    iterations: int = 6,
    localizer: Callable[[TelemetryStore], Diagnosis] = diagnose,
) -> tuple[ScenarioResult, Diagnosis]:
    """Synthesize one scenario into an in-memory store and diagnose it with `localizer`."""
    spec = SynthSpec(
        gpus=gpus,
        iterations=iterations,
        seed=sc.seed,
        placement_seed=sc.placement_seed,
        ms_series=False,
    )
    with TelemetryStore() as st:
        summ = synthesize(spec, list(sc.faults), st)
        d = localizer(st)
    return score(occurred(sc, summ), d), d


def summarize(results: list[ScenarioResult]) -> dict[str, Any]:
    """Overall precision, recall, F1, top-1, FP rate and times."""
    tp = sum(r.tp for r in results)
    fp = sum(r.fp for r in results)
    fn = sum(r.fn for r in results)
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    faulty = [r for r in results if r.top1 is not None]
    healthy = [r for r in results if r.top1 is None]
    times = [r.localize_s for r in results]
    return {
        "scenarios": len(results),
        "precision": prec,
        "recall": rec,
        "f1": f1,
        "top1": sum(bool(r.top1) for r in faulty) / len(faulty) if faulty else 1.0,
        "fp_rate": sum(r.fp > 0 for r in healthy) / len(healthy) if healthy else 0.0,
        "max_localize_s": max(times) if times else 0.0,
        "mean_localize_s": float(np.mean(times)) if times else 0.0,
    }


def evaluate(
    gpus: int = 1024,
    *,
    seeds: int = 3,
    healthy: int = 6,
    multi: int = 4,
    console: Console | None = None,
    localizer: Callable[[TelemetryStore], Diagnosis] = diagnose,
    seed0: int = 0,
    severity: tuple[float, float] = SEVERITY_RANGE,
) -> dict[str, Any]:
    """Run the suite; returns the summary plus per-scenario rows (and prints a table)."""
    suite = scenarios(gpus, seeds, healthy, multi, seed0=seed0, severity=severity)
    results: list[ScenarioResult] = []
    con = console or Console(stderr=True)
    with Progress(console=con, transient=True) as prog:
        task = prog.add_task(f"monitor eval at {gpus} GPUs", total=len(suite))
        for sc in suite:
            r, _ = run_scenario(gpus, sc, localizer=localizer)
            results.append(r)
            prog.advance(task)
    summ = summarize(results)
    summ["gpus"] = gpus
    summ["per_scenario"] = [asdict(r) for r in results]
    if console is not None:
        console.print(render_table(results, summ))
    return summ


def render_table(results: list[ScenarioResult], summ: dict[str, Any]) -> Table:
    """Rich table of per-scenario outcomes and the overall line."""
    t = Table(title=f"monitor eval: {summ.get('gpus', '?')} GPUs, {len(results)} scenarios")
    for col in ("scenario", "injected", "top reported", "TP", "FP", "FN", "top-1", "s"):
        t.add_column(col)
    for r in results:
        t.add_row(
            r.name,
            ", ".join(r.injected) or "-",
            r.reported[0] if r.reported else "-",
            str(r.tp),
            str(r.fp),
            str(r.fn),
            "-" if r.top1 is None else ("yes" if r.top1 else "NO"),
            f"{r.localize_s:.2f}",
        )
    t.add_section()
    t.add_row(
        "overall",
        f"P {summ['precision']:.3f} R {summ['recall']:.3f}",
        f"F1 {summ['f1']:.3f}",
        "",
        "",
        "",
        f"{summ['top1'] * 100:.0f}%",
        f"max {summ['max_localize_s']:.2f}",
    )
    t.caption = f"false-positive rate on healthy runs: {summ['fp_rate'] * 100:.1f}%"
    return t
