"""Random valid tenant networks, mutations of them, and first packets that exercise every
branch of the policy (shared by the differential, diff and benchmark tests)."""

from __future__ import annotations

import ipaddress
import random
from typing import Any

import numpy as np

from starfabric.fornax.packets import PacketBatch, ip_to_halves
from starfabric.fornax.vpc.load import parse_vpc_spec
from starfabric.fornax.vpc.spec import VpcSpec

PORTS: list[Any] = [22, 80, 443, "1000-2000", "1024-65535", 53, "0-1023"]
PROTOS = ["all", "tcp", "udp", "icmp", "icmpv6"]
PUBLIC = ["8.8.8.8", "198.51.100.7", "1.1.1.1"]
PUBLIC6 = ["2001:db8::1", "2001:db8:ffff::7"]


def _rule_match(rng: random.Random) -> dict[str, Any]:
    proto = rng.choice(PROTOS)
    out: dict[str, Any] = {"protocol": proto}
    if proto in ("tcp", "udp") and rng.random() < 0.7:
        out["ports"] = rng.choice(PORTS)
    if proto in ("icmp", "icmpv6") and rng.random() < 0.4:
        out["icmp_type"] = rng.choice([8, 0, 128, 3])
    return out


def random_spec_data(rng: random.Random) -> dict[str, Any]:
    """A random but valid VPC spec as plain data (so it can be mutated and re-validated)."""
    hosts = [{"name": f"h{i}"} for i in range(rng.randint(1, 3))]
    tenants: list[dict[str, Any]] = []
    vpc_keys: list[tuple[str, int, bool, dict[str, Any]]] = []  # (qualified, k, v6, data)
    vni = 100
    public_n = 0
    for t in range(rng.randint(1, 2)):
        vpcs = []
        for v in range(rng.randint(1, 2)):
            k = rng.choice([1, 2, 3])
            v6 = rng.random() < 0.5
            vni += rng.randint(1, 5)
            cidrs = [f"10.{k}.0.0/16"] + ([f"fd00:{k}::/48"] if v6 else [])
            subnets = []
            for s in range(rng.randint(1, 3)):
                sub: dict[str, Any] = {"name": f"s{s}", "cidr": f"10.{k}.{s}.0/24"}
                if v6 and rng.random() < 0.7:
                    sub["ipv6_cidr"] = f"fd00:{k}:0:{s}::/64"
                subnets.append(sub)
            sgs = [{"name": f"g{g}", "rules": []} for g in range(rng.randint(1, 3))]
            for g in sgs:
                if rng.random() < 0.7:
                    g["rules"].append({"direction": "egress", "cidr": "0.0.0.0/0"})
                    g["rules"].append({"direction": "egress", "cidr": "::/0"})
                if rng.random() < 0.6:
                    g["rules"].append({"direction": "ingress", "cidr": f"10.{k}.0.0/16"})
                if rng.random() < 0.4:
                    g["rules"].append({"direction": "ingress", "cidr": "10.0.0.0/8"})
                if rng.random() < 0.4:
                    g["rules"].append(
                        {
                            "direction": "ingress",
                            "protocol": "tcp",
                            "ports": "0-1023",
                            "cidr": "0.0.0.0/0",
                        }
                    )
                for _ in range(rng.randint(0, 4)):
                    r = {"direction": rng.choice(["ingress", "egress"]), **_rule_match(rng)}
                    if rng.random() < 0.25:
                        r["sg"] = rng.choice(sgs)["name"]
                    else:
                        r["cidr"] = rng.choice(
                            [
                                "0.0.0.0/0",
                                "::/0",
                                f"10.{k}.0.0/16",
                                f"10.{k}.{rng.randint(0, 2)}.0/24",
                                f"10.{rng.choice([1, 2, 3])}.0.0/16",
                                "198.51.100.0/24",
                                f"fd00:{k}::/48",
                            ]
                        )
                    g["rules"].append(r)
            acls = []
            for a in range(rng.randint(0, 2)):
                rules = []
                for _ in range(rng.randint(0, 5)):
                    r = {
                        "action": rng.choice(["allow", "allow", "deny"]),
                        "direction": rng.choice(["ingress", "egress"]),
                        **_rule_match(rng),
                    }
                    if rng.random() < 0.6:
                        r["cidr"] = rng.choice(
                            ["0.0.0.0/0", f"10.{k}.0.0/16", f"10.{k}.1.0/24", "::/0", "8.8.8.0/24"]
                        )
                    rules.append(r)
                acls.append({"name": f"a{a}", "rules": rules})
            nats = []
            if rng.random() < 0.5:
                ips = []
                for _ in range(rng.randint(1, 2)):
                    public_n += 1
                    ips.append(f"203.0.113.{public_n}")
                nats.append({"name": "nat", "public_ips": ips})
            tables = []
            for rt in range(rng.randint(0, 2)):
                routes: list[dict[str, Any]] = []
                default = rng.choice(
                    ["internet_gateway", "nat_gateway", "nat_gateway", "blackhole", None]
                )
                if default == "nat_gateway" and not nats:
                    default = "internet_gateway"
                if default is not None:
                    route = {"prefix": "0.0.0.0/0", "target": default}
                    if default == "nat_gateway":
                        route["via"] = "nat"
                    routes.append(route)
                if rng.random() < 0.7:
                    routes.append({"prefix": "::/0", "target": "internet_gateway"})
                if rng.random() < 0.4:
                    routes.append({"prefix": "8.8.8.0/24", "target": "blackhole"})
                tables.append({"name": f"rt{rt}", "routes": routes})
            for sub in subnets:
                if acls and rng.random() < 0.6:
                    sub["acl"] = rng.choice(acls)["name"]
                if tables and rng.random() < 0.6:
                    sub["route_table"] = rng.choice(tables)["name"]
            enis = []
            for e in range(rng.randint(1, 5)):
                sub = rng.choice(subnets)
                s_ix = int(str(sub["cidr"]).split(".")[2])
                eni: dict[str, Any] = {
                    "name": f"e{e}",
                    "subnet": sub["name"],
                    "host": rng.choice(hosts)["name"],
                    "ipv4": f"10.{k}.{s_ix}.{10 + e}",
                    "security_groups": rng.sample(
                        [g["name"] for g in sgs], rng.randint(min(1, len(sgs)), len(sgs))
                    ),
                }
                if "ipv6_cidr" in sub and rng.random() < 0.8:
                    eni["ipv6"] = f"fd00:{k}:0:{s_ix}::{10 + e:x}"
                enis.append(eni)
            eips = []
            for eni in enis:
                if rng.random() < 0.3:
                    public_n += 1
                    eips.append({"ip": f"203.0.113.{public_n}", "eni": eni["name"]})
            vpc = {
                "name": f"v{v}",
                "vni": vni,
                "cidrs": cidrs,
                "subnets": subnets,
                "enis": enis,
                "security_groups": sgs,
                "network_acls": acls,
                "route_tables": tables,
                "nat_gateways": nats,
                "eips": eips,
            }
            if tables and rng.random() < 0.8:
                vpc["main_route_table"] = rng.choice(tables)["name"]
            vpcs.append(vpc)
            vpc_keys.append((f"t{t}/v{v}", k, v6, vpc))
        tenants.append({"name": f"t{t}", "vpcs": vpcs})
    peerings = []
    for i, (qa, ka, _, va) in enumerate(vpc_keys):
        for qb, kb, _, vb in vpc_keys[i + 1 :]:
            if ka == kb or rng.random() < 0.3:
                continue
            name = f"p{len(peerings)}"
            peerings.append({"name": name, "a": qa, "b": qb})
            for me, other_k in ((va, kb), (vb, ka)):
                if not me["route_tables"]:
                    me["route_tables"].append({"name": "rtp", "routes": []})
                    me["main_route_table"] = "rtp"
                for t_ in me["route_tables"]:
                    if rng.random() < 0.8:
                        taken = {r["prefix"] for r in t_["routes"]}
                        prefix = rng.choice([f"10.{other_k}.0.0/16", f"10.{other_k}.1.0/24"])
                        if prefix not in taken:
                            route = {"prefix": prefix, "target": "peering", "via": name}
                            t_["routes"].append(route)
    return {"hosts": hosts, "tenants": tenants, "peerings": peerings}


