"""Replay a recording of the Linux kernel's nf_conntrack (scripts/record_conntrack.py) through
a Fornax datapath and score the agreement, packet by packet.

Datapaths: "fast" and "reference" (the Manager over FastEngine / ReferenceEngine with the
allow-all policy, so connection tracking alone decides), "softpath" (the software path on its
own). Each conversation runs on a fresh datapath configured with the conversation's kernel
settings; packets carry the recorded times, and before each packet the datapath ages what
has expired (the kernel treats an expired entry as gone). After each packet the entry is read
back (engine query, else the software table) at the recorded read time and compared with the
kernel's:
  state     entry present or not; TCP state; SEEN_REPLY ([UNREPLIED] absent); ASSURED,
  timer     the remaining timeout in whole seconds as /proc shows it: equal exactly when the
            re-arm decision and the armed timeout agree (packets are >= 1 s apart),
  rearm     whether the packet re-armed the timer (inferred from the kernel's readings),
  verdict   the packet's `ct state` class: invalid, new, established, related.
An ICMP error is read back as the entry of the conversation it quotes; every datapath (the
software path's own too, softpath.py) looks it up as the kernel does (engine/conntrack.py
icmp_error_quotes), so no packet is skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.errors import DataError
from starfabric.fornax.engine import FastEngine, FlowKeys, ReferenceEngine, Status, TcpState
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine.config import EngineConfig, make_config
from starfabric.fornax.keys import canonicalize
from starfabric.fornax.packets import (
    PROTO_ICMP,
    PROTO_ICMPV6,
    PROTO_TCP,
    PROTO_UDP,
    TCP_OPT_HDR,
    TCP_OPT_PRESENT,
    TCP_OPT_SACK_PERM,
    TCP_OPT_WSCALE,
    PacketBatch,
    ip_to_halves,
)
from starfabric.fornax.softpath import SoftOutcome, SoftPath, SoftPathConfig
from starfabric.fornax.vpc import CompiledPolicy
from starfabric.fornax.vpc.allow_all import allow_all_policy

FORMAT = "starfabric-conntrack-recording/1"
DATAPATHS = ("fast", "reference", "softpath")
METRICS = ("state", "timer", "rearm", "verdict")
_PROTO = {"tcp": PROTO_TCP, "udp": PROTO_UDP, "icmp": PROTO_ICMP, "icmpv6": PROTO_ICMPV6}
_ICMPS = (PROTO_ICMP, PROTO_ICMPV6)
NS = 1_000_000_000


def load_recording(path: str | Path) -> dict[str, Any]:
    """A recording file, checked for the fields the replay reads."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"{p}: cannot read a recording ({e})", fix="record one with "
                        "scripts/record_conntrack.py") from None  # fmt: skip
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f"{p}: field 'format' is not {FORMAT!r}",
                        fix="record it with scripts/record_conntrack.py")  # fmt: skip
    for k in ("kernel", "addresses", "conversations"):
        if k not in doc:
            raise DataError(f"{p}: field {k!r} is missing", fix="record the file again")
    return doc


def engine_config(settings: dict[str, int]) -> EngineConfig:
    """A small-table engine with the conversation's kernel settings (defaults otherwise)."""
    return make_config(
        EngineConfig.small(),
        **{k: int(settings[k]) for k in ("tcp_loose", "tcp_be_liberal", "tcp_max_retrans",
                                         "tcp_ignore_invalid_rst") if k in settings},
    )  # fmt: skip


def _after(a: int, b: int) -> bool:
    return ((b - a) & 0xFFFFFFFF) >= 0x80000000


def _error_batch(p: dict[str, Any], t: int) -> PacketBatch:
    """A recorded ICMP error: outer addresses, type and code, the quoted tuple."""
    e = p["error"]
    osrc, odst = ip_to_halves(e["outer_src"]), ip_to_halves(e["outer_dst"])
    isrc, idst = ip_to_halves(e["inner_src"]), ip_to_halves(e["inner_dst"])
    inner = e["inner"]
    proto = PROTO_ICMPV6 if ":" in e["outer_src"] else PROTO_ICMP
    cols = {"time_ns": t, "vni": 1, "proto": proto, "src_hi": osrc[0], "src_lo": osrc[1],
            "dst_hi": odst[0], "dst_lo": odst[1], "sport": 0,
            "dport": (int(e["type"]) << 8) | int(e["code"]), "length": 56,
            "inner_proto": _PROTO[inner["proto"]], "inner_src_hi": isrc[0],
            "inner_src_lo": isrc[1], "inner_dst_hi": idst[0], "inner_dst_lo": idst[1],
            "inner_sport": int(inner["sport"]), "inner_dport": int(inner["dport"])}  # fmt: skip
    return PacketBatch.from_columns(**{k: [v] for k, v in cols.items()})


