"""The entry's 64-bit `aux` cookie: what the manager must remember per session but hardware
cannot derive from the key, kept IN the entry so software keeps nothing per session.

  bit 63       an SNAT (pool) allocation is held
  bits 32..55  global public-IP index of the allocation (nat.NatPools numbering)
  bits 16..31  the allocated source port
  bit 62       ICMP word present
  bits 0..15   ICMP: the first packet's type << 8 | code (the canonical key keeps only the
               echo identifier, but re-deciding the session needs the type)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

NAT_FLAG = np.uint64(1 << 63)
_IP_SHIFT = np.uint64(32)
_PORT_SHIFT = np.uint64(16)
ICMP_FLAG = np.uint64(1 << 62)
_IP_MASK = np.uint64((1 << 24) - 1)
_M16 = np.uint64(0xFFFF)
_ICMP_MASK = np.uint64(0xFFFF)


def pack(
    nat: npt.NDArray[np.bool_],
    ip_index: npt.NDArray[np.int64],
    port: npt.NDArray[np.int64],
    icmp: npt.NDArray[np.bool_],
    icmp_word: npt.NDArray[np.uint16],
) -> npt.NDArray[np.uint64]:
    """Build cookies (vectorized)."""
    out = np.where(
        nat,
        NAT_FLAG
        | ((ip_index.astype(np.uint64) & _IP_MASK) << _IP_SHIFT)
        | ((port.astype(np.uint64) & _M16) << _PORT_SHIFT),
        np.uint64(0),
    ).astype(np.uint64)
    return out | np.where(icmp, ICMP_FLAG | (icmp_word.astype(np.uint64) & _ICMP_MASK), 0).astype(
        np.uint64
    )


def has_nat(aux: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    return (aux & NAT_FLAG) != 0


def nat_ip(aux: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    return ((aux >> _IP_SHIFT) & _IP_MASK).astype(np.int64)


def nat_port(aux: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    return ((aux >> _PORT_SHIFT) & _M16).astype(np.int64)


def icmp_word(aux: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint16]:
    """The first packet's ICMP type << 8 | code (0 when none was stored)."""
    return np.where((aux & ICMP_FLAG) != 0, aux & _ICMP_MASK, 0).astype(np.uint16)


__all__ = ["NAT_FLAG", "has_nat", "icmp_word", "nat_ip", "nat_port", "pack"]
