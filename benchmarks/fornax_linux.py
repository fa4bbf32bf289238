"""Fornax's manager on the Linux datapath (fornax/datapaths/linux: nf_conntrack managed over
ctnetlink, real packets through a lab of network namespaces), beside the same traffic through
a real ovs-vswitchd and through the kernel alone.

Traffic: the real-OVS benchmark's connections (fornax/baselines/ovs_real/frames.Connections,
same tuples for every system): TCP (SYN, SYN-ACK, ACK + data, data) and UDP (request, reply,
request, reply), 3:1, from 10.1.0.0/16 to 16 servers 10.2.0.1-16, one connection started every
1/CPS s, the packets of one connection STAGE_S apart. For the tenant policy the servers are 16
ENIs whose elastic IPs are 10.2.0.1-16 admitting those ports from anywhere, and the clients come
from the internet gateway (VNI 0), so every connection is admitted.

Systems (same offered connection rate --cps):
  fornax-linux   Manager over LinuxEngine: every first packet misses, the manager decides and
                 inserts the session (ctnetlink), later packets hit in the kernel.
  fornax-emu     the same Manager over the emulated NIC (FastEngine, no packets): the
                 reference for the manager's own state per session.
  kernel         the kernel alone, no manager: nf_conntrack + the policy's nftables ruleset
                 (datapaths/linux/rules.py) decide and keep every connection themselves;
                 also sent unpaced (cps_unpaced: what the kernel sets up as fast as one
                 sender thread writes frames).
  ovs            a private ovs-vswitchd (userspace datapath, conntrack SG pipeline), opened by
                 the real-OVS harness (baselines/ovs_real: instance, driver, measure).

Figures per system: connections set up per second (connections the datapath holds at the end
/ wall time of the offered traffic), events per second consumed (fornax), management CPU per
1,000 connections (fornax: the manager's own CPU plus its engine operations — ctnetlink
inserts, queries, dumps, event reads — but not engine.process, the emulation's packet path that
builds, sends and reads the verdicts of frames; also the manager alone; ovs: the main, handler
and revalidator threads of ovs-vswitchd, the netdev datapath's upcalls being handled inline in
the main thread; kernel: none, there is no management software), software bytes per session
(fornax: the manager's own state, and with the engine's user-space shadow; ovs: RSS growth per
connection).

Needs root, nftables/libnftables, nf_conntrack and pyroute2 (skips with the reason otherwise);
the OVS column needs openvswitch-switch (skipped with the reason otherwise). Installs nothing.

    python benchmarks/fornax_linux.py [--quick] [--json PATH] [--connections N] [--cps CPS]

Prints the table, then, last, the ratios: Fornax-on-Linux management CPU per connection over
ovs-vswitchd's (with the engine's ctnetlink work, and the manager alone), its manager bytes per session over the emulated NIC's, and its setup rate
over the kernel alone's and OVS's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.fornax.baselines.ovs_real.frames import Connections
from starfabric.fornax.datapaths.linux.netns import (
    Lab,
    LabConfig,
    cleanup_stale,
    kernel_modules,
    linux_support,
)
from starfabric.fornax.engine.config import EngineConfig
from starfabric.fornax.experiments.output import write_json
from starfabric.fornax.packets import PacketBatch, ipv4_to_halves
from starfabric.fornax.vpc import compile_policy, parse_vpc_spec

QUICK_N = 1_000
FULL_N = 5_000
#: Offered connection rate (connections/s): the real-OVS benchmark's exact-match rate, below
#: the drop onset it measured on the shared 2-core VM (benchmarks/ovs_real.py CPS).
CPS = 1_000.0
#: Seconds between two packets of one connection (ovs_real driver: STAGE_TICKS * TICK_S).
STAGE_S = 0.02
#: Simulated seconds of traffic handed to the manager per call (its tick).
WINDOW_S = 0.01
#: Idle seconds after the setup, and manager ticks in them: the engine's timeouts
#: (engine_config: AGE_TIMEOUT_S) expire every connection, so it raises one event each.
AGE_S = 4.0
AGE_TICKS = 20
AGE_TIMEOUT_S = 2.0
#: Connections of the warm-up run of each manager (JIT compiling, first-use costs).
WARMUP_N = 50
TCP = (0x02, 0x12, 0x10, 0x18, 0x18)  # SYN, SYN-ACK, ACK, data (client), data (server)
TCP_REPLY = (False, True, False, False, True)
TCP_STAGE = (0, 1, 2, 2, 3)
UDP_REPLY = (False, True, False, True)
N_SERVERS = 16


def bench_spec() -> Any:
    """16 server ENIs with EIPs 10.2.0.1-16 admitting the traffic's ports from anywhere."""
    enis = [{"name": f"srv{i}", "subnet": "srv", "host": "h1", "ipv4": f"172.16.0.{i}",
             "security_groups": ["srv"]} for i in range(1, N_SERVERS + 1)]  # fmt: skip
    rules = [{"direction": "ingress", "protocol": p, "ports": port, "cidr": "0.0.0.0/0"}
             for p, port in (("tcp", 80), ("tcp", 443), ("tcp", 8080), ("udp", 53),
                             ("udp", 5001))]  # fmt: skip
    rules.append({"direction": "egress", "protocol": "all", "cidr": "0.0.0.0/0"})
    return parse_vpc_spec({
        "hosts": [{"name": "h1"}], "gateway_vni": 0,
        "tenants": [{"name": "bench", "vpcs": [{
            "name": "srv", "vni": 100, "cidrs": ["172.16.0.0/16"],
            "subnets": [{"name": "srv", "cidr": "172.16.0.0/24"}],
            "security_groups": [{"name": "srv", "rules": rules}], "enis": enis,
            "eips": [{"ip": f"10.2.0.{i}", "eni": f"srv{i}"} for i in range(1, N_SERVERS + 1)],
        }]}],
    }, "benchmarks/fornax_linux.py")  # fmt: skip


