"""A compiled VPC policy as an nftables ruleset (libnftables JSON): the kernel decides every
new connection exactly as vpc/_kernels.evaluate_kernel does, and counts why it refused one.

Layout (table `inet fornax`):
- `raw` (prerouting, raw priority): the overlay VNI, carried in the frame's source MAC
  (02:VV:VV:VV:xx:xx, see netns.py), becomes the packet mark; the VPC of the VNI becomes the
  conntrack zone, so VPCs that reuse addresses never share an entry.
- `filter` (prerouting, mangle priority, before DNAT): established/related packets go to `est`
  (the version check: `ct mark & 0x7fffffff` must be in set `fresh`; if not, an ORIGINAL
  packet is decided again like a new one (counter `revalidate`; accepted, its entry takes the
  current mark), a REPLY packet is counted `stale` and dropped; a reply of a connection whose
  reply direction the policy refuses: `rev_drop`, drop).
  New connections: from the gateway VNI to chain `gw` (EIP -> ENI), else the sender ENI by
  (VNI, source address) through maps `src4`/`src6`, else NO_ENI.
- Per sender ENI and family `s4_E`/`s6_E`: the longest-prefix route of its subnet's table as
  one interval verdict map (prefixes flattened to disjoint ranges); local and peering routes
  look the destination ENI up and go to the pair chain of (sender, receiver), where every
  address test is decided when the ruleset is built and only protocol/port tests remain;
  NAT-gateway and internet routes go to an external chain (address tests on the destination).
  Each check is one chain of rules in the kernel's order: SG egress, ACL egress, ACL ingress
  (across a subnet boundary only), SG ingress; then the reply direction's checks (peered
  route back, stateless ACLs on the reply's port); a refusal jumps to the reason's counter and
  drops, so no conntrack entry is confirmed.
- Accepted: the connection's ct mark := its ENI scope's current mark (maps `m4`/`m6` by
  (VNI, address), `meip` by EIP), bit 31 set when the reply direction is refused.
- With `nat=True`: DNAT of gateway-inbound EIP traffic to the ENI, SNAT to the EIP (internet
  route) or to a NAT gateway address (static per ENI, ports by the kernel).

A real packet has one address family, so the policy's mixed-family NO_ROUTE cannot occur here.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from starfabric.errors import InvariantError
from starfabric.fornax.packets import halves_to_ip
from starfabric.fornax.vpc.codes import DIR_EGRESS, DIR_INGRESS, Reason, RouteTarget
from starfabric.fornax.vpc.compile import CompiledPolicy

TABLE = "fornax"
FAMILY = "inet"
REV_BIT = 0x8000_0000
MARK_MASK = 0x7FFF_FFFF
#: Largest ENI scope id a ct mark holds (15 bits; the rest is the version stamp).
MAX_ENI_SCOPE = 0x7FFD
#: Packet marks that tell the nat hooks which SNAT applies (set by accepted external chains).
NAT_EIP = 0x4000_0000
NAT_POOL = 0x4001_0000
#: Packet mark of a frame whose VNI no VPC (nor the gateway) has.
UNKNOWN_VNI = 0xFFFF_FFFF

Expr = dict[str, Any]


def session_mark(eni_scope: int, eni_version: int, vpc_version: int, rev_refused: bool = False
                 ) -> int:  # fmt: skip
    """The ct mark of a session of ENI scope `eni_scope` under these versions: scope + 1 in
    bits 16-30 (so no valid mark is 0, the mark of an entry nobody marked), stamp = (eni_version + vpc_version) mod 2^16 in bits 0-15 (any bump changes it),
    bit 31 = the reply direction is refused."""
    if not 0 <= eni_scope <= MAX_ENI_SCOPE:
        raise InvariantError(f"ENI scope {eni_scope} does not fit a ct mark (max {MAX_ENI_SCOPE})")
    m = ((eni_scope + 1) << 16) | ((eni_version + vpc_version) & 0xFFFF)
    return m | (REV_BIT if rev_refused else 0)


@dataclass
class ScopeVersions:
    """Current version of every ENI and VPC scope, as the kernel's `fresh` set knows them."""

    eni: np.ndarray
    vpc: np.ndarray

    @classmethod
    def zeros(cls, compiled: CompiledPolicy) -> ScopeVersions:
        return cls(np.zeros(len(compiled.eni_names), np.int64),
                   np.zeros(len(compiled.vpc_names), np.int64))  # fmt: skip

    def resized(self, compiled: CompiledPolicy) -> ScopeVersions:
        """These versions for a recompiled policy (new scopes start at 0)."""
        eni = np.zeros(max(len(compiled.eni_names), len(self.eni)), np.int64)
        vpc = np.zeros(max(len(compiled.vpc_names), len(self.vpc)), np.int64)
        eni[: len(self.eni)] = self.eni
        vpc[: len(self.vpc)] = self.vpc
        return ScopeVersions(eni, vpc)

    def mark(self, compiled: CompiledPolicy, e: int) -> int:
        return session_mark(e, int(self.eni[e]), int(self.vpc[compiled.eni_vpc[e]]))


