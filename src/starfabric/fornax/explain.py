"""Explain one packet's path through the session engine: which stage decided, and why.

`explain_packet` reads the engine's state without touching it (raw record reads, no ECC
side effects), predicts the outcome stage by stage (port, key, probe, ECC, version, TCP,
action), then runs the packet through the engine and checks that the engine agrees. The text
is deterministic (fixed hash seed, no timings), so tests compare it with golden files.
`Scenario` is the small YAML description of sessions (and faults) the CLI preloads.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal, Protocol

import numpy as np
from pydantic import Field

from starfabric.config import Spec
from starfabric.errors import ConfigError, InvariantError
from starfabric.fornax import packets as pk
from starfabric.fornax.engine import (
    EventType,
    FastEngine,
    FlowKeys,
    Outcome,
    Scope,
    SessionEngine,
    TcpState,
)
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.config import EngineConfig, make_config
from starfabric.fornax.engine.ecc import ECC_CLEAN, ECC_CORRECTED, ecc_decode
from starfabric.fornax.engine.reference import canonical_key
from starfabric.fornax.engine.tcp import TCP_IGNORE, TCP_INVALID, TRANSITIONS, TcpEvent, is_reopen
from starfabric.fornax.engine.tcp import tcp_event as classify
from starfabric.fornax.keys import DEFAULT_HASH_SEED, bucket_pair, hash_key_py, tag_of
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.ranges import (
    ICMP_TYPE,
    INGRESS_PORT,
    L4_PORT,
    LENGTH,
    TIME_NS,
    VNI,
    Action,
    Aux,
    ScopeId,
    Version,
    Vni,
)
from starfabric.ranges import IntRange, check_int

PROTOS = {
    "tcp": pk.PROTO_TCP,
    "udp": pk.PROTO_UDP,
    "icmp": pk.PROTO_ICMP,
    "icmpv6": pk.PROTO_ICMPV6,
}
FLAG_LETTERS = {
    "S": pk.TCP_SYN,
    "A": pk.TCP_ACK,
    "F": pk.TCP_FIN,
    "R": pk.TCP_RST,
    "P": pk.TCP_PSH,
    ".": pk.TCP_ACK,
}


class Inspectable(Protocol):
    """What explain needs beyond the interface: read-only views of raw hardware state."""

    config: EngineConfig

    def raw_record(self, slot: int) -> np.ndarray: ...
    def raw_tag(self, slot: int) -> int: ...
    def port_stalled(self, port: int) -> bool: ...


def parse_endpoint(text: str, field: str) -> tuple[str, int]:
    """'10.0.0.1:80' or '[2001:db8::1]:443' -> (address, port)."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)|([0-9.]+):(\d+)", text.strip())
    if not m:
        raise ConfigError(
            f"{field} = {text!r} is not ADDRESS:PORT", fix="write 10.0.0.1:80 or [2001:db8::1]:443"
        )
    addr, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        raise ConfigError(f"{field}: {addr!r} is not an IP address", fix="check it") from None
    return addr, check_int(f"{field} port", int(port), L4_PORT)


def parse_flags(text: str) -> int:
    """tcpdump-style flag letters ('S', 'SA', 'FA', 'R', '.') -> TCP flag bits."""
    out = 0
    for ch in text.upper():
        if ch not in FLAG_LETTERS:
            raise ConfigError(
                f"flags = {text!r}: unknown flag {ch!r}", fix="use letters from S A F R P ."
            )
        out |= FLAG_LETTERS[ch]
    return out


def _proto(name: str) -> int:
    if name not in PROTOS:
        raise ConfigError(f"proto = {name!r} is not known", fix=f"use one of {sorted(PROTOS)}")
    return PROTOS[name]


class SessionSpec(Spec):
    """One session to preload (key in ORIGINAL orientation)."""

    vni: Vni
    proto: Literal["tcp", "udp", "icmp", "icmpv6"] = "tcp"
    src: str
    dst: str
    action_orig: Action = 1
    action_reply: Action = 2
    eni_scope: ScopeId = 0
    vpc_scope: ScopeId = 0
    eni_version: Version = 0
    vpc_version: Version = 0
    state: Literal[tuple(s.name for s in TcpState)] = "ESTABLISHED"  # type: ignore[valid-type]
    aux: Aux = 0