def session_batch(conv: dict[str, Any], t: int, addr: dict[str, str]) -> PacketBatch:
    """A packet of the conversation's own tuple (client -> server): its entry's key."""
    probe = {"tcp": {"flags": 0x10, "seq": 0, "ack": 0, "win": 0, "payload": 0},
             "udp": {"payload": 0}, "icmp": {"type": 8, "code": 0},
             "icmpv6": {"type": 128, "code": 0}}[conv["proto"]]  # fmt: skip
    return packet_batch(conv, {"dir": 0, **probe}, t, addr)


#: ICMP(v6) query and reply types -> the request type of their class (as the recorder reads
#: entries: scripts/record_conntrack.py ICMP_CLASS).
ICMP_CLASS = {"icmp": {8: 8, 0: 8, 13: 13, 14: 13, 15: 15, 16: 15, 17: 17, 18: 17},
              "icmpv6": {128: 128, 129: 128, 139: 139, 140: 139}}  # fmt: skip


def read_target(conv: dict[str, Any], p: dict[str, Any]) -> tuple[int, int] | None:
    """Which entry the kernel's reading after p is of: None, the conversation's (TCP, UDP);
    for ICMP (direction of the requester, request type) of p's class (errors and other types:
    an echo request from the client), as the recorder reads entries (where that requester
    has none, the recorder reads the other host's entry of the class: replay does too)."""
    if conv["proto"] not in ICMP_CLASS:
        return None
    classes = ICMP_CLASS[conv["proto"]]
    typ = p.get("type")
    if p.get("error") or typ not in classes:
        return 0, {"icmp": 8, "icmpv6": 128}[conv["proto"]]
    req = classes[typ]
    return (p["dir"] if typ == req else 1 - p["dir"]), req


def read_batch(
    conv: dict[str, Any], p: dict[str, Any], t: int, addr: dict[str, str]
) -> PacketBatch:
    """The packet whose entry is compared with the kernel's reading after p: p itself; for
    an ICMP error the conversation's own tuple; for an ICMP packet the request of
    read_target (the entry the recorder reads back)."""
    tgt = read_target(conv, p)
    if tgt is None:
        return session_batch(conv, t, addr) if p.get("error") else packet_batch(conv, p, t, addr)
    return packet_batch(conv, {"dir": tgt[0], "type": tgt[1], "code": 0}, t, addr)


def packet_batch(
    conv: dict[str, Any], p: dict[str, Any], t: int, addr: dict[str, str]
) -> PacketBatch:
    """One recorded packet as a batch row (dir 0: client -> server); the conversation's own
    addresses (an IPv6 one's) where it has them, else the recording's."""
    if p.get("error"):
        return _error_batch(p, t)
    addr = conv.get("addresses", addr)
    c, s = ip_to_halves(addr["client"]), ip_to_halves(addr["server"])
    src, dst = (c, s) if p["dir"] == 0 else (s, c)
    port = int(conv["port"])
    proto = _PROTO[conv["proto"]]
    cols: dict[str, Any] = {"time_ns": t, "vni": 1, "proto": proto, "src_hi": src[0],
                            "src_lo": src[1], "dst_hi": dst[0], "dst_lo": dst[1]}  # fmt: skip
    if proto in _ICMPS:  # the recorder's echo identifier is the conversation's port
        cols.update(sport=port, dport=(int(p["type"]) << 8) | int(p["code"]), length=64)
    else:
        cols.update(sport=port if p["dir"] == 0 else 80, dport=80 if p["dir"] == 0 else port)
    if proto == PROTO_UDP:
        cols["length"] = 28 + int(p["payload"])
    if proto == PROTO_TCP:
        opt = TCP_OPT_HDR
        sack = int(p["ack"])
        if p.get("wscale") is not None:
            opt |= TCP_OPT_PRESENT | TCP_OPT_WSCALE
        if p.get("sackperm"):
            opt |= TCP_OPT_PRESENT | TCP_OPT_SACK_PERM
        for _left, right in p.get("sack") or []:
            opt |= TCP_OPT_PRESENT
            if _after(int(right), sack):
                sack = int(right)
        cols.update(tcp_flags=p["flags"], tcp_seq=p["seq"], tcp_ack=p["ack"], tcp_sack=sack,
                    tcp_win=p["win"], tcp_opt=opt, tcp_wscale=p.get("wscale") or 0,
                    tcp_len=p["payload"], length=40 + int(p["payload"]))  # fmt: skip
    return PacketBatch.from_columns(**{k: [v] for k, v in cols.items()})


