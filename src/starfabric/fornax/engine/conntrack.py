"""Connection tracking as Linux nf_conntrack does it: ONE implementation (numba-compiled, also
callable from plain Python) shared by the fast engine, the reference engine and the software
path, so the three cannot disagree about a packet.

Mechanisms follow the kernel's net/netfilter/nf_conntrack_proto_{tcp,udp,icmp,generic}.c and
nf_conntrack_core.c (6.x; checked against a recording of 6.18, tests/data/conntrack):
  TCP   the flag-driven state table (tcp.py), sIG/sIV, window tracking per direction
        (td_end / td_maxend / td_maxwin / td_maxack / td_scale / flags, `tcp_in_window` with
        its four bounds, the overshoot work-around, SACK and window scale options), the
        retransmission and last-packet bookkeeping, the RST checks (exact seq, in-window
        inexact kept for a challenge ACK, below td_maxack invalid unless
        tcp_ignore_invalid_rst, the early-drop states), ignored-SYN re-sync, RFC 5961
        challenge ACKs in LAST_ACK, simultaneous open, reopening from TIME_WAIT/CLOSE, the
        timeout choice (max_retrans, RST, unacknowledged data, zero window caps; a loose
        pickup's 300 s cap before a reply; no re-arm on a SYN retransmit), SEEN_REPLY and
        ASSURED, killing an entry whose only reply is a RST, and `nf_tcp_handle_invalid`
        (an out-of-window FIN/RST answering one lowers an assured entry's timeout).
  UDP   unreplied, replied (< 2 s after creation: still the unreplied timeout), stream
        (replied and older than 2 s: stream timeout, ASSURED).
  ICMP  only echo/timestamp/info/address-mask requests (ICMPv6: echo request, node info
        query) create an entry, one per requester, identifier and class (keys.py: both
        hosts requesting with one identifier hold two), which remembers the request type; on it only that request
        from the requester and its reply from the peer are tracked (the kernel's tuple holds
        the type: a reply from the requester, another class's message, an error type quoting
        nothing or a type above 18 finds no entry and cannot create one, INVALID), each
        re-arming the ICMP timeout. For ICMP(v6) the tracker's `flags` argument is the
        packet's type (pkt_flags). An ICMP(v6) error
        (icmp_error_quotes) is RELATED to the entry of the tuple it quotes, inverted: it is
        forwarded with that entry's action and changes nothing (no state, timer or
        SEEN_REPLY); quoting no entry it is INVALID and creates none.
  ICMPv6 neighbour discovery and MLD (untracked) create no entry and are not INVALID either
        (V_UNTRACKED: forwarded by the policy alone, whatever the INVALID policy).
  other the generic timeout.
INVALID and ignored packets never change the state or re-arm the timer (the one exception is
the kernel's own: nf_tcp_handle_invalid). A packet without header fields (OPT_HDR clear, e.g.
a synthetic workload that has flags only) is tracked by its flags: the window checks, the RST
sequence checks and the retransmission bookkeeping are skipped for it.

State lives in row `ri` of a 2-D uint64 array: one meta word at column `mi` (bits 0..23:
protocol, TCP state, FLAG_* bits; 24..63: the tracker's small fields, below) and N_TRACK words
from column `b` (the engine's records, layout.py, or the software path's tracker rows). The
row functions (ct_new, ct_packet, install_state) load it once, compute on registers and store
it once; the engine's hit path calls the register form (ct_packet_s) on words it loads once
beside group B's ECC check. Sequence arithmetic is modulo 2**32 as in the kernel.
"""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
from starfabric.errors import InvariantError
from starfabric.fornax.engine.tcp import TCP_IGNORE, TCP_INVALID, TRANSITIONS, TcpState

# ---- meta word (layout.W_META): bits 0..23 are the engine's, 24..63 the tracker's
FLAG_ORIG_B = 0x01
FLAG_MISMATCH_REPORTED = 0x02
FLAG_SEEN_REPLY = 0x04  # IPS_SEEN_REPLY: a non-invalid packet went the REPLY way
FLAG_ASSURED = 0x08  # IPS_ASSURED
SH_LAST_DIR = 24  # 1 bit
SH_LAST_INDEX = 25  # 3 bits (TcpEvent)
SH_RETRANS = 28  # 8 bits
SH_LAST_FLAGS = 36  # 4 bits: LF_*
SH_LAST_WSCALE = 40  # 4 bits
SH_SCALE0 = 44  # 4 bits per direction (ORIGINAL, REPLY)
SH_TFLAGS0 = 52  # 6 bits per direction: TF_*
LF_WSCALE = 1
LF_SACK_PERM = 2
LF_CHALLENGE_ACK = 4  # IP_CT_EXP_CHALLENGE_ACK
LF_SIMULTANEOUS_OPEN = 8  # IP_CT_TCP_SIMULTANEOUS_OPEN
TF_CLOSE_INIT = 1
TF_WINDOW_SCALE = 2
TF_SACK_PERM = 4
TF_BE_LIBERAL = 8
TF_DATA_UNACK = 16
TF_MAXACK_SET = 32
#: Meta bits owned by the tracker (copied with its words when a session moves).
TRACK_META_MASK = (
    ((1 << 64) - 1) & ~((1 << 16) - 1) & ~((FLAG_ORIG_B | FLAG_MISMATCH_REPORTED) << 16)
)

