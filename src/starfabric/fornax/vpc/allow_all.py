"""The allow-everything policy: Fornax as a connection tracker only (no security decisions).

    policy = allow_all_policy(["10.17.1.2", "10.17.2.2"])

One tenant, one VPC (VNI `vni`) spanning every address, each address an ENI whose security
group allows all traffic both ways: every first packet is allowed, so what a datapath does to
a packet is decided by connection tracking alone (engine/conntrack.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starfabric.fornax.vpc.compile import CompiledPolicy, compile_policy
from starfabric.fornax.vpc.load import parse_vpc_spec


def allow_all_policy(addresses: Sequence[str], vni: int = 1) -> CompiledPolicy:
    """A compiled policy allowing all traffic between (and from/to) the given addresses."""
    enis = []
    for i, a in enumerate(addresses):
        ip = ipaddress.ip_address(a)
        fam = "ipv4" if ip.version == 4 else "ipv6"
        enis.append({"name": f"eni-{i}", "subnet": "all", "host": "host", fam: str(ip),
                     "security_groups": ["all"]})  # fmt: skip
    rules = [{"direction": d, "protocol": "all", "cidr": c}
             for d in ("ingress", "egress") for c in ("0.0.0.0/0", "::/0")]  # fmt: skip
    spec = {
        "hosts": [{"name": "host"}],
        "tenants": [{"name": "tracking", "vpcs": [{
            "name": "all", "vni": vni, "cidrs": ["0.0.0.0/0", "::/0"],
            "subnets": [{"name": "all", "cidr": "0.0.0.0/0", "ipv6_cidr": "::/0"}],
            "security_groups": [{"name": "all", "rules": rules}],
            "enis": enis,
        }]}],
    }  # fmt: skip
    return compile_policy(parse_vpc_spec(spec, source="allow_all_policy"))


__all__ = ["allow_all_policy"]
