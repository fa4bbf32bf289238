"""Numba kernels of the flow-level simulator: max-min fair rates and the event loop.

Max-min fairness by progressive filling (Bertsekas & Gallager, Data Networks §6.5.2): the link
with the smallest fair share (remaining capacity / unfrozen flows) is the next bottleneck;
its flows are frozen at that share and leave the other links of their paths. A binary heap with
lazy invalidation keeps the next bottleneck in O(log L), so one solve is O(nnz log L).
"""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit

INF = np.inf


@njit
def _heap_push(hk, hl, hv, n, key, link, ver):
    i = n
    hk[i] = key
    hl[i] = link
    hv[i] = ver
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] <= hk[i]:
            break
        hk[p], hk[i] = hk[i], hk[p]
        hl[p], hl[i] = hl[i], hl[p]
        hv[p], hv[i] = hv[i], hv[p]
        i = p
    return n + 1


@njit
def _heap_pop(hk, hl, hv, n):
    key = hk[0]
    link = hl[0]
    ver = hv[0]
    n -= 1
    hk[0] = hk[n]
    hl[0] = hl[n]
    hv[0] = hv[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hk[c + 1] < hk[c]:
            c += 1
        if hk[i] <= hk[c]:
            break
        hk[c], hk[i] = hk[i], hk[c]
        hl[c], hl[i] = hl[i], hl[c]
        hv[c], hv[i] = hv[i], hv[c]
        i = c
    return key, link, ver, n


@njit
def maxmin_rates(flow_ptr, flow_links, link_ptr, link_flows, cap, active, rate):
    """Fill `rate` (bit/s) with the max-min fair allocation of the `active` flows.

    flow_ptr/flow_links: CSR flow → links of its path; link_ptr/link_flows: CSR link → flows.
    Inactive flows get rate 0; an active flow with an empty path gets +inf (never bottlenecked).
    Returns the number of bottleneck rounds.
    """
    n_links = cap.shape[0]
    n_flows = flow_ptr.shape[0] - 1
    remaining = cap.astype(np.float64).copy()
    unfrozen = np.zeros(n_links, np.int64)
    frozen = np.ones(n_flows, np.bool_)
    for f in range(n_flows):
        rate[f] = 0.0
        if active[f]:
            if flow_ptr[f + 1] == flow_ptr[f]:
                rate[f] = INF
            else:
                frozen[f] = False
                for k in range(flow_ptr[f], flow_ptr[f + 1]):
                    unfrozen[flow_links[k]] += 1
    return _fill(flow_ptr, flow_links, link_ptr, link_flows, remaining, unfrozen, frozen, rate)


@njit
def _fill(flow_ptr, flow_links, link_ptr, link_flows, remaining, unfrozen, frozen, rate):
    """Progressive filling given each link's capacity left and unfrozen-flow count."""
    n_links = remaining.shape[0]
    size = 2 * n_links + 1
    hk = np.empty(size, np.float64)
    hl = np.empty(size, np.int64)
    hv = np.empty(size, np.int64)
    version = np.zeros(n_links, np.int64)
    touched = np.empty(n_links, np.int64)
    mark = np.zeros(n_links, np.bool_)
    n = 0
    for link in range(n_links):
        if unfrozen[link] > 0:
            n = _heap_push(hk, hl, hv, n, max(remaining[link], 0.0) / unfrozen[link], link, 0)
    rounds = 0
    while n > 0:
        share, link, ver, n = _heap_pop(hk, hl, hv, n)
        if ver != version[link] or unfrozen[link] == 0:
            continue
        rounds += 1
        n_touched = 0
        for k in range(link_ptr[link], link_ptr[link + 1]):
            f = link_flows[k]
            if frozen[f]:
                continue
            frozen[f] = True
            rate[f] = share
            for j in range(flow_ptr[f], flow_ptr[f + 1]):
                other = flow_links[j]
                remaining[other] -= share
                unfrozen[other] -= 1
                if other != link and not mark[other]:
                    mark[other] = True
                    touched[n_touched] = other
                    n_touched += 1
        for t in range(n_touched):
            other = touched[t]
            mark[other] = False
            version[other] += 1
            if unfrozen[other] > 0:
                if n >= hk.shape[0]:  # grow the heap (stale entries accumulate)
                    hk2 = np.empty(2 * hk.shape[0], np.float64)
                    hl2 = np.empty(2 * hk.shape[0], np.int64)
                    hv2 = np.empty(2 * hk.shape[0], np.int64)
                    hk2[:n] = hk[:n]
                    hl2[:n] = hl[:n]
                    hv2[:n] = hv[:n]
                    hk, hl, hv = hk2, hl2, hv2
                n = _heap_push(
                    hk,
                    hl,
                    hv,
                    n,
                    max(remaining[other], 0.0) / unfrozen[other],
                    other,
                    version[other],
                )
    return rounds


@njit
def _active_rates(
    flow_ptr, flow_links, cap, active_idx, n_active, rate, scratch_ptr, scratch_flows
):
    """Max-min rates of the flows listed in active_idx[:n_active] (others untouched).

    Builds the link → active-flows incidence afresh (O(active path length + links)), so the
    cost of an event shrinks as flows complete.
    """
    n_links = cap.shape[0]
    remaining = cap.astype(np.float64).copy()
    unfrozen = np.zeros(n_links, np.int64)
    frozen = np.ones(flow_ptr.shape[0] - 1, np.bool_)
    for i in range(n_active):
        f = active_idx[i]
        if flow_ptr[f + 1] == flow_ptr[f]:
            rate[f] = INF
        else:
            frozen[f] = False
            for k in range(flow_ptr[f], flow_ptr[f + 1]):
                unfrozen[flow_links[k]] += 1
    scratch_ptr[0] = 0
    for link in range(n_links):
        scratch_ptr[link + 1] = scratch_ptr[link] + unfrozen[link]
    fill = scratch_ptr[:-1].copy()
    for i in range(n_active):
        f = active_idx[i]
        if not frozen[f]:
            for k in range(flow_ptr[f], flow_ptr[f + 1]):
                link = flow_links[k]
                scratch_flows[fill[link]] = f
                fill[link] += 1
    return _fill(
        flow_ptr, flow_links, scratch_ptr, scratch_flows, remaining, unfrozen, frozen, rate
    )


@njit
def _tx_end(t_now, remaining, rate):
    """When a transmission at `rate` (bit/s) with `remaining` bytes ends (inf if stalled)."""
    if rate == INF:
        return t_now
    if rate > 0.0:
        return t_now + remaining * 8.0 / rate
    return INF


@njit
def run_until(
    t_now,
    t_stop,
    flow_ptr,
    flow_links,
    cap,
    latency_s,
    start_s,
    remaining,
    state,
    waiting_deps,
    dep_ptr,
    dep_flows,
    finish_s,
    tx_done_s,
    link_bytes,
    rate,
    max_events,
    rel_tol,
):
    """Advance the fluid simulation from t_now to at most t_stop; return (t_now, events).

    state per flow: 0 pending (waits for start time and dependencies), 1 transmitting,
    2 draining (last byte sent, in flight for the path latency), 3 done.
    A flow becomes transmitting at max(start_s, time its last dependency finished); its
    completion is tx end + path latency; dependents are released at completion.
    link_bytes accumulates bytes carried per link (for utilization and conservation checks).

    rel_tol = 0 is exact. With rel_tol > 0, the flows whose transmissions end within
    rel_tol × (time since the earliest active flow started) of the next end are finished in
    the same event, at their exact projected times, without handing their capacity to the
    others in between: fewer max-min solves, completion times late by at most that fraction.
    """
    n_flows = state.shape[0]
    n_links = cap.shape[0]
    active_idx = np.empty(n_flows, np.int64)
    scratch_ptr = np.empty(n_links + 1, np.int64)
    scratch_flows = np.empty(max(1, flow_links.shape[0]), np.int64)
    events = 0
    eps = 1e-12
    dirty = True  # the set of transmitting flows changed: rates must be recomputed
    n_active = 0
    while events < max_events:
        # Start flows whose time has come; finish drains that are due, releasing dependents.
        released = True
        while released:
            released = False
            for f in range(n_flows):
                if state[f] == 0 and waiting_deps[f] == 0 and start_s[f] <= t_now + eps:
                    state[f] = 1
                    dirty = True
                    if remaining[f] <= 0.0:
                        state[f] = 2
                        tx_done_s[f] = t_now
                if state[f] == 2 and tx_done_s[f] + latency_s[f] <= t_now + eps:
                    state[f] = 3
                    finish_s[f] = tx_done_s[f] + latency_s[f]
                    for k in range(dep_ptr[f], dep_ptr[f + 1]):
                        g = dep_flows[k]
                        waiting_deps[g] -= 1
                        if start_s[g] < finish_s[f]:
                            start_s[g] = finish_s[f]
                        if waiting_deps[g] == 0:
                            released = True
        t_ref = INF
        t_next = t_stop
        n_active = 0
        for f in range(n_flows):
            s = state[f]
            if s == 1:
                active_idx[n_active] = f
                n_active += 1
                if start_s[f] < t_ref:
                    t_ref = start_s[f]
            elif s == 0 and waiting_deps[f] == 0:
                if start_s[f] < t_next:
                    t_next = start_s[f]
            elif s == 2 and dep_ptr[f + 1] > dep_ptr[f]:
                # only a drain that releases dependents is an event; others end on their own
                t_fin = tx_done_s[f] + latency_s[f]
                if t_fin < t_next:
                    t_next = t_fin
        if n_active > 0 and dirty:
            _active_rates(
                flow_ptr, flow_links, cap, active_idx, n_active, rate, scratch_ptr, scratch_flows
            )
            dirty = False
        # Next event: a transmission ends, a pending flow starts, or a drain completes.
        t_end_min = INF
        for i in range(n_active):
            f = active_idx[i]
            t_end = _tx_end(t_now, remaining[f], rate[f])
            if t_end < t_end_min:
                t_end_min = t_end
        horizon = t_next
        window = -INF  # no transmission ends before the next other event
        if t_end_min <= t_next:
            window = t_end_min
            horizon = t_end_min
            if rel_tol > 0.0:
                window = t_end_min + rel_tol * (t_end_min - t_ref)
                if window > t_next:
                    window = t_next
        if horizon == INF:
            break
        if n_active == 0 and horizon >= t_stop:
            if t_stop < INF:
                t_now = t_stop
            break
        # flows ending inside the window finish at their projected times
        t_adv = horizon
        for i in range(n_active):
            f = active_idx[i]
            t_end = _tx_end(t_now, remaining[f], rate[f])
            if t_end <= window and t_end > t_adv:
                t_adv = t_end
        dt = max(t_adv - t_now, 0.0)
        for i in range(n_active):
            f = active_idx[i]
            t_end = _tx_end(t_now, remaining[f], rate[f])
            if t_end <= window:
                sent = remaining[f]
                remaining[f] = 0.0
                tx_done_s[f] = t_end
                dirty = True
                if dep_ptr[f + 1] > dep_ptr[f]:
                    state[f] = 2
                else:
                    state[f] = 3
                    finish_s[f] = t_end + latency_s[f]
            else:
                sent = min(remaining[f], rate[f] * dt / 8.0)
                remaining[f] -= sent
            for k in range(flow_ptr[f], flow_ptr[f + 1]):
                link_bytes[flow_links[k]] += sent
        t_now = t_adv
        events += 1
        if t_now >= t_stop:
            break
    return t_now, events


@njit
def analytical_times(size, rate, latency, start, dep_ptr, dep_flows, n_waiting, finish):
    """Congestion-blind completion times: each flow alone at `rate`, in dependency order.

    Kahn's topological order over the prerequisite → dependent CSR; returns the number of
    flows completed (fewer than all means a dependency cycle).
    """
    n = size.shape[0]
    queue = np.empty(n, np.int64)
    head = 0
    tail = 0
    for f in range(n):
        if n_waiting[f] == 0:
            queue[tail] = f
            tail += 1
    while head < tail:
        f = queue[head]
        head += 1
        tx = 0.0 if size[f] == 0.0 else size[f] * 8.0 / rate[f]
        finish[f] = start[f] + tx + latency[f]
        for k in range(dep_ptr[f], dep_ptr[f + 1]):
            g = dep_flows[k]
            if start[g] < finish[f]:
                start[g] = finish[f]
            n_waiting[g] -= 1
            if n_waiting[g] == 0:
                queue[tail] = g
                tail += 1
    return tail