# ---- tracker words, relative to b
T_END = 0  # td_end ORIGINAL | REPLY << 32   (UDP: creation time + stream delay, ns)
T_MAXEND = 1
T_MAXWIN = 2
T_MAXACK = 3
T_LAST = 4  # last_seq | last_ack << 32
T_LAST2 = 5  # last_end | last_win << 32
T_EXPIRES = 6  # absolute deadline, ns on the packets' clock
N_TRACK = 7

# ---- packet option bits (PacketBatch.tcp_opt)
OPT_PRESENT = 1  # the header has options (doff > 5): parsing them resets scale and flags
OPT_SACK_PERM = 2
OPT_WSCALE = 4
OPT_HDR = 8  # seq / ack / window / length columns are the segment's own

# ---- verdicts
V_ACCEPT = 0
V_IGNORE = 1
V_INVALID = 2
V_REOPEN = 3  # a SYN on a closed/aborted connection: the entry ends, the SYN is a new one
V_KILL = 4  # accepted, and the entry is deleted (a RST was the only reply)
# Datapath-level verdicts of a session's first packet (the software path reports them):
V_INVALID_NEW = 5  # the kernel creates no entry (INVALID, no session)
V_NEW = 6  # a new entry was created and the packet accepted
V_RELATED = 7  # an ICMP error quoting the entry's tuple: forwarded, the entry left as it is
V_UNTRACKED = 8  # ICMPv6 neighbour discovery / MLD: the kernel tracks none (ct state untracked)

# ---- settings array (EngineConfig.tracker_params)
C_LOOSE = 0
C_BE_LIBERAL = 1
C_MAX_RETRANS = 2
C_IGNORE_INVALID_RST = 3
C_TO = 4  # + TcpState, then the classes below
TO_RETRANS = 10
TO_UNACK = 11
TO_UDP_UNREPLIED = 12
TO_UDP_STREAM = 13
TO_ICMP = 14
TO_GENERIC = 15
C_UDP_STREAM_DELAY = C_TO + 16
N_CFG = C_UDP_STREAM_DELAY + 1

P_TCP = 6
P_UDP = 17
P_ICMP = 1
P_ICMP6 = 58
_NO, _SS, _SR, _ES, _FW, _CW, _LA, _TW, _CL, _S2 = (int(s) for s in TcpState)
_IV = TCP_INVALID
_IG = TCP_IGNORE
I_SYN, I_SYNACK, I_FIN, I_ACK, I_RST, I_NONE = range(6)
F_FIN, F_SYN, F_RST, F_PSH, F_ACK, F_URG, F_ECE, F_CWR = 1, 2, 4, 8, 16, 32, 64, 128
MAXACKWINCONST = 66000
M32 = 0xFFFFFFFF
_TABLE = np.ascontiguousarray(TRANSITIONS).astype(np.int64)
#: tcp_valid_flags: FIN/SYN/RST/ACK/URG combinations the kernel accepts (PSH/ECE/CWR ignored).
_VALID = np.zeros(64, np.uint8)
for _f in (F_SYN, F_SYN | F_URG, F_SYN | F_ACK, F_RST, F_RST | F_ACK, F_FIN | F_ACK,
           F_FIN | F_ACK | F_URG, F_ACK, F_ACK | F_URG):  # fmt: skip
    _VALID[_f] = 1
_ICMP_NEW = np.zeros(256, np.uint8)
_ICMP_NEW[[8, 13, 15, 17]] = 1  # echo, timestamp, info request, address mask request
_ICMP6_NEW = np.zeros(256, np.uint8)
_ICMP6_NEW[[128, 139]] = 1  # echo request, node information query
#: ICMPv6 types nf_conntrack never tracks (icmpv6_error's noct_valid_new: MLD query, report,
#: done, MLDv2 report; router/neighbour solicitation and advertisement; a redirect is not one):
#: the packet gets IP_CT_UNTRACKED, no entry and no INVALID verdict.
_ICMP6_UNTRACKED = np.zeros(256, np.uint8)
_ICMP6_UNTRACKED[[130, 131, 132, 133, 134, 135, 136, 143]] = 1

#: ICMP error types (icmp_is_err): destination unreachable, source quench, redirect, time
#: exceeded, parameter problem; above NR_ICMP_TYPES (18) the kernel calls a type invalid.
_ICMP_ERR = np.zeros(256, np.uint8)
_ICMP_ERR[[3, 4, 5, 11, 12]] = 1
#: ICMP types nf_ct_invert_tuple can invert (queries and their replies): an error quoting any
#: other ICMP packet (e.g. another error) names no entry.
_ICMP_INV = np.zeros(256, np.uint8)
_ICMP_INV[[0, 8, 13, 14, 15, 16, 17, 18]] = 1
_ICMP6_INV = np.zeros(256, np.uint8)
_ICMP6_INV[[128, 129, 139, 140]] = 1
#: The reply type of each request type that creates an entry (icmp_invert_tuple's map).
_ICMP_REPLY = np.zeros(256, np.int64)
_ICMP_REPLY[[8, 13, 15, 17]] = [0, 14, 16, 18]
_ICMP6_REPLY = np.zeros(256, np.int64)
_ICMP6_REPLY[[128, 139]] = [129, 140]

U64_M32 = np.uint64(M32)
U0 = np.uint64(0)


