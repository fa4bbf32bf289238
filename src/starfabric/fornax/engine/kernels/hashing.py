"""Key hashing kernels: the numba twin of keys.py's canonical key and hash, the two cuckoo
buckets and the 16-bit tag of a hash, and the victim-choice generator of displacement."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.kernels.codes import (
    K_ALT,
    K_FIN,
    K_MUL,
    K_SM1,
    K_SM2,
    M8,
    M16,
    M32,
    P_ICMP,
    P_ICMP6,
    S8,
    S16,
    S27,
    S30,
    S31,
    S32,
    S33,
    S48,
    U0,
    U1,
)
from starfabric.fornax.keys import ICMP_CLASS_OFFSET, ICMP_INVERT

_ICMP_OFF = ICMP_CLASS_OFFSET
_ICMP_INV = ICMP_INVERT


@njit
def icmp_inverted(proto, word):
    """An ICMP(v6) type/code word with the type inverted as nf_ct_invert_tuple does (twin of
    keys.icmp_inverted_word): the key an error quoting that packet is looked up by."""
    inv = _ICMP_INV[0 if np.int64(proto) == P_ICMP else 1, np.int64(word >> 8) & 0xFF]
    if inv < 0:
        return word
    return np.uint16((inv << 8) | (np.int64(word) & 0xFF))


@njit
def _mix(h: np.uint64, k: np.uint64) -> np.uint64:
    h = (h ^ k) * K_MUL
    return h ^ (h >> S32)


@njit
def _fmix(h: np.uint64) -> np.uint64:
    h = h ^ (h >> S33)
    h = h * K_MUL
    h = h ^ (h >> S33)
    h = h * K_FIN
    return h ^ (h >> S33)


@njit
def hash_words(
    a_hi: np.uint64,
    a_lo: np.uint64,
    b_hi: np.uint64,
    b_lo: np.uint64,
    portsw: np.uint64,
    proto: np.uint64,
    seed: np.uint64,
) -> np.uint64:
    """Twin of keys.key_hash for one key."""
    h = seed
    h = _mix(h, a_hi)
    h = _mix(h, a_lo)
    h = _mix(h, b_hi)
    h = _mix(h, b_lo)
    h = _mix(h, portsw)
    h = _mix(h, proto)
    return _fmix(h)


@njit
def hash_many(a_hi, a_lo, b_hi, b_lo, portsw, proto, seed, out):
    for i in range(len(out)):
        out[i] = hash_words(
            a_hi[i], a_lo[i], b_hi[i], b_lo[i], portsw[i], np.uint64(proto[i]), seed
        )


@njit_inline
def prep_key(vni, proto, sh, sl, dh, dl, sport, dport, seed, nb):
    """Canonical key, hash, buckets, tag and direction of one packet (twin of keys.py):
    (a_hi, a_lo, b_hi, b_lo, ports word, hash, bucket 1, bucket 2, tag, direction).

    Scalars only: a helper taking the batch arrays costs numba reference counting per call.
    Inlined into packet_key: called, its ten results went through memory and its arguments
    through the stack on every packet (a sampled profile put ~12% of a lookup in it).
    """
    pr = np.int64(proto)
    sp = np.uint64(sport)
    dp = np.uint64(dport)
    if pr == P_ICMP or pr == P_ICMP6:  # noqa: SIM109
        # keys.py: a query (id, id + k), its reply (id + k, id), other ICMP (0, 0)
        off = _ICMP_OFF[0 if pr == P_ICMP else 1, np.int64(dp >> S8)]
        if off > 0:
            dp = (sp + np.uint64(off)) & M16
        elif off < 0:
            dp = sp
            sp = (sp + np.uint64(-off)) & M16
        else:
            sp = U0
            dp = U0
    vw = np.uint64(vni) << S32
    # Which endpoint is A, without a branch (& and | do not short-circuit): a packet's
    # direction is as good as random, so a branch here would be mispredicted half the time.
    swap = (sh > dh) | ((sh == dh) & ((sl > dl) | ((sl == dl) & (sp > dp))))
    a_hi = dh if swap else sh
    a_lo = dl if swap else sl
    b_hi = sh if swap else dh
    b_lo = sl if swap else dl
    pw = vw | (((dp << S16) | sp) if swap else ((sp << S16) | dp))
    d = np.uint64(swap)
    h = hash_words(a_hi, a_lo, b_hi, b_lo, pw, np.uint64(pr), seed)
    b1, b2 = buckets(h, nb)
    return a_hi, a_lo, b_hi, b_lo, pw, h, np.uint64(b1), np.uint64(b2), np.uint64(tag_of(h)), d


@njit_inline
def packet_key(j, vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, i_proto, i_src_hi,
               i_src_lo, i_dst_hi, i_dst_lo, i_sport, i_dport, seed, nb, kr, r):  # fmt: skip
    """The key packet j is looked up by, into row r of kr: a_hi, a_lo, b_hi, b_lo, ports word,
    hash, bucket 1, bucket 2, tag, direction (prep_key), the key's protocol, and 1 for a
    RELATED lookup else 0; returns bucket 1. An ICMP error quoting a tuple
    (conntrack.icmp_error_quotes) is looked up by that tuple inverted (an inner ICMP packet
    keeps its id, its type inverted as nf_ct_invert_tuple does); any other packet by its
    own. Inlined: k_process's pipeline and k_prepare share it."""
    pj = np.int64(proto[j])
    if (pj == P_ICMP or pj == P_ICMP6) and CT.icmp_error_quotes(  # noqa: SIM109
        pj, dport[j] >> np.uint16(8), i_proto[j], i_dport[j] >> np.uint16(8), dst_hi[j],
        dst_lo[j], i_src_hi[j], i_src_lo[j],
    ):  # fmt: skip
        ip = np.int64(i_proto[j])
        icmp_in = ip in (P_ICMP, P_ICMP6)
        k = prep_key(vni[j], i_proto[j], i_dst_hi[j], i_dst_lo[j], i_src_hi[j], i_src_lo[j],
                     i_sport[j] if icmp_in else i_dport[j],
                     icmp_inverted(ip, i_dport[j]) if icmp_in else i_sport[j], seed,
                     nb)  # fmt: skip
        kp = np.uint64(ip)
        rel = U1
    else:
        k = prep_key(vni[j], proto[j], src_hi[j], src_lo[j], dst_hi[j], dst_lo[j], sport[j],
                     dport[j], seed, nb)  # fmt: skip
        kp = np.uint64(pj)
        rel = U0
    for c in range(10):
        kr[r, c] = k[c]
    kr[r, 10] = kp
    kr[r, 11] = rel
    return np.int64(k[6])


