"""The Model Zoo Qwen3-235B long-context rows (MZQ3-LC*, issue 32): what Seer charges their
attention against what the run's code does, and the rate their published steps imply.

Checked against: TransformerEngine's load-balanced p2p ring (`AttnFuncWithCPAndKVP2P`: cp steps,
step 0 causal over the rank's two chunks, every later step 2c^2 unmasked query-key pairs);
FlashAttention-2's backward (Dao 2023, Algorithm 2: five matmuls against the forward's two);
Megatron-Core's `--recompute-modules layernorm moe` (core_v0.14.0 `moe_layer.py` 265-284: route,
dispatch, experts and combine checkpointed as one function; the norms re-run, attention not)."""

from functools import cache
from pathlib import Path

import pytest

from astral.seer.load_script import load_script
from starfabric.astral.seer.ops import FLASH, backward_of, layer_ops
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import Job
from starfabric.astral.seer.validate import read_rows, validate_row

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
LC_FORCED = ("MZQ3-LC1F", "MZQ3-LC2F", "MZQ3-LC3F", "MZQ3-LC4F")

implied = load_script("seer_attention_implied")


@cache
def _job(row_id: str) -> tuple[Job, float]:
    row = next(r for r in read_rows(DEV2) if r["row_id"] == row_id)
    res = validate_row(row)
    return res.prediction.job, res.published_iter_s


def _flash(job: Job) -> tuple[float, float, float]:
    """(forward FLOPs, keys per call, backward FLOPs) of one layer's fused attention on one rank."""
    lay = resolve_layout(job.model, job.execution, job.system)
    fwd = layer_ops(job.model, job.execution, lay, True)
    a = fwd.arrays()
    i = next(j for j, k in enumerate(fwd.kind) if k == FLASH)
    bwd = backward_of(fwd)
    b = bwd.arrays()
    j = next(j for j, k in enumerate(bwd.kind) if k == FLASH)
    return float(a["flops"][i]), float(a["k"][i]), float(b["flops"][j])


@pytest.mark.parametrize("row_id", LC_FORCED)
def test_ring_rank_attention_flops_are_te_step_blocks(row_id: str) -> None:
    """Seer's per-rank attention FLOPs equal the blocks TE's ring runs: with c = s / (2 cp),
    step 0 is causal over the rank's 2c tokens ((2c)^2 / 2 = 2c^2 pairs) and each of the cp - 1
    later steps 2c^2 unmasked pairs (2c queries x the first KV chunk, or the second query chunk
    x 2c keys); a pair costs 2 (d_qk + d_v) FLOPs per head. Qwen3's 4 K/V heads do not enter."""
    job, _ = _job(row_id)
    m, ex = job.model, job.execution
    lay = resolve_layout(m, ex, job.system)
    cp, s = lay.cp, ex.seq_len
    c = s / (2 * cp)
    pairs = 2 * c * c + (cp - 1) * 2 * c * c
    heads = m.heads / lay.tp
    expect = ex.micro_batch * pairs * heads * 2 * (m.qk_head_dim + m.vo_head_dim)
    fwd, keys, bwd = _flash(job)
    assert fwd == pytest.approx(expect, rel=1e-9)
    # Summed over the cp ranks: the causal half of the s x s score matrix, nothing more.
    assert fwd * cp == pytest.approx(
        ex.micro_batch * s * s / 2 * heads * 2 * (m.qk_head_dim + m.vo_head_dim)
    )
    # Per call, rank cp-1's lower-triangle steps meet c keys per query (CP 1: s / 2 causal).
    assert keys == pytest.approx(c)
    # Backward: FlashAttention-2's five matmuls against the forward's two.
    assert bwd == pytest.approx(2.5 * fwd)


def test_layernorm_moe_recompute_reruns_moe_and_its_all_to_alls_not_attention() -> None:
    job, _ = _job("MZQ3-LC4F")
    assert tuple(job.execution.recompute_modules) == ("layernorm", "moe")
    lay = resolve_layout(job.model, job.execution, job.system)
    t = layer_ops(job.model, job.execution, lay, True)
    sel = dict(zip(t.name, t.selective, strict=True))
    moe = [n for n in t.name if n.startswith("moe.")]
    assert {"moe.ep_dispatch", "moe.ep_combine"} <= set(moe)
    assert all(sel[n] for n in moe)
    assert sel["attn.norm"] and sel["mlp.norm"]
    assert not any(sel[n] for n in t.name if n.startswith("attn.") and n != "attn.norm")


def test_the_solver_recovers_a_known_attention_multiplier() -> None:
    """A published step made by Seer itself at 1.3x its attention rate is read back as 1.3."""
    job, _ = _job("MZQ3-LC2F")
    target = implied.predict(implied.scaled(job, 1.3)).iteration_s
    m, bound, t1, share = implied.implied(job, target)
    assert bound == ""
    assert m == pytest.approx(1.3, rel=1e-3)
    assert t1 > target
    assert 0.3 < share < 0.7


def test_a_step_beyond_the_fractions_range_is_reported_as_a_bound() -> None:
    job, _ = _job("MZQ3-LC1F")
    m, bound, _, _ = implied.implied(job, 1e-3)
    assert bound == ">"
    assert m == pytest.approx(implied.max_multiplier(job))


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing or malformed CSV and an impossible share answer with one line and exit 2
    (errors.py), not a traceback."""
    bad = tmp_path / "runs.csv"
    bad.write_text("a,b\n1,2\n")
    for argv in (
        ["--csv", str(tmp_path / "absent.csv")],
        ["--csv", str(bad)],
        ["--csv", str(DEV2), "--min-share", "1.5"],
    ):
        assert implied.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err


def test_the_solver_reads_seers_step_as_validate_does(tmp_path: Path) -> None:
    """A production-average row (goodput's ETTR) and an XTuner row with accumulation 4 (one
    micro-step per printed line): the step the script solves against is the one `seer validate`
    compares (`validate.as_published`), not the bare optimizer step."""
    ids = ("FALCON180B-01", "XTSP-11")
    lines = DEV2.read_text().splitlines(keepends=True)
    picked = [ln for ln in lines[1:] if ln.split(",", 1)[0] in ids]
    assert len(picked) == len(ids)
    one = tmp_path / "two_rows.csv"
    one.write_text(lines[0] + "".join(picked))
    got = {r.row_id: r for r in implied.rows_implied(one, 0.0)}
    for rid in ids:
        res = validate_row(next(r for r in read_rows(DEV2) if r["row_id"] == rid))
        assert res.predicted_iter_s != res.prediction.iteration_s  # a reading applies
        assert got[rid].predicted_s == pytest.approx(res.predicted_iter_s, rel=1e-9)