# ---------------------------------------------------------------------------- field access
# The tracker computes on its state held in registers: the meta word `m` and the seven tracker
# words (te td_end, tx td_maxend, tw td_maxwin, tk td_maxack, l1 last seq/ack, l2 last
# end/win, ex deadline), loaded once per packet and stored once (the row functions at the end).
# Reading and writing the row field by field made every update a load-modify-store of the same
# word, a dependency chain through memory that cost ~10x the arithmetic.


@njit_inline
def _u32(x):
    return np.int64(x) & M32


@njit_inline
def before(a, b):  # -> bool
    """Kernel before(): (s32)(a - b) < 0."""
    d = (np.int64(a) - np.int64(b)) & M32
    return d >= 0x80000000


@njit_inline
def after(a, b):  # -> bool
    return before(b, a)


@njit_inline
def _h(wd, d):
    """32-bit half d (0: ORIGINAL, 1: REPLY) of a tracker word."""
    return np.int64((wd >> np.uint64(32 * d)) & U64_M32)


@njit_inline
def _sh(wd, d, v):
    """The tracker word with half d set to v (modulo 2**32)."""
    sh = np.uint64(32 * d)
    return (wd & ~(U64_M32 << sh)) | (np.uint64(np.int64(v) & M32) << sh)


@njit_inline
def _mg(m, shift, width):
    return np.int64((m >> np.uint64(shift)) & np.uint64((1 << width) - 1))


@njit_inline
def _ms(m, shift, width, v):
    k = np.uint64((1 << width) - 1) << np.uint64(shift)
    return (m & ~k) | ((np.uint64(v) << np.uint64(shift)) & k)


@njit_inline
def _state(m):
    return _mg(m, 8, 8)


@njit_inline
def _flag(m, f) -> bool:
    return _mg(m, 16, 8) & f != 0


@njit_inline
def _setflag(m, f):
    return _ms(m, 16, 8, _mg(m, 16, 8) | f)


@njit_inline
def _tf(m, d):
    return _mg(m, SH_TFLAGS0 + 6 * d, 6)


@njit_inline
def _set_tf(m, d, v):
    return _ms(m, SH_TFLAGS0 + 6 * d, 6, v)


@njit_inline
def _scale(m, d):
    return _mg(m, SH_SCALE0 + 4 * d, 4)


@njit_inline
def _set_scale(m, d, v):
    return _ms(m, SH_SCALE0 + 4 * d, 4, v)


@njit_inline
def _last(m, index, d):
    """m with the last packet's index and direction recorded."""
    return _ms(_ms(m, SH_LAST_INDEX, 3, index), SH_LAST_DIR, 1, d)


@njit_inline
def state_of(row, ri, mi):
    """TCP state of the tracker row (conntrack state, tcp.TcpState)."""
    return _state(row[ri, mi])


@njit_inline
def valid_flags(flags):  # -> bool
    """tcp_error's flag check: False for combinations no TCP sends (INVALID, never tracked)."""
    return _VALID[np.int64(flags) & (F_FIN | F_SYN | F_RST | F_ACK | F_URG)] == 1


@njit_inline
def tcp_index(flags):
    """get_conntrack_index: RST, then SYN(-ACK), FIN, ACK, none."""
    if flags & F_RST:
        return I_RST
    if flags & F_SYN:
        return I_SYNACK if flags & F_ACK else I_SYN
    if flags & F_FIN:
        return I_FIN
    if flags & F_ACK:
        return I_ACK
    return I_NONE


@njit_inline
def _seg_end(seq, plen, flags):
    return _u32(seq + plen + (1 if flags & F_SYN else 0) + (1 if flags & F_FIN else 0))


@njit_inline
def _max_scale(wscale):
    """RFC 7323: a window scale above 14 is taken as 14 (TCP_MAX_WSCALE)."""
    w = np.int64(wscale)
    return w if w < 14 else np.int64(14)


@njit_inline
def _options(m, d, opt, wscale):
    """tcp_options into direction d: only when the header has options (then they reset, all
    but BE_LIBERAL, which the kernel keeps: an entry picked up or installed liberally stays
    so when a SYN's options arrive)."""
    if not opt & OPT_PRESENT:
        return m
    f = _tf(m, d) & TF_BE_LIBERAL
    sc = 0
    if opt & OPT_SACK_PERM:
        f |= TF_SACK_PERM
    if opt & OPT_WSCALE:
        sc = _max_scale(wscale)
        f |= TF_WINDOW_SCALE
    return _set_scale(_set_tf(m, d, f), d, sc)


@njit_inline
def _init_sender(m, te, tx, tw, d, end, win, opt, wscale):
    te = _sh(te, d, end)
    tx = _sh(tx, d, end)
    tw = _sh(tw, d, win if win != 0 else 1)
    m = _options(m, d, opt, wscale)
    r = 1 - d
    if d == 1 and not (_tf(m, d) & TF_WINDOW_SCALE and _tf(m, r) & TF_WINDOW_SCALE):
        m = _set_scale(_set_scale(m, d, 0), r, 0)
    return m, te, tx, tw


@njit_inline
def _log_invalid(m, d, cfg, ret):
    if _tf(m, d) & TF_BE_LIBERAL or cfg[C_BE_LIBERAL] != 0:
        return V_ACCEPT
    return ret


# ---------------------------------------------------------------------------- tcp_in_window


