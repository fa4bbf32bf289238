"""The experiments' harness: runs branched off one filled table measure what fresh tables
measure, a branch's failures come back to the parent, and contenders that cannot fit the
machine's memory are left out with a note instead of being run into the OOM killer."""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from typing import Any

import pytest

from starfabric.fornax.experiments import e5_policy_storm, harness
from starfabric.fornax.experiments.contenders import default_contenders
from starfabric.fornax.experiments.harness import Context, branch, resident_estimate
from starfabric.fornax.experiments.scales import SCALES

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

# The measured outcome of a storm (CPU figures are timings and differ run to run).
OUTCOME = ("converge_s", "stale_forwarded", "stale_window_s", "collateral_drops")


def _ctx(*names: str) -> Context:
    scale = replace(SCALES["ci"], e5_fractions=(0.25, 1.0))
    return Context(scale, [c for c in default_contenders() if c.name in names])


@fork_only
def test_branch_returns_the_childs_result_and_leaves_the_parent_untouched() -> None:
    state = {"n": 1}

    def bump() -> int:
        state["n"] += 41
        return state["n"]

    assert branch(bump) == 42
    assert state["n"] == 1


@fork_only
def test_branch_raises_the_childs_error_and_reports_a_killed_child() -> None:
    def boom() -> None:
        raise ValueError("bad row 7")

    with pytest.raises(RuntimeError, match="ValueError: bad row 7"):
        branch(boom)
    assert branch(lambda: os.kill(os.getpid(), signal.SIGKILL)) is None


@fork_only
@pytest.mark.slow
def test_e5_branched_storms_measure_what_fresh_tables_measure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = _ctx("fornax", "ovs_like")
    branched = e5_policy_storm.run(ctx)
    monkeypatch.setattr(e5_policy_storm, "can_branch", lambda: False)
    fresh = e5_policy_storm.run(ctx)

    def outcome(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["fraction"], r["active"], r["controller"], *(r[k] for k in OUTCOME))
                for r in rows]  # fmt: skip

    assert outcome(branched.rows) == outcome(fresh.rows)
    assert len(fresh.rows) == 2 * len(e5_policy_storm.ACTIVE_SHARES) * 2
    assert any(r["stale_forwarded"] > 0 for r in fresh.rows)  # the storms did something


def test_contenders_that_cannot_fit_are_left_out_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = _ctx("fornax", "ovs_like", "doca_like")
    n = 1 << 20
    ovs = next(c for c in ctx.contenders if c.name == "ovs_like")
    fx = next(c for c in ctx.contenders if c.name == "fornax")
    # the mirror's rows (the engine entry grew to 186 B with window tracking: about 2x, not more)
    assert resident_estimate(ovs, n) > 1.5 * resident_estimate(fx, n)
    room = int(resident_estimate(fx, n) / harness.MEMORY_HEADROOM) + 1
    monkeypatch.setattr(harness, "available_bytes", lambda: room)
    notes: list[str] = []
    kept = [c.name for c in ctx.runnable(n, notes, "fornax", "baseline")]
    assert kept == ["fornax", "doca_like"]
    assert len(notes) == 1 and "ovs_like not run at 1,048,576 sessions" in notes[0]
    assert "GiB available" in notes[0]
    monkeypatch.setattr(harness, "available_bytes", lambda: None)  # no /proc: no guess
    assert len(ctx.runnable(n, [], "fornax", "baseline")) == 3


@fork_only
def test_a_branch_never_writes_its_parents_spilled_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from starfabric.fornax.baselines import mirror as mm
    from starfabric.fornax.engine import FlowKeys

    monkeypatch.setattr(mm, "SPILL_ABOVE_BYTES", 16 * mm.BLOB_DTYPE.itemsize)
    m = mm.FlowMirror(initial_rows=64)

    def keys(ids: np.ndarray) -> FlowKeys:
        return FlowKeys.from_columns(vni=1, proto=17, src_lo=ids, dst_lo=9, sport=1, dport=2)

    m.add(keys(np.arange(40)), action_orig=1, action_reply=0, eni_scope=0, vpc_scope=0, aux=0,
          now_ns=0, reval_seq=0)  # fmt: skip
    assert m.spilled
    before = m.blobs.copy()

    def churn() -> int:  # the child frees rows and fills them (and more) with other flows
        m.remove(keys(np.arange(0, 40, 2)))
        m.add(keys(np.arange(100, 200)), action_orig=2, action_reply=0, eni_scope=0,
              vpc_scope=0, aux=0, now_ns=0, reval_seq=0)  # fmt: skip
        return int(m.count)

    assert branch(churn) == 120
    assert m.count == 40 and (m.blobs[:40] == before[:40]).all()
