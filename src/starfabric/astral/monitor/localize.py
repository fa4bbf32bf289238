"""Cross-layer fault localization from a telemetry store, by evidence only.

Application anomalies (iteration regression, NCCL timeouts, compute or TP stragglers) lead to
slow ranks — judged with robust statistics across ranks in every iteration of the window, and
blamed on hardware only when the same rank is slow in all of them; the transport layer's
per-QP throughput, compared with what each QP's route (reconstructed from INT hops) should
give, leads to slow QPs (persistently, or in some iterations only: a flapping link); tomography
over their paths finds the smallest set of links/NICs they share that healthy QPs do not.
Physical counters (CRC, PFC, DDM, link state, GPU clocks, Xid, NVLink, host CPU, NIC config),
when present, raise confidence and name the class; when absent the cause is reported as
"degraded COMPONENT (class unknown)" with its evidence chain (the gray failures of Holmes,
Minder, Greyhound). Slowdowns with no hardware cause — a rank waiting for its input, a pause of
all ranks, a uniform slowdown against Seer's prediction, stragglers that move between ranks —
are named as application causes, never blamed on a component. Hard physical events and strong
physical anomalies with no visible impact are reported too, with lower confidence.
The injection record is never read here.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.astral.monitor.cluster import build_cluster
from starfabric.astral.monitor.faults import (
    CHECKPOINT_PAUSE,
    CONFIG_SLOWDOWN,
    CPU_CONTENTION,
    DATALOADER_STALL,
    ECMP_HOTSPOT,
    GPU_SLOW,
    GPU_THROTTLE,
    GPU_XID,
    HARDWARE,
    LINK_CRC,
    LINK_FLAPPING,
    MISCONFIG_DCQCN,
    MISCONFIG_MTU,
    MOE_IMBALANCE,
    NIC_PORT_DOWN,
    NVLINK_DEGRADED,
    OPTICAL_FAILING,
    PFC_STORM,
    PORT_CONGESTED,
)
from starfabric.astral.monitor.schema import (
    THROTTLE_HW_SLOWDOWN,
    THROTTLE_HW_THERMAL,
    THROTTLE_SW_THERMAL,
)
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.netsim import make_backend, steady_rates
from starfabric.astral.topology import LINK_NIC, Topology
from starfabric.errors import DataError

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

WINDOW_ITERS = 3
"""Assumption: iterations (newest) the localizer judges; older ones are the regression baseline."""
REPORT_CONFIDENCE = 0.5
"""Causes at or above this confidence are reported (precision/recall count these)."""
STRAGGLER_RATIO = 1.04
"""Assumption: a rank is a compute straggler above 1.04x the median compute time..."""
ROBUST_Z = 6.0
"""...and 6 robust sigmas (median/MAD) above it (keeps 16K-rank noise out)."""
TP_RATIO = 1.15
"""Assumption: a host's TP floor (its fastest rank's TP time) this far above the median is slow."""
QP_SLOW = 0.8
"""Assumption: a QP below 0.8x the rate its route allows (capacity/QPs sharing) is slow."""
PURITY = 0.75
"""Assumption: a tomography suspect must have >= 75% of the QPs crossing it slow."""
HOTSPOT_OVERLOAD = 2.5
"""Assumption: QPs' demand on one link above 2.5x its capacity is an ECMP hash collision hot spot."""
RX_POWER_LOW_DBM = -7.0
"""Assumption: optical Rx power below -7 dBm is failing (SR4/DR4 sensitivity is about -8..-10)."""
TX_POWER_LOW_DBM = -4.0
"""Assumption: optical Tx power below -4 dBm (nominal about 0 dBm) is a failing laser."""
CPU_BUSY_PCT = 88.0
"""Assumption: a host above 88% CPU starves NCCL proxy threads and kernel launches."""
CRC_MIN = 50.0
"""Assumption: CRC errors over the window below this are never a fault (background is ~0.02/poll)."""
SYMBOL_MIN = 200.0
"""Assumption: PHY symbol errors over the window below this are background (~0.1/poll)."""
PFC_MIN = 2e3
"""Assumption: PFC pause frames over the window below this are ordinary incast, not a storm."""
NVLINK_ERR_MIN = 100.0
"""Assumption: NVLink replay+CRC errors over the window that mean a degraded link."""
FLEET_FACTOR = 20.0
"""Assumption: a counter must also exceed 20x the fleet's upper quantile (+1) to be anomalous."""
HOT_QP_RATE = 0.6
"""Assumption: QPs on an over-subscribed link below 0.6x their demand confirm a hot spot."""
SEER_TOLERANCE = 0.1
"""Assumption: observed phase time more than 10% over Seer's prediction is flagged as a departure."""
REGRESSION = 0.03
"""Assumption: iteration time 3% over the earlier iterations' median is a regression."""
THROTTLE_BITS = THROTTLE_HW_SLOWDOWN | THROTTLE_HW_THERMAL | THROTTLE_SW_THERMAL
CLOCK_DROP = 0.92
"""Assumption: an SM clock below 92% of the fleet median is throttled."""
UNKNOWN = "degraded"
"""The fault class of a component that timing shows slow and no counter names."""
TIMING_CONFIDENCE = 0.75
"""Assumption: confidence of a cause found from timing alone (persistent, robust, localized)."""
NVLINK_SLOW = 0.85
"""Assumption: a GPU sending over NVLink below 0.85x the fleet median has a slow NVLink."""
TRANSIENT_MIN = 3
"""Assumption: at least 3 ranks slow in some but not all iterations make moving stragglers."""
PAUSE_RATIO = 1.5
"""Assumption: an iteration 1.5x the median while its phases are not is a pause of all ranks."""
LATENCY_Z = 8.0
"""Assumption: an INT hop latency 8 robust sigmas above the fleet's marks a queue at that hop."""
FOREIGN_MIN = 0.1
"""Assumption: port bytes 10% above this job's QPs' bytes through it are another job's traffic."""
LATENCY_EXCESS = 0.05
"""Assumption: ...and at least 5% above the fleet's median for links of that kind."""
RETRANS_Z = 8.0
"""Assumption: QP retransmissions 8 robust sigmas (and 10x) above the fleet's mean a lossy path."""


@dataclass(frozen=True)
class Cause:
    """A ranked root cause: component, fault class, confidence and the evidence across layers."""

    component: str
    label: str
    fault: str
    confidence: float
    evidence: list[str]

    @property
    def hardware(self) -> bool:
        """Whether the cause is a hardware component (not an application or job cause)."""
        return self.component.split(":")[0] in HARDWARE

    @property
    def title(self) -> str:
        """One-line name: 'link_crc at cable:17' or 'degraded gpu:3 (class unknown)'."""
        if self.fault == UNKNOWN:
            return f"degraded {self.component} (class unknown)"
        return f"{self.fault} at {self.component}"


@dataclass
class Diagnosis:
    """What the localizer found: anomalies, ranked causes, Seer comparison and its run time."""

    anomalies: list[str]
    causes: list[Cause]
    seer: dict[str, float]
    seer_departure: list[str]
    elapsed_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)

    def reported(self, threshold: float = REPORT_CONFIDENCE) -> list[Cause]:
        """Causes at or above the confidence threshold, best first."""
        return [c for c in self.causes if c.confidence >= threshold]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "anomalies": self.anomalies,
            "causes": [asdict(c) for c in self.causes],
            "seer": self.seer,
            "seer_departure": self.seer_departure,
            "elapsed_s": self.elapsed_s,
            "stats": self.stats,
        }


