"""numba kernels of the fast engine: probe, ECC, pipeline, entry ops, scrubber, event ring.

Kernels take arrays and scalars only. Table state: `tags` uint16[capacity] (0 = empty),
`rec` uint64[capacity, 15] (layout.py), `st` int64[4] = (occupancy, scrub cursor, -, -),
`rng` uint64[1] (cuckoo victim choice), `ring` uint64[ring_capacity, 17] with `rmeta` int64[4]
= (head, count, events lost not yet reported, time of the last loss), `ctr` int64[N_COUNTERS],
ports `stalled` uint8[P], `stuck` int64[P] (first waiting packet's time, -1 none), `hung` uint8[P].
`prm` int64[6] = (n_buckets, bucket_size, drop_action, watchdog_ns, max_displacement, capacity).
The plain-Python twin of all of this is reference.py; the two are differentially tested.
"""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import interface as itf
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine._intrinsics import popcount, prefetch_at, prefetch_row
from starfabric.fornax.engine.tcp import TCP_IGNORE, TCP_INVALID, TcpState
from starfabric.fornax.keys import C_ALT, C_FIN, C_MUL
from starfabric.fornax.packets import (
    PROTO_ICMP,
    PROTO_ICMPV6,
    PROTO_TCP,
    PROTO_UDP,
    TCP_ACK,
    TCP_FIN,
    TCP_RST,
    TCP_SYN,
)

#: Packets per stage of the lookup pipeline (assumption: measured on this 2-core VM at 16M slots
#: with window tracking on: 8 gave 0.29-0.31 of the gather floor, 4 0.26; before the tracker,
#: on an AMD EPYC VM, 4 beat 2, 8, 16 and 32).
GROUP = 8
KEY_RING = 4 * GROUP  # prepared keys in flight: groups g..g+3 (a group's rows reused 4 later)
#: Entries an insert batch fetches ahead (assumption: enough to cover a memory miss while
#: the entries in between are placed).
INS_AHEAD = 8
U0 = np.uint64(0)
U1 = np.uint64(1)
S8 = np.uint64(8)
S16 = np.uint64(16)
S24 = np.uint64(24)
S27 = np.uint64(27)
S30 = np.uint64(30)
S31 = np.uint64(31)
S32 = np.uint64(32)
S33 = np.uint64(33)
S48 = np.uint64(48)
M8 = np.uint64(0xFF)
M16 = np.uint64(0xFFFF)
M32 = np.uint64(0xFFFF_FFFF)
M48 = np.uint64(0xFFFF_FFFF_FFFF)
LANES_LO = np.uint64(0x0001_0001_0001_0001)
LANES_HI = np.uint64(0x8000_8000_8000_8000)
K_MUL = np.uint64(C_MUL)
K_FIN = np.uint64(C_FIN)
K_ALT = np.uint64(C_ALT)
K_SM1 = np.uint64(0xBF58476D1CE4E5B9)
K_SM2 = np.uint64(0x94D049BB133111EB)
N_HALVES = 2 * L.N_DATA_WORDS
S_OVERALL = np.uint64(32 + N_HALVES)
M_P = np.uint64((1 << N_HALVES) - 1)
M_HIGH = np.uint64(((1 << 64) - 1) ^ ((1 << (32 + N_HALVES + 1)) - 1))
M_LOW = np.uint64((1 << (32 + N_HALVES + 1)) - 1)
M_CHECK = np.uint64((1 << (32 + N_HALVES)) - 1)
N_DATA = L.N_DATA_WORDS
N_TRK = L.N_TRACK_WORDS
S_OVERALL_B = np.uint64(32 + 2 * N_TRK)
M_P_B = np.uint64((1 << (2 * N_TRK)) - 1)
M_HIGH_B = np.uint64(((1 << 64) - 1) ^ ((1 << (32 + 2 * N_TRK + 1)) - 1))
M_LOW_B = np.uint64((1 << (32 + 2 * N_TRK + 1)) - 1)
N_EW = itf.N_EVENT_WORDS

F_ORIG_B = np.uint64(L.FLAG_ORIG_B)
F_MISMATCH = np.uint64(L.FLAG_MISMATCH_REPORTED)
F_SEEN_REPLY = np.uint64(L.FLAG_SEEN_REPLY)

ECC_CLEAN = 0
ECC_CORR = 1
ECC_UNCORR = 2

