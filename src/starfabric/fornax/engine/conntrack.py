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
        query) create an entry; every packet re-arms the ICMP timeout.
  other the generic timeout.
INVALID and ignored packets never change the state or re-arm the timer (the one exception is
the kernel's own: nf_tcp_handle_invalid). A packet without header fields (OPT_HDR clear, e.g.
a synthetic workload that has flags only) is tracked by its flags: the window checks, the RST
sequence checks and the retransmission bookkeeping are skipped for it.

State lives in row `ri` of a 2-D uint64 array: one meta word at column `mi` (bits 0..23:
protocol, TCP state, FLAG_* bits; 24..63: the tracker's small fields, below) and N_TRACK words
from column `b` (the engine's records, layout.py, or the software path's tracker rows). Sequence arithmetic is modulo 2**32 as in the kernel.
"""

from __future__ import annotations

import numpy as np

from starfabric._jit import njit, njit_inline
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

U64_M32 = np.uint64(M32)


# ---------------------------------------------------------------------------- field access


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
def _g32(row, ri, i, d):
    return np.int64((row[ri, i] >> np.uint64(32 * d)) & U64_M32)


@njit_inline
def _s32(row, ri, i, d, v) -> None:
    sh = np.uint64(32 * d)
    row[ri, i] = (row[ri, i] & ~(U64_M32 << sh)) | (np.uint64(np.int64(v) & M32) << sh)


@njit_inline
def _gm(row, ri, mi, shift, width):
    return np.int64((row[ri, mi] >> np.uint64(shift)) & np.uint64((1 << width) - 1))


@njit_inline
def _sm(row, ri, mi, shift, width, v) -> None:
    m = np.uint64((1 << width) - 1) << np.uint64(shift)
    row[ri, mi] = (row[ri, mi] & ~m) | ((np.uint64(v) << np.uint64(shift)) & m)


@njit_inline
def state_of(row, ri, mi):
    return _gm(row, ri, mi, 8, 8)


@njit_inline
def _flag(row, ri, mi, f) -> bool:
    return _gm(row, ri, mi, 16, 8) & f != 0


@njit_inline
def _setflag(row, ri, mi, f) -> None:
    _sm(row, ri, mi, 16, 8, _gm(row, ri, mi, 16, 8) | f)


@njit_inline
def _tf(row, ri, mi, d):
    return _gm(row, ri, mi, SH_TFLAGS0 + 6 * d, 6)


@njit_inline
def _set_tf(row, ri, mi, d, v) -> None:
    _sm(row, ri, mi, SH_TFLAGS0 + 6 * d, 6, v)


@njit_inline
def _scale(row, ri, mi, d):
    return _gm(row, ri, mi, SH_SCALE0 + 4 * d, 4)


@njit_inline
def _set_scale(row, ri, mi, d, v) -> None:
    _sm(row, ri, mi, SH_SCALE0 + 4 * d, 4, v)


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
def _options(row, ri, mi, d, opt, wscale) -> None:
    """tcp_options into direction d: only when the header has options (then they reset)."""
    if not opt & OPT_PRESENT:
        return
    f = 0
    sc = 0
    if opt & OPT_SACK_PERM:
        f |= TF_SACK_PERM
    if opt & OPT_WSCALE:
        sc = _max_scale(wscale)
        f |= TF_WINDOW_SCALE
    _set_tf(row, ri, mi, d, f)
    _set_scale(row, ri, mi, d, sc)


@njit_inline
def _init_sender(row, ri, mi, b, d, end, win, opt, wscale) -> None:
    _s32(row, ri, b + T_END, d, end)
    _s32(row, ri, b + T_MAXEND, d, end)
    _s32(row, ri, b + T_MAXWIN, d, win if win != 0 else 1)
    _options(row, ri, mi, d, opt, wscale)
    r = 1 - d
    if d == 1 and not (
        _tf(row, ri, mi, d) & TF_WINDOW_SCALE and _tf(row, ri, mi, r) & TF_WINDOW_SCALE
    ):
        _set_scale(row, ri, mi, d, 0)
        _set_scale(row, ri, mi, r, 0)


@njit_inline
def _log_invalid(row, ri, mi, d, cfg, ret):
    if _tf(row, ri, mi, d) & TF_BE_LIBERAL or cfg[C_BE_LIBERAL] != 0:
        return V_ACCEPT
    return ret


@njit_inline
def _maxackwin(row, ri, b, d):
    w = _g32(row, ri, b + T_MAXWIN, d)
    return w if w > MAXACKWINCONST else MAXACKWINCONST


# ---------------------------------------------------------------------------- tcp_in_window


@njit
def tcp_in_window(row, ri, mi, b, d, index, flags, seq, ack, sack_pkt, win, opt, wscale, plen, cfg):
    """The window checks and updates of one segment: V_ACCEPT, V_IGNORE or V_INVALID."""
    s = d
    r = 1 - d
    stored = state_of(row, ri, mi)
    win_raw = np.int64(win)
    win = np.int64(win)
    end = _seg_end(seq, plen, flags)
    sack = np.int64(sack_pkt) if _tf(row, ri, mi, r) & TF_SACK_PERM else np.int64(ack)
    ack = np.int64(ack)
    seq = np.int64(seq)
    if _g32(row, ri, b + T_MAXWIN, s) == 0:
        if flags & F_SYN:
            _init_sender(row, ri, mi, b, d, end, win, opt, wscale)
            if not flags & F_ACK:
                return V_ACCEPT
        else:
            _s32(row, ri, b + T_END, s, end)
            swin = _u32(win << _scale(row, ri, mi, s))
            mw = swin if swin != 0 else 1
            _s32(row, ri, b + T_MAXWIN, s, mw)
            _s32(row, ri, b + T_MAXEND, s, end + mw)
            if _g32(row, ri, b + T_MAXWIN, r) == 0:
                _s32(row, ri, b + T_END, r, sack)
                _s32(row, ri, b + T_MAXEND, r, sack)
            elif sack == _u32(_g32(row, ri, b + T_END, r) + 1):
                _s32(row, ri, b + T_END, r, sack)
    elif (
        flags & F_SYN
        and after(end, _g32(row, ri, b + T_END, s))
        and (stored == _SS or stored == _SR)  # noqa: SIM109
    ):
        _init_sender(row, ri, mi, b, d, end, win, opt, wscale)
        if d == 1 and not flags & F_ACK:
            return V_ACCEPT
    r_end = _g32(row, ri, b + T_END, r)
    if not flags & F_ACK or (flags & F_RST and ack == 0):
        ack = r_end
        sack = r_end
    if flags & F_RST and seq == 0 and stored == _SS:
        seq = _g32(row, ri, b + T_END, s)
        end = seq
    s_end = _g32(row, ri, b + T_END, s)
    s_maxend = _g32(row, ri, b + T_MAXEND, s)
    r_maxwin = _g32(row, ri, b + T_MAXWIN, r)
    maw = _maxackwin(row, ri, b, s)
    if not before(seq, _u32(s_maxend + 1)):
        overshot = _u32(end - s_maxend + 1)
        ack_ok = after(sack, _u32(r_end - maw - 1))
        in_recv = r_maxwin != 0 and after(end, _u32(s_end - r_maxwin - 1))
        if in_recv and ack_ok and overshot <= r_maxwin and before(sack, _u32(r_end + 1)):
            _s32(row, ri, b + T_END, s, end)
            _set_tf(row, ri, mi, s, _tf(row, ri, mi, s) | TF_DATA_UNACK)
            return _log_invalid(row, ri, mi, s, cfg, V_IGNORE)
        return _log_invalid(row, ri, mi, s, cfg, V_INVALID)
    if not before(sack, _u32(r_end + 1)):
        return _log_invalid(row, ri, mi, s, cfg, V_INVALID)
    if not (r_maxwin == 0 or after(end, _u32(s_end - r_maxwin - 1))):
        return _log_invalid(row, ri, mi, s, cfg, V_IGNORE)
    if not after(sack, _u32(r_end - maw - 1)):
        return _log_invalid(row, ri, mi, s, cfg, V_IGNORE)
    if not flags & F_SYN:
        win = _u32(win << _scale(row, ri, mi, s))
    swin = _u32(win + (sack - ack))
    if _g32(row, ri, b + T_MAXWIN, s) < swin:
        _s32(row, ri, b + T_MAXWIN, s, swin)
    if after(end, s_end):
        _s32(row, ri, b + T_END, s, end)
        _set_tf(row, ri, mi, s, _tf(row, ri, mi, s) | TF_DATA_UNACK)
    if flags & F_ACK:
        if not _tf(row, ri, mi, s) & TF_MAXACK_SET:
            _s32(row, ri, b + T_MAXACK, s, ack)
            _set_tf(row, ri, mi, s, _tf(row, ri, mi, s) | TF_MAXACK_SET)
        elif after(ack, _g32(row, ri, b + T_MAXACK, s)):
            _s32(row, ri, b + T_MAXACK, s, ack)
    r_maxwin = _g32(row, ri, b + T_MAXWIN, r)
    if r_maxwin != 0 and after(end, s_maxend):
        _s32(row, ri, b + T_MAXWIN, r, r_maxwin + _u32(end - s_maxend))
    if after(_u32(sack + win), _u32(_g32(row, ri, b + T_MAXEND, r) - 1)):
        _s32(row, ri, b + T_MAXEND, r, _u32(sack + win) + (1 if win == 0 else 0))
    if ack == _g32(row, ri, b + T_END, r):
        _set_tf(row, ri, mi, r, _tf(row, ri, mi, r) & ~TF_DATA_UNACK)
    if index == I_ACK:
        if (
            _gm(row, ri, mi, SH_LAST_DIR, 1) == d
            and _g32(row, ri, b + T_LAST, 0) == seq
            and _g32(row, ri, b + T_LAST, 1) == ack
            and _g32(row, ri, b + T_LAST2, 0) == end
            and _g32(row, ri, b + T_LAST2, 1) == win_raw
        ):
            _sm(row, ri, mi, SH_RETRANS, 8, (_gm(row, ri, mi, SH_RETRANS, 8) + 1) & 0xFF)
        else:
            _sm(row, ri, mi, SH_LAST_DIR, 1, d)
            _s32(row, ri, b + T_LAST, 0, seq)
            _s32(row, ri, b + T_LAST, 1, ack)
            _s32(row, ri, b + T_LAST2, 0, end)
            _s32(row, ri, b + T_LAST2, 1, win_raw)
            _sm(row, ri, mi, SH_RETRANS, 8, 0)
    return V_ACCEPT


@njit
def _handle_invalid(row, ri, mi, b, d, index, t, cfg) -> bool:
    """nf_tcp_handle_invalid: True when it lowered the timeout (an assured entry's FIN/RST
    answering an out-of-window FIN/RST of the other direction)."""
    if not _flag(row, ri, mi, FLAG_ASSURED):
        return False
    if index != I_RST and index != I_FIN:
        return False
    li = _gm(row, ri, mi, SH_LAST_INDEX, 3)
    if _gm(row, ri, mi, SH_LAST_DIR, 1) != d and (li == I_FIN or li == I_RST):  # noqa: SIM109
        expires = np.int64(row[ri, b + T_EXPIRES]) - t
        if expires < 120_000_000_000:
            return False
        to = cfg[C_TO + TO_UNACK]
        if expires > to:
            row[ri, b + T_EXPIRES] = np.uint64(t + to)
            return True
        return False
    _sm(row, ri, mi, SH_LAST_INDEX, 3, index)
    _sm(row, ri, mi, SH_LAST_DIR, 1, d)
    return False


# ---------------------------------------------------------------------------- tcp_packet


@njit_inline
def _reset_dir(row, ri, mi, b, d) -> None:
    for w in (T_END, T_MAXEND, T_MAXWIN, T_MAXACK):
        _s32(row, ri, b + w, d, 0)
    _set_scale(row, ri, mi, d, 0)
    _set_tf(row, ri, mi, d, _tf(row, ri, mi, d) & TF_BE_LIBERAL)


@njit
def tcp_packet(row, ri, mi, b, d, flags, seq, ack, sack, win, opt, wscale, plen, t, cfg):
    """nf_conntrack_tcp_packet for an entry (d: 0 ORIGINAL, 1 REPLY): (verdict, re-armed)."""
    if not valid_flags(flags):
        return V_INVALID, False
    hdr = opt & OPT_HDR != 0
    old = state_of(row, ri, mi)
    stored = old
    index = tcp_index(flags)
    new = _TABLE[d, index, old]
    skip_window = False
    ignore = False
    if new == _SS and old >= _TW:
        closing = (_tf(row, ri, mi, 0) | _tf(row, ri, mi, 1)) & TF_CLOSE_INIT
        if closing or (
            _gm(row, ri, mi, SH_LAST_DIR, 1) == d and _gm(row, ri, mi, SH_LAST_INDEX, 3) == I_RST
        ):
            return V_REOPEN, False
        ignore = True
    if new == _IG or ignore:
        lt = _gm(row, ri, mi, SH_LAST_DIR, 1)
        if (
            index == I_SYNACK
            and _gm(row, ri, mi, SH_LAST_INDEX, 3) == I_SYN
            and lt != d
            and (not hdr or _u32(ack) == _g32(row, ri, b + T_LAST2, 0))
        ):
            old = _SS
            new = _SR
            le = _g32(row, ri, b + T_LAST2, 0)
            lw = _g32(row, ri, b + T_LAST2, 1)
            _s32(row, ri, b + T_END, lt, le)
            _s32(row, ri, b + T_MAXEND, lt, le)
            _s32(row, ri, b + T_MAXWIN, lt, lw if lw != 0 else 1)
            _set_scale(row, ri, mi, lt, _gm(row, ri, mi, SH_LAST_WSCALE, 4))
            lf = _gm(row, ri, mi, SH_LAST_FLAGS, 4) & ~LF_CHALLENGE_ACK
            _sm(row, ri, mi, SH_LAST_FLAGS, 4, lf)
            tf = 0
            if lf & LF_WSCALE:
                tf |= TF_WINDOW_SCALE
            if lf & LF_SACK_PERM:
                tf |= TF_SACK_PERM
            _set_tf(row, ri, mi, lt, tf)
            _reset_dir(row, ri, mi, b, d)
        else:
            _sm(row, ri, mi, SH_LAST_INDEX, 3, index)
            _sm(row, ri, mi, SH_LAST_DIR, 1, d)
            _s32(row, ri, b + T_LAST, 0, seq)
            _s32(row, ri, b + T_LAST2, 0, _seg_end(seq, plen, flags))
            _s32(row, ri, b + T_LAST2, 1, win)
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
                _sm(row, ri, mi, SH_LAST_FLAGS, 4, lf)
                _sm(row, ri, mi, SH_LAST_WSCALE, 4, lw)
            if old == _SS and index == I_ACK and d == 1:
                _s32(row, ri, b + T_LAST, 1, ack)
            return V_IGNORE, False
    elif new == _IV:
        return V_INVALID, False
    elif new == _TW:
        if (
            old == _LA
            and index == I_ACK
            and _gm(row, ri, mi, SH_LAST_DIR, 1) != d
            and _gm(row, ri, mi, SH_LAST_INDEX, 3) == I_SYN
            and _gm(row, ri, mi, SH_LAST_FLAGS, 4) & LF_CHALLENGE_ACK
        ):
            _sm(
                row,
                ri,
                mi,
                SH_LAST_FLAGS,
                4,
                _gm(row, ri, mi, SH_LAST_FLAGS, 4) & ~LF_CHALLENGE_ACK,
            )
            return V_IGNORE, False
    elif new == _S2:
        _sm(
            row, ri, mi, SH_LAST_FLAGS, 4, _gm(row, ri, mi, SH_LAST_FLAGS, 4) | LF_SIMULTANEOUS_OPEN
        )
    elif new == _SR:
        if d == 1 and index == I_ACK and _gm(row, ri, mi, SH_LAST_FLAGS, 4) & LF_SIMULTANEOUS_OPEN:
            new = _ES
    elif new == _CL and index == I_RST:
        if stored == _FW or stored == _LA or stored == _TW or stored == _CL or stored == _CW:  # noqa: SIM109
            skip_window = True
        elif hdr:
            li = _gm(row, ri, mi, SH_LAST_INDEX, 3)
            established = stored == _ES and _flag(row, ri, mi, FLAG_ASSURED)
            brk = False
            if _tf(row, ri, mi, 1 - d) & TF_MAXACK_SET and li != I_SYN:
                seq32 = _u32(seq)
                maxack = _g32(row, ri, b + T_MAXACK, 1 - d)
                if seq32 == 0 and not established:
                    brk = True
                else:
                    if before(seq32, maxack) and cfg[C_IGNORE_INVALID_RST] == 0:
                        return V_INVALID, False
                    if (
                        not established
                        or seq32 == maxack
                        or (
                            li == I_ACK
                            and _gm(row, ri, mi, SH_LAST_DIR, 1) == d
                            and seq32 == _g32(row, ri, b + T_LAST2, 0)
                        )
                    ):
                        brk = True
                    else:
                        new = old
            if not brk:
                seen = _flag(row, ri, mi, FLAG_SEEN_REPLY)
                assured = _flag(row, ri, mi, FLAG_ASSURED)
                if (
                    ((seen and li == I_SYN) or (not assured and li == I_ACK))
                    and _u32(ack) == _g32(row, ri, b + T_LAST2, 0)
                ) or (
                    old == _SS
                    and li == I_ACK
                    and _gm(row, ri, mi, SH_LAST_DIR, 1) == 1
                    and _u32(seq) == _g32(row, ri, b + T_LAST, 1)
                ):
                    skip_window = True
    if not skip_window and hdr:
        res = tcp_in_window(row, ri, mi, b, d, index, flags, seq, ack, sack, win, opt, wscale, plen,
                            cfg)  # fmt: skip
        if res == V_IGNORE:
            return V_IGNORE, False
        if res == V_INVALID:
            return V_INVALID, _handle_invalid(row, ri, mi, b, d, index, t, cfg)
    _sm(row, ri, mi, SH_LAST_INDEX, 3, index)
    _sm(row, ri, mi, SH_LAST_DIR, 1, d)
    _sm(row, ri, mi, 8, 8, new)
    if old != new and new == _FW:
        _set_tf(row, ri, mi, d, _tf(row, ri, mi, d) | TF_CLOSE_INIT)
    to_new = cfg[C_TO + new]
    to_retrans = cfg[C_TO + TO_RETRANS]
    to_unack = cfg[C_TO + TO_UNACK]
    if _gm(row, ri, mi, SH_RETRANS, 8) >= cfg[C_MAX_RETRANS] and to_new > to_retrans:
        timeout = to_retrans
    elif index == I_RST:
        timeout = cfg[C_TO + _CL]
    elif (_tf(row, ri, mi, 0) | _tf(row, ri, mi, 1)) & TF_DATA_UNACK and to_new > to_unack:
        timeout = to_unack
    elif _g32(row, ri, b + T_LAST2, 1) == 0 and hdr and to_new > to_retrans:
        timeout = to_retrans
    else:
        timeout = to_new
    if not _flag(row, ri, mi, FLAG_SEEN_REPLY):
        if flags & F_RST:
            return V_KILL, False
        if index == I_SYN and old == _SS:
            return V_ACCEPT, False
        if new == _ES and timeout > to_unack:
            timeout = to_unack
    elif not _flag(row, ri, mi, FLAG_ASSURED) and (old == _SR or old == _ES) and new == _ES:  # noqa: SIM109
        _setflag(row, ri, mi, FLAG_ASSURED)
    row[ri, b + T_EXPIRES] = np.uint64(t + timeout)
    return V_ACCEPT, True


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
    if not opt & OPT_HDR:
        # flags only: nothing to check windows against, as for a loose pickup
        _set_tf(row, ri, mi, 0, TF_SACK_PERM | TF_BE_LIBERAL)
        _set_tf(row, ri, mi, 1, TF_SACK_PERM | TF_BE_LIBERAL)
        _sm(row, ri, mi, SH_LAST_INDEX, 3, I_NONE)
        return True
    end = _seg_end(seq, plen, flags)
    mw = np.int64(win) if win != 0 else 1
    _s32(row, ri, b + T_END, 0, end)
    _s32(row, ri, b + T_MAXWIN, 0, mw)
    if new == _SS:
        _s32(row, ri, b + T_MAXEND, 0, end)
        _options(row, ri, mi, 0, opt, wscale)
    else:
        _s32(row, ri, b + T_MAXEND, 0, end + mw)
        _set_tf(row, ri, mi, 0, TF_SACK_PERM | TF_BE_LIBERAL)
        _set_tf(row, ri, mi, 1, TF_SACK_PERM | TF_BE_LIBERAL)
    _sm(row, ri, mi, SH_LAST_INDEX, 3, I_NONE)
    return True


@njit
def clear(row, ri, mi, b) -> None:
    """Tracker state to zero: TCP state NONE, no status, no window data."""
    row[ri, mi] = row[ri, mi] & np.uint64(0xFF | ((FLAG_ORIG_B | FLAG_MISMATCH_REPORTED) << 16))
    for k in range(N_TRACK):
        row[ri, b + k] = np.uint64(0)


# ---------------------------------------------------------------------------- all protocols


@njit
def ct_new(row, ri, mi, b, proto, flags, seq, win, opt, wscale, plen, icmp_type, t, cfg) -> bool:
    """First packet of a session (ORIGINAL direction): False = no entry is created."""
    if proto == P_TCP:
        return tcp_new(row, ri, mi, b, flags, seq, win, opt, wscale, plen, cfg)
    clear(row, ri, mi, b)
    if proto == P_ICMP:
        return _ICMP_NEW[np.int64(icmp_type) & 0xFF] == 1
    if proto == P_ICMP6:
        return _ICMP6_NEW[np.int64(icmp_type) & 0xFF] == 1
    if proto == P_UDP:
        row[ri, b + T_END] = np.uint64(t + cfg[C_UDP_STREAM_DELAY])
    return True


@njit
def ct_packet(row, ri, mi, b, proto, d, flags, seq, ack, sack, win, opt, wscale, plen, t, cfg):
    """One packet on an existing entry (d: 0 ORIGINAL, 1 REPLY): (verdict, re-armed).

    The protocol handler, then (nf_conntrack_in) SEEN_REPLY for a REPLY packet that was not
    invalid.
    """
    rearmed = False
    if proto == P_TCP:
        v, rearmed = tcp_packet(row, ri, mi, b, d, flags, seq, ack, sack, win, opt, wscale, plen, t,
                                cfg)  # fmt: skip
    elif proto == P_UDP:
        v = V_ACCEPT
        if _flag(row, ri, mi, FLAG_SEEN_REPLY):
            extra = cfg[C_TO + TO_UDP_UNREPLIED]
            if t > np.int64(row[ri, b + T_END]):
                extra = cfg[C_TO + TO_UDP_STREAM]
                _setflag(row, ri, mi, FLAG_ASSURED)
            row[ri, b + T_EXPIRES] = np.uint64(t + extra)
        else:
            row[ri, b + T_EXPIRES] = np.uint64(t + cfg[C_TO + TO_UDP_UNREPLIED])
        rearmed = True
    elif proto == P_ICMP or proto == P_ICMP6:  # noqa: SIM109
        v = V_ACCEPT
        row[ri, b + T_EXPIRES] = np.uint64(t + cfg[C_TO + TO_ICMP])
        rearmed = True
    else:
        v = V_ACCEPT
        row[ri, b + T_EXPIRES] = np.uint64(t + cfg[C_TO + TO_GENERIC])
        rearmed = True
    if d == 1 and (v == V_ACCEPT or v == V_IGNORE):  # noqa: SIM109
        _setflag(row, ri, mi, FLAG_SEEN_REPLY)
    return v, rearmed


@njit
def arm_default(row, ri, mi, b, proto, t, cfg) -> None:
    """Deadline of an entry installed without tracker words: its class's timeout from t."""
    if proto == P_TCP:
        to = cfg[C_TO + state_of(row, ri, mi)]
    elif proto == P_UDP:
        to = cfg[
            C_TO + (TO_UDP_STREAM if _flag(row, ri, mi, FLAG_SEEN_REPLY) else TO_UDP_UNREPLIED)
        ]
    elif proto == P_ICMP or proto == P_ICMP6:  # noqa: SIM109
        to = cfg[C_TO + TO_ICMP]
    else:
        to = cfg[C_TO + TO_GENERIC]
    row[ri, b + T_EXPIRES] = np.uint64(t + to)


@njit
def install_state(row, ri, mi, b, proto, t, cfg) -> None:
    """Tracker of an entry installed with a TCP state only (no history): windows unknown, so
    checked liberally in both directions with SACK assumed (as the kernel's loose pickup);
    a state past SYN_SENT implies the reply was seen (SEEN_REPLY) and ESTABLISHED or later
    that it was assured, FIN_WAIT or later that a close began (assumptions: such entries
    come from a tracker that saw it); the timer is armed with the class's timeout from t."""
    for d in range(2):
        _set_tf(row, ri, mi, d, _tf(row, ri, mi, d) | TF_SACK_PERM | TF_BE_LIBERAL)
    if proto == P_TCP:
        st = state_of(row, ri, mi)
        if st >= _SR and st <= _CL:
            _setflag(row, ri, mi, FLAG_SEEN_REPLY)
        if st >= _ES and st <= _CL:
            _setflag(row, ri, mi, FLAG_ASSURED)
        if st >= _FW and st <= _CL:  # a close began: a new SYN may reopen the tuple
            _set_tf(row, ri, mi, 0, _tf(row, ri, mi, 0) | TF_CLOSE_INIT)
    elif proto == P_UDP:
        row[ri, b + T_END] = np.uint64(t + cfg[C_UDP_STREAM_DELAY])
    arm_default(row, ri, mi, b, proto, t, cfg)


__all__ = [
    "N_CFG",
    "N_TRACK",
    "OPT_HDR",
    "TRACK_META_MASK",
    "V_ACCEPT",
    "V_IGNORE",
    "V_INVALID",
    "V_KILL",
    "V_REOPEN",
    "arm_default",
    "clear",
    "ct_new",
    "ct_packet",
    "install_state",
    "tcp_in_window",
    "tcp_packet",
]
