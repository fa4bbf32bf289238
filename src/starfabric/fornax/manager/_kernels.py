"""Numba kernels of the manager: SNAT port allocation in per-public-IP bitmaps."""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit

_FULL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@njit
def nat_alloc(
    pool, pool_ptr, pool_ips, bitmap, ip_cursor, pool_cursor, used, port_min, port_max,
    out_ip, out_port,
):  # fmt: skip
    """Allocate one (public IP, port) per request of pool `pool[i]`: the pool's IPs in
    round robin, in each IP the next free port after its cursor (whole full words skipped).
    out_ip = -1 when the pool has no free port left."""
    n_ports = port_max - port_min + 1
    for i in range(len(pool)):
        p = pool[i]
        out_ip[i] = -1
        out_port[i] = 0
        lo = pool_ptr[p]
        k = pool_ptr[p + 1] - lo
        for t in range(k):
            ip = pool_ips[lo + (pool_cursor[p] + t) % k]
            if used[ip] >= n_ports:
                continue
            off = ip_cursor[ip]
            scanned = 0
            while scanned < n_ports:
                port = port_min + (off + scanned) % n_ports
                w = port >> 6
                if bitmap[ip, w] == _FULL:
                    scanned += 64 - (port & 63)
                    continue
                b = np.uint64(1) << np.uint64(port & 63)
                if bitmap[ip, w] & b == 0:
                    bitmap[ip, w] |= b
                    used[ip] += 1
                    ip_cursor[ip] = (port - port_min + 1) % n_ports
                    out_ip[i] = ip
                    out_port[i] = port
                    break
                scanned += 1
            if out_ip[i] >= 0:
                pool_cursor[p] = (pool_cursor[p] + t + 1) % k
                break


@njit
def nat_set(ip, port, bitmap, used, value):
    """Set (value=1) or clear (0) the bits of (ip, port) pairs; returns how many changed."""
    changed = 0
    for i in range(len(ip)):
        w = port[i] >> 6
        b = np.uint64(1) << np.uint64(port[i] & 63)
        is_set = bitmap[ip[i], w] & b != 0
        if value == 1 and not is_set:
            bitmap[ip[i], w] |= b
            used[ip[i]] += 1
            changed += 1
        elif value == 0 and is_set:
            bitmap[ip[i], w] &= ~b
            used[ip[i]] -= 1
            changed += 1
    return changed


@njit
def group_ids(words, proto, hashes, out):  # fmt: skip
    """Group id of each row by exact key (5 words + protocol), numbered in order of first
    appearance: an open-addressing table keyed by the 64-bit hash, every probe confirmed on
    the full key (a hash collision never merges two keys). Returns the number of groups."""
    n = len(hashes)
    size = 1
    while size < 2 * n:
        size *= 2
    mask = size - 1
    slot_row = np.full(size, -1, np.int64)
    slot_gid = np.empty(size, np.int64)
    g = 0
    for i in range(n):
        j = np.int64(hashes[i] & np.uint64(mask))
        while True:
            r = slot_row[j]
            if r < 0:
                slot_row[j] = i
                slot_gid[j] = g
                out[i] = g
                g += 1
                break
            if (hashes[r] == hashes[i] and proto[r] == proto[i] and words[r, 0] == words[i, 0]
                    and words[r, 1] == words[i, 1] and words[r, 2] == words[i, 2]
                    and words[r, 3] == words[i, 3] and words[r, 4] == words[i, 4]):  # fmt: skip
                out[i] = slot_gid[j]
                break
            j = (j + 1) & mask
    return g