# Codes as plain ints (numba freezes module globals).
O_HIT = np.int64(itf.Outcome.HIT)
O_MISS = np.int64(itf.Outcome.MISS)
O_STALE = np.int64(itf.Outcome.STALE)
O_FAULT = np.int64(itf.Outcome.FAULT)
O_DROP = np.int64(itf.Outcome.DROP_HW)
O_HUNG = np.int64(itf.Outcome.PORT_HUNG)
R_NONE = np.int64(itf.Reason.NONE)
R_NO_ENTRY = np.int64(itf.Reason.NO_ENTRY)
R_ENI = np.int64(itf.Reason.ENI_VERSION)
R_VPC = np.int64(itf.Reason.VPC_VERSION)
R_ECC = np.int64(itf.Reason.ECC_UNCORRECTABLE)
R_DROP = np.int64(itf.Reason.DROP_ACTION)
R_STALLED = np.int64(itf.Reason.PORT_STALLED)
R_TCP_INVALID = np.int64(itf.Reason.TCP_INVALID)
R_TCP_IGNORED = np.int64(itf.Reason.TCP_IGNORED)
R_REOPEN = np.int64(itf.Reason.TCP_REOPEN)
R_KEY_OK = np.int64(itf.Reason.KEY_CONSISTENT)
R_KEY_SUSPECT = np.int64(itf.Reason.KEY_SUSPECT)
R_KILLED = np.int64(itf.Reason.CT_KILLED)
V_INVALID = CT.V_INVALID
V_IGNORE = CT.V_IGNORE
V_REOPEN = CT.V_REOPEN
V_KILL = CT.V_KILL
V_RELATED = CT.V_RELATED
TRACK_META = np.uint64(CT.TRACK_META_MASK)
ST_OK = np.int64(itf.Status.OK)
ST_EXISTS = np.int64(itf.Status.EXISTS)
ST_NOT_FOUND = np.int64(itf.Status.NOT_FOUND)
ST_FULL = np.int64(itf.Status.TABLE_FULL)
ST_FAILED = np.int64(itf.Status.INSERT_FAILED)
ST_BAD_SCOPE = np.int64(itf.Status.BAD_SCOPE)
ST_ECC = np.int64(itf.Status.ECC_FAULT)
EV_AGED = np.int64(itf.EventType.AGED)
EV_CLOSED = np.int64(itf.EventType.CLOSED)
EV_MISMATCH = np.int64(itf.EventType.VERSION_MISMATCH)
EV_ECC_CORR = np.int64(itf.EventType.ECC_CORRECTED)
EV_ECC_UNCORR = np.int64(itf.EventType.ECC_UNCORRECTABLE)
EV_INSERT_FAILED = np.int64(itf.EventType.INSERT_FAILED)
EV_TABLE_FULL = np.int64(itf.EventType.TABLE_FULL)
EV_HANG = np.int64(itf.EventType.PIPELINE_HANG)
EV_OVERFLOW = np.int64(itf.EventType.RING_OVERFLOW)
C = itf.Counter
C_PACKETS = np.int64(C.PACKETS)
C_HIT = np.int64(C.HIT)
C_MISS = np.int64(C.MISS)
C_STALE = np.int64(C.STALE)
C_FAULT = np.int64(C.FAULT)
C_DROP = np.int64(C.DROP_HW)
C_HUNG = np.int64(C.PORT_HUNG)
C_BYTES = np.int64(C.BYTES_FORWARDED)
C_TCP_INVALID = np.int64(C.TCP_INVALID)
C_TCP_IGNORED = np.int64(C.TCP_IGNORED)
C_REOPEN = np.int64(C.TCP_REOPEN)
C_ECC_CORR = np.int64(C.ECC_CORRECTED)
C_ECC_UNCORR = np.int64(C.ECC_UNCORRECTABLE)
C_MISMATCH = np.int64(C.MISMATCH_EVENTS)
C_INS_OK = np.int64(C.INSERT_OK)
C_INS_EXISTS = np.int64(C.INSERT_EXISTS)
C_INS_FULL = np.int64(C.INSERT_TABLE_FULL)
C_INS_FAILED = np.int64(C.INSERT_FAILED)
C_INS_SCOPE = np.int64(C.INSERT_BAD_SCOPE)
C_DISPL = np.int64(C.DISPLACEMENTS)
C_DEL_OK = np.int64(C.DELETE_OK)
C_DEL_NF = np.int64(C.DELETE_NOT_FOUND)
C_MOD_OK = np.int64(C.MODIFY_OK)
C_MOD_NF = np.int64(C.MODIFY_NOT_FOUND)
C_Q_OK = np.int64(C.QUERY_OK)
C_Q_NF = np.int64(C.QUERY_NOT_FOUND)
C_DUMP = np.int64(C.DUMP_ENTRIES)
C_AGED = np.int64(C.AGED)
C_CLOSED = np.int64(C.CLOSED)
C_SCRUB = np.int64(C.SCRUB_VISITED)
C_EV_RAISED = np.int64(C.EVENTS_RAISED)
C_EV_LOST = np.int64(C.EVENTS_LOST)
C_HANG = np.int64(C.PIPELINE_HANG)
C_OP_ECC = np.int64(C.OP_ECC_FAULT)
C_OVERFLOW = np.int64(C.RING_OVERFLOW)

T_SS = np.int64(TcpState.SYN_SENT)
T_TW = np.int64(TcpState.TIME_WAIT)
T_CL = np.int64(TcpState.CLOSE)
T_INVALID = TCP_INVALID
T_IGNORE = TCP_IGNORE
P_TCP = PROTO_TCP
P_UDP = PROTO_UDP
P_ICMP = PROTO_ICMP
P_ICMP6 = PROTO_ICMPV6
F_FIN = TCP_FIN
F_SYN = TCP_SYN
F_RST = TCP_RST
F_ACK = TCP_ACK

# ---------------------------------------------------------------------------- hashing


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


@njit
def prep_key(vni, proto, sh, sl, dh, dl, sport, dport, seed, nb):
    """Canonical key, hash, buckets, tag and direction of one packet (twin of keys.py):
    (a_hi, a_lo, b_hi, b_lo, ports word, hash, bucket 1, bucket 2, tag, direction).

    Scalars only: a helper taking the batch arrays costs numba reference counting per call.
    """
    pr = np.int64(proto)
    sp = np.uint64(sport)
    dp = np.uint64(dport)
    if pr == P_ICMP or pr == P_ICMP6:  # noqa: SIM109
        ty = dp >> S8
        if (pr == P_ICMP and (ty == 8 or ty == 0)) or (pr == P_ICMP6 and (ty == 128 or ty == 129)):
            dp = sp
        else:
            sp = U0
            dp = U0
    vw = np.uint64(vni) << S32
    if sh > dh or (sh == dh and (sl > dl or (sl == dl and sp > dp))):
        a_hi, a_lo, b_hi, b_lo = dh, dl, sh, sl
        pw = vw | (dp << S16) | sp
        d = U1
    else:
        a_hi, a_lo, b_hi, b_lo = sh, sl, dh, dl
        pw = vw | (sp << S16) | dp
        d = U0
    h = hash_words(a_hi, a_lo, b_hi, b_lo, pw, np.uint64(pr), seed)
    b1, b2 = buckets(h, nb)
    return a_hi, a_lo, b_hi, b_lo, pw, h, np.uint64(b1), np.uint64(b2), np.uint64(tag_of(h)), d


@njit
def prep_one(
    j, vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, seed, nb, kr, r
):  # fmt: skip
    """prep_key of packet j into kr[r]; kr columns: a_hi, a_lo, b_hi, b_lo, ports word, hash,
    bucket 1, bucket 2, tag, direction."""
    k = prep_key(vni[j], proto[j], src_hi[j], src_lo[j], dst_hi[j], dst_lo[j], sport[j],
                 dport[j], seed, nb)  # fmt: skip
    for c in range(10):
        kr[r, c] = k[c]


@njit
def k_prepare(vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, seed, nb, kr):
    """prep_one over a whole batch (kr has one row per packet); for tests and explain."""
    for j in range(len(vni)):
        prep_one(j, vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, seed, nb, kr, j)


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


# ---------------------------------------------------------------------------- ECC


@njit
def _par(x: np.uint64) -> np.uint64:
    return popcount(x) & U1


@njit
def _half_parities(v: np.uint64) -> np.uint64:
    """Parities of the low (bit 0) and high (bit 1) 32-bit halves of v: two POPCNTs."""
    return (popcount(v & M32) & U1) | ((popcount(v >> S32) & U1) << U1)


