"""Cross-layer fault localization from a telemetry store, by evidence only.

Application anomalies (iteration regression, NCCL timeouts, compute or TP stragglers) lead to
slow ranks; the transport layer's per-QP throughput, compared with what each QP's route
(reconstructed from INT hops) should give, leads to slow QPs; tomography over their paths finds
the links/NICs they share that healthy QPs do not; physical counters (CRC, PFC, DDM, link
state, GPU clocks, Xid, NVLink, host CPU, NIC config) name the fault. Hard physical events and
strong physical anomalies with no visible impact are reported too, with lower confidence.
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
    CPU_CONTENTION,
    ECMP_HOTSPOT,
    GPU_THROTTLE,
    GPU_XID,
    LINK_CRC,
    MISCONFIG_DCQCN,
    MISCONFIG_MTU,
    NIC_PORT_DOWN,
    NVLINK_DEGRADED,
    OPTICAL_FAILING,
    PFC_STORM,
)
from starfabric.astral.monitor.schema import (
    THROTTLE_HW_SLOWDOWN,
    THROTTLE_HW_THERMAL,
    THROTTLE_SW_THERMAL,
)
from starfabric.astral.monitor.store import TelemetryStore
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


@dataclass(frozen=True)
class Cause:
    """A ranked root cause: component, fault class, confidence and the evidence across layers."""

    component: str
    label: str
    fault: str
    confidence: float
    evidence: list[str]


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
    dn = st.query(
        "SELECT link, min(iter) AS since FROM phys_port WHERE NOT state_up OR link_downed > 0 GROUP BY link"
    )
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


def _stragglers(c: _Ctx) -> None:
    """Compute stragglers (GPU or host) and slow TP (NVLink) hosts from application timings."""
    if c.last_app < 0:
        return
    st = c.st
    a = st.query(
        "SELECT rank, median(compute_ms) AS comp, median(tp_ms) AS tp, median(iter_ms) AS it "
        "FROM app_iteration WHERE iter >= ? GROUP BY rank ORDER BY rank",
        [c.w0],
    )
    rank = a["rank"].astype(np.int64)
    comp = a["comp"].astype(np.float64)
    med, sd = _robust(comp)
    out = rank[(comp > STRAGGLER_RATIO * med) & ((comp - med) / sd > ROBUST_Z)]
    if out.size:
        c.anomalies.append(f"application: {out.size} compute stragglers (median {med:.1f} ms)")
    gpu = st.query(
        "SELECT gpu, bit_or(throttle_reasons) AS r, max(temperature_c) AS t, min(sm_clock_mhz) AS clk, "
        "sum(nvlink_replay + nvlink_crc) AS nv FROM phys_gpu WHERE iter >= ? GROUP BY gpu ORDER BY gpu",
        [c.p0],
    )
    clk_med = float(np.median(gpu["clk"])) if gpu["clk"].size else 0.0
    g_idx = {int(g): i for i, g in enumerate(gpu["gpu"].tolist())}
    host = st.query(
        "SELECT host, median(cpu_util_pct) AS cpu FROM phys_host WHERE iter >= ? GROUP BY host ORDER BY host",
        [c.p0],
    )
    cpu_of = dict(zip(host["host"].tolist(), host["cpu"].tolist(), strict=True))
    hosts_out = out // c.gph
    hh, cnt = np.unique(hosts_out, return_counts=True)
    host_level = hh[cnt >= max(c.gph // 2, 2)]
    for h in host_level.tolist():
        ranks = out[hosts_out == h]
        ratio = float(np.median(comp[np.isin(rank, ranks)]) / med)
        cpu = float(cpu_of.get(h, 0.0))
        ev = [
            f"application: {ranks.size}/{c.gph} ranks of host{h} compute {ratio:.2f}x the median",
        ]
        if cpu >= CPU_BUSY_PCT:
            ev.append(f"physical: host{h} CPU at {cpu:.0f}% (launch and proxy threads starved)")
            c.add(f"host:{h}", f"host{h}", CPU_CONTENTION, 0.93, ev)
        else:
            c.add(
                f"host:{h}", f"host{h}", CPU_CONTENTION, 0.45, [*ev, "physical: no host evidence"]
            )
    for g in out[~np.isin(hosts_out, host_level)].tolist():
        ratio = float(comp[rank == g][0] / med)
        ev = [f"application: rank {g} compute {ratio:.2f}x the median; its peers wait in TP/DP"]
        i = g_idx.get(g)
        strong = False
        if i is not None:
            r, t, clk = int(gpu["r"][i]), float(gpu["t"][i]), float(gpu["clk"][i])
            if r & THROTTLE_BITS or clk < CLOCK_DROP * clk_med:
                ev.append(
                    f"physical: gpu{g} throttle reasons 0x{r:x}, {t:.0f} C, SM clock {clk:.0f} MHz"
                )
                strong = True
        c.add(f"gpu:{g}", f"gpu{g}", GPU_THROTTLE, 0.93 if strong else 0.45, ev)
    # NVLink: a host whose fastest rank still spends long in TP collectives.
    tp = a["tp"].astype(np.float64)
    hosts = rank // c.gph
    nh = int(hosts.max()) + 1 if hosts.size else 0
    floor = np.full(nh, np.inf)
    np.minimum.at(floor, hosts, tp)
    fmed, fsd = _robust(floor)
    slow_h = np.flatnonzero((floor > TP_RATIO * fmed) & ((floor - fmed) / fsd > ROBUST_Z))
    nv = gpu["nv"].astype(np.float64) if gpu["nv"].size else np.zeros(0)
    for h in slow_h.tolist():
        gs = np.arange(h * c.gph, (h + 1) * c.gph)
        errs = np.array([nv[g_idx[g]] if g in g_idx else 0.0 for g in gs.tolist()])
        g = int(gs[int(np.argmax(errs))])
        ev = [
            f"application: host{h} TP collectives {floor[h] / fmed:.2f}x the median even for its fastest rank"
        ]
        if errs.max() > NVLINK_ERR_MIN:
            ev.append(f"physical: gpu{g} NVLink replay+CRC errors {int(errs.max())}")
            c.add(f"gpu:{g}", f"gpu{g}", NVLINK_DEGRADED, 0.93, ev)
        else:
            c.add(
                f"host:{h}", f"host{h}", NVLINK_DEGRADED, 0.45, [*ev, "physical: no NVLink errors"]
            )


class _Phys:
    """Physical aggregates over the window: per-link counters, per-cable DDM, NIC config."""

    def __init__(self, c: _Ctx) -> None:
        n_links = c.topo.n_links
        p = c.st.query(
            "SELECT link, sum(crc_errors) AS crc, sum(symbol_errors) AS sym, sum(pfc_pause_rx) AS pfc, "
            "sum(ecn_marked) AS ecn "
            "FROM phys_port WHERE iter >= ? GROUP BY link",
            [c.p0],
        )
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
        if crc >= self.crc_thr or sym >= self.sym_thr:
            return (
                LINK_CRC,
                1.0,
                f"{int(crc)} CRC and {int(sym)} symbol errors on {_cable_label(topo, cable)} "
                f"(thresholds {self.crc_thr:.0f}, {self.sym_thr:.0f})",
            )
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


def _network(c: _Ctx, ph: _Phys) -> None:
    """Slow QPs → shared elements of their routes (tomography) → physical evidence."""
    st, topo = c.st, c.topo
    hop_it = st.query("SELECT max(iter) AS m FROM network_hop")["m"]
    if not hop_it.size or np.isnan(float(hop_it[0])):
        return
    hi = int(hop_it[0])
    hops = st.query(
        "SELECT DISTINCT qp, hop, link FROM network_hop WHERE iter = ? ORDER BY qp, hop", [hi]
    )
    q = st.query(
        "SELECT qp, any_value(rank) AS rank, median(gbps_mean) AS g FROM transport_qp WHERE iter >= ? "
        "GROUP BY qp ORDER BY qp",
        [c.w0],
    )
    if not q["qp"].size:
        return
    nqp = int(max(q["qp"].max(), hops["qp"].max() if hops["qp"].size else 0)) + 1
    gbps = np.full(nqp, np.nan)
    gbps[q["qp"]] = q["g"]
    src = np.full(nqp, -1, dtype=np.int64)
    src[q["qp"]] = q["rank"]
    hq = hops["qp"].astype(np.int64)
    hl = hops["link"].astype(np.int64)
    nq = np.bincount(hl, minlength=topo.n_links)
    demand = float(c.job["qp_demand_gbps"])
    share = topo.link_capacity_bps / 1e9 / np.maximum(nq, 1)
    exp = np.full(nqp, demand)
    np.minimum.at(exp, hq, share[hl])
    measured = ~np.isnan(gbps)
    slow = measured & (gbps < QP_SLOW * exp)
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
    rem = slow & ~covered
    c.anomalies.append(
        f"transport: {int(slow.sum())} of {int(measured.sum())} QPs below {QP_SLOW}x their route's rate"
    )
    # Tomography elements: directed links, and each QP's source NIC (id n_links + rank).
    el_q = np.concatenate([hq, np.arange(nqp)])
    el_e = np.concatenate([hl, topo.n_links + src])
    ok = el_e >= 0
    el_q, el_e = el_q[ok], el_e[ok]
    n_el = topo.n_links + c.n
    total = np.bincount(el_e, weights=measured[el_q].astype(np.float64), minlength=n_el)
    slow_all = np.bincount(el_e, weights=slow[el_q].astype(np.float64), minlength=n_el)
    purity = slow_all / np.maximum(total, 1)
    for _ in range(64):
        if not rem.any():
            break
        cover = np.bincount(el_e, weights=rem[el_q].astype(np.float64), minlength=n_el)
        cover[purity < PURITY] = 0
        best = cover.max()
        if best < 1:
            break
        cands = np.flatnonzero(cover == best)
        scored: list[tuple[float, float, int, str, str]] = []
        for x in cands.tolist():
            if x >= topo.n_links:
                g = x - topo.n_links
                dev = ph.cfg_dev.get(g)
                if dev:
                    scored.append((1.0, 1.0, x, dev[0], f"physical: nic{g} config {dev[1]}"))
                else:
                    scored.append((0.0, 0.0, x, "", ""))
            else:
                lf = ph.link_fault(topo, x)
                mag = ph.magnitude(x) + (1.0 if x // 2 in ph.optic_bad else 0.0)
                scored.append(
                    (lf[1], mag, x, lf[0], f"physical: {lf[2]}") if lf else (0.0, 0.0, x, "", "")
                )
        scored.sort(key=lambda s: (-s[0], -s[1]))
        strength, _, x, fault, phys_ev = scored[0]
        qps = np.unique(el_q[(el_e == x) & rem[el_q]])
        rate = float(np.nanmedian(gbps[qps]))
        expect = float(np.median(exp[qps]))
        if x >= topo.n_links:
            g = x - topo.n_links
            comp, label = f"nic:{g}", f"nic{g}"
            where = f"all from nic{g}"
        else:
            comp, label = f"cable:{x // 2}", _cable_label(topo, x // 2)
            where = f"all crossing {topo.node_label(int(topo.link_src[x]))}->{topo.node_label(int(topo.link_dst[x]))}"
        ev = [
            "application: DP all-reduce slower than the routes allow",
            f"transport: {qps.size} slow QPs at {rate:.0f} Gb/s vs {expect:.0f} expected, {where}",
            f"network: {purity[x] * 100:.0f}% of the QPs routed through it are slow",
        ]
        if strength > 0:
            c.add(comp, label, fault, 0.6 + 0.35 * purity[x] * strength, [*ev, phys_ev])
        else:
            c.add(
                comp,
                label,
                "link_degraded" if x < topo.n_links else "nic_degraded",
                0.4,
                [*ev, "physical: none"],
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
    sus = np.flatnonzero((ph.crc >= ph.crc_thr) | (ph.sym >= ph.sym_thr) | (ph.pfc >= ph.pfc_thr))
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
    _stragglers(c)
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
