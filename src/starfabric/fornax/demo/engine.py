"""Demo step: fill an emulated NIC table, run traffic with a policy bump and faults, show events.

A few seconds at demo scale: 200k sessions (TCP/UDP/ICMP, IPv4 and IPv6), 1M packets in
both directions plus unknown flows, one ENI version bump, injected bit flips, a stalled port
and scrubber ticks that age idle UDP/ICMP sessions. Writes out/fornax_engine.json.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from starfabric import outputs
from starfabric.errors import InvariantError
from starfabric.fornax.engine.engine import FastEngine
from starfabric.fornax.engine.interface import EventType, FlowKeys, Outcome, Scope
from starfabric.fornax.engine.layout import BYTES_PER_ENTRY
from starfabric.fornax.engine.tcp import TcpState
from starfabric.fornax.packets import PROTO_ICMP, PROTO_TCP, PROTO_UDP, TCP_ACK, PacketBatch

N_SESSIONS = 200_000
N_PACKETS = 1_000_000
CAPACITY = 262_144
N_ENI = 256
MS = 1_000_000


def _sessions(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """A synthetic mix: 70 % TCP, 25 % UDP, 5 % ICMP echo; 20 % IPv6; 64 tenants (VNIs)."""
    proto = rng.choice([PROTO_TCP, PROTO_UDP, PROTO_ICMP], n, p=[0.7, 0.25, 0.05]).astype(np.uint8)
    v6 = rng.random(n) < 0.2
    i = np.arange(n, dtype=np.uint64)
    v4 = np.uint64(0xFFFF_0000_0000)
    src_hi = np.where(v6, np.uint64(0x2001_0DB8_0000_0000), np.uint64(0))
    dst_hi = src_hi.copy()
    src_lo = np.where(v6, i + np.uint64(1), v4 | (np.uint64(0x0A00_0000) + i))
    server = rng.integers(1, 1000, n).astype(np.uint64)
    dst_lo = np.where(v6, np.uint64(1 << 40) | server, v4 | (np.uint64(0xAC10_0000) + server))
    icmp = proto == PROTO_ICMP
    return {
        "vni": rng.integers(100, 164, n).astype(np.uint32),
        "proto": proto,
        "src_hi": src_hi,
        "src_lo": src_lo,
        "dst_hi": dst_hi,
        "dst_lo": dst_lo,
        "sport": rng.integers(1024, 65535, n).astype(np.uint16),
        "dport": np.where(icmp, 8 << 8, rng.choice([80, 443, 53, 8080], n)).astype(np.uint16),
    }


def _traffic(
    rng: np.random.Generator, s: dict[str, np.ndarray], n: int, t0: int, n_ports: int
) -> PacketBatch:
    """n packets of known sessions in both directions, 5 % of them from unknown flows."""
    pick = rng.integers(0, len(s["vni"]), n)
    rev = rng.random(n) < 0.5
    c = {k: v[pick] for k, v in s.items()}
    icmp = c["proto"] == PROTO_ICMP
    unknown = rng.random(n) < 0.05
    sport = np.where(unknown, c["sport"] ^ np.uint16(0x5A5A), c["sport"])
    fwd_dport = c["dport"]
    rev_sport = np.where(icmp, c["sport"], c["dport"])
    rev_dport = np.where(icmp, 0, sport)  # echo reply: type 0, same id
    return PacketBatch.from_columns(
        time_ns=t0 + np.sort(rng.integers(0, 100 * MS, n)),
        port=rng.integers(0, n_ports, n),
        vni=c["vni"],
        proto=c["proto"],
        src_hi=np.where(rev, c["dst_hi"], c["src_hi"]),
        src_lo=np.where(rev, c["dst_lo"], c["src_lo"]),
        dst_hi=np.where(rev, c["src_hi"], c["dst_hi"]),
        dst_lo=np.where(rev, c["src_lo"], c["dst_lo"]),
        sport=np.where(rev, rev_sport, sport),
        dport=np.where(rev, rev_dport, fwd_dport),
        tcp_flags=TCP_ACK,
        length=rng.integers(64, 1500, n),
    )


def engine_demo(out: Path, seed: int, console: Console) -> dict[str, Any]:
    """Run the engine demo; write out/fornax_engine.json and return its summary."""
    rng = np.random.default_rng(seed)
    t_start = time.perf_counter()
    eng = FastEngine(
        capacity=CAPACITY, n_ports=4, eni_scopes=N_ENI, vpc_scopes=64, ring_capacity=4096,
        udp_unreplied_s=0.05, udp_assured_s=0.2, icmp_s=0.05, watchdog_timeout_s=0.01,
    )  # fmt: skip
    s = _sessions(rng, N_SESSIONS)
    keys = FlowKeys.from_columns(**s)
    status = eng.insert(
        keys,
        action_orig=rng.integers(1, 1000, N_SESSIONS),
        # 2 % of sessions drop their replies in hardware (the drop handle).
        action_reply=np.where(
            rng.random(N_SESSIONS) < 0.02,
            eng.config.drop_action,
            rng.integers(1, 1000, N_SESSIONS),
        ),
        eni_scope=rng.integers(0, N_ENI, N_SESSIONS),
        vpc_scope=rng.integers(0, 64, N_SESSIONS),
        eni_version=0,
        vpc_version=0,
        now_ns=0,
        tcp_state=np.where(s["proto"] == PROTO_TCP, TcpState.ESTABLISHED, TcpState.NONE),
        aux=np.arange(N_SESSIONS),
    )
    events: list[np.ndarray] = []
    eng.bump_version(Scope.ENI, 7)  # a policy change on one ENI: its sessions go stale
    for slot in eng.slot_of(keys.take(np.arange(0, 40, 2)))[:10]:
        eng.flip_bits(int(slot), [int(rng.integers(0, 14 * 64))])  # single-bit: corrected
    for slot in eng.slot_of(keys.take(np.arange(1, 40, 2)))[:5]:
        eng.flip_bits(int(slot), [700, 701])  # double-bit: detected
    outcomes = np.zeros(len(Outcome), dtype=np.int64)
    batches = 4
    for b in range(batches):
        if b == 2:
            eng.stall_port(3)  # a hung pipeline: PORT_HUNG outcomes, one PIPELINE_HANG event
        if b == 3:
            eng.unstall_port(3)
        batch = _traffic(rng, s, N_PACKETS // batches, b * 100 * MS, 4)
        res = eng.process(batch)
        outcomes += np.bincount(res.outcome, minlength=len(Outcome))
        eng.scrub((b + 1) * 100 * MS, CAPACITY // 2)
        events.append(eng.poll_events())
    ev = np.concatenate(events)
    c = eng.counters()
    if (
        int(outcomes.sum()) != c["packets"]
        or sum(c[o.name.lower()] for o in Outcome) != c["packets"]
    ):
        raise InvariantError("engine demo: packet outcomes do not add up")
    ev_counts = {t.name: int((ev["type"] == t).sum()) for t in EventType}

    table = Table(title="Fornax session engine: packet outcomes", title_justify="left")
    table.add_column("outcome")
    table.add_column("packets", justify="right")
    for o in Outcome:
        table.add_row(o.name, f"{int(outcomes[o]):,}")
    console.print(table)
    etable = Table(title="events raised (hardware -> software)", title_justify="left")
    etable.add_column("event")
    etable.add_column("count", justify="right")
    for name, k in ev_counts.items():
        etable.add_row(name, f"{k:,}")
    console.print(etable)
    summary: dict[str, Any] = {
        "sessions_inserted": int((status == 0).sum()),
        "occupancy_end": eng.occupancy(),
        "packets": c["packets"],
        "outcomes": {o.name: int(outcomes[o]) for o in Outcome},
        "events": ev_counts,
        "counters": c,
        "bytes_per_entry": BYTES_PER_ENTRY,
        "wall_s_engine": round(time.perf_counter() - t_start, 3),
    }
    out.mkdir(parents=True, exist_ok=True)
    outputs.write_json(out / "fornax_engine.json", summary)
    console.print(
        f"{summary['sessions_inserted']:,} sessions, {c['packets']:,} packets; "
        f"wrote {out / 'fornax_engine.json'}"
    )
    return {k: summary[k] for k in ("sessions_inserted", "packets", "outcomes", "events")}


__all__ = ["engine_demo"]