def traffic(n: int, cps: float) -> tuple[PacketBatch, np.ndarray, np.ndarray]:
    """The setup packets of connections 0..n-1 (Connections' tuples) in time order, in
    session-key space (replies reversed), with connection ids and directions."""
    conns = Connections(0, n, b"\0" * 6, b"\0" * 6)
    ids = conns.ids
    t = conns.tuple_of(ids)
    tcp = conns.is_tcp(ids)
    parts = []
    for k in range(5):
        sel = np.flatnonzero(tcp)
        parts.append((sel, TCP[k], TCP_REPLY[k], TCP_STAGE[k], 6, k))
    for k in range(4):
        parts.append((np.flatnonzero(~tcp), 0, UDP_REPLY[k], k, 17, k))
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "time_ns", "src_lo", "dst_lo", "sport", "dport", "proto", "tcp_flags", "conn", "reply")}  # fmt: skip
    for sel, flags, rep, stage, proto, k in parts:
        c_lo, s_lo = ipv4_to_halves(t["cip"][sel])[1], ipv4_to_halves(t["sip"][sel])[1]
        cols["time_ns"].append(np.rint((ids[sel] / cps + stage * STAGE_S) * 1e9).astype(np.int64)
                               + k)  # fmt: skip
        cols["src_lo"].append(s_lo if rep else c_lo)
        cols["dst_lo"].append(c_lo if rep else s_lo)
        cols["sport"].append(t["dport"][sel] if rep else t["sport"][sel])
        cols["dport"].append(t["sport"][sel] if rep else t["dport"][sel])
        cols["proto"].append(np.full(len(sel), proto))
        cols["tcp_flags"].append(np.full(len(sel), flags))
        cols["conn"].append(ids[sel])
        cols["reply"].append(np.full(len(sel), rep))
    a = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.argsort(a["time_ns"], kind="stable")
    conn, reply = a.pop("conn")[order], a.pop("reply")[order].astype(bool)
    batch = PacketBatch.from_columns(vni=0, **{k: v[order] for k, v in a.items()})
    return batch, conn, reply


