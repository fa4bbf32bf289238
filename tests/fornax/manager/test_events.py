"""Hardware limits and events: a full table keeps traffic flowing in software, a ring
overflow runs the patrol (which frees SNAT ports whose events were lost), aging releases
ports, and the accounting adds up in every case."""

from __future__ import annotations

import numpy as np

from starfabric.fornax.engine import FastEngine
from starfabric.fornax.keys import canonicalize
from starfabric.fornax.manager import Final, Manager, ManagerConfig, patrol
from starfabric.fornax.manager.decide import original_from_entries, original_from_sessions
from starfabric.fornax.vpc import compile_policy

from .conftest import NO_AGING
from .helpers import example_spec, example_traffic


def _run(m: Manager, **kw: object) -> None:
    for wb in example_traffic(**kw):  # type: ignore[arg-type]
        m.process(wb.packets)
        m.tick(wb.t_end_ns)
    m.ledger.check()


def test_table_full_traffic_flows_in_software() -> None:
    eng = FastEngine(capacity=64, bucket_size=4, max_displacement=4, **NO_AGING)
    m = Manager(eng, compile_policy(example_spec()))
    _run(m)
    s = m.summary()
    assert s["counts"]["insert_table_full"] > 0
    assert s["events"]["table_full"] > 0
    assert m.softpath.occupancy() > 0
    p = s["packets"]
    assert p["sw_forwarded"] > p["hw_forwarded"] > 0
    assert p["named_drop"] == 0  # nothing lost: software carried what hardware could not
    assert m.sessions() == eng.occupancy() + m.softpath.occupancy()


def test_same_run_with_room_stays_in_hardware() -> None:
    """Contrast for the test above: with room, software forwards first packets only."""
    m = Manager(FastEngine(capacity=1 << 14, **NO_AGING), compile_policy(example_spec()))
    _run(m)
    p = m.summary()["packets"]
    assert p["hw_forwarded"] > 5 * p["sw_forwarded"]
    assert m.softpath.occupancy() == 0


def test_ring_overflow_runs_the_patrol_and_frees_lost_ports() -> None:
    cfg = dict.fromkeys(NO_AGING, 0.05)  # every timeout short
    eng = FastEngine(capacity=1 << 12, ring_capacity=8, **cfg)
    m = Manager(eng, compile_policy(example_spec()), ManagerConfig(event_poll_max=4))
    _run(m, duration=0.4)
    m.tick(m.now_ns + 10**9, scrub_slots=1 << 12)
    for _ in range(50):  # drain
        m.tick(m.now_ns + 10**6)
    s = m.summary()
    assert s["events"]["ring_overflow"] > 0
    assert s["counts"]["patrol_passes"] > 0
    assert eng.counters()["events_lost"] > 0
    # every session aged out; ports whose AGED events were lost were freed by the patrol
    assert eng.occupancy() == 0 and m.softpath.occupancy() == 0
    assert m.nat.allocated() == 0
    assert s["counts"].get("patrol_nat_freed", 0) > 0


def test_aging_releases_nat_ports() -> None:
    eng = FastEngine(capacity=1 << 12, **dict.fromkeys(NO_AGING, 0.01))
    m = Manager(eng, compile_policy(example_spec()))
    _run(m, duration=0.2)
    assert m.summary()["counts"].get("nat_released", 0) > 0
    m.tick(m.now_ns + 10**9, scrub_slots=1 << 12)
    m.tick(m.now_ns + 10**6)
    assert eng.occupancy() == 0 and m.nat.allocated() == 0


def test_patrol_is_bounded_and_resumes() -> None:
    eng = FastEngine(capacity=1 << 12, **NO_AGING)
    m = Manager(eng, compile_policy(example_spec()),
                ManagerConfig(patrol_chunk=256, patrol_max_entries=256))  # fmt: skip
    _run(m)
    before = m.metrics.ops["dump"]
    out = patrol(m)
    assert out["entries"] <= 256 + 256
    assert m.metrics.ops["dump"] - before <= 2
    assert 0 < m.patrol_cursor < eng.config.capacity


