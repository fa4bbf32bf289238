"""An ICMP error quoting a session that a policy change made stale: RELATED, as in the kernel
(nf_conntrack_inet_error finds the entry; the ruleset plays no part), after the session is
read back and decided again, not a new ICMP packet the tracker calls INVALID."""

from __future__ import annotations

import pytest

from starfabric.fornax.conformance import _error_batch, engine_config, packet_batch
from starfabric.fornax.engine import FastEngine, FlowKeys, ReferenceEngine, Status
from starfabric.fornax.engine import conntrack as CT
from starfabric.fornax.engine.interface import Scope
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.softpath import SoftPathConfig
from starfabric.fornax.vpc.allow_all import allow_all_policy

ADDR = {"client": "10.17.1.2", "server": "10.17.2.2"}
CONV = {"proto": "udp", "port": 20001, "settings": {}}
NS = 1_000_000_000
ERROR = {"dir": 1, "error": {"type": 3, "code": 3, "outer_src": ADDR["server"],
         "outer_dst": ADDR["client"], "inner_src": ADDR["client"], "inner_dst": ADDR["server"],
         "inner": {"proto": "udp", "sport": 20001, "dport": 80}}}  # fmt: skip


@pytest.mark.parametrize("engine", [FastEngine, ReferenceEngine])
def test_error_on_a_stale_session_is_related(engine: type) -> None:
    policy = allow_all_policy(list(ADDR.values()))
    mgr = Manager(engine(engine_config({})), policy, softpath_config=SoftPathConfig(capacity=64))
    t = 10 * NS
    for d in (0, 1, 0):
        mgr.tick(t)
        mgr.process(packet_batch(CONV, {"dir": d, "payload": 8}, t, ADDR))
        t += NS
    own = FlowKeys.from_batch(packet_batch(CONV, {"dir": 0, "payload": 0}, t, ADDR))
    st, _ = mgr.engine.query(own, now_ns=t)
    assert st[0] == Status.OK  # the session is in hardware
    for s in range(policy.n_enis):
        mgr.engine.bump_version(Scope.ENI, s)
        mgr.softpath.bump_version(Scope.ENI, s)
    mgr.tick(t)
    fate = mgr.process(_error_batch(ERROR, t))
    assert int(fate.verdict[0]) == CT.V_RELATED
    mgr.tick(t + NS)
    fate = mgr.process(packet_batch(CONV, {"dir": 1, "payload": 8}, t + NS, ADDR))
    assert int(fate.verdict[0]) == CT.V_ACCEPT  # the session lives on, decided again