@njit_inline
def tcp_in_window(m, te, tx, tw, tk, l1, l2, d, index, flags, seq, ack, sack_pkt, win, opt,
                  wscale, plen, cfg):  # fmt: skip
    """The window checks and updates of one segment from direction d (the sender s; r the
    receiver): (V_ACCEPT, V_IGNORE or V_INVALID, m, te, tx, tw, tk, l1, l2)."""
    s = d
    r = 1 - d
    stored = _state(m)
    win_raw = np.int64(win)
    win = np.int64(win)
    end = _seg_end(seq, plen, flags)
    sack = np.int64(sack_pkt) if _tf(m, r) & TF_SACK_PERM else np.int64(ack)
    ack = np.int64(ack)
    seq = np.int64(seq)
    if _h(tw, s) == 0:
        if flags & F_SYN:
            m, te, tx, tw = _init_sender(m, te, tx, tw, d, end, win, opt, wscale)
            if not flags & F_ACK:
                return V_ACCEPT, m, te, tx, tw, tk, l1, l2
        else:
            te = _sh(te, s, end)
            swin = _u32(win << _scale(m, s))
            mw = swin if swin != 0 else 1
            tw = _sh(tw, s, mw)
            tx = _sh(tx, s, end + mw)
            if _h(tw, r) == 0:
                te = _sh(te, r, sack)
                tx = _sh(tx, r, sack)
            elif sack == _u32(_h(te, r) + 1):
                te = _sh(te, r, sack)
    elif (
        flags & F_SYN and after(end, _h(te, s)) and (stored == _SS or stored == _SR)  # noqa: SIM109
    ):
        m, te, tx, tw = _init_sender(m, te, tx, tw, d, end, win, opt, wscale)
        if d == 1 and not flags & F_ACK:
            return V_ACCEPT, m, te, tx, tw, tk, l1, l2
    r_end = _h(te, r)
    if not flags & F_ACK or (flags & F_RST and ack == 0):
        ack = r_end
        sack = r_end
    if flags & F_RST and seq == 0 and stored == _SS:
        seq = _h(te, s)
        end = seq
    s_end = _h(te, s)
    s_maxend = _h(tx, s)
    r_maxwin = _h(tw, r)
    s_maxwin = _h(tw, s)
    maw = s_maxwin if s_maxwin > MAXACKWINCONST else MAXACKWINCONST
    if not before(seq, _u32(s_maxend + 1)):
        overshot = _u32(end - s_maxend + 1)
        ack_ok = after(sack, _u32(r_end - maw - 1))
        in_recv = r_maxwin != 0 and after(end, _u32(s_end - r_maxwin - 1))
        if in_recv and ack_ok and overshot <= r_maxwin and before(sack, _u32(r_end + 1)):
            te = _sh(te, s, end)
            m = _set_tf(m, s, _tf(m, s) | TF_DATA_UNACK)
            return _log_invalid(m, s, cfg, V_IGNORE), m, te, tx, tw, tk, l1, l2
        return _log_invalid(m, s, cfg, V_INVALID), m, te, tx, tw, tk, l1, l2
    if not before(sack, _u32(r_end + 1)):
        return _log_invalid(m, s, cfg, V_INVALID), m, te, tx, tw, tk, l1, l2
    if not (r_maxwin == 0 or after(end, _u32(s_end - r_maxwin - 1))):
        return _log_invalid(m, s, cfg, V_IGNORE), m, te, tx, tw, tk, l1, l2
    if not after(sack, _u32(r_end - maw - 1)):
        return _log_invalid(m, s, cfg, V_IGNORE), m, te, tx, tw, tk, l1, l2
    if not flags & F_SYN:
        win = _u32(win << _scale(m, s))
    swin = _u32(win + (sack - ack))
    if s_maxwin < swin:
        tw = _sh(tw, s, swin)
    if after(end, s_end):
        te = _sh(te, s, end)
        m = _set_tf(m, s, _tf(m, s) | TF_DATA_UNACK)
    if flags & F_ACK:
        if not _tf(m, s) & TF_MAXACK_SET:
            tk = _sh(tk, s, ack)
            m = _set_tf(m, s, _tf(m, s) | TF_MAXACK_SET)
        elif after(ack, _h(tk, s)):
            tk = _sh(tk, s, ack)
    if r_maxwin != 0 and after(end, s_maxend):
        tw = _sh(tw, r, r_maxwin + _u32(end - s_maxend))
    if after(_u32(sack + win), _u32(_h(tx, r) - 1)):
        tx = _sh(tx, r, _u32(sack + win) + (1 if win == 0 else 0))
    if ack == r_end:
        m = _set_tf(m, r, _tf(m, r) & ~TF_DATA_UNACK)
    if index == I_ACK:
        if (
            _mg(m, SH_LAST_DIR, 1) == d
            and _h(l1, 0) == seq
            and _h(l1, 1) == ack
            and _h(l2, 0) == end
            and _h(l2, 1) == win_raw
        ):
            m = _ms(m, SH_RETRANS, 8, (_mg(m, SH_RETRANS, 8) + 1) & 0xFF)
        else:
            m = _ms(_ms(m, SH_LAST_DIR, 1, d), SH_RETRANS, 8, 0)
            l1 = _sh(_sh(l1, 0, seq), 1, ack)
            l2 = _sh(_sh(l2, 0, end), 1, win_raw)
    return V_ACCEPT, m, te, tx, tw, tk, l1, l2


