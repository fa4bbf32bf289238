"""The nftables ruleset generated from a compiled VPC policy decides real packets exactly as
the policy's own batch evaluation does (vpc.evaluate): per packet forwarded or not, per reason
the refusal counters, and for the reply direction of every accepted connection. Plus the
version hook: a bump makes exactly the bumped scope's sessions stale.

The packets go through a Lab (root, nftables, conntrack); without them the kernel tests skip
with the reason. The ruleset's shape (LPM flattening, port matches) is checked without one."""

from __future__ import annotations

import ipaddress
import itertools
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from starfabric.fornax.datapaths.linux.netns import Lab, linux_support
from starfabric.fornax.datapaths.linux.rules import (
    COUNTERS,
    ScopeVersions,
    build_ruleset,
    flatten_lpm,
    port_match,
    session_mark,
)
from starfabric.fornax.datapaths.linux.sender import Sender, SeqState, build_frames
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP, PacketBatch
from starfabric.fornax.packets import ip_to_halves as halves
from starfabric.fornax.vpc import Reason, compile_policy, evaluate, load_vpc_spec

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
WHY = linux_support()
needs_kernel = pytest.mark.skipif(WHY is not None, reason=f"Linux datapath: {WHY}")


def sample_first_packets(compiled, n: int, seed: int) -> PacketBatch:  # type: ignore[no-untyped-def]
    """First packets that exercise every check: senders are ENIs (or not), destinations
    ENIs of every VPC, EIPs, the internet, blackholed and peered ranges; ports at the rules'
    edges; one address family per packet (a real packet has one)."""
    rng = np.random.default_rng(seed)
    c = compiled
    enis = np.flatnonzero(c.eni_valid)
    addrs: dict[int, list[tuple[int, int, int]]] = {4: [], 6: []}  # (vni, hi, lo)
    for k in range(len(c.key_vni)):
        a = ipaddress.ip_address((int(c.key_hi[k]) << 64) | int(c.key_lo[k]))
        fam = 4 if a.ipv4_mapped else 6
        addrs[fam].append((int(c.key_vni[k]), int(c.key_hi[k]), int(c.key_lo[k])))
    eips = [int(c.eni_eip_lo[e]) for e in enis if c.eni_has_eip[e]]
    ports = sorted({int(x) for x in np.r_[c.acl_lo, c.acl_hi, c.sgr_lo, c.sgr_hi] if x < 65536}
                   | {22, 53, 80, 123, 443, 5432, 8080, 1024, 40000})  # fmt: skip
    ext4 = [halves(f"198.18.{i}.{j}") for i in range(3) for j in (1, 77)] + [
        halves("192.0.2.9"),
        halves("203.0.113.7"),
        halves("10.10.0.200"),
        halves("10.0.9.9"),
    ]
    ext6 = [halves("2001:db8::5"), halves("2001:db8:1::9")]
    vnis = sorted({int(v) for v in c.vpc_vni[c.vpc_valid]} - {int(c.gateway_vni)})
    cols: dict[str, list[int]] = {k: [] for k in ("vni", "src_hi", "src_lo", "dst_hi", "dst_lo",
                                                  "proto", "sport", "dport", "tcp_flags")}  # fmt: skip

    def sport(i: int) -> int:
        """Unique per packet (every packet opens its own connection); one in four below
        1024, where stateless ACLs refuse many replies (ephemeral-port rules)."""
        return (i // 4) % 1024 if i % 4 == 0 and n <= 4096 else 1024 + i

    for i in range(n):
        fam = 4 if rng.random() < 0.8 or not addrs[6] else 6
        kind = rng.random()
        if kind < 0.1 and fam == 4:  # from the internet
            vni = int(c.gateway_vni)
            s = ext4[rng.integers(len(ext4))]
            d = (0, eips[rng.integers(len(eips))]) if eips and rng.random() < 0.8 else ext4[
                rng.integers(len(ext4))]  # fmt: skip
        else:
            vni, sh, sl = addrs[fam][rng.integers(len(addrs[fam]))]
            s = (sh, sl)
            if kind < 0.15:  # a sender that is no ENI, or an unknown VNI
                vni = vnis[rng.integers(len(vnis))] if rng.random() < 0.5 else 999_999
                s = ext4[0] if fam == 4 else ext6[0]
            r = rng.random()
            if r < 0.6:  # an ENI, mostly of the sender's own VPC
                same = [a for a in addrs[fam] if a[0] == vni]
                pool = same if same and rng.random() < 0.7 else addrs[fam]
                _, dh, dl = pool[rng.integers(len(pool))]
                d = (dh, dl)
            else:
                d = (ext4 if fam == 4 else ext6)[rng.integers(len(ext4 if fam == 4 else ext6))]
        proto = [PROTO_TCP, PROTO_UDP, PROTO_ICMP][min(2, int(rng.integers(0, 7)) // 3)]
        if proto == PROTO_ICMP and fam == 6:
            proto = PROTO_ICMPV6
        if proto in (PROTO_TCP, PROTO_UDP):
            dport = ports[rng.integers(len(ports))]
        else:  # conntrack starts ICMP connections with an echo request only
            dport = (8 if proto == PROTO_ICMP else 128) << 8
        for k, v in (("vni", vni), ("src_hi", s[0]), ("src_lo", s[1]), ("dst_hi", d[0]),
                     ("dst_lo", d[1]), ("proto", proto), ("sport", sport(i)),
                     ("dport", dport), ("tcp_flags", 0x02 if proto == PROTO_TCP else 0)):  # fmt: skip
            cols[k].append(v)
    return PacketBatch.from_columns(time_ns=np.arange(n), **cols)


def edge_packets(compiled) -> PacketBatch:  # type: ignore[no-untyped-def]
    """Every ENI to every ENI address (any VPC) and to internet hosts, on the examples' TCP/UDP
    ports, from a source port below 1024 and an ephemeral one: the combinations where the
    stateless ACLs refuse only the reply are few, random sampling misses them."""
    c = compiled
    keys = [(int(c.key_vni[k]), int(c.key_hi[k]), int(c.key_lo[k])) for k in range(len(c.key_vni))]
    ext = {4: [halves("198.18.0.1"), halves("10.10.0.53")], 6: [halves("2001:db8::5")]}
    rows = []
    for vni, sh, sl in keys:
        fam = 6 if sh else 4
        # each address once (VPCs reuse addresses): one packet per connection
        dsts = sorted({(h, lo) for _, h, lo in keys if (6 if h else 4) == fam} | set(ext[fam]))
        for (dh, dl), (proto, dport), sport in itertools.product(
            dsts,
            ((6, 5432), (6, 443), (6, 8080), (6, 22), (6, 80), (17, 53), (17, 123)),
            (1000, 60000),
        ):
            rows.append((vni, sh, sl, dh, dl, proto, sport, dport))
    a = np.array(rows, dtype=np.uint64)
    return PacketBatch.from_columns(
        time_ns=np.arange(len(a)), vni=a[:, 0], src_hi=a[:, 1], src_lo=a[:, 2], dst_hi=a[:, 3],
        dst_lo=a[:, 4], proto=a[:, 5], sport=a[:, 6], dport=a[:, 7],
        tcp_flags=np.where(a[:, 5] == PROTO_TCP, 0x02, 0),
    )  # fmt: skip


def replies_of(batch: PacketBatch) -> PacketBatch:
    """The first reply of each packet's connection (session-key space: same VNI)."""
    icmp = (batch.proto == PROTO_ICMP) | (batch.proto == PROTO_ICMPV6)
    rep_type = np.where(batch.proto == PROTO_ICMPV6, 129, 0).astype(np.uint16) << 8
    return PacketBatch.from_columns(
        time_ns=batch.time_ns, vni=batch.vni, src_hi=batch.dst_hi, src_lo=batch.dst_lo,
        dst_hi=batch.src_hi, dst_lo=batch.src_lo, proto=batch.proto,
        sport=np.where(icmp, batch.sport, batch.dport), dport=np.where(icmp, rep_type, batch.sport),
        tcp_flags=np.where(batch.proto == PROTO_TCP, 0x12, 0),
    )  # fmt: skip


# -- without a kernel -------------------------------------------------------------------------
def test_flatten_lpm_is_longest_prefix_match() -> None:
    nets = [(ipaddress.ip_network(p), t, i) for i, (p, t) in enumerate(
        [("0.0.0.0/0", 3), ("10.0.0.0/16", 0), ("10.0.5.0/24", 4), ("10.0.5.128/25", 1)])]  # fmt: skip
    flat = flatten_lpm(nets)
    rng = np.random.default_rng(1)
    probes = [int(ipaddress.ip_address("10.0.5.200")), int(ipaddress.ip_address("10.0.5.1")),
              int(ipaddress.ip_address("10.0.6.1")), int(ipaddress.ip_address("9.9.9.9")),
              *rng.integers(0, 1 << 32, 200).tolist()]  # fmt: skip
    for x in probes:
        want = max((n for n in nets if ipaddress.IPv4Address(x) in n[0]),
                   key=lambda n: n[0].prefixlen)  # fmt: skip
        got = [v for lo, hi, v in flat if lo <= x <= hi]
        assert got == [(want[1], want[2])]
    # disjoint and sorted
    assert all(a[1] < b[0] for a, b in itertools.pairwise(flat))


def test_port_match_forms() -> None:
    assert port_match(0, 0, 65535) == []
    tcp = port_match(6, 443, 443)
    assert tcp is not None and tcp[1]["match"]["right"] == 443
    assert port_match(17, 1024, 65535, reply=True)[1]["match"]["left"]["payload"]["field"] == (  # type: ignore[index]
        "sport"
    )
    # an echo-request rule (type 8) admits no reply; an echo-reply rule (type 0) admits the
    # reply of a request (type 8) and of a reply (type 0)
    assert port_match(1, 8 << 8, (8 << 8) | 0xFF, reply=True) is None
    m = port_match(1, 0, 0xFF, reply=True)
    assert m is not None and m[1]["match"]["right"] == {"set": [0, 8]}


def test_session_mark_layout() -> None:
    assert session_mark(0, 0, 0) == 1 << 16  # never 0: an unmarked entry is never fresh
    assert session_mark(5, 3, 4) == (6 << 16) | 7
    assert session_mark(5, 0xFFFF, 1) == 6 << 16  # stamp wraps at 2^16
    assert session_mark(1, 0, 0, True) >> 31 == 1


def test_ruleset_names_every_counter() -> None:
    c = compile_policy(load_vpc_spec(EXAMPLES / "vpc.yaml"))
    rs = build_ruleset(c, nat=True)["nftables"]
    counters = {x["add"]["counter"]["name"] for x in rs if "counter" in x.get("add", {})}
    assert counters == set(COUNTERS)
    chains = {x["add"]["chain"]["name"] for x in rs if "chain" in x.get("add", {})}
    targets = set()

    def walk(o: object) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("goto", "jump"):
                    targets.add(v["target"])
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(rs)
    assert targets <= chains, f"jumps to missing chains: {sorted(targets - chains)[:5]}"


def test_flowtable_only_when_asked() -> None:
    """The fast path as a software flowtable: emitted (with `flow add` for established TCP/UDP
    in forward) only when the kernel has one (NicTables.flowtable_supported decides)."""
    c = compile_policy(load_vpc_spec(EXAMPLES / "vpc-small.yaml"))
    plain = build_ruleset(c)["nftables"]
    fast = build_ruleset(c, flowtable=["n0", "n1"])["nftables"]
    assert not any("flowtable" in x.get("add", {}) for x in plain)
    ft = [x["add"]["flowtable"] for x in fast if "flowtable" in x.get("add", {})]
    assert len(ft) == 1 and ft[0]["dev"] == ["n0", "n1"] and ft[0]["hook"] == "ingress"
    fwd = [x["add"]["rule"]["expr"] for x in fast
           if x.get("add", {}).get("rule", {}).get("chain") == "forward"]  # fmt: skip
    assert fwd and {"flow": {"op": "add", "flowtable": "@fast"}} in fwd[0]


def _flat_spec(n: int):  # type: ignore[no-untyped-def]
    from starfabric.fornax.vpc import parse_vpc_spec

    rules = [{"direction": "ingress", "protocol": "tcp", "ports": 443, "cidr": "0.0.0.0/0"},
             {"direction": "egress", "protocol": "all", "cidr": "0.0.0.0/0"}]  # fmt: skip
    return parse_vpc_spec({"hosts": [{"name": "h"}], "tenants": [{"name": "t", "vpcs": [{
        "name": "v", "vni": 7, "cidrs": ["10.0.0.0/16"],
        "subnets": [{"name": "s", "cidr": "10.0.0.0/16"}],
        "security_groups": [{"name": "g", "rules": rules}],
        "enis": [{"name": f"e{i}", "subnet": "s", "host": "h", "ipv4": f"10.0.{i // 250}.{1 + i % 250}",
                  "security_groups": ["g"]} for i in range(n)]}]}]})  # fmt: skip


def test_ruleset_grows_with_distinct_checks_not_eni_pairs() -> None:
    """ENIs whose checks come out the same share their chains: 16 or 256 alike ENIs give the
    same chains (only the address maps grow)."""

    def chains(n: int) -> int:
        rs = build_ruleset(compile_policy(_flat_spec(n)))["nftables"]
        return sum(1 for x in rs if "chain" in x.get("add", {}))

    assert chains(16) == chains(256)


# -- through the kernel -----------------------------------------------------------------------
@pytest.fixture
def lab():  # type: ignore[no-untyped-def]
    """A fresh lab per test: conntrack entries of one test never meet another's packets."""
    with Lab() as lb:
        yield lb


@needs_kernel
@pytest.mark.parametrize("vpc", ["vpc.yaml", "vpc-small.yaml"])
def test_kernel_verdicts_equal_policy_evaluation(lab, vpc: str) -> None:  # type: ignore[no-untyped-def]
    from starfabric.fornax.datapaths.linux.nft import NicTables

    c = compile_policy(load_vpc_spec(EXAMPLES / vpc))
    batch = PacketBatch.concat([sample_first_packets(c, 1200, seed=len(vpc)), edge_packets(c)])
    res = evaluate(c, batch)
    tables = NicTables(lab)
    tables.load(c)
    sender = Sender(lab)
    try:
        seq = SeqState()
        fr = build_frames(batch, np.zeros(len(batch), bool), lab.macs, seq_state=seq)
        sender.send(fr, rate_pps=40_000)
        fwd = sender.capture().forwarded(fr)
        want = res.reason == Reason.ALLOW
        bad = np.flatnonzero(fwd != want)
        assert len(bad) == 0, [(int(i), Reason(int(res.reason[i])).name, bool(fwd[i]))
                               for i in bad[:10]]  # fmt: skip
        cnt = tables.counters()
        assert cnt["allow"][0] == int(want.sum())
        for r in Reason:
            if r != Reason.ALLOW:
                assert cnt[f"drop_{r.name}"][0] == int((res.reason == r).sum()), r.name
        reasons_seen = {Reason(int(x)).name for x in np.unique(res.reason)}
        assert len(reasons_seen) >= (6 if vpc == "vpc.yaml" else 3), reasons_seen
        if vpc == "vpc.yaml":  # replies refused by the stateless ACLs, both ways
            assert {4, 5} <= set(res.rev_reason[want].tolist())
        # the reply of every accepted connection: refused exactly where rev_reason says
        ok = np.flatnonzero(want)
        rep = replies_of(batch.take(ok))
        fr2 = build_frames(rep, np.ones(len(ok), bool), lab.macs, ids=fr.ids[ok] + (1 << 32),
                           conn=ok, seq_state=seq)  # fmt: skip
        sender.send(fr2, rate_pps=40_000)
        back = sender.capture().forwarded(fr2)
        want_back = res.rev_reason[ok] == Reason.ALLOW
        assert np.array_equal(back, want_back), np.flatnonzero(back != want_back)[:10]
        cnt = tables.counters()
        assert cnt["rev_drop"][0] == int((~want_back).sum())
        for r in Reason:
            if r != Reason.ALLOW:
                assert cnt[f"rev_{r.name}"][0] == int((res.rev_reason[ok] == r).sum()), r.name
    finally:
        sender.close()
        tables.close()


def _send(sender, lab, batch, reply, ids, conn, seq):  # type: ignore[no-untyped-def]
    sender.send(build_frames(batch, reply, lab.macs, ids=ids, conn=conn, seq_state=seq))
    return sender.capture()


@needs_kernel
def test_bump_revalidates_only_that_scope(lab) -> None:  # type: ignore[no-untyped-def]
    from starfabric.fornax.datapaths.linux.nft import NicTables

    c = compile_policy(load_vpc_spec(EXAMPLES / "vpc-small.yaml"))
    web1, web2 = c.eni_id("shop/prod/web-1"), c.eni_id("shop/prod/web-2")
    # web-1 opens HTTPS to the internet (through its EIP), web-2 PostgreSQL to db-1
    b = PacketBatch.from_columns(
        time_ns=[0, 1], vni=100, proto=PROTO_TCP, sport=[5000, 5001], dport=[443, 5432],
        tcp_flags=2, src_hi=0, src_lo=[halves("10.0.1.10")[1], halves("10.0.1.11")[1]],
        dst_hi=0, dst_lo=[halves("198.18.0.1")[1], halves("10.0.2.10")[1]],
    )  # fmt: skip
    res = evaluate(c, b)
    assert res.eni_scope.tolist() == [web1, web2] and (res.reason == Reason.ALLOW).all()
    tables = NicTables(lab)
    versions = ScopeVersions.zeros(c)
    tables.load(c, versions)
    sender = Sender(lab)
    try:
        seq, conn = SeqState(), [0, 1]
        rep, fwd, back = replies_of(b), [False, False], [True, True]
        ack = PacketBatch.from_columns(**{**b.columns(), "tcp_flags": np.full(2, 0x10)})
        data = PacketBatch.from_columns(**{**rep.columns(), "tcp_flags": np.full(2, 0x18)})
        _send(sender, lab, b, fwd, [1, 2], conn, seq)
        cap = _send(sender, lab, rep, back, [3, 4], conn, seq)
        assert sorted(cap.at_client.tolist()) == [3, 4]
        assert tables.bump(eni=[web1]) == [web1]
        assert int(versions.eni[web1]) == 1 and int(versions.eni[web2]) == 0
        # web-1's reply is stale (its mark is old, a reply cannot be decided): dropped
        cap = _send(sender, lab, data, back, [5, 6], conn, seq)
        assert cap.at_client.tolist() == [6]
        # web-1's next original packet is decided again (still allowed): forwarded, and the
        # entry takes the new mark, so its replies pass again
        cap = _send(sender, lab, ack, fwd, [7, 8], conn, seq)
        assert sorted(cap.at_server.tolist()) == [7, 8]
        cap = _send(sender, lab, data, back, [9, 10], conn, seq)
        assert sorted(cap.at_client.tolist()) == [9, 10]
        cnt = tables.counters()
        assert (cnt["stale"][0], cnt["revalidate"][0], cnt["allow"][0]) == (1, 1, 3)
        # a VPC bump touches every ENI of the VPC in one transaction
        before = tables.transactions
        assert tables.bump(vpc=[int(c.eni_vpc[web1])]) == sorted(
            np.flatnonzero(c.eni_valid).tolist())  # fmt: skip
        assert tables.transactions == before + 1
    finally:
        sender.close()
        tables.close()


@needs_kernel
def test_policy_change_on_real_packets(lab) -> None:  # type: ignore[no-untyped-def]
    """examples/scenario-policy-v2.yaml: app stops admitting web on 8080. After apply_policy
    returns, the web->app:8080 connection forwards nothing (its next original packet is
    refused by the new policy, its replies are stale), a connection of an unaffected scope
    goes on, and the change was one transaction whatever the number of sessions."""
    from starfabric.fornax.datapaths.linux.nft import NicTables

    c = compile_policy(load_vpc_spec(EXAMPLES / "vpc.yaml"))
    v2 = load_vpc_spec(EXAMPLES / "scenario-policy-v2.yaml")
    old = PacketBatch.from_columns(
        time_ns=[0], vni=1001, proto=PROTO_TCP, sport=[6000], dport=[8080], tcp_flags=2,
        src_lo=[halves("10.0.1.10")[1]], dst_lo=[halves("10.0.2.10")[1]],
    )  # fmt: skip
    assert evaluate(c, old).reason.tolist() == [Reason.ALLOW]
    from starfabric.fornax.vpc import recompile

    c2, affected = recompile(c, v2)
    assert evaluate(c2, old).reason.tolist() == [Reason.SG_DENY_IN]
    # a connection allowed under both whose scopes the change does not touch
    sample = sample_first_packets(c, 600, seed=3)
    r1, r2 = evaluate(c, sample), evaluate(c2, sample)
    ok = np.flatnonzero((r1.reason == Reason.ALLOW) & (r2.reason == Reason.ALLOW)
                        & ~np.isin(r1.eni_scope, affected.eni) & ~np.isin(r1.vpc_scope, affected.vpc)
                        & (sample.proto == PROTO_TCP))  # fmt: skip
    assert len(ok), "no unaffected connection in the sample"
    b = PacketBatch.concat([old, sample.take(ok[:1])])
    tables = NicTables(lab)
    tables.load(c)
    sender = Sender(lab)
    try:
        seq, conn, fwd, back = SeqState(), [0, 1], [False, False], [True, True]
        rep = replies_of(b)
        ack = PacketBatch.from_columns(**{**b.columns(), "tcp_flags": np.full(2, 0x10)})
        data = PacketBatch.from_columns(**{**rep.columns(), "tcp_flags": np.full(2, 0x18)})
        assert sorted(_send(sender, lab, b, fwd, [1, 2], conn, seq).at_server.tolist()) == [1, 2]
        assert sorted(_send(sender, lab, rep, back, [3, 4], conn, seq).at_client.tolist()) == [3, 4]
        before = tables.transactions
        got = tables.apply_policy(v2)
        assert tables.transactions == before + 1
        assert np.array_equal(got.eni, affected.eni) and np.array_equal(got.vpc, affected.vpc)
        tables.reset_counters()
        cap_rep = _send(sender, lab, data, back, [5, 6], conn, seq)
        cap_fwd = _send(sender, lab, ack, fwd, [7, 8], conn, seq)
        assert cap_rep.at_client.tolist() == [6] and cap_fwd.at_server.tolist() == [8]
        cnt = tables.counters()
        assert cnt["stale"][0] == 1 and cnt["revalidate"][0] == 1
        assert cnt["drop_SG_DENY_IN"][0] == 1
    finally:
        sender.close()
        tables.close()


@needs_kernel
@pytest.mark.skipif(shutil.which("conntrack") is None, reason="conntrack-tools not installed")
def test_nat_where_the_kernel_does_it(lab) -> None:  # type: ignore[no-untyped-def]
    """nat=True: web-1's internet connection leaves as its EIP (SNAT), and a connection from
    the internet to the EIP reaches web-1's private address (DNAT), as conntrack records."""
    from starfabric.fornax.datapaths.linux.nft import NicTables

    c = compile_policy(load_vpc_spec(EXAMPLES / "vpc-small.yaml"))
    b = PacketBatch.from_columns(
        time_ns=[0, 1], vni=[100, 0], proto=PROTO_TCP, sport=[7000, 7001], dport=443,
        tcp_flags=2, src_lo=[halves("10.0.1.10")[1], halves("198.18.0.7")[1]],
        dst_lo=[halves("198.18.0.1")[1], halves("203.0.113.10")[1]],
    )  # fmt: skip
    assert (evaluate(c, b).reason == Reason.ALLOW).all()
    tables = NicTables(lab)
    tables.load(c, nat=True)
    sender = Sender(lab)
    try:
        cap = _send(sender, lab, b, [False, False], [1, 2], [0, 1], SeqState())
        assert sorted(cap.at_server.tolist()) == [1, 2]
        out = subprocess.run(["ip", "netns", "exec", lab.ns_nic, "conntrack", "-L"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        snat = next(ln for ln in out.splitlines() if "sport=7000" in ln)
        dnat = next(ln for ln in out.splitlines() if "sport=7001" in ln)
        # reply tuple: the internet answers the EIP; web-1 answers the internet host
        assert "src=198.18.0.1 dst=203.0.113.10 sport=443 dport=7000" in snat
        assert "src=10.0.1.10 dst=198.18.0.7 sport=443 dport=7001" in dnat
    finally:
        sender.close()
        tables.close()