@njit
def k_prepare(vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, i_proto, i_src_hi,
              i_src_lo, i_dst_hi, i_dst_lo, i_sport, i_dport, seed, nb, kr):  # fmt: skip
    """packet_key over a whole batch, as k_process computes it (for tests and explain): row j
    of kr (12 columns) gets packet j's lookup key."""
    for j in range(len(vni)):
        packet_key(j, vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, i_proto,
                   i_src_hi, i_src_lo, i_dst_hi, i_dst_lo, i_sport, i_dport, seed, nb, kr, j)  # fmt: skip


@njit
def tag_of(h: np.uint64) -> np.uint16:
    t = np.uint16((h >> S48) & M16)
    if t == 0:
        t = np.uint16(1)
    return t


@njit
def buckets(h: np.uint64, nb: int):
    unb = np.uint64(nb)
    b1 = np.int64(((h & M32) * unb) >> S32)
    b2 = np.int64(((_fmix(h ^ K_ALT) & M32) * unb) >> S32)
    if b2 == b1:
        b2 = (b1 + 1) % nb
    return b1, b2


@njit
def rec_hash(rec, s, seed):
    return hash_words(
        rec[s, 0], rec[s, 1], rec[s, 2], rec[s, 3], rec[s, 4], rec[s, L.W_META] & M8, seed
    )


@njit
def rng_next(rng) -> np.uint64:
    """splitmix64 step: the victim choice of cuckoo displacement (shared with reference.py)."""
    rng[0] = rng[0] + K_ALT
    z = rng[0]
    z = (z ^ (z >> S30)) * K_SM1
    z = (z ^ (z >> S27)) * K_SM2
    return z ^ (z >> S31)