@njit_inline
def _handle_invalid(m, ex, d, index, t, cfg):
    """nf_tcp_handle_invalid: (True when it lowered the timeout, m, ex); it lowers an assured
    entry's timeout when its FIN/RST answers an out-of-window FIN/RST of the other direction."""
    if not _flag(m, FLAG_ASSURED):
        return False, m, ex
    if index != I_RST and index != I_FIN:
        return False, m, ex
    li = _mg(m, SH_LAST_INDEX, 3)
    if _mg(m, SH_LAST_DIR, 1) != d and (li == I_FIN or li == I_RST):  # noqa: SIM109
        expires = np.int64(ex) - t
        if expires < 120_000_000_000:
            return False, m, ex
        to = cfg[C_TO + TO_UNACK]
        if expires > to:
            return True, m, np.uint64(t + to)
        return False, m, ex
    return False, _last(m, index, d), ex


# ---------------------------------------------------------------------------- tcp_packet


@njit_inline
def _reset_dir(m, te, tx, tw, tk, d):
    te = _sh(te, d, 0)
    tx = _sh(tx, d, 0)
    tw = _sh(tw, d, 0)
    tk = _sh(tk, d, 0)
    m = _set_tf(_set_scale(m, d, 0), d, _tf(m, d) & TF_BE_LIBERAL)
    return m, te, tx, tw, tk


@njit_inline
def tcp_packet(m, te, tx, tw, tk, l1, l2, ex, d, flags, seq, ack, sack, win, opt, wscale, plen,
               t, cfg):  # fmt: skip
    """nf_conntrack_tcp_packet for an entry (d: 0 ORIGINAL, 1 REPLY) on its tracker state:
    (verdict, re-armed, m, te, tx, tw, tk, l1, l2, ex)."""
    if not valid_flags(flags):
        return V_INVALID, False, m, te, tx, tw, tk, l1, l2, ex
    hdr = opt & OPT_HDR != 0
    old = _state(m)
    stored = old
    index = tcp_index(flags)
    new = _TABLE[d, index, old]
    skip_window = False
    ignore = False
    last_dir = _mg(m, SH_LAST_DIR, 1)
    last_index = _mg(m, SH_LAST_INDEX, 3)
    last_flags = _mg(m, SH_LAST_FLAGS, 4)
    if new == _SS and old >= _TW:
        closing = (_tf(m, 0) | _tf(m, 1)) & TF_CLOSE_INIT
        if closing or (last_dir == d and last_index == I_RST):
            return V_REOPEN, False, m, te, tx, tw, tk, l1, l2, ex
        ignore = True
    if new == _IG or ignore:
        lt = last_dir
        if (
            index == I_SYNACK
            and last_index == I_SYN
            and lt != d
            and (not hdr or _u32(ack) == _h(l2, 0))
        ):
            old = _SS
            new = _SR
            le = _h(l2, 0)
            lw = _h(l2, 1)
            te = _sh(te, lt, le)
            tx = _sh(tx, lt, le)
            tw = _sh(tw, lt, lw if lw != 0 else 1)
            m = _set_scale(m, lt, _mg(m, SH_LAST_WSCALE, 4))
            lf = last_flags & ~LF_CHALLENGE_ACK
            m = _ms(m, SH_LAST_FLAGS, 4, lf)
            tf = 0
            if lf & LF_WSCALE:
                tf |= TF_WINDOW_SCALE
            if lf & LF_SACK_PERM:
                tf |= TF_SACK_PERM
            m = _set_tf(m, lt, tf)
            m, te, tx, tw, tk = _reset_dir(m, te, tx, tw, tk, d)
        else:
            m = _last(m, index, d)
            l1 = _sh(l1, 0, seq)
            l2 = _sh(_sh(l2, 0, _seg_end(seq, plen, flags)), 1, win)
            if index == I_SYN and d == 0:
                lf = 0
                lw = 0
                if opt & OPT_WSCALE:
                    lf |= LF_WSCALE
                    lw = _max_scale(wscale)
                if opt & OPT_SACK_PERM:
                    lf |= LF_SACK_PERM
                if old == _LA:
                    lf |= LF_CHALLENGE_ACK
                m = _ms(_ms(m, SH_LAST_FLAGS, 4, lf), SH_LAST_WSCALE, 4, lw)
            if old == _SS and index == I_ACK and d == 1:
                l1 = _sh(l1, 1, ack)
            return V_IGNORE, False, m, te, tx, tw, tk, l1, l2, ex
    elif new == _IV:
        return V_INVALID, False, m, te, tx, tw, tk, l1, l2, ex
    elif new == _TW:
        if (
            old == _LA
            and index == I_ACK
            and last_dir != d
            and last_index == I_SYN
            and last_flags & LF_CHALLENGE_ACK
        ):
            m = _ms(m, SH_LAST_FLAGS, 4, last_flags & ~LF_CHALLENGE_ACK)
            return V_IGNORE, False, m, te, tx, tw, tk, l1, l2, ex
    elif new == _S2:
        m = _ms(m, SH_LAST_FLAGS, 4, last_flags | LF_SIMULTANEOUS_OPEN)
    elif new == _SR:
        if d == 1 and index == I_ACK and last_flags & LF_SIMULTANEOUS_OPEN:
            new = _ES
    elif new == _CL and index == I_RST:
        if stored == _FW or stored == _LA or stored == _TW or stored == _CL or stored == _CW:  # noqa: SIM109
            skip_window = True
        elif hdr:
            li = last_index
            established = stored == _ES and _flag(m, FLAG_ASSURED)
            brk = False
            if _tf(m, 1 - d) & TF_MAXACK_SET and li != I_SYN:
                seq32 = _u32(seq)
                maxack = _h(tk, 1 - d)
                if seq32 == 0 and not established:
                    brk = True
                else:
                    if before(seq32, maxack) and cfg[C_IGNORE_INVALID_RST] == 0:
                        return V_INVALID, False, m, te, tx, tw, tk, l1, l2, ex
                    if (
                        not established
                        or seq32 == maxack
                        or (li == I_ACK and last_dir == d and seq32 == _h(l2, 0))
                    ):
                        brk = True
                    else:
                        new = old
            if not brk:
                seen = _flag(m, FLAG_SEEN_REPLY)
                assured = _flag(m, FLAG_ASSURED)
                # a RST answering a SYN let through comes from the SYN's peer: one from the
                # SYN's own side is window-checked on 6.18 (kernel_edges.json long_909_030
                # and the rd_* probes: after an ignored ACK either side's RST skips it)
                if (
                    ((seen and li == I_SYN and last_dir != d) or (not assured and li == I_ACK))
                    and _u32(ack) == _h(l2, 0)
                ) or (old == _SS and li == I_ACK and last_dir == 1 and _u32(seq) == _h(l1, 1)):
                    skip_window = True
    if not skip_window and hdr:
        res, m, te, tx, tw, tk, l1, l2 = tcp_in_window(m, te, tx, tw, tk, l1, l2, d, index, flags,
                                                       seq, ack, sack, win, opt, wscale, plen,
                                                       cfg)  # fmt: skip
        if res == V_IGNORE:
            return V_IGNORE, False, m, te, tx, tw, tk, l1, l2, ex
        if res == V_INVALID:
            low, m, ex = _handle_invalid(m, ex, d, index, t, cfg)
            return V_INVALID, low, m, te, tx, tw, tk, l1, l2, ex
    m = _ms(_last(m, index, d), 8, 8, new)
    if old != new and new == _FW:
        m = _set_tf(m, d, _tf(m, d) | TF_CLOSE_INIT)
    to_new = cfg[C_TO + new]
    to_retrans = cfg[C_TO + TO_RETRANS]
    to_unack = cfg[C_TO + TO_UNACK]
    if _mg(m, SH_RETRANS, 8) >= cfg[C_MAX_RETRANS] and to_new > to_retrans:
        timeout = to_retrans
    elif index == I_RST:
        timeout = cfg[C_TO + _CL]
    elif (_tf(m, 0) | _tf(m, 1)) & TF_DATA_UNACK and to_new > to_unack:
        timeout = to_unack
    elif _h(l2, 1) == 0 and hdr and to_new > to_retrans:
        timeout = to_retrans
    else:
        timeout = to_new
    if not _flag(m, FLAG_SEEN_REPLY):
        if flags & F_RST:
            return V_KILL, False, m, te, tx, tw, tk, l1, l2, ex
        if index == I_SYN and old == _SS:
            return V_ACCEPT, False, m, te, tx, tw, tk, l1, l2, ex
        if new == _ES and timeout > to_unack:
            timeout = to_unack
    elif not _flag(m, FLAG_ASSURED) and (old == _SR or old == _ES) and new == _ES:  # noqa: SIM109
        m = _setflag(m, FLAG_ASSURED)
    return V_ACCEPT, True, m, te, tx, tw, tk, l1, l2, np.uint64(t + timeout)


