"""Constants of the fast engine's kernels as numba-frozen scalars: masks and shifts, the
contract's codes (interface.py: outcomes, reasons, statuses, events, counters) and the tracker's.

numba freezes module globals at compile time, so the enums are copied here as plain ints once.
"""

from __future__ import annotations

import numpy as np

from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import interface as itf
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.tcp import TCP_IGNORE, TCP_INVALID, TcpState
from starfabric.fornax.keys import C_ALT, C_FIN, C_MUL
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP

U0 = np.uint64(0)
U1 = np.uint64(1)
S8 = np.uint64(8)
S16 = np.uint64(16)
S24 = np.uint64(24)
S27 = np.uint64(27)
S30 = np.uint64(30)
S31 = np.uint64(31)
S32 = np.uint64(32)
S33 = np.uint64(33)
S48 = np.uint64(48)
M8 = np.uint64(0xFF)
M16 = np.uint64(0xFFFF)
M32 = np.uint64(0xFFFF_FFFF)
M48 = np.uint64(0xFFFF_FFFF_FFFF)
LANES_LO = np.uint64(0x0001_0001_0001_0001)
LANES_HI = np.uint64(0x8000_8000_8000_8000)
K_MUL = np.uint64(C_MUL)
K_FIN = np.uint64(C_FIN)
K_ALT = np.uint64(C_ALT)
K_SM1 = np.uint64(0xBF58476D1CE4E5B9)
K_SM2 = np.uint64(0x94D049BB133111EB)
N_HALVES = 2 * L.N_DATA_WORDS
S_OVERALL = np.uint64(32 + N_HALVES)
M_P = np.uint64((1 << N_HALVES) - 1)
M_HIGH = np.uint64(((1 << 64) - 1) ^ ((1 << (32 + N_HALVES + 1)) - 1))
M_LOW = np.uint64((1 << (32 + N_HALVES + 1)) - 1)
M_CHECK = np.uint64((1 << (32 + N_HALVES)) - 1)
N_DATA = L.N_DATA_WORDS
N_TRK = L.N_TRACK_WORDS
S_OVERALL_B = np.uint64(32 + 2 * N_TRK)
M_P_B = np.uint64((1 << (2 * N_TRK)) - 1)
M_HIGH_B = np.uint64(((1 << 64) - 1) ^ ((1 << (32 + 2 * N_TRK + 1)) - 1))
M_LOW_B = np.uint64((1 << (32 + 2 * N_TRK + 1)) - 1)
N_EW = itf.N_EVENT_WORDS

F_ORIG_B = np.uint64(L.FLAG_ORIG_B)
F_MISMATCH = np.uint64(L.FLAG_MISMATCH_REPORTED)
F_SEEN_REPLY = np.uint64(L.FLAG_SEEN_REPLY)

ECC_CLEAN = 0
ECC_CORR = 1
ECC_UNCORR = 2

