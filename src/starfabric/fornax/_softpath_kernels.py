"""Numba kernels of the software datapath (softpath.py): the per-packet forwarding loop with
nf_conntrack tracking (the engine's conntrack.py, so software and hardware track alike) over
the session table, whose keys a KeyIndex finds (keyindex.py, probed with its `_find`).

Kernels take arrays and scalars only. Table columns (one row per slot):
  used[s]        0 empty, 1 valid, 2 deleted (the KeyIndex's flags, tombstones)
  key[s, 0:5]    a_hi, a_lo, b_hi, b_lo, ports word (keys.CanonicalKeys.ports_word)
  kproto[s]      protocol (used, key, kproto: the KeyIndex's columns)
  orig_dir[s]    canonical direction bit of the ORIGINAL direction
  act[s, 0:2]    action handle per canonical direction (as the engine keeps them)
  scope[s, 0:2]  ENI, VPC scope ids;  ver[s, 0:2] their version snapshots
  trk[s, 0:8]    tracker row (engine/conntrack.py: meta word, then N_TRACK words);
  fresh[s]       1 until the session's first packet has created its tracker entry
  last_ns[s], pkts[s, 0:2], nbytes[s, 0:2] (per canonical direction), aux[s]

An ICMP error quoting a tuple (conntrack.icmp_error_quotes) is looked up first by that tuple
inverted, as the engine's k_process does: found, its first packet run, it is RELATED
(forwarded with the session's action, the session untouched); else it is an ICMP packet of
its own tuple.
"""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit
from starfabric.fornax._keyindex_kernels import _find
from starfabric.fornax.engine import conntrack as CT

SP_HIT = 0
SP_MISS = 1
SP_STALE = 2
SP_DROP = 3

V_INVALID_NEW = CT.V_INVALID_NEW  # the first packet creates no tracker entry
V_NEW = CT.V_NEW  # the first packet created the tracker entry
V_UNTRACKED = CT.V_UNTRACKED  # the kernel leaves the packet untracked: no entry, not invalid


@njit
def sp_install(trk, slots, proto, t, tcfg):
    """Tracker rows of sessions installed with a TCP state only (conntrack.install_state)."""
    for j in range(len(slots)):
        CT.install_state(trk, slots[j], 0, 1, np.int64(proto[j]), t, tcfg)


@njit
def sp_store(slots, od, a_orig, a_reply, eni, vpc, proto, tcp_state, aux, now, first,
             orig_dir, act, scope, ver, trk, fresh, last_ns, pkts, nbytes, aux_col, eni_cur,
             vpc_cur):  # fmt: skip
    """Columns of sessions just indexed at `slots` (SoftPath.insert): orig_dir, actions per
    canonical direction, scopes with their current versions, a tracker row holding only
    protocol and TCP state, the fresh flag, last-seen time, counters cleared, the cookie."""
    for j in range(len(slots)):
        s = slots[j]
        d = np.int64(od[j])
        orig_dir[s] = od[j]
        act[s, d] = a_orig[j]
        act[s, 1 - d] = a_reply[j]
        scope[s, 0] = eni[j]
        scope[s, 1] = vpc[j]
        ver[s, 0] = eni_cur[eni[j]]
        ver[s, 1] = vpc_cur[vpc[j]]
        for c in range(trk.shape[1]):
            trk[s, c] = 0
        trk[s, 0] = np.uint64(proto[j]) | (np.uint64(tcp_state[j]) << np.uint64(8))
        fresh[s] = first
        last_ns[s] = now
        for c in range(2):
            pkts[s, c] = 0
            nbytes[s, c] = 0
        aux_col[s] = aux[j]


@njit
def sp_related(proto, icmp_t, dst_hi, dst_lo, i_proto, i_src_hi, i_src_lo, i_dport, out):
    """out[i]: packet i is an ICMP error whose quoted tuple, inverted, names the session it
    is RELATED to (conntrack.icmp_error_quotes, as nf_conntrack_inet_error)."""
    for i in range(len(proto)):
        out[i] = CT.icmp_error_quotes(
            np.int64(proto[i]),
            icmp_t[i],
            i_proto[i],
            i_dport[i] >> np.uint16(8),
            dst_hi[i],
            dst_lo[i],
            i_src_hi[i],
            i_src_lo[i],
        )


