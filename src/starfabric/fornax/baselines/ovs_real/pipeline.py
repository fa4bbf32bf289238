"""The OpenFlow pipeline of the private OVS: a cloud vSwitch's stateful security group, as
OVN's ls_in_acl / NSX's distributed firewall build it on conntrack (ovs-fields(7),
ovs-actions(7) `ct`):

- table 0: IPv4 from either port -> `ct(table=1, zone=Z)` (track, recirculate);
- table 1: `+trk+est` / `+trk+rel` -> forward (table 3); `+trk+inv` -> drop;
  `+trk+new` from the client port -> the allow list (table 2); anything else -> drop;
- table 2: the security group's allow list (TCP/UDP destination ports and prefixes); an
  allowed new connection is committed, `ct(commit, zone=Z)`, then forwarded;
- table 3: client port -> server port and back.

The server side never opens connections (ingress-only group), as a VM's inbound rules.
"""

from __future__ import annotations

from starfabric.fornax.baselines.ovs_real.instance import PORT_CLIENT, PORT_SERVER

#: Conntrack zone of the pipeline (one tenant port pair).
CT_ZONE = 7
#: Server subnet the allow list admits (the driver's servers are in it).
SERVER_NET = "10.2.0.0/16"
#: The allow list: (protocol, destination port or port/mask) pairs, as a security group's
#: rules. The driver uses TCP 80, 443, 8080 and UDP 53, 5001.
ALLOW = (
    ("tcp", "22"),
    ("tcp", "80"),
    ("tcp", "443"),
    ("tcp", "0x1f90/0xfff0"),  # 8080-8095
    ("udp", "53"),
    ("udp", "0x1388/0xfff8"),  # 5000-5007
    ("udp", "123"),
)


def pipeline_flows(zone: int = CT_ZONE) -> str:
    """ovs-ofctl flow text of the pipeline (module docstring)."""
    c, s = PORT_CLIENT, PORT_SERVER
    lines = [
        f"table=0,priority=100,ip,in_port={c},actions=ct(table=1,zone={zone})",
        f"table=0,priority=100,ip,in_port={s},actions=ct(table=1,zone={zone})",
        "table=0,priority=0,actions=drop",
        "table=1,priority=200,ct_state=+trk+est-inv,ip,actions=goto_table:3",
        "table=1,priority=200,ct_state=+trk+rel-inv,ip,actions=goto_table:3",
        "table=1,priority=150,ct_state=+trk+inv,actions=drop",
        f"table=1,priority=100,ct_state=+trk+new,ip,in_port={c},actions=goto_table:2",
        "table=1,priority=0,actions=drop",
    ]
    for proto, port in ALLOW:
        lines.append(
            f"table=2,priority=100,{proto},nw_dst={SERVER_NET},tp_dst={port},"
            f"actions=ct(commit,zone={zone}),goto_table:3"
        )
    lines += [
        "table=2,priority=0,actions=drop",
        f"table=3,priority=100,in_port={c},actions=output:{s}",
        f"table=3,priority=100,in_port={s},actions=output:{c}",
        "table=3,priority=0,actions=drop",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["ALLOW", "CT_ZONE", "SERVER_NET", "pipeline_flows"]
