"""SEC-DED over the session record (two groups): exhaustive single-bit correction, double-bit
detection within a group, one correction per group."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric._jit import njit
from starfabric.fornax.engine import EventType, Outcome, Reason, SessionEngine
from starfabric.fornax.engine import kernels as K
from starfabric.fornax.engine.ecc import (
    ECC_CLEAN,
    ECC_CORRECTED,
    ECC_UNCORRECTABLE,
    ecc_decode,
    ecc_encode,
    ecc_seal,
)
from starfabric.fornax.engine.kernels.ecc import ecc_b_of
from starfabric.fornax.engine.layout import (
    ECC_GROUPS,
    N_DATA_WORDS,
    N_WORDS,
    W_BYTES0,
    W_ECC,
    W_ECC2,
    W_PKTS,
    W_TD_MAXWIN,
    W_TRACK,
)

from .fornax_engine_helpers import insert_flows, packets

NBITS = N_WORDS * 64


def random_record(seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    words = [int(x) for x in rng.integers(0, 2**63, N_WORDS, dtype=np.uint64) * 2 + 1]
    ecc_seal(words)
    return words


def group_of(bit: int) -> int:
    w = bit // 64
    return next(g for g, (first, n, wc) in enumerate(ECC_GROUPS) if first <= w < first + n
                or w == wc)  # fmt: skip


def flipped(rec: list[int], *bits: int) -> list[int]:
    out = list(rec)
    for b in bits:
        out[b // 64] ^= 1 << (b % 64)
    return out


def test_clean_record_and_codecs_agree() -> None:
    rec = random_record(1)
    assert ecc_decode(rec) == (ECC_CLEAN, -1)
    arr = np.array([rec], dtype=np.uint64)
    assert int(K.ecc_encode(arr, 0)) == rec[W_ECC]
    assert int(K.ecc_encode_b(arr, 0)) == rec[W_ECC2]
    assert K.ecc_check(arr, 0) == (ECC_CLEAN, -1)


word = st.one_of(st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1]),
                 st.integers(0, 2**64 - 1))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(word, min_size=N_WORDS, max_size=N_WORDS))
def test_vector_check_words_equal_the_plain_codec(words: list[int]) -> None:
    """The kernels' check words (one vector XOR and popcount, _intrinsics) are ecc.py's, for
    any data, from the record (ecc_encode, ecc_encode_b) or from values (ecc_b_of)."""
    want = list(words)
    ecc_seal(want)
    arr = np.array([words], dtype=np.uint64)
    assert int(K.ecc_encode(arr, 0)) == want[W_ECC]
    assert int(K.ecc_encode_b(arr, 0)) == want[W_ECC2]
    assert int(_b_of(arr)) == want[W_ECC2]


@njit
def _b_of(arr: np.ndarray) -> np.uint64:
    w = W_TRACK
    return ecc_b_of(arr[0, w], arr[0, w + 1], arr[0, w + 2], arr[0, w + 3], arr[0, w + 4],
                    arr[0, w + 5], arr[0, w + 6])  # fmt: skip


def test_every_single_bit_flip_is_located_and_corrected() -> None:
    rec = random_record(2)
    for b in range(NBITS):
        bad = flipped(rec, b)
        assert ecc_decode(bad) == (ECC_CORRECTED, b), b
        arr = np.array([bad], dtype=np.uint64)
        assert K.ecc_check(arr, 0) == (ECC_CORRECTED, b), b
        K.ecc_fix(arr, 0, b)
        assert arr[0].tolist() == rec


@njit
def _count_double_misses(rec: np.ndarray, lo: int, hi: int) -> int:
    """Over all pairs of distinct bits in lo..hi-1: how many are NOT reported uncorrectable."""
    work = rec.copy()
    misses = 0
    for a in range(lo, hi):
        for b in range(a + 1, hi):
            work[0, a // 64] ^= np.uint64(1) << np.uint64(a % 64)
            work[0, b // 64] ^= np.uint64(1) << np.uint64(b % 64)
            status, _pos = K.ecc_check(work, 0)
            if status != 2:
                misses += 1
            work[0, a // 64] ^= np.uint64(1) << np.uint64(a % 64)
            work[0, b // 64] ^= np.uint64(1) << np.uint64(b % 64)
    return misses


def test_every_double_bit_flip_in_a_group_is_detected() -> None:
    rec = np.array([random_record(3)], dtype=np.uint64)
    assert _count_double_misses(rec, 0, (N_DATA_WORDS + 1) * 64) == 0  # group A: 459,840 pairs
    assert _count_double_misses(rec, (W_ECC2 - 7) * 64, NBITS) == 0  # group B: 130,816 pairs


def test_one_flip_in_each_group_is_corrected_in_turn() -> None:
    rec = random_record(4)
    bad = flipped(rec, W_PKTS * 64 + 3, W_TD_MAXWIN * 64 + 9)
    assert ecc_decode(bad) == (ECC_CORRECTED, W_PKTS * 64 + 3)
    bad = flipped(bad, W_PKTS * 64 + 3)
    assert ecc_decode(bad) == (ECC_CORRECTED, W_TD_MAXWIN * 64 + 9)
    assert ecc_decode(flipped(bad, W_TD_MAXWIN * 64 + 9)) == (ECC_CLEAN, -1)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, NBITS - 1), st.integers(0, NBITS - 1))
def test_plain_codec_detects_double_flips(seed: int, a: int, b: int) -> None:
    if a == b or group_of(a) != group_of(b):
        return
    assert ecc_decode(flipped(random_record(seed), a, b))[0] == ECC_UNCORRECTABLE


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, N_DATA_WORDS - 1), st.integers(0, 2**64 - 1))
def test_patch_equals_full_encode(seed: int, w: int, new: int) -> None:
    rec = random_record(seed)
    patched = K.ecc_patch(np.uint64(rec[W_ECC]), w, np.uint64(rec[w]), np.uint64(new))
    rec[w] = new
    assert int(patched) == ecc_encode(rec)


def test_engine_corrects_single_flip_on_read(make_engine: Callable[..., SessionEngine]) -> None:
    e = make_engine()
    insert_flows(e, [0])
    from .fornax_engine_helpers import flow_keys

    slot = int(e.slot_of(flow_keys([0]))[0])
    e.flip_bits(slot, [W_BYTES0 * 64 + 5])
    res = e.process(packets([(0, 0, 0x10, 10, 0, 1)]))
    assert res.outcome[0] == Outcome.HIT
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.ECC_CORRECTED]
    assert ev["detail"][0] == W_BYTES0 * 64 + 5
    _, rec = e.query(flow_keys([0]))
    assert rec["bytes_orig"][0] == 10  # the flipped bit was repaired before counting
    assert e.counters()["ecc_corrected"] == 1


def test_engine_detects_double_flip(make_engine: Callable[..., SessionEngine]) -> None:
    from .fornax_engine_helpers import flow_keys

    e = make_engine()
    insert_flows(e, [0], aux=77)
    slot = int(e.slot_of(flow_keys([0]))[0])
    e.flip_bits(slot, [W_PKTS * 64 + 1, W_PKTS * 64 + 40])
    res = e.process(packets([(0, 1, 0x10, 10, 0, 1), (0, 1, 0x10, 10, 0, 2)]))
    assert res.outcome.tolist() == [Outcome.FAULT, Outcome.MISS]
    ev = e.poll_events()
    assert ev["type"].tolist() == [EventType.ECC_UNCORRECTABLE]
    assert ev["reason"][0] == Reason.KEY_CONSISTENT and ev["aux"][0] == 77  # key intact
    assert e.occupancy() == 0


def test_scrubber_finds_latent_errors(make_engine: Callable[..., SessionEngine]) -> None:
    from .fornax_engine_helpers import flow_keys

    e = make_engine()
    insert_flows(e, [0, 1])
    s0, s1 = (int(x) for x in e.slot_of(flow_keys([0, 1])))
    e.flip_bits(s0, [3])
    e.flip_bits(s1, [0, 1])  # key bits: the key read back is suspect
    e.scrub(1, 64)
    ev = e.poll_events()
    assert sorted(ev["type"].tolist()) == [EventType.ECC_CORRECTED, EventType.ECC_UNCORRECTABLE]
    bad = ev[ev["type"] == EventType.ECC_UNCORRECTABLE][0]
    assert bad["reason"] == Reason.KEY_SUSPECT
    assert e.occupancy() == 1