def random_spec(rng: random.Random) -> VpcSpec:
    return parse_vpc_spec(random_spec_data(rng))


def mutate(data: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One random, valid-preserving edit of spec data (deep-copied)."""
    import copy

    d = copy.deepcopy(data)
    vpc = rng.choice([v for t in d["tenants"] for v in t["vpcs"]])
    choice = rng.randint(0, 7)
    if choice == 0 and vpc["security_groups"]:
        g = rng.choice(vpc["security_groups"])
        if g["rules"] and rng.random() < 0.5:
            g["rules"].pop(rng.randrange(len(g["rules"])))
        else:
            g["rules"].append(
                {
                    "direction": rng.choice(["ingress", "egress"]),
                    **_rule_match(rng),
                    "cidr": "0.0.0.0/0",
                }
            )
    elif choice == 1 and vpc["enis"]:
        e = rng.choice(vpc["enis"])
        names = [g["name"] for g in vpc["security_groups"]]
        e["security_groups"] = rng.sample(names, rng.randint(0, len(names)))
    elif choice == 2 and vpc["network_acls"]:
        a = rng.choice(vpc["network_acls"])
        a["rules"].insert(
            0,
            {
                "action": rng.choice(["allow", "deny"]),
                "direction": rng.choice(["ingress", "egress"]),
                **_rule_match(rng),
            },
        )
    elif choice == 3 and vpc["enis"]:
        removed = vpc["enis"].pop(rng.randrange(len(vpc["enis"])))
        vpc["eips"] = [x for x in vpc["eips"] if x["eni"] != removed["name"]]
    elif choice == 4 and vpc["route_tables"]:
        t = rng.choice(vpc["route_tables"])
        t["routes"] = [r for r in t["routes"] if r["prefix"] != "0.0.0.0/0"]
        t["routes"].append(
            {"prefix": "0.0.0.0/0", "target": rng.choice(["blackhole", "internet_gateway"])}
        )
    elif choice == 5 and vpc["eips"]:
        vpc["eips"].pop()
    elif choice == 6 and vpc["enis"]:
        e = rng.choice(vpc["enis"])
        e["host"] = rng.choice(d["hosts"])["name"]
    else:
        sub = rng.choice(vpc["subnets"])
        s_ix = int(str(sub["cidr"]).split(".")[2])
        k = int(str(sub["cidr"]).split(".")[1])
        used = {e["name"] for e in vpc["enis"]}
        n = next(i for i in range(100, 200) if f"e{i}" not in used)
        vpc["enis"].append(
            {
                "name": f"e{n}",
                "subnet": sub["name"],
                "host": d["hosts"][0]["name"],
                "ipv4": f"10.{k}.{s_ix}.{n}",
            }
        )
    return d


def random_packets(spec: VpcSpec, rng: random.Random, n: int) -> PacketBatch:
    """First packets from ENIs, from the gateway and from strangers, to every kind of place."""
    enis = []
    all_addrs4: list[str] = []
    all_addrs6: list[str] = []
    eips: list[str] = []
    for t in spec.tenants:
        for v in t.vpcs:
            for e in v.enis:
                enis.append((v.vni, e))
                if e.ipv4:
                    all_addrs4.append(e.ipv4)
                if e.ipv6:
                    all_addrs6.append(e.ipv6)
            eips += [x.ip for x in v.eips]
            eips += [ip for nat in v.nat_gateways for ip in nat.public_ips]
    cols: dict[str, list[int]] = {k: [] for k in ("vni", "sh", "sl", "dh", "dl", "p", "sp", "dp")}
    for _ in range(n):
        kind = rng.random()
        if kind < 0.75 and enis:
            vni, e = rng.choice(enis)
            v6 = e.ipv6 is not None and (e.ipv4 is None or rng.random() < 0.3)
            src = str(e.ipv6 if v6 else e.ipv4)
            pool = all_addrs6 if v6 else all_addrs4
            r = rng.random()
            if r < 0.6 and pool:
                dst = rng.choice(pool)
            elif r < 0.75:
                net = ipaddress.ip_network(
                    rng.choice(["fd00:1::/48", "fd00:2::/48"])
                    if v6
                    else rng.choice(["10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"])
                )
                dst = str(net[rng.randint(1, 600)])
            else:
                dst = rng.choice(PUBLIC6 if v6 else PUBLIC)
        elif kind < 0.92:
            vni = 0
            src = rng.choice(PUBLIC)
            dst = rng.choice(eips) if eips and rng.random() < 0.8 else rng.choice(PUBLIC)
            v6 = False
            if rng.random() < 0.1:
                src, dst, v6 = rng.choice(PUBLIC6), rng.choice(PUBLIC6), True
        else:
            vni = rng.choice([0, 1, 101, 103, 999])
            v6 = False
            src = f"10.{rng.randint(1, 3)}.{rng.randint(0, 2)}.{rng.randint(1, 30)}"
            dst = rng.choice(all_addrs4 or PUBLIC)
        if rng.random() < 0.02:  # malformed: the two addresses of different families
            dst = rng.choice(PUBLIC if ":" in src else PUBLIC6)
        proto = rng.choice([6, 6, 17, 17, 58 if v6 else 1, 47])
        if proto in (1, 58):
            sport = rng.randint(0, 5)
            dport = (rng.choice([8, 0, 3] if proto == 1 else [128, 129, 1]) << 8) | rng.randint(
                0, 1
            )
        elif proto == 47:
            sport = dport = 0
        else:
            sport = rng.choice([rng.randint(1024, 65535), 53, 80, 443, 22])
            dport = rng.choice([22, 80, 443, 53, 1500, 3000, 8080, 5000, 1023, 1024])
        sh, sl = ip_to_halves(src)
        dh, dl = ip_to_halves(dst)
        for key, val in zip(
            ("vni", "sh", "sl", "dh", "dl", "p", "sp", "dp"),
            (vni, sh, sl, dh, dl, proto, sport, dport),
            strict=True,
        ):
            cols[key].append(val)
    u64 = np.uint64
    return PacketBatch.from_columns(
        time_ns=np.arange(n, dtype=np.int64),
        vni=np.array(cols["vni"], dtype=np.uint32),
        src_hi=np.array(cols["sh"], dtype=u64),
        src_lo=np.array(cols["sl"], dtype=u64),
        dst_hi=np.array(cols["dh"], dtype=u64),
        dst_lo=np.array(cols["dl"], dtype=u64),
        proto=np.array(cols["p"], dtype=np.uint8),
        sport=np.array(cols["sp"], dtype=np.uint16),
        dport=np.array(cols["dp"], dtype=np.uint16),
        tcp_flags=np.full(n, 0x02, dtype=np.uint8),
    )
