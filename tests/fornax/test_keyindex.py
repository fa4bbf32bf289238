"""KeyIndex (keyindex.py) against a dict model: inserts, lookups and forgets in any order,
with repeated keys and slots, keep the index's answers and counts equal to the model's."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.fornax import keyindex
from starfabric.fornax.keyindex import KeyIndex
from starfabric.fornax.keys import CanonicalKeys, key_hash

KEYS = 12  # a small key space, so steps repeat keys and probe chains cross tombstones


def _keys(ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hash, words, proto) of key ids; a constant hash makes every key share one chain."""
    words = np.zeros((len(ids), 5), np.uint64)
    words[:, 1] = np.asarray(ids, np.uint64) + np.uint64(1)
    proto = np.full(len(ids), 6, np.uint8)
    h = key_hash(CanonicalKeys.from_words(words, proto)) & np.uint64(1)
    return h, words, proto


step = st.tuples(
    st.sampled_from(["insert", "forget"]), st.lists(st.integers(0, KEYS - 1), max_size=6)
)


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=25), st.integers(4, KEYS))
def test_keyindex_matches_a_dict(steps: list[tuple[str, list[int]]], capacity: int) -> None:
    idx = KeyIndex(16)
    model: dict[int, int] = {}  # key id -> slot
    count = 0
    for op, ids in steps:
        h, w, p = _keys(ids)
        if op == "insert":
            status, slot, count = idx.insert(h, w, p, count, capacity)
            for k, s, sl in zip(ids, status, slot, strict=True):
                if k in model:
                    assert (s, sl) == (keyindex.EXISTS, model[k])
                elif len(model) >= capacity:
                    assert (s, sl) == (keyindex.FULL, -1)
                else:
                    assert s == keyindex.OK and sl not in model.values()
                    model[k] = int(sl)
        else:
            slots = idx.lookup(h, w, p)
            held = {k for k in ids if k in model}
            assert idx.forget(np.concatenate([slots, slots])) == len(held)  # repeats: once
            for k in held:
                del model[k]
            count -= len(held)
        assert count == len(model) == int((idx.used == 1).sum())
    everything = list(range(KEYS))
    found = idx.lookup(*_keys(everything))
    assert [int(s) for s in found] == [model.get(k, -1) for k in everything]