def engine_config(n: int) -> EngineConfig:
    cap = 1 << max(12, (4 * n).bit_length())
    short = {
        k: AGE_TIMEOUT_S
        for k in (
            "tcp_established_s",
            "tcp_syn_sent_s",
            "tcp_syn_recv_s",
            "udp_unreplied_s",
            "udp_assured_s",
            "icmp_s",
        )
    }
    return EngineConfig.small(capacity=cap, ring_capacity=1 << 16, tcp_be_liberal=1, **short)


def run_kernel(batch: PacketBatch, conn: np.ndarray, reply: np.ndarray, n: int,
               cps: float) -> dict[str, Any]:  # fmt: skip
    """The kernel alone: policy ruleset + conntrack, frames paced at the offered rate."""
    from starfabric.fornax.datapaths.linux.nft import NicTables
    from starfabric.fornax.datapaths.linux.sender import Sender, SeqState, build_frames

    compiled = compile_policy(bench_spec())
    with Lab(LabConfig.from_engine(engine_config(n))) as lab:
        tables = NicTables(lab)
        fast = tables.flowtable_supported()  # the software fast path, where the kernel has it
        tables.load(compiled, flowtable=fast)
        swap_empty = _swap_ms(tables)
        sender = Sender(lab)
        try:
            fr = build_frames(batch, reply, lab.macs, conn=conn, seq_state=SeqState())
            span = (batch.time_ns[-1] - batch.time_ns[0]) / 1e9
            t0, c0 = time.perf_counter(), time.thread_time()
            sent = sender.send(fr, rate_pps=len(fr) / max(span, 1e-3))
            wall, send_cpu = time.perf_counter() - t0, time.thread_time() - c0
            time.sleep(0.2)
            held = int(lab.read_sysctl("net.netfilter.nf_conntrack_count"))
            cnt = tables.counters()
            # capacity: the same connections again under new client ports, unpaced (the
            # sender, one core, is the limit as much as the kernel)
            again = PacketBatch.from_columns(**{**batch.columns(), "sport": np.where(
                reply, batch.sport, batch.sport ^ np.uint16(0x8000)), "dport": np.where(
                reply, batch.dport ^ np.uint16(0x8000), batch.dport)})  # fmt: skip
            fr2 = build_frames(again, reply, lab.macs, conn=conn + n, seq_state=SeqState())
            t1 = time.perf_counter()
            sender.send(fr2)
            max_wall = time.perf_counter() - t1
            time.sleep(0.2)
            held_max = int(lab.read_sysctl("net.netfilter.nf_conntrack_count")) - held
            swap_full = _swap_ms(tables)
        finally:
            sender.close()
            tables.close()
    return {"system": "kernel", "connections": n, "packets": len(batch), "sent": sent,
            "held": held, "wall_s": wall, "cps": held / wall, "mgmt_cpu_s": 0.0,
            "mgmt_cpu_per_1k_s": 0.0, "events": 0, "events_per_s": 0.0,
            "bytes_per_session": 0.0, "sender_cpu_s": send_cpu,
            "admitted": cnt["allow"][0], "refused": sum(v[0] for k, v in cnt.items()
                                                         if k.startswith("drop_")),
            "unpaced_held": held_max, "unpaced_wall_s": max_wall,
            "cps_unpaced": held_max / max_wall, "policy_change_ms_empty": swap_empty,
            "policy_change_ms_full": swap_full, "flowtable": fast}  # fmt: skip