# ---------------------------------------------------------------------------- all protocols


def _ct_packet_s(m, te, tx, tw, tk, l1, l2, ex, proto, d, flags, seq, ack, sack, win, opt, wscale,
                plen, t, cfg):  # fmt: skip
    """ct_packet on a tracker state held in registers (the engine's hit path):
    (verdict, re-armed, m, te, tx, tw, tk, l1, l2, ex)."""
    if proto == P_TCP:
        v, rearmed, m, te, tx, tw, tk, l1, l2, ex = tcp_packet(
            m, te, tx, tw, tk, l1, l2, ex, d, flags, seq, ack, sack, win, opt, wscale, plen, t,
            cfg,
        )  # fmt: skip
        if d == 1 and (v == V_ACCEPT or v == V_IGNORE):  # noqa: SIM109
            m = _setflag(m, FLAG_SEEN_REPLY)
        return v, rearmed, m, te, tx, tw, tk, l1, l2, ex
    if proto == P_UDP:
        if _flag(m, FLAG_SEEN_REPLY):
            extra = cfg[C_TO + TO_UDP_UNREPLIED]
            if t > np.int64(te):
                extra = cfg[C_TO + TO_UDP_STREAM]
                m = _setflag(m, FLAG_ASSURED)
        else:
            extra = cfg[C_TO + TO_UDP_UNREPLIED]
    elif proto == P_ICMP or proto == P_ICMP6:  # noqa: SIM109
        req = np.int64(te)  # the request type that created the entry (0: not known)
        if req != 0:
            rep = _ICMP_REPLY[req & 0xFF] if proto == P_ICMP else _ICMP6_REPLY[req & 0xFF]
            if flags != (req if d == 0 else rep):  # another tuple: no entry, none created
                return V_INVALID, False, m, te, tx, tw, tk, l1, l2, ex
        extra = cfg[C_TO + TO_ICMP]
    else:
        extra = cfg[C_TO + TO_GENERIC]
    if d == 1:
        m = _setflag(m, FLAG_SEEN_REPLY)
    return V_ACCEPT, True, m, te, tx, tw, tk, l1, l2, np.uint64(t + extra)


