"""Canonical bidirectional session keys: both directions of a connection map to one key.

A key is (VNI, protocol, endpoint A, endpoint B) where an endpoint is (address hi, address lo,
port) and A is the lower endpoint in that lexicographic order. A packet's direction bit is 0
when it goes A -> B (lower -> higher) and 1 otherwise. ICMP echo request and reply of one
identifier are one session (both ports = the echo id); other ICMP messages between two hosts
share one session with ports 0. The hash is a murmur3-style mix of the canonical words; the
numpy version here, the scalar `hash_key_py` and the numba twin in engine/kernels/hashing.py agree
bit for bit (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PacketBatch

if TYPE_CHECKING:
    from starfabric.fornax.engine.interface import FlowKeys

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
C_MUL = 0xFF51AFD7ED558CCD
C_FIN = 0xC4CEB9FE1A85EC53
C_ALT = 0x9E3779B97F4A7C15
#: Seed of the table hash (assumption: any fixed odd constant; configurable in EngineConfig).
DEFAULT_HASH_SEED = 0x5EED_F0A7_C0DE_0001

ICMP_ECHO_TYPES = {PROTO_ICMP: (8, 0), PROTO_ICMPV6: (128, 129)}
#: ICMP(v6) query classes (request type, reply type) the kernel tracks (its invmap): echo,
#: timestamp, information, address mask; ICMPv6 echo and node information.
ICMP_QUERIES = {PROTO_ICMP: ((8, 0), (13, 14), (15, 16), (17, 18)),
                PROTO_ICMPV6: ((128, 129), (139, 140))}  # fmt: skip
#: Per family (0: ICMP, 1: ICMPv6) and type: the class's key offset (+k a request, -k its
#: reply, 0 none), and the type nf_ct_invert_tuple turns it into (request <-> reply; -1 none).
ICMP_CLASS_OFFSET = np.zeros((2, 256), np.int64)
ICMP_INVERT = np.full((2, 256), -1, np.int64)
for _fam, _p in enumerate((PROTO_ICMP, PROTO_ICMPV6)):
    for _k, (_req, _rep) in enumerate(ICMP_QUERIES[_p], start=1):
        ICMP_CLASS_OFFSET[_fam, _req], ICMP_CLASS_OFFSET[_fam, _rep] = _k, -_k
        ICMP_INVERT[_fam, _req], ICMP_INVERT[_fam, _rep] = _rep, _req


@dataclass(frozen=True)
class CanonicalKeys:
    """Canonical keys of a batch (structure of arrays) plus each packet's direction bit."""

    vni: npt.NDArray[np.uint32]
    proto: npt.NDArray[np.uint8]
    a_hi: npt.NDArray[np.uint64]
    a_lo: npt.NDArray[np.uint64]
    b_hi: npt.NDArray[np.uint64]
    b_lo: npt.NDArray[np.uint64]
    a_port: npt.NDArray[np.uint16]
    b_port: npt.NDArray[np.uint16]
    direction: npt.NDArray[np.uint8]

    def __len__(self) -> int:
        return len(self.vni)

    def ports_word(self) -> npt.NDArray[np.uint64]:
        """The record's W_PORTS word: vni << 32 | port A << 16 | port B."""
        word = (self.vni.astype(np.uint64) << np.uint64(32)) | (
            self.a_port.astype(np.uint64) << np.uint64(16)
        )
        return np.asarray(word | self.b_port.astype(np.uint64), dtype=np.uint64)

    def take(self, idx: npt.ArrayLike | slice) -> CanonicalKeys:
        """Rows `idx` (indices or a mask)."""
        return CanonicalKeys(*(getattr(self, f.name)[idx] for f in fields(self)))

    def words(self) -> npt.NDArray[np.uint64]:
        """The keys as uint64[n, 5] (a_hi, a_lo, b_hi, b_lo, ports word): the stored form."""
        return np.ascontiguousarray(
            np.stack([self.a_hi, self.a_lo, self.b_hi, self.b_lo, self.ports_word()], 1)
        )

    @classmethod
    def from_words(
        cls, words: npt.NDArray[np.uint64], proto: npt.NDArray[np.uint8]
    ) -> CanonicalKeys:
        """Inverse of `words` (direction bits are not part of a stored key: zeros)."""
        return cls(
            vni=(words[:, 4] >> np.uint64(32)).astype(np.uint32),
            proto=proto,
            a_hi=words[:, 0].copy(),
            a_lo=words[:, 1].copy(),
            b_hi=words[:, 2].copy(),
            b_lo=words[:, 3].copy(),
            a_port=((words[:, 4] >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.uint16),
            b_port=(words[:, 4] & np.uint64(0xFFFF)).astype(np.uint16),
            direction=np.zeros(len(proto), np.uint8),
        )


def _l4_ports(
    proto: npt.NDArray[np.uint8], sport: npt.NDArray[np.uint16], dport: npt.NDArray[np.uint16]
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
    """Ports that take part in the key: an ICMP query -> (id, id + k), its reply -> (id + k,
    id) (k: the class offset); other ICMP -> (0, 0)."""
    sport = sport.copy()
    dport = dport.copy()
    for fam, p in enumerate((PROTO_ICMP, PROTO_ICMPV6)):
        is_p = proto == p
        if not is_p.any():
            continue
        off = ICMP_CLASS_OFFSET[fam, dport[is_p] >> np.uint16(8)]
        ident = sport[is_p].astype(np.int64)
        shifted = ((ident + np.abs(off)) & 0xFFFF).astype(np.uint16)
        ident16 = ident.astype(np.uint16)
        sport[is_p] = np.where(off > 0, ident16, np.where(off < 0, shifted, 0))
        dport[is_p] = np.where(off > 0, shifted, np.where(off < 0, ident16, 0))
    return sport, dport


def icmp_inverted_words(
    proto: npt.NDArray[np.uint8], words: npt.NDArray[np.uint16]
) -> npt.NDArray[np.uint16]:
    """icmp_inverted_word over arrays (ICMPv6 where proto is 58, ICMP otherwise)."""
    word = words.astype(np.int64)
    fam = (proto == PROTO_ICMPV6).astype(np.int64)
    inv = ICMP_INVERT[fam, (word >> 8) & 0xFF]
    return np.where(inv >= 0, (inv << 8) | (word & 0xFF), word).astype(np.uint16)


def icmp_inverted_word(proto: int, word: int) -> int:
    """An ICMP(v6) packet's type/code word (type << 8 | code) with the type inverted as
    nf_ct_invert_tuple does (a request's reply, a reply's request); unchanged otherwise."""
    fam = 0 if proto == PROTO_ICMP else 1
    inv = int(ICMP_INVERT[fam, (word >> 8) & 0xFF])
    return (inv << 8) | (word & 0xFF) if inv >= 0 else word


_U8 = npt.NDArray[np.uint8]
_U16 = npt.NDArray[np.uint16]
_U32 = npt.NDArray[np.uint32]
_U64 = npt.NDArray[np.uint64]


def canonicalize_columns(
    vni: _U32, proto: _U8, src_hi: _U64, src_lo: _U64, dst_hi: _U64, dst_lo: _U64,
    sport: _U16, dport: _U16,
) -> CanonicalKeys:  # fmt: skip
    """Vectorized canonicalization of directed 5-tuples (+VNI)."""
    sp, dp = _l4_ports(proto, sport, dport)
    swap = (src_hi > dst_hi) | (
        (src_hi == dst_hi) & ((src_lo > dst_lo) | ((src_lo == dst_lo) & (sp > dp)))
    )
    return CanonicalKeys(
        vni=vni.astype(np.uint32, copy=False),
        proto=proto.astype(np.uint8, copy=False),
        a_hi=np.where(swap, dst_hi, src_hi).astype(np.uint64),
        a_lo=np.where(swap, dst_lo, src_lo).astype(np.uint64),
        b_hi=np.where(swap, src_hi, dst_hi).astype(np.uint64),
        b_lo=np.where(swap, src_lo, dst_lo).astype(np.uint64),
        a_port=np.where(swap, dp, sp).astype(np.uint16),
        b_port=np.where(swap, sp, dp).astype(np.uint16),
        direction=swap.astype(np.uint8),
    )


def canonicalize(batch: PacketBatch | FlowKeys) -> CanonicalKeys:
    """Canonical keys and direction bits of every packet of a batch (or of directed keys:
    the direction bit then tells which side is the key's source)."""
    b = batch
    return canonicalize_columns(b.vni, b.proto, b.src_hi, b.src_lo, b.dst_hi, b.dst_lo,
                                b.sport, b.dport)  # fmt: skip


def quoted_tuple(err: PacketBatch) -> tuple[npt.NDArray[Any], ...]:
    """The directed (vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport) an ICMP error
    is looked up by: the tuple it quotes, inverted (nf_conntrack_inet_error); a quoted ICMP
    keeps its identifier in place and its type inverted (request <-> reply, as
    nf_ct_invert_tuple). canonicalize_columns' argument order."""
    icmp_in = np.isin(err.inner_proto, (PROTO_ICMP, PROTO_ICMPV6))
    inv_word = icmp_inverted_words(err.inner_proto, err.inner_dport)
    return (
        err.vni, err.inner_proto, err.inner_dst_hi, err.inner_dst_lo, err.inner_src_hi,
        err.inner_src_lo, np.where(icmp_in, err.inner_sport, err.inner_dport),
        np.where(icmp_in, inv_word, err.inner_sport),
    )  # fmt: skip


def _mix_np(h: npt.NDArray[np.uint64], k: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    h = (h ^ k) * np.uint64(C_MUL)
    return h ^ (h >> np.uint64(32))


def _fmix_np(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(C_MUL)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(C_FIN)
    return h ^ (h >> np.uint64(33))


def key_hash(keys: CanonicalKeys, seed: int = DEFAULT_HASH_SEED) -> npt.NDArray[np.uint64]:
    """64-bit hash of each canonical key (vectorized)."""
    h = np.full(len(keys), np.uint64(seed), dtype=np.uint64)
    for w in (keys.a_hi, keys.a_lo, keys.b_hi, keys.b_lo, keys.ports_word()):
        h = _mix_np(h, w)
    h = _mix_np(h, keys.proto.astype(np.uint64))
    return _fmix_np(h)


def _mix_py(h: int, k: int) -> int:
    h = ((h ^ k) * C_MUL) & M64
    return h ^ (h >> 32)


def _fmix_py(h: int) -> int:
    h ^= h >> 33
    h = (h * C_MUL) & M64
    h ^= h >> 33
    h = (h * C_FIN) & M64
    return h ^ (h >> 33)


def hash_key_py(
    a_hi: int, a_lo: int, b_hi: int, b_lo: int, ports_word: int, proto: int, seed: int
) -> int:
    """Scalar twin of `key_hash` in plain Python integers."""
    h = seed & M64
    for w in (a_hi, a_lo, b_hi, b_lo, ports_word, proto):
        h = _mix_py(h, int(w))
    return _fmix_py(h)


def tag_of(h: int) -> int:
    """16-bit probe tag of a hash (never 0: 0 marks an empty slot)."""
    t = (h >> 48) & 0xFFFF
    return t if t else 1


def bucket_pair(h: int, n_buckets: int) -> tuple[int, int]:
    """The two candidate buckets of a hash (distinct when there are >= 2 buckets)."""
    b1 = ((h & M32) * n_buckets) >> 32
    b2 = ((_fmix_py(h ^ C_ALT) & M32) * n_buckets) >> 32
    if b2 == b1:
        b2 = (b1 + 1) % n_buckets
    return b1, b2


__all__ = [
    "DEFAULT_HASH_SEED",
    "ICMP_CLASS_OFFSET",
    "ICMP_INVERT",
    "ICMP_QUERIES",
    "CanonicalKeys",
    "bucket_pair",
    "canonicalize",
    "canonicalize_columns",
    "hash_key_py",
    "icmp_inverted_word",
    "icmp_inverted_words",
    "key_hash",
    "quoted_tuple",
    "tag_of",
]
