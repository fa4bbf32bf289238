"""Numba kernels of the software datapath (softpath.py): an open-addressing session table
probed linearly, and the per-packet forwarding loop with nf_conntrack TCP tracking.

Kernels take arrays and scalars only. Table columns (one row per slot):
  used[s]        0 empty, 1 valid, 2 deleted (tombstone, keeps probe chains intact)
  key[s, 0:5]    a_hi, a_lo, b_hi, b_lo, ports word (keys.CanonicalKeys.ports_word)
  kproto[s]      protocol
  orig_dir[s]    canonical direction bit of the ORIGINAL direction
  act[s, 0:2]    action handle per canonical direction (as the engine keeps them)
  scope[s, 0:2]  ENI, VPC scope ids;  ver[s, 0:2] their version snapshots
  tcp[s]         TcpState;  seen_reply[s] a REPLY packet was forwarded
  last_ns[s], pkts[s, 0:2], nbytes[s, 0:2] (per canonical direction), aux[s]
"""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit

SP_HIT = 0
SP_MISS = 1
SP_STALE = 2
SP_DROP = 3

ST_OK = 0
ST_EXISTS = 1
ST_FULL = 3


@njit
def _find(key, kproto, used, mask, h, k0, k1, k2, k3, k4, p):
    s = np.int64(h & np.uint64(mask))
    for _ in range(mask + 1):
        u = used[s]
        if u == 0:
            return -1
        if (
            u == 1
            and key[s, 4] == k4
            and key[s, 1] == k1
            and key[s, 3] == k3
            and key[s, 0] == k0
            and key[s, 2] == k2
            and kproto[s] == p
        ):
            return s
        s = (s + 1) & mask
    return -1


@njit
def sp_lookup(h, k, proto, key, kproto, used, out_slot):
    """Slot of each canonical key (k: uint64[n, 5]) or -1."""
    mask = np.int64(len(used) - 1)
    for i in range(len(h)):
        out_slot[i] = _find(
            key, kproto, used, mask, h[i], k[i, 0], k[i, 1], k[i, 2], k[i, 3], k[i, 4], proto[i]
        )


@njit
def sp_insert(h, k, proto, count, capacity, key, kproto, used, out_status, out_slot):
    """Insert keys (values are written by the caller at out_slot); returns the new count."""
    mask = np.int64(len(used) - 1)
    for i in range(len(h)):
        found = _find(
            key, kproto, used, mask, h[i], k[i, 0], k[i, 1], k[i, 2], k[i, 3], k[i, 4], proto[i]
        )
        if found >= 0:
            out_status[i] = ST_EXISTS
            out_slot[i] = found
            continue
        if count >= capacity:
            out_status[i] = ST_FULL
            out_slot[i] = -1
            continue
        s = np.int64(h[i] & np.uint64(mask))
        while used[s] == 1:
            s = (s + 1) & mask
        used[s] = 1
        for j in range(5):
            key[s, j] = k[i, j]
        kproto[s] = proto[i]
        count += 1
        out_status[i] = ST_OK
        out_slot[i] = s
    return count


@njit
def sp_process(
    h, k, proto, direction, tcp_ev, length, time_ns,
    key, kproto, used, orig_dir, act, scope, ver, tcp, seen_reply, last_ns, pkts, nbytes,
    eni_cur, vpc_cur, transitions, drop_action,
    out_outcome, out_action, out_slot,
):  # fmt: skip
    """Forward packets in order: MISS without a session, STALE when a scope moved on (the
    cached actions are not applied), else HIT/DROP with TCP tracking and counters."""
    mask = np.int64(len(used) - 1)
    for i in range(len(h)):
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
        if proto[i] == 6:
            old = tcp[s]
            new = transitions[r, tcp_ev[i], old]
            if new < 10:
                if new == 1 and (old == 7 or old == 8):
                    # reopen: a new connection (as nf_conntrack); the old session goes and the
                    # SYN is a MISS for the manager to decide
                    used[s] = 2
                    out_outcome[i] = SP_MISS
                    out_action[i] = 0
                    continue  # out_slot keeps s: the caller releases what the session held
                tcp[s] = new
        elif r == 1:
            seen_reply[s] = 1
        a = act[s, d]
        out_action[i] = a
        out_outcome[i] = SP_DROP if a == drop_action else SP_HIT
        last_ns[s] = time_ns[i]
        pkts[s, d] += 1
        nbytes[s, d] += length[i]
