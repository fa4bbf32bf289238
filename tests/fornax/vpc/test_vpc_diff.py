"""A policy change bumps the scopes of every session it could change, and no more than the
scope model needs."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from starfabric.fornax.vpc.codes import GATEWAY_SCOPE, NO_SCOPE
from starfabric.fornax.vpc.compile import compile_policy
from starfabric.fornax.vpc.diff import affected_scopes, recompile
from starfabric.fornax.vpc.evaluate import describe, evaluate
from starfabric.fornax.vpc.load import parse_vpc_spec

from .vpcgen import mutate, random_packets, random_spec_data

PROVENANCE = ("route", "sg_out", "acl_out", "acl_in", "sg_in")
"""Which rule matched: renumbered when an earlier rule goes, without changing the decision."""


def _decision(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in PROVENANCE}


@settings(max_examples=150, deadline=None)
@example(seed=1159)  # an earlier SG rule removed: the matching rule's index moved, nothing else
@given(st.integers(0, 2**32 - 1))
def test_every_changed_decision_is_in_an_affected_scope(seed: int) -> None:
    rng = random.Random(seed)
    data = random_spec_data(rng)
    old = compile_policy(parse_vpc_spec(data))
    new_data = data
    for _ in range(rng.randint(1, 3)):
        new_data = mutate(new_data, rng)
    new, scopes = recompile(old, parse_vpc_spec(new_data))
    batch = random_packets(parse_vpc_spec(new_data if rng.random() < 0.5 else data), rng, 200)
    r_old, r_new = evaluate(old, batch), evaluate(new, batch)
    eni_set, vpc_set = set(scopes.eni.tolist()), set(scopes.vpc.tolist())
    for i in range(len(batch)):
        if _decision(describe(old, r_old, i)) == _decision(describe(new, r_new, i)):
            # unchanged decisions keep their handles (sessions under untouched scopes stay valid)
            if int(r_old.eni_scope[i]) not in eni_set and int(r_old.vpc_scope[i]) not in vpc_set:
                assert r_old.fwd_action[i] == r_new.fwd_action[i]
            continue
        e, v = int(r_old.eni_scope[i]), int(r_old.vpc_scope[i])
        assert (e != NO_SCOPE and e in eni_set) or v in vpc_set, f"packet {i}"


def _data() -> dict:
    return {
        "hosts": [{"name": "h1"}, {"name": "h2"}],
        "tenants": [
            {
                "name": "t",
                "vpcs": [
                    {
                        "name": "a",
                        "vni": 10,
                        "cidrs": ["10.0.0.0/16"],
                        "subnets": [
                            {"name": "s1", "cidr": "10.0.1.0/24", "acl": "acl1"},
                            {"name": "s2", "cidr": "10.0.2.0/24"},
                        ],
                        "network_acls": [{"name": "acl1", "rules": []}],
                        "security_groups": [
                            {"name": "web", "rules": [{"direction": "egress", "cidr": "0.0.0.0/0"}]},
                            {"name": "db", "rules": [{"direction": "ingress", "sg": "web"}]},
                        ],
                        "enis": [
                            {"name": "w1", "subnet": "s1", "host": "h1", "ipv4": "10.0.1.10", "security_groups": ["web"]},
                            {"name": "w2", "subnet": "s1", "host": "h2", "ipv4": "10.0.1.11", "security_groups": ["web"]},
                            {"name": "d1", "subnet": "s2", "host": "h2", "ipv4": "10.0.2.10", "security_groups": ["db"]},
                        ],
                    },
                    {"name": "b", "vni": 11, "cidrs": ["10.0.0.0/16"]},
                ],
            }
        ],
    }  # fmt: skip


def _scopes(data: dict, edit) -> tuple[list[str], list[str]]:  # type: ignore[no-untyped-def]
    old = compile_policy(parse_vpc_spec(data))
    import copy

    d2 = copy.deepcopy(data)
    edit(d2)
    new, s = recompile(old, parse_vpc_spec(d2))
    return [new.eni_names[i] for i in s.eni], [new.vpc_names[i] for i in s.vpc]


def test_no_change_touches_nothing() -> None:
    old = compile_policy(parse_vpc_spec(_data()))
    assert len(affected_scopes(old, compile_policy(parse_vpc_spec(_data()), previous=old))) == 0


def test_egress_rule_touches_only_the_members() -> None:
    def edit(d: dict) -> None:
        d["tenants"][0]["vpcs"][0]["security_groups"][0]["rules"].append(
            {"direction": "egress", "protocol": "udp", "cidr": "::/0"}
        )

    assert _scopes(_data(), edit) == (["t/a/w1", "t/a/w2"], [])


def test_ingress_rule_touches_the_vpc_that_reaches_it() -> None:
    def edit(d: dict) -> None:
        d["tenants"][0]["vpcs"][0]["security_groups"][1]["rules"] = []

    # d1's own sessions and every session toward it (opened anywhere in VPC a); VPC b is
    # the same address space but another tenant network: untouched.
    assert _scopes(_data(), edit) == (["t/a/d1"], ["t/a"])


def test_membership_change_reaches_rules_that_reference_the_group() -> None:
    def edit(d: dict) -> None:
        d["tenants"][0]["vpcs"][0]["enis"][1]["security_groups"] = []

    enis, vpcs = _scopes(_data(), edit)
    assert enis == ["t/a/w2"] and vpcs == ["t/a"]  # d1 admits 'web' members: w2 left


def test_added_eni_and_eip() -> None:
    def edit(d: dict) -> None:
        v = d["tenants"][0]["vpcs"][1]
        v["subnets"] = [{"name": "x", "cidr": "10.0.9.0/24"}]
        v["enis"] = [{"name": "n", "subnet": "x", "host": "h1", "ipv4": "10.0.9.9"}]
        v["eips"] = [{"ip": "203.0.113.9", "eni": "n"}]

    enis, vpcs = _scopes(_data(), edit)
    assert enis == ["t/b/n"] and vpcs == ["<gateway>", "t/b"]


def test_ids_and_handles_are_stable() -> None:
    old = compile_policy(parse_vpc_spec(_data()))
    d2 = _data()
    d2["tenants"][0]["vpcs"][0]["enis"].pop(0)
    new, _ = recompile(old, parse_vpc_spec(d2))
    assert new.eni_names[:3] == old.eni_names and not new.eni_valid[0]
    assert (new.actions[: len(old.actions)] == old.actions).all()
    assert new.eni_act_deliver[2] == old.eni_act_deliver[2]
    assert np.array_equal(new.act_drop, old.act_drop)
    assert GATEWAY_SCOPE == 0 and new.vpc_names[0] == "<gateway>"
