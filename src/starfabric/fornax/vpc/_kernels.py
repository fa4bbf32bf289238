"""Numba kernels of the policy evaluator: LPM over sorted prefix arrays, ordered ACL
matching, security-group matching, and the per-first-packet decision (see evaluate.py for the
semantics, reference.py for the same thing in plain Python)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from starfabric._jit import njit, njit_inline

_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_V4_TAG = np.uint64(0xFFFF)
_Z = np.uint64(0)
_NONE = np.uint32(0xFFFF_FFFF)

# codes (mirrors codes.py; numba needs plain module-level ints)
_R_NO_ENI = 1
_R_NO_DEST = 2
_R_SG_OUT = 3
_R_ACL_OUT = 4
_R_ACL_IN = 5
_R_SG_IN = 6
_R_NO_ROUTE = 7
_R_BLACKHOLE = 8
_R_NO_PUBLIC = 9
_T_LOCAL = 0
_T_PEER = 1
_T_NAT = 2
_T_IGW = 3
_T_BLACKHOLE = 4
_DIR_IN = 0
_DIR_OUT = 1


@njit
def _is_v4(hi, lo):
    return hi == _Z and (lo >> np.uint64(32)) == _V4_TAG


@njit
def _masked(hi, lo, length):
    if length <= 0:
        return _Z, _Z
    if length <= 64:
        return hi & (_ONES << np.uint64(64 - length)), _Z
    return hi, lo & (_ONES << np.uint64(128 - length))


@njit_inline
def _in_net(hi, lo, v4, nhi, nlo, length, fam):
    if fam == 0:
        return True
    if (fam == 4) != v4:
        return False
    mh, ml = _masked(hi, lo, length)
    return mh == nhi and ml == nlo


@njit
def _search2(khi, klo, start, end, hi, lo):
    a, b = start, end
    while a < b:
        m = (a + b) >> 1
        if khi[m] < hi or (khi[m] == hi and klo[m] < lo):
            a = m + 1
        else:
            b = m
    if a < end and khi[a] == hi and klo[a] == lo:
        return a
    return -1


@njit_inline
def find_eni(key_vni, key_hi, key_lo, key_eni, vni, hi, lo):
    """ENI id of (vni, address), or -1."""
    a, b = 0, len(key_vni)
    while a < b:
        m = (a + b) >> 1
        kv = key_vni[m]
        if kv < vni or (kv == vni and (key_hi[m] < hi or (key_hi[m] == hi and key_lo[m] < lo))):
            a = m + 1
        else:
            b = m
    if a < len(key_vni) and key_vni[a] == vni and key_hi[a] == hi and key_lo[a] == lo:
        return int(key_eni[a])
    return -1


@njit
def _find1(keys, vals, k):
    i = np.searchsorted(keys, k)
    if i < len(keys) and keys[i] == k:
        return int(vals[i])
    return -1


@njit_inline
def lpm(rt_tab_ptr, seg_len, seg_start, seg_end, rt_hi, rt_lo, table, v4, hi, lo):
    """Index of the longest-prefix route of `table` covering (hi, lo), or -1."""
    t = table * 2 + (0 if v4 else 1)
    for s in range(rt_tab_ptr[t], rt_tab_ptr[t + 1]):
        mh, ml = _masked(hi, lo, seg_len[s])
        r = _search2(rt_hi, rt_lo, seg_start[s], seg_end[s], mh, ml)
        if r >= 0:
            return r
    return -1


@njit_inline
def acl_match(
    acl_ptr,
    allow,
    proto,
    plo,
    phi,
    nhi,
    nlo,
    nlen,
    nfam,
    acl,
    direction,
    p,
    dport,
    rhi,
    rlo,
    v4,
):
    """(allowed, matching rule index or -1) of ACL `acl` for one packet; remote = (rhi, rlo)."""
    if acl < 0:
        return True, -1
    k = acl * 2 + direction
    for r in range(acl_ptr[k], acl_ptr[k + 1]):
        if proto[r] != 0 and proto[r] != p:
            continue
        if dport < plo[r] or dport > phi[r]:
            continue
        if not _in_net(rhi, rlo, v4, nhi[r], nlo[r], nlen[r], nfam[r]):
            continue
        return allow[r] == 1, r
    return False, -1


@njit_inline
def _member(eni_sg_ptr, eni_sg_idx, eni, sg):
    if eni < 0:
        return False
    found = False
    for j in range(eni_sg_ptr[eni], eni_sg_ptr[eni + 1]):
        found = found or eni_sg_idx[j] == sg
    return found


@njit_inline
def sg_match(
    eni_sg_ptr,
    eni_sg_idx,
    sg_ptr,
    sdir,
    sproto,
    slo,
    shi,
    snhi,
    snlo,
    snlen,
    snfam,
    sref,
    eni,
    direction,
    p,
    dport,
    rhi,
    rlo,
    v4,
    remote_eni,
):
    """First rule (in group order, then rule order) of `eni`'s groups allowing it, or -1."""
    for j in range(eni_sg_ptr[eni], eni_sg_ptr[eni + 1]):
        g = eni_sg_idx[j]
        for r in range(sg_ptr[g], sg_ptr[g + 1]):
            if sdir[r] != direction:
                continue
            if sproto[r] != 0 and sproto[r] != p:
                continue
            if dport < slo[r] or dport > shi[r]:
                continue
            if sref[r] >= 0:
                if not _member(eni_sg_ptr, eni_sg_idx, remote_eni, sref[r]):
                    continue
            elif not _in_net(rhi, rlo, v4, snhi[r], snlo[r], snlen[r], snfam[r]):
                continue
            return r
    return -1