@njit
def ecc_encode(rec, s) -> np.uint64:
    """Check word of rec[s] (twin of ecc.ecc_encode).

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


@njit
def ecc_patch(ecc, w, old, new):
    """Check word after data word w changed from old to new (equal to a full re-encode).

    The pipeline patches the few words a hit changes instead of re-encoding all 14.
    """
    d = old ^ new
    low = ecc & M_CHECK
    x = (low & M32) ^ (d & M32) ^ (d >> S32)
    check = x | (_set_pair(low >> S32, w, new) << S32)
    # The old overall bit makes (ecc & M_LOW) carry the data parity; parity is linear.
    return check | (_par((ecc & M_LOW) ^ d ^ check) << S_OVERALL)


@njit_inline
def _set_pair(p, w, v):
    """The parity field p with word w's two half-word parities replaced by those of v."""
    sh = np.uint64(2 * w)
    return (p & ~(np.uint64(3) << sh)) | (_half_parities(v) << sh)


@njit_inline
def ecc_patch4(ecc, w1, o1, n1, w2, o2, n2, w3, o3, n3, w4, o4, n4):
    """ecc_patch for four distinct changed words at once (the hit path's update)."""
    d = (o1 ^ n1) ^ (o2 ^ n2) ^ (o3 ^ n3) ^ (o4 ^ n4)
    low = ecc & M_CHECK
    x = (low & M32) ^ (d & M32) ^ (d >> S32)
    p = _set_pair(_set_pair(_set_pair(_set_pair(low >> S32, w1, n1), w2, n2), w3, n3), w4, n4)
    check = x | (p << S32)
    # The old overall bit makes (ecc & M_LOW) carry the data parity; parity is linear.
    return check | (_par((ecc & M_LOW) ^ d ^ check) << S_OVERALL)


@njit
def _one_bit(x: np.uint64) -> bool:
    return x != U0 and (x & (x - U1)) == U0


@njit
def _bit_index(x: np.uint64) -> int:
    i = 0
    while (x >> np.uint64(i)) != U1:
        i += 1
    return i


@njit
def ecc_encode_b(rec, s) -> np.uint64:
    """Check word of group B (the tracker words, layout.ECC_GROUPS); same code as group A."""
    acc = U0
    p = U0
    for w in range(N_TRK):
        v = rec[s, L.W_TRACK + w]
        acc ^= v
        p |= _half_parities(v) << np.uint64(2 * w)
    check = ((acc & M32) ^ (acc >> S32)) | (p << S32)
    return check | (_par(acc ^ check) << S_OVERALL_B)


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


# ---------------------------------------------------------------------------- event ring


@njit
def _ring_write_marker(ring, rmeta, ctr, t) -> None:
    cap = ring.shape[0]
    idx = (rmeta[0] + rmeta[1]) % cap
    for k in range(N_EW):
        ring[idx, k] = U0
    ring[idx, itf.E_HEAD] = np.uint64(EV_OVERFLOW)
    ring[idx, itf.E_TIME] = np.uint64(t)
    ring[idx, itf.E_SLOT] = np.uint64(-1)
    ring[idx, itf.E_DETAIL] = np.uint64(rmeta[2])
    rmeta[1] += 1
    rmeta[2] = 0
    ctr[C_OVERFLOW] += 1


@njit
def ring_alloc(ring, rmeta, ctr, t) -> int:
    """Index of a zeroed ring record for a new event, or -1 when it is lost."""
    cap = ring.shape[0]
    ctr[C_EV_RAISED] += 1
    if rmeta[2] > 0:
        if cap - rmeta[1] >= 2:
            _ring_write_marker(ring, rmeta, ctr, t)
        else:
            rmeta[2] += 1
            rmeta[3] = t
            ctr[C_EV_LOST] += 1
            return -1
    if rmeta[1] >= cap:
        rmeta[2] += 1
        rmeta[3] = t
        ctr[C_EV_LOST] += 1
        return -1
    idx = (rmeta[0] + rmeta[1]) % cap
    for k in range(N_EW):
        ring[idx, k] = U0
    rmeta[1] += 1
    return idx


@njit
def ring_pop(ring, rmeta, ctr, max_n, out) -> int:
    cap = ring.shape[0]
    n = min(max_n, rmeta[1])
    for i in range(n):
        idx = (rmeta[0] + i) % cap
        for k in range(N_EW):
            out[i, k] = ring[idx, k]
    rmeta[0] = (rmeta[0] + n) % cap
    rmeta[1] -= n
    if rmeta[2] > 0 and rmeta[1] < cap:
        _ring_write_marker(ring, rmeta, ctr, rmeta[3])
    return n


@njit
def emit_simple(ring, rmeta, ctr, etype, t, port, detail) -> None:
    idx = ring_alloc(ring, rmeta, ctr, t)
    if idx < 0:
        return
    ring[idx, itf.E_HEAD] = np.uint64(etype) | (np.uint64(port) << S48)
    ring[idx, itf.E_TIME] = np.uint64(t)
    ring[idx, itf.E_SLOT] = np.uint64(-1)
    ring[idx, itf.E_DETAIL] = np.uint64(detail)


