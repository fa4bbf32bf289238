"""Canonical session keys: numpy, numba and plain-Python versions agree; both directions meet."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.fornax.engine import kernels as K
from starfabric.fornax.engine.reference import canonical_key
from starfabric.fornax.keys import (
    DEFAULT_HASH_SEED,
    bucket_pair,
    canonicalize,
    canonicalize_columns,
    hash_key_py,
    icmp_inverted_word,
    key_hash,
    quoted_tuple,
    tag_of,
)
from starfabric.fornax.packets import PacketBatch, ip_to_halves

addr = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(ip_to_halves)
pkt = st.tuples(
    st.integers(0, 2**24 - 1),
    st.sampled_from([1, 6, 17, 58, 47]),
    addr,
    addr,
    st.integers(0, 65535),
    st.one_of(
        st.integers(0, 65535),
        st.sampled_from(
            [
                0,
                8 << 8,
                128 << 8,
                129 << 8,
                3 << 8,
                13 << 8,
                14 << 8,
                18 << 8,
                139 << 8,
                140 << 8,
                135 << 8,
            ]
        ),
    ),
)


def batch_of(rows: list[tuple]) -> PacketBatch:  # type: ignore[type-arg]
    def u64(v: list[int]) -> np.ndarray:
        return np.array(v, dtype=np.uint64)  # lists of ints >= 2**63 need an explicit dtype

    return PacketBatch.from_columns(
        vni=[r[0] for r in rows],
        proto=[r[1] for r in rows],
        src_hi=u64([r[2][0] for r in rows]),
        src_lo=u64([r[2][1] for r in rows]),
        dst_hi=u64([r[3][0] for r in rows]),
        dst_lo=u64([r[3][1] for r in rows]),
        sport=[r[4] for r in rows],
        dport=[r[5] for r in rows],
    )


def prepared(b: PacketBatch, nb: int) -> np.ndarray:
    """k_prepare of a batch: the lookup keys k_process computes (kernels/hashing.packet_key)."""
    kr = np.zeros((len(b), 12), dtype=np.uint64)
    K.k_prepare(b.vni, b.proto, b.src_hi, b.src_lo, b.dst_hi, b.dst_lo, b.sport, b.dport,
                b.inner_proto, b.inner_src_hi, b.inner_src_lo, b.inner_dst_hi, b.inner_dst_lo,
                b.inner_sport, b.inner_dport, np.uint64(DEFAULT_HASH_SEED), nb, kr)  # fmt: skip
    return kr


@settings(max_examples=50, deadline=None)
@given(st.lists(pkt, min_size=1, max_size=30), st.integers(2, 1 << 20))
def test_three_implementations_agree(rows: list[tuple], nb: int) -> None:  # type: ignore[type-arg]
    b = batch_of(rows)
    k = canonicalize(b)
    h = key_hash(k)
    kr = prepared(b, nb)
    pw = k.ports_word()
    for i, (vni, proto, src, dst, sp, dp) in enumerate(rows):
        key, d = canonical_key(vni, proto, src, dst, sp, dp)
        assert key == (int(k.a_hi[i]), int(k.a_lo[i]), int(k.b_hi[i]), int(k.b_lo[i]),
                       int(pw[i]), proto)  # fmt: skip
        assert d == k.direction[i] == kr[i, 9]
        hp = hash_key_py(*key, DEFAULT_HASH_SEED)
        assert hp == int(h[i]) == int(kr[i, 5])
        assert bucket_pair(hp, nb) == (int(kr[i, 6]), int(kr[i, 7]))
        assert tag_of(hp) == int(kr[i, 8]) != 0
        assert list(kr[i, :5]) == list(key[:5])
        assert (kr[i, 10], kr[i, 11]) == (proto, 0)  # no quoted tuple: the packet's own key


@settings(max_examples=50, deadline=None)
@given(pkt)
def test_both_directions_share_a_key_with_opposite_bits(row: tuple) -> None:  # type: ignore[type-arg]
    vni, proto, src, dst, sp, dp = row
    if proto in (1, 58):  # reverse of an echo request is the echo reply of the same id
        req, rep = (8, 0) if proto == 1 else (128, 129)
        fwd, back = (sp, req << 8), (sp, rep << 8)
    else:
        fwd, back = (sp, dp), (dp, sp)
    k1, d1 = canonical_key(vni, proto, src, dst, *fwd)
    k2, d2 = canonical_key(vni, proto, dst, src, *back)
    assert k1 == k2
    assert d1 != d2 or (src, fwd[0]) == (dst, back[0])


def test_vni_and_protocol_separate_sessions() -> None:
    a, b = ip_to_halves("10.0.0.1"), ip_to_halves("10.0.0.2")
    base = canonical_key(1, 6, a, b, 1000, 80)[0]
    assert canonical_key(2, 6, a, b, 1000, 80)[0] != base
    assert canonical_key(1, 17, a, b, 1000, 80)[0] != base


def test_other_icmp_types_share_one_session_per_host_pair() -> None:
    a, b = ip_to_halves("10.0.0.1"), ip_to_halves("10.0.0.2")
    unreach = canonical_key(1, 1, a, b, 0, 3 << 8)[0]
    ttl = canonical_key(1, 1, b, a, 0, 11 << 8)[0]
    assert unreach == ttl and unreach[4] & 0xFFFF_FFFF == 0


def test_columns_api_matches_batch_api() -> None:
    b = batch_of([(5, 6, ip_to_halves("::1"), ip_to_halves("::2"), 9, 10)])
    c1 = canonicalize(b)
    c2 = canonicalize_columns(b.vni, b.proto, b.src_hi, b.src_lo, b.dst_hi, b.dst_lo, b.sport,
                              b.dport)  # fmt: skip
    assert c1 == c2 or all(
        np.array_equal(getattr(c1, f), getattr(c2, f)) for f in c1.__dataclass_fields__
    )


A, B = ip_to_halves("10.0.0.1"), ip_to_halves("10.0.0.2")


def test_both_hosts_echo_requests_with_one_identifier_are_two_sessions() -> None:
    """The kernel keeps one entry per requester (its tuple holds the request type): A's
    request and B's reply meet; B's request with the same id is another session, which A's
    reply (a reply from the first requester) finds."""
    for proto, (req, rep) in ((1, (8, 0)), (58, (128, 129))):
        a_req = canonical_key(1, proto, A, B, 7, req << 8)[0]
        b_rep = canonical_key(1, proto, B, A, 7, rep << 8)[0]
        b_req = canonical_key(1, proto, B, A, 7, req << 8)[0]
        a_rep = canonical_key(1, proto, A, B, 7, rep << 8)[0]
        assert a_req == b_rep and b_req == a_rep and a_req != b_req


def test_icmp_query_keys_never_collide() -> None:
    """Every (identifier, class, requester) of ICMP and ICMPv6 has its own key, none equal to
    the ports-0 key of other ICMP messages (ids 0..65535, wrap included)."""
    ids = np.arange(65536)
    for proto, reqs in ((1, (8, 13, 15, 17)), (58, (128, 139))):
        words = []
        for req in reqs:
            for src, dst in ((A, B), (B, A)):
                n = len(ids)
                b = PacketBatch.from_columns(
                    vni=np.ones(n), proto=np.full(n, proto), src_hi=np.full(n, src[0], np.uint64),
                    src_lo=np.full(n, src[1], np.uint64), dst_hi=np.full(n, dst[0], np.uint64),
                    dst_lo=np.full(n, dst[1], np.uint64), sport=ids, dport=np.full(n, req << 8),
                )  # fmt: skip
                words.append(canonicalize(b).words())
        allw = np.concatenate(words)
        assert len(np.unique(allw, axis=0)) == len(allw)
        assert not (allw[:, 4] & np.uint64(0xFFFF_FFFF) == 0).any()


def test_an_error_quoting_a_query_finds_its_session() -> None:
    """An error about A's echo request (sent back to A) is looked up by the request's tuple
    inverted, type included (nf_ct_invert_tuple): the key of A's request."""
    for proto, req in ((1, 8), (58, 128), (1, 13)):
        rep = icmp_inverted_word(proto, req << 8) >> 8
        assert icmp_inverted_word(proto, rep << 8) >> 8 == req != rep
        err = PacketBatch.from_columns(
            vni=[1], proto=[proto], src_hi=np.array([B[0]], np.uint64),
            src_lo=np.array([B[1]], np.uint64), dst_hi=np.array([A[0]], np.uint64),
            dst_lo=np.array([A[1]], np.uint64), sport=[0], dport=[3 << 8 | 1],
            inner_proto=[proto], inner_src_hi=np.array([A[0]], np.uint64),
            inner_src_lo=np.array([A[1]], np.uint64), inner_dst_hi=np.array([B[0]], np.uint64),
            inner_dst_lo=np.array([B[1]], np.uint64), inner_sport=[7], inner_dport=[req << 8],
        )  # fmt: skip
        q = canonicalize_columns(*quoted_tuple(err))
        own = canonical_key(1, proto, A, B, 7, req << 8)[0]
        assert (int(q.a_hi[0]), int(q.a_lo[0]), int(q.b_hi[0]), int(q.b_lo[0]),
                int(q.ports_word()[0])) == own[:5]  # fmt: skip


