"""Numeric codes shared by the compiled policy, its kernels and the reference evaluator."""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Reason(IntEnum):
    """Why a first packet (or its reply direction) is dropped; ALLOW when it is not."""

    ALLOW = 0
    NO_ENI = 1  # the sender's (vni, source address) is no ENI
    NO_DEST = 2  # the destination address is no ENI (or no EIP, from the gateway)
    SG_DENY_OUT = 3  # no egress rule of the sender's security groups matches
    ACL_DENY_OUT = 4  # the sender subnet's network ACL denies it leaving
    ACL_DENY_IN = 5  # the receiver subnet's network ACL denies it entering
    SG_DENY_IN = 6  # no ingress rule of the receiver's security groups matches
    NO_ROUTE = 7  # no route (longest prefix) covers the destination
    BLACKHOLE = 8  # the longest-prefix route is a blackhole
    NO_PUBLIC_IP = 9  # IPv4 to the internet gateway from an ENI without an EIP


class ActionKind(IntEnum):
    """What the datapath does with a packet of one direction of a session."""

    DELIVER = 0  # VXLAN to (host, port, vni) in the same VPC
    SNAT = 1  # rewrite source to a public address (pool: manager allocates; else the EIP), to IGW
    DNAT = 2  # rewrite destination to the ENI's private address, then deliver like DELIVER
    TO_PEER = 3  # VXLAN to (host, port, vni) in a peered VPC
    TO_IGW = 4  # out of the internet gateway unchanged (IPv6)
    DROP = 5  # drop, counting `reason`


class RouteTarget(IntEnum):
    LOCAL = 0
    PEERING = 1
    NAT_GATEWAY = 2
    INTERNET_GATEWAY = 3
    BLACKHOLE = 4


class NatKind(IntEnum):
    NONE = 0
    POOL = 1  # shared public IPs of a NAT gateway; the manager allocates (ip, port)
    EIP = 2  # 1:1 elastic IP, ports preserved


ACTION_DROP = 0xFFFF_FFFF
"""Action handle the hardware drops on without a table lookup; never a row of the table."""

NO_SCOPE = 0xFFFF_FFFF
"""Scope id of a result that has no ENI (or VPC) to attribute it to."""

GATEWAY_SCOPE = 0
"""VPC scope id of north-south traffic that reaches no VPC (unsolicited, unknown VNI)."""

ACTION_DTYPE = np.dtype(
    [
        ("kind", np.uint8),
        ("reason", np.uint8),
        ("host", np.uint32),
        ("port", np.uint32),
        ("vni", np.uint32),
        ("nat_hi", np.uint64),
        ("nat_lo", np.uint64),
        ("pool", np.int32),
    ]
)
"""One row of the action table: `port` is the ENI id (one port per ENI); `nat_*` is the
address a NAT rewrites to (SNAT to an EIP, DNAT to the private address); `pool` the NAT
gateway id for pooled SNAT (-1 otherwise)."""

DIR_INGRESS = 0
DIR_EGRESS = 1
