"""Fast engine vs plain-Python reference: random packets, ops and faults -> identical results."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from starfabric.fornax.engine import Scope

from .fornax_engine_helpers import assert_same_state, both, flow_keys, packets

N_FLOWS = 96
MS = 1_000_000

flags_st = st.sampled_from([0x02, 0x12, 0x10, 0x11, 0x01, 0x04, 0x14, 0x18, 0x00])
pkt_st = st.tuples(
    st.integers(0, N_FLOWS - 1),
    st.integers(0, 1),
    flags_st,
    st.integers(0, 1500),
    st.integers(0, 1),
    st.integers(0, 3 * MS),
)
ids_st = st.lists(st.integers(0, N_FLOWS - 1), min_size=1, max_size=12)

step_st = st.one_of(
    st.tuples(st.just("packets"), st.lists(pkt_st, min_size=1, max_size=25)),
    st.tuples(
        st.just("insert"),
        ids_st,
        st.integers(0, 4),  # eni scope (4 is out of range: BAD_SCOPE)
        st.integers(0, 3),  # version snapshot
        st.sampled_from([0, 1, 3, 7]),  # tcp state
        st.sampled_from([1, 99]),  # reply action (99 = drop)
    ),
    st.tuples(st.just("delete"), ids_st),
    st.tuples(st.just("modify"), ids_st, st.integers(0, 3), st.booleans()),
    st.tuples(st.just("query"), ids_st),
    st.tuples(
        st.just("dump"),
        st.integers(0, 64),
        st.integers(1, 20),
        st.sampled_from([None, 0, 1]),
        st.sampled_from([None, 1, 2]),
        st.booleans(),
    ),
    st.tuples(st.just("bump"), st.sampled_from([Scope.ENI, Scope.VPC]), st.integers(0, 1)),
    st.tuples(st.just("scrub"), st.integers(0, 4000 * MS), st.integers(0, 40)),
    st.tuples(
        st.just("flip"),
        st.integers(0, 63),
        st.lists(st.integers(0, 959), min_size=1, max_size=3, unique=True),
    ),
    st.tuples(st.just("stall"), st.integers(0, 1), st.booleans()),
    st.tuples(st.just("poll"), st.integers(0, 10)),
)


def _same_records(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


def _apply(e: Any, step: tuple[Any, ...], clock: list[int]) -> Any:
    kind = step[0]
    if kind == "packets":
        specs = [(f, r, fl, ln, p, clock[0] + dt) for f, r, fl, ln, p, dt in step[1]]
        specs.sort(key=lambda s: s[5])
        clock[0] = specs[-1][5]
        res = e.process(packets(specs))
        return [getattr(res, k).tolist() for k in res.__dataclass_fields__]
    if kind == "insert":
        _, ids, eni, ver, ts, ar = step
        return e.insert(flow_keys(ids), action_orig=5, action_reply=ar, eni_scope=eni,
                        vpc_scope=ids[0] % 2, eni_version=ver, vpc_version=0, now_ns=clock[0],
                        tcp_state=ts, aux=ids[0] * 1000).tolist()  # fmt: skip
    if kind == "delete":
        return e.delete(flow_keys(step[1])).tolist()
    if kind == "modify":
        _, ids, ver, act = step
        kw = {"action_orig": 7} if act else {"aux": 42, "tcp_state": 3}
        return e.modify(flow_keys(ids), eni_version=ver, **kw).tolist()
    if kind == "query":
        status, rec = e.query(flow_keys(step[1]))
        return status.tolist(), rec
    if kind == "dump":
        _, cur, mx, eni, below, stale = step
        return e.dump(cur, mx, eni_scope=eni, eni_version_below=below, stale_only=stale)
    if kind == "bump":
        return e.bump_version(step[1], step[2])
    if kind == "scrub":
        clock[0] += step[1]
        return e.scrub(clock[0], step[2])
    if kind == "flip":
        e.flip_bits(step[1], step[2])
        return None
    if kind == "stall":
        (e.stall_port if step[2] else e.unstall_port)(step[1])
        return None
    return e.poll_events(step[1])


def _compare(a: Any, b: Any) -> None:
    if isinstance(a, np.ndarray):
        _same_records(a, b)
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _compare(x, y)
    else:
        assert a == b


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(10, 80),
    st.lists(step_st, min_size=1, max_size=30),
)
def test_fast_equals_reference(seed: int, n_pre: int, steps: list[tuple[Any, ...]]) -> None:
    """Hypothesis-chosen op sequences after a random prefill."""
    _run_both(_prefill(seed, n_pre) + steps)


def _prefill(seed: int, n: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(seed)
    ids = rng.choice(N_FLOWS, size=n, replace=False).tolist()
    return [("insert", ids, 0, 0, int(rng.choice([0, 1, 3])), int(rng.choice([1, 99])))]


def _random_step(rng: np.random.Generator, t_flows: list[int]) -> tuple[Any, ...]:
    """One random step, biased to flows that were inserted (so packets mostly hit)."""

    def fid() -> int:
        return (
            int(rng.choice(t_flows))
            if t_flows and rng.random() < 0.8
            else int(rng.integers(N_FLOWS))
        )

    kind = rng.choice(
        ["packets"] * 6 + ["insert", "delete", "modify", "query", "dump", "bump", "scrub",
                           "scrub", "flip", "stall", "poll", "poll"]
    )  # fmt: skip
    if kind == "packets":
        flags = [0x02, 0x12, 0x10, 0x11, 0x01, 0x04, 0x14, 0x18, 0x00]
        return ("packets", [
            (fid(), int(rng.integers(2)), int(rng.choice(flags)), int(rng.integers(1500)),
             int(rng.random() < 0.1), int(rng.integers(3 * MS)))
            for _ in range(int(rng.integers(1, 40)))])  # fmt: skip
    ids = [fid() for _ in range(int(rng.integers(1, 8)))]
    if kind == "insert":
        return ("insert", ids, int(rng.integers(5)), int(rng.integers(3)),
                int(rng.choice([0, 1, 3, 7])), int(rng.choice([1, 99])))  # fmt: skip
    if kind in ("delete", "query"):
        return (kind, ids)
    if kind == "modify":
        return ("modify", ids, int(rng.integers(3)), bool(rng.integers(2)))
    if kind == "dump":
        return ("dump", int(rng.integers(64)), int(rng.integers(1, 20)),
                [None, 0, 1][int(rng.integers(3))], [None, 1, 2][int(rng.integers(3))],
                bool(rng.integers(2)))  # fmt: skip
    if kind == "bump":
        return ("bump", [Scope.ENI, Scope.VPC][int(rng.integers(2))], int(rng.integers(2)))
    if kind == "scrub":
        return (
            "scrub",
            int(rng.choice([0, 100 * MS, 1500 * MS, 6000 * MS])),
            int(rng.integers(64)),
        )
    if kind == "flip":
        return ("flip", int(rng.integers(64)),
                rng.choice(960, size=int(rng.choice([1, 1, 2, 3])), replace=False).tolist())  # fmt: skip
    if kind == "stall":
        return ("stall", int(rng.integers(2)), bool(rng.random() < 0.4))
    return ("poll", int(rng.integers(12)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
@example(3827)  # a 3-bit flip ECC miscorrects into a scope id naming no scope: stale, no crash
def test_long_random_runs_match(seed: int) -> None:
    """Long seeded scripts (hundreds of steps): every fault and capacity path is reached."""
    rng = np.random.default_rng(seed)
    pre = _prefill(seed, int(rng.integers(30, 90)))
    steps = [_random_step(rng, pre[0][1]) for _ in range(150)]
    _run_both(pre + steps)


def _run_both(steps: list[tuple[Any, ...]]) -> dict[str, int]:
    fast, ref = both()
    cf, cr = [0], [0]
    for step in steps:
        _compare(_apply(fast, step, cf), _apply(ref, step, cr))
        assert_same_state(fast, ref)
    _compare(fast.poll_events(), ref.poll_events())
    c = fast.counters()
    outcomes = ("hit", "miss", "stale", "fault", "drop_hw", "port_hung")
    assert sum(c[k] for k in outcomes) == c["packets"]
    return c


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 10_000), min_size=40, max_size=64, unique=True), st.integers(0, 2))
def test_fill_and_displacement_match(ids: list[int], disp: int) -> None:
    """Filling a table past full: same placements, displacements and failures."""
    from .fornax_engine_helpers import flow

    fast, ref = both(max_displacement=[0, 4, 64][disp], ring_capacity=256)
    rows = [flow(i % 80) | {"sport": 1000 + i % 60000} for i in ids]
    from starfabric.fornax.engine import FlowKeys

    keys = FlowKeys.from_columns(**{k: [r[k] for r in rows] for k in rows[0]})
    kw = {"action_orig": 1, "action_reply": 2, "eni_scope": 0, "vpc_scope": 0,
          "eni_version": 0, "vpc_version": 0, "now_ns": 5}  # fmt: skip
    np.testing.assert_array_equal(fast.insert(keys, **kw), ref.insert(keys, **kw))
    assert_same_state(fast, ref)
    _same_records(fast.poll_events(), ref.poll_events())
