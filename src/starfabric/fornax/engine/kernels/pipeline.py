"""The packet pipeline (`k_process`, the SessionEngine.process of the fast engine) and the
port watchdog: lookups in flight in groups, every decision taken in order (interface.py)."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine._intrinsics import prefetch_row, prefetch_write_row
from starfabric.fornax.engine.kernels.codes import (
    C_BYTES,
    C_CLOSED,
    C_DROP,
    C_FAULT,
    C_HANG,
    C_HIT,
    C_HUNG,
    C_MISMATCH,
    C_MISS,
    C_PACKETS,
    C_REOPEN,
    C_STALE,
    C_TCP_IGNORED,
    C_TCP_INVALID,
    EV_CLOSED,
    EV_HANG,
    EV_MISMATCH,
    F_MISMATCH,
    F_ORIG_B,
    M8,
    M32,
    O_DROP,
    O_FAULT,
    O_HIT,
    O_HUNG,
    O_MISS,
    O_STALE,
    R_DROP,
    R_ECC,
    R_KILLED,
    R_NO_ENTRY,
    R_NONE,
    R_REOPEN,
    R_STALLED,
    R_TCP_IGNORED,
    R_TCP_INVALID,
    S8,
    S16,
    S32,
    U0,
    U1,
    V_IGNORE,
    V_INVALID,
    V_KILL,
    V_RELATED,
    V_REOPEN,
)
from starfabric.fornax.engine.kernels.ecc import (
    ecc_b_of,
    ecc_encode,
    ecc_encode_b,
    ecc_patch4,
)
from starfabric.fornax.engine.kernels.hashing import packet_key
from starfabric.fornax.engine.kernels.ring import emit_entry, emit_simple
from starfabric.fornax.engine.kernels.table import (
    first_tag,
    invalidate,
    prefetch_entry,
    read_check,
    stale_reason,
)

#: Packets per stage of the lookup pipeline (assumption: measured on this 2-core VM at 16M slots
#: with window tracking on: 8 gave 0.29-0.31 of the gather floor, 4 0.26; before the tracker,
#: on an AMD EPYC VM, 4 beat 2, 8, 16 and 32). Tried again at 16M after the vector ECC (issue
#: 17, alternated runs, noisy): 16 and 32 no better than 8; one packet per stage per step, all
#: of a step's fetches in one burst, or an extra early fetch of the bucket's first record line
#: (to walk its page sooner) each worse (0.23-0.30 against 0.28-0.34). Again on 2026-12's host
#: (time relative to 8, alternated): 3 1.21, 4 0.95-1.03, 6 1.08, 16 0.96 (docs/fornax.md, Speed).
GROUP = 8
KEY_RING = 4 * GROUP  # prepared keys in flight: groups g..g+3 (a group's rows reused 4 later)
#: Groups ahead of key preparation at which the batch's columns (every input and completion
#: array) are fetched (assumption, measured at 16M slots, issue 17): a 4M-packet batch streams
#: ~30 columns from memory, more streams than the core's prefetcher follows, and the pipeline
#: stalled on its own inputs (a sampled profile put the first read of `time[i]` and of the key
#: columns among the hottest instructions). With the columns fetched 2 groups ahead the lookup
#: took 158 ns per packet where it took 212 with the table in L2 (16,384 slots), 222-238 where
#: 297-318 at 16M; 1 and 4 groups ahead were no better than 2, 8 and 16 worse. The completion
#: arrays are asked for with write intent (16M, one run: 202 ns per packet against 221 with
#: read hints and 236 without them).
COLUMNS_AHEAD = 2


@njit
def watchdog(stalled, stuck, hung, ring, rmeta, ctr, prm, p, t) -> None:
    if stalled[p] and stuck[p] >= 0 and hung[p] == 0 and t - stuck[p] >= prm[3]:
        hung[p] = 1
        ctr[C_HANG] += 1
        emit_simple(ring, rmeta, ctr, EV_HANG, t, p, t - stuck[p])


@njit_inline
def store_hit(rec, s, d, meta, n_me, te, tx, tw, tk, l1, l2, ex,
              te1, tx1, tw1, tk1, l11, l21, ex1, length, t):  # fmt: skip
    """Store what a tracked packet changed in record s: meta, the tracker words (group B's
    check word encoded from the new words, only when one changed), the counters of direction
    d and last-seen; group A's check word is patched for its four changed words (== a full
    ecc_encode)."""
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
    n_by = o_by + length
    n_se = np.uint64(t)
    rec[s, L.W_PKTS] = n_pk
    rec[s, wb] = n_by
    rec[s, L.W_SEEN] = n_se
    rec[s, L.W_ECC] = ecc_patch4(
        rec[s, L.W_ECC], L.W_PKTS, o_pk, n_pk, wb, o_by, n_by, L.W_SEEN, o_se, n_se,
        L.W_META, meta, n_me,
    )  # fmt: skip


@njit_inline
def put(o_out, o_reason, o_slot, o_reply, o_action, o_state, o_verdict, i, out, reason, slot,
        reply, action, state, verdict) -> None:  # fmt: skip
    """Packet i's completion: outcome, reason, slot (-1 none), reply bit, action, TCP state
    and tracker verdict (255: none)."""
    o_out[i] = out
    o_reason[i] = reason
    o_slot[i] = slot
    o_reply[i] = reply
    o_action[i] = action
    o_state[i] = state
    o_verdict[i] = verdict


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
        # first three stages only read the table and move cache lines (kr[:, 12] is a hint);
        # every decision is taken in the last, in order, on the table as it is then.
        # Group g+3: prepare keys, fetch bucket 1's tag lines. Group g+2: scan them, fetch the
        # matching record or else bucket 2's tag line. Group g+1: scan bucket 2 where needed,
        # fetch that record. Group g: process. Whole groups per stage (rather than one packet
        # per stage per step) keep the core's miss buffers busy while it computes. The batch's
        # own columns are asked for COLUMNS_AHEAD groups before key preparation reads them.
        k = (g + 3 + COLUMNS_AHEAD) * GROUP
        if k < n:  # written out: numba inlines no helper taking this many arrays
            prefetch_row(time, k)
            prefetch_row(port, k)
            prefetch_row(vni, k)
            prefetch_row(proto, k)
            prefetch_row(src_hi, k)
            prefetch_row(src_lo, k)
            prefetch_row(dst_hi, k)
            prefetch_row(dst_lo, k)
            prefetch_row(sport, k)
            prefetch_row(dport, k)
            prefetch_row(flags, k)
            prefetch_row(length, k)
            prefetch_row(seq, k)
            prefetch_row(ack, k)
            prefetch_row(sack, k)
            prefetch_row(win, k)
            prefetch_row(opt, k)
            prefetch_row(wsc, k)
            prefetch_row(plen, k)
            prefetch_row(i_proto, k)
            prefetch_row(i_src_hi, k)
            prefetch_row(i_src_lo, k)
            prefetch_row(i_dst_hi, k)
            prefetch_row(i_dst_lo, k)
            prefetch_row(i_sport, k)
            prefetch_row(i_dport, k)
            prefetch_write_row(o_out, k)
            prefetch_write_row(o_reason, k)
            prefetch_write_row(o_dir, k)
            prefetch_write_row(o_reply, k)
            prefetch_write_row(o_action, k)
            prefetch_write_row(o_slot, k)
            prefetch_write_row(o_state, k)
            prefetch_write_row(o_verdict, k)
        lo = (g + 3) * GROUP
        for j in range(lo, min(lo + GROUP, n)):
            b1 = packet_key(j, vni, proto, src_hi, src_lo, dst_hi, dst_lo, sport, dport, i_proto,
                            i_src_hi, i_src_lo, i_dst_hi, i_dst_lo, i_sport, i_dport, seed, nb,
                            kr, j % KEY_RING)  # fmt: skip
            prefetch_row(tags, b1 * bs)
        lo = (g + 2) * GROUP
        for j in range(max(lo, 0), min(lo + GROUP, n)):
            rj = j % KEY_RING
            b = np.int64(kr[rj, 6])
            q = first_tag(tags64, b, wpb, kr[rj, 8])
            if q < bs:
                kr[rj, 12] = np.uint64(b * bs + q + 1)
                prefetch_entry(rec, b * bs + q)
            else:
                kr[rj, 12] = U0
                prefetch_row(tags, np.int64(kr[rj, 7]) * bs)
        lo = (g + 1) * GROUP
        for j in range(max(lo, 0), min(lo + GROUP, n)):
            rj = j % KEY_RING
            if kr[rj, 12] == U0:
                b = np.int64(kr[rj, 7])
                q = first_tag(tags64, b, wpb, kr[rj, 8])
                if q < bs:
                    prefetch_entry(rec, b * bs + q)
        lo = g * GROUP
        for i in range(max(lo, 0), min(lo + GROUP, n)):
            ri = i % KEY_RING
            o_dir[i] = np.uint8(kr[ri, 9])
            t = time[i]
            p = np.int64(port[i])
            # Each way out writes the packet's completion once (put): no field is stored twice.
            if stalled[p]:
                if stuck[p] < 0:
                    stuck[p] = t
                watchdog(stalled, stuck, hung, ring, rmeta, ctr, prm, p, t)
                put(o_out, o_reason, o_slot, o_reply, o_action, o_state, o_verdict, i,
                    O_HUNG, R_STALLED, -1, 255, 0, 0, 255)  # fmt: skip
                ctr[C_HUNG] += 1
                continue
            pr = kr[ri, 10]  # the key's protocol (an ICMP error's: the quoted packet's)
            # Probe, written out here: a call carrying the table arrays costs numba reference
            # counting per call, which would dominate the hit path. ECC is checked before the key
            # compare; only a failing check takes the (rare) read_check path with its events.
            tag = np.uint16(kr[ri, 8])
            s = -1
            fault = False
            te = tx = tw = tk = l1 = l2 = ex = U0
            # Stage g+2 found bucket 1's first tag match at slot kr[ri, 12] - 1 (0: none). The
            # pipeline never sets a tag (it may clear one), so a slot still holding the tag is
            # still the first match and the scan can start there; otherwise scan afresh.
            hint = np.int64(kr[ri, 12]) - 1
            for c in range(6, 8):
                b = np.int64(kr[ri, c])
                base = b * bs
                if c == 6 and hint >= 0 and tags[hint] == tag:
                    q0 = hint - base
                else:
                    q0 = first_tag(tags64, b, wpb, kr[ri, 8])
                for q in range(q0, bs):
                    sl = base + q
                    if tags[sl] != tag:
                        continue
                    # ecc_check is CLEAN exactly when the stored word equals the encoding
                    if ecc_encode(rec, sl) != rec[sl, L.W_ECC] and not read_check(
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
                        # group B (tracker words) is checked once the key matched, from the
                        # record (one vector load) beside the words loaded for the tracker
                        ok_b = True
                        for _try in range(2):
                            te = rec[sl, L.W_TD_END]
                            tx = rec[sl, L.W_TD_MAXEND]
                            tw = rec[sl, L.W_TD_MAXWIN]
                            tk = rec[sl, L.W_TD_MAXACK]
                            l1 = rec[sl, L.W_LAST]
                            l2 = rec[sl, L.W_LAST2]
                            ex = rec[sl, L.W_EXPIRES]
                            if not ok_b or ecc_encode_b(rec, sl) == rec[sl, L.W_ECC2]:
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
                put(o_out, o_reason, o_slot, o_reply, o_action, o_state, o_verdict, i,
                    O_FAULT, R_ECC, s, 255, 0, 0, 255)  # fmt: skip
                ctr[C_FAULT] += 1
                continue
            if s < 0:
                put(o_out, o_reason, o_slot, o_reply, o_action, o_state, o_verdict, i,
                    O_MISS, R_NO_ENTRY, -1, 255, 0, 0, 255)  # fmt: skip
                n_miss += 1
                continue
            meta = rec[s, L.W_META]
            fl = (meta >> S16) & M8
            state = np.int64((meta >> S8) & M8)
            d = np.int64(kr[ri, 9])
            rel = d ^ np.int64(fl & F_ORIG_B)
            sc = rec[s, L.W_SCOPE]
            ver = rec[s, L.W_VER]
            reason = stale_reason(sc, ver, eni_cur, vpc_cur)
            if reason != R_NONE:
                if (fl & F_MISMATCH) == U0:
                    fl |= F_MISMATCH
                    rec[s, L.W_META] = (meta & ~(M8 << S16)) | (fl << S16)
                    rec[s, L.W_ECC] = ecc_encode(rec, s)
                    ctr[C_MISMATCH] += 1
                    emit_entry(ring, rmeta, ctr, EV_MISMATCH, reason, rec, s, s, t, p, 0)
                put(o_out, o_reason, o_slot, o_reply, o_action, o_state, o_verdict, i,
                    O_STALE, reason, s, rel, 0, state, 255)  # fmt: skip
                ctr[C_STALE] += 1
                continue
            act = (rec[s, L.W_ACT] >> np.uint64(32 * d)) & M32
            # RELATED (nf_conntrack_inet_error, kr[:, 11]): the entry is neither tracked nor
            # counted, the packet takes its action.
            vd = V_RELATED
            if kr[ri, 11] == U0:
                # Connection tracking (conntrack.py, shared with reference.py and the softpath)
                # on the words already in registers; only what it changed is stored back.
                vd, _rearmed, n_me, te1, tx1, tw1, tk1, l11, l21, ex1 = CT.ct_packet_s_inline(
                    meta, te, tx, tw, tk, l1, l2, ex, np.int64(pr), rel,
                    CT.pkt_flags(pr, flags[i], dport[i] >> np.uint16(8)),
                    np.int64(seq[i]), np.int64(ack[i]), np.int64(sack[i]), np.int64(win[i]),
                    np.int64(opt[i]), np.int64(wsc[i]), np.int64(plen[i]), t, tc,
                )  # fmt: skip
                if vd == V_REOPEN:
                    # A SYN on a finished session opens a NEW connection: as nf_conntrack kills
                    # the old entry and runs the SYN through the ruleset, the old session closes
                    # (final counters) and the SYN is punted for a decision.
                    ctr[C_REOPEN] += 1
                    ctr[C_CLOSED] += 1
                    emit_entry(ring, rmeta, ctr, EV_CLOSED, R_REOPEN, rec, s, s, t, p, 0)
                    invalidate(tags, rec, st, s)
                    put(o_out, o_reason, o_slot, o_reply, o_action, o_state, o_verdict, i,
                        O_MISS, R_REOPEN, -1, 255, 0, 0, vd)  # fmt: skip
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
                store_hit(rec, s, d, meta, n_me, te, tx, tw, tk, l1, l2, ex,
                          te1, tx1, tw1, tk1, l11, l21, ex1, np.uint64(length[i]), t)  # fmt: skip
            slot = s
            if vd == V_KILL:
                # the only reply was a RST: the kernel deletes the entry (final counters)
                ctr[C_CLOSED] += 1
                emit_entry(ring, rmeta, ctr, EV_CLOSED, R_KILLED, rec, s, s, t, p, 0)
                invalidate(tags, rec, st, s)
                slot = -1
            if act == drop:
                out = O_DROP
                reason = R_DROP
                ctr[C_DROP] += 1
            elif vd == V_INVALID and inv_drop:
                out = O_DROP
                reason = R_TCP_INVALID
                ctr[C_DROP] += 1
            else:
                out = O_HIT
                n_hit += 1
                n_bytes += length[i]
            put(o_out, o_reason, o_slot, o_reply, o_action, o_state, o_verdict, i,
                out, reason, slot, rel, act, state, vd)  # fmt: skip
    # The per-packet hot counters are kept in registers and added once per batch.
    ctr[C_PACKETS] += n
    ctr[C_HIT] += n_hit
    ctr[C_MISS] += n_miss
    ctr[C_BYTES] += n_bytes