@njit
def reply_dport(p, sport, dport):
    """Destination-port field of the reply: the source port, or the ICMP echo-reply type."""
    d = np.int64(dport)
    t = d >> 8
    if p == 1 and t == 8:
        return np.int64(0) | (d & 0xFF)
    if p == 58 and t == 128:
        return np.int64(129 << 8) | (d & 0xFF)
    if p == 6 or p == 17:
        return np.int64(sport)
    return d


#: The policy's tables as grouped kernel arguments (compile.CompiledPolicy columns).
Packets = namedtuple("Packets", "vni src_hi src_lo dst_hi dst_lo sport dport proto")
EniTable = namedtuple(
    "EniTable",
    "key_vni key_hi key_lo key_eni vni_key vni_vpc eip_key eip_eni eni_vpc eni_subnet "
    "act_deliver act_peer act_dnat act_snat_eip vpc_vni subnet_table subnet_acl peer_a peer_b "
    "pool_act_snat act_drop",
)
RouteTable = namedtuple("RouteTable", "tab_ptr seg_len seg_start seg_end hi lo target via")
AclTable = namedtuple("AclTable", "ptr allow proto lo hi nhi nlo nlen nfam")
SgTable = namedtuple("SgTable", "eni_ptr eni_idx ptr dir proto lo hi nhi nlo nlen nfam ref")
Decisions = namedtuple(
    "Decisions",
    "reason rev_reason fwd_act rev_act eni_scope vpc_scope nat_kind nat_pool rev_vni m_route "
    "m_sg_out m_acl_out m_acl_in m_sg_in",
)


@njit_inline
def _acl(acl, list_id, d, p, port, hi, lo, v4):
    """acl_match over an AclTable: (allowed, deciding rule)."""
    return acl_match(acl.ptr, acl.allow, acl.proto, acl.lo, acl.hi, acl.nhi, acl.nlo, acl.nlen,
                     acl.nfam, list_id, d, p, port, hi, lo, v4)  # fmt: skip


@njit_inline
def _sg(sg, eni, d, p, port, hi, lo, v4, peer):
    """sg_match over an SgTable: the allowing rule, -1 when none."""
    return sg_match(sg.eni_ptr, sg.eni_idx, sg.ptr, sg.dir, sg.proto, sg.lo, sg.hi, sg.nhi,
                    sg.nlo, sg.nlen, sg.nfam, sg.ref, eni, d, p, port, hi, lo, v4, peer)  # fmt: skip


@njit_inline
def _route(rt, table, v4, hi, lo):
    """lpm over a RouteTable: the matching route of `table`, -1 when none."""
    return lpm(rt.tab_ptr, rt.seg_len, rt.seg_start, rt.seg_end, rt.hi, rt.lo, table, v4, hi, lo)


