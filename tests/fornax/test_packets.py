import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.fornax.packets import PacketBatch, halves_to_ip, ip_to_halves, ipv4_to_halves


def test_from_columns_casts_and_fills() -> None:
    b = PacketBatch.from_columns(time_ns=[1, 2, 3], vni=7, proto=[6, 17, 1])
    assert len(b) == 3
    assert b.vni.dtype == np.uint32 and list(b.vni) == [7, 7, 7]
    assert b.length.sum() == 0
    assert len(PacketBatch.concat([b, b.take([0])])) == 4


def test_unknown_column_refused() -> None:
    with pytest.raises(ValueError, match="unknown column"):
        PacketBatch.from_columns(time_ns=[1], vlan=[3])


@given(st.ip_addresses())
def test_address_halves_roundtrip(ip: object) -> None:
    hi, lo = ip_to_halves(ip)  # type: ignore[arg-type]
    mapped = getattr(ip, "ipv4_mapped", None)
    # An IPv4-mapped IPv6 address and its IPv4 address are one endpoint by design.
    assert halves_to_ip(hi, lo) == (mapped if mapped is not None else ip)


def test_vectorized_ipv4_matches_scalar() -> None:
    a = np.array([0x0A000001, 0xC0A80101], dtype=np.uint32)
    hi, lo = ipv4_to_halves(a)
    assert (int(hi[1]), int(lo[1])) == ip_to_halves("192.168.1.1")


def test_full_64_bit_halves_survive_mixed_lists() -> None:
    # a list mixing small ints with ints >= 2**63 must not pass through float64
    b = PacketBatch.from_columns(src_lo=[1, 2**64 - 1], dst_hi=[2**63, 5])
    assert int(b.src_lo[1]) == 2**64 - 1 and int(b.dst_hi[0]) == 2**63
