"""SNAT bitmaps and the aux cookie."""

from __future__ import annotations

import numpy as np
import pytest

from starfabric.errors import ConfigError
from starfabric.fornax.manager import NatPools, cookie
from starfabric.fornax.vpc import compile_policy, load_vpc_spec

EXAMPLE = "examples/vpc.yaml"


@pytest.fixture(scope="module")
def policy():  # type: ignore[no-untyped-def]
    return compile_policy(load_vpc_spec(EXAMPLE))


def test_allocations_are_unique_until_exhausted(policy) -> None:  # type: ignore[no-untyped-def]
    nat = NatPools(policy, port_min=1000, port_max=1099)  # 100 ports per public IP
    pool = policy.pool_names.index(next(n for n in policy.pool_names if "egress-nat" in n))
    n_ips = len(policy.pool_ips[pool])
    ip, port = nat.allocate(np.full(100 * n_ips + 5, pool))
    ok = ip >= 0
    assert ok.sum() == 100 * n_ips and (~ok[-5:]).all()
    pairs = set(zip(ip[ok].tolist(), port[ok].tolist(), strict=True))
    assert len(pairs) == 100 * n_ips
    assert ((port[ok] >= 1000) & (port[ok] <= 1099)).all()
    assert nat.allocated() == 100 * n_ips
    assert nat.release(ip[:10], port[:10]) == 10
    assert nat.release(ip[:10], port[:10]) == 0  # double release is not counted twice
    ip2, port2 = nat.allocate(np.full(10, pool))
    assert (ip2 >= 0).all()
    assert set(zip(ip2.tolist(), port2.tolist(), strict=True)) == set(
        zip(ip[:10].tolist(), port[:10].tolist(), strict=True)
    )


def test_nbytes_is_exact_and_small(policy) -> None:  # type: ignore[no-untyped-def]
    nat = NatPools(policy)
    n_ips = len(nat.ips)
    assert nat.bitmap.nbytes == n_ips * 8192
    assert nat.nbytes >= nat.bitmap.nbytes and nat.nbytes < nat.bitmap.nbytes + 1024


def test_empty_port_range_is_a_config_error(policy) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="nat_port_min"):
        NatPools(policy, port_min=5000, port_max=4000)


def test_cookie_round_trip() -> None:
    aux = cookie.pack(
        np.array([True, False, True]),
        np.array([3, 0, 70000]),
        np.array([65535, 0, 1024]),
        np.array([False, True, True]),
        np.array([0, 128 << 8, 8 << 8], np.uint16),
    )
    assert list(cookie.has_nat(aux)) == [True, False, True]
    assert list(cookie.nat_ip(aux)) == [3, 0, 70000]
    assert list(cookie.nat_port(aux)) == [65535, 0, 1024]
    assert list(cookie.icmp_word(aux)) == [0, 128 << 8, 8 << 8]