class BumpSpec(Spec):
    scope: Literal["eni", "vpc"]
    id: ScopeId


class FlipSpec(Spec):
    """Bits (word * 64 + bit) to flip in the record of the session at this list index."""

    session: int = Field(ge=0)
    bits: list[int]


class Scenario(Spec):
    """Sessions, version bumps and faults the trace command preloads into a fresh engine."""

    engine: dict[str, float | int] = Field(default_factory=dict)
    sessions: list[SessionSpec] = Field(default_factory=list)
    bump: list[BumpSpec] = Field(default_factory=list)
    flip: list[FlipSpec] = Field(default_factory=list)
    stall: list[int] = Field(default_factory=list)


DEFAULT_SCENARIO = Scenario(
    engine={"capacity": 1024, "n_ports": 4, "eni_scopes": 16, "vpc_scopes": 16},
    sessions=[
        SessionSpec(
            vni=7,
            src="10.0.0.1:1234",
            dst="10.0.0.2:80",
            action_orig=10,
            action_reply=11,
            eni_scope=1,
            vpc_scope=1,
        ),
        SessionSpec(
            vni=7,
            proto="udp",
            src="10.0.0.1:5353",
            dst="10.0.0.53:53",
            action_orig=20,
            action_reply=21,
            eni_scope=1,
            vpc_scope=1,
            state="NONE",
        ),
        SessionSpec(
            vni=9,
            src="[2001:db8::1]:40000",
            dst="[2001:db8::2]:443",
            action_orig=30,
            action_reply=31,
            eni_scope=2,
            vpc_scope=2,
            state="SYN_SENT",
        ),
    ],
)


def _key_of(vni: int, proto: int, src: str, dst: str, field: str) -> FlowKeys:
    (sa, sp), (da, dp) = parse_endpoint(src, f"{field}.src"), parse_endpoint(dst, f"{field}.dst")
    if proto in (pk.PROTO_ICMP, pk.PROTO_ICMPV6):
        dp = (8 if proto == pk.PROTO_ICMP else 128) << 8  # echo request; port = echo id
    return FlowKeys.single(vni, proto, sa, da, sp, dp)


def build_engine(scenario: Scenario) -> FastEngine:
    """A fresh engine holding the scenario's sessions, bumps, bit flips and stalls."""
    eng = FastEngine(make_config(None, **scenario.engine))
    for i, s in enumerate(scenario.sessions):
        st = eng.insert_one(
            _key_of(s.vni, _proto(s.proto), s.src, s.dst, f"sessions[{i}]"),
            action_orig=s.action_orig,
            action_reply=s.action_reply,
            eni_scope=s.eni_scope,
            vpc_scope=s.vpc_scope,
            eni_version=s.eni_version,
            vpc_version=s.vpc_version,
            now_ns=0,
            tcp_state=int(TcpState[s.state]),
            aux=s.aux,
        )
        if st != 0:
            raise ConfigError(
                f"sessions[{i}] could not be inserted: {st.name}",
                fix="remove duplicates, fix scope ids or enlarge engine.capacity",
            )
    for b in scenario.bump:
        eng.bump_version(Scope.ENI if b.scope == "eni" else Scope.VPC, b.id)
    for f in scenario.flip:
        if f.session >= len(scenario.sessions):
            raise ConfigError(f"flip.session {f.session} does not exist", fix="index sessions")
        s = scenario.sessions[f.session]
        slot = int(eng.slot_of(_key_of(s.vni, _proto(s.proto), s.src, s.dst, "flip"))[0])
        eng.flip_bits(slot, f.bits)
    for p in scenario.stall:
        eng.stall_port(p)
    eng.poll_events()  # start the trace with an empty ring
    return eng


def _ep(hi: int, lo: int, port: int) -> str:
    ip = pk.halves_to_ip(hi, lo)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def _flags_text(flags: int) -> str:
    names = [
        (pk.TCP_SYN, "S"),
        (pk.TCP_FIN, "F"),
        (pk.TCP_RST, "R"),
        (pk.TCP_PSH, "P"),
        (pk.TCP_ACK, "A"),
    ]
    return "".join(c for bit, c in names if flags & bit) or "-"


