"""Scenario suites → scores. The suite as before (every fault class x seeds/placements with its
signature, multi-fault and healthy runs), and, scored apart, the same classes with their
physical signature off and partial, the gray classes (no signature) and the confounders.

Each scenario synthesizes a fresh telemetry store, runs the localizer on it (which sees only
the store) and compares the reported causes with the injection record, kept apart.
Scores: precision, recall, F1 over (component, fault) pairs, top-1 accuracy over faulty
scenarios, false-positive rate over healthy runs, and time to localize; for silent, partial
and gray runs top-1 component (the class may stay unknown); for confounders the share of runs
with any hardware cause reported (false positives) and the share named as their cause.
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
    CONFOUNDER_KINDS,
    CPU_CONTENTION,
    DATALOADER_STALL,
    ECMP_HOTSPOT,
    FAULT_KINDS,
    GPU_SLOW,
    GPU_THROTTLE,
    GPU_XID,
    GRAY_KINDS,
    HARDWARE,
    MISCONFIG_DCQCN,
    MISCONFIG_MTU,
    NIC_PORT_DOWN,
    NVLINK_DEGRADED,
    NVLINK_SLOW_PEER,
    PORT_CONGESTED,
    TARGET_KIND,
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
    top1_component: bool | None = None
    hardware_fp: int = 0
    impact: bool | None = None


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
        "tor_up_used": np.flatnonzero(up_used & (ids >= ta_lo) & (ids < ta_hi)) // 2,
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
    signature: str = "on",
) -> Fault:
    """A fault of `kind` at a random component the job uses (links that carry its QPs)."""
    job = t["job"]
    sev = float(rng.uniform(*severity))
    onset = int(rng.integers(1, 6 - WINDOW_ITERS + 1))
    gpu_kinds = (GPU_THROTTLE, GPU_XID, NVLINK_DEGRADED, MISCONFIG_MTU, MISCONFIG_DCQCN)
    if kind in (*gpu_kinds, GPU_SLOW, NVLINK_SLOW_PEER, DATALOADER_STALL):
        tgt = int(rng.integers(0, job.n))
    elif TARGET_KIND[kind] == "job":
        return Fault(kind, 0, round(sev, 3), onset, signature)
    elif kind == PORT_CONGESTED:
        tgt = int(rng.choice(t["tor_up_used"]))
    elif kind == CPU_CONTENTION:
        tgt = int(rng.integers(0, job.hosts))
    elif kind == NIC_PORT_DOWN:
        tgt = int(rng.choice(t["nic_cables"]))
    elif kind == ECMP_HOTSPOT:
        tgt = int(rng.choice(t["tor_up"]))
    else:
        tgt = int(rng.choice(t["net_up"]))
    if tgt in exclude:
        return random_fault(kind, rng, t, exclude, severity, signature)
    return Fault(kind, tgt, round(sev, 3), onset, signature)


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


SECTIONS: tuple[str, ...] = ("suite", "silent", "partial", "gray", "confounders")
"""The evaluation's parts, scored apart: signatures on (as before), off, partial; gray classes;
confounders (no hardware fault)."""


def section_scenarios(
    section: str,
    gpus: int,
    seeds: int = 3,
    *,
    seed0: int = 0,
    severity: tuple[float, float] = SEVERITY_RANGE,
) -> list[Scenario]:
    """One fault per run for a section other than the suite: every class with its signature
    off or partial, every gray class, every confounder, each x `seeds` placements."""
    kinds = {
        "silent": (FAULT_KINDS, "off"),
        "partial": (FAULT_KINDS, "partial"),
        "gray": (GRAY_KINDS, "off"),
        "confounders": (CONFOUNDER_KINDS, "on"),
    }
    if section not in kinds:
        raise ConfigError(f"eval section {section!r} is unknown", fix=f"use {', '.join(SECTIONS)}")
    if seeds < 1:
        raise ConfigError(f"seeds={seeds}", fix="seeds >= 1")
    ks, sig = kinds[section]
    salt = SECTIONS.index(section)
    out: list[Scenario] = []
    for s in range(seed0, seed0 + seeds):
        t = job_targets(gpus, s)
        for k, kind in enumerate(ks):
            rng = np.random.default_rng([s, k, gpus, salt])
            f = random_fault(kind, rng, t, set(), severity, sig)
            out.append(Scenario(f"{section}/{kind}/{s}", (f,), s, s))
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
    hw_truth = {f.component for f in sc.faults if f.hardware}
    hw_got = [c.component for c in rep if c.component.split(":")[0] in HARDWARE]
    top1_c = (bool(hw_got) and hw_got[0] in hw_truth) if hw_truth else None
    return ScenarioResult(
        name=sc.name,
        injected=[f"{k}@{c}" for c, k in sorted(truth)],
        reported=[f"{k}@{c}" for c, k in got],
        tp=tp,
        fp=len(gs - truth),
        fn=len(truth - gs),
        top1=top1,
        localize_s=d.elapsed_s,
        top1_component=top1_c,
        hardware_fp=len(set(hw_got) - hw_truth),
    )


IMPACT_ITER = 0.01
"""Assumption: a fault is visible when the job's window iteration time grows 1% over its
healthy twin's, ..."""
IMPACT_RANK = 0.05
"""...some rank is ready 5% later in every window iteration..."""
IMPACT_QP = 0.10
"""...some QP runs 10% slower (median over the window), or the job hangs."""