def _swap_ms(tables: Any) -> float:
    """Milliseconds of one policy change (every ENI's version bumped, the ruleset replaced in
    one transaction): the same with an empty table and a full one, since nothing walks it."""
    v = tables.versions
    v.eni[:] += 1
    t = time.perf_counter()
    tables.load(tables.compiled, v, flowtable=tables.flowtable)
    return 1000 * (time.perf_counter() - t)


class _Timed:
    """Wraps engine.process to add its thread CPU (JIT compiling left out) to `cpu_s`: on the
    Linux datapath that is the emulation's packet path (frames built, sent, verdicts read)."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.cpu_s = fn, 0.0

    def __call__(self, *a: Any, **kw: Any) -> Any:
        from starfabric._jit import compile_cpu_s

        c0, j0 = time.thread_time(), compile_cpu_s()
        try:
            return self.fn(*a, **kw)
        finally:
            self.cpu_s += (time.thread_time() - c0) - (compile_cpu_s() - j0)


def run_fornax(batch: PacketBatch, n: int, cps: float, linux: bool) -> dict[str, Any]:
    """The manager over LinuxEngine (real packets, real time) or FastEngine (emulated): the
    setup traffic, then AGE_S of idle time in which every connection ages out (AGED events
    the manager consumes)."""
    from starfabric.fornax.manager.manager import Manager

    cfg = engine_config(n)
    compiled = compile_policy(bench_spec())
    if linux:
        from starfabric.fornax.datapaths.linux.engine import LinuxEngine

        engine: Any = LinuxEngine(cfg)
    else:
        from starfabric.fornax.engine import FastEngine

        engine = FastEngine(cfg)
    try:
        mgr = Manager(engine, compiled)
        timed = _Timed(engine.process)
        engine.process = timed
        step = int(WINDOW_S * 1e9)
        cuts = np.searchsorted(batch.time_ns, np.arange(int(batch.time_ns[0]),
                                                        int(batch.time_ns[-1]) + step, step))  # fmt: skip
        bounds = np.unique(np.r_[cuts, len(batch)])
        t_first = int(batch.time_ns[0])
        t0 = time.perf_counter()
        behind = 0.0
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if a == b:
                continue
            w = batch.take(np.arange(a, b))
            if linux:  # real packets: never ahead of the offered schedule
                due = t0 + (int(w.time_ns[0]) - t_first) / 1e9
                now = time.perf_counter()
                if now < due:
                    time.sleep(due - now)
                behind = max(behind, time.perf_counter() - due)
            mgr.process(w)
            mgr.tick(int(w.time_ns[-1]))
        wall = time.perf_counter() - t0
        # set up = inserted by the manager (some may age out while a slow run goes on)
        held = int(engine.counters()["insert_ok"])
        m = mgr.metrics
        mgmt = m.mgmt_cpu_s + ((m.engine_cpu_s - timed.cpu_s) if linux else 0.0)
        sw = mgr.software_bytes + (int(engine.software_bytes()) if linux else 0)
        # idle: every connection ages out; the manager consumes the events
        mgmt0, eng0, proc0 = m.mgmt_cpu_s, m.engine_cpu_s, timed.cpu_s
        ev0 = sum(m.events.values())
        end = int(batch.time_ns[-1])
        t1 = time.perf_counter()
        for k in range(1, AGE_TICKS + 1):
            if linux:
                time.sleep(AGE_S / AGE_TICKS)
            mgr.tick(end + int(k * AGE_S / AGE_TICKS * 1e9))
        age_wall = time.perf_counter() - t1
        events = sum(m.events.values()) - ev0
        ev_cpu = (m.mgmt_cpu_s - mgmt0) + (
            ((m.engine_cpu_s - eng0) - (timed.cpu_s - proc0)) if linux else 0.0)  # fmt: skip
        return {"system": "fornax-linux" if linux else "fornax-emu", "connections": n,
                "packets": len(batch), "held": held, "wall_s": wall,
                "cps": held / wall if linux else None, "behind_s": behind,
                "mgmt_cpu_s": mgmt, "mgmt_cpu_per_1k_s": 1000 * mgmt / max(n, 1),
                "manager_cpu_s": mgmt0,
                "datapath_cpu_s": proc0, "left_after_aging": int(engine.occupancy()),
                "events": events, "events_cpu_s": ev_cpu,
                "events_per_s": events / ev_cpu if ev_cpu > 0 else None,
                "events_wall_s": age_wall, "software_bytes": sw,
                "bytes_per_session": sw / max(held, 1),
                "manager_bytes_per_session": mgr.software_bytes / max(held, 1),
                "events_by_type": dict(m.events), "connections_decided": int(mgr.connections)}  # fmt: skip
    finally:
        if hasattr(engine, "close"):
            engine.close()


def run_ovs(n: int, cps: float) -> dict[str, Any]:
    """The same connections through a private ovs-vswitchd (exact-match flows)."""
    from starfabric.fornax.baselines.ovs_real import driver as drv
    from starfabric.fornax.baselines.ovs_real import measure as ms
    from starfabric.fornax.baselines.ovs_real.frames import SETUP
    from starfabric.fornax.baselines.ovs_real.instance import (
        PREFIX,
        OvsInstance,
        unavailable_reason,
    )
    from starfabric.fornax.baselines.ovs_real.pipeline import pipeline_flows

    why = unavailable_reason()
    if why is not None:
        return {"system": "ovs", "skipped": why}
    # its own tag: the real-OVS test or benchmark may hold the default one (sf20-a)
    with OvsInstance(tag=f"{PREFIX}-l", megaflows=False) as ovs:
        ovs.add_flows(pipeline_flows())
        cm, sm = ovs.mac(ovs.ns_client, ovs.if_client), ovs.mac(ovs.ns_server, ovs.if_server)
        socks = drv.Sockets(drv.raw_socket(ovs.ns_client, ovs.if_client),
                            drv.raw_socket(ovs.ns_server, ovs.if_server))  # fmt: skip
        try:
            pid = ovs.vswitchd_pid
            time.sleep(1.0)
            rss0, cpu0 = ms.rss_bytes(pid), ms.thread_cpu_ns(pid)
            pre = drv.PrebuiltPhases.build(Connections(0, n, cm, sm), SETUP)
            st = drv.open_connections(socks, pre, cps)
            time.sleep(0.5)
            cpu1, rss1 = ms.thread_cpu_ns(pid), ms.rss_bytes(pid)
            held = ms.parse_nconns(ovs.appctl("dpctl/ct-get-nconns"))
        finally:
            socks.close()
    # the netdev datapath runs upcalls (flow setup) inline in the thread that polls the port,
    # the main thread for these ports: its forwarding is counted with them (an upper bound)
    mgmt = sum((cpu1.get(k, 0) - cpu0.get(k, 0)) / 1e9
               for k in ("main", "handler", "revalidator"))  # fmt: skip
    return {"system": "ovs", "connections": n, "held": held, "wall_s": st.wall_s,
            "cps": held / st.wall_s, "mgmt_cpu_s": mgmt, "mgmt_cpu_per_1k_s": 1000 * mgmt / n,
            "events": None, "events_per_s": None,
            "bytes_per_session": (rss1 - rss0) / max(held, 1),
            "cpu_by_thread_s": {k: (cpu1.get(k, 0) - cpu0.get(k, 0)) / 1e9
                                for k in sorted(set(cpu0) | set(cpu1))}}  # fmt: skip


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_N:,} connections")
    ap.add_argument("--json", type=str, default=None, help="write the figures as JSON here")
    ap.add_argument("--connections", type=int, default=None)
    ap.add_argument("--cps", type=float, default=CPS)
    ap.add_argument("--no-ovs", action="store_true", help="leave the OVS column out")
    args = ap.parse_args(argv)
    why = linux_support()
    if why is not None:
        print(f"skipped: the Linux datapath cannot run here: {why}")
        return 0
    n = args.connections or (QUICK_N if args.quick else FULL_N)
    cleanup_stale("sfx")
    for line in kernel_modules():
        print(f"note: {line}")
    batch, conn, reply = traffic(n, args.cps)
    print(f"{n:,} connections ({len(batch):,} packets) offered at {args.cps:,.0f}/s")
    warm, _c, _r = traffic(WARMUP_N, args.cps)
    run_fornax(warm, WARMUP_N, args.cps, linux=False)
    rows = [run_fornax(batch, n, args.cps, linux=False)]
    rows.append(run_kernel(batch, conn, reply, n, args.cps))
    run_fornax(warm, WARMUP_N, args.cps, linux=True)
    rows.append(run_fornax(batch, n, args.cps, linux=True))
    rows.append({"system": "ovs", "skipped": "--no-ovs"} if args.no_ovs
                else run_ovs(n, args.cps))  # fmt: skip
    by = {r["system"]: r for r in rows}
    print(f"{'system':<14}{'held':>8}{'conn/s':>10}{'mgmt CPU ms/1k':>16}{'events/s':>10}"
          f"{'bytes/session':>15}")  # fmt: skip
    for r in rows:
        if "skipped" in r:
            print(f"{r['system']:<14} skipped: {r['skipped']}")
            continue
        print(f"{r['system']:<14}{r['held']:>8,}{_fmt(r.get('cps'), ',.0f'):>10}"
              f"{_fmt(1000 * r['mgmt_cpu_per_1k_s'], ',.1f'):>16}"
              f"{_fmt(r.get('events_per_s'), ',.0f'):>10}{_fmt(r['bytes_per_session'], ',.1f'):>15}")  # fmt: skip
    fl, emu, k, ovs = by["fornax-linux"], by["fornax-emu"], by["kernel"], by.get("ovs", {})
    print(
        f"kernel alone, policy change (every scope bumped, one transaction): "
        f"{k['policy_change_ms_empty']:.1f} ms with an empty table, "
        f"{k['policy_change_ms_full']:.1f} ms with {k['held'] + k['unpaced_held']:,} entries"
    )
    print(
        f"kernel alone, unpaced: {k['unpaced_held']:,} connections at "
        f"{k['cps_unpaced']:,.0f}/s; fornax-linux: manager alone "
        f"{1000 * fl['manager_cpu_s'] / n * 1000:,.1f} ms/1k, engine user-space "
        f"{fl['bytes_per_session'] - fl['manager_bytes_per_session']:,.0f} B/session"
    )
    ratios = {
        "mgmt_cpu_per_conn_linux_over_ovs": ratio(fl["mgmt_cpu_per_1k_s"],
                                                  ovs.get("mgmt_cpu_per_1k_s")),
        "manager_only_cpu_per_conn_linux_over_ovs": ratio(
            None if "skipped" in fl else 1000 * fl["manager_cpu_s"] / n,
            ovs.get("mgmt_cpu_per_1k_s")),
        "manager_bytes_per_session_linux_over_emulated": ratio(
            fl["manager_bytes_per_session"], emu["manager_bytes_per_session"]),
        "events_per_cpu_s_linux_over_emulated": ratio(fl["events_per_s"], emu["events_per_s"]),
        "cps_linux_over_kernel_alone": ratio(fl["cps"], k["cps"]),
        "cps_linux_over_kernel_alone_unpaced": ratio(fl["cps"], k["cps_unpaced"]),
        "cps_linux_over_ovs": ratio(fl["cps"], ovs.get("cps")),
    }  # fmt: skip
    if args.json:
        write_json(
            {"connections": n, "cps_offered": args.cps, "rows": rows, "ratios": ratios},
            Path(args.json),
        )
    print("ratios (Fornax on Linux / reference, same run):")
    for key, v in ratios.items():
        print(f"  {key}: {_fmt(v, '.3f')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