@dataclass
class Entry:
    """What a datapath holds for a conversation after a packet."""

    state: int
    expires_ns: int
    seen_reply: bool
    assured: bool


class _Driver:
    """One conversation's datapath: process a packet, age, read the entry back."""

    def __init__(self, kind: str, settings: dict[str, int], policy: CompiledPolicy) -> None:
        from starfabric.fornax.manager.manager import Manager

        cfg = engine_config(settings)
        self.kind = kind
        self.sp: SoftPath
        if kind == "softpath":
            self.sp = SoftPath(cfg, SoftPathConfig(capacity=64, max_pps=1e9, burst_s=1.0))
            self.mgr = None
        else:
            eng = FastEngine(cfg) if kind == "fast" else ReferenceEngine(cfg)
            self.mgr = Manager(eng, policy, softpath_config=SoftPathConfig(capacity=64))
            self.sp = self.mgr.softpath

    def step(self, b: PacketBatch) -> int:
        """Age, then run the packet; its tracker verdict (conntrack.V_*, 5 invalid new)."""
        t = int(b.time_ns[0])
        if self.mgr is not None:
            self.mgr.tick(t)
            return int(self.mgr.process(b).verdict[0])
        self.sp.expire(t)
        r = self.sp.process(b)
        if r.outcome[0] == SoftOutcome.MISS:
            ck = canonicalize(b)
            self.sp.insert(ck, orig_dir=ck.direction, action_orig=1, action_reply=2,
                           eni_scope=0, vpc_scope=0, now_ns=t, first=True)  # fmt: skip
            r = self.sp.process(b)
        return int(r.verdict[0])

    def entry(self, b: PacketBatch, t_read: int) -> Entry | None:
        """The entry of b's tuple at t_read (None: none, or expired)."""
        keys = FlowKeys.from_batch(b)
        if self.mgr is not None:
            st, rec = self.mgr.engine.query(keys, now_ns=t_read)
            if st[0] == Status.OK and rec["expires_ns"][0] > t_read:
                fl = int(rec["flags"][0])
                return Entry(int(rec["tcp_state"][0]), int(rec["expires_ns"][0]),
                             bool(fl & CT.FLAG_SEEN_REPLY), bool(fl & CT.FLAG_ASSURED))  # fmt: skip
        slot = self.sp.lookup(canonicalize(b))
        if slot[0] < 0:
            return None
        rec = self.sp.sessions(slot)
        meta = int(rec["track"][0][0])
        if int(rec["expires_ns"][0]) <= t_read:
            return None
        return Entry(int(rec["tcp_state"][0]), int(rec["expires_ns"][0]),
                     bool((meta >> 16) & CT.FLAG_SEEN_REPLY),
                     bool((meta >> 16) & CT.FLAG_ASSURED))  # fmt: skip


@dataclass
class Replay:
    """Agreement counts of one datapath over a recording."""

    datapath: str
    packets: int = 0
    agree: dict[str, int] = field(default_factory=lambda: dict.fromkeys(METRICS, 0))
    scored: dict[str, int] = field(default_factory=lambda: dict.fromkeys(METRICS, 0))
    conversations: int = 0
    conversations_agreeing: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    def percent(self) -> dict[str, float]:
        out = {m: round(100.0 * self.agree[m] / max(self.scored[m], 1), 2) for m in METRICS}
        out["conversations"] = round(
            100.0 * self.conversations_agreeing / max(self.conversations, 1), 2
        )
        return out


def kernel_rearmed(prev_s: int, now_s: int, gap_s: float, timeouts: set[int]) -> bool | None:
    """Did the kernel re-arm between two readings gap_s apart? Without a re-arm the true
    remaining time went from [prev_s, prev_s + 1) down by gap_s (a reading equal to a timeout
    the kernel arms was read within a jiffy of arming: then at most prev_s), so the reading
    lies in floor(prev_s - gap_s) .. floor(top - gap_s) (50 ms of slack for the clocks).
    None when the readings cannot tell: the reading lies in that range and is also what a
    re-arm to an armed timeout reads (gaps close to 1 s)."""
    top = prev_s if prev_s in timeouts else prev_s + 1
    lo = int(np.floor(prev_s - gap_s - 0.05))
    hi = int(np.floor(top - gap_s + 0.05))
    if not lo <= now_s <= hi:
        return True
    if now_s in timeouts or now_s + 1 in timeouts:
        return None
    return False


def _timer_matches(kernel_s: int, ours: Entry, t_read: int) -> bool:
    rem = (ours.expires_ns - t_read) / NS
    return kernel_s in (int(np.floor(rem - 0.05)), int(np.floor(rem + 0.05)))