def visible_impact(st: TelemetryStore, twin: TelemetryStore) -> bool:
    """Whether a faulty run differs from its healthy twin (same seeds, no fault) in any layer
    above the physical one: the evaluation's test of 'visibly slower', read from the truth side
    (the localizer never sees the twin)."""
    q = "SELECT max(iter) AS m FROM app_iteration"
    last = st.query(q)["m"]
    if not last.size or np.isnan(float(last[0])) or int(last[0]) < int(twin.query(q)["m"][0]):
        return True
    if st.count("app_nccl_error"):
        return True
    w0 = max(int(last[0]) - WINDOW_ITERS + 1, 0)
    per = (
        "SELECT rank, median(iter_ms) AS it, min(data_ms + compute_ms) AS ready "
        "FROM app_iteration WHERE iter >= ? GROUP BY rank ORDER BY rank"
    )
    a, b = st.query(per, [w0]), twin.query(per, [w0])
    if float(np.median(a["it"])) > (1 + IMPACT_ITER) * float(np.median(b["it"])):
        return True
    if (a["ready"] > (1 + IMPACT_RANK) * b["ready"]).any():
        return True
    qp = "SELECT qp, median(gbps_mean) AS g FROM transport_qp WHERE iter >= ? GROUP BY qp ORDER BY qp"
    x, y = st.query(qp, [w0]), twin.query(qp, [w0])
    return bool((x["g"] < (1 - IMPACT_QP) * y["g"]).any())


def run_scenario(
    gpus: int,
    sc: Scenario,
    iterations: int = 6,
    localizer: Callable[[TelemetryStore], Diagnosis] = diagnose,
    twin: TelemetryStore | None = None,
) -> tuple[ScenarioResult, Diagnosis]:
    """Synthesize one scenario into an in-memory store and diagnose it with `localizer`;
    with a healthy `twin` of the same seeds, also record whether the fault was visible."""
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
        impact = visible_impact(st, twin) if twin is not None else None
    r = score(occurred(sc, summ), d)
    r.impact = impact
    return r, d


def healthy_twin(gpus: int, sc: Scenario, iterations: int = 6) -> TelemetryStore:
    """The scenario's seeds run without faults (kept in memory; the caller closes it)."""
    st = TelemetryStore()
    spec = SynthSpec(
        gpus=gpus,
        iterations=iterations,
        seed=sc.seed,
        placement_seed=sc.placement_seed,
        ms_series=False,
    )
    synthesize(spec, [], st)
    return st


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


def summarize_section(section: str, results: list[ScenarioResult]) -> dict[str, Any]:
    """Scores of a section other than the suite: top-1 component for faults; for confounders
    the share of runs with a hardware cause reported and the share named as their cause."""
    times = [r.localize_s for r in results]
    out: dict[str, Any] = {
        "section": section,
        "scenarios": len(results),
        "max_localize_s": max(times) if times else 0.0,
        "mean_localize_s": float(np.mean(times)) if times else 0.0,
    }
    faulty = [r for r in results if r.top1_component is not None and r.impact is not False]
    if faulty:
        out["top1_component"] = sum(bool(r.top1_component) for r in faulty) / len(faulty)
        out["top1_class"] = sum(bool(r.top1) for r in faulty) / len(faulty)
        out["no_impact"] = sum(r.impact is False for r in results)
        quiet = [r for r in results if r.impact is False]
        out["no_impact_found"] = sum(bool(r.top1_component) for r in quiet)
    conf = [r for r in results if r.top1_component is None]
    if conf:
        out["fp_rate"] = sum(r.hardware_fp > 0 for r in conf) / len(conf)
        out["named"] = sum(r.tp > 0 for r in conf) / len(conf)
    return out


