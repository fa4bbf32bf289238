"""SEC-DED code over a session record, written plainly (the numba twin is in _kernels.py).

The 14 data words are 28 half-words h_i of 32 bits. The check word holds
  bits 0..31   X = XOR of all h_i,
  bits 32..59  p_i = parity of h_i,
  bit  60      P = parity of the data and of check bits 0..59,
  bits 61..63  zero.
A flip of data bit j of half-word i changes X at bit j and p_i, so the syndrome (X, p) names
it; flips of check bits give syndromes with X or p alone (or none, for P). Every position has a
distinct syndrome, so any two flips leave P even with a nonzero syndrome: detected, never
miscorrected. Single flips are corrected.
"""

from __future__ import annotations

from collections.abc import Sequence

from starfabric.fornax.engine.layout import MASK32, N_DATA_WORDS, W_ECC

N_HALVES = 2 * N_DATA_WORDS
P_SHIFT = 32
OVERALL_BIT = 32 + N_HALVES  # 60
HIGH_MASK = ((1 << 64) - 1) ^ ((1 << (OVERALL_BIT + 1)) - 1)  # bits that must be zero

ECC_CLEAN = 0
ECC_CORRECTED = 1
ECC_UNCORRECTABLE = 2


def _parity(x: int) -> int:
    return bin(x).count("1") & 1


def _halves(words: Sequence[int]) -> list[int]:
    out = []
    for w in words[:N_DATA_WORDS]:
        out.append(int(w) & MASK32)
        out.append((int(w) >> 32) & MASK32)
    return out


def ecc_encode(words: Sequence[int]) -> int:
    """Check word for data words 0..13."""
    x = 0
    p = 0
    total = 0
    for i, h in enumerate(_halves(words)):
        x ^= h
        pi = _parity(h)
        p |= pi << i
        total ^= pi
    check = x | (p << P_SHIFT)
    overall = total ^ _parity(check)
    return check | (overall << OVERALL_BIT)


def ecc_decode(words: Sequence[int]) -> tuple[int, int]:
    """Check a 15-word record: (status, flipped bit position word*64+bit or -1).

    status is ECC_CLEAN, ECC_CORRECTED (exactly one flip, located) or ECC_UNCORRECTABLE.
    The caller rewrites the record after a correction.
    """
    stored = int(words[W_ECC])
    want = ecc_encode(words)
    diff = stored ^ want
    sx = diff & MASK32
    sp = (diff >> P_SHIFT) & ((1 << N_HALVES) - 1)
    high = stored & HIGH_MASK
    # Overall parity over data + check bits 0..60 as stored: odd means an odd number of flips.
    odd = _parity(stored & ~HIGH_MASK) ^ _parity(want)
    if high:
        if bin(high).count("1") == 1 and sx == 0 and sp == 0 and not odd:
            return ECC_CORRECTED, W_ECC * 64 + high.bit_length() - 1
        return ECC_UNCORRECTABLE, -1
    if not odd:
        return (ECC_CLEAN, -1) if sx == 0 and sp == 0 else (ECC_UNCORRECTABLE, -1)
    nx = bin(sx).count("1")
    np_ = bin(sp).count("1")
    if nx == 1 and np_ == 1:
        half = sp.bit_length() - 1
        bit = sx.bit_length() - 1
        return ECC_CORRECTED, (half // 2) * 64 + (half % 2) * 32 + bit
    if nx == 0 and np_ == 0:
        return ECC_CORRECTED, W_ECC * 64 + OVERALL_BIT
    if nx == 1 and np_ == 0:
        return ECC_CORRECTED, W_ECC * 64 + sx.bit_length() - 1
    if nx == 0 and np_ == 1:
        return ECC_CORRECTED, W_ECC * 64 + P_SHIFT + sp.bit_length() - 1
    return ECC_UNCORRECTABLE, -1


__all__ = [
    "ECC_CLEAN",
    "ECC_CORRECTED",
    "ECC_UNCORRECTABLE",
    "ecc_decode",
    "ecc_encode",
]