@njit
def emit_entry(ring, rmeta, ctr, etype, reason, rec, s, slot, t, port, detail) -> None:
    """Event describing the record in rec[s], reported in ORIGINAL orientation."""
    idx = ring_alloc(ring, rmeta, ctr, t)
    if idx < 0:
        return
    meta = rec[s, L.W_META]
    flags = (meta >> S16) & M8
    ob = (flags & F_ORIG_B) != U0
    ring[idx, itf.E_HEAD] = (
        np.uint64(etype)
        | (((meta >> S8) & M8) << S8)
        | ((meta & M8) << S16)
        | (np.uint64(reason) << S24)
        | (flags << S32)
        | (np.uint64(port) << S48)
    )
    pw = rec[s, L.W_PORTS]
    ring[idx, itf.E_VNI] = pw >> S32
    ring[idx, itf.E_TIME] = np.uint64(t)
    ring[idx, itf.E_SLOT] = np.uint64(slot)
    pa = (pw >> S16) & M16
    pb = pw & M16
    act = rec[s, L.W_ACT]
    pk = rec[s, L.W_PKTS]
    if ob:
        ring[idx, itf.E_SRC_HI] = rec[s, L.W_B_HI]
        ring[idx, itf.E_SRC_LO] = rec[s, L.W_B_LO]
        ring[idx, itf.E_DST_HI] = rec[s, L.W_A_HI]
        ring[idx, itf.E_DST_LO] = rec[s, L.W_A_LO]
        ring[idx, itf.E_PORTS] = pb | (pa << S16)
        ring[idx, itf.E_ACT] = (act >> S32) | ((act & M32) << S32)
        ring[idx, itf.E_PKTS] = (pk >> S32) | ((pk & M32) << S32)
        ring[idx, itf.E_BYTES_ORIG] = rec[s, L.W_BYTES1]
        ring[idx, itf.E_BYTES_REPLY] = rec[s, L.W_BYTES0]
    else:
        ring[idx, itf.E_SRC_HI] = rec[s, L.W_A_HI]
        ring[idx, itf.E_SRC_LO] = rec[s, L.W_A_LO]
        ring[idx, itf.E_DST_HI] = rec[s, L.W_B_HI]
        ring[idx, itf.E_DST_LO] = rec[s, L.W_B_LO]
        ring[idx, itf.E_PORTS] = pa | (pb << S16)
        ring[idx, itf.E_ACT] = act
        ring[idx, itf.E_PKTS] = pk
        ring[idx, itf.E_BYTES_ORIG] = rec[s, L.W_BYTES0]
        ring[idx, itf.E_BYTES_REPLY] = rec[s, L.W_BYTES1]
    ring[idx, itf.E_SCOPE] = rec[s, L.W_SCOPE]
    ring[idx, itf.E_VER] = rec[s, L.W_VER]
    ring[idx, itf.E_AUX] = rec[s, L.W_AUX]
    ring[idx, itf.E_DETAIL] = np.uint64(detail)


# ---------------------------------------------------------------------------- table primitives


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


@njit
def first_tag(tags64, bucket, wpb, tag):
    """Index in the bucket of the first slot whose tag equals `tag`, or bs (none)."""
    pat = np.uint64(tag) * LANES_LO
    for w in range(wpb):
        lane = tag_lane(tags64[bucket * wpb + w], pat)
        if lane < 4:
            return w * 4 + lane
    return wpb * 4


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


@njit
def watchdog(stalled, stuck, hung, ring, rmeta, ctr, prm, p, t) -> None:
    if stalled[p] and stuck[p] >= 0 and hung[p] == 0 and t - stuck[p] >= prm[3]:
        hung[p] = 1
        ctr[C_HANG] += 1
        emit_simple(ring, rmeta, ctr, EV_HANG, t, p, t - stuck[p])


@njit
def tcp_index(flags):
    if flags & F_RST:
        return 4
    if flags & F_SYN:
        return 1 if flags & F_ACK else 0
    if flags & F_FIN:
        return 2
    if flags & F_ACK:
        return 3
    return 5


# ---------------------------------------------------------------------------- pipeline


