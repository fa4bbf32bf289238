"""The demo page's content: a headline that answers from the run's own files, labels instead
of raw keys, no Python containers in cells, links only to files that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

from starfabric.report.demo_page import demo_report, headline, label

SUMMARY = {
    "fornax manager": {"mgmt_cpu_s": 0.78, "software_bytes_per_peak_session": 6.8,
                       "peak_sessions": 9000, "wall_s": 3.0},
    "fornax vs baselines": {"storage_ratio (Fornax / OVS-like)": 3.1e-5,
                            "cpu_ratio (Fornax / OVS-like)": 0.0048,
                            "zero_drop_cps_ratio (Fornax / OVS-like)": 3.0},
    "astral seer": {"iteration_s": 8.0, "trace": "seer_timeline.json"},
    "astral monitor": {"injected": ["link_crc@leaf3"], "reported": ["link_crc@leaf3"],
                       "top1_correct": True, "localize_s": 0.4,
                       "diagnosis": {"causes": [{"fault": "link_crc"}], "meta": {"a": {"b": 1}}}},
}  # fmt: skip


def _write(out: Path) -> None:
    rows = [
        {"design": d, "workload": w, "feasible": True, "polarized": False, "time_ms": t}
        for d, w, t in (("astral", "dp-allreduce", 10.0), ("fat-tree", "dp-allreduce", 12.0),
                        ("astral", "alltoall", 5.0), ("rail-only", "alltoall", 9.0))
    ]  # fmt: skip
    (out / "astral_network.json").write_text(json.dumps({"compare": rows}))
    (out / "seer_prediction.json").write_text(json.dumps({
        "iteration_s": 8.0, "mfu": 0.41, "model": "llama-3.1-8b", "gpus": 64, "gpu": "H100",
        "layout": {"tp": 8, "pp": 2, "dp": 4, "micro_batches": 16},
        "breakdown_s": {"compute": 5.0, "tp": 1.0, "dp": 1.0, "bubble": 0.5, "recompute": 0.5},
        "memory_gib": {"weights": 10.0, "activations": 20.0, "total": 40.0, "capacity": 80.0,
                       "stage": 0},
    }))  # fmt: skip
    (out / "seer_validation.json").write_text(json.dumps({
        "rows": [{"row_id": "a"}, {"row_id": "b"}], "not_predicted": [],
        "mean_abs_error": 0.035, "max_abs_error": 0.083,
    }))  # fmt: skip


def test_headline_answers_the_four_questions(tmp_path: Path) -> None:
    _write(tmp_path)
    h = dict(headline(tmp_path, SUMMARY))
    assert len(h) == 4
    assert "3.1e-05×" in h["Does Fornax beat the software-centric managers?"]
    assert (
        "DP all-reduce, ECMP: astral fastest (10.00 ms), then fat-tree 12.00 ms"
        in (h["Does Astral's design win?"])
    )
    assert "off by 3.5% on average, 8.3% at most" in h["How accurate is Seer?"]
    assert "MFU 41.0%" in h["How accurate is Seer?"]
    assert "fault found" in h["Did the monitor find the faults?"]


def test_page_has_labels_not_raw_keys_or_containers(tmp_path: Path) -> None:
    _write(tmp_path)
    page = demo_report(tmp_path, SUMMARY, seed=3).render()
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert "management CPU, excluding JIT compilation (s)" in cells
    assert "software memory per peak session (B)" in cells
    assert not [c for c in cells if re.fullmatch(r"[a-z]+(_[a-z]+)+", c)], "a raw key"
    assert not [c for c in cells if c.startswith(("{", "[")) or "&#x27;:" in c], "a container"
    assert 'href="astral_network.json"' in page and 'href="chaos.json"' not in page
    assert 'href="seer_validation.json"' in page
    # Seer: compute, exposed communication per group, bubble, recompute, memory, in words
    for words in ("compute (forward and backward)", "exposed communication: tensor parallel (TP)",
                  "exposed communication: data parallel (gradient reduce, parameter gather)",
                  "pipeline bubble",
                  "recompute (activation recomputation)", "activations", "HBM capacity",
                  "TP 8 · PP 2 · DP 4"):  # fmt: skip
        assert words in cells, words
    assert "stage" not in cells  # the stage index is in the memory table's title, not a row


def test_label_units() -> None:
    assert label("time_ms") == "time (ms)" and label("busbw_gbps") == "busbw (GB/s)"


def test_tied_designs_are_reported_as_a_tie(tmp_path: Path) -> None:
    rows = [
        {"design": d, "workload": "alltoall", "feasible": f, "polarized": False, "time_ms": t}
        for d, t, f in (("astral", 125.39, True), ("rail-only", 125.40, True),
                        ("fat-tree", 150.8, True), ("dual-plane", float("nan"), False))
    ]  # fmt: skip
    (tmp_path / "astral_network.json").write_text(json.dumps({"compare": rows}))
    h = dict(headline(tmp_path, {}))["Does Astral's design win?"]
    assert "all-to-all, ECMP: astral and rail-only tie for fastest (125.39 ms)" in h
    assert "then fat-tree 150.80 ms" in h and "dual-plane" in h.split("(designs compared")[1]
    page = demo_report(tmp_path, {"astral network": {"gpus": 16}}, seed=1).render()
    assert "infeasible" in page and "dual-plane" in page


def test_headline_says_whose_ovs_calibration_ran(tmp_path: Path) -> None:
    """Issue 29: the Fornax answer names the OVS-like model's calibration (built-in or a file)."""
    _write(tmp_path)
    base = {**SUMMARY["fornax vs baselines"],
            "OVS-like calibration": "calibration my.json: measured on vm (AMD EPYC, 2 CPUs)"}  # fmt: skip
    rows = dict(headline(tmp_path, {**SUMMARY, "fornax vs baselines": base}))
    fornax = next(v for k, v in rows.items() if "Fornax" in k or "fornax" in k)
    assert "(OVS-like model: calibration my.json: measured on vm" in fornax
    assert label("OVS-like calibration") != "OVS-like calibration"
