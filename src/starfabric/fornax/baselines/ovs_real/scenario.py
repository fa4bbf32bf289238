"""One measured run on a private OVS: open connections level by level (N grows, earlier
connections kept alive), let the setup's datapath flows idle out (MAX_IDLE_S), then measure
two windows of keep-alive traffic; optionally a setup-rate sweep on the full table.

Every figure is read from ovs-vswitchd itself (measure.py); CPU is per-thread CPU time, so
other work on the machine's cores slows the run but does not inflate the figures.
"""

from __future__ import annotations

import os
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
from starfabric.fornax.baselines.ovs_real.instance import (
    RX_SOCKET_BUFFER_BYTES,
    OvsInstance,
    ovs_version,
)
from starfabric.fornax.baselines.ovs_real.pipeline import pipeline_flows

#: OVS other_config:max-idle default (s) [fact] ...
OVS_DEFAULT_MAX_IDLE_S = 10.0
#: ... and the private OVS's (other_config:max-idle): a flow idle this long is deleted. Twice
#: the default, so a keep-alive round every KEEPALIVE_PERIOD_S may lose one frame of a flow and
#: still refresh it in time. With the default, keep-alives every 4 s were needed (a lost one
#: made an 8 s gap), and at 100k connections their rate overran the receive queues of OVS's
#: datapath thread on the shared 2-core VM: flows idled out, their next keep-alives became
#: upcalls, and losses cascaded. The model runs with the same max-idle.
MAX_IDLE_S = 20.0
#: Seconds between the starts of two keep-alive rounds (two rounds within MAX_IDLE_S).
KEEPALIVE_PERIOD_S = 8.0
#: Keep-alive frames per second at most; a round is spread evenly over KEEPALIVE_SPREAD of the
#: period (31k frames/s at 100k connections), the rest is room for the sender's stalls on the
#: shared cores (driver.KeepAlive slips rather than bursts: bursts overran OVS's AF_PACKET
#: receive queues, flows aged and their keep-alives became upcalls).
KEEPALIVE_PPS = 150_000.0
KEEPALIVE_SPREAD = 0.8
#: Revalidator threads of the private OVS (other_config:n-revalidator-threads). OVS's default
#: on 2 cores is 1 (cores / 4 + 1), and a 400k-flow dump then ran past the 1.3 s at which the
#: dynamic flow limit shrinks on the shared cores; 2 halves the dump's wall time (the CPU per
#: flow is the same). The model's host (RESCAN_THREADS) has 4.
REVALIDATOR_THREADS = 2
#: The private OVS's other_config:flow-limit (datapath flows; OVS's default is 200,000): the
#: ceiling of the dynamic flow limit, and its start (`upcall/set-flow-limit`), raised as an
#: operator does for a large table (4 exact-match flows per connection at 200k connections
#: are 800k). The model runs with the same (benchmarks/ovs_real.py model_config).
FLOW_LIMIT = 4_000_000
#: Connections opened (and kept) before the levels; 0: none (the fit's base is the RSS with
#: zero flows, read before any traffic).
WARMUP = 0
#: Connection ids of the warm-up (far from the levels' ids 0..N-1).
WARMUP_FIRST = 50_000_000


@dataclass
class RunConfig:
    levels: tuple[int, ...]
    cps: float
    megaflows: bool = True
    window_s: float = 5.0
    windows: int = 2
    settle_s: float = MAX_IDLE_S + 2.0  # the setup's flows idle out first
    flow_limit: int = FLOW_LIMIT
    sweep: tuple[float, ...] = ()
    sweep_step_s: float = 1.0
    warmup: int = WARMUP
    revalidators: int = REVALIDATOR_THREADS
    max_idle_s: float = MAX_IDLE_S
    rx_buffer_bytes: int | None = RX_SOCKET_BUFFER_BYTES


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
    #: revalidator CPU s/s of each measured window (their spread is the measurement's noise)
    revalidator_cpu_windows: list[float] = field(default_factory=list)
    keepalive_sent: int = 0
    keepalive_delivered: int = 0
    keepalive_pps: float = 0.0
    load_avg: float = 0.0
    #: frames OVS's port sockets received / dropped (receive buffer full) in the windows
    #: (measure.packet_socket_stats; -1: not readable here)
    socket_frames: int = -1
    socket_drops: int = -1
    bytes_per_connection: float = 0.0
    bytes_per_flow: float | None = None
    flows_per_connection: float = 0.0

    def __post_init__(self) -> None:
        held = max(self.connections_held, 1)
        self.bytes_per_connection = self.rss_growth_bytes / held
        self.flows_per_connection = self.flows / held
        self.bytes_per_flow = self.rss_growth_bytes / self.flows if self.flows > 100 else None

    @property
    def connections_held(self) -> int:
        """Conntrack entries of the levels' connections (the warm-up's excluded)."""
        return self.conntrack - self.warmup


