"""Table primitives: the SWAR tag scan of a bucket, the fetch hint for one record, the ECC-checked
probe of a key's two buckets, and slot invalidation.

The helpers the hit path uses are inlined (njit_inline): a call that passes the table arrays
costs numba reference counting per call, which would dominate a lookup."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine._intrinsics import prefetch_write_at
from starfabric.fornax.engine.kernels.codes import (
    C_ECC_CORR,
    C_ECC_UNCORR,
    ECC_CLEAN,
    ECC_CORR,
    EV_ECC_CORR,
    EV_ECC_UNCORR,
    LANES_HI,
    LANES_LO,
    M8,
    M16,
    M32,
    M48,
    R_ENI,
    R_KEY_OK,
    R_KEY_SUSPECT,
    R_NONE,
    R_VPC,
    S32,
    U0,
    U1,
)
from starfabric.fornax.engine.kernels.ecc import ecc_check, ecc_fix
from starfabric.fornax.engine.kernels.hashing import buckets, rec_hash, tag_of
from starfabric.fornax.engine.kernels.ring import emit_entry


@njit_inline
def stale_reason(sc, ver, eni_cur, vpc_cur):
    """R_ENI / R_VPC where a record's scope word `sc` and version word `ver` are behind the
    current versions, else R_NONE. A scope id naming no scope (a record damaged past what
    ECC corrects) is stale, never an index outside the version arrays (reference.py's twin:
    ReferenceEngine._stale_reason)."""
    e = np.int64(sc & M32)
    v = np.int64(sc >> S32)
    if e >= len(eni_cur) or (ver & M32) != np.uint64(eni_cur[e]):
        return R_ENI
    if v >= len(vpc_cur) or (ver >> S32) != np.uint64(vpc_cur[v]):
        return R_VPC
    return R_NONE


@njit
def tag_lane(word, pat):
    """First of the 4 tags in a 64-bit word of tags equal to the tag `pat` holds in every lane
    (tag * LANES_LO), or 4: the 4 compared at once (SWAR), no data-dependent branch per slot."""
    x = word ^ pat
    m = (x - LANES_LO) & ~x & LANES_HI
    if m == U0:
        return np.int64(4)
    low = m & (~m + U1)
    return np.int64(low > M16) + np.int64(low > M32) + np.int64(low > M48)


@njit_inline
def first_tag(tags64, bucket, wpb, tag):
    """Index in the bucket of the first slot whose tag equals `tag`, or bs = 4 * wpb (none);
    `tags64` is the tag array viewed as uint64 (wpb words per bucket)."""
    pat = np.uint64(tag) * LANES_LO
    for w in range(wpb):
        lane = tag_lane(tags64[bucket * wpb + w], pat)
        if lane < 4:
            return w * 4 + lane
    return wpb * 4


@njit_inline
def first_free(tags, bucket, bs) -> int:
    """First empty slot (tag 0) of a bucket, or -1."""
    for j in range(bs):
        if tags[bucket * bs + j] == 0:
            return bucket * bs + j
    return -1


@njit_inline
def prefetch_entry(rec, s) -> None:
    """Ask for every cache line of record s (one hint per 64 bytes, and its last word), with
    write intent: both callers (the packet pipeline's hit, insert's placement) update the
    record they fetch. A hint only, it never changes a result (issue 17, 16M slots: write
    intent took the lookup from 257 to 239 ns per packet in one run, 237 to 216 in another)."""
    prefetch_write_at(rec, s, 0)
    prefetch_write_at(rec, s, 8)
    prefetch_write_at(rec, s, 16)
    prefetch_write_at(rec, s, L.N_WORDS - 1)


@njit
def invalidate(tags, rec, st, s) -> None:
    tags[s] = 0
    for k in range(L.N_WORDS):
        rec[s, k] = U0
    st[0] -= 1


@njit
def read_check(tags, rec, st, ring, rmeta, ctr, prm, seed, s, t, port) -> bool:
    """ECC-check slot s before use: correct (event, at most one flip per group) or invalidate
    (event). True if usable."""
    for _ in range(3):
        status, pos = ecc_check(rec, s)
        if status == ECC_CLEAN:
            return True
        if status != ECC_CORR:
            break
        ecc_fix(rec, s, pos)
        ctr[C_ECC_CORR] += 1
        emit_entry(ring, rmeta, ctr, EV_ECC_CORR, R_NONE, rec, s, s, t, port, pos)
    h = rec_hash(rec, s, seed)
    b1, b2 = buckets(h, prm[0])
    b = s // prm[1]
    ok = tag_of(h) == tags[s] and (b == b1 or b == b2)  # noqa: SIM109
    ctr[C_ECC_UNCORR] += 1
    emit_entry(
        ring, rmeta, ctr, EV_ECC_UNCORR, R_KEY_OK if ok else R_KEY_SUSPECT, rec, s, s, t, port, 0
    )
    invalidate(tags, rec, st, s)
    return False


@njit
def key_eq(rec, s, a_hi, a_lo, b_hi, b_lo, pw, proto) -> bool:
    return (
        rec[s, 0] == a_hi
        and rec[s, 1] == a_lo
        and rec[s, 2] == b_hi
        and rec[s, 3] == b_lo
        and rec[s, 4] == pw
        and (rec[s, L.W_META] & M8) == proto
    )


@njit
def probe_at(
    tags, rec, st, ring, rmeta, ctr, prm, seed, tag, b1, b2, a_hi, a_lo, b_hi, b_lo, pw, proto,
    t, port,
):  # fmt: skip
    """Find a key in buckets b1, b2: (slot, False) found, (-1, False) absent, (slot, True) fault.

    Every tag-matching record is ECC-checked before its key is compared.
    """
    bs = prm[1]
    for bi in range(2):
        base = (b1 if bi == 0 else b2) * bs
        for j in range(bs):
            s = base + j
            if tags[s] != tag:
                continue
            if not read_check(tags, rec, st, ring, rmeta, ctr, prm, seed, s, t, port):
                return s, True
            if key_eq(rec, s, a_hi, a_lo, b_hi, b_lo, pw, proto):
                return s, False
    return -1, False


@njit
def probe(
    tags, rec, st, ring, rmeta, ctr, prm, seed, h, a_hi, a_lo, b_hi, b_lo, pw, proto, t, port
):
    """probe_at for a hash."""
    b1, b2 = buckets(h, prm[0])
    return probe_at(
        tags, rec, st, ring, rmeta, ctr, prm, seed, tag_of(h), b1, b2,
        a_hi, a_lo, b_hi, b_lo, pw, proto, t, port,
    )  # fmt: skip
