"""Fault tolerance mechanisms one at a time: ECC rebuild (orientation confirmed by policy, TCP
state re-learned, suspect keys matched), silent corruption caught by the patrol, hang failover
with reset and probe, failover hysteresis, chaos spec errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from starfabric.cli import app
from starfabric.fornax.engine import FastEngine, FlowKeys, Outcome, TcpState
from starfabric.fornax.engine import layout as L
from starfabric.fornax.manager.accounting import DropReason, Final
from starfabric.fornax.manager.failover import ResilientManager
from starfabric.fornax.manager.health import FaultKind, Health, HealthConfig, ScopeKind
from starfabric.fornax.packets import PacketBatch, ip_to_halves
from starfabric.fornax.run.inject import ChaosEngine, silent_bits
from starfabric.fornax.vpc import compile_policy, load_vpc_spec

from .conftest import NO_AGING

APP, DB, VNI = "10.0.2.10", "10.0.3.10", 1001  # app-1 -> db-1:5432 is allowed (vpc.yaml)
runner = CliRunner()


def _pkts(rows: list[tuple[bool, int]], t0: int, port: int = 0) -> PacketBatch:
    """Packets of the app->db connection: (reply?, tcp flags) each, 1 us apart."""
    a, b = (
        ip_to_halves(__import__("ipaddress").ip_address(APP)),
        ip_to_halves(__import__("ipaddress").ip_address(DB)),
    )
    cols: dict[str, list[int]] = {k: [] for k in ("src_hi", "src_lo", "dst_hi", "dst_lo",
                                                  "sport", "dport", "tcp_flags")}  # fmt: skip
    for reply, flags in rows:
        s, d = (b, a) if reply else (a, b)
        cols["src_hi"].append(s[0])
        cols["src_lo"].append(s[1])
        cols["dst_hi"].append(d[0])
        cols["dst_lo"].append(d[1])
        cols["sport"].append(5432 if reply else 40000)
        cols["dport"].append(40000 if reply else 5432)
        cols["tcp_flags"].append(flags)
    n = len(rows)
    return PacketBatch.from_columns(
        time_ns=t0 + np.arange(n) * 1000, port=port, vni=VNI, proto=6, length=100, **cols
    )


def _key() -> FlowKeys:
    return FlowKeys.single(VNI, 6, APP, DB, 40000, 5432)


def _setup(**health: float) -> tuple[ResilientManager, FastEngine, int]:
    eng = FastEngine(capacity=4096, n_ports=4, watchdog_timeout_s=0.005, **NO_AGING)
    m = ResilientManager(eng, compile_policy(load_vpc_spec("examples/vpc.yaml")),
                         health=HealthConfig(**health))  # fmt: skip
    handshake = [(False, 0x02), (True, 0x12), (False, 0x10), (False, 0x18), (True, 0x18)]
    f = m.process(_pkts(handshake, 1_000_000))
    assert (f.final == Final.SW_FORWARDED).all()  # decided in software, pushed to hardware
    m.tick(2_000_000)
    f = m.process(_pkts([(False, 0x18), (True, 0x18)], 3_000_000))
    assert (f.final == Final.HW_FORWARDED).all()
    return m, eng, int(f.action[1])


def test_uncorrectable_entry_is_rebuilt_at_first_hit_with_state_relearned() -> None:
    m, eng, reply_action = _setup()
    slot = int(eng.slot_of(_key())[0])
    rec = eng.query_one(_key())[1]
    assert rec["tcp_state"] == TcpState.ESTABLISHED
    eng.flip_bits(slot, [L.W_BYTES0 * 64 + 3, L.W_BYTES1 * 64 + 9])  # two flips: uncorrectable
    f = m.process(_pkts([(True, 0x18)], 4_000_000))
    # the faulting packet itself is forwarded by software with the session's reply action
    assert f.final[0] == Final.SW_FORWARDED and int(f.action[0]) == reply_action
    log = np.concatenate(m.ecc_log)
    assert (log[:, 0] == slot).any() and log[log[:, 0] == slot, 2].min() <= 4_000_000
    assert m.metrics.counts["ecc_rebuilt"] == 1
    # pushed back to hardware at once; never guessed open: ESTABLISHED is re-learned from
    # SYN_RECV (its short timeout) ...
    rec = eng.query_one(_key())[1]
    assert rec["tcp_state"] == TcpState.SYN_RECV and rec["action_reply"] == reply_action
    f = m.process(_pkts([(False, 0x10)], 4_100_000))  # ... until an ORIGINAL-direction ACK
    assert f.final[0] == Final.HW_FORWARDED
    assert eng.query_one(_key())[1]["tcp_state"] == TcpState.ESTABLISHED


def test_flipped_orientation_flag_is_caught_by_the_policy() -> None:
    m, eng, reply_action = _setup()
    slot = int(eng.slot_of(_key())[0])
    # the ORIGINAL-direction flag and one more bit: the record read back claims db opened it
    eng.flip_bits(slot, [L.W_META * 64 + 16, L.W_BYTES1 * 64 + 1])
    f = m.process(_pkts([(True, 0x18), (False, 0x18)], 4_000_000))
    assert (f.final == Final.SW_FORWARDED).all()
    assert int(f.action[0]) == reply_action
    assert eng.query_one(_key())[1]["action_reply"] == reply_action  # rebuilt the right way


def test_suspect_key_is_matched_to_the_packet_that_finds_it() -> None:
    m, eng, reply_action = _setup()
    slot = int(eng.slot_of(_key())[0])
    eng.flip_bits(slot, [L.W_A_LO * 64 + 5, L.W_B_LO * 64 + 7])  # key bits: KEY_SUSPECT
    eng.scrub(3_500_000, 4096)  # the scrubber finds it first; no packet has the key yet
    m.tick(3_600_000)
    assert len(m.suspects) == 1
    f = m.process(_pkts([(True, 0x18)], 4_000_000))
    assert f.final[0] == Final.SW_FORWARDED and int(f.action[0]) == reply_action
    assert len(m.suspects) == 0


def test_silent_corruption_is_found_by_the_patrol_within_one_period() -> None:
    m, eng, reply_action = _setup(patrol_rate=1000.0, patrol_chunk=64)
    slot = int(eng.slot_of(_key())[0])
    eng.flip_bits(slot, silent_bits(L.W_ACT * 64 + 33))  # ECC cannot see it
    assert eng.query_one(_key())[1]["action_reply"] != reply_action
    t0 = 4_000_000
    period_ns = round(eng.occupancy() / 1000.0 * 1e9)  # one pass over the occupied table
    t = t0
    while m.metrics.counts.get("patrol_policy_drift", 0) == 0 and t < t0 + 3 * period_ns:
        t += 1_000_000
        m.tick(t)
    assert m.metrics.counts["patrol_policy_drift"] == 1
    assert t - t0 <= period_ns + 2_000_000
    assert eng.query_one(_key())[1]["action_reply"] == reply_action  # repaired by modify


def test_hung_port_fails_over_to_software_then_back_after_probe() -> None:
    eng0 = FastEngine(capacity=4096, n_ports=4, watchdog_timeout_s=0.005, **NO_AGING)
    eng = ChaosEngine(eng0)
    m = ResilientManager(eng, compile_policy(load_vpc_spec("examples/vpc.yaml")),
                         health=HealthConfig(port_reset_s=0.001, probe_backoff_s=0.002))  # fmt: skip
    m.process(_pkts([(False, 0x02), (True, 0x12), (False, 0x10)], 1_000_000, port=2))
    m.tick(2_000_000)
    eng.faulty_ports[2] = True
    eng0.stall_port(2)
    f = m.process(_pkts([(False, 0x18)], 3_000_000, port=2))
    assert f.final[0] == Final.NAMED_DROP  # lost while the watchdog runs
    t = 3_000_000
    while not m.health.port_failed[2]:
        t += 1_000_000
        m.process(_pkts([(False, 0x18)], t, port=2))
        m.tick(t)
    assert t - 3_000_000 <= 5_000_000 + 2_000_000  # watchdog timeout + a tick
    f = m.process(_pkts([(False, 0x18), (True, 0x18)], t + 100, port=2))
    assert (f.final == Final.SW_FORWARDED).all()  # carried by software now
    for _ in range(5):  # resets do not help while the fault lasts
        t += 1_000_000
        m.tick(t)
    assert m.health.port_failed[2] and m.metrics.counts["probe_failed"] >= 1
    eng.faulty_ports[2] = False
    for _ in range(5):
        t += 1_000_000
        m.tick(t)
    assert not m.health.port_failed[2]
    f = m.process(_pkts([(False, 0x18)], t + 100, port=2))
    m.tick(t + 1_000_000)
    f = m.process(_pkts([(False, 0x18)], t + 2_000_000, port=2))
    assert f.final[0] == Final.HW_FORWARDED  # back in hardware
    assert eng0.process(_pkts([(False, 0x18)], t + 3_000_000, port=2)).outcome[0] == Outcome.HIT


def test_vpc_failover_has_hysteresis() -> None:
    h = Health(HealthConfig(vpc_sessions=3, healthy_s=1.0, window_s=10.0), 4, 8)
    h.record(0, FaultKind.ECC_UNCORRECTABLE, key=[11, 12, 13], vpc=[5, 5, 5], n=3)
    ch = h.evaluate(1)
    assert [(c.kind, c.scope_id, c.failover) for c in ch] == [(ScopeKind.VPC, 5, True)]
    assert h.evaluate(500_000_000) == []  # not yet quiet
    back = h.evaluate(1_000_000_001)
    assert [(c.kind, c.failover) for c in back] == [(ScopeKind.VPC, False)]
    assert h.evaluate(1_000_000_002) == []  # the old faults do not fail it over again
    h.record(2_000_000_000, FaultKind.ECC_UNCORRECTABLE, key=11, vpc=5)
    assert h.evaluate(2_000_000_001) == []  # one new fault is below the threshold


def test_repeated_faults_on_one_session_fail_that_session_over_only() -> None:
    h = Health(HealthConfig(session_faults=2.0), 4, 8)
    h.record(0, FaultKind.ECC_UNCORRECTABLE, key=77, vpc=1)
    h.record(5, FaultKind.ECC_CORRECTED, key=77, vpc=1, n=4)  # 4 x 0.25
    ch = h.evaluate(10)
    assert [(c.kind, c.key_hash) for c in ch] == [(ScopeKind.SESSION, 77)]
    assert not h.vpc_failed.any() and not h.engine_failed


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("faults: {bit_flips: [{rate_per_entry_hour: -1}]}", "rate_per_entry_hour"),
        ("faults: {stalls: [{port: 99, at: 1s, duration: 1s}]}", "port"),
        ("faults: {stals: []}", "stals"),
        ("faults: {crashes: [{at: soon}]}", "duration"),
    ],
)
def test_bad_chaos_yaml_is_one_line_naming_the_field(tmp_path: Path, text: str,
                                                     field: str) -> None:  # fmt: skip
    p = tmp_path / "chaos.yaml"
    p.write_text(
        f"vpc: {Path('examples/vpc.yaml').resolve()}\n"
        "workload: {duration: 0.1, cps: 100}\n" + text + "\n"
    )
    r = runner.invoke(app, ["fornax", "chaos", str(p)])
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert line.startswith("error:") and "\n" not in line and field in line, line


def test_lost_ecc_event_never_guesses_then_late_event_restores() -> None:
    """The poller is stuck, so the uncorrectable entry's event does not arrive: the engine's
    counter is ahead of the events, and a mid-stream segment with no session is not decided
    as a new connection (the reply-first decision could differ): it is lost instead. When
    the event arrives late, the session is rebuilt and forwards again."""
    eng0 = FastEngine(capacity=4096, n_ports=4, **NO_AGING)
    eng = ChaosEngine(eng0)
    m = ResilientManager(eng, compile_policy(load_vpc_spec("examples/vpc.yaml")))
    handshake = [(False, 0x02), (True, 0x12), (False, 0x10)]
    m.process(_pkts(handshake, 1_000_000))
    m.tick(2_000_000)
    f = m.process(_pkts([(True, 0x18)], 3_000_000))
    reply_action = int(f.action[0])
    assert f.final[0] == Final.HW_FORWARDED
    eng.poll_paused = True
    slot = int(eng0.slot_of(_key())[0])
    eng0.flip_bits(slot, [L.W_BYTES0 * 64 + 3, L.W_BYTES1 * 64 + 9])
    f = m.process(_pkts([(True, 0x18), (True, 0x18)], 4_000_000))
    assert m.unknown_losses
    assert (f.final == Final.NAMED_DROP).all() and (f.reason == DropReason.SESSION_LOST).all()
    eng.poll_paused = False
    m.tick(5_000_000)  # the event arrives: rebuilt, quarantine lifted
    assert not m.unknown_losses
    f = m.process(_pkts([(True, 0x18)], 6_000_000))
    assert f.final[0] in (Final.HW_FORWARDED, Final.SW_FORWARDED)
    assert int(f.action[0]) == reply_action


def test_chaos_cli_writes_report_and_timeline(tmp_path: Path) -> None:
    import json

    p = tmp_path / "chaos.yaml"
    p.write_text(
        f"vpc: {Path('examples/vpc.yaml').resolve()}\n"
        "workload: {duration: 0.2, cps: 800, batch: 2ms}\n"
        "engine: {capacity: 8192, n_ports: 4, watchdog_timeout_s: 0.005}\n"
        "tick: 4ms\n"
        "faults: {stalls: [{port: 2, at: 0.05, duration: 0.03}],"
        " bit_flips: [{rate_per_entry_hour: 50000, bits: 2}]}\n"
    )
    out, trace = tmp_path / "r.json", tmp_path / "t.json"
    r = runner.invoke(app, ["fornax", "chaos", str(p), "--json", str(out), "--trace", str(trace)])
    assert r.exit_code == 0, r.output
    assert "port_stall" in r.output and "misforwarded 0" in r.output
    rep = json.loads(out.read_text())
    stall = next(x for x in rep["faults"] if x["fault"] == "port_stall")
    assert stall["detected"] and stall["within_bound"] and stall["failback_s"] is not None
    p_ = rep["packets"]
    assert p_["offered"] == sum(p_[k] for k in ("hw_forwarded", "sw_forwarded", "policy_drop",
                                                "named_drop"))  # fmt: skip
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"port_stall", "software"} <= names