def engine_ports(cfg: EngineConfig) -> IntRange:
    """The ingress ports an engine has: 0..n_ports - 1."""
    return INGRESS_PORT.narrower(
        hi=cfg.n_ports - 1, what=f"the engine's ports: n_ports = {cfg.n_ports}"
    )


def explain_packet(
    engine: SessionEngine,
    *,
    vni: int,
    proto: str,
    src: str,
    dst: str,
    flags: str = "",
    port: int = 0,
    time_ns: int = 1_000_000_000,
    length: int = 64,
    icmp_type: int = 8,
) -> str:
    """Explain, then process, one packet; the engine's verdict must match the explanation."""
    insp: Inspectable = engine  # type: ignore[assignment]
    cfg = engine.config
    pnum = _proto(proto)
    (sa, sp), (da, dp) = parse_endpoint(src, "src"), parse_endpoint(dst, "dst")
    fbits = parse_flags(flags) if pnum == pk.PROTO_TCP else 0
    check_int("vni", vni, VNI)
    check_int("port", port, engine_ports(cfg))
    check_int("time_ns", time_ns, TIME_NS)
    check_int("length", length, LENGTH)
    if pnum in (pk.PROTO_ICMP, pk.PROTO_ICMPV6):
        dp = check_int("icmp_type", icmp_type, ICMP_TYPE) << 8
    sh, sl = pk.ip_to_halves(sa)
    dh, dl = pk.ip_to_halves(da)
    key, d = canonical_key(vni, pnum, (sh, sl), (dh, dl), sp, dp)
    lines = [
        f"packet   vni {vni} {proto} {src} -> {dst} flags {_flags_text(fbits)} "
        f"len {length} port {port} t={time_ns}ns"
    ]
    expect, reason_stage = _walk(insp, cfg, key, d, pnum, fbits, port, lines)
    res = engine.process(
        PacketBatch.from_columns(
            time_ns=[time_ns],
            port=[port],
            vni=[vni],
            proto=[pnum],
            src_hi=np.array([sh], np.uint64),
            src_lo=np.array([sl], np.uint64),
            dst_hi=np.array([dh], np.uint64),
            dst_lo=np.array([dl], np.uint64),
            sport=[sp],
            dport=[dp],
            tcp_flags=[fbits],
            length=[length],
        )
    )
    got = Outcome(int(res.outcome[0]))
    if got != expect:
        raise InvariantError(f"trace predicted {expect.name} but the engine said {got.name}")
    action = f" action {int(res.action[0])}" if got in (Outcome.HIT, Outcome.DROP_HW) else ""
    lines.append(f"verdict  {got.name}{action} (decided by: {reason_stage})")
    events = engine.poll_events()
    for ev in events:
        lines.append(f"event    {EventType(int(ev['type'])).name} slot {int(ev['slot'])}")
    return "\n".join(lines) + "\n"