@njit
def k_process(
    tags, rec, st, ring, rmeta, ctr, prm, seed, eni_cur, vpc_cur, stalled, stuck, hung, tcfg,
    time, port, vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, flags, length,
    seq, ack, sack, win, opt, wsc, plen,
    i_proto, i_src_hi, i_src_lo, i_dst_hi, i_dst_lo, i_sport, i_dport,
    o_out, o_reason, o_dir, o_reply, o_action, o_slot, o_state, o_verdict,
):  # fmt: skip
    """The packet pipeline: every packet of the batch in order (see interface.py).

    An ICMP error quoting a tuple (conntrack.icmp_error_quotes) is looked up by that tuple,
    inverted: found, it is RELATED (forwarded with the entry's action, the entry untouched)."""
    drop = np.uint64(prm[2])
    inv_drop = prm[6] != 0
    nb = prm[0]
    bs = prm[1]
    wpb = bs // 4
    tags64 = tags.view(np.uint64)
    tc = CT.cfg_tuple(tcfg)  # settings by value: an array would be reference-counted per use
    n = len(time)
    kr = np.zeros((KEY_RING, 13), dtype=np.uint64)
    n_hit = 0
    n_miss = 0
    n_bytes = 0
    n_groups = (n + GROUP - 1) // GROUP
    for g in range(-3, n_groups):
        # Software pipeline over groups of packets (a NIC keeps many lookups in flight). The
        # first three stages only read the table and move cache lines (kr[:, 10] is a hint);
        # every decision is taken in the last, in order, on the table as it is then.
        # Group g+3: prepare keys, fetch bucket 1's tag lines. Group g+2: scan them, fetch the
        # matching record or else bucket 2's tag line. Group g+1: scan bucket 2 where needed,
        # fetch that record. Group g: process. Whole groups per stage (rather than one packet
        # per stage per step) keep the core's miss buffers busy while it computes.
        lo = (g + 3) * GROUP
        for j in range(lo, min(lo + GROUP, n)):
            rj = j % KEY_RING
            pj = np.int64(proto[j])
            if (pj == P_ICMP or pj == P_ICMP6) and CT.icmp_error_quotes(  # noqa: SIM109
                pj, dport[j] >> np.uint16(8), i_proto[j], i_dport[j] >> np.uint16(8), dst_hi[j],
                dst_lo[j], i_src_hi[j], i_src_lo[j],
            ):  # fmt: skip
                # RELATED lookup: the quoted tuple inverted (an inner ICMP keeps its id/type)
                ip = np.int64(i_proto[j])
                icmp_in = ip in (P_ICMP, P_ICMP6)
                k = prep_key(vni[j], i_proto[j], i_dst_hi[j], i_dst_lo[j], i_src_hi[j],
                             i_src_lo[j], i_sport[j] if icmp_in else i_dport[j],
                             i_dport[j] if icmp_in else i_sport[j], seed, nb)  # fmt: skip
                kr[rj, 11] = np.uint64(ip)
                kr[rj, 12] = U1
            else:
                k = prep_key(vni[j], proto[j], src_hi[j], src_lo[j], dst_hi[j], dst_lo[j],
                             sport[j], dport[j], seed, nb)  # fmt: skip
                kr[rj, 11] = np.uint64(pj)
                kr[rj, 12] = U0
            for c in range(10):
                kr[rj, c] = k[c]
            prefetch_row(tags, np.int64(k[6]) * bs)
        lo = (g + 2) * GROUP
        for j in range(max(lo, 0), min(lo + GROUP, n)):
            rj = j % KEY_RING
            b = np.int64(kr[rj, 6])
            pat = kr[rj, 8] * LANES_LO
            q = bs
            for w in range(wpb):
                lane = tag_lane(tags64[b * wpb + w], pat)
                if lane < 4:
                    q = w * 4 + lane
                    break
            if q < bs:
                cand = b * bs + q
                kr[rj, 10] = np.uint64(cand + 1)
                prefetch_at(rec, cand, 0)
                prefetch_at(rec, cand, 8)
                prefetch_at(rec, cand, 15)
                prefetch_at(rec, cand, L.N_WORDS - 1)
            else:
                kr[rj, 10] = U0
                prefetch_row(tags, np.int64(kr[rj, 7]) * bs)
        lo = (g + 1) * GROUP
        for j in range(max(lo, 0), min(lo + GROUP, n)):
            rj = j % KEY_RING
            if kr[rj, 10] == U0:
                b = np.int64(kr[rj, 7])
                pat = kr[rj, 8] * LANES_LO
                q = bs
                for w in range(wpb):
                    lane = tag_lane(tags64[b * wpb + w], pat)
                    if lane < 4:
                        q = w * 4 + lane
                        break
                if q < bs:
                    cand = b * bs + q
                    prefetch_at(rec, cand, 0)
                    prefetch_at(rec, cand, 8)
                    prefetch_at(rec, cand, 15)
                    prefetch_at(rec, cand, L.N_WORDS - 1)
        lo = g * GROUP
        for i in range(max(lo, 0), min(lo + GROUP, n)):
            ri = i % KEY_RING
            o_dir[i] = np.uint8(kr[ri, 9])
            t = time[i]
            p = np.int64(port[i])
            o_slot[i] = -1
            o_reply[i] = 255
            o_action[i] = 0
            o_state[i] = 0
            o_verdict[i] = 255
            if stalled[p]:
                if stuck[p] < 0:
                    stuck[p] = t
                watchdog(stalled, stuck, hung, ring, rmeta, ctr, prm, p, t)
                o_out[i] = O_HUNG
                o_reason[i] = R_STALLED
                ctr[C_HUNG] += 1
                continue
            pr = kr[ri, 11]  # the key's protocol (an ICMP error's: the quoted packet's)
            # Probe, written out here: a call carrying the table arrays costs numba reference
            # counting per call, which would dominate the hit path. ECC is checked before the key
            # compare; only a failing check takes the (rare) read_check path with its events.
            tag = np.uint16(kr[ri, 8])
            s = -1
            fault = False
            te = tx = tw = tk = l1 = l2 = ex = U0
            # Stage g+2 found bucket 1's first tag match at slot kr[ri, 10] - 1 (0: none). The
            # pipeline never sets a tag (it may clear one), so a slot still holding the tag is
            # still the first match and the scan can start there; otherwise scan afresh.
            hint = np.int64(kr[ri, 10]) - 1
            for c in range(6, 8):
                b = np.int64(kr[ri, c])
                base = b * bs
                if c == 6 and hint >= 0 and tags[hint] == tag:
                    q0 = hint - base
                else:
                    pat = kr[ri, 8] * LANES_LO
                    q0 = bs
                    for w in range(wpb):
                        lane = tag_lane(tags64[b * wpb + w], pat)
                        if lane < 4:
                            q0 = w * 4 + lane
                            break
                for q in range(q0, bs):
                    sl = base + q
                    if tags[sl] != tag:
                        continue
                    # ecc_encode written out (a call passing the record array costs more than the
                    # check itself); ecc_check is CLEAN exactly when the stored word equals it.
                    acc = U0
                    par = U0
                    for w in range(N_DATA):
                        v = rec[sl, w]
                        acc ^= v
                        par |= _half_parities(v) << np.uint64(2 * w)
                    chk = ((acc & M32) ^ (acc >> S32)) | (par << S32)
                    chk |= _par(acc ^ chk) << S_OVERALL
                    if chk != rec[sl, L.W_ECC] and not read_check(
                        tags, rec, st, ring, rmeta, ctr, prm, seed, sl, t, p
                    ):
                        s = sl
                        fault = True
                        break
                    if (
                        rec[sl, 0] == kr[ri, 0]
                        and rec[sl, 1] == kr[ri, 1]
                        and rec[sl, 2] == kr[ri, 2]
                        and rec[sl, 3] == kr[ri, 3]
                        and rec[sl, 4] == kr[ri, 4]
                        and (rec[sl, L.W_META] & M8) == pr
                    ):
                        s = sl
                        # group B (tracker words) is checked once the key matched, on the
                        # words loaded here for the tracker
                        ok_b = True
                        for _try in range(2):
                            te = rec[sl, L.W_TD_END]
                            tx = rec[sl, L.W_TD_MAXEND]
                            tw = rec[sl, L.W_TD_MAXWIN]
                            tk = rec[sl, L.W_TD_MAXACK]
                            l1 = rec[sl, L.W_LAST]
                            l2 = rec[sl, L.W_LAST2]
                            ex = rec[sl, L.W_EXPIRES]
                            if (
                                not ok_b
                                or ecc_b_of(te, tx, tw, tk, l1, l2, ex) == rec[sl, L.W_ECC2]
                            ):
                                break
                            # rare: correct (then load the words again) or invalidate
                            ok_b = read_check(tags, rec, st, ring, rmeta, ctr, prm, seed, sl, t, p)
                            if not ok_b:
                                fault = True
                                break
                        break
                if s >= 0:
                    break
            if fault:
                o_out[i] = O_FAULT
                o_reason[i] = R_ECC
                o_slot[i] = s
                ctr[C_FAULT] += 1
                continue
            if s < 0:
                o_out[i] = O_MISS
                o_reason[i] = R_NO_ENTRY
                n_miss += 1
                continue
            o_slot[i] = s
            meta = rec[s, L.W_META]
            fl = (meta >> S16) & M8
            state = np.int64((meta >> S8) & M8)
            d = np.int64(kr[ri, 9])
            rel = d ^ np.int64(fl & F_ORIG_B)
            sc = rec[s, L.W_SCOPE]
            ver = rec[s, L.W_VER]
            reason = R_NONE
            if (ver & M32) != np.uint64(eni_cur[np.int64(sc & M32)]):
                reason = R_ENI
            elif (ver >> S32) != np.uint64(vpc_cur[np.int64(sc >> S32)]):
                reason = R_VPC
            if reason != R_NONE:
                if (fl & F_MISMATCH) == U0:
                    fl |= F_MISMATCH
                    rec[s, L.W_META] = (meta & ~(M8 << S16)) | (fl << S16)
                    rec[s, L.W_ECC] = ecc_encode(rec, s)
                    ctr[C_MISMATCH] += 1
                    emit_entry(ring, rmeta, ctr, EV_MISMATCH, reason, rec, s, s, t, p, 0)
                o_out[i] = O_STALE
                o_reason[i] = reason
                o_reply[i] = rel
                o_state[i] = state
                ctr[C_STALE] += 1
                continue
            if kr[ri, 12] != U0:
                # RELATED (nf_conntrack_inet_error): the entry is neither tracked nor counted
                act = (rec[s, L.W_ACT] >> np.uint64(32 * d)) & M32
                o_verdict[i] = V_RELATED
                o_reply[i] = rel
                o_action[i] = act
                o_state[i] = state
                if act == drop:
                    o_out[i] = O_DROP
                    o_reason[i] = R_DROP
                    ctr[C_DROP] += 1
                else:
                    o_out[i] = O_HIT
                    o_reason[i] = R_NONE
                    n_hit += 1
                    n_bytes += length[i]
                continue
            # Connection tracking (conntrack.py, shared with reference.py and the softpath) on
            # the words already in registers; only what it changed is stored back.
            vd, _rearmed, n_me, te1, tx1, tw1, tk1, l11, l21, ex1 = CT.ct_packet_s_inline(
                meta, te, tx, tw, tk, l1, l2, ex, np.int64(pr), rel,
                CT.pkt_flags(pr, flags[i], dport[i] >> np.uint16(8)),
                np.int64(seq[i]), np.int64(ack[i]), np.int64(sack[i]), np.int64(win[i]),
                np.int64(opt[i]), np.int64(wsc[i]), np.int64(plen[i]), t, tc,
            )  # fmt: skip
            o_verdict[i] = vd
            if vd == V_REOPEN:
                # A SYN on a finished session opens a NEW connection: as nf_conntrack kills
                # the old entry and runs the SYN through the ruleset, the old session closes
                # (final counters) and the SYN is punted for a decision.
                ctr[C_REOPEN] += 1
                ctr[C_CLOSED] += 1
                emit_entry(ring, rmeta, ctr, EV_CLOSED, R_REOPEN, rec, s, s, t, p, 0)
                invalidate(tags, rec, st, s)
                o_out[i] = O_MISS
                o_reason[i] = R_REOPEN
                o_slot[i] = -1
                n_miss += 1
                continue
            state = np.int64((n_me >> S8) & M8)
            if vd == V_INVALID:
                reason = R_TCP_INVALID
                ctr[C_TCP_INVALID] += 1
            elif vd == V_IGNORE:
                reason = R_TCP_IGNORED
                ctr[C_TCP_IGNORED] += 1
            elif vd == V_KILL:
                reason = R_KILLED
            # Update the four changed words of group A and patch its check word once (==
            # ecc_encode); group B's check word is encoded from the tracker's new words.
            if te1 != te or tx1 != tx or tw1 != tw or tk1 != tk or l11 != l1 or l21 != l2:
                rec[s, L.W_TD_END] = te1
                rec[s, L.W_TD_MAXEND] = tx1
                rec[s, L.W_TD_MAXWIN] = tw1
                rec[s, L.W_TD_MAXACK] = tk1
                rec[s, L.W_LAST] = l11
                rec[s, L.W_LAST2] = l21
                rec[s, L.W_EXPIRES] = ex1
                rec[s, L.W_ECC2] = ecc_b_of(te1, tx1, tw1, tk1, l11, l21, ex1)
            elif ex1 != ex:
                rec[s, L.W_EXPIRES] = ex1
                rec[s, L.W_ECC2] = ecc_b_of(te1, tx1, tw1, tk1, l11, l21, ex1)
            rec[s, L.W_META] = n_me
            wb = L.W_BYTES0 + d
            o_pk = rec[s, L.W_PKTS]
            o_by = rec[s, wb]
            o_se = rec[s, L.W_SEEN]
            if d == 0:  # noqa: SIM108
                n_pk = (o_pk & ~M32) | ((o_pk + U1) & M32)
            else:
                n_pk = o_pk + (U1 << S32)
            n_by = o_by + np.uint64(length[i])
            n_se = np.uint64(t)
            rec[s, L.W_PKTS] = n_pk
            rec[s, wb] = n_by
            rec[s, L.W_SEEN] = n_se
            rec[s, L.W_ECC] = ecc_patch4(
                rec[s, L.W_ECC], L.W_PKTS, o_pk, n_pk, wb, o_by, n_by, L.W_SEEN, o_se, n_se,
                L.W_META, meta, n_me,
            )  # fmt: skip
            act = (rec[s, L.W_ACT] >> np.uint64(32 * d)) & M32
            o_reply[i] = rel
            o_action[i] = act
            o_state[i] = state
            if vd == V_KILL:
                # the only reply was a RST: the kernel deletes the entry (final counters)
                ctr[C_CLOSED] += 1
                emit_entry(ring, rmeta, ctr, EV_CLOSED, R_KILLED, rec, s, s, t, p, 0)
                invalidate(tags, rec, st, s)
                o_slot[i] = -1
            if act == drop:
                o_out[i] = O_DROP
                o_reason[i] = R_DROP
                ctr[C_DROP] += 1
            elif vd == V_INVALID and inv_drop:
                o_out[i] = O_DROP
                o_reason[i] = R_TCP_INVALID
                ctr[C_DROP] += 1
            else:
                o_out[i] = O_HIT
                o_reason[i] = reason
                n_hit += 1
                n_bytes += length[i]
    # The per-packet hot counters are kept in registers and added once per batch.
    ctr[C_PACKETS] += n
    ctr[C_HIT] += n_hit
    ctr[C_MISS] += n_miss
    ctr[C_BYTES] += n_bytes