# -- small JSON helpers ---------------------------------------------------------------------
def _m(left: Expr, right: Any, op: str = "==") -> Expr:
    return {"match": {"op": op, "left": left, "right": right}}


def _pl(proto: str, fld: str) -> Expr:
    return {"payload": {"protocol": proto, "field": fld}}


def _goto(chain: str) -> Expr:
    return {"goto": {"target": chain}}


_META_MARK = {"meta": {"key": "mark"}}
_L4 = {"meta": {"key": "l4proto"}}


def _rng(lo: int, hi: int) -> Any:
    return lo if lo == hi else {"range": [lo, hi]}


def _addr(hi: int, lo: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return halves_to_ip(hi, lo)


def _net(hi: int, lo: int, length: int, fam: int) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    a = _addr(hi, lo)
    plen = length - 96 if fam == 4 else length
    return ipaddress.ip_network(f"{a}/{plen}", strict=False)


def _in_net(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, net_fam: int,
            net: ipaddress.IPv4Network | ipaddress.IPv6Network | None) -> bool:  # fmt: skip
    if net_fam == 0 or net is None:
        return True
    if net_fam != addr.version:
        return False
    return addr in net


def _reply_types(proto: int, lo_t: int, hi_t: int) -> list[int]:
    """ICMP types x whose reply's type (vpc _kernels.reply_dport) lies in [lo_t, hi_t]."""
    req, rep = (8, 0) if proto == 1 else (128, 129)
    out = []
    for x in range(256):
        t = rep if x == req else x
        if lo_t <= t <= hi_t:
            out.append(x)
    return out


def _set_of(values: list[int]) -> Any:
    """Integers as an nft anonymous set of ranges."""
    parts: list[Any] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(_rng(values[i], values[j]))
        i = j + 1
    return parts[0] if len(parts) == 1 else {"set": parts}


def port_match(proto: int, lo: int, hi: int, *, reply: bool = False) -> list[Expr] | None:
    """Expressions matching a rule's (protocol, range of the `dport` field) — or, with
    `reply`, a packet whose REPLY's dport field is in range. [] = any packet, None = none."""
    full = (lo, hi) == (0, 65535)
    if proto == 0:
        if full:
            return []
        raise InvariantError(f"a protocol-any rule with ports {lo}-{hi} (the spec forbids it)")
    out = [_m(_L4, proto)]
    if full:
        return out
    if proto in (6, 17):
        return [*out, _m(_pl("th", "sport" if reply else "dport"), _rng(lo, hi))]
    if proto in (1, 58) and lo & 0xFF == 0 and hi & 0xFF == 0xFF:
        name = "icmp" if proto == 1 else "icmpv6"
        types = _reply_types(proto, lo >> 8, hi >> 8) if reply else list(
            range(lo >> 8, (hi >> 8) + 1))  # fmt: skip
        if not types:
            return None
        return [*out, _m(_pl(name, "type"), _set_of(types))]
    raise InvariantError(f"protocol {proto} with port range {lo}-{hi} has no nft form")


def _addr_match(which: str, fam: int, net_fam: int, net: Any) -> list[Expr] | None:
    """A rule's remote-address test on the packet's `which` address (dynamic)."""
    if net_fam == 0:
        return []
    if net_fam != fam:
        return None
    if net.prefixlen == 0:
        return []
    proto = "ip" if fam == 4 else "ip6"
    return [_m(_pl(proto, which), {"prefix": {"addr": str(net.network_address),
                                               "len": net.prefixlen}})]  # fmt: skip


@dataclass
class _Builder:
    c: CompiledPolicy
    versions: ScopeVersions
    nat: bool
    flowtable: list[str] | None
    chains: dict[str, list[list[Expr]]] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)
    by_body: dict[str, str] = field(default_factory=dict)

    # -- chains --------------------------------------------------------------------------
    def chain(self, name: str, rules: list[list[Expr]]) -> str:
        """Add chain `name`, or return the chain that already has exactly these rules:
        chains are built leaves first, so pairs of ENIs whose checks come out the same share
        every chain (the ruleset grows with distinct rule sets, not with ENI pairs)."""
        if (known := self.alias.get(name)) is not None:
            return known
        key = json.dumps(rules, sort_keys=True)
        canon = self.by_body.setdefault(key, name)
        if canon == name:
            self.chains[name] = rules
        self.alias[name] = canon
        return canon

    def fail(self, reason: Reason) -> str:
        return self.chain(
            f"f_{reason.name}", [[{"counter": f"drop_{reason.name}"}, {"drop": None}]]
        )

    # -- static views of the compiled arrays ---------------------------------------------
    def eni_addr(self, e: int, fam: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        c = self.c
        if fam == 4:
            return _addr(0, int(c.eni_v4_lo[e])) if c.eni_has_v4[e] else None
        return _addr(int(c.eni_v6_hi[e]), int(c.eni_v6_lo[e])) if c.eni_has_v6[e] else None

    def sg_rules(self, e: int, direction: int) -> list[tuple[int, int, int, int, Any, int, int]]:
        """(proto, lo, hi, net_fam, net, ref, rule) of e's groups in kernel order."""
        c, out = self.c, []
        for j in range(int(c.eni_sg_ptr[e]), int(c.eni_sg_ptr[e + 1])):
            g = int(c.eni_sg_idx[j])
            for r in range(int(c.sg_ptr[g]), int(c.sg_ptr[g + 1])):
                if int(c.sgr_dir[r]) != direction:
                    continue
                fam = int(c.sgr_net_fam[r])
                net = _net(int(c.sgr_net_hi[r]), int(c.sgr_net_lo[r]), int(c.sgr_net_len[r]),
                           fam) if fam else None  # fmt: skip
                out.append((int(c.sgr_proto[r]), int(c.sgr_lo[r]), int(c.sgr_hi[r]), fam, net,
                            int(c.sgr_ref[r]), r))  # fmt: skip
        return out

    def member(self, e: int, g: int) -> bool:
        c = self.c
        if e < 0:
            return False
        return g in c.eni_sg_idx[int(c.eni_sg_ptr[e]) : int(c.eni_sg_ptr[e + 1])].tolist()

    def acl_rules(self, acl: int, direction: int) -> list[tuple[bool, int, int, int, int, Any]]:
        c = self.c
        if acl < 0:
            return []
        k = acl * 2 + direction
        out = []
        for r in range(int(c.acl_ptr[k]), int(c.acl_ptr[k + 1])):
            fam = int(c.acl_net_fam[r])
            net = _net(int(c.acl_net_hi[r]), int(c.acl_net_lo[r]), int(c.acl_net_len[r]),
                       fam) if fam else None  # fmt: skip
            out.append((bool(c.acl_allow[r]), int(c.acl_proto[r]), int(c.acl_lo[r]),
                        int(c.acl_hi[r]), fam, net))  # fmt: skip
        return out

    def routes(self, table: int, fam: int) -> list[tuple[Any, int, int]]:
        """(network, target, via) of a route table for one family."""
        c = self.c
        t = table * 2 + (0 if fam == 4 else 1)
        out = []
        for s in range(int(c.rt_tab_ptr[t]), int(c.rt_tab_ptr[t + 1])):
            length = int(c.seg_len[s])
            for r in range(int(c.seg_start[s]), int(c.seg_end[s])):
                out.append((_net(int(c.rt_hi[r]), int(c.rt_lo[r]), length, fam),
                            int(c.rt_target[r]), int(c.rt_via[r])))  # fmt: skip
        return out

    def lpm(self, table: int, addr: Any) -> tuple[int, int] | None:
        best = None
        for net, target, via in self.routes(table, addr.version):
            if addr in net and (best is None or net.prefixlen > best[0].prefixlen):
                best = (net, target, via)
        return None if best is None else (best[1], best[2])

    def enis_of_vni(self, vni: int, fam: int) -> list[tuple[int, Any]]:
        c = self.c
        out = []
        for k in range(len(c.key_vni)):
            if int(c.key_vni[k]) != vni:
                continue
            e = int(c.key_eni[k])
            a = _addr(int(c.key_hi[k]), int(c.key_lo[k]))
            if a.version == fam:
                out.append((e, a))
        return out

    # -- stages ----------------------------------------------------------------------------
    def stage(self, name: str, rules: list[tuple[list[Expr] | None, str]], default: str) -> str:
        """Ordered first-match: each (match, next chain); no match -> `default`."""
        body: list[list[Expr]] = []
        for match, nxt in rules:
            if match is None:
                continue
            body.append([*match, _goto(nxt)])
            if not match:
                return self.chain(name, body)
        body.append([_goto(default)])
        return self.chain(name, body)

    def sg_stage(self, name: str, e: int, direction: int, fam: int, remote_addr: Any,
                 remote_eni: int, dyn: str | None, nxt: str, reason: Reason) -> str:  # fmt: skip
        """Security-group check: static remote (`remote_addr`) or dynamic on packet field dyn."""
        rules: list[tuple[list[Expr] | None, str]] = []
        for proto, lo, hi, nfam, net, ref, _r in self.sg_rules(e, direction):
            pm = port_match(proto, lo, hi)
            if pm is None:
                continue
            if ref >= 0:
                if not self.member(remote_eni, ref):
                    continue
                am: list[Expr] | None = []
            elif dyn is None:
                am = [] if _in_net(remote_addr, nfam, net) else None
            else:
                am = _addr_match(dyn, fam, nfam, net)
            if am is None:
                continue
            rules.append(([*pm, *am], nxt))
        return self.stage(name, rules, self.fail(reason))

    def acl_stage(self, name: str, acl: int, direction: int, fam: int, remote_addr: Any,
                  dyn: str | None, nxt: str, deny: str, *, reply: bool = False) -> str:  # fmt: skip
        if acl < 0:
            return nxt
        rules: list[tuple[list[Expr] | None, str]] = []
        for allow, proto, lo, hi, nfam, net in self.acl_rules(acl, direction):
            pm = port_match(proto, lo, hi, reply=reply)
            if pm is None:
                continue
            if dyn is None:
                am: list[Expr] | None = [] if _in_net(remote_addr, nfam, net) else None
            else:
                am = _addr_match(dyn, fam, nfam, net)
            if am is None:
                continue
            rules.append(([*pm, *am], nxt if allow else deny))
        return self.stage(name, rules, deny)

    def accept(self, kind: str, nat: int, rev: Reason) -> str:
        """Terminal chain: set the ct mark of the connection's ENI scope, count, accept."""
        key = {
            "v4": {"concat": [_META_MARK, _pl("ip", "saddr")]},
            "v6": {"concat": [_META_MARK, _pl("ip6", "saddr")]},
            "gw": _pl("ip", "daddr"),
        }[kind]
        mp = {"v4": "@m4", "v6": "@m6", "gw": "@meip"}[kind]
        body: list[Expr] = [{"mangle": {"key": {"ct": {"key": "mark"}},
                                        "value": {"map": {"key": key, "data": mp}}}}]  # fmt: skip
        if rev != Reason.ALLOW:
            body.append({"mangle": {"key": {"ct": {"key": "mark"}},
                                    "value": {"|": [{"ct": {"key": "mark"}}, REV_BIT]}}})  # fmt: skip
            body.append({"counter": f"rev_{rev.name}"})
        if nat:
            body.append({"mangle": {"key": _META_MARK, "value": nat}})
        body += [{"counter": "allow"}, {"accept": None}]
        return self.chain(f"a_{kind}_{nat:x}_{rev.name}", [body])

    # -- per sender / pair -----------------------------------------------------------------
    def pair(self, a: int, b: int, fam: int, peering: int) -> str:
        """Chains of a connection from ENI a to ENI b (both addresses known)."""
        c = self.c
        base = f"p{fam}_{a}_{b}"
        if (hit := self.alias.get(f"{base}_so")) is not None:
            return hit
        aa, ba = self.eni_addr(a, fam), self.eni_addr(b, fam)
        sa, sb = int(c.eni_subnet[a]), int(c.eni_subnet[b])
        cross = sa != sb
        kind = "v4" if fam == 4 else "v6"
        # reply direction, built first (the forward chains end in it)
        rev_static = Reason.ALLOW
        if peering >= 0:
            back = self.lpm(int(c.subnet_table[sb]), aa)
            if back is None:
                rev_static = Reason.NO_ROUTE
            elif back[0] == RouteTarget.BLACKHOLE:
                rev_static = Reason.BLACKHOLE
            elif back[0] != RouteTarget.PEERING or back[1] != peering:
                rev_static = Reason.NO_ROUTE
        if rev_static != Reason.ALLOW or not cross:
            tail = self.accept(kind, 0, rev_static)
        else:
            ok = self.accept(kind, 0, Reason.ALLOW)
            r_in = self.acl_stage(f"{base}_ri", int(c.subnet_acl[sa]), DIR_INGRESS, fam, ba,
                                  None, ok, self.accept(kind, 0, Reason.ACL_DENY_IN), reply=True)  # fmt: skip
            tail = self.acl_stage(f"{base}_ro", int(c.subnet_acl[sb]), DIR_EGRESS, fam, aa,
                                  None, r_in, self.accept(kind, 0, Reason.ACL_DENY_OUT), reply=True)  # fmt: skip
        si = self.sg_stage(f"{base}_si", b, DIR_INGRESS, fam, aa, a, None, tail, Reason.SG_DENY_IN)
        nxt = si
        if cross:
            nxt = self.acl_stage(f"{base}_ai", int(c.subnet_acl[sb]), DIR_INGRESS, fam, aa, None,
                                 si, self.fail(Reason.ACL_DENY_IN))  # fmt: skip
            nxt = self.acl_stage(f"{base}_ao", int(c.subnet_acl[sa]), DIR_EGRESS, fam, ba, None,
                                 nxt, self.fail(Reason.ACL_DENY_OUT))  # fmt: skip
        return self.sg_stage(f"{base}_so", a, DIR_EGRESS, fam, ba, b, None, nxt,
                             Reason.SG_DENY_OUT)  # fmt: skip

    def external(self, a: int, fam: int, nat: int, tag: str) -> str:
        """Chains of a connection from ENI a to an address outside every VPC."""
        c = self.c
        base = f"x{fam}_{a}_{tag}"
        if (hit := self.alias.get(f"{base}_so")) is not None:
            return hit
        sa = int(c.subnet_acl[int(c.eni_subnet[a])])
        kind = "v4" if fam == 4 else "v6"
        ok = self.accept(kind, nat, Reason.ALLOW)
        tail = self.acl_stage(f"{base}_ri", sa, DIR_INGRESS, fam, None, "daddr", ok,
                              self.accept(kind, nat, Reason.ACL_DENY_IN), reply=True)  # fmt: skip
        nxt = self.acl_stage(f"{base}_ao", sa, DIR_EGRESS, fam, None, "daddr", tail,
                             self.fail(Reason.ACL_DENY_OUT))  # fmt: skip
        return self.sg_stage(f"{base}_so", a, DIR_EGRESS, fam, None, -1, "daddr", nxt,
                             Reason.SG_DENY_OUT)  # fmt: skip

    def dest_lookup(self, a: int, fam: int, vni: int, peering: int) -> str:
        """Destination ENI by address in VNI `vni` -> pair chain; none -> NO_DEST."""
        name = f"d{fam}_{a}_{vni}"
        if (hit := self.alias.get(name)) is not None:
            return hit
        proto = "ip" if fam == 4 else "ip6"
        elems = [[str(addr), _goto(self.pair(a, b, fam, peering))]
                 for b, addr in self.enis_of_vni(vni, fam)]  # fmt: skip
        rules: list[list[Expr]] = []
        if elems:
            rules.append([{"vmap": {"key": _pl(proto, "daddr"), "data": {"set": elems}}}])
        rules.append([_goto(self.fail(Reason.NO_DEST))])
        return self.chain(name, rules)

    def sender(self, a: int, fam: int) -> str:
        """Route lookup of sender a: flattened LPM of its subnet's table."""
        c = self.c
        name = f"s{fam}_{a}"
        table = int(c.subnet_table[int(c.eni_subnet[a])])
        vni = int(c.vpc_vni[int(c.eni_vpc[a])])
        routes = self.routes(table, fam)
        elems = []
        for lo, hi, (target, via) in flatten_lpm(routes):
            if target == RouteTarget.BLACKHOLE:
                dest = self.fail(Reason.BLACKHOLE)
            elif target == RouteTarget.LOCAL:
                dest = self.dest_lookup(a, fam, vni, -1)
            elif target == RouteTarget.PEERING:
                pa, pb = int(c.peer_a[via]), int(c.peer_b[via])
                pv = pb if pa == int(c.eni_vpc[a]) else pa
                dest = self.dest_lookup(a, fam, int(c.vpc_vni[pv]), via)
            elif target == RouteTarget.NAT_GATEWAY:
                dest = self.external(a, fam, NAT_POOL | via if self.nat else 0, f"n{via}")
            elif fam == 4 and not c.eni_has_eip[a]:
                dest = self.fail(Reason.NO_PUBLIC_IP)
            else:
                dest = self.external(a, fam, NAT_EIP if self.nat and fam == 4 else 0, "igw")
            cls = ipaddress.IPv4Address if fam == 4 else ipaddress.IPv6Address
            lo_a, hi_a = cls(lo), cls(hi)
            key = str(lo_a) if lo == hi else {"range": [str(lo_a), str(hi_a)]}
            elems.append([key, _goto(dest)])
        proto = "ip" if fam == 4 else "ip6"
        rules: list[list[Expr]] = []
        if elems:
            rules.append([{"vmap": {"key": _pl(proto, "daddr"), "data": {"set": elems}}}])
        rules.append([_goto(self.fail(Reason.NO_ROUTE))])
        return self.chain(name, rules)

    def gateway_receiver(self, e: int) -> str:
        """Gateway inbound to e's EIP: ACL ingress, SG ingress (dynamic on the source), then
        the reply's ACL egress."""
        c = self.c
        base = f"g_{e}"
        acl = int(c.subnet_acl[int(c.eni_subnet[e])])
        ok = self.accept("gw", 0, Reason.ALLOW)
        tail = self.acl_stage(f"{base}_ro", acl, DIR_EGRESS, 4, None, "saddr", ok,
                              self.accept("gw", 0, Reason.ACL_DENY_OUT), reply=True)  # fmt: skip
        si = self.sg_stage(f"{base}_si", e, DIR_INGRESS, 4, None, -1, "saddr", tail,
                           Reason.SG_DENY_IN)  # fmt: skip
        return self.acl_stage(f"{base}_ai", acl, DIR_INGRESS, 4, None, "saddr", si,
                              self.fail(Reason.ACL_DENY_IN))  # fmt: skip


def flatten_lpm(routes: list[tuple[Any, int, int]]) -> list[tuple[int, int, tuple[int, int]]]:
    """Prefixes (longest wins) as disjoint integer ranges [lo, hi] -> (target, via), merged
    where neighbours agree (an nft interval map cannot hold overlapping prefixes)."""
    if not routes:
        return []
    cuts = sorted({int(n.network_address) for n, _, _ in routes}
                  | {int(n.broadcast_address) + 1 for n, _, _ in routes})  # fmt: skip
    out: list[tuple[int, int, tuple[int, int]]] = []
    for lo, nxt in itertools.pairwise(cuts):
        best = None
        for n, target, via in routes:
            if int(n.network_address) <= lo <= int(n.broadcast_address) and (
                best is None or n.prefixlen > best[0].prefixlen
            ):
                best = (n, target, via)
        if best is None:
            continue
        val = (best[1], best[2])
        if out and out[-1][1] == lo - 1 and out[-1][2] == val:
            out[-1] = (out[-1][0], nxt - 1, val)
        else:
            out.append((lo, nxt - 1, val))
    return out


COUNTERS = (["allow", "stale", "revalidate", "rev_drop", "invalid"]
            + [f"drop_{r.name}" for r in Reason if r != Reason.ALLOW]
            + [f"rev_{r.name}" for r in Reason if r != Reason.ALLOW])  # fmt: skip


def build_ruleset(compiled: CompiledPolicy, versions: ScopeVersions | None = None, *,
                  nat: bool = False, flowtable: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The whole ruleset as one libnftables JSON transaction (flush + re-create the table).

    `flowtable`: devices of a software flowtable for established TCP/UDP (only where the
    kernel has CONFIG_NF_FLOW_TABLE); `nat`: apply EIP/NAT-gateway translations."""
    c = compiled
    versions = versions or ScopeVersions.zeros(c)
    if len(c.eni_names) > MAX_ENI_SCOPE:
        raise InvariantError(f"{len(c.eni_names)} ENIs: ct marks hold at most {MAX_ENI_SCOPE}")
    b = _Builder(c, versions, nat, flowtable)
    src4: list[Any] = []
    src6: list[Any] = []
    m4: list[Any] = []
    m6: list[Any] = []
    meip: list[Any] = []
    fresh: list[int] = []
    gw_elems: list[Any] = []
    for e in np.flatnonzero(c.eni_valid).tolist():
        vni = int(c.vpc_vni[int(c.eni_vpc[e])])
        mark = versions.mark(c, e)
        fresh.append(mark)
        for fam, src, mp in ((4, src4, m4), (6, src6, m6)):
            addr = b.eni_addr(e, fam)
            if addr is not None:
                src.append([{"concat": [vni, str(addr)]}, _goto(b.sender(e, fam))])
                mp.append([{"concat": [vni, str(addr)]}, mark])
        if c.eni_has_eip[e]:
            eip = str(_addr(0, int(c.eni_eip_lo[e])))
            meip.append([eip, mark])
            gw_elems.append([eip, _goto(b.gateway_receiver(e))])
    b.chain("gw", ([[{"vmap": {"key": _pl("ip", "daddr"), "data": {"set": gw_elems}}}]]
                   if gw_elems else []) + [[_goto(b.fail(Reason.NO_DEST))]])  # fmt: skip
    new_rules: list[list[Expr]] = [
        [_m(_META_MARK, int(c.gateway_vni)), _goto("gw")],
        [{"vmap": {"key": {"concat": [_META_MARK, _pl("ip", "saddr")]}, "data": "@src4"}}],
        [{"vmap": {"key": {"concat": [_META_MARK, _pl("ip6", "saddr")]}, "data": "@src6"}}],
        [_goto(b.fail(Reason.NO_ENI))],
    ]
    b.chain("new", new_rules)
    stale = _m({"&": [{"ct": {"key": "mark"}}, MARK_MASK]}, "@fresh", "!=")
    b.chain("est", [
        # decided under an older version: an ORIGINAL packet is decided again by the current
        # policy (accepted: the entry takes the current mark; refused: dropped, counted by
        # reason); a REPLY packet cannot be, and is dropped until the other side's is
        [stale, _m({"ct": {"key": "direction"}}, "original"), {"counter": "revalidate"},
         _goto("new")],
        [stale, {"counter": "stale"}, {"drop": None}],
        [_m({"ct": {"key": "direction"}}, "reply"), _m({"&": [{"ct": {"key": "mark"}}, REV_BIT]},
         REV_BIT), {"counter": "rev_drop"}, {"drop": None}],
        [{"accept": None}],
    ])  # fmt: skip
    # the VNI is bytes 7-9 of the frame (source MAC bytes 1-3); a raw payload is compared
    # in network byte order, so each known VNI is matched and written as a number (a VNI no
    # VPC has keeps mark 0xffffffff: no ENI, never the gateway)
    vni_ll = {"payload": {"base": "ll", "offset": 56, "len": 24}}
    raw_rules: list[list[Expr]] = [[{"mangle": {"key": _META_MARK, "value": UNKNOWN_VNI}}]]
    zones = {int(c.gateway_vni): 0} | {
        int(c.vpc_vni[v]): v for v in np.flatnonzero(c.vpc_valid).tolist() if v > 0
    }
    for vni, zone in sorted(zones.items()):
        raw_rules.append([_m(vni_ll, vni), {"mangle": {"key": _META_MARK, "value": vni}},
                          {"mangle": {"key": {"ct": {"key": "zone"}}, "value": zone}}])  # fmt: skip
    filt: list[list[Expr]] = [
        [_m({"ct": {"key": "state"}}, ["established", "related"], "in"), _goto("est")],
        [_m({"ct": {"key": "state"}}, "new", "in"), _goto("new")],
        # invalid (out of window, no connection to belong to) or untracked: never forwarded
        # without a policy decision (what `ct state invalid drop` in a Linux SG does)
        [{"counter": "invalid"}, {"drop": None}],
    ]
    T = {"family": FAMILY, "table": TABLE}
    cmds: list[dict[str, Any]] = [
        {"add": {"table": {"family": FAMILY, "name": TABLE}}},
        {"delete": {"table": {"family": FAMILY, "name": TABLE}}},
        {"add": {"table": {"family": FAMILY, "name": TABLE}}},
    ]
    elements: list[dict[str, Any]] = []
    for name in COUNTERS:
        cmds.append({"add": {"counter": {**T, "name": name}}})
    for name, typ, data, elems in (
        ("src4", ["mark", "ipv4_addr"], "verdict", src4),
        ("src6", ["mark", "ipv6_addr"], "verdict", src6),
        ("m4", ["mark", "ipv4_addr"], "mark", m4),
        ("m6", ["mark", "ipv6_addr"], "mark", m6),
        ("meip", "ipv4_addr", "mark", meip),
    ):
        cmds.append({"add": {"map": {**T, "name": name, "type": typ, "map": data}}})
        if elems:  # after the chains they jump to
            elements.append({"add": {"element": {**T, "name": name, "elem": elems}}})
    cmds.append({"add": {"set": {**T, "name": "fresh", "type": "mark"}}})
    if fresh:
        elements.append({"add": {"element": {**T, "name": "fresh", "elem": fresh}}})
    base: dict[str, tuple[str, str, int, list[list[Expr]]]] = {
        "raw": ("filter", "prerouting", -300, raw_rules),
        "filter": ("filter", "prerouting", -150, filt),
    }
    if flowtable:
        cmds.append({"add": {"flowtable": {**T, "name": "fast", "hook": "ingress", "prio": 0,
                                           "dev": flowtable}}})  # fmt: skip
        base["forward"] = ("filter", "forward", 0, [[
            _m({"ct": {"key": "state"}}, "established", "in"),
            _m(_L4, {"set": ["tcp", "udp"]}),
            {"flow": {"op": "add", "flowtable": "@fast"}}]])  # fmt: skip
    if nat:
        base.update(_nat_chains(b))
    for name, (typ, hook, prio, _r) in base.items():
        cmds.append({"add": {"chain": {**T, "name": name, "type": typ, "hook": hook,
                                       "prio": prio, "policy": "accept"}}})  # fmt: skip
    for name in b.chains:
        cmds.append({"add": {"chain": {**T, "name": name}}})
    cmds += elements
    for name, rules in [*((n, r[3]) for n, r in base.items()), *b.chains.items()]:
        for expr in rules:
            cmds.append({"add": {"rule": {**T, "chain": name, "expr": expr}}})
    return {"nftables": [{"metainfo": {"json_schema_version": 1}}, *cmds]}


def _nat_chains(b: _Builder) -> dict[str, tuple[str, str, int, list[list[Expr]]]]:
    """DNAT gateway-inbound EIP traffic; SNAT internet-bound traffic to the EIP, NAT-gateway
    traffic to one of the gateway's addresses (by ENI id, fixed; ports chosen by the kernel)."""
    c = b.c
    dnat: list[Any] = []
    snat_eip: dict[int, list[Any]] = {}
    pool: dict[tuple[int, int], list[Any]] = {}
    for e in np.flatnonzero(c.eni_valid).tolist():
        zone = int(c.eni_vpc[e])
        if not c.eni_has_v4[e]:
            continue
        priv = str(_addr(0, int(c.eni_v4_lo[e])))
        if c.eni_has_eip[e]:
            eip = str(_addr(0, int(c.eni_eip_lo[e])))
            dnat.append([eip, priv])
            snat_eip.setdefault(zone, []).append([priv, eip])
        for p, ips in enumerate(c.pool_ips):
            if ips:
                pool.setdefault((p, zone), []).append([priv, ips[e % len(ips)]])
    pre: list[list[Expr]] = []
    if dnat:
        pre.append([_m(_META_MARK, int(c.gateway_vni)), {"dnat": {"family": "ip", "addr": {
            "map": {"key": _pl("ip", "daddr"), "data": {"set": dnat}}}}}])  # fmt: skip
    # one rule per (kind, zone): the zone tells apart VPCs that reuse private addresses
    post: list[list[Expr]] = []
    ct_zone: Expr = {"ct": {"key": "zone"}}
    for z, elems in sorted(snat_eip.items()):
        post.append([_m(_META_MARK, NAT_EIP), _m(ct_zone, z), {"snat": {"family": "ip", "addr": {
            "map": {"key": _pl("ip", "saddr"), "data": {"set": elems}}}}}])  # fmt: skip
    for (p, z), elems in sorted(pool.items()):
        post.append([_m(_META_MARK, NAT_POOL | p), _m(ct_zone, z), {"snat": {"family": "ip",
            "addr": {"map": {"key": _pl("ip", "saddr"), "data": {"set": elems}}}}}])  # fmt: skip
    return {
        "natpre": ("nat", "prerouting", -100, pre),
        "natpost": ("nat", "postrouting", 100, post),
    }
