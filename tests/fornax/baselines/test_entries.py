"""Entries per connection, software aging passes and the mirror's bytes."""

from __future__ import annotations

import numpy as np

from starfabric.fornax.baselines import SoftwareCentricConfig, ablation, doca_like, fornax
from starfabric.fornax.manager import Final

from .helpers import ACK, controller, web_packets


def _open(m, n: int, t_ns: int = 1_000_000) -> None:
    f = m.process(web_packets(np.arange(n), t_ns))
    assert (f.final == Final.SW_FORWARDED).all()


def test_per_direction_uses_two_entries_per_connection_bidirectional_one() -> None:
    for cfg, per in ((fornax(), 1), (ablation("per_direction"), 2), (doca_like(), 1)):
        m = controller(cfg)
        _open(m, 300)
        assert m.hw.occupancy() == per * 300
        assert m.sessions() == 300
        assert m.metrics.ops["insert"] == per * 300
        # both directions now hit hardware, each on its own entry
        fwd = m.process(web_packets(np.arange(300), 2_000_000, flags=ACK))
        rep = m.process(web_packets(np.arange(300), 2_000_000, reply=True, flags=ACK))
        assert (fwd.final == Final.HW_FORWARDED).all() and (rep.final == Final.HW_FORWARDED).all()
        assert m.hw.occupancy() == per * 300


def test_software_aging_deletes_idle_connections_whole() -> None:
    """poll/revalidate: hardware keeps entries (no scrub aging); the software pass deletes
    connections idle past the timeout, both entries of a per-direction one, and only once
    every entry of it is idle."""
    cfg = SoftwareCentricConfig(entries="per_direction", aging="revalidate", mirror="full",
                                idle_timeout_s=1.0)  # fmt: skip
    m = controller(cfg, engine_kw={"tcp_syn_sent_s": 0.01})
    _open(m, 100)
    m.tick(400_000_000)  # arms the revalidator; the hardware scrub ages nothing
    assert m.mirror is not None
    assert m.hw.occupancy() == 200 and m.mirror.count == 200
    # connections 0..49 stay busy in the REPLY direction only
    for t in (600_000_000, 1_100_000_000):
        m.process(web_packets(np.arange(50), t, reply=True, flags=ACK))
        m.tick(t)
    m.tick(1_500_000_000)
    assert m.sessions() == 50 and m.hw.occupancy() == 100 and m.mirror.count == 100
    assert m.metrics.counts["revalidate_aged"] == 50
    assert m.metrics.cpu_s["revalidate"] > 0
    assert m.metrics.ops["dump_entries"] >= 200


def test_poll_uses_the_engines_timeout_classes() -> None:
    m = controller(doca_like(), engine_kw={"tcp_syn_sent_s": 0.5})
    _open(m, 64)
    for t in (100_000_000, 1_200_000_000, 2_300_000_000):
        m.tick(t)
    assert m.sessions() == 0 and m.metrics.counts["poll_aged"] == 64
    assert m.metrics.cpu_s["poll"] > 0


def test_software_bytes_grow_with_flows_only_with_a_mirror() -> None:
    sizes = {}
    for name, cfg in (("none", fornax()), ("full", ablation("full_mirror"))):
        m = controller(cfg)
        b0 = m.software_bytes
        _open(m, 2000)
        b1 = m.software_bytes
        _open_more = web_packets(np.arange(2000, 6000), 2_000_000)
        m.process(_open_more)
        sizes[name] = (b0, b1, m.software_bytes)
        assert m.summary()["ovs_ukey_model_bytes"] == m.hw.occupancy() * 1536
    b0, b1, b2 = sizes["none"]
    assert b0 == b1 == b2  # Fornax: nothing per session (these flows take no SNAT port)
    b0, b1, b2 = sizes["full"]
    assert b0 < b1 < b2
    per_flow = (b2 - b1) / 4000
    assert 300 < per_flow < 1536  # measured udpif_key-like record + index, below the model