def _walk(
    e: Inspectable,
    cfg: EngineConfig,
    key: tuple[int, int, int, int, int, int],
    d: int,
    proto: int,
    fbits: int,
    port: int,
    lines: list[str],
) -> tuple[Outcome, str]:
    """Predict the outcome stage by stage, appending one line per stage."""
    if e.port_stalled(port):
        lines.append(f"port     port {port} is stalled: the packet waits (watchdog runs)")
        return Outcome.PORT_HUNG, "port"
    lines.append(f"port     port {port} is running")
    a_hi, a_lo, b_hi, b_lo, pw, _ = key
    a = _ep(a_hi, a_lo, (pw >> 16) & 0xFFFF)
    b = _ep(b_hi, b_lo, pw & 0xFFFF)
    h = hash_key_py(*key, cfg.hash_seed)
    tag = tag_of(h)
    b1, b2 = bucket_pair(h, cfg.n_buckets)
    seed_note = "" if cfg.hash_seed == DEFAULT_HASH_SEED else " (custom seed)"
    lines.append(
        f"key      A={a} B={b} vni {pw >> 32}; direction {d} ({'A->B' if d == 0 else 'B->A'}); "
        f"hash {h:#018x}{seed_note} tag {tag:#06x} buckets {b1},{b2}"
    )
    bs = cfg.bucket_size
    for bucket in (b1, b2):
        slots = range(bucket * bs, bucket * bs + bs)
        matches = [s for s in slots if e.raw_tag(s) == tag]
        used = sum(1 for s in slots if e.raw_tag(s) != 0)
        lines.append(
            f"probe    bucket {bucket}: {used}/{bs} used, tag matches at {matches or 'none'}"
        )
        for s in matches:
            rec = [int(x) for x in e.raw_record(s)]
            status, pos = ecc_decode(rec)
            if status == ECC_CLEAN:
                lines.append(f"ecc      slot {s}: clean")
            elif status == ECC_CORRECTED:
                lines.append(f"ecc      slot {s}: single-bit error at bit {pos}, corrected")
                if pos // 64 < L.N_DATA_WORDS:
                    rec[pos // 64] ^= 1 << (pos % 64)
            else:
                lines.append(f"ecc      slot {s}: uncorrectable: entry invalidated, packet punted")
                return Outcome.FAULT, "ecc"
            if (*rec[:5], rec[L.W_META] & 0xFF) == key:
                lines.append(f"match    slot {s}: key equal")
                return _hit(e, rec, d, proto, fbits, cfg, lines)
            lines.append(f"match    slot {s}: tag collision, key differs")
    lines.append("miss     no entry in either bucket: punted to software")
    return Outcome.MISS, "probe"


def _hit(
    e: Inspectable, rec: list[int], d: int, proto: int, fbits: int, cfg: EngineConfig,
    lines: list[str],
) -> tuple[Outcome, str]:  # fmt: skip
    eng: SessionEngine = e  # type: ignore[assignment]
    meta = rec[L.W_META]
    flags = (meta >> 16) & 0xFF
    state = (meta >> 8) & 0xFF
    rel = d ^ (flags & L.FLAG_ORIG_B)
    eni, vpc = rec[L.W_SCOPE] & L.MASK32, rec[L.W_SCOPE] >> 32
    ev, vv = rec[L.W_VER] & L.MASK32, rec[L.W_VER] >> 32
    ce, cv = eng.scope_version(Scope.ENI, eni), eng.scope_version(Scope.VPC, vpc)
    ok = ev == ce and vv == cv
    lines.append(
        f"version  ENI {eni}: snapshot {ev} vs current {ce}; VPC {vpc}: snapshot {vv} vs "
        f"current {cv} -> {'current' if ok else 'STALE: punted, mismatch event once'}"
    )
    if not ok:
        return Outcome.STALE, "version"
    dname = "REPLY" if rel else "ORIGINAL"
    if proto == pk.PROTO_TCP:
        evn = classify(fbits)
        new = int(TRANSITIONS[rel, evn, state])
        sname = TcpState(state).name
        if new == TCP_INVALID:
            what = f"INVALID here (state stays {sname})"
        elif new == TCP_IGNORE:
            what = f"ignored (state stays {sname})"
        elif is_reopen(state, new):
            lines.append(
                f"tcp      {dname} {TcpEvent(evn).name} in {TcpState(state).name} -> a new "
                "connection: old session CLOSED and removed, SYN punted to software"
            )
            return Outcome.MISS, "tcp"
        else:
            what = TcpState(new).name
        lines.append(f"tcp      {dname} {TcpEvent(evn).name} in {sname} -> {what}")
    else:
        lines.append(f"state    {dname} packet; proto {proto} (no TCP tracking)")
    act = (rec[L.W_ACT] >> (32 * d)) & L.MASK32
    if act == cfg.drop_action:
        lines.append(f"action   {dname} handle {act} is the drop handle")
        return Outcome.DROP_HW, "action"
    lines.append(f"action   {dname} handle {act}: forwarded by hardware")
    return Outcome.HIT, "action"


__all__ = [
    "DEFAULT_SCENARIO",
    "Scenario",
    "build_engine",
    "explain_packet",
    "parse_endpoint",
    "parse_flags",
]
