"""SEC-DED over a session record (layout.ECC_GROUPS), the numba twin of ecc.py: encode, check,
correct, and the patch of a check word after a few words changed (the hit path's update)."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine._intrinsics import popcount
from starfabric.fornax.engine.kernels.codes import (
    ECC_CLEAN,
    ECC_CORR,
    ECC_UNCORR,
    M32,
    M_CHECK,
    M_HIGH,
    M_HIGH_B,
    M_LOW,
    M_LOW_B,
    M_P,
    M_P_B,
    N_DATA,
    S32,
    S_OVERALL,
    S_OVERALL_B,
    U0,
    U1,
)


@njit
def _par(x: np.uint64) -> np.uint64:
    return popcount(x) & U1


@njit
def _half_parities(v: np.uint64) -> np.uint64:
    """Parities of the low (bit 0) and high (bit 1) 32-bit halves of v: two POPCNTs."""
    return (popcount(v & M32) & U1) | ((popcount(v >> S32) & U1) << U1)


@njit_inline
def ecc_encode(rec, s) -> np.uint64:
    """Check word of group A of rec[s] (twin of ecc.ecc_encode); inlined into the hit path.

    Parity is linear, so the overall bit (parity of the data and check bits 0..59) is the
    parity of (XOR of the data words) ^ (check bits): one POPCNT instead of a bit-by-bit sum.
    """
    acc = U0
    p = U0
    for w in range(N_DATA):
        v = rec[s, w]
        acc ^= v
        p |= _half_parities(v) << np.uint64(2 * w)
    check = ((acc & M32) ^ (acc >> S32)) | (p << S32)
    return check | (_par(acc ^ check) << S_OVERALL)


@njit_inline
def _patched(ecc, d, p) -> np.uint64:
    """Group A's check word after its data changed by XOR d, given the new parity field p."""
    x = (ecc & M32) ^ (d & M32) ^ (d >> S32)
    check = x | (p << S32)
    # The old overall bit makes (ecc & M_LOW) carry the data parity; parity is linear.
    return check | (_par((ecc & M_LOW) ^ d ^ check) << S_OVERALL)


@njit
def ecc_patch(ecc, w, old, new):
    """Check word after data word w changed from old to new (equal to a full re-encode).

    The pipeline patches the few words a hit changes instead of re-encoding all 14.
    """
    return _patched(ecc, old ^ new, _set_pair((ecc & M_CHECK) >> S32, w, new))


@njit_inline
def _set_pair(p, w, v):
    """The parity field p with word w's two half-word parities replaced by those of v."""
    sh = np.uint64(2 * w)
    return (p & ~(np.uint64(3) << sh)) | (_half_parities(v) << sh)


@njit_inline
def ecc_patch4(ecc, w1, o1, n1, w2, o2, n2, w3, o3, n3, w4, o4, n4):
    """ecc_patch for four distinct changed words at once (the hit path's update)."""
    p = _set_pair((ecc & M_CHECK) >> S32, w1, n1)
    p = _set_pair(_set_pair(_set_pair(p, w2, n2), w3, n3), w4, n4)
    return _patched(ecc, (o1 ^ n1) ^ (o2 ^ n2) ^ (o3 ^ n3) ^ (o4 ^ n4), p)


@njit
def _one_bit(x: np.uint64) -> bool:
    return x != U0 and (x & (x - U1)) == U0


@njit
def _bit_index(x: np.uint64) -> int:
    i = 0
    while (x >> np.uint64(i)) != U1:
        i += 1
    return i


@njit_inline
def ecc_b_of(w0, w1, w2, w3, w4, w5, w6) -> np.uint64:
    """ecc_encode_b of the seven tracker words given as values (the hit path has them in
    registers)."""
    acc = w0 ^ w1 ^ w2 ^ w3 ^ w4 ^ w5 ^ w6
    p = (
        _half_parities(w0)
        | (_half_parities(w1) << np.uint64(2))
        | (_half_parities(w2) << np.uint64(4))
        | (_half_parities(w3) << np.uint64(6))
        | (_half_parities(w4) << np.uint64(8))
        | (_half_parities(w5) << np.uint64(10))
        | (_half_parities(w6) << np.uint64(12))
    )
    check = ((acc & M32) ^ (acc >> S32)) | (p << S32)
    return check | (_par(acc ^ check) << S_OVERALL_B)


@njit
def ecc_encode_b(rec, s) -> np.uint64:
    """Check word of group B (the tracker words, layout.ECC_GROUPS), as ecc_b_of."""
    w = L.W_TRACK
    return ecc_b_of(rec[s, w], rec[s, w + 1], rec[s, w + 2], rec[s, w + 3], rec[s, w + 4],
                    rec[s, w + 5], rec[s, w + 6])  # fmt: skip


@njit
def ecc_seal(rec, s) -> None:
    """Write both check words of rec[s] (twin of ecc.ecc_seal)."""
    rec[s, L.W_ECC] = ecc_encode(rec, s)
    rec[s, L.W_ECC2] = ecc_encode_b(rec, s)


@njit
def _ecc_decode_group(stored, want, m_p, m_high, m_low, s_overall, data_w0, ecc_w):
    """(status, flipped bit position or -1) of one SEC-DED group: `stored` check word against
    the encoding `want` of its data words from `data_w0` on; the masks give the group's count
    of half-word parity bits (group A covers the key/action words, group B the tracker's)."""
    if stored == want:  # the only clean case (a clean record's check word is its encoding)
        return ECC_CLEAN, -1
    diff = stored ^ want
    sx = diff & M32
    sp = (diff >> S32) & m_p
    high = stored & m_high
    odd = _par(stored & m_low) ^ _par(want)
    wc = ecc_w * 64
    if high != U0:
        if _one_bit(high) and sx == U0 and sp == U0 and odd == U0:
            return ECC_CORR, wc + _bit_index(high)
        return ECC_UNCORR, -1
    if odd == U0:
        if sx == U0 and sp == U0:
            return ECC_CLEAN, -1
        return ECC_UNCORR, -1
    if _one_bit(sx) and _one_bit(sp):
        half = _bit_index(sp)
        return ECC_CORR, (data_w0 + half // 2) * 64 + (half % 2) * 32 + _bit_index(sx)
    if sx == U0 and sp == U0:
        return ECC_CORR, wc + np.int64(s_overall)
    if _one_bit(sx) and sp == U0:
        return ECC_CORR, wc + _bit_index(sx)
    if sx == U0 and _one_bit(sp):
        return ECC_CORR, wc + 32 + _bit_index(sp)
    return ECC_UNCORR, -1


@njit
def ecc_check(rec, s):
    """(status, flipped bit position or -1) of the first group that is not clean; twin of
    ecc.ecc_decode."""
    st, pos = _ecc_decode_group(
        rec[s, L.W_ECC], ecc_encode(rec, s), M_P, M_HIGH, M_LOW, S_OVERALL, 0, L.W_ECC
    )
    if st != ECC_CLEAN:
        return st, pos
    return _ecc_decode_group(
        rec[s, L.W_ECC2], ecc_encode_b(rec, s), M_P_B, M_HIGH_B, M_LOW_B, S_OVERALL_B,
        L.W_TRACK, L.W_ECC2,
    )  # fmt: skip


@njit
def ecc_fix(rec, s, pos) -> None:
    """Undo the located flip (data or check bit): the group is its own encoding again."""
    rec[s, pos // 64] ^= U1 << np.uint64(pos % 64)
