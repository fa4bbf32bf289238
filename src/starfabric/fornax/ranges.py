"""Fornax's integer fields and their valid values, built from the packet columns' dtypes
(packets.COLUMN_RANGES) and the session entry's, for the CLI options and spec fields that feed
them: `starfabric fornax trace --vni -1`, ``vni: -1`` in a scenario and
``PacketBatch.from_columns(vni=[-1])`` are refused with the same words (starfabric.ranges).
"""

from __future__ import annotations

from typing import Annotated

import numpy as np

from starfabric.fornax.packets import COLUMN_RANGES, VNI_RANGE
from starfabric.ranges import IntRange, ranged

VNI = VNI_RANGE
"""An overlay VNI: 24 bits (VXLAN RFC 7348 §5, Geneve RFC 8926 §3.4)."""
VPC_VNI = VNI.narrower(lo=1, what="24-bit VXLAN/Geneve VNI; 0 is the underlay, no overlay")
"""A VPC's own VNI: VNI 0 means a packet without overlay (the internet gateway's default)."""
L4_PORT = COLUMN_RANGES["sport"]
"""A TCP or UDP port (also an ICMP echo identifier)."""
PROTOCOL = COLUMN_RANGES["proto"]
INGRESS_PORT = COLUMN_RANGES["port"]
"""A NIC ingress port index; the engine's `n_ports` bounds it further."""
TIME_NS = COLUMN_RANGES["time_ns"].narrower(lo=0, what="nanoseconds on the engine clock, int64")
"""A packet time: the engine clock starts at 0."""
LENGTH = COLUMN_RANGES["length"]
ICMP_TYPE = IntRange.of_dtype(np.uint8, "ICMP type, uint8")
"""An ICMP/ICMPv6 type: the high byte of the `dport` column (type<<8 | code)."""
ACTION = IntRange.of_dtype(np.uint32, "action handle, uint32")
SCOPE_ID = IntRange.of_dtype(np.uint32, "version scope id, uint32")
"""An ENI or VPC scope id; the engine's `eni_scopes`/`vpc_scopes` bound it further."""
VERSION = IntRange.of_dtype(np.uint32, "policy version, uint32")
AUX = IntRange.of_dtype(np.uint64, "aux word, uint64")
SEED = IntRange.of_dtype(np.uint64, "random seed, uint64")
"""A seed for numpy's generators, which refuse negative ones."""

# pydantic field types of the same ranges, for specs: ``vni: Vni``.
Vni = Annotated[int, ranged(VNI)]
VpcVni = Annotated[int, ranged(VPC_VNI)]
L4Port = Annotated[int, ranged(L4_PORT)]
IcmpType = Annotated[int, ranged(ICMP_TYPE)]
IngressPort = Annotated[int, ranged(INGRESS_PORT)]
Action = Annotated[int, ranged(ACTION)]
ScopeId = Annotated[int, ranged(SCOPE_ID)]
Version = Annotated[int, ranged(VERSION)]
Aux = Annotated[int, ranged(AUX)]
Seed = Annotated[int, ranged(SEED)]

__all__ = [
    "ACTION",
    "AUX",
    "ICMP_TYPE",
    "INGRESS_PORT",
    "L4_PORT",
    "LENGTH",
    "PROTOCOL",
    "SCOPE_ID",
    "SEED",
    "TIME_NS",
    "VERSION",
    "VNI",
    "VPC_VNI",
    "Action",
    "Aux",
    "IcmpType",
    "IngressPort",
    "L4Port",
    "ScopeId",
    "Seed",
    "Version",
    "Vni",
    "VpcVni",
]