def _robust(x: F64) -> tuple[float, float]:
    med = float(np.median(x)) if x.size else 0.0
    mad = float(np.median(np.abs(x - med))) * 1.4826 if x.size else 0.0
    return med, max(mad, 1e-9 * max(abs(med), 1.0))


def _cable_label(topo: Topology, cable: int) -> str:
    e = 2 * cable
    return f"{topo.node_label(int(topo.link_src[e]))}-{topo.node_label(int(topo.link_dst[e]))}"


class _Ctx:
    """Everything the steps share: the store, topology, windows, per-entity aggregates."""

    def __init__(self, st: TelemetryStore) -> None:
        self.st = st
        if not st.has_meta("cluster"):
            raise DataError(
                f"{st.path}: no cluster/job description (not written by 'monitor synth')",
                fix="diagnose synthesized jobs; 'monitor ingest' prints findings for real files",
            )
        self.fields = st.meta("cluster")
        self.job = st.meta("job")
        self.seer = st.meta("seer")
        self.topo = build_cluster(self.fields)
        self.n = int(self.job["gpus"])
        self.gph = int(self.job["gpus_per_host"])
        self.causes: list[Cause] = []
        self.anomalies: list[str] = []
        self.explained_gpus: set[int] = set()
        last = st.query("SELECT max(iter) AS m FROM app_iteration")["m"]
        self.last_app = int(last[0]) if last.size and not np.isnan(float(last[0])) else -1
        pl = st.query("SELECT max(iter) AS m FROM phys_port")["m"]
        self.last_phys = int(pl[0]) if pl.size and not np.isnan(float(pl[0])) else -1
        self.w0 = max(self.last_app - WINDOW_ITERS + 1, 0)
        self.p0 = max(self.last_phys - WINDOW_ITERS + 1, 0)

    def add(self, component: str, label: str, fault: str, conf: float, ev: list[str]) -> None:
        if any(c.component == component and c.fault == fault for c in self.causes):
            return
        self.causes.append(Cause(component, label, fault, round(float(min(conf, 0.99)), 3), ev))

    def reported_components(self) -> set[str]:
        return {c.component for c in self.causes}


def _hard_events(c: _Ctx) -> None:
    """Link down and critical Xid events, corroborated with the layers above."""
    st, topo = c.st, c.topo
    err = st.query("SELECT rank, peer, count(*) AS k FROM app_nccl_error GROUP BY rank, peer")
    if err["rank"].size:
        c.anomalies.append(f"application: {err['rank'].size} NCCL timeouts (job hung)")
    xid = st.query(
        "SELECT gpu, min(xid) AS xid, count(*) AS k, min(message) AS msg FROM phys_xid GROUP BY gpu"
    )
    ecc = st.query(
        "SELECT gpu, sum(ecc_uncorrected) AS u FROM phys_gpu GROUP BY gpu HAVING sum(ecc_uncorrected) > 0"
    )
    ecc_of = dict(zip(ecc["gpu"].tolist(), ecc["u"].tolist(), strict=True))
    for g, x, msg in zip(
        xid["gpu"].tolist(), xid["xid"].tolist(), xid["msg"].tolist(), strict=True
    ):
        peers = int((err["peer"] == g).sum()) if err["peer"].size else 0
        ev = [f"physical: Xid {x} on gpu{g}: {msg}"]
        if g in ecc_of:
            ev.append(f"physical: {int(ecc_of[g])} uncorrectable ECC errors on gpu{g}")
        if peers:
            ev.insert(0, f"application: {peers} ranks report NCCL timeouts waiting for rank {g}")
        c.add(f"gpu:{g}", f"gpu{g}", GPU_XID, 0.97 if peers else 0.75, ev)
        c.explained_gpus.add(int(g))
    dn = st.query("SELECT link, min(iter) AS since FROM phys_port WHERE NOT state_up GROUP BY link")
    nic_lo, nic_hi = topo.links_of_kind(LINK_NIC)
    ports = topo.structure.gpu_tor.shape[1] if topo.structure is not None else 1
    for e, since in zip(dn["link"].tolist(), dn["since"].tolist(), strict=True):
        cable = e // 2
        if e % 2 or not nic_lo <= e < nic_hi:
            continue
        g = int(topo.link_src[2 * cable])
        ev = [f"physical: {_cable_label(topo, cable)} down since iteration {since}"]
        hit = err["rank"].size and bool(((err["rank"] == g) | (err["peer"] == g)).any())
        q = st.query(
            "SELECT avg(gbps_mean) AS g FROM transport_qp WHERE rank = ? AND iter >= ?", [g, c.w0]
        )["g"]
        conf = 0.75
        if hit:
            ev.insert(0, f"application: NCCL timeouts on rank {g} (no path left)")
            conf = 0.96
        elif q.size and not np.isnan(q[0]) and q[0] < QP_SLOW * float(c.job["qp_demand_gbps"]):
            ev.insert(
                0,
                f"transport: rank {g} QPs failed over to {ports - 1} port(s), {q[0]:.0f} Gb/s each",
            )
            conf = 0.95
        c.add(f"cable:{cable}", _cable_label(topo, cable), NIC_PORT_DOWN, conf, ev)
        c.explained_gpus.add(g)


def _matrix(rows: I64, cols: I64, vals: F64, n_rows: int, n_cols: int) -> F64:
    m = np.full((n_rows, n_cols), np.nan)
    m[rows, cols] = vals
    return m


def _col_robust(m: F64) -> tuple[F64, F64]:
    """Per-column (iteration) median and robust sigma across rows (ranks), NaN-safe."""
    med = np.nanmedian(m, axis=0)
    mad = np.nanmedian(np.abs(m - med), axis=0) * 1.4826
    return med, np.maximum(mad, 1e-9 * np.maximum(np.abs(med), 1.0))