@dataclass
class RunResult:
    version: str
    megaflows: bool
    #: ovs-vswitchd's RSS with the bridge, ports and pipeline and zero datapath flows
    zero_rss_bytes: int
    #: the RSS the levels' growth is taken from (zero_rss_bytes without a warm-up)
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


def run(cfg: RunConfig, progress: Callable[[str], None] | None = None) -> RunResult:
    """Start a private OVS, measure every level of `cfg`, then the sweep; always cleans up."""
    say = progress or (lambda _m: None)
    other = {"n-revalidator-threads": str(cfg.revalidators),
             "max-idle": str(int(cfg.max_idle_s * 1000))}  # fmt: skip
    with OvsInstance(megaflows=cfg.megaflows, flow_limit=cfg.flow_limit,
                     rx_buffer_bytes=cfg.rx_buffer_bytes, other_config=other) as ovs:  # fmt: skip
        ovs.add_flows(pipeline_flows())
        cm = ovs.mac(ovs.ns_client, ovs.if_client)
        sm = ovs.mac(ovs.ns_server, ovs.if_server)
        socks = drv.Sockets(drv.raw_socket(ovs.ns_client, ovs.if_client),
                            drv.raw_socket(ovs.ns_server, ovs.if_server))  # fmt: skip
        try:
            pid = ovs.vswitchd_pid
            time.sleep(1.0)  # the bridge's first revalidator and bridge runs are done
            zero = ms.rss_bytes(pid)
            pres: list[drv.PrebuiltPhases] = []
            keep = drv.KeepAlive(socks, pres, KEEPALIVE_PERIOD_S, KEEPALIVE_PPS, KEEPALIVE_SPREAD)
            if cfg.warmup:
                warm = Connections(WARMUP_FIRST, cfg.warmup, cm, sm)
                drv.open_connections(socks, drv.PrebuiltPhases.build(warm, SETUP), cfg.cps)
                pres.append(drv.PrebuiltPhases.build(warm, KEEPALIVE))
                keep.run_for(1.0)
            res = RunResult(ovs_version(), cfg.megaflows, zero, ms.rss_bytes(pid),
                            ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns")))  # fmt: skip
            opened = 0
            for n in cfg.levels:
                if n <= opened:
                    continue
                say(f"opening {n - opened:,} connections at {cfg.cps:,.0f}/s (to {n:,})")
                res.levels.append(_level(ovs, keep, opened, n, cfg, cm, sm, res, say))
                opened = n
            if cfg.sweep:
                _sweep(ovs, keep, opened, cfg, cm, sm, res, say)
            return res
        finally:
            socks.close()


def _level(ovs: OvsInstance, keep: drv.KeepAlive, opened: int, n: int, cfg: RunConfig,
           cm: bytes, sm: bytes, res: RunResult, say: Callable[[str], None]) -> Level:  # fmt: skip
    pid = ovs.vswitchd_pid
    new = Connections(opened, n - opened, cm, sm)
    pre_setup = drv.PrebuiltPhases.build(new, SETUP)
    t_open = time.perf_counter()
    rx0 = _rx(ovs)
    ka0 = keep.stats.client + keep.stats.server
    st = drv.open_connections(keep.socks, pre_setup, cfg.cps, keep=keep)
    keep.run_for(0.2)
    # what OVS delivered of everything sent while opening (setup and earlier keep-alives)
    sent = st.client + st.server + keep.stats.client + keep.stats.server - ka0
    delivered = _rx(ovs) - rx0
    del pre_setup
    keep.pres.append(drv.PrebuiltPhases.build(new, KEEPALIVE))
    open_wall = time.perf_counter() - t_open
    say(f"{n:,}: settling {cfg.settle_s:.0f} s (setup flows idle out), then "
        f"{cfg.windows} x {cfg.window_s:.0f} s windows at {keep.pps():,.0f} keep-alive frames/s")  # fmt: skip
    keep.run_for(cfg.settle_s)
    dumps: list[int] = []
    shows: list[ms.UpcallShow] = []

    def sample() -> None:
        u = ms.UpcallShow.parse(ovs.appctl("upcall/show"))
        shows.append(u)
        dumps.append(u.dump_ms)

    rx0, ka0 = _rx(ovs), keep.stats.client + keep.stats.server
    ms.packet_socket_stats(pid)  # reset: count the windows only
    cpu0, t0 = ms.thread_cpu_ns(pid), time.perf_counter()
    reval: list[float] = []
    for _ in range(cfg.windows):
        c0, w0 = ms.thread_cpu_ns(pid), time.perf_counter()
        keep.run_for(cfg.window_s, sample)
        c1, w1 = ms.thread_cpu_ns(pid), time.perf_counter()
        reval.append((c1.get("revalidator", 0) - c0.get("revalidator", 0)) / 1e9 / (w1 - w0))
    cpu1, t1 = ms.thread_cpu_ns(pid), time.perf_counter()
    sock = ms.packet_socket_stats(pid) or (-1, -1)
    ka_sent = keep.stats.client + keep.stats.server - ka0
    ka_got = _rx(ovs) - rx0
    window = t1 - t0
    cpu = {
        k: (cpu1.get(k, 0) - cpu0.get(k, 0)) / 1e9 / window for k in sorted(set(cpu0) | set(cpu1))
    }
    last = shows[-1]
    rss = ms.rss_bytes(pid)
    ct = ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns"))
    return Level(connections=n, cps=cfg.cps, setup_sent=sent, setup_delivered=delivered,
                 open_wall_s=open_wall, conntrack=ct, flows=last.flows, flows_max=last.flows_max,
                 ukeys=last.ukeys, flow_limit=min(u.limit for u in shows),
                 dump_ms_median=statistics.median(dumps), dump_ms_max=max(dumps), rss_bytes=rss,
                 rss_growth_bytes=rss - res.base_rss_bytes, cpu_per_s=cpu, window_s=window,
                 warmup=res.warmup_connections, revalidator_cpu_windows=reval,
                 keepalive_sent=ka_sent, keepalive_delivered=ka_got, keepalive_pps=keep.pps(),
                 load_avg=os.getloadavg()[0], socket_frames=sock[0],
                 socket_drops=sock[1])  # fmt: skip


def _sweep(ovs: OvsInstance, keep: drv.KeepAlive, opened: int,
           cfg: RunConfig, cm: bytes, sm: bytes, res: RunResult,
           say: Callable[[str], None]) -> None:  # fmt: skip
    """New connections at rising rates on the full table (its keep-alives between steps); the
    first rate at which OVS delivers < 99.5% of the setup packets or conntrack gains < 99.5%
    of them is the onset."""
    first = opened
    for cps in cfg.sweep:
        n = max(1, int(cps * cfg.sweep_step_s))
        say(f"sweep: {n:,} new connections at {cps:,.0f}/s")
        pre = drv.PrebuiltPhases.build(Connections(first, n, cm, sm), SETUP)
        ct0 = ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns"))
        # keep-alives pause during a step (max-idle is far longer), so what OVS delivers is
        # the step's setup packets only
        rx0 = _rx(ovs)
        st = drv.open_connections(keep.socks, pre, cps)
        time.sleep(0.5)
        got = _rx(ovs) - rx0
        ct1 = ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns"))
        keep.run_for(1.0)
        expect = packets_per_setup(pre.conns.ids)
        row = {"cps": cps, "connections": n, "sent": st.client + st.server, "expected": expect,
               "delivered": got, "conntrack_added": ct1 - ct0, "send_wall_s": st.wall_s,
               "sender_behind_s": st.behind_s}  # fmt: skip
        res.sweep.append(row)
        first += n
        if got < 0.995 * expect or (ct1 - ct0) < 0.995 * n:
            res.drop_onset_cps = cps
            return


__all__ = [
    "FLOW_LIMIT",
    "KEEPALIVE_PERIOD_S",
    "MAX_IDLE_S",
    "OVS_DEFAULT_MAX_IDLE_S",
    "Level",
    "RunConfig",
    "RunResult",
    "run",
]
