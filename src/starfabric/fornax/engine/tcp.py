"""TCP connection tracking: Linux nf_conntrack's flag-driven state machine, as one table.

States, events and transitions follow `tcp_conntracks` in the kernel's
net/netfilter/nf_conntrack_proto_tcp.c (window tracking is out of scope, as in the issue).
The table is a numpy array read by both the numba pipeline and the plain-Python reference, so
the two cannot disagree about a transition.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from starfabric.fornax.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN


class TcpState(IntEnum):
    """nf_conntrack's TCP states, same numbering as `enum tcp_conntrack`."""

    NONE = 0
    SYN_SENT = 1
    SYN_RECV = 2
    ESTABLISHED = 3
    FIN_WAIT = 4
    CLOSE_WAIT = 5
    LAST_ACK = 6
    TIME_WAIT = 7
    CLOSE = 8
    SYN_SENT2 = 9


class TcpEvent(IntEnum):
    """The segment classes nf_conntrack derives from the flags (get_conntrack_index)."""

    SYN = 0
    SYNACK = 1
    FIN = 2
    ACK = 3
    RST = 4
    NONE = 5


N_STATES = 10
#: Marker: the segment is invalid in this state; the state does not change (kernel sIV).
TCP_INVALID = 10
#: Marker: the segment is ignored in this state; the state does not change (kernel sIG).
TCP_IGNORE = 11

_NO, _SS, _SR, _ES, _FW, _CW, _LA, _TW, _CL, _S2 = range(10)
_IV, _IG = TCP_INVALID, TCP_IGNORE

#: TRANSITIONS[direction, event, state] -> new state (or TCP_INVALID / TCP_IGNORE).
#: direction 0 = ORIGINAL (the way the session's first packet went), 1 = REPLY.
TRANSITIONS = np.array(
    [
        [  # ORIGINAL:  NO   SS   SR   ES   FW   CW   LA   TW   CL   S2
            [_SS, _SS, _IG, _IG, _IG, _IG, _IG, _SS, _SS, _S2],  # SYN
            [_IV, _IV, _SR, _IV, _IV, _IV, _IV, _IV, _IV, _SR],  # SYN-ACK
            [_IV, _IV, _FW, _FW, _LA, _LA, _LA, _TW, _CL, _IV],  # FIN
            [_ES, _IV, _ES, _ES, _CW, _CW, _TW, _TW, _CL, _IV],  # ACK
            [_IV, _CL, _CL, _CL, _CL, _CL, _CL, _CL, _CL, _CL],  # RST
            [_IV, _IV, _IV, _IV, _IV, _IV, _IV, _IV, _IV, _IV],  # NONE
        ],
        [  # REPLY:     NO   SS   SR   ES   FW   CW   LA   TW   CL   S2
            [_IV, _S2, _IV, _IV, _IV, _IV, _IV, _SS, _IV, _S2],  # SYN
            [_IV, _SR, _IG, _IG, _IG, _IG, _IG, _IG, _IG, _SR],  # SYN-ACK
            [_IV, _IV, _FW, _FW, _LA, _LA, _LA, _TW, _CL, _IV],  # FIN
            [_IV, _IG, _SR, _ES, _CW, _CW, _TW, _TW, _CL, _IG],  # ACK
            [_IV, _CL, _CL, _CL, _CL, _CL, _CL, _CL, _CL, _CL],  # RST
            [_IV, _IV, _IV, _IV, _IV, _IV, _IV, _IV, _IV, _IV],  # NONE
        ],
    ],
    dtype=np.uint8,
)
TRANSITIONS.setflags(write=False)


def tcp_event(flags: int) -> int:
    """Classify a segment's flags as nf_conntrack does: RST, then SYN(-ACK), FIN, ACK, none."""
    if flags & TCP_RST:
        return int(TcpEvent.RST)
    if flags & TCP_SYN:
        return int(TcpEvent.SYNACK) if flags & TCP_ACK else int(TcpEvent.SYN)
    if flags & TCP_FIN:
        return int(TcpEvent.FIN)
    if flags & TCP_ACK:
        return int(TcpEvent.ACK)
    return int(TcpEvent.NONE)


def initial_tcp_state(flags: int) -> int:
    """State a new session takes from its first packet (ORIGINAL direction, from NONE).

    The manager passes this to `insert` for a session created from a punted packet; a packet
    that cannot open a connection (e.g. a lone FIN) leaves NONE.
    """
    new = int(TRANSITIONS[0, tcp_event(flags), TcpState.NONE])
    return new if new < N_STATES else int(TcpState.NONE)


def is_reopen(old_state: int, new_state: int) -> bool:
    """A SYN that moves a TIME_WAIT/CLOSE session to SYN_SENT starts a new incarnation.

    The kernel kills the old conntrack and runs the SYN through the ruleset as a new one
    (tcp_packet, "reopen"); so do the datapaths here: the old session ends (CLOSED event with
    its counters) and the SYN is punted as a MISS, to be decided as a new connection.
    """
    return new_state == TcpState.SYN_SENT and old_state in (TcpState.TIME_WAIT, TcpState.CLOSE)


__all__ = [
    "N_STATES",
    "TCP_IGNORE",
    "TCP_INVALID",
    "TRANSITIONS",
    "TcpEvent",
    "TcpState",
    "initial_tcp_state",
    "is_reopen",
    "tcp_event",
]
