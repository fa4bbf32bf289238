"""Ulysses sequence parallelism (seer/ulysses.py): all-to-alls of Q, K, V and O on the heads,
synchronous, around an attention kernel that sees the whole sequence — checked against
DeepSpeed-Ulysses' communication analysis (Jacobs et al. 2023, section 3.2: 4Nh/P per rank
per layer for an MHA model) and XTuner's implementation @7575f2c (K/V repeated first)."""

import numpy as np
import pytest

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.ops import COMM, FLASH, backward_of, layer_ops
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.ulysses import names_ulysses, repeats_kv
from starfabric.astral.seer.validate import row_setup

MHA = {
    "name": "mha-7b", "layers": 4, "hidden": 4096, "heads": 32, "kv_heads": 32,
    "head_dim": 128, "ffn_hidden": 11008, "vocab": 32000, "activation": "swiglu",
}  # fmt: skip
GQA = {**MHA, "name": "gqa", "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672}


def _table(model: dict, seq: int, cp: int, gpus: int, **ex: object):  # type: ignore[no-untyped-def]
    execution = {"global_batch": gpus // cp, "seq_len": seq, "cp": cp, "tp": 1, "pp": 1,
                 "zero": 1, "recompute": "full", **ex}  # fmt: skip
    job = make_job(model, execution, {"gpu": "A100", "gpus": gpus, "gpus_per_node": 8})
    lay = resolve_layout(job.model, job.execution, job.system)
    ctx = make_context(job.execution, lay, efficiency_for(lay.gpu, {}), job.system, job.model)
    return job, ctx, layer_ops(job.model, job.execution, lay, moe=False)


def _comm(t, group: str = "cp") -> list[tuple[str, str, float]]:  # type: ignore[no-untyped-def]
    a = t.arrays()
    return [(t.name[i], t.coll[i], float(a["nbytes"][i])) for i in range(len(t))
            if a["kind"][i] == COMM and t.group[i] == group]  # fmt: skip


@pytest.mark.parametrize("cp", [2, 4, 8, 16])
def test_forward_moves_4nh_over_p_bytes_per_rank(cp: int) -> None:
    # DeepSpeed-Ulysses section 3.2: Q, K, V and O, each N x h, leave every rank as 1/P of
    # themselves: 4Nh/P elements per rank per layer, 16-bit.
    seq = 65536
    _, _, t = _table(MHA, seq, cp, 16, cp_algorithm="ulysses")
    ops = _comm(t)
    assert {c for _, c, _ in ops} == {"all_to_all"}
    assert sum(b for _, _, b in ops) == pytest.approx(2 * 4 * seq * MHA["hidden"] / cp)


def test_volume_per_rank_is_constant_when_sequence_and_degree_grow_together() -> None:
    # The paper's scaling claim: N and P doubled together keep the per-rank volume.
    vols = [sum(b for _, _, b in _comm(_table(MHA, 32768 * k, 2 * k, 16,
                                              cp_algorithm="ulysses")[2]))
            for k in (1, 2, 4, 8)]  # fmt: skip
    assert np.allclose(vols, vols[0])


def test_xtuner_repeats_kv_before_the_all_to_all() -> None:
    seq, cp = 32768, 4
    rep = sum(b for _, _, b in _comm(_table(GQA, seq, cp, 32, cp_algorithm="ulysses",
                                            ulysses_repeat_kv=True)[2]))  # fmt: skip
    own = sum(b for _, _, b in _comm(_table(GQA, seq, cp, 32, cp_algorithm="ulysses")[2]))
    h, kv = GQA["hidden"], GQA["kv_heads"] * GQA["head_dim"]
    assert rep == pytest.approx(2 * 4 * seq * h / cp)  # K, V at 64 heads: as many bytes as Q
    assert own == pytest.approx(2 * seq * (2 * h + 2 * kv) / cp)  # Q, O + K, V at 8 heads


def test_attention_call_meets_all_keys_and_ring_is_gone() -> None:
    _, _, uly = _table(MHA, 131072, 8, 8, cp_algorithm="ulysses")
    _, _, ring = _table(MHA, 131072, 8, 8)
    k_uly = uly.arrays()["k"][np.asarray(uly.arrays()["kind"]) == FLASH]
    k_ring = ring.arrays()["k"][np.asarray(ring.arrays()["kind"]) == FLASH]
    assert k_uly[0] == pytest.approx(8 * k_ring[0])
    assert not any("ring" in n for n, _, _ in _comm(uly))
    assert [c for _, c, _ in _comm(ring)] == ["p2p"]


def test_all_to_alls_are_exposed_and_the_backward_repeats_them() -> None:
    # Synchronous collectives on the compute stream: nothing hides them (unlike the ring's
    # p2p, which overlaps the block attention).
    _, ctx, t = _table(MHA, 262144, 16, 32, cp_algorithm="ulysses")
    fc = op_costs(t, ctx)
    cp = np.array([g == "cp" for g in t.group])
    assert fc.time[cp].sum() > 0
    assert np.allclose(fc.exposed[cp], fc.time[cp])
    bt = backward_of(t)
    assert sorted(b for _, _, b in _comm(bt)) == sorted(b for _, _, b in _comm(t))
    assert {c for _, c, _ in _comm(bt)} == {"all_to_all"}


def test_all_to_all_across_hosts_costs_more_than_within_one() -> None:
    def a2a_s(cp: int) -> float:
        _, ctx, t = _table(MHA, 16384 * cp, cp, 32, cp_algorithm="ulysses")
        c = op_costs(t, ctx)
        return float(c.exposed[np.array([g == "cp" for g in t.group])].sum())

    # Same bytes per rank (N/P fixed); 16 ranks span two 8-GPU hosts and go over the NICs.
    assert a2a_s(16) > 2 * a2a_s(8)


def test_predict_runs_a_ulysses_job() -> None:
    job = make_job(MHA, {"global_batch": 2, "seq_len": 131072, "cp": 8, "zero": 1,
                         "recompute": "full", "cp_algorithm": "ulysses"},
                   {"gpu": "A100", "gpus": 16, "gpus_per_node": 8})  # fmt: skip
    pred = predict(job)
    assert pred.iteration_s > 0 and pred.breakdown["cp"] > 0


def test_cells_that_name_ulysses() -> None:
    assert names_ulysses("XTuner 0.1.x (DeepSpeed, Ulysses-style sequence parallel)", "", "8")
    assert names_ulysses(None, "no (the cp column holds the Ulysses degree)")
    assert not names_ulysses("Megatron-Core 0.9", "yes", "4")
    assert repeats_kv("XTuner 0.1.x") and not repeats_kv("DeepSpeed 0.14 (Ulysses)")


def test_validate_reads_ulysses_from_the_xtuner_rows() -> None:
    import csv
    from pathlib import Path

    path = Path(__file__).parents[2] / "data/published_runs/development_runs_2.csv"
    rows = list(csv.DictReader(path.open()))
    xt = next(r for r in rows if r["source_id"] == "XTUNER_SP_BENCH" and r["cp"] == "8")
    ex = row_setup(xt).execution
    assert ex["cp_algorithm"] == "ulysses" and ex["ulysses_repeat_kv"] is True
    ring = next(r for r in rows if r["source_id"] == "TORCHTITAN_2412" and r["cp"] not in ("", "1"))
    assert "cp_algorithm" not in row_setup(ring).execution
