"""scripts/seer_routing_pairs.py: what dropless routing costs per token, from rows that differ only
in forced versus learned routing (the Model Zoo Qwen3-235B long-context pairs, docs/astral.md)."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from astral.seer.load_script import load_script
from starfabric.astral.seer.validate import read_rows, row_setup, stated_iteration_times

ROOT = Path(__file__).parents[3]
DEV2 = ROOT / "tests" / "data" / "published_runs" / "development_runs_2.csv"


rp = load_script("seer_routing_pairs")

_BASE = {
    "model": "M", "arch": "moe", "gpu": "H100", "num_gpus": "256", "tp": "4", "pp": "8",
    "vpp": "4", "dp": "8", "cp": "1", "ep": "8", "etp": "1", "micro_batch": "1",
    "global_batch_seqs": "256", "recompute": "full", "precision": "BF16",
    "framework": "Megatron-Core", "interconnect": "IB",
}  # fmt: skip


def _row(row_id: str, seq: int, forced: bool) -> dict[str, str]:
    notes = "routing forced load balancing" if forced else "routing dropless (aux loss)"
    return {**_BASE, "row_id": row_id, "seq_len": str(seq), "notes": notes}


@given(
    t_forced=st.floats(0.1, 1e3), extra=st.floats(0.0, 1e3),
    seqs=st.lists(st.sampled_from([4096, 8192, 16384, 32768]), min_size=1, max_size=4,
                  unique=True),
)  # fmt: skip
def test_pairs_recover_the_cost_per_token(t_forced: float, extra: float, seqs: list[int]) -> None:
    """Pairs built with a known extra time per token give that time back, one pair per key."""
    rows, times = [], {}
    for s in seqs:
        tokens = 256 * s
        f, d = _row(f"F{s}", s, True), _row(f"D{s}", s, False)
        rows += [f, d]
        times[f["row_id"]] = t_forced
        times[d["row_id"]] = t_forced + extra * tokens * 1e-6
    got = rp.pairs(rows, times)
    assert [(p.row_forced, p.row_dropless) for p in got] == [(f"F{s}", f"D{s}") for s in
                                                              sorted(seqs)]  # fmt: skip
    for p in got:
        assert p.cost_us_per_token == pytest.approx(extra, rel=1e-9, abs=1e-9)
        assert p.ratio >= 1.0


def test_rows_that_differ_elsewhere_or_are_ambiguous_do_not_pair() -> None:
    """A second forced row of the same key, a dense row or another micro-batch pairs nothing."""
    f, d = _row("F", 4096, True), _row("D", 4096, False)
    times = {"F": 1.0, "D": 1.2, "F2": 1.1, "X": 1.3}
    assert len(rp.pairs([f, d], times)) == 1
    assert rp.pairs([f, d, {**f, "row_id": "F2"}], times) == []
    assert rp.pairs([f, {**d, "micro_batch": "2"}], times) == []
    assert rp.pairs([{**f, "arch": "dense"}, {**d, "arch": "dense"}], times) == []
    assert rp.pairs([f, {**d, "row_id": "X"}], {"F": 1.0}) == []  # no time for the partner


def test_forced_reading_is_the_one_seer_validate_applies() -> None:
    """Differential: on every MoE row of development set 2 the script's forced/dropless split
    is the routing `seer validate` sets (`moe_load_balance`)."""
    moe = [r for r in read_rows(DEV2) if (r.get("arch") or "").lower() == "moe"]
    assert len(moe) > 40
    n_forced = 0
    for r in moe:
        forced = row_setup(r).execution.get("moe_load_balance") == "forced"
        assert rp.is_forced(r) == forced, r["row_id"]
        n_forced += forced
    assert 0 < n_forced < len(moe)


def test_the_model_zoo_long_context_table_gives_four_pairs() -> None:
    """The Qwen3-235B long-context table publishes forced and dropless figures at 16K-128K; with
    the times `seer validate` converts them to, the script pairs all four (the CSV states no
    time for them, so without --json none)."""
    rows = read_rows(DEV2)
    assert [p for p in rp.pairs(rows, stated_iteration_times(rows)) if "MZQ3" in p.row_forced] == []
    lc = [r for r in rows if r["row_id"].startswith("MZQ3-LC")]
    times = {r["row_id"]: float(i + 1) for i, r in enumerate(lc)}
    got = rp.pairs(rows, times)
    assert [(p.row_forced, p.row_dropless) for p in got] == [
        (f"MZQ3-LC{i}F", f"MZQ3-LC{i}D") for i in (1, 2, 3, 4)
    ]
