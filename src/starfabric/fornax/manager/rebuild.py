"""Rebuild of sessions whose hardware entry was lost to an uncorrectable ECC error.

The engine invalidates the entry and reports what it read back (ECC_UNCORRECTABLE event):
the key, orientation flag, actions, scopes, versions, TCP state and cookie, any of which may
hold the flipped bits. The manager keeps nothing per session, so it rebuilds from the event
and the CURRENT policy, trusting a field only when the policy confirms it:

1. Key. KEY_CONSISTENT (the key read back hashes to its slot): the event's key. KEY_SUSPECT:
   the loss is remembered, and the first punted packet whose canonical key lies within
   `suspect_max_bits` bits of it is taken as that session (its key is the true one).
2. Orientation (which side opened the connection). The policy is evaluated both ways and
   compared with the fields read back (actions + scopes when the entry's version snapshot is
   current, scopes only when it is stale). The orientation that reproduces them wins; if both
   give the same forwarding, orientation does not matter. Otherwise nothing is guessed: the
   key is quarantined (below).
3. TCP state, never guessed open: a stored ESTABLISHED is rebuilt as SYN_RECV, so the session
   is ESTABLISHED again only once software sees an ORIGINAL-direction ACK (and until then
   ages on the short SYN_RECV timeout); other valid states are kept; an invalid value means
   quarantine.
4. Cookie: an SNAT allocation is kept only if the NAT bitmap really holds it; otherwise the
   decision allocates afresh (the full patrol pass frees a leaked port).

The rebuilt session is created in the software table and pushed back to hardware like any
re-decided session. A quarantined key gets a software drop session (never promoted) whose
packets are counted as lost (DropReason.SESSION_LOST): a packet is never forwarded on a guess.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import FlowKeys, Scope
from starfabric.fornax.engine.tcp import N_STATES, TcpState
from starfabric.fornax.keys import CanonicalKeys, canonicalize
from starfabric.fornax.manager import cookie
from starfabric.fornax.manager.decide import (
    is_icmp,
    original_from_entries,
    policy_fields,
    swapped,
)
from starfabric.fornax.manager.moves import held_by
from starfabric.fornax.manager.protocols import ManagerState, ResilienceState


def choose_orientation(m: ManagerState, ev: np.ndarray) -> tuple[FlowKeys, np.ndarray]:
    """ORIGINAL keys (event orientation or swapped) and whether each was confirmed."""
    keys = original_from_entries(ev)
    n = len(ev)
    icmp = is_icmp(ev["proto"])
    o = policy_fields(m.policy, keys, m.now_ns, m.drop)
    sw = swapped(keys)
    r = policy_fields(m.policy, sw, m.now_ns, m.drop)
    eni_ok = ev["eni_scope"] < m.engine.config.eni_scopes
    vpc_ok = ev["vpc_scope"] < m.engine.config.vpc_scopes
    cur_e = np.zeros(n, np.uint32)
    cur_v = np.zeros(n, np.uint32)
    cur_e[eni_ok] = m.driver.versions(Scope.ENI, ev["eni_scope"][eni_ok])
    cur_v[vpc_ok] = m.driver.versions(Scope.VPC, ev["vpc_scope"][vpc_ok])
    fresh = eni_ok & vpc_ok & (ev["eni_version"] == cur_e) & (ev["vpc_version"] == cur_v)
    read_o = (ev["action_orig"], ev["action_reply"], ev["eni_scope"], ev["vpc_scope"])
    read_r = (ev["action_reply"], ev["action_orig"], ev["eni_scope"], ev["vpc_scope"])
    act = np.where(fresh, 1, 0)  # actions count only on a current snapshot
    m_o = sum(((a == b).astype(int) * (act if i < 2 else 1)) for i, (a, b) in
              enumerate(zip(o, read_o, strict=True)))  # fmt: skip
    m_r = sum(((a == b).astype(int) * (act if i < 2 else 1)) for i, (a, b) in
              enumerate(zip(r, read_r, strict=True)))  # fmt: skip
    full = np.where(fresh, 4, 2)
    m_r = np.where(icmp, -1, m_r)
    same = (o[0] == r[1]) & (o[1] == r[0]) & (o[2] == r[2]) & (o[3] == r[3]) & ~icmp
    # the winner must reproduce everything, or all but one field of a current snapshot
    need = np.where(fresh, 3, 2)
    pick_o = same | ((m_o >= need) & (m_o > m_r)) | (m_o == full) & (m_r < full)
    pick_r = ~pick_o & (m_r >= need) & (m_r > m_o)
    chosen = FlowKeys(
        *(np.where(pick_r, getattr(sw, f), getattr(keys, f)) for f in keys.__dataclass_fields__)
    )
    return chosen, pick_o | pick_r


def rebuilt_state(proto: npt.NDArray[np.uint8], state: npt.NDArray[np.uint8]) -> tuple[
    npt.NDArray[np.uint8], npt.NDArray[np.bool_]
]:  # fmt: skip
    """TCP state to rebuild with (ESTABLISHED re-learned from SYN_RECV) and validity."""
    tcp = proto == 6
    ok = ~tcp | (state < N_STATES)
    out = np.where(tcp & ok, state, 0).astype(np.uint8)
    out[tcp & (out == TcpState.ESTABLISHED)] = TcpState.SYN_RECV
    return out, ok


def nat_held(m: ManagerState, aux: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    """Whether each cookie's SNAT allocation is really held in the NAT bitmaps."""
    held = cookie.has_nat(aux)
    out = np.zeros(len(aux), bool)
    if not held.any():
        return out
    ip = cookie.nat_ip(aux[held]).astype(np.int64)
    port = cookie.nat_port(aux[held]).astype(np.int64)
    bm = m.nat.bitmap
    inside = (ip >= 0) & (ip < len(bm))
    bit = np.zeros(len(ip), bool)
    w = bm[ip[inside], port[inside] // 64]
    bit[inside] = ((w >> (port[inside] % 64).astype(np.uint64)) & np.uint64(1)) == 1
    out[held] = bit
    return out


def rebuild_lost(
    part: ResilienceState, ev: np.ndarray, keys: FlowKeys | None = None
) -> dict[str, int]:
    """Rebuild the sessions of ECC_UNCORRECTABLE records `ev` into the software table (pushed
    back to hardware by the next flush); `keys` overrides the read-back keys (KEY_SUSPECT
    matched to a packet). Returns counts of rebuilt and quarantined sessions."""
    if not len(ev):
        return {"rebuilt": 0, "quarantined": 0}
    if keys is not None:
        ev = ev.copy()
        for f in ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport"):
            ev[f] = getattr(keys, f)
    m = part.m
    orig, confirmed = choose_orientation(m, ev)
    state, valid = rebuilt_state(ev["proto"], ev["tcp_state"])
    ok = confirmed & valid
    ck = canonicalize(orig)
    # a key software already holds (e.g. rebuilt from an earlier event) stays as it is
    fresh = ~held_by(m.soft, orig)
    ok &= fresh
    aux = np.where(nat_held(m, ev["aux"]), ev["aux"], ev["aux"] & ~cookie.NAT_FLAG)
    aux = aux.astype(np.uint64)
    rebuilt = 0
    if ok.any():
        sel = np.flatnonzero(ok)
        d = m.decide(orig.take(sel), aux[sel])
        keep = d.session
        gone_sel = sel[~keep]
        m.release(d.aux[~keep])
        sub = ck.take(sel[keep])
        done, slot = m.paths.to_software(orig.take(sel[keep]), d, keep, m.now_ns,
                                         tcp_state=state[sel[keep]])  # fmt: skip
        m.rebuilt(slot[done])
        part.unquarantine(sub.take(np.flatnonzero(done)))  # a late event confirmed them
        m.release(d.aux[keep][~done])
        rebuilt = int(done.sum())
        ok[gone_sel] = False  # refused by the current policy: quarantined (never forwarded)
    q = np.flatnonzero(~ok & fresh)
    quarantined = part.quarantine(ck.take(q)) if len(q) else 0
    m.metrics.count("ecc_rebuilt", rebuilt)
    m.metrics.count("ecc_quarantined", quarantined)
    return {"rebuilt": rebuilt, "quarantined": quarantined}


def event_keys(ev: np.ndarray) -> CanonicalKeys:
    """Canonical keys of event records (direction = canonical side of the ORIGINAL sender)."""
    return canonicalize(original_from_entries(ev))


def key_distance(a: CanonicalKeys, b: CanonicalKeys) -> npt.NDArray[np.int64]:
    """Bit distance between every key of `a` (rows) and of `b` (columns)."""
    d = np.zeros((len(a), len(b)), np.int64)
    for f in ("a_hi", "a_lo", "b_hi", "b_lo"):
        x = getattr(a, f)[:, None] ^ getattr(b, f)[None, :]
        d += np.bitwise_count(x).astype(np.int64)
    d += np.bitwise_count(a.ports_word()[:, None] ^ b.ports_word()[None, :]).astype(np.int64)
    d += np.bitwise_count(a.proto[:, None] ^ b.proto[None, :]).astype(np.int64)
    return d


def match_suspects(
    m: ResilienceState, pk: CanonicalKeys, pkeys: FlowKeys
) -> tuple[np.ndarray, FlowKeys]:
    """Suspect-key losses matched to punted packets' keys: (matched events, their keys in the
    event's orientation, built from the packet's true key). Matched suspects are forgotten."""
    s = m.suspects
    empty = (s[:0], pkeys.take(np.zeros(0, np.int64)))
    if not len(s) or not len(pk):
        return empty
    sk = event_keys(s)
    d = key_distance(sk, pk)
    best = d.argmin(1)
    hit = d[np.arange(len(s)), best] <= m.health.config.suspect_max_bits
    if not hit.any():
        return empty
    ev = s[hit]
    col = best[hit]
    # the event's ORIGINAL sender is the packet side its source address is nearest to
    src_hi, src_lo = ev["src_hi"], ev["src_lo"]
    to_a = np.bitwise_count(src_hi ^ pk.a_hi[col]) + np.bitwise_count(src_lo ^ pk.a_lo[col])
    to_b = np.bitwise_count(src_hi ^ pk.b_hi[col]) + np.bitwise_count(src_lo ^ pk.b_lo[col])
    from_a = to_a <= to_b
    k = FlowKeys.from_columns(
        vni=pk.vni[col], proto=pk.proto[col],
        src_hi=np.where(from_a, pk.a_hi[col], pk.b_hi[col]),
        src_lo=np.where(from_a, pk.a_lo[col], pk.b_lo[col]),
        dst_hi=np.where(from_a, pk.b_hi[col], pk.a_hi[col]),
        dst_lo=np.where(from_a, pk.b_lo[col], pk.a_lo[col]),
        sport=np.where(from_a, pk.a_port[col], pk.b_port[col]),
        dport=np.where(from_a, pk.b_port[col], pk.a_port[col]),
    )  # fmt: skip
    # (ICMP: `rebuild` takes the type from the cookie, as for any ICMP record)
    m.suspects = s[~hit]
    return ev, k


__all__ = [
    "choose_orientation",
    "event_keys",
    "key_distance",
    "match_suspects",
    "nat_held",
    "rebuild_lost",
    "rebuilt_state",
]
