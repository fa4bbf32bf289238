"""The table helpers k_process and k_insert share (kernels/table.py) against a plain scan: the
SWAR tag scan of a bucket and the first free slot, on random buckets with repeated tags."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.fornax.engine.kernels.table import first_free, first_tag

BS = 8  # slots per bucket (4 tags per uint64 word, 2 words)


def plain_first(tags: np.ndarray, bucket: int, want: int) -> int:
    row = tags[bucket * BS : (bucket + 1) * BS]
    hits = np.flatnonzero(row == want)
    return int(hits[0]) if len(hits) else BS


@settings(max_examples=60, deadline=None)
@given(
    vals=st.lists(st.integers(0, 3), min_size=4 * BS, max_size=4 * BS),
    bucket=st.integers(0, 3),
    want=st.integers(0, 3),
)
def test_first_tag_and_first_free_match_a_plain_scan(
    vals: list[int], bucket: int, want: int
) -> None:
    # Few distinct values, so buckets hold repeats and every lane position is exercised; the
    # values use a lane's top and bottom bits, where a SWAR compare would borrow or carry.
    tags = np.array(vals, dtype=np.uint16) * np.uint16(0x4001)
    tag = want * 0x4001
    assert first_tag(tags.view(np.uint64), bucket, BS // 4, np.uint64(tag)) == plain_first(
        tags, bucket, tag
    )
    q = plain_first(tags, bucket, 0)
    assert first_free(tags, bucket, BS) == (-1 if q == BS else bucket * BS + q)