@njit
def sp_process(
    h, k, proto, direction, rel_h, rel_k, rel_proto, rel_dir, related, time_ns, length, flags, seq, ack, sack, win, opt, wsc, plen, icmp_t,
    key, kproto, used, orig_dir, act, scope, ver, trk, fresh, last_ns, pkts, nbytes,
    eni_cur, vpc_cur, tcfg, drop_action, inv_drop,
    out_outcome, out_action, out_slot, out_verdict, out_state, out_dir,
):  # fmt: skip
    """Forward packets in order: MISS without a session, STALE when a scope moved on (the
    cached actions are not applied), else connection tracking (engine/conntrack.py, the
    engine's own code) and HIT/DROP with counters. A session's first packet (fresh) creates
    its tracker entry; when the kernel would create none (INVALID_NEW) the session goes.
    out_verdict: the tracker's verdict (conntrack.V_*), 255 where none ran; out_state: the
    session's TCP state after the packet. related[i]: packet i is an ICMP error, rel_*[i] the
    key of the tuple it quotes, inverted (sp_related); out_dir: the direction bit of the key
    the packet was looked up by."""
    mask = np.int64(len(used) - 1)
    for i in range(len(h)):
        out_verdict[i] = 255
        out_state[i] = 0
        out_dir[i] = direction[i]
        if related[i]:
            s = _find(key, kproto, used, mask, rel_h[i], rel_k[i, 0], rel_k[i, 1], rel_k[i, 2],
                      rel_k[i, 3], rel_k[i, 4], rel_proto[i])  # fmt: skip
            if s >= 0 and fresh[s] == 0:  # a fresh session has no tracker entry yet
                out_slot[i] = s
                out_dir[i] = rel_dir[i]
                if ver[s, 0] != eni_cur[scope[s, 0]] or ver[s, 1] != vpc_cur[scope[s, 1]]:
                    out_outcome[i] = SP_STALE
                    out_action[i] = 0
                    continue
                # RELATED (nf_conntrack_inet_error): forwarded with the session's action; no
                # tracking, no timer, no counters
                a = act[s, rel_dir[i]]
                out_action[i] = a
                out_outcome[i] = SP_DROP if a == drop_action else SP_HIT
                out_verdict[i] = CT.V_RELATED
                out_state[i] = CT.state_of(trk, s, 0)
                continue
        s = _find(
            key, kproto, used, mask, h[i], k[i, 0], k[i, 1], k[i, 2], k[i, 3], k[i, 4], proto[i]
        )
        out_slot[i] = s
        if s < 0:
            out_outcome[i] = SP_MISS
            out_action[i] = 0
            continue
        if ver[s, 0] != eni_cur[scope[s, 0]] or ver[s, 1] != vpc_cur[scope[s, 1]]:
            out_outcome[i] = SP_STALE
            out_action[i] = 0
            continue
        d = direction[i]
        r = 1 if d != orig_dir[s] else 0
        pr = np.int64(proto[i])
        t = time_ns[i]
        fresh_pkt = fresh[s] == 1
        if fresh_pkt:
            fresh[s] = 0
            ok = CT.ct_new(trk, s, 0, 1, pr, np.int64(flags[i]), np.int64(seq[i]),
                           np.int64(win[i]), np.int64(opt[i]), np.int64(wsc[i]),
                           np.int64(plen[i]), np.int64(icmp_t[i]), t, tcfg)  # fmt: skip
            v = CT.V_INVALID
            if ok:
                v, _re = CT.ct_packet(trk, s, 0, 1, pr, 0, CT.pkt_flags(pr, flags[i], icmp_t[i]),
                                      np.int64(seq[i]),
                                      np.int64(ack[i]), np.int64(sack[i]), np.int64(win[i]),
                                      np.int64(opt[i]), np.int64(wsc[i]), np.int64(plen[i]), t,
                                      tcfg)  # fmt: skip
            if v == CT.V_INVALID:
                # nf_conntrack creates no entry: the session goes (the caller releases it);
                # an untracked packet (ICMPv6 ND/MLD) is not INVALID either
                used[s] = 2
                unt = CT.untracked(pr, icmp_t[i])
                out_verdict[i] = V_UNTRACKED if unt else V_INVALID_NEW
                a = act[s, d]
                out_action[i] = a
                out_outcome[i] = SP_DROP if (a == drop_action or (inv_drop and not unt)) else SP_HIT
                continue
        else:
            v, _re = CT.ct_packet(trk, s, 0, 1, pr, r, CT.pkt_flags(pr, flags[i], icmp_t[i]),
                                  np.int64(seq[i]),
                                  np.int64(ack[i]), np.int64(sack[i]), np.int64(win[i]),
                                  np.int64(opt[i]), np.int64(wsc[i]), np.int64(plen[i]), t,
                                  tcfg)  # fmt: skip
        out_verdict[i] = V_NEW if (fresh_pkt and v == CT.V_ACCEPT) else v
        out_state[i] = CT.state_of(trk, s, 0)
        if v == CT.V_REOPEN:
            # reopen: a new connection (as nf_conntrack); the old session goes and the SYN is
            # a MISS for the manager to decide
            used[s] = 2
            out_outcome[i] = SP_MISS
            out_action[i] = 0
            continue  # out_slot keeps s: the caller releases what the session held
        a = act[s, d]
        out_action[i] = a
        out_outcome[i] = (
            SP_DROP if (a == drop_action or (v == CT.V_INVALID and inv_drop)) else SP_HIT
        )
        last_ns[s] = t
        pkts[s, d] += 1
        nbytes[s, d] += length[i]
        if v == CT.V_KILL:
            used[s] = 2  # the only reply was a RST: the entry goes (the caller releases it)


__all__ = [
    "SP_DROP",
    "SP_HIT",
    "SP_MISS",
    "SP_STALE",
    "V_INVALID_NEW",
    "V_NEW",
    "V_UNTRACKED",
    "_find",
    "sp_install",
    "sp_process",
    "sp_related",
    "sp_store",
]
