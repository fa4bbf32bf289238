"""Constants of the fast engine's kernels as numba-frozen scalars: masks and shifts, the
contract's codes (interface.py: outcomes, reasons, statuses, events, counters) and the tracker's.

numba freezes module globals at compile time, so the enums are copied here as plain ints once.
"""

from __future__ import annotations

import numpy as np

from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine import interface as itf
from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.tcp import TcpState
from starfabric.fornax.keys import C_ALT, C_FIN, C_MUL
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP

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

ECC_CLEAN = 0
ECC_CORR = 1
ECC_UNCORR = 2


def _i64(*codes: int) -> tuple[np.int64, ...]:
    """Enum members as numba-frozen int64 scalars."""
    return tuple(np.int64(c) for c in codes)


OC, R, ST, EV, C = itf.Outcome, itf.Reason, itf.Status, itf.EventType, itf.Counter
O_HIT, O_MISS, O_STALE, O_FAULT, O_DROP, O_HUNG = _i64(
    OC.HIT, OC.MISS, OC.STALE, OC.FAULT, OC.DROP_HW, OC.PORT_HUNG
)
R_NONE, R_NO_ENTRY, R_ENI, R_VPC, R_ECC, R_DROP, R_STALLED = _i64(
    R.NONE, R.NO_ENTRY, R.ENI_VERSION, R.VPC_VERSION, R.ECC_UNCORRECTABLE, R.DROP_ACTION,
    R.PORT_STALLED,
)  # fmt: skip
R_TCP_INVALID, R_TCP_IGNORED, R_REOPEN, R_KEY_OK, R_KEY_SUSPECT, R_KILLED = _i64(
    R.TCP_INVALID, R.TCP_IGNORED, R.TCP_REOPEN, R.KEY_CONSISTENT, R.KEY_SUSPECT, R.CT_KILLED
)
ST_OK, ST_EXISTS, ST_NOT_FOUND, ST_FULL, ST_FAILED, ST_BAD_SCOPE, ST_ECC = _i64(
    ST.OK, ST.EXISTS, ST.NOT_FOUND, ST.TABLE_FULL, ST.INSERT_FAILED, ST.BAD_SCOPE, ST.ECC_FAULT
)
EV_AGED, EV_CLOSED, EV_MISMATCH, EV_ECC_CORR, EV_ECC_UNCORR = _i64(
    EV.AGED, EV.CLOSED, EV.VERSION_MISMATCH, EV.ECC_CORRECTED, EV.ECC_UNCORRECTABLE
)
EV_INSERT_FAILED, EV_TABLE_FULL, EV_HANG, EV_OVERFLOW = _i64(
    EV.INSERT_FAILED, EV.TABLE_FULL, EV.PIPELINE_HANG, EV.RING_OVERFLOW
)
C_PACKETS, C_HIT, C_MISS, C_STALE, C_FAULT, C_DROP, C_HUNG, C_BYTES = _i64(
    C.PACKETS, C.HIT, C.MISS, C.STALE, C.FAULT, C.DROP_HW, C.PORT_HUNG, C.BYTES_FORWARDED
)
C_TCP_INVALID, C_TCP_IGNORED, C_REOPEN, C_ECC_CORR, C_ECC_UNCORR, C_MISMATCH = _i64(
    C.TCP_INVALID, C.TCP_IGNORED, C.TCP_REOPEN, C.ECC_CORRECTED, C.ECC_UNCORRECTABLE,
    C.MISMATCH_EVENTS,
)  # fmt: skip
C_INS_OK, C_INS_EXISTS, C_INS_FULL, C_INS_FAILED, C_INS_SCOPE, C_DISPL = _i64(
    C.INSERT_OK, C.INSERT_EXISTS, C.INSERT_TABLE_FULL, C.INSERT_FAILED, C.INSERT_BAD_SCOPE,
    C.DISPLACEMENTS,
)  # fmt: skip
C_DEL_OK, C_DEL_NF, C_MOD_OK, C_MOD_NF, C_Q_OK, C_Q_NF, C_DUMP = _i64(
    C.DELETE_OK, C.DELETE_NOT_FOUND, C.MODIFY_OK, C.MODIFY_NOT_FOUND, C.QUERY_OK,
    C.QUERY_NOT_FOUND, C.DUMP_ENTRIES,
)  # fmt: skip
C_AGED, C_CLOSED, C_SCRUB, C_EV_RAISED, C_EV_LOST, C_HANG, C_OP_ECC, C_OVERFLOW = _i64(
    C.AGED, C.CLOSED, C.SCRUB_VISITED, C.EVENTS_RAISED, C.EVENTS_LOST, C.PIPELINE_HANG,
    C.OP_ECC_FAULT, C.RING_OVERFLOW,
)  # fmt: skip
V_INVALID = CT.V_INVALID
V_IGNORE = CT.V_IGNORE
V_REOPEN = CT.V_REOPEN
V_KILL = CT.V_KILL
V_RELATED = CT.V_RELATED
TRACK_META = np.uint64(CT.TRACK_META_MASK)

T_TW = np.int64(TcpState.TIME_WAIT)
T_CL = np.int64(TcpState.CLOSE)
P_TCP = PROTO_TCP
P_ICMP = PROTO_ICMP
P_ICMP6 = PROTO_ICMPV6