def test_type_inversion_twins_agree() -> None:
    from starfabric.fornax.engine.kernels.hashing import icmp_inverted

    for proto in (1, 58):
        for word in range(0, 1 << 16, 37):
            assert int(icmp_inverted(proto, np.uint16(word))) == icmp_inverted_word(proto, word)


def test_an_icmp_error_is_looked_up_by_the_tuple_it_quotes() -> None:
    """A port unreachable from B quoting A's UDP datagram has the key of A's session (RELATED);
    one going elsewhere than the quoted source, or quoting nothing, is looked up as itself."""
    a, b, c = ip_to_halves("10.0.0.1"), ip_to_halves("10.0.0.2"), ip_to_halves("10.0.0.3")
    session = batch_of([(7, 17, a, b, 5353, 53)])
    errs = PacketBatch.from_columns(
        vni=7, proto=1, src_hi=np.uint64(b[0]), src_lo=np.uint64([b[1], b[1], b[1]]),
        dst_hi=np.uint64(a[0]), dst_lo=np.uint64([a[1], c[1], a[1]]), sport=0,
        dport=(3 << 8) | 3, inner_proto=np.uint8([17, 17, 0]), inner_src_hi=np.uint64(a[0]),
        inner_src_lo=np.uint64(a[1]), inner_dst_hi=np.uint64(b[0]), inner_dst_lo=np.uint64(b[1]),
        inner_sport=5353, inner_dport=53,
    )  # fmt: skip
    want = prepared(session, 1 << 16)[0]
    got = prepared(errs, 1 << 16)
    assert list(got[0, :9]) == list(want[:9]) and (got[0, 10], got[0, 11]) == (17, 1)
    for i in (1, 2):
        assert got[i, 5] != want[5] and (got[i, 10], got[i, 11]) == (1, 0)
