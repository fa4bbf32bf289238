"""SEC-DED code over a session record, written plainly (the numba twin is kernels/ecc.py).

The record has two ECC groups (layout.ECC_GROUPS): n data words (14 in group A, 7 in group B)
and one check word. The n data words are 2n half-words h_i of 32 bits. The check word holds
  bits 0..31        X = XOR of all h_i,
  bits 32..32+2n-1  p_i = parity of h_i,
  bit  32+2n        P = parity of the data and of the check bits below it,
  higher bits       zero.
A flip of data bit j of half-word i changes X at bit j and p_i, so the syndrome (X, p) names
it; flips of check bits give syndromes with X or p alone (or none, for P). Every position has a
distinct syndrome, so any two flips in a group leave P even with a nonzero syndrome: detected,
never miscorrected. Single flips are corrected (one per group).
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence

from starfabric.fornax.engine.layout import ECC_GROUPS, MASK32, N_DATA_WORDS, W_ECC

P_SHIFT = 32
N_HALVES = 2 * N_DATA_WORDS
OVERALL_BIT = 32 + N_HALVES  # group A: 60

ECC_CLEAN = 0
ECC_CORRECTED = 1
ECC_UNCORRECTABLE = 2


def _parity(x: int) -> int:
    return bin(x).count("1") & 1


def _halves(words: Sequence[int], first: int, n: int) -> list[int]:
    out = []
    for w in words[first : first + n]:
        out.append(int(w) & MASK32)
        out.append((int(w) >> 32) & MASK32)
    return out


def encode_group(words: Sequence[int], first: int, n: int) -> int:
    """Check word for data words first..first+n-1."""
    x = 0
    p = 0
    total = 0
    for i, h in enumerate(_halves(words, first, n)):
        x ^= h
        pi = _parity(h)
        p |= pi << i
        total ^= pi
    check = x | (p << P_SHIFT)
    overall = total ^ _parity(check)
    return check | (overall << (32 + 2 * n))


def ecc_encode(words: Sequence[int]) -> int:
    """Check word of group A (data words 0..13)."""
    return encode_group(words, 0, N_DATA_WORDS)


def ecc_seal(words: MutableSequence[int]) -> None:
    """Write every group's check word of a record (after any change of its data)."""
    for first, n, wc in ECC_GROUPS:
        words[wc] = encode_group(words, first, n)


def decode_group(words: Sequence[int], first: int, n: int, wc: int) -> tuple[int, int]:
    """Check one group: (status, flipped bit position word*64+bit or -1)."""
    overall_bit = 32 + 2 * n
    high_mask = ((1 << 64) - 1) ^ ((1 << (overall_bit + 1)) - 1)
    stored = int(words[wc])
    want = encode_group(words, first, n)
    diff = stored ^ want
    sx = diff & MASK32
    sp = (diff >> P_SHIFT) & ((1 << (2 * n)) - 1)
    high = stored & high_mask
    # Overall parity over data + check bits as stored: odd means an odd number of flips.
    odd = _parity(stored & ~high_mask) ^ _parity(want)
    if high:
        if bin(high).count("1") == 1 and sx == 0 and sp == 0 and not odd:
            return ECC_CORRECTED, wc * 64 + high.bit_length() - 1
        return ECC_UNCORRECTABLE, -1
    if not odd:
        return (ECC_CLEAN, -1) if sx == 0 and sp == 0 else (ECC_UNCORRECTABLE, -1)
    nx = bin(sx).count("1")
    np_ = bin(sp).count("1")
    if nx == 1 and np_ == 1:
        half = sp.bit_length() - 1
        bit = sx.bit_length() - 1
        return ECC_CORRECTED, (first + half // 2) * 64 + (half % 2) * 32 + bit
    if nx == 0 and np_ == 0:
        return ECC_CORRECTED, wc * 64 + overall_bit
    if nx == 1 and np_ == 0:
        return ECC_CORRECTED, wc * 64 + sx.bit_length() - 1
    if nx == 0 and np_ == 1:
        return ECC_CORRECTED, wc * 64 + P_SHIFT + sp.bit_length() - 1
    return ECC_UNCORRECTABLE, -1


def ecc_decode(words: Sequence[int]) -> tuple[int, int]:
    """Check a record: the first group that is not clean decides (status, position).

    status is ECC_CLEAN, ECC_CORRECTED (exactly one flip in that group, located) or
    ECC_UNCORRECTABLE. The caller fixes the bit, re-seals and checks again.
    """
    for first, n, wc in ECC_GROUPS:
        st, pos = decode_group(words, first, n, wc)
        if st != ECC_CLEAN:
            return st, pos
    return ECC_CLEAN, -1


__all__ = [
    "ECC_CLEAN",
    "ECC_CORRECTED",
    "ECC_UNCORRECTABLE",
    "W_ECC",
    "decode_group",
    "ecc_decode",
    "ecc_encode",
    "ecc_seal",
    "encode_group",
]
