"""SEC-DED over a session record (layout.ECC_GROUPS), the numba twin of ecc.py: encode, check,
correct, and the patch of a check word after a few words changed (the hit path's update)."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine._intrinsics import check_word_at, check_word_of, popcount
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


#: Check words of group A (rec[s, 0:14]) and group B (rec[s, 15:22]) from the record.
_ENC_A = check_word_at(L.N_DATA_WORDS)
_ENC_B = check_word_at(L.N_TRACK_WORDS)


@njit_inline
def ecc_encode(rec, s) -> np.uint64:
    """Check word of group A of rec[s] (twin of ecc.ecc_encode); inlined into the hit path.

    One vector XOR and one vector population count over the 14 words (_intrinsics), where a
    word-by-word loop took two POPCNTs and about six more instructions per word.
    """
    return _ENC_A(rec, s, 0)


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
    return check_word_of((w0, w1, w2, w3, w4, w5, w6))


@njit_inline
def ecc_encode_b(rec, s) -> np.uint64:
    """Check word of group B (the tracker words, layout.ECC_GROUPS), from the record: one
    vector load of the seven words. Inlined: the hit path checks group B with it, which beat
    building the vector from the seven words already in registers (ecc_b_of: seven inserts
    in one dependency chain; 16,384 slots, 12 alternated runs: median 0.93 of the time)."""
    return _ENC_B(rec, s, L.W_TRACK)


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
