"""Shared builders for the engine tests: flows, packets, engines in both implementations."""

from __future__ import annotations

import ipaddress
from typing import Any

import numpy as np

from starfabric.fornax.engine import EngineConfig, FastEngine, FlowKeys, make_config
from starfabric.fornax.engine.reference import ReferenceEngine
from starfabric.fornax.packets import (
    PROTO_ICMP,
    PROTO_ICMPV6,
    PROTO_TCP,
    PROTO_UDP,
    PacketBatch,
    ip_to_halves,
)

SMALL = {
    "capacity": 64,
    "bucket_size": 4,
    "max_displacement": 8,
    "ring_capacity": 8,
    "n_ports": 2,
    "eni_scopes": 4,
    "vpc_scopes": 2,
    "drop_action": 99,
    "tcp_established_s": 5.0,
    "tcp_syn_sent_s": 2.0,
    "tcp_time_wait_s": 1.0,
    "tcp_close_s": 0.5,
    "udp_unreplied_s": 1.0,
    "udp_assured_s": 3.0,
    "icmp_s": 1.0,
    "watchdog_timeout_s": 0.002,
    "scrub_slots_per_tick": 16,
}


def small_config(**kw: Any) -> EngineConfig:
    return make_config(None, **{**SMALL, **kw})


def both(**kw: Any) -> tuple[FastEngine, ReferenceEngine]:
    cfg = small_config(**kw)
    return FastEngine(cfg), ReferenceEngine(cfg)


PROTOS = (PROTO_TCP, PROTO_UDP, PROTO_ICMP, PROTO_ICMPV6, 47)


def flow(i: int) -> dict[str, int]:
    """Deterministic flow number i: mixed IPv4/IPv6, protocols, two VNIs, colliding tuples."""
    proto = PROTOS[i % len(PROTOS)]
    v6 = proto == PROTO_ICMPV6 or i % 7 == 3
    vni = 100 + (i // 40) % 2  # flows i and i+40 differ only by VNI... plus ports below
    base = i % 40
    if v6:
        a = ipaddress.IPv6Address(f"2001:db8::{base + 1:x}")
        b = ipaddress.IPv6Address(f"2001:db8:1::{(base * 3) % 11 + 1:x}")
    else:
        a = ipaddress.IPv4Address(f"10.0.{base // 8}.{base % 8 + 1}")
        b = ipaddress.IPv4Address(f"10.1.0.{(base * 3) % 11 + 1}")
    sh, sl = ip_to_halves(a)
    dh, dl = ip_to_halves(b)
    sport = 1000 + base
    dport = (
        80 if proto in (PROTO_TCP, PROTO_UDP, 47) else (8 << 8 if proto == PROTO_ICMP else 128 << 8)
    )
    return {
        "vni": vni, "proto": proto, "src_hi": sh, "src_lo": sl,
        "dst_hi": dh, "dst_lo": dl, "sport": sport, "dport": dport,
    }  # fmt: skip


def flow_keys(ids: list[int]) -> FlowKeys:
    rows = [flow(i) for i in ids]
    return (
        FlowKeys.from_columns(**{k: [r[k] for r in rows] for k in rows[0]})
        if rows
        else (FlowKeys.from_columns(vni=np.zeros(0, np.uint32)))
    )


def packets(specs: list[tuple[int, int, int, int, int, int]]) -> PacketBatch:
    """specs: (flow id, reverse?, tcp flags, length, port, time_ns) -> a batch."""
    cols: dict[str, list[int]] = {k: [] for k in (
        "vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport",
        "tcp_flags", "length", "port", "time_ns")}  # fmt: skip
    for fid, rev, flags, length, port, t in specs:
        f = flow(fid)
        if rev:
            f = {**f, "src_hi": f["dst_hi"], "src_lo": f["dst_lo"], "dst_hi": f["src_hi"],
                 "dst_lo": f["src_lo"], "sport": f["dport"], "dport": f["sport"]}  # fmt: skip
            if f["proto"] in (PROTO_ICMP, PROTO_ICMPV6):  # echo reply: same id, reply type
                f["sport"] = flow(fid)["sport"]
                f["dport"] = 0 if f["proto"] == PROTO_ICMP else 129 << 8
        for k in f:
            cols[k].append(f[k])
        cols["tcp_flags"].append(flags)
        cols["length"].append(length)
        cols["port"].append(port)
        cols["time_ns"].append(t)
    if not specs:
        return PacketBatch.empty()
    return PacketBatch.from_columns(**cols)


def table_state(e: FastEngine | ReferenceEngine) -> tuple[np.ndarray, np.ndarray]:
    """(tags, records) of either implementation, as arrays (test-only introspection)."""
    if isinstance(e, FastEngine):
        return e._tags.copy(), e._rec.copy()
    return np.array(e.tags, np.uint16), np.array(e.rec, np.uint64)


def assert_same_state(fast: FastEngine, ref: ReferenceEngine) -> None:
    ft, fr = table_state(fast)
    rt, rr = table_state(ref)
    np.testing.assert_array_equal(ft, rt)
    np.testing.assert_array_equal(fr, rr)
    assert fast.counters() == ref.counters()
    assert fast.occupancy() == ref.occupancy()


def insert_flows(e: Any, ids: list[int], **kw: Any) -> np.ndarray:
    args = {"action_orig": 1, "action_reply": 2, "eni_scope": 0, "vpc_scope": 0,
            "eni_version": 0, "vpc_version": 0, "now_ns": 0, **kw}  # fmt: skip
    return e.insert(flow_keys(ids), **args)