@njit
def evaluate_kernel(pk, gateway_vni, act_igw, net, rt, acl, sg, out):
    """Fill the result columns `out` (Decisions) for each first packet `pk` (Packets), from
    the grouped tables (see evaluate.py for the order of checks)."""
    vni_a, src_hi, src_lo, dst_hi, dst_lo = pk.vni, pk.src_hi, pk.src_lo, pk.dst_hi, pk.dst_lo
    sport_a, dport_a, proto_a = pk.sport, pk.dport, pk.proto
    key_vni, key_hi, key_lo, key_eni = net.key_vni, net.key_hi, net.key_lo, net.key_eni
    vni_key, vni_vpc, eip_key, eip_eni = net.vni_key, net.vni_vpc, net.eip_key, net.eip_eni
    eni_vpc, eni_subnet, vpc_vni = net.eni_vpc, net.eni_subnet, net.vpc_vni
    eni_act_deliver, eni_act_peer = net.act_deliver, net.act_peer
    eni_act_dnat, eni_act_snat_eip = net.act_dnat, net.act_snat_eip
    subnet_table, subnet_acl, peer_a, peer_b = (
        net.subnet_table,
        net.subnet_acl,
        net.peer_a,
        net.peer_b,
    )
    pool_act_snat, act_drop = net.pool_act_snat, net.act_drop
    rt_target, rt_via = rt.target, rt.via
    n = len(vni_a)
    for i in range(n):
        vni = np.uint64(vni_a[i])
        ahi, alo, dhi, dlo = src_hi[i], src_lo[i], dst_hi[i], dst_lo[i]
        p = np.int64(proto_a[i])
        sp = np.int64(sport_a[i])
        dp = np.int64(dport_a[i])
        v4 = _is_v4(ahi, alo)
        rdp = reply_dport(p, sp, dp)
        r_fwd = 0
        r_rev = 0
        a_fwd = _NONE
        a_rev = _NONE
        e_sc = _NONE
        v_sc = np.uint32(0)
        nk = 0
        pool = -1
        rv = np.uint32(0)
        mr = -1
        mso = -1
        mao = -1
        mai = -1
        msi = -1
        if vni == np.uint64(gateway_vni):
            # north-south inbound: only an EIP (IPv4) reaches a VPC
            e = -1
            if v4 and _is_v4(dhi, dlo):
                e = _find1(eip_key, eip_eni, dlo)
            if e < 0:
                r_fwd = _R_NO_DEST
            else:
                e_sc = np.uint32(e)
                v_sc = eni_vpc[e]
                sub = eni_subnet[e]
                ok, mai = _acl(acl, subnet_acl[sub], _DIR_IN, p, dp, ahi, alo, True)
                if not ok:
                    r_fwd = _R_ACL_IN
                else:
                    msi = _sg(sg, e, _DIR_IN, p, dp, ahi, alo, True, -1)
                    if msi < 0:
                        r_fwd = _R_SG_IN
                if r_fwd == 0:
                    a_fwd = eni_act_dnat[e]
                    a_rev = eni_act_snat_eip[e]
                    nk = 2
                    rv = vpc_vni[eni_vpc[e]]
                    ok, _x = _acl(acl, subnet_acl[sub], _DIR_OUT, p, rdp, ahi, alo, True)
                    if not ok:
                        r_rev = _R_ACL_OUT
        else:
            a = find_eni(key_vni, key_hi, key_lo, key_eni, vni, ahi, alo)
            if a < 0:
                r_fwd = _R_NO_ENI
                vv = _find1(vni_key, vni_vpc, vni)
                v_sc = np.uint32(vv if vv >= 0 else 0)
            else:
                e_sc = np.uint32(a)
                v_sc = eni_vpc[a]
                sub_a = eni_subnet[a]
                r = _route(rt, subnet_table[sub_a], v4, dhi, dlo)  # fmt: skip
                b = -1
                peering = -1
                if r < 0 or _is_v4(dhi, dlo) != v4:  # mixed families: nothing routes it
                    r_fwd = _R_NO_ROUTE
                    r = -1
                else:
                    mr = r
                    t = rt_target[r]
                    if t == _T_BLACKHOLE:
                        r_fwd = _R_BLACKHOLE
                    elif t == _T_LOCAL:
                        b = find_eni(key_vni, key_hi, key_lo, key_eni, vni, dhi, dlo)
                        if b < 0:
                            r_fwd = _R_NO_DEST
                        else:
                            a_fwd = eni_act_deliver[b]
                            a_rev = eni_act_deliver[a]
                            rv = np.uint32(vni)
                    elif t == _T_PEER:
                        peering = rt_via[r]
                        pv = peer_b[peering] if peer_a[peering] == eni_vpc[a] else peer_a[peering]
                        b = find_eni(key_vni, key_hi, key_lo, key_eni, np.uint64(vpc_vni[pv]),
                                     dhi, dlo)  # fmt: skip
                        if b < 0:
                            r_fwd = _R_NO_DEST
                        else:
                            a_fwd = eni_act_peer[b]
                            a_rev = eni_act_peer[a]
                            rv = vpc_vni[pv]
                    elif t == _T_NAT:
                        pool = rt_via[r]
                        a_fwd = pool_act_snat[pool]
                        a_rev = eni_act_dnat[a]
                        nk = 1
                        rv = np.uint32(gateway_vni)
                    elif v4:
                        if eni_act_snat_eip[a] == _NONE:
                            r_fwd = _R_NO_PUBLIC
                        else:
                            a_fwd = eni_act_snat_eip[a]
                            a_rev = eni_act_dnat[a]
                            nk = 2
                            rv = np.uint32(gateway_vni)
                    else:
                        a_fwd = np.uint32(act_igw)
                        a_rev = eni_act_deliver[a]
                        rv = np.uint32(gateway_vni)
                if r_fwd == 0:
                    mso = _sg(sg, a, _DIR_OUT, p, dp, dhi, dlo, v4, b)
                    if mso < 0:
                        r_fwd = _R_SG_OUT
                cross = b < 0 or eni_subnet[b] != sub_a
                if r_fwd == 0 and cross:
                    ok, mao = _acl(acl, subnet_acl[sub_a], _DIR_OUT, p, dp, dhi, dlo, v4)
                    if not ok:
                        r_fwd = _R_ACL_OUT
                if r_fwd == 0 and cross and b >= 0:
                    ok, mai = _acl(acl, subnet_acl[eni_subnet[b]], _DIR_IN, p, dp, ahi, alo, v4)
                    if not ok:
                        r_fwd = _R_ACL_IN
                if r_fwd == 0 and b >= 0:
                    msi = _sg(sg, b, _DIR_IN, p, dp, ahi, alo, v4, a)
                    if msi < 0:
                        r_fwd = _R_SG_IN
                # the reply direction: route back (peering), then stateless ACLs
                if r_fwd == 0 and peering >= 0:
                    r2 = _route(rt, subnet_table[eni_subnet[b]], v4, ahi, alo)  # fmt: skip
                    if r2 < 0:
                        r_rev = _R_NO_ROUTE
                    elif rt_target[r2] == _T_BLACKHOLE:
                        r_rev = _R_BLACKHOLE
                    elif rt_target[r2] != _T_PEER or rt_via[r2] != peering:
                        r_rev = _R_NO_ROUTE
                if r_fwd == 0 and r_rev == 0 and cross:
                    if b >= 0:
                        ok, _x = _acl(
                            acl, subnet_acl[eni_subnet[b]], _DIR_OUT, p, rdp, ahi, alo, v4
                        )
                        if not ok:
                            r_rev = _R_ACL_OUT
                    if r_rev == 0:
                        ok, _x = _acl(acl, subnet_acl[sub_a], _DIR_IN, p, rdp, dhi, dlo, v4)
                        if not ok:
                            r_rev = _R_ACL_IN
        if r_fwd != 0:
            a_fwd = act_drop[r_fwd]
            a_rev = act_drop[r_fwd]
            nk = 0
            pool = -1
            r_rev = r_fwd
        elif r_rev != 0:
            a_rev = act_drop[r_rev]
        out.reason[i] = r_fwd
        out.rev_reason[i] = r_rev
        out.fwd_act[i] = a_fwd
        out.rev_act[i] = a_rev
        out.eni_scope[i] = e_sc
        out.vpc_scope[i] = v_sc
        out.nat_kind[i] = nk
        out.nat_pool[i] = pool
        out.rev_vni[i] = rv
        out.m_route[i] = mr
        out.m_sg_out[i] = mso
        out.m_acl_out[i] = mao
        out.m_acl_in[i] = mai
        out.m_sg_in[i] = msi
