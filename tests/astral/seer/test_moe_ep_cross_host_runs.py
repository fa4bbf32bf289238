"""Transcription invariants of tests/data/published_runs/moe_ep_cross_host_runs.csv (outside MoE
runs whose expert parallelism leaves the host, session 24) and that Seer reads every row. The
rows' errors are reported in docs/astral.md, not asserted: the file is an outside check, nothing
is fitted to it."""

import re

import pytest

from astral.seer.outside_rows import (
    DATA,
    check_figures_and_provenance,
    check_header_is_development_set_2s,
    check_layout_and_batch,
)
from starfabric.astral.seer.validate import read_rows, validate_all

CSV = DATA / "moe_ep_cross_host_runs.csv"
NOTES = DATA / "moe_ep_cross_host_runs.md"

XTUNER = {  # xtuner megatron_moe_benchmark.md @b934f46: config -> (GBS, s/iter, tokens/GPU/s)
    "tp2, ep8, pp32, vpp3, mbs=1, recompute=select": (2048, 22.42, 1461.56),
    "tp4, ep8, pp8, vpp4, mbs=1": (2048, 35.481, 923.53),
    "tp2, ep32, pp8, vpp4, recompute=select": (2048, 35.392, 925.87),
    "tp2, ep32, deepep, pp8, vpp4, recompute=select": (2048, 25.73, 1273.54),
    "tp2, ep8, pp8, recompute=select": (2048, 27.555, 1189.17),
    "tp2, ep8, pp32, vpp3, mbs=4, recompute=full": (4096, 43.495, 1506.76),
    "tp2, ep8, pp32, mbs=4, recompute=full": (8192, 92.652, 1414.68),
    "tp1, ep8, pp32, vpp3, recompute=moe": (2048, 22.946, 1428.04),
    "tp1, ep8, pp32, vpp3, mbs=4, recompute=full": (4096, 42.537, 1540.68),
    "tp1, ep8, pp32, vpp3, mbs=8, recompute=full": (8192, 86.186, 1520.8),
}
H800_GPUS, QWEN3_SEQ = 256, 4096
CONSISTENT = 0.005
"""Step time x throughput must give the tokens per step within 0.5% (the file's rule 7)."""
CROSS_HOST = re.compile(r"cross-host EP: EP \d+ (?:spans|strides)")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return read_rows(CSV)