@njit_inline
def pkt_flags(proto, tcp_flags, icmp_type):
    """The tracker's `flags` argument for a packet: its TCP flags; an ICMP(v6) packet's type
    (which an ICMP entry's class is checked against)."""
    p = np.int64(proto)
    if p == P_ICMP or p == P_ICMP6:  # noqa: SIM109
        return np.int64(icmp_type) & 0xFF
    return np.int64(tcp_flags)


#: ct_packet on registers, compiled once (the row functions' core: one signature, int64
#: packet fields and the settings tuple) and inlined into the engine's hit path
#: (ct_packet_s_inline: no call, and the tracker's locals stay in registers).
ct_packet_s = njit(_ct_packet_s)
ct_packet_s_inline = njit_inline(_ct_packet_s)


@njit
def icmp_error_quotes(proto, icmp_type, inner_proto, inner_type, dst_hi, dst_lo, in_src_hi,
                      in_src_lo) -> bool:  # fmt: skip
    """nf_conntrack_icmpv4_error / icmpv6_error, then nf_conntrack_inet_error: True when the
    packet is an ICMP(v6) error whose quoted tuple, inverted, is looked up as the entry it is
    RELATED to: an error type (ICMPv6: below 128), a quoted header, an invertible inner ICMP
    packet (a query or reply), and the outer destination equal to the quoted packet's source
    (the error goes back to the sender; otherwise the kernel attaches no entry: INVALID)."""
    it = np.int64(icmp_type)
    if inner_proto == 0:
        return False
    if proto == P_ICMP:
        if it > 18 or _ICMP_ERR[it & 0xFF] == 0:
            return False
    elif proto == P_ICMP6:
        if it >= 128:
            return False
    else:
        return False
    if inner_proto == P_ICMP and _ICMP_INV[np.int64(inner_type) & 0xFF] == 0:
        return False
    if inner_proto == P_ICMP6 and _ICMP6_INV[np.int64(inner_type) & 0xFF] == 0:
        return False
    return dst_hi == in_src_hi and dst_lo == in_src_lo


@njit
def untracked(proto, icmp_type) -> bool:
    """The packet is one nf_conntrack leaves untracked (ICMPv6 ND/MLD: _ICMP6_UNTRACKED)."""
    return np.int64(proto) == P_ICMP6 and _ICMP6_UNTRACKED[np.int64(icmp_type) & 0xFF] == 1


@njit
def cfg_tuple(cfg):
    """The settings array as a tuple (N_CFG values): passed by value, so a kernel's hit path
    carries no reference-counted array into the tracker."""
    return (cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5], cfg[6], cfg[7], cfg[8], cfg[9],
            cfg[10], cfg[11], cfg[12], cfg[13], cfg[14], cfg[15], cfg[16], cfg[17], cfg[18],
            cfg[19], cfg[20])  # fmt: skip


if N_CFG != 21:  # an invariant of this module, checked at import (an assert vanishes under -O)
    raise InvariantError(f"cfg_tuple lists 21 settings but N_CFG is {N_CFG}: add the new ones")


@njit_inline
def _load(row, ri, mi, b):
    return (row[ri, mi], row[ri, b + T_END], row[ri, b + T_MAXEND], row[ri, b + T_MAXWIN],
            row[ri, b + T_MAXACK], row[ri, b + T_LAST], row[ri, b + T_LAST2],
            row[ri, b + T_EXPIRES])  # fmt: skip


@njit_inline
def _store(row, ri, mi, b, m, te, tx, tw, tk, l1, l2, ex) -> None:
    row[ri, mi] = m
    row[ri, b + T_END] = te
    row[ri, b + T_MAXEND] = tx
    row[ri, b + T_MAXWIN] = tw
    row[ri, b + T_MAXACK] = tk
    row[ri, b + T_LAST] = l1
    row[ri, b + T_LAST2] = l2
    row[ri, b + T_EXPIRES] = ex


@njit
def ct_packet(row, ri, mi, b, proto, d, flags, seq, ack, sack, win, opt, wscale, plen, t, cfg):
    """One packet on an existing entry (d: 0 ORIGINAL, 1 REPLY): (verdict, re-armed).

    The protocol handler, then (nf_conntrack_in) SEEN_REPLY for a REPLY packet that was not
    invalid. State lives in row `ri`: the meta word at column `mi`, N_TRACK words from `b`.
    """
    m, te, tx, tw, tk, l1, l2, ex = _load(row, ri, mi, b)
    v, rearmed, m, te, tx, tw, tk, l1, l2, ex = ct_packet_s(
        m, te, tx, tw, tk, l1, l2, ex, np.int64(proto), np.int64(d), np.int64(flags),
        np.int64(seq), np.int64(ack), np.int64(sack), np.int64(win), np.int64(opt),
        np.int64(wscale), np.int64(plen), np.int64(t), cfg_tuple(cfg),
    )  # fmt: skip
    _store(row, ri, mi, b, m, te, tx, tw, tk, l1, l2, ex)
    return v, rearmed


@njit
def clear(row, ri, mi, b) -> None:
    """Tracker state to zero: TCP state NONE, no status, no window data."""
    row[ri, mi] = row[ri, mi] & np.uint64(0xFF | ((FLAG_ORIG_B | FLAG_MISMATCH_REPORTED) << 16))
    for k in range(N_TRACK):
        row[ri, b + k] = np.uint64(0)


