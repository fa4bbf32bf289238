"""Grouping punted packets by connection: the numba hash grouping equals a sort-based
partition, and a hash collision never merges two keys."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.fornax.keys import canonicalize_columns
from starfabric.fornax.manager import _kernels
from starfabric.fornax.manager.manager import _first_of_groups, _group


def _keys(conn: np.ndarray, proto: np.ndarray):  # type: ignore[no-untyped-def]
    n = len(conn)
    c = conn.astype(np.uint64)
    return canonicalize_columns(np.ones(n, np.uint32), proto.astype(np.uint8),
                                np.zeros(n, np.uint64), c, np.zeros(n, np.uint64), c * 7 + 1,
                                (conn % 5).astype(np.uint16), np.full(n, 80, np.uint16))  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([6, 17])), max_size=200))
def test_group_is_the_exact_partition_in_first_appearance_order(rows: list) -> None:  # type: ignore[type-arg]
    conn = np.array([r[0] for r in rows], np.int64)
    proto = np.array([r[1] for r in rows], np.int64)
    gid = _group(_keys(conn, proto))
    # the same partition as the (connection, protocol) labels
    labels = conn * 100 + proto
    for a in range(len(rows)):
        assert ((gid == gid[a]) == (labels == labels[a])).all()
    # numbered by first appearance: 0, 1, 2, ... in row order
    firsts = _first_of_groups(gid)
    assert gid[firsts].tolist() == list(range(len(firsts)))


def test_equal_hashes_of_different_keys_stay_apart() -> None:
    words = np.array(
        [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 4, 5], [9, 2, 3, 4, 5]], np.uint64
    )
    proto = np.array([6, 6, 6, 17], np.uint8)
    out = np.empty(4, np.int64)
    same_hash = np.full(4, 42, np.uint64)
    assert _kernels.group_ids(words, proto, same_hash, out) == 3
    assert out.tolist() == [0, 1, 0, 2]
