"""The session-location state (manager/location.py): `transition` refuses moves the design
does not allow, and `Held` (pinned/quarantined keys as numpy columns) agrees with a plain
per-key model under random sequences of the moves failover makes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.errors import InvariantError
from starfabric.fornax.manager.location import Held, Location, Move, transition


def test_transition_refuses_a_move_not_allowed() -> None:
    to = transition(np.array([Location.SOFTWARE, Location.HARDWARE], np.uint8), Move.PIN)
    assert (to == Location.PINNED).all()
    with pytest.raises(InvariantError, match="PUSHED is not a move from PINNED"):
        transition(np.array([Location.PINNED], np.uint8), Move.PUSHED)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["pin", "quarantine", "rebuilt", "idle", "failback", "touch"]),
        st.lists(st.integers(1, 12), max_size=6),
        st.integers(0, 2),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_held_agrees_with_a_per_key_model(ops: list[tuple[str, list[int], int]]) -> None:
    """Model: key -> [location, port, last seen]; quarantine keeps the port that pins it."""
    held = Held()
    model: dict[int, list[int]] = {}
    for t, (op, keys, port) in enumerate(ops):
        h = np.array(keys, np.uint64)
        if op == "pin":
            for k in dict.fromkeys(keys):
                model.setdefault(k, [Location.PINNED, port, 0])
            held.pin_port(h, port)
        elif op == "quarantine":
            new = 0
            for k in dict.fromkeys(keys):
                if k not in model or model[k][0] != Location.QUARANTINED:
                    new += 1
                    model[k] = [Location.QUARANTINED, model.get(k, [0, -1])[1], t]
            assert held.quarantine(h, t) == new
        elif op in ("rebuilt", "idle"):
            if op == "rebuilt":
                gone = [k for k in dict.fromkeys(keys) if k in model]
                rows = held.find(h)
                held.lift(np.unique(rows[rows >= 0]), Move.REBUILD)
            else:
                gone = [
                    k for k, v in model.items() if v[0] == Location.QUARANTINED and v[2] < t - 3
                ]
                q = (held.at == Location.QUARANTINED) & (held.seen_ns < t - 3)
                held.lift(np.flatnonzero(q), Move.END)
            for k in gone:
                if model[k][0] == Location.QUARANTINED:
                    if model[k][1] >= 0:
                        model[k][0] = Location.PINNED
                    else:
                        del model[k]
        elif op == "failback":
            for k in list(model):
                if model[k][1] == port:
                    if model[k][0] == Location.PINNED:
                        del model[k]
                    else:
                        model[k][1] = -1
            held.failback_port(port)
        else:  # packets of keys at time t
            q = held.touch(h, np.full(len(h), t, np.int64))
            exp = [k in model and model[k][0] == Location.QUARANTINED for k in keys]
            assert q.tolist() == exp
            for k in keys:
                if k in model and model[k][0] == Location.QUARANTINED:
                    model[k][2] = t
        assert sorted(model) == held.hash.tolist()
        assert [model[k][0] for k in sorted(model)] == held.at.tolist()
        assert [model[k][1] for k in sorted(model)] == held.port.tolist()
        quar = sorted(k for k, v in model.items() if v[0] == Location.QUARANTINED)
        assert held.hashes(Location.QUARANTINED).tolist() == quar
        assert [model[k][2] for k in quar] == held.seen_ns[held.at == Location.QUARANTINED].tolist()