def run_section(
    section: str,
    gpus: int,
    suite: list[Scenario],
    console: Console,
    localizer: Callable[[TelemetryStore], Diagnosis] = diagnose,
) -> tuple[list[ScenarioResult], dict[str, Any]]:
    """Synthesize and diagnose every scenario of one section; its results and summary."""
    results: list[ScenarioResult] = []
    twins: dict[tuple[int, int], TelemetryStore] = {}
    with Progress(console=console, transient=True) as prog:
        task = prog.add_task(f"monitor eval {section} at {gpus} GPUs", total=len(suite))
        for sc in suite:
            twin = None
            if section in ("silent", "partial", "gray"):
                key = (sc.seed, sc.placement_seed)
                if key not in twins:
                    for t in twins.values():
                        t.close()
                    twins = {key: healthy_twin(gpus, sc)}
                twin = twins[key]
            r, _ = run_scenario(gpus, sc, localizer=localizer, twin=twin)
            results.append(r)
            prog.advance(task)
    for t in twins.values():
        t.close()
    summ = summarize(results) if section == "suite" else summarize_section(section, results)
    summ["gpus"] = gpus
    return results, summ


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
    sections: tuple[str, ...] = ("suite",),
) -> dict[str, Any]:
    """Run the suite (and other sections); returns the suite's summary with per-scenario rows,
    plus one summary per other section under 'sections' (and prints one table each)."""
    bad = [x for x in sections if x not in SECTIONS]
    if bad:
        raise ConfigError(f"eval section(s) {bad} unknown", fix=f"use {', '.join(SECTIONS)}")
    con = console or Console(stderr=True)
    summ: dict[str, Any] = {"gpus": gpus}
    if "suite" in sections:
        suite = scenarios(gpus, seeds, healthy, multi, seed0=seed0, severity=severity)
        results, summ = run_section("suite", gpus, suite, con, localizer)
        summ["per_scenario"] = [asdict(r) for r in results]
        if console is not None:
            console.print(render_table(results, summ))
    other: dict[str, Any] = {}
    for sec in sections:
        if sec == "suite":
            continue
        sc = section_scenarios(sec, gpus, seeds, seed0=seed0, severity=severity)
        res, s = run_section(sec, gpus, sc, con, localizer)
        s["per_scenario"] = [asdict(r) for r in res]
        other[sec] = s
        if console is not None:
            console.print(render_section(sec, res, s))
    if other:
        summ["sections"] = other
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


def render_section(section: str, results: list[ScenarioResult], summ: dict[str, Any]) -> Table:
    """Rich table of one non-suite section: per-scenario top cause and the section's scores."""
    t = Table(
        title=f"monitor eval {section}: {summ.get('gpus', '?')} GPUs, {len(results)} scenarios"
    )
    for col in ("scenario", "injected", "top reported", "top-1 comp", "HW FP", "s"):
        t.add_column(col)
    for r in results:
        t.add_row(
            r.name,
            ", ".join(r.injected) or "-",
            r.reported[0] if r.reported else "-",
            "-"
            if r.top1_component is None
            else ("no impact" if r.impact is False else ("yes" if r.top1_component else "NO")),
            str(r.hardware_fp),
            f"{r.localize_s:.2f}",
        )
    t.add_section()
    parts = []
    if "top1_component" in summ:
        parts.append(f"top-1 component {summ['top1_component'] * 100:.0f}%")
        parts.append(f"class named {summ['top1_class'] * 100:.0f}%")
        if summ.get("no_impact"):
            parts.append(f"{summ['no_impact']} without visible impact (not scored)")
    if "fp_rate" in summ:
        parts.append(f"hardware FP {summ['fp_rate'] * 100:.1f}%")
        parts.append(f"named {summ['named'] * 100:.0f}%")
    t.add_row(section, "; ".join(parts), "", "", "", f"max {summ['max_localize_s']:.2f}")
    return t