# ---------------------------------------------------------------------------- entry ops


@njit
def _place(tags, rec, scratch, s, tag) -> None:
    for k in range(L.N_WORDS):
        rec[s, k] = scratch[0, k]
    tags[s] = tag


@njit
def k_insert(
    tags,
    rec,
    st,
    rng,
    ring,
    rmeta,
    ctr,
    prm,
    seed,
    n_eni,
    n_vpc,
    a_hi,
    a_lo,
    b_hi,
    b_lo,
    pw,
    proto,
    dirs,
    hashes,
    act_o,
    act_r,
    eni,
    vpc,
    eni_v,
    vpc_v,
    now,
    tstate,
    aux,
    track,
    has_track,
    tcfg,
    out_status,
    out_slot,
):
    """Insert entries; `track` rows (meta bits, N_TRACK words) carry the tracker state of a
    session moved from software (has_track 1), else the entry starts with a state only:
    windows unknown (checked liberally, as a loose pickup) and its class's timeout."""
    nb = prm[0]
    bs = prm[1]
    maxd = prm[4]
    cap = prm[5]
    scratch = np.zeros((1, L.N_WORDS), dtype=np.uint64)
    path = np.empty(max(maxd, 1), dtype=np.int64)
    n = len(a_hi)
    for i in range(n):
        # Fetch ahead (the hashes are known): both buckets' tag lines INS_AHEAD entries on, and
        # half as far on, once those tags are in cache, the record of bucket 1's first free
        # slot, where the entry most likely lands. Hints only: every decision is made below.
        if i + INS_AHEAD < n:
            f1, f2 = buckets(hashes[i + INS_AHEAD], nb)
            prefetch_row(tags, f1 * bs)
            prefetch_row(tags, f2 * bs)
        if i + INS_AHEAD // 2 < n:
            f1, _f2 = buckets(hashes[i + INS_AHEAD // 2], nb)
            for j in range(bs):
                if tags[f1 * bs + j] == 0:
                    prefetch_at(rec, f1 * bs + j, 0)
                    prefetch_at(rec, f1 * bs + j, 8)
                    prefetch_at(rec, f1 * bs + j, 16)
                    prefetch_at(rec, f1 * bs + j, L.N_WORDS - 1)
                    break
        out_slot[i] = -1
        t = now[i]
        h = hashes[i]
        d = np.int64(dirs[i])
        # The would-be record (also what failure events describe).
        scratch[0, 0] = a_hi[i]
        scratch[0, 1] = a_lo[i]
        scratch[0, 2] = b_hi[i]
        scratch[0, 3] = b_lo[i]
        scratch[0, 4] = pw[i]
        scratch[0, L.W_META] = (
            np.uint64(proto[i]) | (np.uint64(tstate[i]) << S8) | (np.uint64(d) << S16)
        )
        scratch[0, L.W_SCOPE] = np.uint64(eni[i]) | (np.uint64(vpc[i]) << S32)
        scratch[0, L.W_VER] = np.uint64(eni_v[i]) | (np.uint64(vpc_v[i]) << S32)
        if d == 0:
            scratch[0, L.W_ACT] = np.uint64(act_o[i]) | (np.uint64(act_r[i]) << S32)
        else:
            scratch[0, L.W_ACT] = np.uint64(act_r[i]) | (np.uint64(act_o[i]) << S32)
        scratch[0, L.W_SEEN] = np.uint64(t)
        scratch[0, L.W_PKTS] = U0
        scratch[0, L.W_BYTES0] = U0
        scratch[0, L.W_BYTES1] = U0
        scratch[0, L.W_AUX] = aux[i]
        for w in range(N_TRK):
            scratch[0, L.W_TRACK + w] = U0
        if has_track[i]:
            scratch[0, L.W_META] |= track[i, 0] & TRACK_META
            for w in range(N_TRK):
                scratch[0, L.W_TRACK + w] = track[i, 1 + w]
        else:
            CT.install_state(scratch, 0, L.W_META, L.W_TRACK, np.int64(proto[i]), t, tcfg)
        ecc_seal(scratch, 0)
        if eni[i] >= n_eni or vpc[i] >= n_vpc:
            out_status[i] = ST_BAD_SCOPE
            ctr[C_INS_SCOPE] += 1
            continue
        pr = np.uint64(proto[i])
        while True:
            s, fault = probe(
                tags,
                rec,
                st,
                ring,
                rmeta,
                ctr,
                prm,
                seed,
                h,
                a_hi[i],
                a_lo[i],
                b_hi[i],
                b_lo[i],
                pw[i],
                pr,
                t,
                0,
            )
            if not fault:
                break
        if s >= 0:
            out_status[i] = ST_EXISTS
            out_slot[i] = s
            ctr[C_INS_EXISTS] += 1
            continue
        if st[0] >= cap:
            out_status[i] = ST_FULL
            ctr[C_INS_FULL] += 1
            emit_entry(ring, rmeta, ctr, EV_TABLE_FULL, R_NONE, scratch, 0, -1, t, 0, 0)
            continue
        tag = tag_of(h)
        b1, b2 = buckets(h, nb)
        free = -1
        for bi in range(2):
            b = b1 if bi == 0 else b2
            for j in range(bs):
                if tags[b * bs + j] == 0:
                    free = b * bs + j
                    break
            if free >= 0:
                break
        plen = 0
        if free < 0:
            cur = b1
            for _step in range(maxd):
                r = np.int64(rng_next(rng) % np.uint64(bs))
                v = -1
                for k in range(bs):
                    cand = cur * bs + (r + k) % bs
                    seen = False
                    for q in range(plen):
                        if path[q] == cand:
                            seen = True
                            break
                    if not seen:
                        v = cand
                        break
                if v < 0:
                    break
                if not read_check(tags, rec, st, ring, rmeta, ctr, prm, seed, v, t, 0):
                    free = v
                    break
                path[plen] = v
                plen += 1
                vh = rec_hash(rec, v, seed)
                vb1, vb2 = buckets(vh, nb)
                alt = vb2 if vb1 == cur else vb1
                for j in range(bs):
                    if tags[alt * bs + j] == 0:
                        free = alt * bs + j
                        break
                if free >= 0:
                    break
                cur = alt
        if free < 0:
            out_status[i] = ST_FAILED
            ctr[C_INS_FAILED] += 1
            emit_entry(ring, rmeta, ctr, EV_INSERT_FAILED, R_NONE, scratch, 0, -1, t, 0, 0)
            continue
        dst = free
        for k in range(plen - 1, -1, -1):
            src = path[k]
            for w in range(L.N_WORDS):
                rec[dst, w] = rec[src, w]
            tags[dst] = tags[src]
            ctr[C_DISPL] += 1
            dst = src
        _place(tags, rec, scratch, dst, tag)
        st[0] += 1
        out_status[i] = ST_OK
        out_slot[i] = dst
        ctr[C_INS_OK] += 1


@njit
def k_lookup_op(
    kind,
    tags,
    rec,
    st,
    ring,
    rmeta,
    ctr,
    prm,
    seed,
    a_hi,
    a_lo,
    b_hi,
    b_lo,
    pw,
    proto,
    hashes,
    now,
    mask,
    act_o,
    act_r,
    eni_v,
    vpc_v,
    aux,
    tstate,
    timeout,
    track,
    out_status,
    out_slot,
    out_rows,
):
    """delete (kind 0), modify (kind 1) or query (kind 2) by key.

    modify mask bits: 1 action_orig, 2 action_reply, 4 eni_version, 8 vpc_version, 16 aux,
    32 tcp_state, 64 timeout (deadline = now + timeout, as `conntrack -U --timeout`),
    128 tracker state (track rows)."""
    for i in range(len(a_hi)):
        out_slot[i] = -1
        s, fault = probe(
            tags,
            rec,
            st,
            ring,
            rmeta,
            ctr,
            prm,
            seed,
            hashes[i],
            a_hi[i],
            a_lo[i],
            b_hi[i],
            b_lo[i],
            pw[i],
            np.uint64(proto[i]),
            now,
            0,
        )
        if fault:
            out_status[i] = ST_ECC
            ctr[C_OP_ECC] += 1
            continue
        if s < 0:
            out_status[i] = ST_NOT_FOUND
            if kind == 0:
                ctr[C_DEL_NF] += 1
            elif kind == 1:
                ctr[C_MOD_NF] += 1
            else:
                ctr[C_Q_NF] += 1
            continue
        out_status[i] = ST_OK
        out_slot[i] = s
        if kind == 0:
            invalidate(tags, rec, st, s)
            ctr[C_DEL_OK] += 1
        elif kind == 1:
            m = mask[i]
            meta = rec[s, L.W_META]
            fl = ((meta >> S16) & M8) & ~F_MISMATCH
            sh_o = np.uint64(32) if (fl & F_ORIG_B) != U0 else U0
            sh_r = U0 if sh_o == S32 else S32
            act = rec[s, L.W_ACT]
            if m & 1:
                act = (act & ~(M32 << sh_o)) | (np.uint64(act_o[i]) << sh_o)
            if m & 2:
                act = (act & ~(M32 << sh_r)) | (np.uint64(act_r[i]) << sh_r)
            rec[s, L.W_ACT] = act
            ver = rec[s, L.W_VER]
            if m & 4:
                ver = (ver & ~M32) | np.uint64(eni_v[i])
            if m & 8:
                ver = (ver & M32) | (np.uint64(vpc_v[i]) << S32)
            rec[s, L.W_VER] = ver
            if m & 16:
                rec[s, L.W_AUX] = aux[i]
            state = (meta >> S8) & M8
            if m & 32:
                state = np.uint64(tstate[i])
            if m & 128:
                meta = (meta & ~TRACK_META) | (track[i, 0] & TRACK_META)
                fl = ((meta >> S16) & M8) & ~F_MISMATCH
                for w in range(N_TRK):
                    rec[s, L.W_TRACK + w] = track[i, 1 + w]
            rec[s, L.W_META] = (
                (meta & ~np.uint64(0xFFFFFF)) | (meta & M8) | (state << S8) | (fl << S16)
            )
            if m & 64:
                rec[s, L.W_EXPIRES] = np.uint64(now + timeout[i])
            ecc_seal(rec, s)
            ctr[C_MOD_OK] += 1
        else:
            for w in range(L.N_WORDS):
                out_rows[i, w] = rec[s, w]
            ctr[C_Q_OK] += 1


@njit
def k_dump(
    tags,
    rec,
    st,
    ring,
    rmeta,
    ctr,
    prm,
    seed,
    eni_cur,
    vpc_cur,
    now,
    cursor,
    max_n,
    f_eni,
    f_vpc,
    f_eni_below,
    f_vpc_below,
    f_state,
    stale_only,
    out_rows,
    out_slots,
):
    """Walk slots from cursor; filters are -1 when unused. Returns (n, next cursor)."""
    cap = prm[5]
    n = 0
    s = cursor
    while s < cap and n < max_n:
        if tags[s] != 0 and read_check(tags, rec, st, ring, rmeta, ctr, prm, seed, s, now, 0):
            sc = rec[s, L.W_SCOPE]
            ver = rec[s, L.W_VER]
            e = np.int64(sc & M32)
            v = np.int64(sc >> S32)
            ev = np.int64(ver & M32)
            vv = np.int64(ver >> S32)
            ok = True
            if f_eni >= 0 and e != f_eni:
                ok = False
            if f_vpc >= 0 and v != f_vpc:
                ok = False
            if f_eni_below >= 0 and ev >= f_eni_below:
                ok = False
            if f_vpc_below >= 0 and vv >= f_vpc_below:
                ok = False
            if f_state >= 0 and np.int64((rec[s, L.W_META] >> S8) & M8) != f_state:
                ok = False
            if stale_only and ev == np.int64(eni_cur[e]) and vv == np.int64(vpc_cur[v]):
                ok = False
            if ok:
                for w in range(L.N_WORDS):
                    out_rows[n, w] = rec[s, w]
                out_slots[n] = s
                n += 1
                ctr[C_DUMP] += 1
        s += 1
    return n, s


@njit
def k_scrub(tags, rec, st, ring, rmeta, ctr, prm, seed, stalled, stuck, hung, now, n_slots):
    """Visit n_slots slots from the cursor; expire entries past their timer deadline (the
    tracker arms it, conntrack.py). Returns expired count."""
    cap = prm[5]
    expired = 0
    s = st[1]
    for _ in range(n_slots):
        ctr[C_SCRUB] += 1
        ok = tags[s] != 0
        if ok:
            status, _pos = ecc_check(rec, s)
            if status != ECC_CLEAN:
                ok = read_check(tags, rec, st, ring, rmeta, ctr, prm, seed, s, now, 0)
        if ok and now >= np.int64(rec[s, L.W_EXPIRES]):
            meta = rec[s, L.W_META]
            state = np.int64((meta >> S8) & M8)
            if np.int64(meta & M8) == P_TCP and (state == T_TW or state == T_CL):  # noqa: SIM109
                ctr[C_CLOSED] += 1
                emit_entry(ring, rmeta, ctr, EV_CLOSED, R_NONE, rec, s, s, now, 0, 0)
            else:
                ctr[C_AGED] += 1
                emit_entry(ring, rmeta, ctr, EV_AGED, R_NONE, rec, s, s, now, 0, 0)
            invalidate(tags, rec, st, s)
            expired += 1
        s += 1
        if s >= cap:
            s = 0
    st[1] = s
    for p in range(len(stalled)):
        watchdog(stalled, stuck, hung, ring, rmeta, ctr, prm, p, now)
    return expired


@njit
def gather_floor(rows, idx) -> np.uint64:
    """Memory floor for the benchmark: read one whole record per random index."""
    acc = U0
    nw = rows.shape[1]
    for i in range(len(idx)):
        r = idx[i]
        for w in range(nw):
            acc ^= rows[r, w]
    return acc
