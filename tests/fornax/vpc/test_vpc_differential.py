"""The numba evaluator equals the plain-Python reference on random VPCs and packets."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.fornax.vpc.codes import ActionKind, Reason
from starfabric.fornax.vpc.compile import compile_policy
from starfabric.fornax.vpc.evaluate import describe, evaluate
from starfabric.fornax.vpc.reference import ReferencePolicy

from .vpcgen import random_packets, random_spec


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_kernel_matches_reference(seed: int) -> None:
    rng = random.Random(seed)
    spec = random_spec(rng)
    compiled = compile_policy(spec)
    batch = random_packets(spec, rng, 150)
    got = evaluate(compiled, batch)
    want = ReferencePolicy(spec).evaluate_batch(batch)
    for i, expected in enumerate(want):
        assert describe(compiled, got, i) == expected, f"packet {i}"


def test_generator_reaches_every_outcome() -> None:
    """The differential test is only as good as its packets: every reason, every action kind
    and the reply-direction refusals must all occur."""
    seen: set[object] = set()
    rev: set[object] = set()
    kinds: set[object] = set()
    for seed in range(30):
        rng = random.Random(seed)
        spec = random_spec(rng)
        compiled = compile_policy(spec)
        res = evaluate(compiled, random_packets(spec, rng, 200))
        rows = [describe(compiled, res, i) for i in range(len(res))]
        seen |= {r["reason"] for r in rows}
        rev |= {r["rev_reason"] for r in rows if r["reason"] == "ALLOW"}
        kinds |= {r["fwd"][0] for r in rows}  # type: ignore[index]
    assert seen == {r.name for r in Reason}
    assert {"ACL_DENY_OUT", "ACL_DENY_IN", "NO_ROUTE"} <= rev
    assert kinds == {k.name for k in ActionKind}
