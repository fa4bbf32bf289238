"""The session record: 23 uint64 words (184 bytes) per table slot, IPv6 keys included.

One row of `records[capacity, 23]` is one session. The key is stored canonically (endpoint A
is the lower of the two, see fornax/keys.py); everything that has a direction (actions,
counters) is stored per *canonical* direction, and the FLAG_ORIG_B flag says which canonical
direction is the connection's ORIGINAL one.

Two ECC groups (ecc.py), each SEC-DED over its data words:
  group A  words 0..13 (key, meta, scopes, versions, actions, last-seen, counters, cookie),
           check word 14 (unchanged from the 15-word record of issue 2);
  group B  words 15..21, the connection tracker's window state (conntrack.py, per ORIGINAL /
           REPLY direction, not canonical) and the timer deadline, check word 22.
W_META carries, besides protocol, TCP state and flags, the tracker's small fields in bits
24..63 (conntrack.SH_*). With the 2-byte tag per slot a session costs 186 bytes (issue 17:
<= 192).
"""

from __future__ import annotations

W_A_HI = 0  # endpoint A address, high 64 bits
W_A_LO = 1  # endpoint A address, low 64 bits (IPv4 stored IPv4-mapped)
W_B_HI = 2
W_B_LO = 3
W_PORTS = 4  # vni << 32 | port A << 16 | port B
W_META = 5  # proto | tcp state << 8 | flags << 16
W_SCOPE = 6  # ENI scope id | VPC scope id << 32
W_VER = 7  # ENI version snapshot | VPC version snapshot << 32
W_ACT = 8  # action handle for direction 0 (A->B) | direction 1 (B->A) << 32
W_SEEN = 9  # last-seen time, ns (the packet timestamps' clock)
W_PKTS = 10  # packets direction 0 | direction 1 << 32 (32-bit counters, wrap modulo 2**32)
W_BYTES0 = 11  # bytes direction 0 (A->B)
W_BYTES1 = 12  # bytes direction 1 (B->A)
W_AUX = 13  # opaque 64-bit software cookie (the manager's, e.g. SNAT index and port)
W_ECC = 14  # SEC-DED check word over words 0..13
W_TRACK = 15  # first tracker word (conntrack.T_* relative to it)
W_TD_END = 15  # td_end ORIGINAL | REPLY << 32 (UDP: stream time, ns)
W_TD_MAXEND = 16
W_TD_MAXWIN = 17
W_TD_MAXACK = 18
W_LAST = 19  # last_seq | last_ack << 32
W_LAST2 = 20  # last_end | last_win << 32
W_EXPIRES = 21  # timer deadline, ns on the packets' clock
W_ECC2 = 22  # SEC-DED check word over words 15..21

N_DATA_WORDS = 14  # group A
N_TRACK_WORDS = 7  # group B
N_WORDS = 23
ECC_GROUPS = ((0, N_DATA_WORDS, W_ECC), (W_TRACK, N_TRACK_WORDS, W_ECC2))
RECORD_BYTES = N_WORDS * 8
TAG_BYTES = 2
BYTES_PER_ENTRY = RECORD_BYTES + TAG_BYTES

FLAG_ORIG_B = 0x01  # ORIGINAL direction is canonical direction 1 (B -> A)
FLAG_MISMATCH_REPORTED = 0x02  # a VERSION_MISMATCH event was raised since the last modify
FLAG_SEEN_REPLY = 0x04  # IPS_SEEN_REPLY: a packet the tracker accepted went the REPLY way
FLAG_ASSURED = 0x08  # IPS_ASSURED (conntrack.py)

MASK32 = 0xFFFF_FFFF
MASK64 = 0xFFFF_FFFF_FFFF_FFFF

__all__ = [
    "BYTES_PER_ENTRY",
    "ECC_GROUPS",
    "FLAG_ASSURED",
    "FLAG_MISMATCH_REPORTED",
    "FLAG_ORIG_B",
    "FLAG_SEEN_REPLY",
    "MASK32",
    "MASK64",
    "N_DATA_WORDS",
    "N_TRACK_WORDS",
    "N_WORDS",
    "RECORD_BYTES",
    "TAG_BYTES",
    "W_ACT",
    "W_AUX",
    "W_A_HI",
    "W_A_LO",
    "W_BYTES0",
    "W_BYTES1",
    "W_B_HI",
    "W_B_LO",
    "W_ECC",
    "W_ECC2",
    "W_EXPIRES",
    "W_LAST",
    "W_LAST2",
    "W_META",
    "W_PKTS",
    "W_PORTS",
    "W_SCOPE",
    "W_SEEN",
    "W_TD_END",
    "W_TD_MAXACK",
    "W_TD_MAXEND",
    "W_TD_MAXWIN",
    "W_TRACK",
    "W_VER",
]