@njit
def tcp_new(row, ri, mi, b, flags, seq, win, opt, wscale, plen, cfg) -> bool:
    """tcp_error + tcp_new for a session's first packet: False = the kernel creates no entry.

    Clears and initializes the tracker (state NONE); `ct_packet` then runs the same packet.
    """
    if not valid_flags(flags):
        return False
    new = _TABLE[0, tcp_index(flags), _NO]
    if new >= _IV:
        return False
    if new != _SS and cfg[C_LOOSE] == 0:
        return False
    clear(row, ri, mi, b)
    m = row[ri, mi]
    loose = TF_SACK_PERM | TF_BE_LIBERAL
    if opt & OPT_HDR:
        end = _seg_end(seq, plen, flags)
        mw = np.int64(win) if win != 0 else 1
        row[ri, b + T_END] = _sh(U0, 0, end)
        row[ri, b + T_MAXWIN] = _sh(U0, 0, mw)
        if new == _SS:
            row[ri, b + T_MAXEND] = _sh(U0, 0, end)
            m = _options(m, 0, opt, wscale)
        else:
            row[ri, b + T_MAXEND] = _sh(U0, 0, end + mw)
            m = _set_tf(_set_tf(m, 0, loose), 1, loose)
    else:  # flags only: nothing to check windows against, as for a loose pickup
        m = _set_tf(_set_tf(m, 0, loose), 1, loose)
    row[ri, mi] = _ms(m, SH_LAST_INDEX, 3, I_NONE)
    return True


@njit
def ct_new(row, ri, mi, b, proto, flags, seq, win, opt, wscale, plen, icmp_type, t, cfg) -> bool:
    """First packet of a session (ORIGINAL direction): False = no entry is created."""
    if proto == P_TCP:
        return tcp_new(row, ri, mi, b, flags, seq, win, opt, wscale, plen, cfg)
    clear(row, ri, mi, b)
    if proto == P_ICMP or proto == P_ICMP6:  # noqa: SIM109
        it = np.int64(icmp_type) & 0xFF
        ok = (_ICMP_NEW[it] if proto == P_ICMP else _ICMP6_NEW[it]) == 1
        if ok:  # the entry's class: the request type (its tuple's type)
            row[ri, b + T_END] = np.uint64(it)
        return ok
    if proto == P_UDP:
        row[ri, b + T_END] = np.uint64(t + cfg[C_UDP_STREAM_DELAY])
    return True


@njit_inline
def _default_timeout(m, proto, cfg):
    if proto == P_TCP:
        return cfg[C_TO + _state(m)]
    if proto == P_UDP:
        return cfg[C_TO + (TO_UDP_STREAM if _flag(m, FLAG_SEEN_REPLY) else TO_UDP_UNREPLIED)]
    if proto == P_ICMP or proto == P_ICMP6:  # noqa: SIM109
        return cfg[C_TO + TO_ICMP]
    return cfg[C_TO + TO_GENERIC]


@njit
def arm_default(row, ri, mi, b, proto, t, cfg) -> None:
    """Deadline of an entry installed without tracker words: its class's timeout from t."""
    row[ri, b + T_EXPIRES] = np.uint64(t + _default_timeout(row[ri, mi], proto, cfg))


@njit
def install_state(row, ri, mi, b, proto, t, cfg) -> None:
    """Tracker of an entry installed with a TCP state only (no history): windows unknown, so
    checked liberally in both directions with SACK assumed (as the kernel's loose pickup);
    a state past SYN_SENT implies the reply was seen (SEEN_REPLY) and ESTABLISHED or later
    that it was assured, FIN_WAIT or later that a close began (assumptions: such entries
    come from a tracker that saw it); the timer is armed with the class's timeout from t."""
    m = row[ri, mi]
    for d in range(2):
        m = _set_tf(m, d, _tf(m, d) | TF_SACK_PERM | TF_BE_LIBERAL)
    if proto == P_TCP:
        st = _state(m)
        if st >= _SR and st <= _CL:
            m = _setflag(m, FLAG_SEEN_REPLY)
        if st >= _ES and st <= _CL:
            m = _setflag(m, FLAG_ASSURED)
        if st >= _FW and st <= _CL:  # a close began: a new SYN may reopen the tuple
            m = _set_tf(m, 0, _tf(m, 0) | TF_CLOSE_INIT)
    elif proto == P_UDP:
        row[ri, b + T_END] = np.uint64(t + cfg[C_UDP_STREAM_DELAY])
    elif proto == P_ICMP or proto == P_ICMP6:  # noqa: SIM109
        row[ri, b + T_END] = U0  # class not known: every type tracked
    row[ri, mi] = m
    row[ri, b + T_EXPIRES] = np.uint64(t + _default_timeout(m, proto, cfg))


__all__ = [
    "N_CFG",
    "N_TRACK",
    "OPT_HDR",
    "TRACK_META_MASK",
    "V_ACCEPT",
    "V_IGNORE",
    "V_INVALID",
    "V_KILL",
    "V_RELATED",
    "V_REOPEN",
    "V_UNTRACKED",
    "arm_default",
    "clear",
    "ct_new",
    "ct_packet",
    "ct_packet_s",
    "ct_packet_s_inline",
    "icmp_error_quotes",
    "install_state",
    "pkt_flags",
    "tcp_in_window",
    "tcp_packet",
    "untracked",
]