def _hosts_of_ep_group(r: dict[str, str], etp: int) -> int:
    """Hosts one EP group reaches when placed as Megatron-Core places it: EP ranks strided by
    the expert TP (ETP), in 8-GPU hosts."""
    return max(1, int(r["ep"]) * etp // int(r["gpus_per_node"]))


def test_header_is_development_set_2s() -> None:
    check_header_is_development_set_2s(CSV)


def test_every_row_has_a_citation_a_verification_and_a_metric(rows) -> None:
    assert rows
    for r in rows:
        assert r["citation"].startswith("github.com/"), r["row_id"]
        assert r["iter_time_s"], r["row_id"]
    check_figures_and_provenance(rows, NOTES.read_text())


def test_layout_and_batch_arithmetic(rows) -> None:
    check_layout_and_batch(rows)
    for r in rows:
        tp, dp = int(r["tp"]), int(r["dp"])
        assert (dp * tp) % int(r["ep"]) == 0, r["row_id"]  # EP divides the ranks of a stage


def test_tokens_per_second_times_gpus_times_step_is_tokens_per_step(rows) -> None:
    for r in rows:
        tokens = float(r["tokens_per_sec_per_gpu"]) * int(r["num_gpus"]) * float(r["iter_time_s"])
        assert tokens / int(r["tokens_per_batch"]) - 1.0 == pytest.approx(0, abs=CONSISTENT)


def test_xtuner_rows_transcribe_the_page(rows) -> None:
    got = {}
    for r in (r for r in rows if r["source_id"] == "XTUNER_MCORE_MOE"):
        cfg = re.search(r"xtuner page row '([^']+)'", r["notes"]).group(1)
        got[cfg] = r
    assert sorted(got) == sorted(XTUNER)
    for cfg, (gbs, step, tgs) in XTUNER.items():
        r = got[cfg]
        degrees = dict(re.findall(r"(tp|ep|pp|vpp|mbs)=?(\d+)", cfg.replace(", ", " ")))
        assert r["tp"] == degrees["tp"] and r["ep"] == degrees["ep"] and r["pp"] == degrees["pp"]
        assert r["vpp"] == degrees.get("vpp", "1"), cfg
        assert r["micro_batch"] == degrees.get("mbs", "1"), cfg  # the page's default mbs=1
        assert ("deepep" in cfg) == ("DeepEP dispatcher" in r["framework"]), cfg
        assert r["num_gpus"] == str(H800_GPUS) and r["seq_len"] == str(QWEN3_SEQ)
        assert r["global_batch_seqs"] == str(gbs), cfg
        assert float(r["iter_time_s"]) == step and float(r["tokens_per_sec_per_gpu"]) == tgs
        assert "forced load balancing" in r["notes"], cfg


def test_cross_host_rows_are_those_whose_ep_group_leaves_the_host(rows) -> None:
    # the file's rule 5: a row is cross-host when its EP group, placed as its framework version
    # places it, spans more than one host; every other row is labelled a control
    for r in rows:
        etp = int(r["etp"]) if r["etp"].isdigit() else 1  # the hinted ETP of an UNVERIFIED cell
        cross = _hosts_of_ep_group(r, etp) > 1
        assert bool(CROSS_HOST.search(r["notes"])) == cross, r["row_id"]
        assert ("control:" in r["notes"]) == (not cross), r["row_id"]


def test_a_written_etp_of_1_is_the_only_one_the_layout_admits(rows) -> None:
    # Megatron-Core lays EP x ETP over the TP x CP x DP ranks of a stage: where EP x 2 does not
    # divide them, ETP 1 follows from the printed layout and is written, not hinted
    for r in (r for r in rows if r["source_id"] == "XTUNER_MCORE_MOE"):
        ranks, ep = int(r["tp"]) * int(r["cp"]) * int(r["dp"]), int(r["ep"])
        assert ranks % ep == 0, r["row_id"]
        assert (r["etp"] == "1") == (ranks % (2 * ep) != 0), r["row_id"]
        assert (r["etp"] == "1") == r["derivation_note"].startswith("etp = 1 follows"), r["row_id"]


def test_megatron_756_sequence_follows_from_the_printed_tflops(rows) -> None:
    # Megatron-LM num_floating_point_operations at ba773259 (GQA, top-k experts, SwiGLU 3/2)
    r = next(r for r in rows if r["source_id"] == "MEGATRON_LM_756")
    b, layers, h = int(r["global_batch_seqs"]), int(r["layers"]), int(r["hidden"])
    a, g, ffn, k = int(r["heads"]), int(r["kv_heads"]), int(r["ffn_hidden"]), int(r["moe_topk"])
    vocab, n, step = int(r["vocab"]), int(r["num_gpus"]), float(r["iter_time_s"])

    def tflops(s: int) -> float:
        per = (1 + g / a + s / h) + ffn / h * k * 1.5 + vocab / (2 * layers * h)
        return 12 * b * s * layers * h * h * per / (step * n) / 1e12

    assert tflops(int(r["seq_len"])) == pytest.approx(float(r["tflops_per_gpu"]), abs=0.05)
    assert tflops(2 * int(r["seq_len"])) > 2 * float(r["tflops_per_gpu"])  # 4096 is ruled out
    assert "5523.5" in r["notes"] and "236.4" in r["notes"] and r["value_primary"] == "5523.5"


def test_seer_reads_every_row(rows) -> None:
    results, not_predicted = validate_all(CSV)
    assert not not_predicted
    assert {res.row_id for res in results} == {r["row_id"] for r in rows}
