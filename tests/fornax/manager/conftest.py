"""Shared fixtures of the manager tests: engines in both implementations."""

from __future__ import annotations

from typing import Any

import pytest

from starfabric.fornax.engine import FastEngine, SessionEngine
from starfabric.fornax.engine.reference import ReferenceEngine

#: Timeouts far beyond any test's simulated time, so nothing ages unless a test wants it.
NO_AGING = {
    k: 1.0e6
    for k in (
        "tcp_syn_sent_s", "tcp_syn_recv_s", "tcp_established_s", "tcp_fin_wait_s",
        "tcp_close_wait_s", "tcp_last_ack_s", "tcp_time_wait_s", "tcp_close_s",
        "tcp_syn_sent2_s", "tcp_none_s", "udp_unreplied_s", "udp_assured_s", "icmp_s",
        "generic_s",
    )
}  # fmt: skip


def make_engine(kind: str, **kw: Any) -> SessionEngine:
    cls = FastEngine if kind == "fast" else ReferenceEngine
    return cls(**kw)


@pytest.fixture(params=["fast", "reference"])
def engine_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)
