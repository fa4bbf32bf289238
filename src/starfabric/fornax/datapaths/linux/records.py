"""Kernel conntrack rows (ctnetlink.parse) as the contract's ENTRY_DTYPE / EVENT_DTYPE records,
and the contract's keys as ctnetlink keys. What the kernel keeps where is marks.py; what it
does not keep at all (the tracker's window words, last-seen) is engine.KERNEL_DIFFERENCES."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from starfabric.fornax.datapaths.linux.ctnetlink import IPS_ASSURED, IPS_SEEN_REPLY, Key
from starfabric.fornax.datapaths.linux.marks import (
    COMBO_MASK,
    MISMATCH_BIT,
    ScopeMarks,
    split_labels,
)
from starfabric.fornax.engine.interface import ENTRY_DTYPE, EVENT_DTYPE, FlowKeys
from starfabric.fornax.engine.layout import FLAG_ASSURED, FLAG_MISMATCH_REPORTED, FLAG_SEEN_REPLY

if TYPE_CHECKING:
    from collections.abc import Sequence

_KEY_COLS = ("proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")


def key_rows(keys: FlowKeys, zones: Sequence[int]) -> list[Key]:
    """One ctnetlink key per FlowKeys row (zones: the zone of each row's VNI)."""
    cols = [getattr(keys, c).tolist() for c in _KEY_COLS]
    return [(int(z), *row) for z, row in zip(zones, zip(*cols, strict=True), strict=True)]


def row_keys(rows: list[dict[str, int]], zone_vni: np.ndarray) -> FlowKeys:
    """The directed keys of kernel rows, ports as on the wire (ICMP: id, type << 8 | code)."""
    zone = np.array([r["zone"] for r in rows], np.int64)
    return FlowKeys.from_columns(
        vni=zone_vni[np.minimum(zone, len(zone_vni) - 1)],
        **{c: np.array([r[c] for r in rows], np.uint64) for c in _KEY_COLS[:5]},
        sport=np.array([r["wire_sport"] for r in rows], np.uint16),
        dport=np.array([r["wire_dport"] for r in rows], np.uint16),
    )


def track_meta(proto: np.ndarray, tcp_state: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Tracker word 0 as the engines lay it out (conntrack.py: proto | state << 8 | flags
    << 16), from what the kernel exposes: protocol, TCP state, SEEN_REPLY/ASSURED."""
    f = flags.astype(np.uint64) & np.uint64(FLAG_SEEN_REPLY | FLAG_ASSURED)
    return (proto.astype(np.uint64) | tcp_state.astype(np.uint64) << np.uint64(8)
            | f << np.uint64(16))  # fmt: skip


def status_of_meta(meta: np.ndarray) -> np.ndarray:
    """Kernel status bits (IPS_SEEN_REPLY, IPS_ASSURED) of tracker words 0 (a session moved
    from software keeps what its tracker had seen)."""
    f = (np.asarray(meta, np.uint64) >> np.uint64(16)) & np.uint64(0xFF)
    return np.where(f & np.uint64(FLAG_SEEN_REPLY), IPS_SEEN_REPLY, 0) | np.where(
        f & np.uint64(FLAG_ASSURED), IPS_ASSURED, 0)  # fmt: skip


def flags_of(status: int) -> int:
    return (FLAG_SEEN_REPLY if status & IPS_SEEN_REPLY else 0) | (
        FLAG_ASSURED if status & IPS_ASSURED else 0)  # fmt: skip


def _fill(out: np.ndarray, rows: list[dict[str, int]], marks: ScopeMarks,
          zone_vni: np.ndarray) -> None:  # fmt: skip
    n = len(rows)
    if n == 0:
        return
    for c in ("src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport", "proto", "tcp_state",
              "pkts_orig", "pkts_reply", "bytes_orig", "bytes_reply"):  # fmt: skip
        out[c] = [r[c] for r in rows]
    zone = np.array([r["zone"] for r in rows], np.int64)
    out["vni"] = zone_vni[np.minimum(zone, len(zone_vni) - 1)]
    mark = np.array([r["mark"] for r in rows], np.int64)
    cids = mark & COMBO_MASK
    combo = marks.combos(cids)
    out["eni_scope"], out["vpc_scope"] = combo[:, 0], combo[:, 1]
    out["eni_version"], out["vpc_version"] = combo[:, 2], combo[:, 3]
    lab = [split_labels(r["labels"]) for r in rows]
    out["aux"] = [x[0] for x in lab]
    out["action_orig"] = [x[1] for x in lab]
    out["action_reply"] = [x[2] for x in lab]


def entry_records(rows: list[dict[str, int]], marks: ScopeMarks, zone_vni: np.ndarray,
                  now_ns: int) -> np.ndarray:  # fmt: skip
    """ENTRY_DTYPE records; remaining/expires from the kernel's timer (whole seconds)."""
    out = np.zeros(len(rows), ENTRY_DTYPE)
    if not rows:
        return out
    _fill(out, rows, marks, zone_vni)
    out["slot"] = [r["id"] & 0x7FFF_FFFF for r in rows]
    out["flags"] = [flags_of(r["status"]) | (FLAG_MISMATCH_REPORTED if r["mark"] & MISMATCH_BIT
                                             else 0) for r in rows]  # fmt: skip
    cids = np.array([r["mark"] & COMBO_MASK for r in rows], np.int64)
    out["stale"] = ~marks.fresh_mask(cids)
    rem = np.array([r["timeout"] for r in rows], np.int64) * 1_000_000_000
    out["remaining_ns"] = rem
    out["expires_ns"] = now_ns + rem
    out["track"][:, 0] = track_meta(out["proto"], out["tcp_state"], out["flags"])
    return out


def event_records(rows: list[dict[str, int]], types: list[int], marks: ScopeMarks,
                  zone_vni: np.ndarray, now_ns: int) -> np.ndarray:  # fmt: skip
    out = np.zeros(len(rows), EVENT_DTYPE)
    if not rows:
        return out
    _fill(out, rows, marks, zone_vni)
    out["type"] = types
    out["flags"] = [flags_of(r["status"]) for r in rows]
    out["time_ns"] = now_ns
    out["slot"] = [r["id"] & 0x7FFF_FFFF for r in rows]
    return out


__all__ = [
    "entry_records",
    "event_records",
    "flags_of",
    "key_rows",
    "row_keys",
    "status_of_meta",
    "track_meta",
]