def _stragglers(c: _Ctx) -> None:
    """Slow ranks from per-rank, per-iteration timings; only persistent ones point at hardware.

    A rank is slow in an iteration when it is ready (input loaded + compute) STRAGGLER_RATIO
    over that iteration's median and ROBUST_Z robust sigmas out; a rank slow in every
    iteration of the window is a persistent straggler. Its excess is split between input wait
    (a data-loader stall: application) and compute (GPU, or host when most of a host is slow);
    counters then name the class or the cause stays 'degraded (class unknown)'. Ranks slow in
    some iterations only, and different ones each time, are moving stragglers (application).
    """
    if c.last_app < 0:
        return
    st = c.st
    a = st.query(
        "SELECT rank, iter, data_ms, compute_ms, tp_ms FROM app_iteration WHERE iter >= ?", [c.w0]
    )
    if not a["rank"].size:
        return
    w = c.last_app - c.w0 + 1
    r_i = a["rank"].astype(np.int64)
    i_i = a["iter"].astype(np.int64) - c.w0
    data = np.nan_to_num(_matrix(r_i, i_i, a["data_ms"].astype(np.float64), c.n, w))
    comp = _matrix(r_i, i_i, a["compute_ms"].astype(np.float64), c.n, w)
    ready = data + comp
    med, sd = _col_robust(ready)
    slow = (ready > STRAGGLER_RATIO * med) & ((ready - med) / sd > ROBUST_Z)
    seen = ~np.isnan(ready)
    persistent = np.flatnonzero(slow.sum(axis=1) == np.maximum(seen.sum(axis=1), 1))
    persistent = persistent[seen[persistent].any(axis=1)]
    transient = np.flatnonzero(slow.any(axis=1) & ~np.isin(np.arange(c.n), persistent))
    if persistent.size:
        c.anomalies.append(
            f"application: {persistent.size} ranks slow in all {w} iterations (median ready "
            f"{float(np.nanmedian(med)):.1f} ms)"
        )
    if transient.size >= TRANSIENT_MIN:
        per_it = slow[transient].sum(axis=0)
        c.anomalies.append(
            f"application: {transient.size} ranks slow in some iterations only ({per_it.tolist()} per iteration)"
        )
        c.add(
            "job:0",
            "job",
            MOE_IMBALANCE,
            0.7,
            [
                f"application: {transient.size} different ranks straggle, each in some iterations "
                "only; none is slow throughout the window",
                "application: stragglers that move between ranks follow the work (uneven MoE "
                "routing or input lengths), not a component",
                "no hardware cause",
            ],
        )
    if not persistent.size:
        return
    dmed = np.nanmedian(data, axis=0)
    cmed = np.nanmedian(comp, axis=0)
    ex_data = np.nanmedian(data[persistent] - dmed, axis=1)
    ex_comp = np.nanmedian(comp[persistent] - cmed, axis=1)
    ratio = np.nanmedian(ready[persistent] / med, axis=1)
    loader = ex_data > ex_comp
    for r, ed, rt in zip(
        persistent[loader].tolist(), ex_data[loader].tolist(), ratio[loader].tolist(), strict=True
    ):
        c.add(
            f"rank:{r}",
            f"rank{r}",
            DATALOADER_STALL,
            0.8,
            [
                f"application: rank {r} ready {rt:.2f}x the median in every iteration, "
                f"{ed:.0f} ms of it waiting for its input batch; its GPU kernels take the usual time",
                "application: the host's other ranks wait for it in TP collectives",
                "no hardware cause (data-loader / input pipeline)",
            ],
        )
    gpu_slow = persistent[~loader]
    g_ratio = dict(zip(gpu_slow.tolist(), ratio[~loader].tolist(), strict=True))
    gpu = st.query(
        "SELECT gpu, bit_or(throttle_reasons) AS r, max(temperature_c) AS t, min(sm_clock_mhz) AS clk "
        "FROM phys_gpu WHERE iter >= ? GROUP BY gpu ORDER BY gpu",
        [c.p0],
    )
    clk_med = float(np.median(gpu["clk"])) if gpu["clk"].size else 0.0
    g_idx = {int(g): i for i, g in enumerate(gpu["gpu"].tolist())}
    host = st.query(
        "SELECT host, median(cpu_util_pct) AS cpu FROM phys_host WHERE iter >= ? GROUP BY host ORDER BY host",
        [c.p0],
    )
    cpu_of = dict(zip(host["host"].tolist(), host["cpu"].tolist(), strict=True))
    hosts_out = gpu_slow // c.gph
    hh, cnt = np.unique(hosts_out, return_counts=True)
    host_level = hh[cnt >= max(c.gph // 2, 2)]
    for h in host_level.tolist():
        ranks = gpu_slow[hosts_out == h]
        rt = float(np.median([g_ratio[r] for r in ranks.tolist()]))
        cpu = float(cpu_of.get(h, 0.0))
        ev = [
            f"application: {ranks.size}/{c.gph} ranks of host{h} compute {rt:.2f}x the median "
            f"in every iteration",
        ]
        if cpu >= CPU_BUSY_PCT:
            ev.append(f"physical: host{h} CPU at {cpu:.0f}% (launch and proxy threads starved)")
            c.add(f"host:{h}", f"host{h}", CPU_CONTENTION, 0.93, ev)
        else:
            ev.append(f"physical: host{h} CPU at {cpu:.0f}%, no counter names the cause")
            c.add(f"host:{h}", f"host{h}", UNKNOWN, TIMING_CONFIDENCE, ev)
        c.explained_gpus.update(ranks.tolist())
    for g in gpu_slow[~np.isin(hosts_out, host_level)].tolist():
        ev = [
            f"application: rank {g} compute {g_ratio[g]:.2f}x the median in every iteration; "
            "its peers wait in TP/DP"
        ]
        i = g_idx.get(g)
        fault, conf = UNKNOWN, TIMING_CONFIDENCE
        if i is not None:
            r, t, clk = int(gpu["r"][i]), float(gpu["t"][i]), float(gpu["clk"][i])
            if r & THROTTLE_BITS:
                ev.append(
                    f"physical: gpu{g} throttle reasons 0x{r:x}, {t:.0f} C, SM clock {clk:.0f} MHz"
                )
                fault, conf = GPU_THROTTLE, 0.93
            elif clk < CLOCK_DROP * clk_med:
                ev.append(
                    f"physical: gpu{g} SM clock {clk:.0f} MHz vs fleet {clk_med:.0f} with no "
                    f"throttle reason bit ({t:.0f} C)"
                )
                fault, conf = GPU_SLOW, 0.85
            else:
                ev.append(
                    f"physical: gpu{g} clock {clk:.0f} MHz, {t:.0f} C, no throttle reason: "
                    "no counter names the cause (HBM? clocks?)"
                )
        c.add(f"gpu:{g}", f"gpu{g}", fault, conf, ev)
        c.explained_gpus.add(g)


def _nvlink(c: _Ctx) -> None:
    """Hosts whose fastest rank still spends long in TP collectives → the GPU whose NVLink
    sends slowest (profiler step throughput) → NVLink error counters name the class."""
    if c.last_app < 0:
        return
    st = c.st
    a = st.query("SELECT rank, iter, tp_ms FROM app_iteration WHERE iter >= ?", [c.w0])
    if not a["rank"].size or np.isnan(a["tp_ms"]).all():
        return
    w = c.last_app - c.w0 + 1
    tp = _matrix(
        a["rank"].astype(np.int64),
        a["iter"].astype(np.int64) - c.w0,
        a["tp_ms"].astype(np.float64),
        c.n,
        w,
    )
    # Per iteration, a host's TP floor is its fastest rank's TP time: the rank that arrived last
    # waits for nobody, so the floor is the collective itself. Slow in every iteration = NVLink.
    nh = c.n // c.gph
    floor_it = np.nanmin(tp[: nh * c.gph].reshape(nh, c.gph, w), axis=1)
    fmed_it, fsd_it = _col_robust(floor_it)
    slow_it = (floor_it > TP_RATIO * fmed_it) & ((floor_it - fmed_it) / fsd_it > ROBUST_Z)
    slow_h = np.flatnonzero(slow_it.all(axis=1))
    if not slow_h.size:
        return
    floor = np.median(floor_it, axis=1)
    fmed = float(np.median(fmed_it))
    gpu = st.query(
        "SELECT gpu, sum(nvlink_replay + nvlink_crc) AS nv FROM phys_gpu WHERE iter >= ? GROUP BY gpu",
        [c.p0],
    )
    nv = np.zeros(c.n)
    nv[gpu["gpu"].astype(np.int64)] = gpu["nv"]
    t = st.query(
        "SELECT gpu, median(gbps) AS g FROM transport_nvlink WHERE iter >= ? GROUP BY gpu", [c.w0]
    )
    send = np.full(c.n, np.nan)
    send[t["gpu"].astype(np.int64)] = t["g"]
    smed = float(np.nanmedian(send)) if t["gpu"].size else float("nan")
    for h in slow_h.tolist():
        gs = np.arange(h * c.gph, (h + 1) * c.gph)
        ev = [
            f"application: host{h} TP collectives {floor[h] / fmed:.2f}x the median even for its "
            "fastest rank"
        ]
        hs = send[gs]
        g = None
        if np.isfinite(hs).any():
            k = int(np.nanargmin(hs))
            if hs[k] < NVLINK_SLOW * smed:
                g = int(gs[k])
                ev.append(
                    f"transport: gpu{g} sends over NVLink at {hs[k]:.0f} Gb/s vs fleet {smed:.0f} "
                    "while its host peers send at the usual rate"
                )
        errs = nv[gs]
        if errs.max() > NVLINK_ERR_MIN and (g is None or errs[g - gs[0]] == errs.max()):
            g = int(gs[int(np.argmax(errs))])
            ev.append(f"physical: gpu{g} NVLink replay+CRC errors {int(errs.max())}")
            c.add(f"gpu:{g}", f"gpu{g}", NVLINK_DEGRADED, 0.93, ev)
        elif g is not None:
            ev.append(
                f"physical: gpu{g} NVLink replay+CRC errors {int(nv[g])}: no counter names it"
            )
            c.add(f"gpu:{g}", f"gpu{g}", UNKNOWN, TIMING_CONFIDENCE, ev)
        else:
            c.add(f"host:{h}", f"host{h}", UNKNOWN, 0.6, [*ev, "physical: no NVLink errors"])


class _Phys:
    """Physical aggregates over the window: per-link counters, per-cable DDM, NIC config."""

    def __init__(self, c: _Ctx) -> None:
        n_links = c.topo.n_links
        p = c.st.query(
            "SELECT link, sum(crc_errors) AS crc, sum(symbol_errors) AS sym, sum(pfc_pause_rx) AS pfc, "
            "sum(ecn_marked) AS ecn, sum(link_downed) AS downed "
            "FROM phys_port WHERE iter >= ? AND state_up GROUP BY link",
            [c.p0],
        )
        self.downed = np.zeros(n_links)
        self.downed[p["link"].astype(np.int64)] = p["downed"]
        self.foreign: dict[int, str] = {}
        self.crc = np.zeros(n_links)
        self.sym = np.zeros(n_links)
        self.pfc = np.zeros(n_links)
        self.ecn = np.zeros(n_links)
        li = p["link"].astype(np.int64)
        self.crc[li] = p["crc"]
        self.sym[li] = p["sym"]
        self.pfc[li] = p["pfc"]
        self.ecn[li] = p["ecn"]
        self.sym_thr = (
            max(SYMBOL_MIN, FLEET_FACTOR * (float(np.quantile(p["sym"], 0.999)) + 1.0))
            if li.size
            else SYMBOL_MIN
        )
        self.crc_thr = (
            max(CRC_MIN, FLEET_FACTOR * (float(np.quantile(p["crc"], 0.999)) + 1.0))
            if li.size
            else CRC_MIN
        )
        self.pfc_thr = (
            max(PFC_MIN, FLEET_FACTOR * (float(np.quantile(p["pfc"], 0.9)) + 1.0))
            if li.size
            else PFC_MIN
        )
        o = c.st.query(
            "SELECT cable, cable_end, rx_power_dbm AS rx, tx_power_dbm AS tx, temperature_c AS t FROM phys_optics "
            "WHERE iter = (SELECT max(iter) FROM phys_optics)"
        )
        self.optic_bad: dict[int, str] = {}
        bad = (o["rx"] < RX_POWER_LOW_DBM) | (o["tx"] < TX_POWER_LOW_DBM)
        for cab, end, rx, tx, t in zip(
            o["cable"][bad].tolist(),
            o["cable_end"][bad].tolist(),
            o["rx"][bad].tolist(),
            o["tx"][bad].tolist(),
            o["t"][bad].tolist(),
            strict=True,
        ):
            prev = self.optic_bad.get(cab, "")
            self.optic_bad[cab] = prev + f" end{end}: Tx {tx:.1f} dBm, Rx {rx:.1f} dBm, {t:.0f} C;"
        cfg = c.st.query("SELECT * FROM config_nic ORDER BY gpu")
        self.cfg_dev: dict[int, tuple[str, str]] = {}
        if cfg["gpu"].size:
            mtu_mode = np.bincount(cfg["mtu"]).argmax()
            ai_mode = np.bincount(cfg["dcqcn_rpg_ai_rate_mbps"]).argmax()
            rs_mode = np.bincount(cfg["dcqcn_rpg_time_reset_us"]).argmax()
            for i, g in enumerate(cfg["gpu"].tolist()):
                if cfg["mtu"][i] != mtu_mode:
                    self.cfg_dev[g] = (MISCONFIG_MTU, f"MTU {cfg['mtu'][i]} vs fleet {mtu_mode}")
                elif (
                    cfg["dcqcn_rpg_ai_rate_mbps"][i] != ai_mode
                    or cfg["dcqcn_rpg_time_reset_us"][i] != rs_mode
                ):
                    self.cfg_dev[g] = (
                        MISCONFIG_DCQCN,
                        f"DCQCN rpg_ai_rate {cfg['dcqcn_rpg_ai_rate_mbps'][i]} Mb/s, rpg_time_reset "
                        f"{cfg['dcqcn_rpg_time_reset_us'][i]} us vs fleet {ai_mode}/{rs_mode}",
                    )

    def magnitude(self, e: int) -> float:
        """How far a directed link's error/pause counters exceed their thresholds (ranking)."""
        crc = self.crc[e] + self.crc[e ^ 1]
        sym = self.sym[e] + self.sym[e ^ 1]
        return float(max(crc / self.crc_thr, sym / self.sym_thr, self.pfc[e] / self.pfc_thr))

    def link_fault(self, topo: Topology, e: int) -> tuple[str, float, str] | None:
        """Fault class, strength in (0, 1] and physical evidence of a directed link, if any."""
        cable = e // 2
        crc = self.crc[e] + self.crc[e ^ 1]
        sym = self.sym[e] + self.sym[e ^ 1]
        if cable in self.optic_bad:
            return (
                OPTICAL_FAILING,
                1.0,
                f"optical DDM{self.optic_bad[cable]} CRC errors {int(crc)}, symbol errors {int(sym)}",
            )
        downed = self.downed[e] + self.downed[e ^ 1]
        if downed > 0:
            return (
                LINK_FLAPPING,
                1.0,
                f"{int(downed)} link-down events on {_cable_label(topo, cable)} while the port "
                "reads up in every poll",
            )
        if crc >= self.crc_thr or sym >= self.sym_thr:
            return (
                LINK_CRC,
                1.0,
                f"{int(crc)} CRC and {int(sym)} symbol errors on {_cable_label(topo, cable)} "
                f"(thresholds {self.crc_thr:.0f}, {self.sym_thr:.0f})",
            )
        if e in self.foreign:
            return (PORT_CONGESTED, 1.0, self.foreign[e])
        if self.pfc[e] >= self.pfc_thr:
            return (
                PFC_STORM,
                min(1.0, self.pfc[e] / (10 * self.pfc_thr)) * 0.5 + 0.5,
                (
                    f"{int(self.pfc[e])} PFC pause frames received by the sender of "
                    f"{topo.node_label(int(topo.link_src[e]))}->{topo.node_label(int(topo.link_dst[e]))}"
                ),
            )
        return None


@dataclass
class _Routes:
    """Per-QP routes (latest INT sample), rates over the window and what each route allows."""

    hq: I64
    hl: I64
    nq: I64
    gbps: F64  # per QP, median over the window
    g_it: F64  # per QP x iteration
    src: I64
    exp: F64
    measured: npt.NDArray[np.bool_]
    lossy: npt.NDArray[np.bool_]  # QPs retransmitting far above the fleet
    queued: npt.NDArray[np.bool_]  # directed links whose INT latency stands out
    demand: float


def _routes(c: _Ctx, ph: _Phys) -> _Routes | None:
    st, topo = c.st, c.topo
    hop_it = st.query("SELECT max(iter) AS m FROM network_hop")["m"]
    if not hop_it.size or np.isnan(float(hop_it[0])):
        return None
    hi = int(hop_it[0])
    hops = st.query(
        "SELECT qp, hop, link, latency_us FROM network_hop WHERE iter = ? ORDER BY qp, hop", [hi]
    )
    q = st.query(
        "SELECT qp, iter, rank, gbps_mean AS g, retrans, bytes FROM transport_qp WHERE iter >= ?",
        [c.w0],
    )
    if not q["qp"].size:
        return None
    nqp = int(max(q["qp"].max(), hops["qp"].max() if hops["qp"].size else 0)) + 1
    w = c.last_app - c.w0 + 1
    qi = q["qp"].astype(np.int64)
    it = np.clip(q["iter"].astype(np.int64) - c.w0, 0, w - 1)
    g_it = _matrix(qi, it, q["g"].astype(np.float64), nqp, w)
    gbps = np.nanmedian(np.where(np.isnan(g_it).all(axis=1, keepdims=True), 0.0, g_it), axis=1)
    gbps[np.isnan(g_it).all(axis=1)] = np.nan
    src = np.full(nqp, -1, dtype=np.int64)
    src[qi] = q["rank"]
    rt = _matrix(qi, it, q["retrans"].astype(np.float64), nqp, w)
    retr = np.nanmedian(np.where(np.isnan(rt), 0.0, rt), axis=1)
    rmed, rsd = _robust(retr)
    lossy = (retr > 10 * (rmed + 1.0)) & ((retr - rmed) / rsd > RETRANS_Z)
    hq = hops["qp"].astype(np.int64)
    hl = hops["link"].astype(np.int64)
    nq = np.bincount(hl, minlength=topo.n_links)
    lat_sum = np.bincount(hl, weights=hops["latency_us"].astype(np.float64), minlength=topo.n_links)
    lat = np.where(nq > 0, lat_sum / np.maximum(nq, 1), np.nan)
    queued = np.zeros(topo.n_links, dtype=bool)
    for k in np.unique(topo.link_kind[nq > 0]).tolist():
        sel = (nq > 0) & (topo.link_kind == k)
        lm, ls = _robust(lat[sel])
        queued[sel] = ((lat[sel] - lm) / ls > LATENCY_Z) & (lat[sel] > (1 + LATENCY_EXCESS) * lm)
    demand = float(c.job["qp_demand_gbps"])
    exp = _expected_rates(c, hq, hl, nqp, demand)
    # A neighbouring job's bytes: port counters above what this job's QPs put through the port.
    tx = st.query("SELECT link, tx_bytes FROM phys_port WHERE iter = ?", [hi])
    per_qp = np.bincount(qi[q["iter"] == hi], weights=q["bytes"][q["iter"] == hi], minlength=nqp)
    own = np.bincount(hl, weights=per_qp[hq], minlength=topo.n_links)
    t_link = tx["link"].astype(np.int64)
    txb = tx["tx_bytes"].astype(np.float64)
    extra = txb - own[t_link]
    fq = np.flatnonzero((extra > FOREIGN_MIN * np.maximum(own[t_link], 1.0)) & (extra > 0))
    for i in fq.tolist():
        e = int(t_link[i])
        ph.foreign[e] = (
            f"port counters show {txb[i] / 1e6:.0f} MB sent by "
            f"{topo.node_label(int(topo.link_src[e]))}->{topo.node_label(int(topo.link_dst[e]))} "
            f"in an iteration, {extra[i] / max(txb[i], 1.0) * 100:.0f}% more than this job's QPs "
            f"through it carry (another job's traffic), {int(ph.ecn[e])} ECN marks"
        )
    return _Routes(hq, hl, nq, gbps, g_it, src, exp, ~np.isnan(gbps), lossy, queued, demand)


def _expected_rates(c: _Ctx, hq: I64, hl: I64, nqp: int, demand: float) -> F64:
    """What each QP's INT route should carry (Gb/s) if every link ran at its nominal capacity
    and every QP offered its demand: the fabric's rate model (max-min fair under congestion
    control by default) on a netsim backend. QPs without a route keep their demand."""
    topo = c.topo
    exp = np.full(nqp, demand)
    lens = np.bincount(hq, minlength=nqp)
    routed = np.flatnonzero(lens > 0)
    if not routed.size:
        return exp
    # hops come ordered by (qp, hop): prepend one private link per QP for its demand
    slot = np.full(nqp, -1, dtype=np.int64)
    slot[routed] = np.arange(routed.size)
    qlen = lens[routed] + 1
    ptr = np.concatenate([[0], np.cumsum(qlen)]).astype(np.int64)
    links = np.empty(int(ptr[-1]), np.int64)
    links[ptr[:-1]] = topo.n_links + np.arange(routed.size)
    body = np.ones(links.size, bool)
    body[ptr[:-1]] = False
    links[body] = hl
    caps = np.concatenate(
        [topo.link_capacity_bps.astype(np.float64), np.full(routed.size, demand * 1e9)]
    )
    model = str(c.job.get("rate_model", "flow"))
    exp[routed] = steady_rates(make_backend(model, caps), ptr, links) / 1e9
    return exp


def _reroutes(c: _Ctx, ph: _Phys, rt: _Routes, covered: npt.NDArray[np.bool_]) -> None:
    """Links every QP left between the first and last INT samples and that nothing crosses now:
    the fabric routed around them (a port gone without a link-down record)."""
    st, topo = c.st, c.topo
    its = st.query("SELECT min(iter) AS a, max(iter) AS b FROM network_hop")
    if not its["a"].size or np.isnan(float(its["a"][0])) or its["a"][0] == its["b"][0]:
        return
    a, b = int(its["a"][0]), int(its["b"][0])
    early = st.query("SELECT qp, link FROM network_hop WHERE iter = ?", [a])
    key_e = early["qp"].astype(np.int64) * topo.n_links + early["link"].astype(np.int64)
    key_l = rt.hq * topo.n_links + rt.hl
    gone = ~np.isin(key_e, key_l)
    left_q = early["qp"].astype(np.int64)[gone]
    left_l = early["link"].astype(np.int64)[gone]
    keep = (rt.nq[left_l] == 0) & ~covered[np.clip(left_q, 0, covered.size - 1)]
    left_q, left_l = left_q[keep], left_l[keep]
    if not left_l.size:
        return
    down = {int(x.component.split(":")[1]) for x in c.causes if x.component.startswith("cable:")}
    left_c = left_l // 2
    moved = np.zeros(covered.size, dtype=bool)
    moved[left_q[np.isin(left_c, list(down))]] = True  # left a cable already reported
    while True:
        live = ~moved[left_q] & ~np.isin(left_c, list(down))
        if not live.any():
            break
        # the cable most moved QPs left first; the other links those QPs left are consequences
        cables, k = np.unique(left_c[live], return_counts=True)
        cab = int(cables[int(np.argmax(k))])
        qps = np.unique(left_q[live & (left_c == cab)])
        ev = [
            f"application: DP all-reduce slower; ranks {', '.join(str(int(x)) for x in np.unique(rt.src[qps])[:4])} "
            f"lost a path",
            f"network: INT routes of {qps.size} QPs crossed {_cable_label(topo, cab)} in iteration {a} "
            f"and avoid it by iteration {b}; no QP crosses it now",
            f"transport: those QPs run at {float(np.nanmedian(rt.gbps[qps])):.0f} Gb/s on the paths left",
            "physical: the port reads up with no errors: no counter names the cause",
        ]
        c.add(f"cable:{cab}", _cable_label(topo, cab), UNKNOWN, TIMING_CONFIDENCE, ev)
        down.add(cab)
        moved[qps] = True
        covered[qps] = True
        for g in np.unique(rt.src[qps]).tolist():
            covered[rt.src == g] = True


def _network(c: _Ctx, ph: _Phys) -> None:
    """Slow QPs → shared elements of their routes (tomography) → physical evidence."""
    topo = c.topo
    rt = _routes(c, ph)
    if rt is None:
        return
    hq, hl, nq, gbps, exp, src, demand = rt.hq, rt.hl, rt.nq, rt.gbps, rt.exp, rt.src, rt.demand
    nqp = gbps.size
    measured = rt.measured
    slow = measured & (gbps < QP_SLOW * exp)
    slow_any = measured & (np.nan_to_num(rt.g_it, nan=np.inf) < QP_SLOW * exp[:, None]).any(axis=1)
    flaky = slow_any & ~slow
    # ECMP hot spots: far more QPs on one link than it can carry.
    over = nq * demand / (topo.link_capacity_bps / 1e9)
    hot = np.flatnonzero(over >= HOTSPOT_OVERLOAD)
    # Up links first (the ECMP choice is made where a flow goes up); a hot link whose QPs mostly
    # come through an already-reported hot spot is its consequence, not a second cause.
    hot = hot[np.lexsort((-over[hot], hot % 2))]
    covered = np.zeros(nqp, dtype=bool)
    for e in hot.tolist():
        on = np.unique(hq[hl == e])
        g_on = gbps[on]
        spill = covered[on].any() if e % 2 else covered[on].mean() >= 0.5
        if np.nanmedian(g_on) >= HOT_QP_RATE * demand or spill:
            continue
        sib = np.flatnonzero(
            (topo.link_src == topo.link_src[e]) & (topo.link_kind == topo.link_kind[e])
        )
        idle = int((nq[sib] == 0).sum())
        ev = [
            f"transport: {on.size} QPs crossing it run at {np.nanmedian(g_on):.0f} Gb/s of {demand:.0f}",
            f"network: INT routes put {int(nq[e])} QPs on {topo.node_label(int(topo.link_src[e]))}->"
            f"{topo.node_label(int(topo.link_dst[e]))} ({over[e]:.1f}x capacity) while {idle} sibling uplinks idle",
            f"physical: {int(ph.ecn[e])} ECN marks, no CRC/PFC errors on the port",
        ]
        c.add(f"cable:{e // 2}", _cable_label(topo, e // 2), ECMP_HOTSPOT, 0.92, ev)
        covered[on] = True
    for g in c.explained_gpus:
        covered[src == g] = True
    _reroutes(c, ph, rt, covered)
    c.anomalies.append(
        f"transport: {int(slow.sum())} of {int(measured.sum())} QPs below {QP_SLOW}x their route's rate"
        + (f", {int(flaky.sum())} more in some iterations" if flaky.any() else "")
    )
    # Tomography elements: directed links, and each QP's source NIC (id n_links + rank).
    el_q = np.concatenate([hq, np.arange(nqp)])
    el_e = np.concatenate([hl, topo.n_links + src])
    starts = np.searchsorted(hq, np.arange(nqp))
    el_h = np.concatenate([np.arange(hq.size) - starts[hq], np.full(nqp, -1)])
    ok = np.concatenate([np.ones(hq.size, bool), src >= 0])
    el_q, el_e, el_h = el_q[ok], el_e[ok], el_h[ok]
    _tomography(c, ph, rt, el_q, el_e, slow, slow & ~covered, "in every iteration", el_h)
    _tomography(c, ph, rt, el_q, el_e, slow_any, flaky & ~covered, "in some iterations only", el_h)


def _tomography(
    c: _Ctx,
    ph: _Phys,
    rt: _Routes,
    el_q: I64,
    el_e: I64,
    bad: npt.NDArray[np.bool_],
    rem: npt.NDArray[np.bool_],
    when: str,
    el_h: I64,
) -> None:
    """Greedy smallest set of elements (directed links, sender NICs) covering the slow QPs.

    Each step takes the element crossed by most unexplained slow QPs among those whose QPs are
    mostly slow (PURITY). Ties — a single-port NIC and its own uplink carry the same QPs — go
    to physical counters first, then to transport/network evidence of a lossy or queued link,
    then to a cable slow in both directions, and otherwise to the sender's NIC.
    """
    topo = c.topo
    n_el = topo.n_links + c.n
    nic_lo, nic_hi = topo.links_of_kind(LINK_NIC)
    rem = rem.copy()
    total = np.bincount(el_e, weights=rt.measured[el_q].astype(np.float64), minlength=n_el)
    slow_all = np.bincount(el_e, weights=bad[el_q].astype(np.float64), minlength=n_el)
    purity = slow_all / np.maximum(total, 1)
    lossy_n = np.bincount(el_e, weights=rt.lossy[el_q].astype(np.float64), minlength=n_el)
    hop_at = np.full(n_el, 99.0)
    np.minimum.at(hop_at, el_e, el_h.astype(np.float64))
    for _ in range(64):
        if not rem.any():
            break
        cover = np.bincount(el_e, weights=rem[el_q].astype(np.float64), minlength=n_el)
        cover[purity < PURITY] = 0
        best = cover.max()
        if best < 1:
            break
        cands = np.flatnonzero(cover == best)
        scored: list[tuple[float, float, float, float, float, float, int, str, str]] = []
        for x in cands.tolist():
            if x >= topo.n_links:
                g = x - topo.n_links
                dev = ph.cfg_dev.get(g)
                if dev:
                    scored.append(
                        (1.0, 0, 0, 1, 1.0, -1, x, dev[0], f"physical: nic{g} config {dev[1]}")
                    )
                else:
                    scored.append((0.0, 0, 0, 1, 0.0, -1, x, "", ""))
                continue
            lf = ph.link_fault(topo, x)
            mag = ph.magnitude(x) + (1.0 if x // 2 in ph.optic_bad else 0.0)
            net_ev = float(rt.queued[x]) + float(lossy_n[x] >= 0.5 * best)
            rev = x ^ 1
            sym = float(total[rev] > 0 and purity[rev] >= PURITY)
            hop = float(hop_at[x])
            if lf:
                scored.append((lf[1], net_ev, sym, 0, mag, hop, x, lf[0], f"physical: {lf[2]}"))
            else:
                scored.append((0.0, net_ev, sym, 0, mag, hop, x, "", ""))
        # counters, then loss/queue evidence, then both directions, then the NIC, then the
        # hop nearest the sender (where a one-way, evidence-free slowdown most likely starts)
        scored.sort(key=lambda s: (-s[0], -s[1], -s[2], -s[3], -s[4], s[5]))
        strength, net_ev, sym, _, _, _, x, fault, phys_ev = scored[0]
        sender = -1
        if (
            x < topo.n_links
            and x % 2 == 0
            and nic_lo <= x < nic_hi
            and not (strength or net_ev or sym)
        ):
            # A GPU's own uplink slow one way with no loss, queue or counter: the sender NIC's
            # rate (configuration, firmware) explains it as well, and is the likelier place.
            sender = int(topo.link_src[x])
            dev = ph.cfg_dev.get(sender)
            if dev:
                strength, fault, phys_ev = 1.0, dev[0], f"physical: nic{sender} config {dev[1]}"
        qps = np.unique(el_q[(el_e == x) & rem[el_q]])
        rate = float(np.nanmedian(rt.gbps[qps]))
        low = float(np.nanmin(rt.g_it[qps]))
        expect = float(np.median(rt.exp[qps]))
        tied = len(scored) > 1
        if x >= topo.n_links or sender >= 0:
            g = x - topo.n_links if sender < 0 else sender
            comp, label = f"nic:{g}", f"nic{g}"
            where = f"all from nic{g}"
        else:
            comp, label = f"cable:{x // 2}", _cable_label(topo, x // 2)
            where = f"all crossing {topo.node_label(int(topo.link_src[x]))}->{topo.node_label(int(topo.link_dst[x]))}"
        ev = [
            "application: DP all-reduce slower than the routes allow",
            f"transport: {qps.size} slow QPs {when} at {rate:.0f} Gb/s (lowest {low:.0f}) vs "
            f"{expect:.0f} expected, {where}",
        ]
        if x < topo.n_links and lossy_n[x] >= 0.5 * best:
            ev.append(f"transport: {int(lossy_n[x])} of its QPs retransmit far above the fleet")
        ev.append(f"network: {purity[x] * 100:.0f}% of the QPs routed through it are slow")
        if x < topo.n_links and rt.queued[x]:
            ev.append("network: INT latency at this hop stands out (a queue or pauses there)")
        if x < topo.n_links and sym:
            ev.append("network: QPs crossing the cable the other way are slow too")
        if sender >= 0:
            ev.append(
                f"network: only its own uplink, one way, with no loss or queue: the sender nic{sender}"
            )
        if tied:
            ev.append(
                f"network: tomography chose it over {len(scored) - 1} element(s) explaining as many"
            )
        if strength > 0:
            c.add(comp, label, fault, 0.6 + 0.35 * purity[x] * strength, [*ev, phys_ev])
        else:
            c.add(
                comp,
                label,
                UNKNOWN,
                0.45 + 0.35 * purity[x],
                [*ev, "physical: no counter names it"],
            )
        rem[qps] = False


def _physical_scan(c: _Ctx, ph: _Phys) -> None:
    """Strong physical anomalies no layer above has explained (no visible impact yet)."""
    topo = c.topo
    seen = c.reported_components()
    storms = [int(c_.component.split(":")[1]) for c_ in c.causes if c_.fault == PFC_STORM]
    storm_src = {int(topo.link_src[2 * cab]) for cab in storms} | {
        int(topo.link_src[2 * cab + 1]) for cab in storms
    }
    sus = np.flatnonzero(
        (ph.crc >= ph.crc_thr) | (ph.sym >= ph.sym_thr) | (ph.pfc >= ph.pfc_thr) | (ph.downed > 0)
    )
    order = np.argsort([-ph.magnitude(int(e)) for e in sus], kind="stable")
    for e in sus[order].tolist():
        comp = f"cable:{e // 2}"
        if comp in seen:
            continue
        lf = ph.link_fault(topo, e)
        if lf is None:
            continue
        if lf[0] == PFC_STORM and int(topo.link_dst[e]) in storm_src:
            continue
        c.add(
            comp,
            _cable_label(topo, e // 2),
            lf[0],
            0.55 + 0.1 * lf[1],
            [f"physical: {lf[2]}", "no impact seen above"],
        )
        seen.add(comp)
        if lf[0] == PFC_STORM:
            storm_src |= {int(topo.link_src[e])}
    for cab in ph.optic_bad:
        comp = f"cable:{cab}"
        if comp not in seen:
            c.add(
                comp,
                _cable_label(topo, cab),
                OPTICAL_FAILING,
                0.6,
                [f"physical: optical DDM{ph.optic_bad[cab]}"],
            )
            seen.add(comp)
    gpu = c.st.query(
        "SELECT gpu, bit_or(throttle_reasons) AS r, min(sm_clock_mhz) AS clk, max(temperature_c) AS t, "
        "sum(nvlink_replay + nvlink_crc) AS nv FROM phys_gpu WHERE iter >= ? GROUP BY gpu",
        [c.p0],
    )
    if gpu["gpu"].size:
        clk_med = float(np.median(gpu["clk"]))
        thr = ((gpu["r"] & THROTTLE_BITS) > 0) & (gpu["clk"] < CLOCK_DROP * clk_med)
        for g, clk, t in zip(
            gpu["gpu"][thr].tolist(), gpu["clk"][thr].tolist(), gpu["t"][thr].tolist(), strict=True
        ):
            if f"gpu:{g}" not in seen:
                ev = [
                    f"physical: gpu{g} thermal throttle, SM clock {clk:.0f} MHz, {t:.0f} C",
                    "no impact seen above",
                ]
                c.add(f"gpu:{g}", f"gpu{g}", GPU_THROTTLE, 0.55, ev)
        nv_thr = max(NVLINK_ERR_MIN, FLEET_FACTOR * (float(np.quantile(gpu["nv"], 0.99)) + 1.0))
        for g, nv in zip(gpu["gpu"].tolist(), gpu["nv"].tolist(), strict=True):
            if nv >= nv_thr and f"gpu:{g}" not in seen:
                c.add(
                    f"gpu:{g}",
                    f"gpu{g}",
                    NVLINK_DEGRADED,
                    0.55,
                    [f"physical: gpu{g} NVLink replay+CRC {int(nv)}"],
                )
    host = c.st.query(
        "SELECT host, median(cpu_util_pct) AS cpu FROM phys_host WHERE iter >= ? GROUP BY host",
        [c.p0],
    )
    for h, cpu in zip(host["host"].tolist(), host["cpu"].tolist(), strict=True):
        if cpu >= CPU_BUSY_PCT and f"host:{h}" not in seen:
            c.add(
                f"host:{h}",
                f"host{h}",
                CPU_CONTENTION,
                0.55,
                [f"physical: host{h} CPU at {cpu:.0f}%"],
            )
    for g, (fault, text) in ph.cfg_dev.items():
        if f"nic:{g}" not in seen:
            c.add(
                f"nic:{g}",
                f"nic{g}",
                fault,
                0.55,
                [f"physical: nic{g} config {text}", "no impact seen above"],
            )


def _timeouts(c: _Ctx) -> None:
    """NCCL timeouts no Xid or link-down event explains: who is silent, and which path broke.

    A rank that peers time out on but that reports no timeout itself has stopped (its GPU or
    process); ranks that time out on each other are both alive, so the path between them broke:
    the cable common to all their QPs' last INT routes is the suspect.
    """
    st, topo = c.st, c.topo
    err = st.query("SELECT DISTINCT rank, peer FROM app_nccl_error")
    if not err["rank"].size:
        return
    reporters = set(err["rank"].tolist())
    explained = set(c.explained_gpus) | {
        int(x.component.split(":")[1]) for x in c.causes if x.component.startswith("gpu:")
    }
    peers, counts = np.unique(err["peer"], return_counts=True)
    for p_, k in zip(peers.tolist(), counts.tolist(), strict=True):
        if p_ in reporters or p_ in explained:
            continue
        c.add(
            f"gpu:{p_}",
            f"gpu{p_}",
            UNKNOWN,
            0.85,
            [
                f"application: {k} ranks time out waiting for rank {p_}, which reports no timeout "
                "itself (it stopped)",
                f"physical: no Xid or ECC record for gpu{p_}: no counter names the cause",
            ],
        )
        c.explained_gpus.add(p_)
    pairs = {
        (int(r), int(p_))
        for r, p_ in zip(err["rank"].tolist(), err["peer"].tolist(), strict=True)
        if r in reporters and p_ in reporters and r not in explained and p_ not in explained
    }
    if not pairs:
        return
    q = st.query("SELECT DISTINCT qp, rank, dst_rank FROM transport_qp")
    hop = st.query(
        "SELECT qp, link FROM network_hop WHERE iter = (SELECT max(iter) FROM network_hop)"
    )
    if not q["qp"].size or not hop["qp"].size:
        return
    broken = {
        int(x)
        for x, r, d in zip(
            q["qp"].tolist(), q["rank"].tolist(), q["dst_rank"].tolist(), strict=True
        )
        if (r, d) in pairs
    }
    if not broken:
        return
    hq = hop["qp"].astype(np.int64)
    on = np.isin(hq, np.fromiter(broken, np.int64))
    cables, k = np.unique(hop["link"][on].astype(np.int64) // 2, return_counts=True)
    best = int(cables[int(np.argmax(k))])
    if int(k.max()) < len(broken) or f"cable:{best}" in c.reported_components():
        return
    ends = sorted({x for pr in pairs for x in pr})
    c.add(
        f"cable:{best}",
        _cable_label(topo, best),
        UNKNOWN,
        0.85,
        [
            f"application: ranks {', '.join(map(str, ends[:6]))} time out on each other (all alive)",
            f"network: the last INT routes of all {len(broken)} broken QPs cross {_cable_label(topo, best)}",
            "physical: the port reads up with no errors: no counter names the cause",
        ],
    )
    c.explained_gpus.update(ends)


def _job_wide(c: _Ctx) -> None:
    """Slowdowns of the whole job: a pause of every rank in one iteration (checkpoint), or all
    ranks computing slower than Seer predicts together (a configuration change)."""
    if c.last_app < 0:
        return
    a = c.st.query(
        "SELECT iter, median(iter_ms) AS it, median(compute_ms) AS comp, median(tp_ms) AS tp, "
        "median(dp_ms) AS dp, median(data_ms) AS data FROM app_iteration GROUP BY iter ORDER BY iter"
    )
    if a["iter"].size >= 3:
        it = a["it"].astype(np.float64)
        phases = np.nan_to_num(a["data"].astype(np.float64)) + a["comp"] + a["tp"] + a["dp"]
        base_it, base_ph = float(np.median(it)), float(np.median(phases))
        for i in np.flatnonzero(it > PAUSE_RATIO * base_it).tolist():
            if phases[i] <= (1 + SEER_TOLERANCE) * base_ph:
                gap = it[i] - base_it
                c.add(
                    "job:0",
                    "job",
                    CHECKPOINT_PAUSE,
                    0.75,
                    [
                        f"application: iteration {int(a['iter'][i])} took {it[i]:.0f} ms vs "
                        f"{base_it:.0f} ms on every rank alike, {gap:.0f} ms outside compute/TP/DP",
                        "application: ranks, QPs and counters as in the other iterations",
                        "no hardware cause (a pause of all ranks: checkpoint or host I/O)",
                    ],
                )
    w = c.st.query(
        "SELECT rank, median(compute_ms) AS comp FROM app_iteration WHERE iter >= ? GROUP BY rank",
        [c.w0],
    )
    comp = w["comp"].astype(np.float64)
    if not comp.size or np.isnan(comp).all():
        return
    pred = float(c.seer["compute_s"]) * 1e3
    med = float(np.nanmedian(comp))
    share = float(np.mean(comp > (1 + SEER_TOLERANCE) * pred))
    if med > (1 + SEER_TOLERANCE) * pred and share > 0.5:
        spread = float(np.nanmedian(np.abs(comp - med))) * 1.4826 / med
        c.add(
            "job:0",
            "job",
            CONFIG_SLOWDOWN,
            0.75,
            [
                f"application: {share * 100:.0f}% of ranks compute {med / pred:.2f}x Seer's "
                f"predicted {pred:.0f} ms, together (spread {spread * 100:.1f}% across ranks)",
                "application: no rank, host or link stands out: the job itself does more work",
                "no hardware cause (a configuration or code change)",
            ],
        )


def _seer(c: _Ctx) -> tuple[dict[str, float], list[str]]:
    if c.last_app < 0:
        return {}, ["no completed iteration to compare with Seer"]
    a = c.st.query(
        "SELECT median(compute_ms) AS comp, median(iter_ms) AS it, min(dp_ms) AS dp FROM app_iteration WHERE iter >= ?",
        [c.w0],
    )
    obs = {
        "compute": float(a["comp"][0]) / 1e3,
        "iteration": float(a["it"][0]) / 1e3,
        "dp": float(a["dp"][0]) / 1e3,
    }
    pred = {
        "compute": c.seer["compute_s"],
        "iteration": c.seer["iteration_s"],
        "dp": c.seer["dp_s"],
    }
    out: dict[str, float] = {}
    dep: list[str] = []
    for k in obs:
        out[f"{k}_observed_s"] = obs[k]
        out[f"{k}_predicted_s"] = pred[k]
        ratio = obs[k] / max(pred[k], 1e-9)
        out[f"{k}_ratio"] = ratio
        if ratio > 1.0 + SEER_TOLERANCE:
            dep.append(
                f"{k}: observed {obs[k] * 1e3:.1f} ms is {ratio:.2f}x Seer's {pred[k] * 1e3:.1f} ms"
            )
    base = c.st.query("SELECT median(iter_ms) AS m FROM app_iteration WHERE iter < ?", [c.w0])["m"]
    if (
        base.size
        and not np.isnan(base[0])
        and obs["iteration"] * 1e3 > (1.0 + REGRESSION) * float(base[0])
    ):
        c.anomalies.append(
            f"application: iteration time {obs['iteration'] * 1e3:.0f} ms vs {float(base[0]):.0f} ms before"
        )
    return out, dep


def diagnose(store: TelemetryStore) -> Diagnosis:
    """Localize root causes from the telemetry in `store`; ranked by confidence."""
    t0 = time.perf_counter()
    c = _Ctx(store)
    _hard_events(c)
    _timeouts(c)
    _stragglers(c)
    _nvlink(c)
    _job_wide(c)
    ph = _Phys(c)
    _network(c, ph)
    _physical_scan(c, ph)
    seer, dep = _seer(c)
    causes = sorted(c.causes, key=lambda x: -x.confidence)
    return Diagnosis(
        anomalies=c.anomalies,
        causes=causes,
        seer=seer,
        seer_departure=dep,
        elapsed_s=time.perf_counter() - t0,
        stats={"gpus": c.n, "window_iters": [c.w0, c.last_app]},
    )
