"""Entry operations and maintenance: insert (cuckoo placement with displacement), delete /
modify / query by key, dump, the aging scrubber, and the benchmark's memory-floor gather."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine._intrinsics import prefetch_row
from starfabric.fornax.engine.kernels.codes import (
    C_AGED,
    C_CLOSED,
    C_DEL_NF,
    C_DEL_OK,
    C_DISPL,
    C_DUMP,
    C_INS_EXISTS,
    C_INS_FAILED,
    C_INS_FULL,
    C_INS_OK,
    C_INS_SCOPE,
    C_MOD_NF,
    C_MOD_OK,
    C_OP_ECC,
    C_Q_NF,
    C_Q_OK,
    C_SCRUB,
    ECC_CLEAN,
    EV_AGED,
    EV_CLOSED,
    EV_INSERT_FAILED,
    EV_TABLE_FULL,
    F_MISMATCH,
    F_ORIG_B,
    M8,
    M32,
    N_TRK,
    P_TCP,
    R_NONE,
    S8,
    S16,
    S32,
    ST_BAD_SCOPE,
    ST_ECC,
    ST_EXISTS,
    ST_FAILED,
    ST_FULL,
    ST_NOT_FOUND,
    ST_OK,
    T_CL,
    T_TW,
    TRACK_META,
    U0,
)
from starfabric.fornax.engine.kernels.ecc import ecc_check, ecc_seal
from starfabric.fornax.engine.kernels.hashing import buckets, rec_hash, rng_next, tag_of
from starfabric.fornax.engine.kernels.pipeline import watchdog
from starfabric.fornax.engine.kernels.ring import emit_entry
from starfabric.fornax.engine.kernels.table import (
    first_free,
    invalidate,
    prefetch_entry,
    probe,
    read_check,
    stale_reason,
)

#: Entries an insert batch fetches ahead (assumption: enough to cover a memory miss while
#: the entries in between are placed).
INS_AHEAD = 8


@njit
def _place(tags, rec, scratch, s, tag) -> None:
    for k in range(L.N_WORDS):
        rec[s, k] = scratch[0, k]
    tags[s] = tag


@njit
def k_insert(
    tags, rec, st, rng, ring, rmeta, ctr, prm, seed, n_eni, n_vpc, a_hi, a_lo, b_hi, b_lo, pw,
    proto, dirs, hashes, act_o, act_r, eni, vpc, eni_v, vpc_v, now, tstate, aux, track,
    has_track, tcfg, out_status, out_slot,
):  # fmt: skip
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
            f = first_free(tags, f1, bs)
            if f >= 0:
                prefetch_entry(rec, f)
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
                tags, rec, st, ring, rmeta, ctr, prm, seed, h, a_hi[i], a_lo[i], b_hi[i],
                b_lo[i], pw[i], pr, t, 0,
            )  # fmt: skip
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
        free = first_free(tags, b1, bs)
        if free < 0:
            free = first_free(tags, b2, bs)
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
                free = first_free(tags, alt, bs)
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
    kind, tags, rec, st, ring, rmeta, ctr, prm, seed, a_hi, a_lo, b_hi, b_lo, pw, proto, hashes,
    now, mask, act_o, act_r, eni_v, vpc_v, aux, tstate, timeout, track, out_status, out_slot,
    out_rows,
):  # fmt: skip
    """delete (kind 0), modify (kind 1) or query (kind 2) by key.

    modify mask bits: 1 action_orig, 2 action_reply, 4 eni_version, 8 vpc_version, 16 aux,
    32 tcp_state, 64 timeout (deadline = now + timeout, as `conntrack -U --timeout`),
    128 tracker state (track rows)."""
    for i in range(len(a_hi)):
        out_slot[i] = -1
        s, fault = probe(
            tags, rec, st, ring, rmeta, ctr, prm, seed, hashes[i], a_hi[i], a_lo[i], b_hi[i],
            b_lo[i], pw[i], np.uint64(proto[i]), now, 0,
        )  # fmt: skip
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
            if m & 128:  # the whole tracker state, its TCP state included (as insert's)
                meta = (meta & ~TRACK_META) | (track[i, 0] & TRACK_META)
                fl = ((meta >> S16) & M8) & ~F_MISMATCH
                state = (track[i, 0] >> S8) & M8
                for w in range(N_TRK):
                    rec[s, L.W_TRACK + w] = track[i, 1 + w]
            if m & 32:  # an explicit TCP state wins over the track's
                state = np.uint64(tstate[i])
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
    tags, rec, st, ring, rmeta, ctr, prm, seed, eni_cur, vpc_cur, now, cursor, max_n, f_eni,
    f_vpc, f_eni_below, f_vpc_below, f_state, stale_only, out_rows, out_slots,
):  # fmt: skip
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
            if stale_only and stale_reason(sc, ver, eni_cur, vpc_cur) == R_NONE:
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