# Codes as plain ints (numba freezes module globals).
O_HIT = np.int64(itf.Outcome.HIT)
O_MISS = np.int64(itf.Outcome.MISS)
O_STALE = np.int64(itf.Outcome.STALE)
O_FAULT = np.int64(itf.Outcome.FAULT)
O_DROP = np.int64(itf.Outcome.DROP_HW)
O_HUNG = np.int64(itf.Outcome.PORT_HUNG)
R_NONE = np.int64(itf.Reason.NONE)
R_NO_ENTRY = np.int64(itf.Reason.NO_ENTRY)
R_ENI = np.int64(itf.Reason.ENI_VERSION)
R_VPC = np.int64(itf.Reason.VPC_VERSION)
R_ECC = np.int64(itf.Reason.ECC_UNCORRECTABLE)
R_DROP = np.int64(itf.Reason.DROP_ACTION)
R_STALLED = np.int64(itf.Reason.PORT_STALLED)
R_TCP_INVALID = np.int64(itf.Reason.TCP_INVALID)
R_TCP_IGNORED = np.int64(itf.Reason.TCP_IGNORED)
R_REOPEN = np.int64(itf.Reason.TCP_REOPEN)
R_KEY_OK = np.int64(itf.Reason.KEY_CONSISTENT)
R_KEY_SUSPECT = np.int64(itf.Reason.KEY_SUSPECT)
R_KILLED = np.int64(itf.Reason.CT_KILLED)
V_INVALID = CT.V_INVALID
V_IGNORE = CT.V_IGNORE
V_REOPEN = CT.V_REOPEN
V_KILL = CT.V_KILL
V_RELATED = CT.V_RELATED
TRACK_META = np.uint64(CT.TRACK_META_MASK)
ST_OK = np.int64(itf.Status.OK)
ST_EXISTS = np.int64(itf.Status.EXISTS)
ST_NOT_FOUND = np.int64(itf.Status.NOT_FOUND)
ST_FULL = np.int64(itf.Status.TABLE_FULL)
ST_FAILED = np.int64(itf.Status.INSERT_FAILED)
ST_BAD_SCOPE = np.int64(itf.Status.BAD_SCOPE)
ST_ECC = np.int64(itf.Status.ECC_FAULT)
EV_AGED = np.int64(itf.EventType.AGED)
EV_CLOSED = np.int64(itf.EventType.CLOSED)
EV_MISMATCH = np.int64(itf.EventType.VERSION_MISMATCH)
EV_ECC_CORR = np.int64(itf.EventType.ECC_CORRECTED)
EV_ECC_UNCORR = np.int64(itf.EventType.ECC_UNCORRECTABLE)
EV_INSERT_FAILED = np.int64(itf.EventType.INSERT_FAILED)
EV_TABLE_FULL = np.int64(itf.EventType.TABLE_FULL)
EV_HANG = np.int64(itf.EventType.PIPELINE_HANG)
EV_OVERFLOW = np.int64(itf.EventType.RING_OVERFLOW)
C = itf.Counter
C_PACKETS = np.int64(C.PACKETS)
C_HIT = np.int64(C.HIT)
C_MISS = np.int64(C.MISS)
C_STALE = np.int64(C.STALE)
C_FAULT = np.int64(C.FAULT)
C_DROP = np.int64(C.DROP_HW)
C_HUNG = np.int64(C.PORT_HUNG)
C_BYTES = np.int64(C.BYTES_FORWARDED)
C_TCP_INVALID = np.int64(C.TCP_INVALID)
C_TCP_IGNORED = np.int64(C.TCP_IGNORED)
C_REOPEN = np.int64(C.TCP_REOPEN)
C_ECC_CORR = np.int64(C.ECC_CORRECTED)
C_ECC_UNCORR = np.int64(C.ECC_UNCORRECTABLE)
C_MISMATCH = np.int64(C.MISMATCH_EVENTS)
C_INS_OK = np.int64(C.INSERT_OK)
C_INS_EXISTS = np.int64(C.INSERT_EXISTS)
C_INS_FULL = np.int64(C.INSERT_TABLE_FULL)
C_INS_FAILED = np.int64(C.INSERT_FAILED)
C_INS_SCOPE = np.int64(C.INSERT_BAD_SCOPE)
C_DISPL = np.int64(C.DISPLACEMENTS)
C_DEL_OK = np.int64(C.DELETE_OK)
C_DEL_NF = np.int64(C.DELETE_NOT_FOUND)
C_MOD_OK = np.int64(C.MODIFY_OK)
C_MOD_NF = np.int64(C.MODIFY_NOT_FOUND)
C_Q_OK = np.int64(C.QUERY_OK)
C_Q_NF = np.int64(C.QUERY_NOT_FOUND)
C_DUMP = np.int64(C.DUMP_ENTRIES)
C_AGED = np.int64(C.AGED)
C_CLOSED = np.int64(C.CLOSED)
C_SCRUB = np.int64(C.SCRUB_VISITED)
C_EV_RAISED = np.int64(C.EVENTS_RAISED)
C_EV_LOST = np.int64(C.EVENTS_LOST)
C_HANG = np.int64(C.PIPELINE_HANG)
C_OP_ECC = np.int64(C.OP_ECC_FAULT)
C_OVERFLOW = np.int64(C.RING_OVERFLOW)

T_SS = np.int64(TcpState.SYN_SENT)
T_TW = np.int64(TcpState.TIME_WAIT)
T_CL = np.int64(TcpState.CLOSE)
T_INVALID = TCP_INVALID
T_IGNORE = TCP_IGNORE
P_TCP = PROTO_TCP
P_UDP = PROTO_UDP
P_ICMP = PROTO_ICMP
P_ICMP6 = PROTO_ICMPV6