def test_setup_budget_defers_to_software() -> None:
    m = Manager(FastEngine(capacity=1 << 14, **NO_AGING), compile_policy(example_spec()),
                ManagerConfig(setup_rate=2000.0, setup_burst=10))  # fmt: skip
    _run(m)
    s = m.summary()
    assert s["counts"]["budget_deferred"] > 0
    assert s["packets"]["named_drop"] == 0
    # the budget bounds inserts+modifies (promotions share it): rate x time + burst
    spent = s["engine_ops"]["insert"] + s["engine_ops"]["modify"]
    assert spent <= 2000 * m.now_ns / 1e9 + 10 + 1


def test_port_hung_is_a_named_drop() -> None:
    eng = FastEngine(capacity=1 << 12, **NO_AGING)
    m = Manager(eng, compile_policy(example_spec()))
    eng.stall_port(0)
    _run(m, duration=0.05)
    p = m.summary()["packets"]
    assert p["named_drop_reasons"]["port_hung"] == p["offered"] > 0
    assert int(m.ledger.final[Final.NAMED_DROP]) == p["offered"]
    np.testing.assert_equal(m.ledger.final.sum(), m.ledger.offered)


def test_promotion_never_hands_hardware_a_stale_decision() -> None:
    from starfabric.fornax.vpc import load_vpc_spec

    eng = FastEngine(capacity=64, bucket_size=4, max_displacement=4, **NO_AGING)
    m = Manager(eng, compile_policy(example_spec()), ManagerConfig(promote_per_tick=0))
    for wb in example_traffic(duration=0.2):
        m.process(wb.packets)
    resident = m.softpath.occupancy()
    assert resident > 20
    m.apply_policy(load_vpc_spec("examples/scenario-policy-v2.yaml"))
    sp = m.softpath
    live = np.flatnonzero(sp.used == 1)
    stale = live[sp.stale(live)]
    assert len(stale)
    stale_keys = canonicalize(original_from_sessions(sp.sessions(stale)))
    recs, _ = eng.dump(0, 1 << 10)
    eng.delete(original_from_entries(recs))  # room in hardware
    object.__setattr__(m, "config", ManagerConfig(promote_per_tick=1 << 10))
    m.tick(m.now_ns + 1)
    assert m.summary()["counts"]["promoted"] > 0
    assert (sp.lookup(stale_keys) >= 0).all()  # stale sessions stay until re-decided
    assert (eng.slot_of(original_from_sessions(sp.sessions(stale))) < 0).all()


def test_mismatch_event_alone_re_decides_and_modifies() -> None:
    """A stale session whose packet hardware alone saw (the manager did not punt-handle it):
    the VERSION_MISMATCH event makes the manager re-decide and modify the entry."""
    from starfabric.fornax.engine import Scope
    from starfabric.fornax.vpc import load_vpc_spec

    eng = FastEngine(capacity=1 << 12, **NO_AGING)
    m = Manager(eng, compile_policy(example_spec()))
    for wb in example_traffic(duration=0.1):
        m.process(wb.packets)
        m.tick(wb.t_end_ns)
    m.apply_policy(load_vpc_spec("examples/scenario-policy-v2.yaml"))
    stale, _ = eng.dump(0, 1 << 12, stale_only=True)
    assert len(stale) > 0
    keys = original_from_entries(stale)
    from starfabric.fornax.packets import PacketBatch

    probe = PacketBatch.from_columns(
        vni=keys.vni, proto=keys.proto, src_hi=keys.src_hi, src_lo=keys.src_lo,
        dst_hi=keys.dst_hi, dst_lo=keys.dst_lo, sport=keys.sport, dport=keys.dport,
        tcp_flags=0x10, time_ns=m.now_ns + 1, length=64,
    )  # fmt: skip
    eng.process(probe)  # hardware alone: STALE, one mismatch event per session
    m.tick(m.now_ns + 2)
    s = m.summary()
    assert s["events"]["version_mismatch"] >= len(stale)
    assert s["counts"]["redecided"] >= len(stale) and s["engine_ops"]["modify"] > 0
    st, rec = eng.query(keys)
    kept = st == 0
    assert kept.any()
    for r in rec[kept]:
        assert r["eni_version"] == eng.scope_version(Scope.ENI, int(r["eni_scope"]))
        assert r["vpc_version"] == eng.scope_version(Scope.VPC, int(r["vpc_scope"]))
    assert len(eng.dump(0, 1 << 12, stale_only=True)[0]) == 0


