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
        for d, w, t in (("astral", "dp_allreduce", 10.0), ("fat-tree", "dp_allreduce", 12.0),
                        ("astral", "alltoall", 5.0), ("rail-only", "alltoall", 9.0))
    ]  # fmt: skip
    (out / "astral_network.json").write_text(json.dumps({"compare": rows}))
    (out / "seer_prediction.json").write_text(json.dumps({
        "iteration_s": 8.0, "mfu": 0.41, "breakdown_s": {"compute_s": 6.0, "dp_exposed_s": 2.0},
        "memory_gib": {"weights": 10.0, "total": 40.0},
    }))  # fmt: skip


def test_headline_answers_the_four_questions(tmp_path: Path) -> None:
    _write(tmp_path)
    h = dict(headline(tmp_path, SUMMARY))
    assert len(h) == 4
    assert "3.1e-05×" in h["Does Fornax beat the software-centric managers?"]
    assert "dp_allreduce: astral fastest (10.00 ms)" in h["Does Astral's design win?"]
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
    assert "Seer breakdown" in page and "compute (s)" in page


def test_label_units() -> None:
    assert label("time_ms") == "time (ms)" and label("busbw_gbps") == "busbw (GB/s)"