def replay(doc: dict[str, Any], datapath: str, names: set[str] | None = None) -> Replay:
    """Replay every conversation (or those named) through one datapath."""
    out = Replay(datapath)
    addr = doc["addresses"]
    hosts = dict.fromkeys([addr["client"], addr["server"]])
    for conv in doc["conversations"]:
        hosts.update(dict.fromkeys(conv.get("addresses", {}).values()))
    policy = allow_all_policy(list(hosts))
    state_names = {s.name: int(s) for s in TcpState}
    armed = {int(v) for k, v in doc.get("sysctl_defaults", {}).items() if "timeout" in k}
    for conv in doc["conversations"]:
        if names is not None and conv["name"] not in names:
            continue
        drv = _Driver(datapath, conv["settings"], policy)
        t0 = 10 * NS  # the datapaths' clock starts at 0; leave room before the first packet
        conv_ok = True
        # per entry read (read_target: an ICMP conversation's readings may be of several):
        # our entry and the kernel's reading after the last packet read it, its ORIGINAL side
        last: dict[tuple[int, int] | None, tuple[Entry | None, dict[str, Any] | None]] = {}
        orig_dirs: dict[tuple[int, int] | None, int] = {}
        for i, (p, k) in enumerate(zip(conv["packets"], conv["kernel"], strict=True)):
            is_error = bool(p.get("error"))
            t, t_read = t0 + int(k["t_ns"]), t0 + int(k["t_read_ns"])
            b = packet_batch(conv, p, t, addr)
            tgt = read_target(conv, p)
            v = drv.step(b)
            ours = drv.entry(read_batch(conv, p, t, addr), t_read)
            if ours is None and tgt is not None:  # the other requester's entry of the class
                alt = (1 - tgt[0], tgt[1])
                ours = drv.entry(packet_batch(conv, {"dir": alt[0], "type": alt[1], "code": 0},
                                              t, addr), t_read)  # fmt: skip
                tgt = alt if ours is not None else tgt
            prev, prev_k = last.get(tgt, (None, None))
            orig_dir = orig_dirs.get(tgt, -1)
            if prev is not None and prev.expires_ns <= t:
                prev = None
            seen_before = prev is not None and prev.seen_reply
            if not is_error and ours is not None and (prev is None or v == CT.V_NEW):
                orig_dir = orig_dirs[tgt] = int(p["dir"])
            if v in (CT.V_INVALID, CT.V_INVALID_NEW):
                mine_v = "invalid"
            elif v == CT.V_RELATED:
                mine_v = "related"
            elif v == CT.V_UNTRACKED:
                mine_v = "untracked"
            elif prev is None or v == CT.V_NEW:
                mine_v = "new"
            else:
                mine_v = "established" if (p["dir"] != orig_dir or seen_before) else "new"
            ke = k["entry"]
            ok: dict[str, bool] = {"verdict": mine_v == k["verdict"]}
            if ke is None or ours is None:
                ok["state"] = ke is None and ours is None
            else:
                ok["state"] = (
                    (conv["proto"] != "tcp" or state_names.get(ke["state"], -1) == ours.state)
                    and ke["seen_reply"] == ours.seen_reply
                    and ke["assured"] == ours.assured
                )
            if ke is not None and ours is not None:
                ok["timer"] = _timer_matches(int(ke["timeout_s"]), ours, t_read)
            gap = (int(k["t_read_ns"]) - int(prev_k["t_read_ns"])) / NS if prev_k else 0.0
            if prev is not None and prev_k and prev_k["entry"] and ke and ours and gap >= 1.0:
                k_re = kernel_rearmed(prev_k["entry"]["timeout_s"], ke["timeout_s"], gap, armed)
                if k_re is not None:
                    ok["rearm"] = k_re == (ours.expires_ns != prev.expires_ns)
            out.packets += 1
            for m, good in ok.items():
                out.scored[m] += 1
                out.agree[m] += int(good)
            if not all(ok.values()):
                conv_ok = False
                if len(out.mismatches) < 50:
                    out.mismatches.append({"conversation": conv["name"], "packet": i,
                                           "failed": [m for m, g in ok.items() if not g],
                                           "kernel": k, "ours": ours and ours.__dict__,
                                           "ours_verdict": mine_v})  # fmt: skip
            last[tgt] = (ours, k)
        out.conversations += 1
        out.conversations_agreeing += int(conv_ok)
    return out


__all__ = ["DATAPATHS", "FORMAT", "Replay", "engine_config", "load_recording", "replay"]
