"""One measured run on a private OVS: open connections level by level (N grows, earlier
connections kept alive), let the setup's datapath flows idle out (max-idle 10 s), then
measure a window of keep-alive traffic; optionally a setup-rate sweep on the full table.

Every figure is read from ovs-vswitchd itself (measure.py); CPU is per-thread CPU time, so
other work on the machine's cores slows the run but does not inflate the figures.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from starfabric.fornax.baselines.ovs_real import driver as drv
from starfabric.fornax.baselines.ovs_real import measure as ms
from starfabric.fornax.baselines.ovs_real.frames import (
    KEEPALIVE,
    SETUP,
    Connections,
    packets_per_setup,
)
from starfabric.fornax.baselines.ovs_real.instance import OvsInstance, ovs_version
from starfabric.fornax.baselines.ovs_real.pipeline import pipeline_flows

#: OVS other_config:max-idle default (s): a setup-only flow is gone after this [fact].
MAX_IDLE_S = 10.0
#: Seconds between the starts of two keep-alive rounds (below max-idle and the UDP conntrack
#: timeout; a round of 2N frames longer than this starts the next one right away).
KEEPALIVE_PERIOD_S = 3.0
#: Keep-alive frames per second the driver sends at most (faster rounds overran OVS's
#: AF_PACKET receive queues on the shared 2-core VM: keep-alives lost, flows aged).
KEEPALIVE_PPS = 100_000.0
#: Connections opened (and kept) before the baseline RSS is read, so first-use allocations
#: (datapath caches, conntrack buckets, subtables) are not charged to the measured levels.
WARMUP = 1000
#: Connection ids of the warm-up (far from the levels' ids 0..N-1).
WARMUP_FIRST = 50_000_000


@dataclass
class RunConfig:
    levels: tuple[int, ...]
    cps: float
    megaflows: bool = True
    window_s: float = 5.0
    settle_s: float = MAX_IDLE_S + 1.5
    flow_limit: int = 4_000_000
    sweep: tuple[float, ...] = ()
    sweep_step_s: float = 1.0
    warmup: int = WARMUP


@dataclass
class Level:
    """Figures at one table size (module docstring)."""

    connections: int
    cps: float
    setup_sent: int
    setup_delivered: int
    open_wall_s: float
    conntrack: int
    flows: int
    flows_max: int
    ukeys: int
    flow_limit: int
    dump_ms_median: float
    dump_ms_max: int
    rss_bytes: int
    rss_growth_bytes: int
    cpu_per_s: dict[str, float]
    window_s: float
    warmup: int = 0
    bytes_per_connection: float = 0.0
    bytes_per_flow: float | None = None
    flows_per_connection: float = 0.0

    def __post_init__(self) -> None:
        self.bytes_per_connection = self.rss_growth_bytes / max(self.connections_held, 1)
        self.flows_per_connection = self.flows / max(self.connections_held, 1)

    @property
    def connections_held(self) -> int:
        """Conntrack entries of the levels' connections (the warm-up's excluded)."""
        return self.conntrack - self.warmup
        self.bytes_per_flow = self.rss_growth_bytes / self.flows if self.flows > 100 else None


@dataclass
class RunResult:
    version: str
    megaflows: bool
    base_rss_bytes: int
    warmup_connections: int = 0
    levels: list[Level] = field(default_factory=list)
    sweep: list[dict[str, Any]] = field(default_factory=list)
    drop_onset_cps: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _rx(ovs: OvsInstance) -> int:
    return ovs.rx_packets(ovs.ns_client, ovs.if_client) + ovs.rx_packets(
        ovs.ns_server, ovs.if_server
    )


def _keepalive_for(socks: drv.Sockets, pres: list[drv.PrebuiltPhases], seconds: float,
                   sample: Callable[[], None] | None = None) -> None:  # fmt: skip
    """Keep-alive rounds every KEEPALIVE_PERIOD_S for `seconds`; `sample` between rounds."""
    t_end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        drv.keep_alive(socks, pres, KEEPALIVE_PPS)
        while True:
            if sample is not None:
                sample()
            now = time.perf_counter()
            if now >= t_end:
                return
            if now - t0 >= KEEPALIVE_PERIOD_S:
                break
            time.sleep(min(0.5, KEEPALIVE_PERIOD_S - (now - t0), t_end - now))


def run(cfg: RunConfig, progress: Callable[[str], None] | None = None) -> RunResult:
    """Start a private OVS, measure every level of `cfg`, then the sweep; always cleans up."""
    say = progress or (lambda _m: None)
    with OvsInstance(megaflows=cfg.megaflows, flow_limit=cfg.flow_limit) as ovs:
        ovs.add_flows(pipeline_flows())
        cm = ovs.mac(ovs.ns_client, ovs.if_client)
        sm = ovs.mac(ovs.ns_server, ovs.if_server)
        socks = drv.Sockets(drv.raw_socket(ovs.ns_client, ovs.if_client),
                            drv.raw_socket(ovs.ns_server, ovs.if_server))  # fmt: skip
        try:
            pid = ovs.vswitchd_pid
            pres: list[drv.PrebuiltPhases] = []
            if cfg.warmup:
                warm = Connections(WARMUP_FIRST, cfg.warmup, cm, sm)
                drv.open_connections(socks, drv.PrebuiltPhases.build(warm, SETUP), cfg.cps)
                pres.append(drv.PrebuiltPhases.build(warm, KEEPALIVE))
                _keepalive_for(socks, pres, 1.0)
            res = RunResult(ovs_version(), cfg.megaflows, ms.rss_bytes(pid),
                            ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns")))  # fmt: skip
            opened = 0
            for n in cfg.levels:
                if n <= opened:
                    continue
                say(f"opening {n - opened:,} connections at {cfg.cps:,.0f}/s (to {n:,})")
                res.levels.append(_level(ovs, socks, pres, opened, n, cfg, cm, sm, res, say))
                opened = n
            if cfg.sweep:
                _sweep(ovs, socks, opened, cfg, cm, sm, res, say)
            return res
        finally:
            socks.close()


def _level(ovs: OvsInstance, socks: drv.Sockets, pres: list[drv.PrebuiltPhases], opened: int,
           n: int, cfg: RunConfig, cm: bytes, sm: bytes, res: RunResult,
           say: Callable[[str], None]) -> Level:  # fmt: skip
    pid = ovs.vswitchd_pid
    new = Connections(opened, n - opened, cm, sm)
    pre = drv.PrebuiltPhases.build(new, KEEPALIVE)
    # open in chunks of a keep-alive period, keeping the earlier connections alive between
    chunk = max(1, int(cfg.cps * KEEPALIVE_PERIOD_S))
    sent = delivered = 0
    t_open = time.perf_counter()
    for a in range(0, new.n, chunk):
        b = min(a + chunk, new.n)
        part = drv.PrebuiltPhases.build(Connections(opened + a, b - a, cm, sm), SETUP)
        rx0 = _rx(ovs)
        st = drv.open_connections(socks, part, cfg.cps)
        time.sleep(0.2)
        delivered += _rx(ovs) - rx0
        sent += st.client + st.server
        if pres:
            drv.keep_alive(socks, pres, KEEPALIVE_PPS)
    open_wall = time.perf_counter() - t_open
    pres.append(pre)
    say(
        f"{n:,}: settling {cfg.settle_s:.0f} s (setup flows idle out), then a {cfg.window_s:.0f} s window"
    )
    _keepalive_for(socks, pres, cfg.settle_s)
    dumps: list[int] = []
    shows: list[ms.UpcallShow] = []

    def sample() -> None:
        u = ms.UpcallShow.parse(ovs.appctl("upcall/show"))
        shows.append(u)
        dumps.append(u.dump_ms)

    cpu0, t0 = ms.thread_cpu_ns(pid), time.perf_counter()
    _keepalive_for(socks, pres, cfg.window_s, sample)
    cpu1, t1 = ms.thread_cpu_ns(pid), time.perf_counter()
    window = t1 - t0
    cpu = {
        k: (cpu1.get(k, 0) - cpu0.get(k, 0)) / 1e9 / window for k in sorted(set(cpu0) | set(cpu1))
    }
    last = shows[-1]
    rss = ms.rss_bytes(pid)
    ct = ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns"))
    return Level(connections=n, cps=cfg.cps, setup_sent=sent, setup_delivered=delivered,
                 open_wall_s=open_wall, conntrack=ct, flows=last.flows, flows_max=last.flows_max, ukeys=last.ukeys,
                 flow_limit=last.limit, dump_ms_median=statistics.median(dumps),
                 dump_ms_max=max(dumps), rss_bytes=rss, rss_growth_bytes=rss - res.base_rss_bytes,
                 cpu_per_s=cpu, window_s=window, warmup=res.warmup_connections)  # fmt: skip


def _sweep(ovs: OvsInstance, socks: drv.Sockets, opened: int, cfg: RunConfig, cm: bytes,
           sm: bytes, res: RunResult, say: Callable[[str], None]) -> None:  # fmt: skip
    """New connections at rising rates on the full table; the first rate at which OVS
    delivers < 99.5% of the setup packets or conntrack gains < 99.5% of them is the onset."""
    first = opened
    for cps in cfg.sweep:
        n = max(1, int(cps * cfg.sweep_step_s))
        say(f"sweep: {n:,} new connections at {cps:,.0f}/s")
        pre = drv.PrebuiltPhases.build(Connections(first, n, cm, sm), SETUP)
        ct0 = ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns"))
        rx0 = _rx(ovs)
        st = drv.open_connections(socks, pre, cps)
        time.sleep(0.5)
        got = _rx(ovs) - rx0
        ct1 = ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns"))
        expect = packets_per_setup(pre.conns.ids)
        row = {"cps": cps, "connections": n, "sent": st.client + st.server, "expected": expect,
               "delivered": got, "conntrack_added": ct1 - ct0, "send_wall_s": st.wall_s,
               "sender_behind_s": st.behind_s}  # fmt: skip
        res.sweep.append(row)
        first += n
        if got < 0.995 * expect or (ct1 - ct0) < 0.995 * n:
            res.drop_onset_cps = cps
            return


__all__ = ["KEEPALIVE_PERIOD_S", "MAX_IDLE_S", "Level", "RunConfig", "RunResult", "run"]
