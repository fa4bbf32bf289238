"""Transport at flow level: adaptive routing picks less-loaded paths, keeping each QP's port;
RoCE's DCQCN loses capacity only where senders meet."""

from __future__ import annotations

import numpy as np
import pytest

from starfabric.astral.netsim.transport import (
    DCQCN_EFF,
    TCPX_HOST_NIC_FRACTION,
    TRANSPORTS,
    adaptive_paths,
    check_transport,
    contended_capacity,
    host_limited_capacity,
)
from starfabric.errors import ConfigError


def _csr(paths: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(paths) + 1, np.int64)
    np.cumsum([len(p) for p in paths], out=ptr[1:])
    return ptr, np.array([x for p in paths for x in p], np.int64)


def test_adaptive_routing_spreads_colliding_flows_over_free_uplinks() -> None:
    # 4 flows from NIC links 0..3, all hashed onto uplink 10; candidates offer uplinks 10..13
    base = _csr([[k, 10] for k in range(4)])
    cands = [base] + [_csr([[k, 10 + (k + j) % 4] for k in range(4)]) for j in range(1, 4)]
    ptr, links = adaptive_paths(cands, np.full(4, 1e6), np.full(20, 100e9), seed=0)
    uplinks = links[ptr[:-1] + 1]
    assert len(set(uplinks.tolist())) == 4  # every flow on its own uplink
    assert (links[ptr[:-1]] == np.arange(4)).all()  # first hop (the NIC port) unchanged


def test_adaptive_routing_moves_a_flow_whose_nic_port_is_busy_too() -> None:
    # NIC links 0 and 3 carry two flows each; three of the four share uplink 1. A move keeps
    # the NIC port, so the port's own load must not be charged twice: the busiest link after
    # adaptive routing carries 2 flows (the NICs), not 3 (the uplink)
    a = _csr([[0, 1], [0, 1], [3, 1], [3, 4]])
    b = _csr([[0, 2], [0, 2], [3, 2], [3, 5]])
    ptr, links = adaptive_paths([a, b], np.full(4, 1e6), np.full(8, 100e9), seed=0)
    assert np.bincount(links, minlength=8).max() == 2
    assert (links[ptr[:-1]] == [0, 0, 3, 3]).all()


def test_adaptive_routing_never_changes_the_nic_port() -> None:
    base = _csr([[0, 10], [0, 10]])
    other_port = _csr([[1, 11], [1, 11]])
    ptr, links = adaptive_paths([base, other_port], np.full(2, 1e6), np.full(20, 1e9))
    assert (links[ptr[:-1]] == 0).all()


def test_dcqcn_derates_only_links_where_two_senders_meet() -> None:
    ptr, links = _csr([[0, 5], [1, 5], [2, 6]])
    cap = np.full(8, 100e9)
    out = contended_capacity(ptr, links, np.array([0, 1, 2]), cap, "roce")
    assert out[5] == pytest.approx(100e9 * DCQCN_EFF)
    assert out[6] == out[0] == 100e9
    assert (contended_capacity(ptr, links, np.array([0, 1, 2]), cap, "ib") == cap).all()


def test_tcpx_host_cpu_caps_only_nic_links_and_only_for_tcpx() -> None:
    line = np.full(10, 100e9)
    scaled = line * 0.9  # already derated (protocol, NIC efficiency): the cap is a min
    out = host_limited_capacity(scaled, line, 2, 6, "tcpx")
    assert out[2:6] == pytest.approx(TCPX_HOST_NIC_FRACTION * 100e9)
    assert (out[:2] == scaled[:2]).all() and (out[6:] == scaled[6:]).all()
    for other in set(TRANSPORTS) - {"tcpx"}:  # TCPXO offloads the data path to the NIC
        assert (host_limited_capacity(scaled, line, 2, 6, other) == scaled).all()


def test_unknown_transport_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        check_transport("token-ring")