def test_tenants_with_the_same_addresses_stay_apart() -> None:
    """acme/prod, acme/staging and globex/main all use 10.0.0.0/16: the same 5-tuple in two
    VNIs is two sessions, each delivered inside its own VPC."""
    from starfabric.fornax.packets import PacketBatch, ip_to_halves
    from starfabric.fornax.vpc import ActionKind

    spec = example_spec()
    vnis = [v.vni for t in spec.tenants for v in t.vpcs if "10.0.0.0/16" in v.cidrs]
    assert len(vnis) >= 2
    m = Manager(FastEngine(capacity=1 << 12, **NO_AGING), compile_policy(spec))
    got = {}
    for v in vnis:
        enis = [e for t in spec.tenants for x in t.vpcs if x.vni == v for e in x.enis if e.ipv4]
        a, b = enis[0], enis[1]
        sh, sl = ip_to_halves(a.ipv4)
        dh, dl = ip_to_halves(b.ipv4)
        for port in (22, 443, 8080, 5432, 80):
            pk = PacketBatch.from_columns(vni=v, src_hi=sh, src_lo=sl, dst_hi=dh, dst_lo=dl,
                                          proto=6, sport=40000, dport=port, tcp_flags=2)  # fmt: skip
            fate = m.process(pk)
            if fate.final[0] in (Final.HW_FORWARDED, Final.SW_FORWARDED):
                row = m.policy.actions[int(fate.action[0])]
                got[v] = row
                break
    assert len(got) >= 2
    for v, row in got.items():
        assert row["kind"] in (ActionKind.DELIVER,) and int(row["vni"]) == v


def test_tcp_reopen_is_a_new_connection() -> None:
    """RST then a new SYN on the same 5-tuple: as nf_conntrack, the old session ends (CLOSED,
    reason TCP_REOPEN, its SNAT port released) and the SYN is decided as a new connection
    with its own port; a reopening SYN from the other side is decided in its own direction,
    so it cannot open what policy refuses (here: the internet calling in without an EIP)."""
    from starfabric.fornax.manager import cookie
    from starfabric.fornax.packets import PacketBatch, ip_to_halves

    eng = FastEngine(capacity=1 << 10, **NO_AGING)
    m = Manager(eng, compile_policy(example_spec()))
    _, sl = ip_to_halves("10.0.2.10")  # app-1: outbound through the shared-IP NAT gateway
    _, dl = ip_to_halves("198.18.0.9")

    def pkt(flags: int, t: int, back: bool = False) -> PacketBatch:
        src, dst, sp, dp = (dl, sl, 443, 40001) if back else (sl, dl, 40001, 443)
        return PacketBatch.from_columns(vni=1001, src_lo=src, dst_lo=dst, proto=6, sport=sp,
                                        dport=dp, tcp_flags=flags, time_ns=t, length=64)  # fmt: skip

    assert m.process(pkt(0x02, 1)).final[0] == Final.SW_FORWARDED  # SYN: session + port
    assert m.nat.allocated() == 1
    assert m.process(pkt(0x04, 2)).final[0] == Final.HW_FORWARDED  # RST: CLOSE
    assert m.process(pkt(0x02, 3)).final[0] == Final.SW_FORWARDED  # SYN: a new connection
    m.tick(4)
    # nf_conntrack: a RST that is the only answer deletes the never-replied entry (CLOSED,
    # CT_KILLED), so the second SYN is a new connection outright, not a reopen
    assert eng.counters()["closed"] == 1 and m.summary()["counts"].get("tcp_reopen", 0) == 0
    assert eng.occupancy() == 1 and m.nat.allocated() == 1  # old port released, new one held
    st, rec = eng.query(original_from_entries(eng.dump(0, 16)[0]))
    assert (st == 0).all() and cookie.has_nat(rec["aux"]).all()
    # handshake and teardown to TIME_WAIT, then the server side reopens: a new inbound
    # connection, which the policy refuses (before, it was forwarded with the old actions)
    for t, (flags, back) in enumerate(
        [(0x12, True), (0x10, False), (0x11, False), (0x11, True), (0x10, False)], start=5
    ):
        assert m.process(pkt(flags, t, back)).final[0] == Final.HW_FORWARDED
    assert m.process(pkt(0x02, 10, back=True)).final[0] == Final.POLICY_DROP
    m.tick(11)
    assert m.nat.allocated() == 0
