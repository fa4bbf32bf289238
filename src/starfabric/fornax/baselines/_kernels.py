"""Numba kernels of the baselines: a connection id per per-direction entry."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit

_M = np.uint64(0xFF51AFD7ED558CCD)
_DIR_OFF = np.uint32(0x7FFFFFFF)


@njit
def _mix(h, k):
    h = (h ^ k) * _M
    return h ^ (h >> np.uint64(32))


@njit
def conn_hash(vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, out):
    """Order-independent 64-bit id of each entry's endpoint pair (+VNI without its direction
    bit, protocol): both entries of a connection get the same id."""
    for i in range(len(vni)):
        swap = (src_hi[i] > dst_hi[i]) or (
            src_hi[i] == dst_hi[i]
            and (src_lo[i] > dst_lo[i] or (src_lo[i] == dst_lo[i] and sport[i] > dport[i]))
        )
        if swap:
            a_hi, a_lo, ap, b_hi, b_lo, bp = (
                dst_hi[i],
                dst_lo[i],
                dport[i],
                src_hi[i],
                src_lo[i],
                sport[i],
            )
        else:
            a_hi, a_lo, ap, b_hi, b_lo, bp = (
                src_hi[i],
                src_lo[i],
                sport[i],
                dst_hi[i],
                dst_lo[i],
                dport[i],
            )
        h = np.uint64(0x9E3779B97F4A7C15)
        h = _mix(h, np.uint64(vni[i] & _DIR_OFF) | (np.uint64(proto[i]) << np.uint64(32)))
        h = _mix(h, np.uint64(a_hi))
        h = _mix(h, np.uint64(a_lo))
        h = _mix(h, np.uint64(b_hi))
        h = _mix(h, np.uint64(b_lo))
        h = _mix(h, (np.uint64(ap) << np.uint64(16)) | np.uint64(bp))
        out[i] = h
