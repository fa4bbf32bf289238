"""Packet batches: the one array layout every Fornax datapath consumes (structure of arrays).

A batch is what a NIC's receive path hands the pipeline: per packet the arrival time, the
ingress port, the overlay VNI (after VXLAN/Geneve decapsulation) and the inner 5-tuple. IPv4
addresses are stored IPv4-mapped (::ffff:a.b.c.d) in two 64-bit halves, so IPv4 and IPv6 share
one layout. For ICMP, `sport` holds the echo identifier and `dport` the ICMP type<<8 | code.

The TCP header columns feed connection tracking's window checks (engine/conntrack.py):
sequence and acknowledgment numbers, the raw window, the payload length, the window-scale and
SACK-permitted options, and `tcp_sack`, the highest SACK block edge (after the ack, in
sequence space; equal to the ack without a SACK option). `tcp_opt` bits (conntrack.OPT_*):
1 the header has options, 2 SACK permitted, 4 window scale, 8 the header columns are the
segment's own. A batch without them (a flags-only workload, the default zeros) is tracked by
its flags alone.

An ICMP or ICMPv6 error (destination unreachable, time exceeded, ...) quotes the IP header and
first 8 bytes of the packet that caused it; the `inner_*` columns hold that packet's tuple, as
nf_conntrack_inet_error reads it: protocol (0: the packet quotes nothing), addresses (same
layout as src/dst), ports (an inner ICMP: identifier and type<<8 | code, as above). The
tracker makes such an error RELATED to the session the quoted packet belongs to.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from starfabric.ranges import IntRange, check_values

PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17
PROTO_ICMPV6 = 58

# TCP flag bits as on the wire.
TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_PSH = 0x08
TCP_ACK = 0x10

V4_MAPPED_HI = np.uint64(0)
V4_MAPPED_LO_PREFIX = np.uint64(0xFFFF_0000_0000)

_DTYPES: dict[str, type[np.generic]] = {
    "time_ns": np.int64,
    "port": np.uint16,
    "vni": np.uint32,
    "src_hi": np.uint64,
    "src_lo": np.uint64,
    "dst_hi": np.uint64,
    "dst_lo": np.uint64,
    "sport": np.uint16,
    "dport": np.uint16,
    "proto": np.uint8,
    "tcp_flags": np.uint8,
    "length": np.uint32,
    "tcp_seq": np.uint32,
    "tcp_ack": np.uint32,
    "tcp_sack": np.uint32,
    "tcp_win": np.uint16,
    "tcp_opt": np.uint8,
    "tcp_wscale": np.uint8,
    "tcp_len": np.uint32,
    "inner_proto": np.uint8,
    "inner_src_hi": np.uint64,
    "inner_src_lo": np.uint64,
    "inner_dst_hi": np.uint64,
    "inner_dst_lo": np.uint64,
    "inner_sport": np.uint16,
    "inner_dport": np.uint16,
}
#: Every column's dtype (read-only): for code that builds columns before the batch exists.
COLUMN_DTYPES: Mapping[str, type[np.generic]] = MappingProxyType(_DTYPES)
_MEANING = {
    "time_ns": "nanoseconds", "port": "NIC ingress port", "length": "packet length in bytes",
    "proto": "IP protocol number", "inner_proto": "IP protocol number", "tcp_flags": "TCP flags",
    "tcp_seq": "TCP sequence number", "tcp_ack": "TCP acknowledgment number",
    "tcp_sack": "TCP SACK edge", "tcp_win": "TCP window", "tcp_opt": "TCP option bits",
    "tcp_wscale": "TCP window scale", "tcp_len": "TCP payload length",
} | dict.fromkeys(("sport", "dport", "inner_sport", "inner_dport"), "TCP/UDP port")  # fmt: skip
VNI_RANGE = IntRange.bits(24, "24-bit VXLAN/Geneve VNI, RFC 7348")
#: Every column's valid values: its dtype's range, narrower where a standard says so (VNIs are
#: 24 bits). `from_columns` checks against it before casting, as every loader and option does.
COLUMN_RANGES: Mapping[str, IntRange] = MappingProxyType(
    {
        k: IntRange.of_dtype(t, f"{_MEANING[k]}, {np.dtype(t).name}" if k in _MEANING else None)
        for k, t in _DTYPES.items()
    }
    | {"vni": VNI_RANGE}
)
#: Columns a batch may leave out (zeros): the TCP header fields, an ICMP error's quoted tuple.
OPTIONAL = ("tcp_seq", "tcp_ack", "tcp_sack", "tcp_win", "tcp_opt", "tcp_wscale", "tcp_len",
            "inner_proto", "inner_src_hi", "inner_src_lo", "inner_dst_hi", "inner_dst_lo",
            "inner_sport", "inner_dport")  # fmt: skip
TCP_OPT_PRESENT = 1
TCP_OPT_SACK_PERM = 2
TCP_OPT_WSCALE = 4
TCP_OPT_HDR = 8


@dataclass(frozen=True)
class PacketBatch:
    """Columns of equal length, one row per packet, in arrival order."""

    time_ns: npt.NDArray[np.int64]
    port: npt.NDArray[np.uint16]
    vni: npt.NDArray[np.uint32]
    src_hi: npt.NDArray[np.uint64]
    src_lo: npt.NDArray[np.uint64]
    dst_hi: npt.NDArray[np.uint64]
    dst_lo: npt.NDArray[np.uint64]
    sport: npt.NDArray[np.uint16]
    dport: npt.NDArray[np.uint16]
    proto: npt.NDArray[np.uint8]
    tcp_flags: npt.NDArray[np.uint8]
    length: npt.NDArray[np.uint32]
    tcp_seq: npt.NDArray[np.uint32] = None  # type: ignore[assignment]
    tcp_ack: npt.NDArray[np.uint32] = None  # type: ignore[assignment]
    tcp_sack: npt.NDArray[np.uint32] = None  # type: ignore[assignment]
    tcp_win: npt.NDArray[np.uint16] = None  # type: ignore[assignment]
    tcp_opt: npt.NDArray[np.uint8] = None  # type: ignore[assignment]
    tcp_wscale: npt.NDArray[np.uint8] = None  # type: ignore[assignment]
    tcp_len: npt.NDArray[np.uint32] = None  # type: ignore[assignment]
    inner_proto: npt.NDArray[np.uint8] = None  # type: ignore[assignment]
    inner_src_hi: npt.NDArray[np.uint64] = None  # type: ignore[assignment]
    inner_src_lo: npt.NDArray[np.uint64] = None  # type: ignore[assignment]
    inner_dst_hi: npt.NDArray[np.uint64] = None  # type: ignore[assignment]
    inner_dst_lo: npt.NDArray[np.uint64] = None  # type: ignore[assignment]
    inner_sport: npt.NDArray[np.uint16] = None  # type: ignore[assignment]
    inner_dport: npt.NDArray[np.uint16] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        n = len(self.time_ns)
        for name in OPTIONAL:
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(n, dtype=_DTYPES[name]))
        for f in fields(self):
            col = getattr(self, f.name)
            if col.dtype != _DTYPES[f.name] or col.ndim != 1 or len(col) != n:
                raise ValueError(
                    f"PacketBatch.{f.name}: need 1-D {np.dtype(_DTYPES[f.name])} of length {n}"
                )

    def __len__(self) -> int:
        return len(self.time_ns)

    @classmethod
    def empty(cls, n: int = 0) -> PacketBatch:
        return cls(**{k: np.zeros(n, dtype=t) for k, t in _DTYPES.items()})

    @classmethod
    def from_columns(cls, **cols: npt.ArrayLike) -> PacketBatch:
        """Build a batch casting each column to its dtype; missing columns are zeros. A value
        outside its column's range (COLUMN_RANGES) is a ConfigError naming it, not a wrap."""
        unknown = set(cols) - set(_DTYPES)
        if unknown:
            raise ValueError(f"PacketBatch: unknown column(s) {sorted(unknown)}")
        n = max(np.size(v) for v in cols.values()) if cols else 0
        out = {}
        for k, t in _DTYPES.items():
            if k in cols:
                check_values(k, cols[k], COLUMN_RANGES[k])
                out[k] = np.ascontiguousarray(np.broadcast_to(np.asarray(cols[k], dtype=t), (n,)))
            else:
                out[k] = np.zeros(n, dtype=t)
        return cls(**out)

    def take(self, idx: npt.ArrayLike) -> PacketBatch:
        """Rows `idx` (indices or boolean mask) as a new batch."""
        return PacketBatch(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @staticmethod
    def concat(batches: list[PacketBatch]) -> PacketBatch:
        if not batches:
            return PacketBatch.empty()
        return PacketBatch(
            **{
                f.name: np.concatenate([getattr(b, f.name) for b in batches])
                for f in fields(PacketBatch)
            }
        )

    def columns(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def ip_to_halves(addr: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> tuple[int, int]:
    """An IPv4 or IPv6 address as (hi, lo) 64-bit halves; IPv4 is IPv4-mapped."""
    ip = ipaddress.ip_address(addr) if isinstance(addr, str) else addr
    v = int(ip) | (0xFFFF_0000_0000 if ip.version == 4 else 0)
    return v >> 64, v & 0xFFFF_FFFF_FFFF_FFFF


def halves_to_ip(hi: int, lo: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Inverse of `ip_to_halves`: IPv4-mapped addresses come back as IPv4."""
    v = (int(hi) << 64) | int(lo)
    if int(hi) == 0 and (int(lo) >> 32) == 0xFFFF:
        return ipaddress.IPv4Address(v & 0xFFFF_FFFF)
    return ipaddress.IPv6Address(v)


def ipv4_to_halves(a: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized: uint32 IPv4 addresses → (hi, lo) IPv4-mapped halves."""
    arr = np.asarray(a, dtype=np.uint64)
    return np.zeros(arr.shape, dtype=np.uint64), arr | V4_MAPPED_LO_PREFIX
